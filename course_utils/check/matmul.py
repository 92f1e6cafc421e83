"""Checker for lesson 07's exercise: matmul_bias_gelu(a, w, b) = gelu(a @ w + b), one Triton kernel that
applies the bias and the exact GELU to each output tile while it is still in registers."""
from __future__ import annotations

import math

import torch

from .. import trips
from ..environment import DEVICE, INTERPRET, ON_GPU, pick
from ._core import CheckFailed, Passed, budget, by, compare, fail, own_kernels, run

__all__ = ["matmul_bias_gelu"]

NAME = "matmul_bias_gelu"
# fp16 out of an fp32 accumulator: rounding to fp16 costs at most 2^-11 of a value (4.9e-4), an fp32 sum
# of a few thousand products far less. The tanh form of GELU is off by up to 4.7e-4 in absolute terms,
# which a looser fp16 tolerance (2e-3) would let through.
TOL = dict(atol=1e-4, rtol=1e-3)
# Ordinary shapes first (M <= N, so a bias read by row stays inside b and its answer can be named),
# then the edges: one element, nothing a multiple of a tile, K spanning several tiles with a ragged tail,
# one past a tile in every dimension, and a larger one.
SHAPES = [(64, 96, 128), (37, 53, 29), (100, 130, 300), (129, 257, 65), (1, 1, 1)]
BLOCK_KS = (16, 32, 64, 128, 256)   # the K tiles a student is likely to pick
ALL_SHAPES = SHAPES + [pick(gpu=(1000, 1030, 1100), cpu=(70, 90, 200))]
TAILS = (48, 80, 72, 10.0)          # M, N, K and the scale of a @ w: outputs far into GELU's tails
CANCELLING = (32, 64, 512)          # sums over K that grow to about 2·K and cancel
BUDGET_SHAPE = (32, 64, 48)
# K < N, K no multiple of a tile: a kernel that steps through w's rows by K stays inside w here, so its answer
# can be compared (where K > N, as in the first case, it reads past w's end instead)
W_STRIDE_PROBE = (16, 40, 24)


# What the checker tries, named as the contract names it (tests/test_contracts.py): (name, what it is)
CASES = (
    (", ".join(by(s) for s in ALL_SHAPES[:-1]) + " and " + by(ALL_SHAPES[-1]),
     "M × N × K: ordinary, none a multiple of a tile, one past a tile, one element, a larger one"),
    (f"{by(TAILS[:3])} with a @ w about {TAILS[3]:g} times larger", "outputs deep in GELU's tails (v or 0)"),
    (f"{by(CANCELLING)} with sums over K that cancel", "partial sums near 2·K, results of order 1: fp32 sums"),
    (by(BUDGET_SHAPE), "the launches and bytes of one call are counted"),
)


def _inputs(m, n, k, scale=1.0):
    # the same numbers for a shape on every run, whatever ran before: a diagnosis must not depend on the order
    gen = torch.Generator().manual_seed(1_000_003 * m + 1_009 * n + k)
    a = torch.randn(m, k, generator=gen)
    w = torch.randn(k, n, generator=gen) * (scale / math.sqrt(k))   # a @ w of order `scale` for any K
    b = torch.randn(n, generator=gen)
    return a.half().to(DEVICE), w.half().to(DEVICE), b.half().to(DEVICE)


def _cancelling(m, n, k):
    """Inputs whose running sums grow to about 4·K/2 over the first half of K and cancel in the second:
    the result is of order 1, the partial sums are not. An fp32 accumulator keeps the small result; an
    fp16 one, with 11 bits, has rounded it away on the way."""
    a = 4 + 0.05 * torch.randn(m, k, device=DEVICE)
    sign = torch.ones(k, 1, device=DEVICE)
    sign[k // 2:] = -1
    w = sign + 0.01 * torch.randn(k, n, device=DEVICE)
    return a.half(), w.half(), 0.5 * torch.randn(n, device=DEVICE).half()


def _gelu(v):
    return 0.5 * v * (1 + torch.erf(v / math.sqrt(2)))


def _per_k_step(a, w, b, bk):
    """What a kernel computes that applies bias + GELU to the accumulator after every K step."""
    acc = torch.zeros(a.shape[0], w.shape[1], dtype=a.dtype, device=a.device)
    for k0 in range(0, a.shape[1], bk):
        acc = _gelu(acc + a[:, k0:k0 + bk] @ w[k0:k0 + bk] + b)
    return acc


def _w_row_stride_k(w):
    """w as read by a kernel that steps from one row of w to the next by K elements instead of N: element (k, n)
    taken from offset k·K + n. Inside w only when K <= N; None otherwise."""
    K, N = w.shape
    if K > N:
        return None
    offsets = torch.arange(K, device=w.device)[:, None] * K + torch.arange(N, device=w.device)[None, :]
    return w.reshape(-1)[offsets]


def _w_stride_message(K: int, N: int) -> str:
    return (f"w is read with a row stride of K: the kernel steps from one row of w to the next by K = {K} elements, "
            f"but w is (K, N) = ({K}, {N}), row-major, so one row holds N = {N} values and element (k, n) sits at "
            "k·N + n. (Where N = K the two strides agree, so a square matmul alone would not show it.)")


def _reads_w_with_row_stride_k(fn) -> bool:
    """Is fn's answer gelu(a @ w + b) with w read at k·K + n? Asked only when a case failed in a way that such a
    kernel explains (a load past the end of w where K > N, or wrong numbers): one probe with K < N, where that
    kernel stays inside w, compared with the answer it would give there."""
    a, w, b = _inputs(*W_STRIDE_PROBE)
    try:
        out = run(fn, a, w, b, name=NAME)
    except CheckFailed:
        return False
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (a.shape[0], w.shape[1]):
        return False
    ad, wd, bd = a.double(), w.double(), b.double()
    return bool(torch.isclose(out.double(), _gelu(ad @ _w_row_stride_k(wd) + bd), **TOL).all())


def _wrong_answers(a, w, b):
    """(answer, diagnosis, key) for the realistic mistakes, computed in float64 from the same inputs."""
    M, K = a.shape
    N = w.shape[1]
    mm = a @ w
    out = [
        (_gelu(mm), "the bias is never added: gelu(a @ w), not gelu(a @ w + b).", "no-bias"),
        (_gelu(mm) + b, "this is gelu(a @ w) + b: the bias goes in before the activation.", "bias-after"),
        (mm + b, "this is a @ w + b: GELU is never applied.", "no-gelu"),
        (torch.nn.functional.gelu(mm + b, approximate="tanh"),
         "this is the tanh approximation of GELU; the exercise asks for the exact form 0.5·v·(1 + erf(v/√2)), "
         "with tl.erf.", "tanh"),
        (0.5 * (mm + b) * (1 + torch.erf(mm + b)),
         "this takes erf(v); GELU takes erf(v/√2): multiply v by 0.7071067811865476 inside the erf.", "erf-scale"),
    ]
    if M <= N and M > 1:
        out.append((_gelu(mm + b[:M, None]), "the bias is indexed by the row of the output tile (b[rm]); it holds "
                    "one value per column of the output: load it at the tile's column offsets (b[rn]) and add it "
                    "along the rows, acc + bias[None, :].", "bias-by-row"))
    if K > 1:
        w_nk = w.reshape(-1).reshape(N, K).t()
        out.append((_gelu(a @ w_nk + b), "w is read as if it were stored (N, K), like nn.Linear's weight. Here w "
                    "is (K, N), row-major: element (k, n) sits at offset k·N + n, so the w tile is "
                    "w_ptr + rk[:, None] * N + rn[None, :].", "w-layout"))
    if 1 < K < N:
        out.append((_gelu(a @ _w_row_stride_k(w) + b), _w_stride_message(K, N), "w-stride"))
    if K > 1:
        mm16 = mm.half().double()     # every step rounded to fp16, as separate fp16 operations do
        v16 = (mm16 + b).half().double()
        out.append((_gelu(v16).half().double(),
                    "this matches a @ w rounded to fp16 before the bias and GELU: what eager PyTorch computes "
                    "(F.gelu(a @ w + b) in fp16 rounds after each operation), or a matmul that stores fp16 with the "
                    "epilogue done elsewhere. Keep the fp32 accumulator through the bias and the GELU and round once, "
                    "as you store, all in one kernel.", "rounded-early"))
    for bk in BLOCK_KS:
        kept = K - K % bk
        if K % bk and kept == 0:
            out.append((_gelu(b.expand(M, N)),
                        f"the output is gelu(b): none of the K = {K} products were added. A K loop of K // BLOCK_K "
                        "steps runs 0 times when K < BLOCK_K. Loop tl.cdiv(K, BLOCK_K) times and mask the tail: "
                        "(k * BLOCK_K + rk) < K, with other=0.0.", "k-tail"))
        elif K % bk:
            out.append((_gelu(a[:, :kept] @ w[:kept] + b),
                        f"the last {K % bk} of the K = {K} products are never added, which is what a K loop of "
                        f"K // BLOCK_K steps does with BLOCK_K = {bk}: it rounds down and skips the partial last "
                        "tile. Loop tl.cdiv(K, BLOCK_K) times and mask the tail: (k * BLOCK_K + rk) < K, with "
                        "other=0.0 so that the masked lanes add nothing.", "k-tail"))
        if bk < K:
            out.append((_per_k_step(a, w, b, bk),
                        f"bias and GELU are applied to the accumulator after every K step (this matches BLOCK_K = "
                        f"{bk}). The epilogue runs once, after the K loop, on the finished tile: "
                        "gelu(sum of all K products + b).", "epilogue-per-k"))
    return out


def _run(fn, a, w, b):
    """run(), with matmul-specific diagnoses of an access outside the tensors."""
    try:
        return run(fn, a, w, b, name=NAME)
    except CheckFailed as e:
        text = str(e)
        if not text.startswith("Out-of-bounds"):
            raise
        M, K = a.shape
        N = w.shape[1]
        shape = f"M, N, K = {M}, {N}, {K}"
        if f"({b.numel()} elements)" in text and b.numel() not in (a.numel(), w.numel()):
            hint = (f"That is the bias: {N} values, one per column of the output. A bias read at the tile's row "
                    "offsets (b[rm]) runs past its end as soon as M > N; load it at the column offsets, b[rn], "
                    "masked with rn < N.")
            key = "bias-by-row"
        elif _reads_w_with_row_stride_k(fn):
            # the interpreter's closing advice (the mask, the tail) is not this kernel's cause
            text = text.split(" The mask let these lanes through")[0].split(" Every lane of this access")[0]
            hint = (_w_stride_message(K, N) + f" With K > N its last rows of w reach past w's {K * N:,} elements.")
            key = "w-stride"
        else:
            hint = ("In a matmul each tile load needs two conditions in its mask: for a, rows below M and "
                    "columns below K; for w, rows below K and columns below N. The K condition is the one "
                    "usually forgotten: when K is not a multiple of BLOCK_K, the last step of the K loop "
                    "reaches past the end of each row of a and past the last row of w.")
            key = "k-mask"
        raise CheckFailed(f"{text}\n({shape}.) {hint}", key) from None


def _case(fn, a, w, b, label, result, tol=TOL):
    out = _run(fn, a, w, b)
    ad, wd, bd = a.double(), w.double(), b.double()
    want = _gelu(ad @ wd + bd)
    try:
        compare(out, want, name=NAME, like=a, wrong_answers=_wrong_answers(ad, wd, bd), tol=tol,
                overflow_hint="GELU of a large |v| is v or 0: does an exp() overflow? Use tl.erf. Or does an fp16 "
                              "accumulator overflow past 65,504? Accumulate in fp32.")
    except CheckFailed as e:
        if "are wrong" in str(e) and torch.isclose(out.double(), want, atol=1e-2, rtol=1e-2).all():
            raise CheckFailed(
                f"{e}\nEvery element is within 1% of gelu(a @ w + b), but some are further off than one fp32 sum and "
                "one rounding to fp16 at the end allow. Something rounds to fp16 too early: an fp16 accumulator "
                "(tl.zeros(..., dtype=tl.float16), or tl.dot(..., out_dtype=tl.float16)), or a @ w stored in fp16 "
                "with the bias and GELU applied to it afterwards (eager PyTorch does that). Keep the fp32 "
                "accumulator through the bias and the GELU, and convert once, as you store.", "fp16-acc") from None
        # on a GPU a w read by K-strided rows where K > N reads past w unseen: its numbers are garbage, not an
        # answer to compare with, so a probe with K < N tells
        if e.diagnosis in ("wrong", "tail", "factor", "nonfinite") and _reads_w_with_row_stride_k(fn):
            M, K = a.shape
            raise CheckFailed(f"`{NAME}` ({label}): {_w_stride_message(K, w.shape[1])}", "w-stride") from None
        raise
    result.cases.append(label)


def matmul_bias_gelu(fn) -> Passed:
    """fn(a, w, b) -> gelu(a @ w + b) for fp16 a (M, K), w (K, N), b (N,), exact (erf) GELU, returning fp16 (M, N),
    accumulated in fp32: one kernel launch that reads a, w and b and writes the output once."""
    result = Passed(NAME)
    if ON_GPU and not INTERPRET:
        # a GPU does not stop a load past the end of a tensor: replay one ragged case through the
        # bounds-checked interpreter first
        with trips.counting():
            _run(fn, *_inputs(37, 53, 29))
    for m, n, k in ALL_SHAPES:
        _case(fn, *_inputs(m, n, k), by((m, n, k)), result)
    # outputs far into GELU's tails (where it is v or 0), and a ragged case with a larger spread
    m, n, k, scale = TAILS
    _case(fn, *_inputs(m, n, k, scale=scale), f"{by((m, n, k))} ×{scale:g}", result)
    m, n, k = CANCELLING
    try:
        # partial sums near 1,024: an fp16 accumulator rounds them to 1, an fp32 one to 1e-4 (the H100's
        # tensor cores, summing in fp32, came within 3e-3 of the exact result at sums near 4,096)
        _case(fn, *_cancelling(m, n, k), f"{by((m, n, k))} cancelling", result, tol=dict(atol=2e-2, rtol=1e-3))
    except CheckFailed as e:
        raise CheckFailed(
            f"{e}\nEvery earlier case passed. In this one the running sums over K grow to about {2 * k:,} over the "
            "first half of K and the second half cancels them, leaving results of order 1. An fp16 accumulator "
            f"has 11 bits: near {2 * k:,} it cannot hold anything finer than {2.0 ** (math.floor(math.log2(2 * k)) - 10):g}, "
            "and the small result is lost. Accumulate in fp32: acc = tl.zeros((BLOCK_M, BLOCK_N), "
            "dtype=tl.float32) and tl.dot(a, w, acc) (no out_dtype=tl.float16); convert only as you store.",
            "fp16-acc" if e.diagnosis in ("wrong", "factor", "tail", "wrong-answer") else e.diagnosis) from None
    m, n, k = BUDGET_SHAPE
    t = budget(fn, _inputs(m, n, k), name=NAME, launches=1, bytes=2 * (m * k + k * n + n + m * n))
    own_kernels(t, NAME)
    result.traffic = t
    return result
