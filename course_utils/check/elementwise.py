"""Checkers for the element-wise exercises: vector_add and scaled_add (lesson 03), bias_gelu."""
from __future__ import annotations

import math

import torch

from .. import trips
from ..environment import DEVICE, INTERPRET, ON_GPU, pick
from ._core import (CheckFailed, Passed, budget, by, compare, fail, inputs_kept, listed, own_kernels, run, tolerance,
                    unwritten, watching_launches)

__all__ = ["vector_add", "scaled_add", "bias_gelu"]


def _randn(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, device=DEVICE) * scale).to(dtype)


# --- 1-D kernels: what the grid and the mask did -----------------------------------------------------
# n = 1000 comes first on purpose: it is a multiple of no power of two above 8, so any BLOCK leaves a
# ragged last block, and the first diagnosis a student reads is about the tail, not about n = 1.
FIRST_N = 1000
SIZES = (FIRST_N, 1, 37, 1025, pick(gpu=(1 << 20) + 17, cpu=4095))
BUDGET_N = 4096
# The alphas used by scaled_add: none is 1 or 0, where a forgotten or misplaced alpha would not show.
_ALPHAS = (2.5, -0.75, 3.0)
# bias_gelu: 3 x 37 comes first: a wrong formula is named on 111 elements, where a single element far out in
# GELU's tail (v > 3, where erf is 1 to within the tolerance) could look like several mistakes at once.
GELU_SHAPES = ((3, 37), (16, 1000), (7, 1024), pick(gpu=(4096, 4099), cpu=(33, 257)), (1, 1))
GELU_SCALES = (1.0, 30.0)        # large magnitudes: the far tails of GELU must be 0 and x
GELU_BUDGET = (16, 256)


# What each checker tries, named as its contract names it (tests/test_contracts.py): (name, what it is)
_1D = ((f"n = {listed(SIZES)}", "sizes that no BLOCK divides, and one element; the first one's grid is recorded"),
       ("float32 and float16", "every size in both"),
       (f"n = {BUDGET_N}", "float32: the launches and bytes of one call are counted"))
CASES = {
    "vector_add": _1D,
    "scaled_add": _1D + ((f"alpha = {listed(_ALPHAS)}", "one alpha per case, in turn"),),
    "bias_gelu": ((listed([by(s) for s in GELU_SHAPES]), "(M, N): ragged N, then one element"),
                  ("fp32 and fp16", "every shape in both"),
                  (f"x × {GELU_SCALES[1]:g}", "every shape again with x scaled: GELU's far tails"),
                  (f"{by(GELU_BUDGET)} in fp32 and in fp16", "the launches and bytes of one call are counted")),
}


# On a GPU each case is also replayed through the bounds-checked interpreter, which records what the launch
# did (its arguments, its grid, its stores); the largest size would take the replay seconds, and is skipped.
REPLAYED_UP_TO = 4096


def _run_watched(fn, args, *, name: str, n: int, dtype, translate=None):
    """Run one case where every load and store is bounds-checked and the launch is recorded: the interpreter
    itself on a CPU; on a GPU, a replay through it before the real launch. Returns (out, the KernelCall of the
    one launch, or None)."""
    replay = ON_GPU and not INTERPRET
    with watching_launches() as calls:
        try:
            if replay and n <= REPLAYED_UP_TO:
                with trips.counting():
                    out = run(fn, *args, name=name)
            else:
                out = run(fn, *args, name=name)
        except CheckFailed as e:
            if str(e).startswith("Out-of-bounds"):
                raise CheckFailed(f"`{name}` with n = {n} ({str(dtype)[6:]}; {n} is not a multiple of your "
                                  f"BLOCK, so the last block is partial): {e}", e.diagnosis) from None
            if translate is not None:
                translate(e, f"n = {n}, {str(dtype)[6:]}")
            raise
    return out, (calls[-1] if len(calls) == 1 else None)


def _check_too_many_programs(n: int, launch, *, name: str) -> None:
    programs = launch.programs if launch is not None else None
    if programs is not None and programs >= n:
        fail(f"`{name}`: the answer is right, but the grid launched {programs} programs for n = {n} elements: "
             "one per element. Each program handles a whole block of BLOCK elements, so "
             "triton.cdiv(n, BLOCK) programs cover n; the others find every lane masked off and "
             "still cost a slot on the GPU.", "grid-per-element")


def _check_1d(fn, *, name: str, inputs, reference, wrong_answers, tol=None, n_inputs: int = 2,
              arguments=None, translate=None) -> Passed:
    """The common check of a 1-D element-wise exercise.

    inputs(n, dtype, case) -> the arguments; reference(*args) -> the right answer;
    wrong_answers(*args) -> (tensor, message, key) triples; n_inputs: how many of the arguments are
    n-element tensors (the bytes budget is (n_inputs + 1) * 4 * n for float32); arguments(launch, out, case,
    *args): the exercise's own rules about what the launch passed, run before the answer is compared;
    translate(error, case): raises the exercise's own diagnosis of an error the kernel raised, if it has one."""
    result = Passed(name)
    sizes = SIZES
    case = 0
    for dtype in (torch.float32, torch.float16):
        for n in sizes:
            args = inputs(n, dtype, case)
            what = f"n = {n}, {str(dtype)[6:]}"
            before = [(label, t, t.clone()) for label, t in zip("xy", args[:n_inputs])]
            out, launch = _run_watched(fn, args, name=name, n=n, dtype=dtype, translate=translate)
            inputs_kept(out, before, name=name, case=what, launch=launch)
            if arguments is not None:
                arguments(launch, out, what, *args)
            compare(out, reference(*args), name=name, like=args[0], wrong_answers=wrong_answers(*args),
                    tol=(tol(dtype) if tol else None), case=what, launch=launch)
            if case == 0:
                _check_too_many_programs(n, launch, name=name)
            result.cases.append(f"{str(dtype)[6:]} n = {n}")
            case += 1
    n = BUDGET_N
    traffic = budget(fn, inputs(n, torch.float32, case), name=name, launches=1, bytes=(n_inputs + 1) * 4 * n,
                     store_once=True)
    own_kernels(traffic, name, ": launch your @triton.jit kernel on a grid")
    result.traffic = traffic
    return result


def vector_add(fn) -> Passed:
    """fn(x, y) -> x + y for 1-D tensors of any length, in one Triton kernel."""
    def inputs(n, dtype, case):
        # y much larger than x: an answer that drops x (or y) cannot pass by being close
        return _randn(n, dtype=dtype), _randn(n, dtype=dtype, scale=1e3)

    def reference(x, y):
        return (x.float() + y.float()).to(x.dtype)

    def wrong_answers(x, y):
        return [(x, "the output equals x: is y loaded and added?", "one-input"),
                (y, "the output equals y: is x loaded and added?", "one-input"),
                (x + x, "the output is x + x: is the second load reading from x_ptr instead of y_ptr?",
                 "same-pointer"),
                (y + y, "the output is y + y: is the first load reading from y_ptr instead of x_ptr?",
                 "same-pointer"),
                (x - y, "the output is x - y", "subtract")]
    return _check_1d(fn, name="vector_add", inputs=inputs, reference=reference, wrong_answers=wrong_answers)


def scaled_add(fn) -> Passed:
    """fn(x, y, alpha) -> alpha * x + y for 1-D tensors of any length and a Python float alpha,
    in one Triton kernel."""
    def inputs(n, dtype, case):
        return _randn(n, dtype=dtype), _randn(n, dtype=dtype), _ALPHAS[case % len(_ALPHAS)]

    def reference(x, y, alpha):
        return (alpha * x.float() + y.float()).to(x.dtype)

    def wrong_answers(x, y, alpha):
        xf, yf, dt = x.float(), y.float(), x.dtype
        return [((xf + yf).to(dt), f"this is x + y: alpha (= {alpha}) is never applied.", "no-alpha"),
                ((xf + alpha * yf).to(dt), "this is x + alpha * y: alpha scales y; it belongs to x. If "
                 "the kernel does compute alpha * x, then x and y arrive swapped: compare the launch's arguments "
                 "with the kernel's parameters.", "alpha-on-y"),
                ((alpha * (xf + yf)).to(dt), "this is alpha * (x + y): alpha scales the sum; it belongs to x alone.",
                 "alpha-on-sum"),
                ((alpha * xf).to(dt), "this is alpha * x: y is never added.", "one-input"),
                (y, "the output equals y: is alpha * x added to it?", "one-input")]

    def tol(dtype):
        # In float16 the kernel may round alpha * x before adding y; allow that one extra rounding.
        return dict(atol=1e-2, rtol=4e-3) if dtype == torch.float16 else tolerance(dtype)

    def arguments(launch, out, what, x, y, alpha):
        _alpha_as_passed(launch, out, what, x, y, alpha)
    return _check_1d(fn, name="scaled_add", inputs=inputs, reference=reference, wrong_answers=wrong_answers,
                     tol=tol, arguments=arguments, translate=_alpha_loaded)


def _alpha_loaded(e: CheckFailed, case: str) -> None:
    """tl.load(alpha): a float where a pointer belongs. The interpreter fails inside tl.load with "'float' object
    has no attribute 'type'"; a GPU compilation with "Unsupported ptr type fp32" (Triton 3.6 compiling ahead: "triton.language.float32"). n, the other scalar, is an int."""
    text = _error_text(e)
    if "'float' object has no attribute 'type'" in text or ("Unsupported ptr type" in text and ("fp32" in text or "float32" in text)):
        raise CheckFailed(
            f"`scaled_add` ({case}): the kernel loads alpha as if it were a pointer (tl.load(alpha)). alpha arrives "
            "as a number, not as a pointer to one: use it directly (alpha * x), there is nothing to load. "
            "tl.load takes pointers, such as x_ptr + offsets.", "alpha-loaded") from None


def _alpha_as_passed(launch, out, what: str, x, y, alpha: float) -> None:
    """alpha must reach the kernel as a plain runtime argument, in the parameter that uses it: arguments in
    another order than the parameters (alpha and n swapped) leave the output to a mask against alpha, and a
    tl.constexpr alpha gives right numbers but compiles the kernel again for every value."""
    if launch is None:
        return
    params = list(launch.args)
    holders = [p for p, v in launch.args.items() if isinstance(v, float) and v == alpha]
    if "alpha" in launch.args and holders and "alpha" not in holders:
        got = launch.args["alpha"]
        fail(f"`scaled_add` ({what}): the kernel's parameter `alpha` received {got!r}, and `{holders[0]}` received "
             f"alpha = {alpha}. The launch passes its arguments in another order than the kernel's parameters "
             f"({', '.join(params)}): Triton matches them by position, as Python does, so each parameter got the "
             "other's value" + (f" (the mask compared the offsets with {alpha}, and the elements it let through were "
                                f"scaled by {got!r})" if holders[0] == "n" else "") +
             ". Pass them in the order the kernel declares them.", "argument-order")
    held_as_constant = [p for p in holders if p in launch.constexprs]
    if held_as_constant and isinstance(out, torch.Tensor) and not bool(unwritten(out).any()):
        p = held_as_constant[0]
        fail(f"`scaled_add`: `{p}` is declared tl.constexpr, so alpha = {alpha} was compiled into the kernel as "
             "a constant. The numbers can be right, but a constexpr is part of what Triton compiles: every new "
             f"value of alpha compiles a new kernel before it runs (this check's {len(_ALPHAS)} alphas, {len(_ALPHAS)} "
             "compilations; a training loop whose alpha changes every step, one per step), where a plain "
             f"parameter is read at run time by one compiled kernel. Declare `{p}` without tl.constexpr; keep "
             "tl.constexpr for BLOCK, which fixes a shape.", "alpha-constexpr")


def _gelu(v: torch.Tensor) -> torch.Tensor:
    return 0.5 * v * (1 + torch.erf(v / math.sqrt(2)))


def _error_text(e: BaseException) -> str:
    """The messages of an error and of what caused it, a few levels deep (a kernel's compilation error
    wraps the error of the line that failed)."""
    texts, seen = [], []
    while e is not None and len(seen) < 5 and e not in seen:
        seen.append(e)
        texts.append(f"{e} {getattr(e, 'error_message', '') or ''}")
        e = e.__cause__ or e.__context__
    return " ".join(texts)


def _run_bias_gelu(fn, x, b):
    """run(), with the diagnoses only bias_gelu needs: erf given half precision, and a bias read past
    its end (a flattened grid that forgot the % N)."""
    try:
        return run(fn, x, b, name="bias_gelu")
    except CheckFailed as e:
        text = _error_text(e)
        if "Expected dtype" in text and x.dtype != torch.float32:
            kind = str(x.dtype)[6:]
            raise CheckFailed(
                f"`bias_gelu` fails on {kind} input: tl.erf (like tl.exp and the other math functions) takes "
                f"fp32 or fp64 only, and was given {kind}. Convert right after the load, "
                "v = tl.load(...).to(tl.float32), and compute in fp32; tl.store converts what it stores to "
                f"the output's dtype by itself (lesson 01), so store the fp32 result into the {kind} output "
                "as it is. The conversions happen in registers and cost no trip.",
                "fp16-erf") from None
        if str(e).startswith("Out-of-bounds") and x.numel() != b.numel() and f"({b.numel()} elements)" in str(e):
            raise CheckFailed(
                f"{e}\nThat is the bias: it holds one value per column, {b.numel()} of them, not one per element "
                "of x. With a flattened grid the bias of flat offset o is b[o % N]; with a grid over "
                "(rows, column blocks) it is b[cols].", "bias-not-wrapped") from None
        raise


def bias_gelu(fn) -> Passed:
    """fn(x, b) -> gelu(x + b) for x of shape (M, N), b of shape (N,), exact (erf) GELU, in one kernel
    that moves each element of x and y once: in fp16 too, where converting with PyTorch costs trips."""
    result = Passed("bias_gelu")
    shapes = GELU_SHAPES
    if ON_GPU and not INTERPRET:   # bounds_check_on_gpu, through the diagnoses above
        with trips.counting():
            _run_bias_gelu(fn, _randn(5, 300), _randn(300))
    for dtype in (torch.float32, torch.float16):
        for (m, n) in shapes:
            for scale in GELU_SCALES:
                x, b = _randn(m, n, dtype=dtype, scale=scale), _randn(n, dtype=dtype)
                out = _run_bias_gelu(fn, x, b)
                xf, bf = x.float(), b.float()
                v = xf + bf
                tanh_gelu = torch.nn.functional.gelu(v, approximate="tanh").to(dtype)

                def erf_of(u):
                    # GELU's form with the erf taken of u, right only for u = v/√2. None where it cannot be
                    # told from x + b (erf(u) = 1 within the tolerance): that answer names it better.
                    alt = (0.5 * v * (1 + torch.erf(u))).to(dtype)
                    return None if torch.allclose(alt.double(), v.to(dtype).double(), **tolerance(dtype)) else alt
                compare(out, _gelu(v).to(dtype), name="bias_gelu", like=x, wrong_answers=[
                    (_gelu(xf).to(dtype), "this is gelu(x): the bias is never added.", "no-bias"),
                    (erf_of(v), "this takes erf(v); GELU takes erf(v/√2): multiply v by 0.7071067811865476 "
                                "(1/√2) inside the erf.", "erf-scale"),
                    (erf_of(v * math.sqrt(2)), "this takes erf(v·√2); GELU takes erf(v/√2): divide by √2, "
                                               "or multiply by 0.7071067811865476.", "erf-scale"),
                    (v.to(dtype), "this is x + b: GELU is never applied.", "no-gelu"),
                    (torch.relu(v).to(dtype), "this is relu(x + b), not GELU.", "relu"),
                    (_gelu(xf).to(dtype) + b, "this is gelu(x) + b: the bias goes in before the activation.",
                     "bias-after-gelu"),
                    (_gelu(xf + bf[:m, None]).to(dtype) if m <= n and m > 1 else None,
                     "the bias is indexed by row; it belongs to the columns (b[col]).", "bias-by-row"),
                    (tanh_gelu if scale == 1.0 and not torch.equal(tanh_gelu, _gelu(v).to(dtype)) else None,
                     "this is the tanh approximation; the exercise asks for the exact form "
                     "0.5·v·(1 + erf(v/√2)).", "tanh"),
                ], overflow_hint="GELU of a large |v| is v or 0: an exp() that overflows? Use erf.")
                result.cases.append(f"{str(dtype)[6:]} {by((m, n))}" + (f" x × {scale:g}" if scale != 1 else ""))
    m, n = GELU_BUDGET
    result.traffic = budget(fn, (_randn(m, n), _randn(n)), name="bias_gelu", launches=1,
                            bytes=4 * (2 * m * n + n))
    # fp16: 2 bytes in and 2 out per element. Casting with PyTorch outside the kernel is right in
    # value, and in fp32 costs nothing (x.float() of fp32 is x itself), so only fp16 shows it.
    half = (_randn(m, n, dtype=torch.float16), _randn(n, dtype=torch.float16))
    t = trips.count(run, fn, *half, name="bias_gelu", poison=False)
    casts = [k.name for k in t.kernels if k.name in ("aten._to_copy", "aten.copy_")]
    if casts:
        fail(f"`bias_gelu` gives the right numbers, but on float16 input it converts with PyTorch: "
             f"{len(casts)} × {casts[0]} besides your kernel, {t.launches} launches in all. Each conversion is "
             "a kernel of its own, a full trip through HBM and back. Pass the fp16 tensors to your kernel, "
             "convert after the load with .to(tl.float32), and store into an fp16 output "
             f"(torch.empty_like(x)).\n{t.table()}", "casts")
    budget(fn, half, name="bias_gelu", launches=1, bytes=2 * (2 * m * n + n))
    return result
