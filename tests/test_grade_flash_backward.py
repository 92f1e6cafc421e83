"""grade.flash_backward passes right backward kernels, written two ways, and rejects the stub, realistic
wrong kernels (each with its diagnosis on the scorecard) and right numbers that put P in memory."""
import re

import pytest
import torch

from course_utils import grade
from course_utils.grade._card import FAILED
import lab_kernels_3_4 as k
from hinted import assert_names_hint


@pytest.mark.parametrize("right", [k.attention, k.attention_other_blocks])
def test_accepts_correct_kernels(right):
    g = grade.flash_backward(right)
    assert all(r.status != FAILED for r in g.card.rows)
    assert "✓" in repr(g)


# (wrong kernel, what its failed row says, the hint of lab4.flash_backward that row names)
@pytest.mark.parametrize("wrong, message, hint", [
    (k.attention_stub, "still the stub", 1),
    (k.fa_no_delta, r"dS is P·dP: the term − Δ, Δ = rowsum\(dO·O\), is missing", 2),
    (k.fa_no_p, "dS is dP − Δ without the factor P", 2),
    (k.fa_no_scale, r"dK is √D = .* too large: the scale is missing.*check that one too", 2),
    (k.fa_dq_no_scale, "dQ is √D = .* too large", 2),
    (k.fa_no_causal_bwd, r"(?s)✗ fp16, causal.*the backward has no causal mask", 2),
    (k.fa_not_accumulated, r"dK and dV hold the contribution of the last block of \d+ query rows alone", 1),
    (k.fa_dk_dv_swapped, "dK and dV are swapped", 2),
    (k.fa_materialised, r"(?s)An N×N matrix per head .* seems to go to memory", 1),
    (k.fa_sdpa, "no Triton kernel ran in the backward", 1),
])
def test_rejects(wrong, message, hint, capsys):
    with pytest.raises(grade.GradeFailed) as e:
        grade.flash_backward(wrong)
    card = capsys.readouterr().out
    assert re.search(message, card), card
    # the row that failed ends by naming the hint that addresses its diagnosis
    row = next(r for r in e.value.card.rows
               if r.status == FAILED and re.search(message.replace("✗ ", ""), f"{r.name}\n{r.diagnosis}"))
    assert_names_hint(row.diagnosis, "lab4.flash_backward", hint)


def test_a_crashing_backward_is_a_row_not_an_exception(capsys):
    def backward(*args):
        raise ValueError("boom")
    with pytest.raises(grade.GradeFailed):
        grade.flash_backward(k._attention_with(backward))
    card = capsys.readouterr().out
    assert "raised ValueError: boom" in card
    # on a GPU the card stops after the bounds-checked replay; on the CPU it goes on (performance: not measured)
    assert "not measured" in card or torch.cuda.is_available()
