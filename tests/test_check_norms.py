"""check.add_layernorm and check.add_rmsnorm pass right kernels, written two ways, and reject the stub,
realistic wrong kernels (each with its diagnosis) and right numbers that cost too many trips."""
import functools
import re

import pytest

from course_utils import check, hints
import norm_kernels as k
from hinted import assert_names_hint


@functools.cache
def _verdict(checker: str, wrong) -> check.CheckFailed:
    """The failure of one wrong kernel, run through its checker once for every test that reads it."""
    with pytest.raises(check.CheckFailed) as e:
        getattr(check, checker)(wrong)
    return e.value


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
    (k.ln_padded, r"masked lanes past the end of the row count in the variance. Loaded with other=0\.0 they hold 0 "
                  r"\(without other= the language leaves them undefined\).*tl.where\(mask", "masked-lanes", 2),
    (k.ln_fp16_sums, r"(?s)fp16 4 × 1000, has rows of values near 200: they sum to about 200,000, past 65,504.*"
                     r"Is the sum kept in fp16\?.*\.to\(tl\.float32\)", "fp16-sum", 2),
    # the case differs between the interpreter and a GPU (which stops no read past the tensor), the words do not
    (k.ln_row_block, r"program \d+ read its row at elements \d+\.\.\d+.*placed \d+ elements apart.*row r starts at "
                     r"r · N: row \d+ at \d+", "row-start", 1),
    (k.ln_w_row, r"weight and bias are indexed by the row.*w_ptr \+ cols", "weight-index", 3),
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
    failed = _verdict("add_layernorm", wrong)
    assert re.search(message, str(failed)), str(failed)
    if diagnosis is not None:
        assert failed.diagnosis == diagnosis
    if hint is not None:
        assert_names_hint(failed, "add_layernorm", hint)


def test_add_rmsnorm_accepts_a_correct_kernel():
    r = check.add_rmsnorm(k.add_rmsnorm)
    assert r.traffic.launches == 1 and r.traffic.bytes == 4 * (4 * 16 * 256 + 256)


@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    (k.rms_eps_outside, "eps is added after the square root", "eps-outside", 2),
    (k.rms_centred, "the mean is subtracted first", "centred", 2),
    (k.rms_norm_x, "RMS-normalised x", "normalised-x", 1),
    (k.rms_eager, "launches where 1 should do", "launches", 1),
    (k.add_rmsnorm_stub, "still the stub", "stub", 1),
    (k.rms_fp16_sums, r"(?s)y is 0 everywhere.*fp16 4 × 1000.*their squares sum to about 40,000,000, past 65,504.*"
                      r"h / inf is 0.*\.to\(tl\.float32\)", "fp16-sum", 2),
    (k.rms_w_row_masked, r"Mask argument cannot be block type.*\nweight has one value per column, not per row: it is "
                         r"loaded at the row's column offsets, w_ptr \+ cols", "weight-index", 2),
])
def test_add_rmsnorm_rejects(wrong, message, diagnosis, hint):
    """Also checks the failure's diagnosis and the hint of lesson 05 it names."""
    failed = _verdict("add_rmsnorm", wrong)
    assert re.search(message, str(failed)), str(failed)
    assert failed.diagnosis == diagnosis
    assert_names_hint(failed, "add_rmsnorm", hint)


@pytest.mark.parametrize("checker, wrong", [("add_layernorm", k.ln_fp16_sums), ("add_rmsnorm", k.rms_fp16_sums)])
def test_an_fp16_sum_that_overflows_is_not_blamed_on_anything_else(checker, wrong):
    """Neither the general NaN guess (inf − inf, an exp) nor LayerNorm's cancellation (RMSNorm has no mean to
    subtract): the sum kept in fp16 is the cause."""
    text = str(_verdict(checker, wrong))
    assert "inf − inf" not in text and "Subtract the mean" not in text and "mean(h²) − mean(h)²" not in text
    assert "off by the same factor" not in text


def test_a_load_of_one_address_with_a_blocks_mask_is_explained():
    """Triton's words for tl.load(w_ptr + row, mask=mask), anywhere a check does not catch it first."""
    said = hints.explain(ValueError("Mask argument cannot be block type if pointer argument is not a block"))
    assert "single address" in said and "tl.arange" in said
