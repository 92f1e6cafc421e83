"""check.add_layernorm and check.add_rmsnorm pass right kernels, written two ways, and reject the stub,
realistic wrong kernels (each with its diagnosis) and right numbers that cost too many trips."""
import pytest

from course_utils import check
import norm_kernels as k
from hinted import assert_names_hint


@pytest.mark.parametrize("right", [k.add_layernorm, k.add_layernorm_loop])
def test_add_layernorm_accepts_correct_kernels(right):
    r = check.add_layernorm(right)
    assert "✓" in repr(r) and r.traffic.launches == 1
    assert r.traffic.bytes == 4 * (4 * 16 * 256 + 2 * 256)


# Each wrong kernel runs through the checker once: the row gives the message and, where the failure points to a
# hint, its diagnosis and the hint of lesson 05 that addresses it (None: not asserted).
@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    (k.add_layernorm_stub, "still the stub", "stub", 1),
    (k.ln_unbiased, r"divides by N − 1 \(unbiased\)", "unbiased", 3),
    (k.ln_eps_outside, "eps is added after the square root", "eps-outside", 3),
    (k.ln_swapped, "weight and bias are swapped", "weight-bias", 3),
    (k.ln_padded, r"masked lanes past the end of the row count in the variance.*tl.where\(mask", "masked-lanes", 2),
    (k.ln_norm_x, "y is the normalised x", "normalised-x", 2),
    (k.ln_h_is_x, "second output h.*h equals x", "h-output", 2),
    (k.ln_no_weight, "weight is never applied", "weight-bias", 3),
    (k.ln_naive_var, r"(?s)first output y.*mean\(h²\) − mean\(h\)²\?", "cancellation", 3),
    (k.ln_y_only, "returned one tensor", "return", 1),
    (k.ln_eager, "2 launches where 1 should do: this is not fused", "launches", 1),
    (lambda x, r, w, b: None, "returned None", None, None),
])
def test_add_layernorm_rejects(wrong, message, diagnosis, hint):
    """Also checks the failure's diagnosis and the hint of lesson 05 it names, where the row gives them."""
    with pytest.raises(check.CheckFailed, match=message) as e:
        check.add_layernorm(wrong)
    if diagnosis is not None:
        assert e.value.diagnosis == diagnosis
    if hint is not None:
        assert_names_hint(e.value, "add_layernorm", hint)


def test_add_rmsnorm_accepts_a_correct_kernel():
    r = check.add_rmsnorm(k.add_rmsnorm)
    assert r.traffic.launches == 1 and r.traffic.bytes == 4 * (4 * 16 * 256 + 256)


@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    (k.rms_eps_outside, "eps is added after the square root", "eps-outside", 2),
    (k.rms_centred, "the mean is subtracted first", "centred", 2),
    (k.rms_norm_x, "RMS-normalised x", "normalised-x", 1),
    (k.rms_eager, "launches where 1 should do", "launches", 1),
    (k.add_rmsnorm_stub, "still the stub", "stub", 1),
])
def test_add_rmsnorm_rejects(wrong, message, diagnosis, hint):
    """Also checks the failure's diagnosis and the hint of lesson 05 it names."""
    with pytest.raises(check.CheckFailed, match=message) as e:
        check.add_rmsnorm(wrong)
    assert e.value.diagnosis == diagnosis
    assert_names_hint(e.value, "add_rmsnorm", hint)
