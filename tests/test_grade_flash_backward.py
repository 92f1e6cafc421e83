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


def _tf32(t, rounding):
    """fp32 t as a GPU's tensor cores read a tl.dot operand: 10 mantissa bits, the other 13 cut or rounded (apart from
    the grader's own rounding, so that this test checks it)."""
    half = {"cut": 0, "nearest": 1 << 12}[rounding]
    bits = t.contiguous().view(torch.int32)
    return ((bits + half) // (1 << 13) * (1 << 13)).view(torch.float32)


def _fp32_on_a_tf32_gpu(q, k, v, do, causal, rounding, scaled=True):
    """The lab's forward and backward in fp32 at N = 40 (one 64-row tile on a GPU), every tl.dot in TF32 as on an
    H100 or H200; scaled=False: S = QKᵀ in the backward, the scale forgotten."""
    def dot(a, b):
        return _tf32(a, rounding) @ _tf32(b, rounding)
    n, d = q.shape[-2:]
    scale = 1 / d ** 0.5
    keep = torch.ones(n, n, dtype=torch.bool).tril() if causal else torch.ones(n, n, dtype=torch.bool)
    s = (dot(q, k.transpose(-1, -2)) * scale).masked_fill(~keep, float("-inf"))
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    o = dot(p, v) / p.sum(-1, keepdim=True)
    lse = m + torch.log(p.sum(-1, keepdim=True))
    delta = (o * do).sum(-1, keepdim=True)
    qk = dot(q, k.transpose(-1, -2))
    p = torch.where(keep, torch.exp((qk * scale if scaled else qk) - lse), 0.0)
    ds = p * (dot(do, v.transpose(-1, -2)) - delta)
    return dot(ds, k) * scale, dot(ds.transpose(-1, -2), q) * scale, dot(p.transpose(-1, -2), do)


@pytest.mark.parametrize("rounding", ["cut", "nearest"])
def test_on_a_tf32_gpu_the_fp32_case_still_names_the_missing_scale(rounding):
    """On an H200 the fp32 row once said "all 1280 elements are wrong" for S left unscaled: its exponents are √D times
    the right ones, and TF32's error in them, through exp, is past the tolerance of the right answer. Emulated here
    (both ways a tensor core may read fp32): the right kernel passes, the mistake is named in every gradient."""
    fb = importlib.import_module("course_utils.grade.flash_backward")
    from course_utils.check._core import CheckFailed
    named = r"dV`: P is rebuilt from S without its scale.*\n\s*dK has the same mistake\.\n\s*dQ has the same mistake\.$"
    unnamed_exactly = 0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # N = 40: two pytest workers' thread pools on two cores only wait on each other
    try:
        for seed, causal in ((0, False), (1, True)):
            gen = torch.Generator().manual_seed(seed)
            q, k, v, do = (torch.randn(*fb.FP32_SHAPE, generator=gen) for _ in range(4))
            refs = fb.reference(q, k, v, do, causal)[1:]
            right = _fp32_on_a_tf32_gpu(q, k, v, do, causal, rounding)
            fb._judge_gradients(q, k, v, do, causal, right, refs, "right", gpu=True, tf32=True)
            wrong = _fp32_on_a_tf32_gpu(q, k, v, do, causal, rounding, scaled=False)
            with pytest.raises(CheckFailed) as e:
                fb._judge_gradients(q, k, v, do, causal, wrong, refs, "unscaled", gpu=True, tf32=True)
            assert re.search(named, str(e.value)), str(e.value)
            if rounding == "cut":   # compared with the mistake computed exactly, as the H200's grader did
                with pytest.raises(CheckFailed) as e:
                    fb._judge_gradients(q, k, v, do, causal, wrong, refs, "unscaled", gpu=True, tf32=False)
                unnamed_exactly += not re.search(named, str(e.value))
    finally:
        torch.set_num_threads(threads)
    # cutting the bits lowers every large exponent: these draws went unnamed there
    assert unnamed_exactly == 2 or rounding == "nearest", unnamed_exactly
