"""check.online_softmax passes right kernels (other block sizes, per-lane running statistics) and rejects
the stub, the usual mistakes of the online recurrence (each with its diagnosis), a one-block kernel that
cannot hold a long row, and right numbers that read x three times."""
import pytest

from course_utils import check
import online_kernels as k


@pytest.mark.parametrize("right", [k.online_softmax, k.online_softmax_2048, k.online_softmax_4096,
                                   k.online_softmax_lanes])
def test_online_softmax_accepts_correct_kernels(right):
    r = check.online_softmax(right)
    assert "✓" in repr(r) and r.traffic.launches == 1
    x_bytes = 4 * 4 * 3000
    assert r.traffic.requested_read == 2 * x_bytes and r.traffic.requested_written == x_bytes
    assert r.traffic.bytes == 2 * x_bytes       # distinct bytes: x once, y once


@pytest.mark.parametrize("wrong, message", [
    (k.online_softmax_stub, "still the stub"),
    (k.not_rescaled, r"float32 4x3000.*running sum is not rescaled when the max changes.*exp\(m_old − m_new\)"),
    (k.inverted, r"every element is NaN.*inverted exp\(m_new − m_old\)"),
    (k.nan_chunk, r"start with a whole block of −inf.*NaN.*m_safe = tl.where"),
    (k.pad_zero, r"padded lanes past the end of the row load 0.*here 72 per row"),
    (k.last_max, r"walk 2 subtracts the max of the last block"),
    (k.m_from_zero, r"(?s)rows of equal values.*NaN where the answer is finite.*running max starts at 0"),
    (k.no_max, r"(?s)float32 huge values.*NaN.*where the answer is finite.*Subtract the running max"),
    (k.one_block, r"(?s)longer than any block.*One block per row cannot hold this row"),
    (k.one_block_capped, r"float32 3x5000.*only the first 4,096 columns of each row were written.*needs a loop"),
    (k.three_pass, r"read x 3.00 times.*budget is 2 reads \+ 1 write.*Three walks"),
    (k.eager, r"with PyTorch \(aten._softmax\)"),
    (lambda x: None, "returned None"),
    (lambda x: x.clone(), r"are wrong.*each should sum to 1"),
])
def test_online_softmax_rejects(wrong, message):
    with pytest.raises(check.CheckFailed, match=message):
        check.online_softmax(wrong)
