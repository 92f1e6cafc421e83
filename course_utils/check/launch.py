"""Checker for lesson 02's exercise: tiny_chain(x), a chain of 100 tiny element-wise ops in ONE kernel.

The chain (the lesson defines the same one): 50 times, multiply by SCALE, then add SHIFT; in eager
PyTorch that is 100 ops, one kernel launch each.
"""
from __future__ import annotations

import torch

from ..environment import DEVICE, pick
from ._core import Passed, bounds_check_on_gpu, budget, compare, fail, inputs_kept, recorded, run

__all__ = ["tiny_chain"]

N_OPS = 100          # 50 multiplies and 50 adds
SCALE = 0.99
SHIFT = 0.01


def chain_reference(x: torch.Tensor, pairs: int = N_OPS // 2, *, add_first: bool = False,
                    multiply: bool = True, add: bool = True) -> torch.Tensor:
    """The chain as eager PyTorch runs it (fp32, one op at a time); the keywords build wrong variants."""
    for _ in range(pairs):
        if add and add_first:
            x = x + SHIFT
        if multiply:
            x = x * SCALE
        if add and not add_first:
            x = x + SHIFT
    return x


def _wrong_answers(x: torch.Tensor):
    """Realistic mistakes, what to say about them, and their diagnosis keys; a generator, so they are
    computed only on a mismatch."""
    pairs = N_OPS // 2
    yield x, ("the output equals the input: the multiply-adds are never applied. Does the loop run, and "
              "is its result (not the loaded x) what you store?"), "no-steps"
    yield chain_reference(x, add_first=True), (
        "you add SHIFT before multiplying by SCALE; each step is x * SCALE first, then + SHIFT."), "order"
    yield chain_reference(x, add=False), "only the multiplies are applied: every step also adds SHIFT.", "missing-op"
    yield (chain_reference(x, multiply=False),
           "only the adds are applied: every step also multiplies by SCALE.", "missing-op")
    yield x * SCALE ** pairs + SHIFT * pairs, (
        f"all {pairs} multiplies come first and all {pairs} adds after them (two loops, or SHIFT * {pairs} "
        "added at the end). The order matters: each add is scaled by the multiplies that follow it. One loop, "
        "each step x * SCALE then + SHIFT."), "order"
    yield (x + SHIFT * pairs) * SCALE ** pairs, (
        f"all {pairs} adds come first and all {pairs} multiplies after them. The order matters: one loop, each "
        "step x * SCALE then + SHIFT."), "order"
    y = x
    for k in range(1, 4 * pairs + 1):     # one more step at a time: k steps cost k, not k*(k+1)/2, ops
        y = chain_reference(y, 1)
        if k == 2 * pairs:
            yield y, (f"you apply the multiply-add {k} times. The chain is {N_OPS} ops: {pairs} multiplies "
                      f"and {pairs} adds, so {pairs} multiply-add steps."), "step-count"
        elif k != pairs:
            yield y, (f"the output is what {k} multiply-add step{'s give' if k > 1 else ' gives'} ({2 * k} ops); "
                      f"the chain has {pairs} steps ({N_OPS} ops). Check how many times the loop runs."), "step-count"


def tiny_chain(fn) -> Passed:
    """fn(x) -> the chain applied to a 1-D fp32 tensor x, in one kernel launch moving one read and one write."""
    result = Passed("tiny_chain")
    # The lesson's 16 first, then ragged sizes: one element, not a multiple of a block, one past a power of two.
    sizes = [16, 1, 1000, 1025, pick(gpu=(1 << 20) + 17, cpu=4097)]
    bounds_check_on_gpu(fn, torch.randn(1000, device=DEVICE), name="tiny_chain")
    for n in sizes:
        x = torch.randn(n, device=DEVICE) * 2
        before = x.clone()
        ref = chain_reference(x)
        what = f"n = {n}"
        out, launch = recorded(lambda: run(fn, x, name="tiny_chain"), n)
        if isinstance(out, torch.Tensor) and out.numel() and out.data_ptr() == x.data_ptr() and \
                not torch.equal(x, before):
            fail("`tiny_chain` changed its input x in place: write the result to a new tensor "
                 "(out = torch.empty_like(x)) and leave x as it was.", "in-place")
        inputs_kept(out, [("x", x, before)], name="tiny_chain", case=what, launch=launch)
        compare(out, ref, name="tiny_chain", like=x, wrong_answers=_wrong_answers(x), case=what, launch=launch,
                overflow_hint="The chain keeps values near the input's size: is something multiplied where "
                              "it should be added?")
        result.cases.append(f"float32 n={n}")
    n = 4096
    result.traffic = budget(fn, (torch.randn(n, device=DEVICE),), name="tiny_chain", launches=1, bytes=2 * 4 * n,
                            store_once=True)
    return result
