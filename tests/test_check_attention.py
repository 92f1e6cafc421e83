"""check.flash_attention passes right kernels written two ways and rejects the stub, realistic wrong kernels
(each with its diagnosis), plain PyTorch attention (right numbers, N×N bytes) and a causal kernel that loads
the tiles it masks away."""
import pytest

from course_utils import check
import attention_kernels as k
from hinted import assert_names_hint


@pytest.mark.parametrize("right", [k.flash_attention, k.flash_attention_other_tiles])
def test_accepts_correct_kernels(right):
    r = check.flash_attention(right)
    assert "✓" in repr(r) and r.traffic.launches == 1
    assert r.traffic.bytes == 4 * 1 * 2 * 96 * 32 * 2      # q, k, v read once and o written once, fp16


# (wrong kernel, what the message says, its diagnosis key, the hint of `flash_attention` that key points to)
@pytest.mark.parametrize("wrong, message, key, hint", [
    (k.flash_attention_stub, "still the stub", "stub", 1),
    (k.no_rescale_acc, r"accumulator is not rescaled \(this matches K/V tiles of 32\)", "no-rescale-acc", 2),
    (k.no_rescale_acc_16, r"accumulator is not rescaled \(this matches K/V tiles of 16\)", "no-rescale-acc", 2),
    (k.no_rescale_l, "normaliser l is not rescaled", "no-rescale-l", 2),
    (k.no_scale, "scores are never scaled", "scale", 3),
    (k.scale_by_d, "divided by D; the scale is 1/√D", "scale", 3),
    (k.no_divide, "never divided by the normaliser", "no-divide", 2),
    (k.causal_ignored, "causal mask is missing", "causal-missing", 3),
    (k.diagonal_masked, r"(?s)causal mask is off by one: it hides key i from query i.*NaN", "causal-off-by-one", 3),
    (k.sees_next, "causal mask is off by one: query i also sees key i \\+ 1", "causal-off-by-one", 3),
    (k.tail_unmasked, r"keys past the end \(N = 67 is not a multiple of your K/V tile of 32\) count in the softmax",
     "keys-past-n", 3),
    (k.no_max, r"(?s)scores near ±100.*NaN.*running max subtracted", "no-max", 2),
    (k.fp16_acc, r"(?s)v near 1000.*inf.*past fp16's largest number", "fp16-acc", 2),
    (k.naive_torch, r"(?s)right numbers but moved .* bytes.*tensors of N×N = 96×96", "bytes", 1),
    (k.sdpa, "with PyTorch .*not with a Triton kernel", "pytorch", 1),
    (k.exp2_no_log2e, "tl.math.exp2 but log2\\(e\\) is not folded into the scale", "exp-base", 3),
    (k.no_skip, r"with causal=True it requested .* bytes of loads, 100%", "no-skip", 3),
    (lambda q, k_, v, causal=False: None, "returned None", "return", 1),
])
def test_rejects(wrong, message, key, hint):
    with pytest.raises(check.CheckFailed, match=message) as e:
        check.flash_attention(wrong)
    # the diagnosis, and the last line of the message: the hint that addresses it
    assert e.value.diagnosis == key
    assert_names_hint(e.value, "flash_attention", hint)


def test_rejects_a_function_passed_as_its_result():
    with pytest.raises(check.CheckFailed, match=r"takes your function itself"):
        check.flash_attention(None)
