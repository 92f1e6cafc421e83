"""Checker for lesson 06's exercise: softmax(x) -> y, a numerically stable softmax along the last
dimension of a contiguous 2-D x, in one kernel that reads x once and writes y once."""
from __future__ import annotations

import torch

from .. import trips
from ..environment import DEVICE, INTERPRET, ON_GPU, pick
from ._core import CheckFailed, Passed, budget, by, compare, listed, own_kernels
from ._rows import run_rows

__all__ = ["softmax"]

# Ordinary shapes first (a power-of-two row, then a row of 96 in blocks of 128: 32 padded lanes), then
# the edges: one element, ragged widths, rows wider than 4096 that are not powers of two.
_SHAPES = [(8, 128), (8, 96), (7, 37), (5, 1000), (3, 5000), (2, 6144 + 7), (1, 1)]
# Rows this far above 0 overflow exp() in fp32 (past 88.7) and in fp16 (past 11.1) unless the row's
# max is subtracted first. In fp16 the values keep a spacing of 1/16 there, so the answer stays exact.
_LARGE = 100.0
SHAPES = _SHAPES + [pick(gpu=(1000, 8192 + 3), cpu=(3, 300))]
LARGE = ((4, 1000), (3, 4099))
NEGATIVE = (6, 300)
BUDGET_SHAPE = (16, 300)


# What the checker tries, named as the contract names it (tests/test_contracts.py): (name, what it is)
CASES = (
    (listed([by(s) for s in SHAPES]), "(M, N): a power-of-two row, padded lanes, ragged and wide rows, one element"),
    (f"rows near {_LARGE:g}", f"{listed([by(s) for s in LARGE])}: exp(x) overflows unless the max is subtracted"),
    ("every value near −120", f"{by(NEGATIVE)}: exp(x − 0) underflows, so a padded 0 must not win the max"),
    ("fp32 and fp16", "every case in both"),
    (f"{by(BUDGET_SHAPE)} in fp32 and in fp16", "the launches and bytes of one call are counted"),
)
_TOL = {torch.float32: dict(atol=1e-8, rtol=1e-5), torch.float16: dict(atol=1e-6, rtol=2e-3)}


def _inputs(m, n, dtype, kind=None):
    x = torch.randn(m, n, device=DEVICE)
    if kind == "large":
        x = 4 * x + _LARGE             # a spread of a few units around 100
    elif kind == "negative":
        x = x - 120                    # far below 0: exp(x − 0) underflows to 0 in fp32, exp(x − max) does not
    return x.to(dtype)


def _pow2_at_least(n):
    return 1 << max(0, (n - 1).bit_length())


def _softmax_chunks(xd, size):
    """Softmax of each run of `size` consecutive elements of the flattened x: what a kernel computes that
    normalises whole blocks of the flat tensor (or several rows at once) instead of each row."""
    flat = xd.flatten()
    if flat.numel() % size:
        return None
    return torch.softmax(flat.view(-1, size), dim=1).view_as(xd)


def _softmax_columns(xd, rows):
    """Softmax down the columns of each group of `rows` rows: a 2-D block reduced along axis 0."""
    m, n = xd.shape
    if m % rows or rows < 2:
        return None
    return torch.softmax(xd.view(m // rows, rows, n), dim=1).view(m, n)


def _wrong_answers(xd, m, n):
    mx = xd.amax(-1, keepdim=True)
    e = torch.exp(xd - mx)
    s = e.sum(-1, keepdim=True)
    pad = _pow2_at_least(n) - n
    alts = []
    if pad:
        # masked lanes loaded as 0: the max becomes max(row, 0), and each of them adds exp(0 - max) to the sum
        mz = mx.clamp(min=0)
        ez = torch.exp(xd - mz)
        alts.append((ez / (ez.sum(-1, keepdim=True) + pad * torch.exp(-mz)),
                     f"the masked lanes past the end of the row count as 0: here {pad} of them per row, each adding "
                     "exp(0 − max) to the sum (and 0 may even become the row's max). Load them as −inf "
                     "(other=-float('inf')): exp(−inf) = 0 adds nothing, and −inf never wins the max.", "pad-zero"))
    alts += [
        (e, "the rows are not normalised: y = exp(x − max) without the division by the row's sum.", "not-divided"),
        (e / torch.exp(xd).sum(-1, keepdim=True),
         "the numerator subtracts the max but the sum does not: y = exp(x − max) / Σ exp(x). Subtract the same "
         "max in both (it cancels only if it is in both).", "max-one-side"),
        (torch.exp(xd) / s,
         "the sum subtracts the max but the numerator does not: y = exp(x) / Σ exp(x − max). Subtract the same "
         "max in both.", "max-one-side"),
        (torch.softmax(xd, dim=0) if m > 1 else None,
         "each column is normalised instead of each row: the max and the sum run down dim 0. Softmax runs along "
         "the last dimension, one row at a time.", "columns"),
    ]
    for rows in (2, 4, 8, 16, 32):
        if rows < m:
            alts.append((_softmax_columns(xd, rows),
                         f"each column of every group of {rows} rows is normalised: a [ROWS, BLOCK] block reduced "
                         "along axis 0. Reduce along axis=1, the columns of each row.", "columns"))
    sizes = [m * n] + [r * n for r in (2, 4, 8, 16) if r < m] + [b for b in (128, 256, 512, 1024, 2048, 4096)
                                                                  if b != n and b < m * n]
    for size in sizes:
        what = ("the whole tensor is normalised as one softmax" if size == m * n else
                f"each run of {size // n} rows is normalised as one softmax" if size % n == 0 else
                f"each block of {size} consecutive elements of the flattened x is normalised on its own")
        alts.append((_softmax_chunks(xd, size),
                     f"{what}: the max and the sum must cover exactly one row, no more, no less. One program per "
                     "row (or a reduction along the row's axis only).", "not-per-row"))
    return alts


def _row_sums(out):
    s = out.double().sum(-1)
    s = s[torch.isfinite(s)]
    return s


def softmax(fn) -> Passed:
    """fn(x) -> y: softmax along the last dimension of a contiguous 2-D x (fp32 or fp16), y of x's shape
    and dtype, numerically stable (the row's max subtracted before exp), in one launch that reads x once
    and writes y once."""
    name = "softmax"
    result = Passed(name)
    if ON_GPU and not INTERPRET:   # replay one small case through the bounds-checked interpreter first
        with trips.counting():
            run_rows(fn, _inputs(5, 300, torch.float32), name=name, m=5, n=300)
    for dtype in (torch.float32, torch.float16):
        cases = [(s, None) for s in SHAPES] + [(s, "large") for s in LARGE] + [(NEGATIVE, "negative")]
        for (m, n), kind in cases:
            x = _inputs(m, n, dtype, kind)
            out = run_rows(fn, x, name=name, m=m, n=n)
            xd = x.double()
            ref = torch.softmax(xd, dim=-1)
            where = f"{str(dtype)[6:]} x of shape ({m}, {n})" + (f", rows near {_LARGE:.0f}" if kind == "large" else
                                                                  ", every value near −120" if kind == "negative" else "")
            try:
                compare(out, ref.to(dtype), name=name, like=x, tol=_TOL[dtype],
                        wrong_answers=[(alt.to(dtype), msg, key) for alt, msg, key in _wrong_answers(xd, m, n)
                                       if alt is not None],
                        overflow_hint=("exp() overflowed: exp(x) of x near 100 is past the largest fp32 (about 3.4e38, "
                                       "reached at x = 88.7; fp16's 65504 at x = 11.1), and inf / inf is NaN. "
                                       "Subtract each row's max first: exp(x − max) ≤ 1, and the max cancels in the "
                                       "division." if kind == "large" else
                                       "exp(x − max) underflowed to 0 in the whole row, and 0 / 0 is NaN: the max you "
                                       "subtract is far above every value of the row. Did a masked lane, loaded as 0, "
                                       "win the max? Load masked lanes as −inf." if kind == "negative" else ""))
            except CheckFailed as e:
                msg = f"{e}\n(case: {where})"
                # NaN where the answer is finite: which probe made it tells the causes apart
                key = {"large": "no-max", "negative": "pad-zero"}.get(kind, "nonfinite") \
                    if e.diagnosis == "nonfinite" else e.diagnosis
                sums = _row_sums(out) if isinstance(out, torch.Tensor) and out.shape == x.shape else None
                if sums is not None and sums.numel() and not torch.allclose(sums, torch.ones_like(sums), atol=1e-2):
                    msg += (f"\nEach row of a softmax sums to 1; yours sum to between {float(sums.min()):.4g} and "
                            f"{float(sums.max()):.4g}.")
                if result.cases and n != _pow2_at_least(n) and kind is None and "masked lanes" not in msg:
                    msg += ("\nEarlier cases passed. This row's length is not a power of two, so the block that holds "
                            "it has masked lanes: what do they load, and do they take part in the max and the sum?")
                    key = "masked-lanes" if key in ("wrong", "factor", "wrong-answer") else key
                raise CheckFailed(msg, key) from None
            result.cases.append(f"{str(dtype)[6:]} {m}x{n}" + (f" near {_LARGE:.0f}" if kind == "large" else
                                                              " near −120" if kind == "negative" else ""))
    m, n = BUDGET_SHAPE
    for dtype in (torch.float32, torch.float16):
        s = dtype.itemsize
        t = budget(fn, (_inputs(m, n, dtype),), name=name, launches=1, bytes=2 * s * m * n)
        own_kernels(t, name)
        if dtype == torch.float32:
            result.traffic = t
    return result
