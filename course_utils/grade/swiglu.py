"""Lab 1's grader: swiglu(gate, up) -> silu(gate) * up in one kernel, fp32 and fp16."""
from __future__ import annotations

import torch

from .. import bench, trips
from ..check._core import CheckFailed, by, compare, listed, tolerance
from ..environment import DEVICE, INTERPRET, ON_GPU, pick
from ..targets import TARGETS
from ._card import Scorecard

__all__ = ["swiglu"]

EXERCISE = "lab1.swiglu"        # the name of the lab's hints: a failed row names the one that helps

# The performance target, and where it comes from. The kernel's least traffic is its byte budget: read
# gate and up once, write the output once, 3·s bytes per element. At 256 MiB per tensor that is far past
# any cache, so the best it can do is move those bytes at the copy ceiling that bench.ceilings() measures
# (a torch copy, reads plus writes). Lesson 05's fused kernel reached 98.8 % of it on the H100 in fp16;
# an element-wise kernel with a sensible block gets past 90 % there.
PERF_ELEMENTS = 2**27           # 256 MiB of fp16 per input
_SLOW = ("Likely causes: a small BLOCK (64 or less: each program moves too few bytes to hide the cost of "
         "starting it), or work on the Python side of every call (a .contiguous(), .float() or "
         "torch.cuda.synchronize() in the wrapper).")


ORDINARY = ((4, 1024), pick(gpu=(4096, 11008), cpu=(8, 352)))     # 11,008: the MLP width of a 7B Llama
RAGGED = ((1,), (7,), (1000,), (3, 333), (2, 3, 5), (pick(gpu=100_003, cpu=4099),))
GATES = ((torch.float32, 60.0), (torch.float16, 12.0))          # the scale of randn gates, at 5 × 100
BUDGET_SHAPE = (16, 256)


# What the grader tries, named as the contract names it (tests/test_contracts.py): (name, what it is)
CASES = (
    (listed([by(s) for s in ORDINARY]), "ordinary shapes, in fp32 and in fp16"),
    (f"{listed([by(s) for s in RAGGED])} elements", "ragged sizes, 1-D to 3-D, fp32"),
    ("gates of " + " and ".join(f"±{scale:g} in {str(dt)[6:].replace('float', 'fp')}" for dt, scale in GATES),
     "where exp(g) overflows: a sigmoid written as exp(g) / (1 + exp(g)) gives inf / inf"),
    (f"{by(BUDGET_SHAPE)} in fp16", "the launches and bytes of one call are counted"),
)


def _silu(g):
    return g * torch.sigmoid(g)


def _inputs(shape, dtype, scale=1.0):
    g = torch.randn(shape, device=DEVICE) * scale
    u = torch.randn(shape, device=DEVICE)
    return g.to(dtype), u.to(dtype)


def _wrong_answers(gd, ud, dtype):
    """Realistic mistakes, computed in float64 and rounded like the answer, with their diagnosis keys."""
    alts = [
        (_silu(ud) * gd, "silu is applied to up and gate multiplies it: swiglu(gate, up) = silu(gate) · up.",
         "swapped"),
        (torch.sigmoid(gd) * ud, "the result is sigmoid(gate) · up: silu(g) is g · sigmoid(g), so gate is missing "
                                 "as a factor.", "no-gate-factor"),
        (_silu(gd), "the result is silu(gate): the multiplication by up is missing.", "no-up"),
        (gd * ud, "the result is gate · up: the activation is missing.", "no-activation"),
        (torch.nn.functional.gelu(gd) * ud, "the result is gelu(gate) · up: that is GEGLU; SwiGLU uses silu "
                                            "(g · sigmoid(g)).", "gelu"),
        (_silu(gd) + ud, "the result is silu(gate) + up: the two are multiplied.", "sum"),
    ]
    return [(a.to(dtype), msg, key) for a, msg, key in alts]



def _match(fn, card, shape, dtype, scale=1.0, name="swiglu"):
    g, u = _inputs(shape, dtype, scale)
    out = card.call(fn, g, u, name=name)
    gd, ud = g.double(), u.double()
    want = _silu(gd) * ud
    # PyTorch's own fp16 F.silu(g) * u rounds silu to fp16 before the multiply: one more rounding than a
    # kernel that stays in fp32 does; both are right, hence the fp16 tolerance.
    compare(out, want.to(dtype), name=name, like=g, wrong_answers=_wrong_answers(gd, ud, dtype),
            tol=tolerance(dtype) if dtype != torch.float32 else dict(atol=1e-5, rtol=1e-5),
            overflow_hint="Is sigmoid computed as exp(g) / (1 + exp(g))? For a large gate both are inf and "
                          "inf / inf is NaN: use 1 / (1 + exp(-g)), or tl.sigmoid.")
    # the worst element's error as a share of what the tolerance allows there (1 = at the limit)
    t = tolerance(dtype) if dtype != torch.float32 else dict(atol=1e-5, rtol=1e-5)
    rounded = want.to(dtype).double()
    return float(((out.double() - rounded).abs() / (t["atol"] + t["rtol"] * rounded.abs())).max())


def swiglu(fn, *, performance: bool = True):
    """fn(gate, up) -> silu(gate) * up, a new tensor of the same shape and dtype, computed by one Triton
    kernel that reads each input once and writes the output once; fp32 and fp16, any size.
    performance=False leaves the GPU timing out (the course's tests time nothing)."""
    card = Scorecard("Lab 1 · fused SwiGLU", performance=performance, hints=EXERCISE)
    for dtype, tol in ((torch.float32, "atol = rtol = 1e-5"), (torch.float16, "atol = rtol = 2e-3")):
        with card.criterion(f"{str(dtype)[6:]}, ordinary shapes: matches PyTorch", target=tol):
            err = max(_match(fn, card, s, dtype) for s in ORDINARY)
            card.measured(f"worst element at {err:.0%} of the tolerance")
    shapes = RAGGED
    with card.criterion("ragged sizes: every element written, none past the end",
                        target=f"1 to {shapes[-1][0]:,} elements, 1-D to 3-D"):
        for s in shapes:
            _match(fn, card, s, torch.float32)
        card.measured(f"{len(shapes)} shapes, {shapes[-1][0]:,} elements at most")
    with card.criterion(f"large {CASES[2][0]}: no overflow", target="finite where PyTorch is"):
        # fp32: exp(89) is inf; fp16: exp(12) already is. A sigmoid written as exp(g) / (1 + exp(g))
        # turns into inf / inf there.
        for dtype, scale in GATES:
            _match(fn, card, (5, 100), dtype, scale)
    if ON_GPU and not INTERPRET:
        with card.criterion("bounds replay (interpreter): no access outside the tensors"):
            with trips.counting():
                card.call(fn, *_inputs((3, 300), torch.float32), name="swiglu")
    n = BUDGET_SHAPE[0] * BUDGET_SHAPE[1]
    g, u = _inputs(BUDGET_SHAPE, torch.float16)
    card.budget("one launch: gate and up read once, the output written once (fp16)", fn, (g, u),
                launches=1, bytes=3 * 2 * n)
    card.against(f"fp16, {PERF_ELEMENTS * 2 // 2**20} MiB per tensor: share of the copy ceiling",
                 TARGETS["lab1.of_copy"], lambda: _percent_of_copy(fn), diagnosis=_SLOW)
    return card.finish()


def _percent_of_copy(fn):
    g, u = _inputs((PERF_ELEMENTS,), torch.float16)
    ms = bench.time(lambda: fn(g, u))
    nbytes = 3 * 2 * PERF_ELEMENTS
    ceiling = bench.ceilings()
    # (yours, the same bytes at the copy ceiling measured on this GPU, -, detail)
    return ms, nbytes / ceiling.copy_gbps / 1e6, None, f"{nbytes / ms / 1e6:,.0f} of {ceiling.copy_gbps:,.0f} GB/s"
