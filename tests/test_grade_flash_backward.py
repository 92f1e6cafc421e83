"""grade.flash_backward passes right backward kernels, written two ways, and rejects the stub, realistic
wrong kernels (each with its diagnosis on the scorecard) and right numbers that put P in memory."""
import functools
import importlib
import re

import pytest
import torch

from course_utils import grade
from course_utils.grade._card import FAILED
import lab_kernels_3_4 as k
from hinted import assert_names_hint


@functools.cache
def graded(right):
    """The grader's scorecard of a right answer, graded once for every test here that reads it (seconds each)."""
    return grade.flash_backward(right)


@pytest.mark.parametrize("right", [k.attention, k.attention_other_blocks])
def test_accepts_correct_kernels(right):
    g = graded(right)
    assert all(r.status != FAILED for r in g.card.rows)
    assert "✓" in repr(g)


# (wrong kernel, what its failed row says, the hint of lab4.flash_backward that row names)
@pytest.mark.parametrize("wrong, message, hint", [
    (k.attention_stub, "still the stub", 1),
    (k.fa_no_delta, r"dS is P·dP: the term − Δ, Δ = rowsum\(dO·O\), is missing", 2),
    (k.fa_no_p, "dS is dP − Δ without the factor P", 2),
    # a failure names only what is wrong, and says which of the other gradients are right
    (k.fa_no_scale, r"dK is √D = .* too large: the scale is missing.*\n\s*dQ has the same mistake\.\n\s*dV is right\.", 2),
    (k.fa_dq_no_scale, r"dQ is √D = .* too large.*\n\s*dV and dK are right\.", 2),
    (k.fa_no_causal_bwd, r"(?s)✗ fp16, causal.*the backward has no causal mask", 2),
    (k.fa_not_accumulated, r"dV holds the contribution of the last block of \d+ query rows alone: dv is assigned.*"
                           r"\n\s*dK has the same mistake\.\n\s*dQ is right\.", 1),
    # only dV assigned: dK, accumulated, is right, and the message says so
    (k.fa_dv_assigned, r"dV holds the contribution of the last block of \d+ query rows alone: dv is assigned in the "
                       r"loop over query blocks \(dv = \.\.\.\) instead of accumulated \(dv \+= .*\n\s*dK and dQ are right\.", 1),
    # swapped in the student's stores: the message points there, not at the launcher's return, which is given
    (k.fa_dk_dv_swapped, r"dK and dV are swapped.*at the end of bwd_dkdv_kernel, does the tl\.store at dk_ptr write dk, "
                         r"and the one at dv_ptr dv\?", 2),
    # S left unscaled: in fp16 exp(S − lse) overflows to inf and NaN, and the message names the scale (the backward
    # has no running max to blame); in fp32 the numbers are finite, all wrong, and recognised
    (k.fa_s_unscaled, r"(?s)✗ fp16, not causal.*are NaN .*where the answer is finite\. The backward keeps no running "
                      r"max.*Is S multiplied by scale = 1/√D before lse is subtracted", 2),
    (k.fa_s_unscaled, r"(?s)✗ fp32 at N = 40.*P is rebuilt from S without its scale.*\n\s*dK has the same mistake", 2),
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
    assert "Only the tail is wrong" not in card      # never said of a gradient wrong everywhere


def test_the_budget_is_in_the_unit_and_at_the_case_of_the_labs_count_cell():
    """The lab's Count cell prints bytes per head at its small case; the grader's budget row says the same thing
    in the same unit (it once printed 83,968 B per head beside a grader's "≤ 84 KiB", a 2-head total)."""
    import json
    from pathlib import Path
    fb = importlib.import_module("course_utils.grade.flash_backward")
    nb = json.loads(Path(__file__).parents[1].joinpath(
        "solutions/labs/lab4_flash_attention_backward.ipynb").read_text(encoding="utf-8"))
    source = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert f"SMALL = {fb.BUDGET_SHAPE}" in source and "B per head" in source
    g = graded(k.attention)
    row = next(r for r in g.card.rows if "bytes" in r.name)
    b, h, n, d = fb.BUDGET_SHAPE
    assert row.target.startswith(f"≤ {20 * 2 * n * d + 32 * n:,} B per head")
    assert re.fullmatch(r"3 launches, [\d,]+ B per head", row.measured), row.measured


def test_a_crashing_backward_is_a_row_not_an_exception(capsys):
    def backward(*args):
        raise ValueError("boom")
    with pytest.raises(grade.GradeFailed):
        grade.flash_backward(k._attention_with(backward))
    card = capsys.readouterr().out
    assert "raised ValueError: boom" in card
    # on a GPU the card stops after the bounds-checked replay; on the CPU it goes on (performance: not measured)
    assert "not measured" in card or torch.cuda.is_available()
