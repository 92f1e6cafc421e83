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


def _units_and_combination(got_all) -> str | None:
    """Two mistakes at once, which the list above does not hold: each term scaled by its own power of 1000
    (a unit left out or doubled) and the terms combined by max, sum or min. None if no such reading fits."""
    terms = [_terms(*c) for c in _CASES]
    powers = [10.0 ** e for e in range(-12, 13, 3)]
    # 2**30 bytes taken for a GB, or 2**40 FLOPs for a TFLOP: binary prefixes where the rates are decimal
    memory = [(p * k, binary) for p in powers for k, binary in ((1.0, False), (1e9 / 2**30, True), (2**30 / 1e9, True))]
    compute = [(p * k, binary) for p in powers for k, binary in ((1.0, False), (1e12 / 2**40, True),
                                                                 (2**40 / 1e12, True))]
    combine = {"max": max, "sum": lambda a, b: a + b, "min": min}

    def off(what, x, binary):
        size = f"{max(x, 1 / x):.0f}" if not binary or max(x, 1 / x) > 10 else f"a factor {max(x, 1 / x):.3g}"
        why = (f" (a binary prefix: 1 {'GB' if what == 'memory' else 'TFLOP'} is "
               f"{'1e9 bytes, not 2**30' if what == 'memory' else '1e12 FLOPs, not 2**40'})") if binary else ""
        return f"the {what} term is off by {size} (too {'large' if x > 1 else 'small'}){why}"

    for how, f in combine.items():
        for a, a_bin in memory:
            for b, b_bin in compute:
                if (a, b) == (1.0, 1.0) or not all(_same(g, f(a * m, b * c)) for g, (m, c) in zip(got_all, terms)):
                    continue
                said = [off(what, x, binary) for what, x, binary in (("memory", a, a_bin), ("compute", b, b_bin))
                        if x != 1.0]
                if how != "max":
                    said.append(f"and the two times are combined by {how}, where the bound is the larger of them")
                return ("; ".join(said) + ". The answer is in ms: 1 GB/s is 1e6 bytes per ms, and 1 TFLOP/s "
                        "is 1e9 FLOPs per ms.")
    return None


def roofline_time(fn) -> Passed:
    """fn(flops, bytes, copy_gbps, matmul_tflops) -> the roofline lower bound on run time, in ms."""
    result = Passed("roofline_time")
    got_all = []
    for case in _CASES:
        try:
            got = run(fn, *case, name="roofline_time", poison=False)
        except CheckFailed as e:
            if e.diagnosis is not None or "ZeroDivisionError" not in str(e):
                raise
            # a division by a zero term: say which case the check tried
            raise CheckFailed(f"{e}\nThat was roofline_time({case[0]:g}, {case[1]:g}, {case[2]:g}, {case[3]:g}). "
                              "A kernel may do no FLOPs (a copy) or move no bytes: then that time is 0, and the "
                              "bound is the other one.", None) from e.__cause__
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
    found = _units_and_combination(got_all)
    if found is not None:
        fail(f"`roofline_time`: {found}", "units")
    i = next(i for i, (g, w) in enumerate(zip(got_all, wants)) if not _same(g, w))
    flops, nbytes, gbps, tflops = _CASES[i]
    m, c = _terms(*_CASES[i])
    raise CheckFailed(
        f"`roofline_time({flops:g}, {nbytes:g}, {gbps:g}, {tflops:g})` returned {got_all[i]:.6g} ms; expected "
        f"{wants[i]:.6g} ms (memory {m:.6g} ms, compute {c:.6g} ms, the bound is the larger).", "wrong")
