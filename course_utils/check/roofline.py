"""Checker for lesson 00's exercise: roofline_time(flops, bytes, copy_gbps, matmul_tflops) -> ms."""
from __future__ import annotations

import math

from ._core import CheckFailed, Passed, fail, run

__all__ = ["roofline_time"]

# (flops, bytes, copy_gbps, matmul_tflops): memory-bound, compute-bound, both terms of similar
# size (so a sum and a max differ clearly), pure traffic, pure arithmetic, and H100-like figures.
_CASES = [
    (1e9, 1e9, 1000.0, 100.0),
    (1e12, 1e6, 1000.0, 100.0),
    (2e11, 1e9, 1000.0, 100.0),
    (0.0, 3e9, 1500.0, 200.0),
    (5e11, 0.0, 1500.0, 200.0),
    (2 * 4096**3, 3 * 2 * 4096**2, 3350.0, 989.0),
]


def _terms(flops, nbytes, gbps, tflops):
    """The two times in ms: 1 GB/s moves 1e6 bytes per ms; 1 TFLOP/s does 1e9 FLOPs per ms."""
    return nbytes / (gbps * 1e6), flops / (tflops * 1e9)


def _same(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-6)


def _wrong_answers():
    """Realistic mistakes, each a function of the two correct terms, with the diagnosis to give and its key."""
    units = "1 GB/s is 1e9 bytes/s = 1e6 bytes per ms, and 1 TFLOP/s is 1e9 FLOPs per ms"
    yield lambda m, c: m + c, ("you returned the sum of the two times; the roofline bound is the max: "
                               "memory and arithmetic overlap, so the slower of the two sets the time."), "sum"
    yield lambda m, c: min(m, c), ("you returned the smaller of the two times; the bound is the larger one: "
                                   "the kernel cannot finish before its slowest resource does."), "min"
    yield (lambda m, c: m,
           "you return only the memory time: your answer ignores the compute term (FLOPs / rate).", "one-term")
    yield (lambda m, c: c,
           "you return only the compute time: your answer ignores the memory term (bytes / bandwidth).", "one-term")
    for f in (1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9, 1e12, 1e-12):
        off = f"off by {max(f, 1 / f):.0f} (too {'large' if f > 1 else 'small'})"
        unit = {1e-3: " Seconds instead of milliseconds?", 1e3: " Microseconds instead of milliseconds?"}
        yield lambda m, c, f=f: f * max(m, c), (
            f"{off} in every case: GB/s vs bytes/ms units?{unit.get(f, '')} The answer is in ms; {units}."), "units"
        yield lambda m, c, f=f: max(f * m, c), (
            f"the memory term is {off}: GB/s vs bytes/ms units? {units}."), "units"
        yield lambda m, c, f=f: max(m, f * c), (
            f"the compute term is {off}: TFLOP/s vs FLOPs/ms units? {units}."), "units"


def roofline_time(fn) -> Passed:
    """fn(flops, bytes, copy_gbps, matmul_tflops) -> the roofline lower bound on run time, in ms."""
    result = Passed("roofline_time")
    got_all = []
    for case in _CASES:
        got = run(fn, *case, name="roofline_time", poison=False)
        if got is None:
            fail("`roofline_time` returned None: did you forget `return`?", "return")
        try:
            got = float(got)
        except (TypeError, ValueError):
            fail(f"`roofline_time` returned a {type(got).__name__}; it should return one number of milliseconds.",
                 "return")
        got_all.append(got)
    wants = [max(*_terms(*case)) for case in _CASES]
    if all(_same(g, w) for g, w in zip(got_all, wants)):
        result.cases = [f"flops={c[0]:.3g} bytes={c[1]:.3g}" for c in _CASES]
        return result
    for wrong, message, key in _wrong_answers():
        if all(_same(g, wrong(*_terms(*c))) for g, c in zip(got_all, _CASES)):
            fail(f"`roofline_time`: {message}", key)
    i = next(i for i, (g, w) in enumerate(zip(got_all, wants)) if not _same(g, w))
    flops, nbytes, gbps, tflops = _CASES[i]
    m, c = _terms(*_CASES[i])
    raise CheckFailed(
        f"`roofline_time({flops:g}, {nbytes:g}, {gbps:g}, {tflops:g})` returned {got_all[i]:.6g} ms; expected "
        f"{wants[i]:.6g} ms (memory {m:.6g} ms, compute {c:.6g} ms, the bound is the larger).", "wrong")
