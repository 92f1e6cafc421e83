"""Lab 2's grader: add_rmsnorm(x, residual, weight, eps=1e-6) -> (y, h), forward and backward kernels in a
torch.autograd.Function: h = x + residual, y = h · rstd · weight with rstd = 1 / sqrt(mean(h²) + eps)."""
from __future__ import annotations

import math
import torch
from torch.autograd.gradcheck import GradcheckError

from .. import bench, trips
from ..check._core import CheckFailed, by, compare, fail, listed, pair
from ..environment import DEVICE, INTERPRET, ON_GPU, pick
from ..targets import TARGETS
from ._card import Scorecard

__all__ = ["add_rmsnorm"]

EXERCISE = "lab2.add_rmsnorm"       # the name of the lab's hints: a failed row names the one that helps

EPS = 1e-6
# The performance targets, and where they come from. Forward and backward each have a byte budget of
# four full passes over an (M, N) tensor (forward: read x and residual, write y and h; backward: read dy,
# dh and h, write dx), plus vectors and per-row numbers that are small at N = 4096. At 256 MiB per tensor
# the best either can do is move those bytes at the copy ceiling that bench.ceilings() measures. On the
# H100: the lab's solution reached 99 % forward and 78-80 % backward in two runs (2026-11-22), 93 % backward
# once its dweight sum took a tile of partial rows at a time (2026-11-24); torch.compile 98 % and 87 %. The
# backward also sums dweight across rows (partial rows, a second launch) and walks each program's rows one
# after another. The targets (course_utils/targets.py, "lab2.*") sit under the solution's measurements, with room for run-to-run noise and a
# first version; torch.compile's backward is the stretch the lab names (it times it beside the student's).
PERF_SHAPE = (32768, 4096)          # 256 MiB of fp16 per tensor; 4096 is the width of a mid-sized model
ROWS_PER_PARTIAL = 8                # the budget allows one fp32 partial row of dweight per 8 rows of x
_SLOW = ("Likely causes: the row loads are not contiguous (is the row's offset row * N + cols?), a launcher "
         "that runs one program per row in the backward and so writes as many partial rows of dweight as x "
         "has rows, or work on the Python side of every call (.contiguous() copies, a .float() of a tensor).")


def _inputs(m, n, dtype, requires_grad=False, small=False):
    x, r = torch.randn(m, n, device=DEVICE), torch.randn(m, n, device=DEVICE)
    if small:       # a spread of about 0.001: mean(h²) is near eps, so where eps goes shows
        x, r = x * 1e-3, r * 1e-3
    w = 1 + 0.5 * torch.randn(n, device=DEVICE)
    return tuple(t.to(dtype).requires_grad_(requires_grad) for t in (x, r, w))


def _split(out, name):
    return pair(out, name, "(y, h)", "the normalised rows and the updated residual stream h = x + residual")


def _rms(h, w, eps=EPS, *, eps_outside=False, centred=False, no_mean=False):
    v = h - h.mean(-1, keepdim=True) if centred else h
    ms = (v * v).sum(-1, keepdim=True) if no_mean else (v * v).mean(-1, keepdim=True)
    rstd = 1 / (ms.sqrt() + eps) if eps_outside else 1 / (ms + eps).sqrt()
    return v * rstd * (1 if w is None else w)


# --- forward -----------------------------------------------------------------------------------------
# one element last: a row of one normalises to ±weight whatever the formula, so a wrong formula caught there
# could pass for another mistake (eps outside the root looks like normalising x)
_SHAPES = [(4, 96), (7, 37), (3, 300), (2, 5000)]
FORWARD = _SHAPES + [pick(gpu=(1000, 8192 + 3), cpu=(3, 300))]
SMALL = (6, 300)                    # a spread of 0.001: mean(h²) near eps
BACKWARD = [(4, 96), (7, 37), pick(gpu=(1000, 4096 + 3), cpu=(70, 96)), (1, 1)]
ONLY_Y = (5, 40)                    # fp32: dh is None, only y used downstream
GRADCHECK = (2, 6)
BUDGET_SHAPE = (64, 256)


# What the grader tries, named as the contract names it (tests/test_contracts.py): (name, what it is)
CASES = (
    (f"forward at {listed([by(s) for s in FORWARD])}", "y and h against float64, fp32 and fp16"),
    ("a spread of 0.001", f"forward, {by(SMALL)}: mean(h²) near eps"),
    ("1 × 1", "forward and backward: a row of one element, last"),
    (f"backward at {listed([by(s) for s in BACKWARD])}", "dx, dresidual and dweight against autograd, fp32, fp16"),
    ("only y used", f"fp32, {by(ONLY_Y)}: dh is None, autograd passes no gradient for h"),
    (f"gradcheck on {by(GRADCHECK)} float64 inputs", "torch.autograd.gradcheck, fp32's tolerances"),
    (f"{by(BUDGET_SHAPE)} in fp16", "the launches and bytes of one forward and of one backward are counted"),
)


def _forward_case(fn, card, m, n, dtype, name, small=False):
    x, r, w = _inputs(m, n, dtype, small=small)
    y, h = _split(card.call(fn, x, r, w, name=name), name)
    xd, rd, wd = x.double(), r.double(), w.double()
    hd = xd + rd
    compare(h, hd.to(dtype), name=f"{name}, second output h", like=x, wrong_answers=[
        (x, "h equals x: return the updated residual stream h = x + residual.", "h-wrong"),
        (r, "h equals residual: h is x + residual.", "h-wrong"),
        (y, "h equals y: the second output is h = x + residual, before the normalisation.", "h-wrong")])
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    wrong = [(_rms(xd, wd), "y is the RMS-normalised x: normalise h = x + residual.", "not-added"),
             (_rms(hd, wd, centred=True), "the mean is subtracted first: that is LayerNorm without its bias; "
                                          "RMSNorm divides h itself by sqrt(mean(h²) + eps).", "centred"),
             (_rms(hd, wd, eps_outside=True), "eps is added after the square root; it belongs inside: "
                                              "1 / sqrt(mean(h²) + eps).", "eps-outside"),
             (_rms(hd, wd, no_mean=True) if n > 1 else None, "the sum of squares is never divided by N.",
              "sum-of-squares"),
             (_rms(hd, None), "weight is never applied: y = h · rstd · weight.", "no-weight")]
    compare(y, _rms(hd, wd).to(dtype), name=f"{name}, first output y", like=x, tol=tol,
            wrong_answers=[(a.to(dtype), msg, key) for a, msg, key in wrong if a is not None])


# --- backward ----------------------------------------------------------------------------------------
def _reference_grads(hd, wd, gy, gh):
    """dx (= dresidual) and dw in float64, and the realistic wrong versions of each."""
    n_cols = hd.shape[-1]
    rstd = 1 / ((hd * hd).mean(-1, keepdim=True) + EPS).sqrt()
    nrm = hd * rstd
    g = gy * wd
    proj = (g * nrm).mean(-1, keepdim=True)
    dh = 0 if gh is None else gh
    dx = rstd * (g - nrm * proj) + dh
    dw = (gy * nrm).sum(0)
    wrong_dx = [
        (rstd * (g - nrm * proj) if gh is not None else None,
         "dx misses the gradient that arrives through h: h is an output too (the next block adds to it), so "
         "its gradient dh adds to dx: dx = rstd · (dy·w − n · mean(dy·w·n)) + dh.", "no-dh"),
        (rstd * g + dh, "dx = rstd · dy · w (+ dh): rstd is treated as a constant, but it depends on every "
                        "element of the row; the term − n · mean(dy·w·n) is missing.", "rstd-const"),
        (rstd * (g - nrm * proj * n_cols) + dh if n_cols > 1 else None,
         "the projection uses the sum Σ(dy·w·n) where the mean belongs: divide by N.", "proj-sum"),
    ]
    wrong_dx = [w for w in wrong_dx if w[0] is not None]
    wrong_dw = [((gy * hd).sum(0), "dweight = Σ dy · h: the rows must be normalised first, Σ dy · h · rstd.",
                 "dw-of-h"),
                ((gy * nrm).sum(0) / hd.shape[0] if hd.shape[0] > 1 else None,
                 "dweight is the mean over rows of dy · n; it is the sum: weight is shared by every row.", "dw-mean")]
    prefix = (gy * nrm).cumsum(0)
    return dx, dw, wrong_dx, [w for w in wrong_dw if w[0] is not None], prefix


def _grads(fn, card, x, r, w, gy, gh, name):
    x, r, w = (t.detach().clone().requires_grad_() for t in (x, r, w))

    def backward_of(*_):
        y, h = _split(fn(x, r, w), name)
        if not (isinstance(y, torch.Tensor) and y.requires_grad):
            fail(f"`{name}`'s y does not require grad: autograd cannot see the kernel. Call it from the forward "
                 "of a torch.autograd.Function and return AddRMSNorm.apply(x, residual, weight, eps).", "detached")
        outs, grads = ((y, h), (gy, gh)) if gh is not None else ((y,), (gy,))
        return torch.autograd.grad(outs, (x, r, w), grads, allow_unused=True)
    backward_of.__name__ = name
    dx, dr, dw = card.call(backward_of, name=name)
    for got, what in ((dx, "x"), (dr, "residual"), (dw, "weight")):
        if got is None:
            fail(f"`{name}`: no gradient for {what}: the backward returned None in its place. Return "
                 "(dx, dx, dweight, None): x and residual get the same gradient, since h = x + residual.", "none-grad")
    return x, dx, dr, dw


def _backward_case(fn, card, m, n, dtype, name, with_dh=True):
    x, r, w = _inputs(m, n, dtype)
    gy = torch.randn(m, n, device=DEVICE).to(dtype)
    gh = torch.randn(m, n, device=DEVICE).to(dtype) if with_dh else None
    x, dx, dr, dw = _grads(fn, card, x, r, w, gy, gh, name)
    hd = x.detach().double() + r.double()
    ref_dx, ref_dw, wrong_dx, wrong_dw, prefix = _reference_grads(hd, w.double(), gy.double(),
                                                                  None if gh is None else gh.double())
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    where = f"{name}, {str(dtype)[6:]} {m}x{n}" + ("" if with_dh else f", {CASES[4][0]}")
    compare(dx, ref_dx.to(dtype), name=f"{where}: dx", like=x, tol=tol,
            wrong_answers=[(a.to(dtype), msg, key) for a, msg, key in wrong_dx])
    compare(dr, ref_dx.to(dtype), name=f"{where}: dresidual", like=x, tol=tol, wrong_answers=[
        (torch.zeros_like(dr), "dresidual is 0: h = x + residual, so residual gets the same gradient as x.",
         "no-dresidual")])
    dw_tol = {k: v * max(1.0, math.sqrt(m)) for k, v in tol.items()}    # a sum over m rows
    try:
        compare(dw, ref_dw.to(dtype), name=f"{where}: dweight", like=w, tol=dw_tol,
                wrong_answers=[(a.to(dtype), msg, key) for a, msg, key in wrong_dw])
    except CheckFailed as e:
        k = next((k for k in range(m - 1) if bool(torch.isclose(dw.double(), prefix[k], **dw_tol).all())), None)
        if k is None:
            raise
        raise CheckFailed(f"`{where}: dweight` is Σ dy · n over the first {k + 1} of {m} rows only: the partial "
                          "sums of the other programs are never added (is the second launch's loop over every "
                          "partial row?).", "dw-partial") from None


def _gradcheck(fn, name):
    # float64 inputs, small; the kernels compute in fp32, so the tolerances are fp32's, not float64's
    x, r, w = (t.double().requires_grad_() for t in _inputs(*GRADCHECK, torch.float32))

    def f(a, b, c):
        return tuple(_split(fn(a, b, c), name))
    try:
        torch.autograd.gradcheck(f, (x, r, w), eps=1e-3, atol=2e-3, rtol=2e-3)
    except GradcheckError as e:
        first = str(e).strip().splitlines()[0]
        fail(f"`{name}`: torch.autograd.gradcheck in float64 says the backward is not the derivative of the "
             f"forward ({first}). Compare your dx and dweight with the formulas in the lab.", "gradcheck")



# --- the grader --------------------------------------------------------------------------------------
def add_rmsnorm(fn, *, performance: bool = True):
    """fn(x, residual, weight, eps=1e-6) -> (y, h), differentiable in x, residual and weight: forward and
    backward Triton kernels wrapped in a torch.autograd.Function, fp32 and fp16.
    performance=False leaves the GPU timing out (the course's tests time nothing)."""
    name = getattr(fn, "__name__", "add_rmsnorm")
    card = Scorecard("Lab 2 · fused add + RMSNorm, forward and backward", performance=performance, hints=EXERCISE)
    big = FORWARD[-1]
    for dtype, tol in ((torch.float32, "atol = rtol = 1e-4"), (torch.float16, "atol = rtol = 1e-2")):
        with card.criterion(f"forward, {str(dtype)[6:]}: y and h match PyTorch", target=tol):
            for m, n in FORWARD:
                _forward_case(fn, card, m, n, dtype, name)
            _forward_case(fn, card, *SMALL, dtype, name, small=True)
            _forward_case(fn, card, 1, 1, dtype, name)
            card.measured(f"{len(FORWARD) + 2} cases, 1x1 to {big[0]}x{big[1]}, one with {CASES[1][0]}")
    bshapes = BACKWARD
    for dtype, tol in ((torch.float32, "dx 1e-4, dweight 1e-4·√M"), (torch.float16, "dx 1e-2, dweight 1e-2·√M")):
        with card.criterion(f"backward, {str(dtype)[6:]}: dx, dresidual, dweight match autograd", target=tol):
            for m, n in bshapes:
                _backward_case(fn, card, m, n, dtype, name)
            if dtype == torch.float32:
                _backward_case(fn, card, *ONLY_Y, dtype, name, with_dh=False)
            card.measured(f"{len(bshapes)} shapes, up to {bshapes[-2][0]} rows")
    with card.criterion(CASES[5][0], target="fp32 tolerances (2e-3)"):
        card.call(_gradcheck, fn, name, name=name)
    if ON_GPU and not INTERPRET:
        with card.criterion("bounds replay (interpreter): no access outside the tensors"):
            with trips.counting():
                _backward_case(fn, card, 20, 50, torch.float32, name)
    (m, n), s = BUDGET_SHAPE, 2
    x, r, w = _inputs(m, n, torch.float16)
    card.budget("forward, one launch: x and residual read once, y and h written once (fp16)", fn, (x, r, w),
                launches=1, bytes=4 * s * m * n + s * n + 4 * m)
    partial = 2 * 4 * n * -(-m // ROWS_PER_PARTIAL)
    with card.criterion("backward, ≤ 2 launches: dy, dh and h read once, dx written once (fp16)",
                        target=f"≤ 2 launches, ≤ {4 * s * m * n + 2 * s * n + 4 * m + partial:,} B + 5 %") as row:
        x, r, w = _inputs(m, n, torch.float16, requires_grad=True)
        y, h = _split(card.call(fn, x, r, w, name=name), name)
        if not (isinstance(y, torch.Tensor) and y.requires_grad):
            fail(f"`{name}`'s y does not require grad: autograd cannot see the kernel.", "detached")
        gy, gh = torch.randn_like(y), torch.randn_like(h)

        def backward():
            return torch.autograd.grad((y, h), (x, r, w), (gy, gh))
        backward.__name__ = f"{name}'s backward"
        from ..check._core import budget
        t = budget(backward, (), name=backward.__name__, launches=2,
                   bytes=4 * s * m * n + 2 * s * n + 4 * m + partial)
        card.measured(f"{t.launches} launch{'es' if t.launches > 1 else ''}, {t.bytes:,} B")
        biggest = max(t.kernels, key=lambda k: k.bytes)
        if biggest.kind != "triton":
            fail(f"the backward's main work ({biggest.name}) is PyTorch's, not a Triton kernel of yours.", "pytorch")
    card.against(f"forward, fp16, {PERF_SHAPE[0]:,}x{PERF_SHAPE[1]:,}: share of the copy ceiling",
                 TARGETS["lab2.fwd_of_copy"], lambda: _percent_of_copy(fn, backward=False), diagnosis=_SLOW)
    card.against(f"backward, fp16, {PERF_SHAPE[0]:,}x{PERF_SHAPE[1]:,}: share of the copy ceiling",
                 TARGETS["lab2.bwd_of_copy"], lambda: _percent_of_copy(fn, backward=True), diagnosis=_SLOW)
    return card.finish()


def _percent_of_copy(fn, *, backward):
    m, n = PERF_SHAPE
    s = 2
    x, r, w = _inputs(m, n, torch.float16, requires_grad=backward)
    if backward:
        y, h = fn(x, r, w)
        gy, gh = torch.randn_like(y), torch.randn_like(h)
        ms = bench.time(lambda: torch.autograd.grad((y, h), (x, r, w), (gy, gh), retain_graph=True))
        del y, h
    else:
        ms = bench.time(lambda: fn(x, r, w))
    nbytes = 4 * s * m * n                      # the four full passes; vectors and row numbers left out
    ceiling = bench.ceilings()
    del x, r, w
    torch.cuda.empty_cache()
    # (yours, the same bytes at the copy ceiling measured on this GPU, -, detail)
    return ms, nbytes / ceiling.copy_gbps / 1e6, None, f"{nbytes / ms / 1e6:,.0f} of {ceiling.copy_gbps:,.0f} GB/s"
