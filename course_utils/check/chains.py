"""Checker for lesson 01's exercise: cos_chain(x, k) applies the cosine k times, in one kernel.

The point of the exercise is the traffic, not the cosine: whatever k is, one launch reads x once and
writes the result once, 2 * N * itemsize bytes. So the checker checks values (k = 1, 2, 3, ragged
sizes, fp32 and fp16) and then that budget for every k."""
from __future__ import annotations

import torch

from ..environment import DEVICE, INTERPRET, ON_GPU
from ._core import CheckFailed, Passed, bounds_check_on_gpu, budget, compare, inputs_kept, recorded, run

__all__ = ["cos_chain"]

_KS = (1, 2, 3)
# Ragged on purpose: under a power of two, a single element, a prime, just over a power of two.
_SIZES = (1000, 1, 37, 1025)

_FP32_ONLY = ("tl.cos works on fp32 (and fp64) only: load, convert with .to(tl.float32), take the "
              "cosines, and store the result (tl.store converts it back to the output's dtype).")


def _chain_text(exc: BaseException | None) -> str:
    """The messages of an exception and of everything it was raised from."""
    seen, parts = set(), []
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


def _call(fn, x: torch.Tensor, k: int):
    """Run the student's cos_chain(x, k); explain the fp16 mistake Triton reports obscurely."""
    try:
        return run(fn, x, k, name="cos_chain")
    except CheckFailed as e:
        text = _chain_text(e)
        if "Expected dtype" in text and "fp16" in text:
            raise CheckFailed(f"`cos_chain` failed on an fp16 input with k={k}: {_FP32_ONLY}", "fp16-cos") from None
        raise


def _cosines(x: torch.Tensor, j: int) -> torch.Tensor:
    """cos applied j times, computed in fp32 (as a fused kernel does it) and rounded once at the end."""
    v = x.float()
    for _ in range(j):
        v = torch.cos(v)
    return v.to(x.dtype)


def _wrong_answers(x: torch.Tensor, k: int):
    """The outputs of realistic mistakes for this k, with the diagnosis to give and its key."""
    for j in range(0, k + 3):
        if j == k:
            continue
        if j == 0:
            msg = ("the output equals the input: no cosine was applied. Is `v = tl.cos(v)` inside the loop, "
                   "and is it v (not the loaded x) that you store?")
        elif j == 1:
            msg = (f"with k={k} the output is cos(x), a single cosine. Each step must take the cosine of the "
                   "previous step's result (v = tl.cos(v)), k times; and the wrapper must pass k to the kernel.")
        else:
            msg = (f"with k={k} the output is the cosine applied {j} times: the loop runs {j} times where it "
                   f"should run {k}. `for _ in tl.static_range(K)` runs K times; is K=k passed at launch?")
        yield _cosines(x, j), msg, ("no-cosine" if j == 0 else "one-cosine" if j == 1 else "loop-count")
    if k > 1:
        yield (x.float().cos() ** k).to(x.dtype), (
            f"with k={k} the output is cos(x) to the power {k}: each step must take the cosine of the "
            "previous result (v = tl.cos(v)), not multiply by cos(x).", "power")


def cos_chain(fn) -> Passed:
    """fn(x, k) -> cos(cos(...cos(x))) with k cosines, for a 1-D tensor x of any length, as ONE kernel
    that reads x once and writes the result once (2 * N * itemsize bytes), whatever k is."""
    result = Passed("cos_chain")
    bounds_check_on_gpu(fn, torch.randn(1000, device=DEVICE), 2, name="cos_chain")
    # 4095: several programs, and small enough for a GPU to replay its launch (what names an offset mistake)
    sizes = _SIZES + (4095,) + (((1 << 20) + 17,) if ON_GPU and not INTERPRET else ())
    for dtype in (torch.float32, torch.float16):
        for n in sizes:
            for k in _KS:
                x = (torch.randn(n, device=DEVICE) * 3).to(dtype)
                keep = x.clone()
                want = _cosines(x, k)
                what = f"n = {n}, k = {k}, {str(dtype)[6:]}"
                out, launch = recorded(lambda: _call(fn, x, k), n)
                if isinstance(out, torch.Tensor) and out.numel() and out.data_ptr() == x.data_ptr() and \
                        not torch.equal(x, keep):
                    raise CheckFailed("`cos_chain` changed its input x: write the result to a new tensor "
                                      "(out = torch.empty_like(x)) and leave x as it was.", "in-place")
                inputs_kept(out, [("x", x, keep)], name="cos_chain", case=what, launch=launch)
                compare(out, want, name="cos_chain", like=x, wrong_answers=list(_wrong_answers(x, k)), case=what,
                        launch=launch)
                result.cases.append(f"{str(dtype)[6:]} n={n} k={k}")
    # The budget: one launch and one read plus one write of every element, whatever k is.
    n = 4096
    for dtype in (torch.float32, torch.float16):
        for k in _KS:
            x = torch.randn(n, device=DEVICE).to(dtype)
            limit = 2 * n * x.element_size()
            try:
                traffic = budget(fn, (x, k), name="cos_chain", launches=1, bytes=limit, store_once=True)
            except CheckFailed as e:
                raise CheckFailed(f"with k={k} ({str(dtype)[6:]}, n={n}, budget {limit} bytes = "
                                  f"2 x {n} x {x.element_size()}): {e}", e.diagnosis) from None
            if dtype == torch.float32 and k == max(_KS):
                result.traffic = traffic
            result.cases.append(f"budget {str(dtype)[6:]} k={k}")
    return result
