"""check.softmax passes right kernels, written four ways, and rejects the stub, realistic wrong kernels
(each with its diagnosis) and right numbers that cost too many launches or bytes."""
import pytest

from course_utils import check, hints
import softmax_kernels as k
from hinted import assert_names_hint


@pytest.mark.parametrize("right", [k.softmax, k.softmax_8_warps, k.softmax_4_rows, k.softmax_persistent,
                                   k.softmax_loop])
def test_softmax_accepts_correct_kernels(right):
    r = check.softmax(right)
    assert "✓" in repr(r) and r.traffic.launches == 1
    assert r.traffic.bytes == 4 * 2 * 16 * 300


# Each wrong kernel runs through the checker once: the row holds its message and, where it has one, the
# diagnosis and the hint the failure names (None: not asserted).
@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    (k.softmax_stub, "still the stub", "stub", 1),
    (k.sm_no_max, r"(?s)are NaN.*where the answer is finite. exp\(\) overflowed.*Subtract each row's max first.*rows near 100",
     "no-max", 3),
    (k.sm_pad_zero, r"(?s)masked lanes past the end of the row count as 0: here 32 of them.*other=-float\('inf'\).*\(8, 96\)",
     "pad-zero", 2),
    (k.sm_pad_zero_max_only, r"(?s)underflowed to 0.*Did a masked lane, loaded as 0, win the max.*near −120",
     "pad-zero", 2),
    (k.sm_max_in_numerator_only, r"the numerator subtracts the max but the sum does not", "max-one-side", 3),
    (k.sm_not_divided, r"(?s)not normalised.*sum to between", "not-divided", 3),
    (k.sm_unmasked, r"Out-of-bounds load in kernel `_row_kernel`.*is the tail masked", "out-of-bounds", 2),
    # the case differs between the interpreter and a GPU (which stops no read past the tensor), the words do not
    (k.sm_row_block, r"program \d+ read its row at elements \d+\.\.\d+.*placed \d+ elements apart.*row r starts at "
                     r"r · N: row \d+ at \d+", "row-start", 1),
    (k.sm_axis_1, r"(?s)(axis 1 out of bounds|invalid axis 1).*Hint: the reduction names an axis the value does not have.*its only "
                  r"axis is 0(?!.*constexpr`)", "axis", 3),
    (k.sm_columns, r"each column of every group of 4 rows is normalised.*axis=1", "columns", 1),
    (k.sm_flat_blocks, r"(each block of 256 consecutive elements of the flattened x|each run of 2 rows) is normalised",
     "not-per-row", 1),
    (k.sm_two_kernels, r"2 launches where 1 should do: this is not fused", "launches", 1),
    (k.sm_eager_chain, r"5 launches where 1 should do", None, None),
    (k.sm_scratch, r"moved 76800 bytes; the budget is 38400", "bytes", 1),
    (k.sm_torch, r"with PyTorch \(aten._softmax\), not with a Triton kernel", "pytorch", 1),
    (k.sm_fp32_out, r"returned torch.float32 for torch.float16 inputs", "dtype", 3),
    (lambda x: None, "returned None", None, None),
    ("softmax", r"takes your function itself", None, None),
])
def test_softmax_rejects(wrong, message, diagnosis, hint):
    # also checks that each failure names the hint that addresses its diagnosis
    with pytest.raises(check.CheckFailed, match=message) as e:
        check.softmax(wrong)
    if diagnosis is not None:
        assert e.value.diagnosis == diagnosis
        assert_names_hint(e.value, "softmax", hint)


@pytest.mark.parametrize("text", ["axis 1 out of bounds for shape ['constexpr[128]']",   # the interpreter's
                                  "invalid axis 1. Expected -1 <= axis < 1"])             # the compiler's
def test_a_reduction_along_a_missing_axis_is_not_sent_to_constexpr(text):
    said = hints.explain(ValueError(text))
    assert said.startswith("the reduction names an axis") and "declare it" not in said
