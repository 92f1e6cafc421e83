"""Checkers for the row-normalisation exercises of lesson 05: add_layernorm and add_rmsnorm, each
returning the normalised rows y and the updated residual stream h = x + residual."""
from __future__ import annotations

import torch

from .. import trips
from ..environment import DEVICE, INTERPRET, ON_GPU, pick
from ._core import CheckFailed, Passed, budget, by, compare, listed, own_kernels, pair
from ._rows import run_rows

__all__ = ["add_layernorm", "add_rmsnorm"]

# Ordinary shapes first, then the edges: ragged widths, rows wider than 4096 that are not
# powers of two (a kernel that assumes a power-of-two row, or one block of at most 4096, fails there).
_SHAPES = [(4, 96), (7, 37), (5, 1024), (3, 5000), (2, 6144 + 7), (1, 1)]   # (1, 1): checked last
_LARGE_MEAN = {torch.float32: 500.0, torch.float16: 200.0}
_FP16_MAX = 65504.0
# What a load at w_ptr + row (one address) with the row's mask gets from Triton, in the exercise's words
_WEIGHT_BY_ROW = ("weight has one value per column, not per row: it is loaded at the row's column offsets, "
                  "w_ptr + cols, with the row's mask, as the row itself is. A pointer plus one number (the row, "
                  "the program id) is one address, which a block's mask cannot switch lane by lane.")
SHAPES = [s for s in _SHAPES if s != (1, 1)] + [pick(gpu=(1000, 8192 + 3), cpu=(3, 300))]
LARGE = ((4, 1000), (2, 5000))     # rows near _LARGE_MEAN, a spread of about 1
SMALL = (6, 300)                   # a spread of 0.001: the variance near eps
BUDGET_SHAPE = (16, 256)


# What both checkers try, named as the contracts name it (tests/test_contracts.py): (name, what it is)
_NORM_CASES = (
    (listed([by(s) for s in SHAPES]), "(M, N): ordinary rows, then ragged ones and rows wider than 4,096"),
    (f"rows near {_LARGE_MEAN[torch.float32]:g} ({_LARGE_MEAN[torch.float16]:g} in fp16)",
     f"{listed([by(s) for s in LARGE])}: mean(h²) − mean(h)² cancels"),
    ("a spread of 0.001", f"{by(SMALL)}: the variance near eps"),
    ("1 × 1", "last: a row of one normalises to ±weight whatever the formula"),
    ("fp32 and fp16", "every case in both"),
    (f"{by(BUDGET_SHAPE)} in fp32 and in fp16", "the launches and bytes of one call are counted"),
)
CASES = {"add_layernorm": _NORM_CASES, "add_rmsnorm": _NORM_CASES}


def _inputs(m, n, dtype, large_mean=False, small=False):
    x = torch.randn(m, n, device=DEVICE)
    r = torch.randn(m, n, device=DEVICE)
    if small:
        # a spread of about 0.001: the variance is near eps, so where eps goes shows
        x, r = x * 1e-3, r * 1e-3
    if large_mean:
        # every row sits far from 0 with a spread of about 1: E[h²] − E[h]² cancels almost to nothing.
        # The residual holds small integers, so x + residual is exact in fp16 too.
        x = x + _LARGE_MEAN[dtype]
        r = torch.randint(-3, 4, (m, n), device=DEVICE).float()
    w = 1 + 0.5 * torch.randn(n, device=DEVICE)
    b = 0.5 * torch.randn(n, device=DEVICE)
    return x.to(dtype), r.to(dtype), w.to(dtype), b.to(dtype)


def _pow2_at_least(n):
    return 1 << max(0, (n - 1).bit_length())


def _split(out, name):
    return pair(out, name, "(y, h)", "the normalised rows and the updated residual stream h = x + residual, "
                "which the next layer needs")


def _layernorm(v, w, b, eps, *, ddof=0, eps_outside=False, pad=0):
    n = v.shape[-1]
    mean = v.mean(-1, keepdim=True)
    d = v - mean
    ss = (d * d).sum(-1, keepdim=True) + pad * mean * mean   # pad: lanes past the row counted as zeros
    var = ss / (n - ddof)
    norm = d / (var.sqrt() + eps) if eps_outside else d / (var + eps).sqrt()
    return norm * (1 if w is None else w) + (0 if b is None else b)


def _rmsnorm(v, w, eps, *, eps_outside=False, centred=False, no_mean=False):
    if centred:
        v = v - v.mean(-1, keepdim=True)
    ms = (v * v).sum(-1, keepdim=True) if no_mean else (v * v).mean(-1, keepdim=True)
    norm = v / (ms.sqrt() + eps) if eps_outside else v / (ms + eps).sqrt()
    return norm * (1 if w is None else w)


def _fp16_sum(m, n, rms: bool) -> str:
    """Why fp16 rows near the large mean come out NaN (LayerNorm) or 0 (RMSNorm) from a kernel that sums them
    in fp16: the sum, or the sum of squares, passes fp16's largest value."""
    mean = _LARGE_MEAN[torch.float16]
    size, what = (mean * mean * n, "their squares sum") if rms else (mean * n, "they sum")
    then = ("its root is inf too, and h / inf is 0" if rms else
            "the mean is inf, h − mean is −inf, 1 / sqrt(var + eps) is 0, and −inf · 0 is NaN")
    return (f"This case, fp16 {m} × {n}, has rows of values near {mean:.0f}: {what} to about {size:,.0f}, past "
            f"{_FP16_MAX:,.0f}, the largest fp16 number. Is the sum kept in fp16? Then it overflows to inf: "
            f"{then}. tl.sum adds in the dtype it is given: convert each load to fp32 (.to(tl.float32)) "
            "before any arithmetic, as the contract asks for the statistics.")


def _y_tol(dtype, large_mean):
    if large_mean:    # fp32 statistics of rows near 500 lose a few digits in any order of summation
        return dict(atol=2e-3, rtol=2e-3) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    return dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)


def _check(fn, *, name, with_bias, eps, reference, wrong_y):
    result = Passed(name)
    shapes = SHAPES
    if ON_GPU and not INTERPRET:   # replay one case through the bounds-checked interpreter
        with trips.counting():
            run_rows(fn, *_inputs(5, 300, torch.float32)[:3 + with_bias], name=name, m=5, n=300,
                     scalar_pointer=_WEIGHT_BY_ROW)
    for dtype in (torch.float32, torch.float16):
        # one element last: a row of one normalises to ±weight whatever the formula, so a wrong formula caught
        # there could pass for another mistake (eps outside the root looks like normalising x)
        cases = [(s, None) for s in shapes] + [(s, "large") for s in LARGE] + [(SMALL, "small"), ((1, 1), None)]
        for (m, n), kind in cases:
            large_mean = kind == "large"
            x, r, w, b = _inputs(m, n, dtype, large_mean, small=kind == "small")
            args = (x, r, w, b) if with_bias else (x, r, w)
            y, h = _split(run_rows(fn, *args, name=name, m=m, n=n, scalar_pointer=_WEIGHT_BY_ROW), name)
            xd, rd, wd, bd = x.double(), r.double(), w.double(), b.double()
            hd = xd + rd
            compare(h, hd.to(dtype), name=f"{name}, second output h", like=x, wrong_answers=[
                (x, "h equals x: return the updated residual stream h = x + residual, not the input x.",
                 "h-output"),
                (r, "h equals residual: h is x + residual, the sum the next layer adds to.", "h-output"),
                (y, "h equals y: the second output is h = x + residual, before the normalisation.",
                 "h-output"),
            ])
            overflows = large_mean and dtype == torch.float16
            wrong = [(alt.to(dtype), *said) for alt, *said in wrong_y(hd, xd, wd, bd, eps, m, n) if alt is not None]
            if overflows and not with_bias:
                # RMSNorm: a sum of h² kept in fp16 overflows, and h / sqrt(inf) is 0 in every lane
                wrong.append((torch.zeros_like(x), "y is 0 everywhere. " + _fp16_sum(m, n, rms=True), "fp16-sum"))
            try:
                compare(y, reference(hd, wd, bd, eps).to(dtype), name=f"{name}, first output y", like=x,
                        wrong_answers=wrong, tol=_y_tol(dtype, large_mean),
                        overflow_hint=_fp16_sum(m, n, rms=not with_bias) if overflows else "", overflow_key="fp16-sum")
            except CheckFailed as e:
                # the cancellation below is LayerNorm's (RMSNorm subtracts nothing), and an fp16 sum that
                # overflowed is told above
                if not large_mean or not with_bias or e.diagnosis == "fp16-sum":
                    raise
                raise CheckFailed(
                    f"{e}\nEvery earlier case passed; this one has rows near {_LARGE_MEAN[dtype]:.0f} with a spread "
                    "of about 1. Is the variance computed as mean(h²) − mean(h)²? Both terms are near "
                    f"{_LARGE_MEAN[dtype] ** 2:,.0f} and their difference near 1, so fp32 keeps almost none of its "
                    "digits. Subtract the mean first and square what is left: var = mean((h − mean)²).",
                    "cancellation") from None
            result.cases.append(f"{str(dtype)[6:]} {m}x{n}" + (f" mean {_LARGE_MEAN[dtype]:.0f}" if large_mean else
                                                                  " spread 0.001" if kind == "small" else ""))
    m, n = BUDGET_SHAPE
    vectors = 2 if with_bias else 1
    for dtype in (torch.float32, torch.float16):
        x, r, w, b = _inputs(m, n, dtype)
        args = (x, r, w, b) if with_bias else (x, r, w)
        s = dtype.itemsize
        t = budget(fn, args, name=name, launches=1, bytes=s * (4 * m * n + vectors * n))
        own_kernels(t, name)
        if dtype == torch.float32:
            result.traffic = t
    return result


def add_layernorm(fn) -> Passed:
    """fn(x, residual, weight, bias) -> (y, h): h = x + residual, y = layer_norm(h) · weight + bias over the
    last dimension (eps = 1e-5, biased variance), in one launch that reads x and residual once and
    writes y and h once, in fp32 and fp16."""
    def wrong_y(hd, xd, w, b, eps, m, n):
        block = _pow2_at_least(n)
        return [
            (_layernorm(xd, w, b, eps), "y is the normalised x: normalise h = x + residual, the sum.", "normalised-x"),
            (_layernorm(hd, w, b, eps, ddof=1) if n > 1 else None,
             "the variance divides by N − 1 (unbiased); layer_norm divides by N.", "unbiased"),
            (_layernorm(hd, w, b, eps, eps_outside=True),
             "eps is added after the square root; it belongs inside: 1 / sqrt(var + eps).", "eps-outside"),
            (_layernorm(hd, b, w, eps), "weight and bias are swapped: y = norm · weight + bias.", "weight-bias"),
            (_layernorm(hd, None, b, eps), "weight is never applied: y = norm · weight + bias.", "weight-bias"),
            (_layernorm(hd, w, None, eps), "bias is never added: y = norm · weight + bias.", "weight-bias"),
            (_layernorm(hd, None, None, eps), "neither weight nor bias is applied: y = norm · weight + bias.",
             "weight-bias"),
            ((_layernorm(hd.transpose(0, 1), None, None, eps).transpose(0, 1) * w + b) if m > 1 else None,
             "the mean and variance are taken down the columns; layer_norm takes them along each row.", "columns"),
            (_layernorm(hd, w, b, eps, pad=block - n) if block != n else None,
             f"the masked lanes past the end of the row count in the variance. Loaded with other=0.0 they hold "
             f"0 (without other= the language leaves them undefined), so h − mean there is −mean, and the "
             f"{block - n} of them add mean² each. Zero them before squaring: d = tl.where(mask, h - mean, 0.0).",
             "masked-lanes"),
            ((_layernorm(hd, None, None, eps) * w[:m, None] + b[:m, None]) if 1 < m <= n else None,
             "weight and bias are indexed by the row: every column of row r was scaled by weight[r] and shifted "
             "by bias[r]. " + _WEIGHT_BY_ROW.replace("weight has", "weight and bias have").replace(
                 "it is loaded", "they are loaded"), "weight-index"),
        ]
    return _check(fn, name="add_layernorm", with_bias=True, eps=1e-5,
                  reference=lambda h, w, b, eps: _layernorm(h, w, b, eps), wrong_y=wrong_y)


def add_rmsnorm(fn) -> Passed:
    """fn(x, residual, weight) -> (y, h): h = x + residual, y = h / sqrt(mean(h²) + eps) · weight
    (eps = 1e-6), in one launch, in fp32 and fp16."""
    def wrong_y(hd, xd, w, b, eps, m, n):
        return [
            (_rmsnorm(xd, w, eps), "y is the RMS-normalised x: normalise h = x + residual, the sum.", "normalised-x"),
            ((_rmsnorm(hd, None, eps) * w[:m, None]) if 1 < m <= n else None,
             "the weight is indexed by the row: every column of row r was scaled by weight[r]. " + _WEIGHT_BY_ROW,
             "weight-index"),
            (_rmsnorm(hd, w, eps, centred=True), "the mean is subtracted first: that is LayerNorm without its "
                                                 "bias. RMSNorm divides h itself by sqrt(mean(h²) + eps).", "centred"),
            (_rmsnorm(hd, w, eps, eps_outside=True),
             "eps is added after the square root; it belongs inside: 1 / sqrt(mean(h²) + eps).", "eps-outside"),
            (_rmsnorm(hd, w, eps, no_mean=True) if n > 1 else None,
             "the sum of squares is never divided by N: RMSNorm takes the mean of h².", "no-mean"),
            (_rmsnorm(hd, None, eps), "weight is never applied: y = h / rms · weight.", "no-weight"),
        ]
    return _check(fn, name="add_rmsnorm", with_bias=False, eps=1e-6,
                  reference=lambda h, w, b, eps: _rmsnorm(h, w, eps), wrong_y=wrong_y)
