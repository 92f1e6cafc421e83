"""grade.cross_entropy passes right kernels, written two ways, and rejects the stub, realistic wrong kernels
(each with its diagnosis on the scorecard) and right numbers that move the probabilities through memory."""
import pytest
import torch

from course_utils import grade
from course_utils.grade._card import FAILED
import lab_kernels_3_4 as k



@pytest.mark.parametrize("right", [k.cross_entropy, k.cross_entropy_rows])
def test_accepts_correct_kernels(right):
    g = grade.cross_entropy(right)
    assert all(r.status != FAILED for r in g.card.rows)
    assert "✓" in repr(g)
    budget = [r for r in g.card.rows if r.name.startswith("fp32 bytes")][0]
    assert budget.measured.startswith(("4 launches, 32.", "5 launches, 32."))   # 32 KiB: logits in, gradient out


def _failures(fn, capsys):
    with pytest.raises(grade.GradeFailed) as e:
        grade.cross_entropy(fn)
    out = capsys.readouterr().out
    return str(e.value), out


@pytest.mark.parametrize("wrong, message", [
    (k.cross_entropy_stub, "still the stub"),
    (k.ce_no_max, r"(?s)logits near 100.*overflow: exp of a logit near 100.*Subtract the row's maximum"),
    (k.ce_mean_over_all, "the mean divides by all .* rows, the ignored ones included"),
    (k.ce_grad_no_mean, r"the gradient is \d+× too large: it is softmax − one_hot without the 1/n"),
    (k.ce_ignored_grad, "the ignored rows have a gradient"),
    (k.ce_no_one_hot, "the gradient is the softmax alone"),
    (k.ce_unmasked_target, r"(?s)Out-of-bounds load.*the load of logits\[row, target\] in an ignored row"),
    (k.ce_probs_in_memory, r"(?s)bytes.*an M×V intermediate goes to memory \(the probabilities"),
    (k.ce_eager, r"(?s)bytes.*no Triton kernel ran"),
    (k.ce_fixed_ignore, r"(?s)ignore_index passed as an argument.*this one passes −1. Is ignore_index taken"),
    (lambda x, t, ignore_index=-100: None, "returned None"),
    (lambda x, t, ignore_index=-100: k.cross_entropy(x, t, ignore_index)[1], "returned one tensor"),
])
def test_rejects(wrong, message, capsys):
    summary, card = _failures(wrong, capsys)
    assert "✗" in card
    import re
    assert re.search(message, card), card


def test_a_crash_is_a_row_not_an_exception(capsys):
    def crashes(x, t, ignore_index=-100):
        raise ValueError("boom")
    summary, card = _failures(crashes, capsys)
    assert "raised ValueError: boom" in card
    # on the CPU the card goes on to the performance rows (not measured); on a GPU it stops after the
    # bounds-checked replay, so that a kernel which crashed never reaches the real launch
    assert "not measured" in card or torch.cuda.is_available()
