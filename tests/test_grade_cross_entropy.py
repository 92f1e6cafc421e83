"""grade.cross_entropy passes right kernels, written two ways, and rejects the stub, realistic wrong kernels
(each with its diagnosis on the scorecard) and right numbers that move the probabilities through memory."""
import pytest
import torch

from course_utils import grade
from course_utils.grade._card import FAILED
import lab_kernels_3_4 as k
from hinted import assert_names_hint



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


# (wrong kernel, what its failed row says, the hint of lab3.cross_entropy that row names; None: none)
@pytest.mark.parametrize("wrong, message, hint", [
    (k.cross_entropy_stub, "still the stub", 1),
    (k.ce_no_max, r"(?s)logits near 100.*overflow: exp of a logit near 100.*Subtract the row's maximum", 1),
    (k.ce_mean_over_all, "the mean divides by all .* rows, the ignored ones included", 2),
    (k.ce_grad_no_mean, r"the gradient is \d+× too large: it is softmax − one_hot without the 1/n", 2),
    (k.ce_ignored_grad, "the ignored rows have a gradient", 2),
    (k.ce_no_one_hot, "the gradient is the softmax alone", 2),
    (k.ce_unmasked_target, r"(?s)Out-of-bounds load.*the load of logits\[row, target\] in an ignored row", 2),
    (k.ce_probs_in_memory, r"(?s)bytes.*an M×V intermediate goes to memory \(the probabilities", 1),
    (k.ce_eager, r"(?s)bytes.*no Triton kernel ran", 1),
    (k.ce_fixed_ignore, r"(?s)ignore_index = -1, passed as an argument.*this one passes −1. Is ignore_index taken", 2),
    (lambda x, t, ignore_index=-100: None, "returned None", None),
    (lambda x, t, ignore_index=-100: k.cross_entropy(x, t, ignore_index)[1], "returned one tensor", None),
])
def test_rejects(wrong, message, hint, capsys):
    with pytest.raises(grade.GradeFailed) as e:
        grade.cross_entropy(wrong)
    card = capsys.readouterr().out
    assert "✗" in card
    import re
    assert re.search(message, card), card
    if hint is not None:   # the row that failed ends by naming the hint that addresses its diagnosis
        row = next(r for r in e.value.card.rows
                   if r.status == FAILED and re.search(message, f"{r.name}\n{r.diagnosis}"))
        assert_names_hint(row.diagnosis, "lab3.cross_entropy", hint)


def test_a_crash_is_a_row_not_an_exception(capsys):
    def crashes(x, t, ignore_index=-100):
        raise ValueError("boom")
    summary, card = _failures(crashes, capsys)
    assert "raised ValueError: boom" in card
    # on the CPU the card goes on to the performance rows (not measured); on a GPU it stops after the
    # bounds-checked replay, so that a kernel which crashed never reaches the real launch
    assert "not measured" in card or torch.cuda.is_available()
