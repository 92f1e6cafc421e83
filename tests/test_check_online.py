"""check.online_softmax passes right kernels (other block sizes, per-lane running statistics) and rejects
the stub, the usual mistakes of the online recurrence (each with its diagnosis and the hint that
addresses it), a one-block kernel that cannot hold a long row, right numbers that read x three times, and
PyTorch's own softmax."""
import pytest

from course_utils import check
import online_kernels as k
from hinted import assert_names_hint


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
    (k.lanes_unguarded, r"float32 7x37`: every element is NaN.*yet one row of 65,536 ordinary values.*lanes past the end"),
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


# (wrong kernel, its diagnosis key, the hint that addresses it): each failure ends by naming its hint
@pytest.mark.parametrize("wrong, key, hint", [
    (k.online_softmax_stub, "stub", 1),
    (k.one_block, "one-block", 1),
    (k.eager, "pytorch", 1),
    (k.not_rescaled, "no-rescale", 2),
    (k.inverted, "inverted-rescale", 2),
    (k.last_max, "last-max", 2),
    (k.no_max, "no-max", 2),
    (k.three_pass, "bytes", 2),
    (k.lanes_unguarded, "lane-inf", 3),
    (k.nan_chunk, "inf-guard", 3),
    (k.pad_zero, "pad-zero", 3),
    (k.m_from_zero, "m-from-zero", 3),
])
def test_online_softmax_failures_name_their_hint(wrong, key, hint):
    with pytest.raises(check.CheckFailed) as e:
        check.online_softmax(wrong)
    assert e.value.diagnosis == key
    assert_names_hint(e.value, "online_softmax", hint)


def test_nan_causes_are_told_apart_by_probes():
    """Both kernels give all-NaN rows on short ragged rows; only the inverted rescale is NaN on a row that
    fills every lane of every block, so each gets its own diagnosis, not the first guess that fits."""
    with pytest.raises(check.CheckFailed) as lanes:
        check.online_softmax(k.lanes_unguarded)
    with pytest.raises(check.CheckFailed) as inverted:
        check.online_softmax(k.inverted)
    assert "inverted" not in str(lanes.value) and lanes.value.diagnosis == "lane-inf"
    assert "lanes past the end" not in str(inverted.value) and inverted.value.diagnosis == "inverted-rescale"
