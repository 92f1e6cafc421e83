"""Lab 4's grader: the FlashAttention backward, dQ, dK, dV recomputed from the saved log-sum-exp, behind
a torch.autograd.Function whose forward the lab gives.

    o = fn(q, k, v, causal)       q, k, v: (B, H, N, D), fp16 or fp32; scale 1/sqrt(D)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)

The references are SDPA's gradients computed in float64; the realistic wrong answers are computed from
the same float64 pieces (P, dP, the row sums Δ = rowsum(dO·O)) with one mistake each, and one of them also as
a GPU's tensor cores compute it in fp32 (see _unscaled_scores)."""
from __future__ import annotations

import math
import torch
import torch.nn.functional as F

from .. import bench, targets, trips
from ..check._core import CheckFailed, compare, compare_each, fail, listed
from ..environment import DEVICE, INTERPRET, ON_GPU, compute_capability, pick
from ..targets import TARGETS
from ._card import Scorecard

__all__ = ["flash_backward"]
EXERCISE = "lab4.flash_backward"     # the name of the lab's hints: a failed row names the one that helps

# (B, H, N, D): ordinary shapes first, then ragged N, then one query. A GPU adds N = 300 at D = 64 and 128:
# there the 64-row tiles a GPU kernel uses need several blocks too (dK, dV accumulated across them)
_SHAPES = pick(gpu=[(2, 3, 300, 64), (1, 2, 200, 128)], cpu=[]) + [(1, 2, 64, 32), (2, 1, 48, 16), (1, 1, 37, 16),
                                                                  (1, 1, 1, 16)]
# Targets from an H100 (torch 2.11, triton 3.6; docs/instructor.md): SDPA's flash backward time over the
# lab's solution's, fp16, B·H = 4·16, N = 4,096: 0.98x and 0.94x (two runs) at D = 64 causal (1.59 ms
# against 1.56 ms), 1.12x and 1.11x at D = 128 not causal (4.23 ms against 4.75 ms); over N = 1k to 8k,
# D = 64/128, causal and not, from 0.86x to 1.39x. The bar, 0.8x, sits below the slowest of those.
PERF_CASES = [(4, 16, 4096, 64, True), (4, 16, 4096, 128, False)]


FP32_SHAPE = (1, 2, 40, 16)
# fp16, not causal: the backward's launches and bytes, counted at the lab's small case, whose Count cell shows the
# same budget and the solution's bytes in the same unit, bytes per head
BUDGET_SHAPE = (1, 2, 64, 32)


# What the grader tries, named as the contract names it (tests/test_contracts.py): (name, what it is)
CASES = (
    (f"N = {listed((s[2] for s in _SHAPES), unique=True)}", "fp16, (B, H, N, D) = " + ", ".join(map(str, _SHAPES))),
    (f"D = {listed((s[3] for s in _SHAPES), unique=True)}", "the head dimensions of those shapes"),
    ("causal and not", "every fp16 shape both ways, and the fp32 case"),
    (f"fp32 at N = {FP32_SHAPE[2]}", f"(B, H, N, D) = {FP32_SHAPE}"),
    (f"B·H = {BUDGET_SHAPE[0]}·{BUDGET_SHAPE[1]}, N = {BUDGET_SHAPE[2]}, D = {BUDGET_SHAPE[3]}",
     "fp16, not causal: the launches and bytes of one backward are counted"),
)


def _inputs(shape, dtype, gen):
    q, k, v, do = (torch.randn(*shape, generator=gen).to(dtype).to(DEVICE) for _ in range(4))
    return q, k, v, do


def _pieces(q, k, v, do, causal, *, mask_in_backward=True):
    """float64 P (from the forward's lse), dP, Δ and the causal mask."""
    qd, kd, vd, dod = (t.double() for t in (q, k, v, do))
    n, d = q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    s = qd @ kd.transpose(-1, -2) * scale
    keep = torch.ones(n, n, dtype=torch.bool, device=q.device)
    if causal:
        keep = keep.tril()
    lse = torch.logsumexp(s.masked_fill(~keep, float("-inf")), dim=-1, keepdim=True)
    p = torch.exp(s - lse)
    if mask_in_backward:
        p = p.masked_fill(~keep, 0.0)
    o = torch.exp(s - lse).masked_fill(~keep, 0.0) @ vd
    dp = dod @ vd.transpose(-1, -2)
    delta = (dod * o).sum(-1, keepdim=True)
    return qd, kd, dod, p, dp, delta, keep, scale, o


def _grads(qd, kd, dod, p, ds, scale):
    return ds @ kd * scale, ds.transpose(-1, -2) @ qd * scale, p.transpose(-1, -2) @ dod


def reference(q, k, v, do, causal):
    """(o, dq, dk, dv) in float64."""
    qd, kd, dod, p, dp, delta, keep, scale, o = _pieces(q, k, v, do, causal)
    return (o, *_grads(qd, kd, dod, p, p * (dp - delta), scale))


def _last_block_only(q, k, v, do, causal, block):
    """dK, dV from the last block of query rows alone: what a kernel stores when it assigns, not adds."""
    n = q.shape[-2]
    start = ((n - 1) // block) * block
    if start == 0:
        return None
    qd, kd, dod, p, dp, delta, keep, scale, o = _pieces(q, k, v, do, causal)
    ds = p * (dp - delta)
    rows = slice(start, n)
    return (None, ds[..., rows, :].transpose(-1, -2) @ qd[..., rows, :] * scale,
            p[..., rows, :].transpose(-1, -2) @ dod[..., rows, :])


# How a tensor core may read an fp32 operand of tl.dot in TF32 (10 of its 23 mantissa bits): the bits past them
# cut off, or rounded to the nearest. Which one a GPU does is its own and Triton's choice; the grader allows both.
TF32_ROUNDINGS = ("cut", "nearest")


def _tf32(t: torch.Tensor, rounding: str) -> torch.Tensor:
    """float64 t as fp32, then as a tensor core reads it in TF32 (rounding: one of TF32_ROUNDINGS), in float64."""
    bits = t.float().view(torch.int32)
    if rounding == "nearest":
        bits = bits + 0x1000           # half of the last bit kept, on the magnitude: ties go away from 0
    return (bits & ~0x1FFF).view(torch.float32).double()


def _tf32_dots(dtype) -> bool:
    """Whether tl.dot on dtype runs in TF32 here: fp32 on a GPU's tensor cores from sm_80, Triton's default."""
    return dtype == torch.float32 and ON_GPU and not INTERPRET and (compute_capability() or (0, 0)) >= (8, 0)


def _unscaled_scores(q, k, v, do, causal, rounding=None):
    """dQ, dK, dV with P rebuilt as exp(QKᵀ − lse): the scale left out of S, lse the forward's.

    rounding (one of TF32_ROUNDINGS): every tl.dot operand read in TF32, the forward's too, as a GPU computes fp32.
    This mistake needs it where the others do not: its exponents are √D times the right ones (up to about 14 at
    the fp32 case's D = 16), TF32's 10 mantissa bits leave such an exponent off by up to about 0.01, and exp turns
    that into a 1 % error of P, twice the fp32 tolerance; computed as the GPU computes it, the answer matches."""
    r = (lambda t: t) if rounding is None else (lambda t: _tf32(t, rounding))
    qd, kd, vd, dod = (t.double() for t in (q, k, v, do))
    n, d = q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    keep = torch.ones(n, n, dtype=torch.bool, device=q.device)
    if causal:
        keep = keep.tril()
    qk = r(qd) @ r(kd).transpose(-1, -2)
    s = (qk * scale).masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p_forward = torch.exp(s - s.amax(dim=-1, keepdim=True))        # the forward's P, before it is normalised
    o = r(p_forward) @ r(vd) / p_forward.sum(dim=-1, keepdim=True)
    delta = (dod * o).sum(-1, keepdim=True)                        # the Δ kernel: no dot
    p = torch.exp(qk - lse).masked_fill(~keep, 0.0)
    ds = p * (r(dod) @ r(vd).transpose(-1, -2) - delta)
    return r(ds) @ r(kd) * scale, r(ds).transpose(-1, -2) @ r(qd) * scale, r(p).transpose(-1, -2) @ r(dod)


# The backward keeps no running max: where its P overflows, S is not the forward's
OVERFLOW = ("The backward keeps no running max: P = exp(S − lse) is at most 1 when S holds the very scores whose "
            "log-sum-exp the forward saved, scale·QKᵀ. Larger exponents overflow (past 65,504 in fp16, where P is "
            "cast for tl.dot, and past about 3.4e38 in fp32), and then inf − inf or 0 · inf gives NaN. Is S "
            "multiplied by scale = 1/√D before lse is subtracted, in both kernels?")
# each gradient's label, the names of its accumulator and its pointer in the student's kernels
_LABELS = (("dQ", "dq", "dq_ptr"), ("dK", "dk", "dk_ptr"), ("dV", "dv", "dv_ptr"))


def _wrong(q, k, v, do, causal, tf32=False):
    """Per gradient (0 dQ, 1 dK, 2 dV): [(tensor, message, diagnosis key)], the mistakes the lab sees most,
    each message about that gradient alone (compare_each says which others are wrong too). tf32: the kernel's fp32
    tl.dot runs in TF32 (_tf32_dots)."""
    qd, kd, dod, p, dp, delta, keep, scale, o = _pieces(q, k, v, do, causal)
    dq, dk, dv = _grads(qd, kd, dod, p, p * (dp - delta), scale)
    per = {0: [], 1: [], 2: []}

    def add(grads, message, key):
        for i, g in enumerate(grads):
            if g is not None:
                per[i].append((g, message(_LABELS[i]) if callable(message) else message, key))
    add(_grads(qd, kd, dod, p, p * dp, scale)[:2] + (None,),
        "dS is P·dP: the term − Δ, Δ = rowsum(dO·O), is missing. Softmax's backward subtracts from each "
        "row of dP its P-weighted mean before multiplying by P: dS = P·(dP − Δ), Δ computed once per row.", "no-delta")
    add(_grads(qd, kd, dod, p, (dp - delta).masked_fill(~keep, 0.0), scale)[:2] + (None,),
        "dS is dP − Δ without the factor P: softmax's backward is dS = P·(dP − Δ), elementwise.", "no-p")
    add((dq / scale, dk / scale, None),
        lambda lab: f"{lab[0]} is √D = {1 / scale:.3g}× too large: the scale is missing. S = scale·QKᵀ, so "
                    + ("dQ = scale·dS·K." if lab[0] == "dQ" else "dK = scale·dSᵀ·Q."), "scale")
    for rounding in (None,) + (TF32_ROUNDINGS if tf32 else ()):
        add(_unscaled_scores(q, k, v, do, causal, rounding),
            "P is rebuilt from S without its scale: the forward's lse is the log-sum-exp of scale·QKᵀ (scale = 1/√D), "
            "so P = exp(scale·QKᵀ − lse); with QKᵀ alone every exponent is √D times too large.", "scale")
    add((None, dv, dk), lambda lab: f"{lab[0]} holds the values of {'dV' if lab[0] == 'dK' else 'dK'}: in "
        f"bwd_dkdv_kernel, does the tl.store at {lab[2]} write {lab[1]}?", "swapped")
    add((None, None, p @ dod), "dV is P·dO; it is Pᵀ·dO (each key collects from the queries that looked at it).",
        "dv-not-transposed")
    if causal:
        qd2, kd2, dod2, p2, dp2, delta2, _, _, _ = _pieces(q, k, v, do, causal, mask_in_backward=False)
        add(_grads(qd2, kd2, dod2, p2, p2 * (dp2 - delta2), scale),
            "the backward has no causal mask: P recomputed as exp(scale·QKᵀ − lse) is nonzero above the "
            "diagonal, where the forward gave 0. Mask P (and so dS) with key ≤ query, as the forward "
            "did, or skip those blocks.", "causal-bwd")
    for block in (16, 32, 64, 128):
        last = _last_block_only(q, k, v, do, causal, block)
        if last is not None:
            add(last, lambda lab, block=block: f"{lab[0]} holds the contribution of the last block of {block} query "
                f"rows alone: {lab[1]} is assigned in the loop over query blocks ({lab[1]} = ...) instead of "
                f"accumulated ({lab[1]} += ..., stored after the loop).", "not-accumulated")
    return per


def _run(fn, q, k, v, do, causal):
    """o and the three gradients, through autograd as a training step would get them."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    o = fn(q, k, v, causal)
    if not isinstance(o, torch.Tensor):
        fail(f"the attention function returned {type(o).__name__}; it returns o, one tensor shaped like q.")
    if o.grad_fn is None:
        fail("o has no grad_fn: the output is not connected to q, k, v through autograd. Return "
             "YourFunction.apply(q, k, v, causal), not a tensor computed under torch.no_grad() or detached.")
    node = o.grad_fn
    if hasattr(node, "_forward_cls"):
        # an autograd.Function: call its backward here, in this thread, so that the grader's poisoned
        # allocations reach it (autograd's engine would run it outside them) and unwritten elements show
        grads = node.apply(do)
        if not isinstance(grads, tuple) or len(grads) != 4:
            got = type(grads).__name__ + (f" of {len(grads)}" if isinstance(grads, tuple) else "")
            fail(f"the backward returned {got}; it returns four things, (dq, dk, dv, None): a gradient for "
                 "each of q, k, v and None for the causal flag.")
        grads = grads[:3]
    else:
        grads = torch.autograd.grad(o, (q, k, v), do, allow_unused=True)
    for g, what in zip(grads, "qkv"):
        if g is None:
            fail(f"the backward returned None for d{what}: it returns (dq, dk, dv, None), a gradient for each "
                 "of q, k, v and None for the causal flag.")
    return o, grads


def _tol(dtype, ref, gpu=ON_GPU and not INTERPRET):
    big = max(1.0, float(ref.abs().max()))
    if dtype == torch.float16:
        return dict(atol=5e-3 * big, rtol=1e-2)
    if gpu:     # tl.dot on fp32 runs in tf32 by default
        return dict(atol=5e-3 * big, rtol=5e-3)
    return dict(atol=1e-4 * big, rtol=1e-4)


def _check_case(card, fn, name, shape, dtype, causal, gen):
    q, k, v, do = _inputs(shape, dtype, gen)
    o, (dq, dk, dv) = card.call(_run, fn, q, k, v, do, causal, name=name)
    ro, rdq, rdk, rdv = reference(q, k, v, do, causal)
    what = f"{name}, {'causal' if causal else 'not causal'}, B,H,N,D = {shape}"
    try:
        compare(o, ro.to(dtype), name=f"{what}, the forward's o", like=q, tol=_tol(dtype, ro))
    except CheckFailed as e:
        raise CheckFailed(f"{e}\nThe forward is the lab's, given: did an edit of the forward kernel or of "
                          "FlashAttention.forward break it?", e.diagnosis) from None
    _judge_gradients(q, k, v, do, causal, (dq, dk, dv), (rdq, rdk, rdv), what)


def _judge_gradients(q, k, v, do, causal, grads, refs, what, gpu=ON_GPU and not INTERPRET,
                    tf32=None):
    """Fail with a diagnosis unless grads (dq, dk, dv) match refs (float64). gpu: the tolerance of a GPU's fp32;
    tf32: whether fp32 tl.dot ran in TF32 (by default, whether it does here)."""
    dtype = q.dtype
    tf32 = _tf32_dots(dtype) if tf32 is None else tf32
    (dq, dk, dv), (rdq, rdk, rdv) = grads, refs
    if _swapped(dk, dv, rdk, rdv, dtype, gpu):
        # the launcher is given and returns (dq, dk, dv) in order: the swap is in the student's stores
        fail(f"`{what}`: dK and dV are swapped: dK holds the values of dV (Pᵀ·dO) and dV those of dK (scale·dSᵀ·Q). "
             "The launcher, given, returns them as your kernel stored them: at the end of bwd_dkdv_kernel, does "
             "the tl.store at dk_ptr write dk, and the one at dv_ptr dv?", "swapped")
    wrong = _wrong(q, k, v, do, causal, tf32)
    # dV first: it needs P alone, so its diagnosis is the nearest to the cause
    compare_each([(got, ref.to(dtype), label, dict(like=q, tol=_tol(dtype, ref, gpu), overflow_hint=OVERFLOW,
                                                    overflow_key="scale",
                                                    wrong_answers=[(w.to(dtype), msg, key) for w, msg, key in wrong[i]]))
                  for i, (got, ref, label) in reversed(list(enumerate([(dq, rdq, "dQ"), (dk, rdk, "dK"),
                                                                       (dv, rdv, "dV")])))], name=what)


def _swapped(dk, dv, rdk, rdv, dtype, gpu) -> bool:
    def near(a, b):
        return isinstance(a, torch.Tensor) and a.shape == b.shape and a.dtype == dtype and bool(
            torch.isclose(a.double(), b.to(dtype).double(), **_tol(dtype, b, gpu)).all())
    return near(dk, rdv) and near(dv, rdk) and not near(dk, rdk)


def flash_backward(fn):
    """Grade fn(q, k, v, causal) -> o, a torch.autograd.Function whose backward is the lab's exercise."""
    name = getattr(fn, "__name__", "attention")
    card = Scorecard("Lab 4 · FlashAttention backward", note="dQ, dK, dV from the saved log-sum-exp",
                     hints=EXERCISE)
    gen = torch.Generator().manual_seed(torch.randint(0, 2**31, ()).item())
    if ON_GPU and not INTERPRET:
        # an access outside a tensor on a GPU breaks the CUDA context for good: replay forward and backward
        # of one ragged case in the bounds-checked interpreter first
        with card.criterion("loads and stores stay inside the tensors (one case replayed in the interpreter)",
                            target="no access outside") as row:
            for causal in (False, True):
                with trips.counting():
                    card.call(_run, fn, *_inputs((1, 2, 37, 16), torch.float16, gen), causal, name=name)
        if row.status != "passed":
            return card.finish()
    for causal in (False, True):
        with card.criterion(f"fp16, {'causal' if causal else 'not causal'}: dQ, dK, dV match SDPA's, N ragged",
                            target="rtol 1e-2"):
            for shape in _SHAPES:
                _check_case(card, fn, name, shape, torch.float16, causal, gen)
            card.measured(f"{len(_SHAPES)} shapes, N = {', '.join(str(s[2]) for s in _SHAPES)}")
    with card.criterion(f"{CASES[3][0]}, {CASES[2][0]}",
                        target="rtol 1e-4" if INTERPRET or not ON_GPU else "rtol 5e-3 (tf32)"):
        for causal in (False, True):
            _check_case(card, fn, name, FP32_SHAPE, torch.float32, causal, gen)
        card.measured(f"2 cases, N = {FP32_SHAPE[2]}")
    _budget(card, fn, name)
    _performance(card, fn)
    return card.finish()


def per_head(n_bytes: float, heads: int) -> str:
    """Bytes per (batch, head), the one unit the lab and its grader show a budget in: "83,968 B per head"."""
    return f"{n_bytes / heads:,.0f} B per head"


def _budget(card, fn, name):
    # per (batch, head): q, k, v, o, dO read and dq, dk, dv written are 8 of N×D each; recomputing P in
    # two kernels (one for dK, dV, one for dQ) reads q, k, v, dO twice: 13·N·D·s in all. The budget
    # allows 20·N·D·s (room for an fp32 dQ accumulator) and 32 bytes per row (lse, Δ): an N×N matrix
    # in memory, P or dS, is 4·N² bytes per head and does not fit.
    b, h, n, d = BUDGET_SHAPE
    heads = b * h
    q, k, v, do = _inputs((b, h, n, d), torch.float16, torch.Generator().manual_seed(1))
    s, t_el, rows = 2, b * h * n * d, b * h * n
    budget = 20 * t_el * s + 32 * rows
    with card.criterion("the backward's bytes: no N×N matrix in memory",
                        target=f"≤ {per_head(budget, heads)} (20·s·N·D + 32·N at N = {n}, D = {d}) + 5 %, "
                               "≤ 4 launches"):
        qq, kk, vv = (x.detach().requires_grad_() for x in (q, k, v))
        o = card.call(fn, qq, kk, vv, False, name=name)
        tr = trips.count(lambda: torch.autograd.grad(o, (qq, kk, vv), do))
        card.measured(f"{tr.launches} launches, {per_head(tr.bytes, heads)}")
        problems, keys = [], []
        if tr.bytes_written < 3 * t_el * s:
            problems.append(f"the backward wrote {per_head(tr.bytes_written, heads)}; dQ, dK and dV alone are "
                            f"{per_head(3 * t_el * s, heads)}: do the kernels store all three (are they written yet)?")
            keys.append("unwritten")
        if tr.bytes > budget * 1.05:
            problems.append(f"the backward moved {per_head(tr.bytes, heads)}; the budget is {per_head(budget, heads)}, "
                            f"{per_head(budget * 1.05, heads)} with its 5 % slack. An N×N matrix "
                            f"per head (P or dS, {4 * n * n:,} B per head in fp32 here) seems to go to memory: "
                            "recompute P from Q, K and the saved lse inside the kernel, block by block.")
            keys.append("bytes")
        if not any(kk_.kind == "triton" for kk_ in tr.kernels):
            problems.append(f"no Triton kernel ran in the backward: the gradients come from PyTorch "
                            f"({', '.join(x.name for x in tr.kernels[:4])}, …). The lab asks for your own kernels.")
            keys.insert(0, "pytorch")
        elif tr.launches > 4:
            problems.append(f"the backward made {tr.launches} launches where 3 do (Δ, then dK and dV, then dQ).")
            keys.append("launches")
        if problems:
            fail("\n".join(problems) + f"\n{tr.table(max_rows=8)}", keys[0])


def _performance(card, fn):
    backend, backend_name = targets.sdpa_backend()
    target = TARGETS["lab4.vs_sdpa_flash"]
    if backend_name != "flash":
        target = targets.replace(target, reference=f"SDPA's {backend_name} backward")
    for b, h, n, d, causal in PERF_CASES:
        label = (f"fp16 B·H = {b}·{h}, N = {n:,}, D = {d}{', causal' if causal else ''}: "
                 f"SDPA {backend_name} backward time / yours")
        if not ON_GPU or INTERPRET:
            card.against(label, target, None)
            continue

        def measure(b=b, h=h, n=n, d=d, causal=causal):
            from torch.nn.attention import sdpa_kernel
            q, k, v, do = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(4))
            q, k, v = (t.requires_grad_() for t in (q, k, v))
            o = fn(q, k, v, causal)
            mine = bench.time(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
            with sdpa_kernel(backend):
                ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                theirs = bench.time(lambda: torch.autograd.grad(ref, (q, k, v), do, retain_graph=True))
            return mine, theirs, None, ""
        card.against(label, target, measure,
                     diagnosis="Are the tiles large enough for the tensor cores (64 rows or more on a GPU) "
                               "and the causal loops cut at the diagonal instead of masking whole blocks?")
