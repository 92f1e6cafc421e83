"""Help for the student, asked for: tiered hints for each exercise, and plain words for Triton's errors.

    hints.offer("bias_gelu")      -> a button per hint under the exercise, from the idea to the recipe
    hints.show("bias_gelu", 2)    -> hint 2 of that exercise (the same text the button opens)
    hints.opened()                -> {exercise: [tiers opened]}, from the student's log
    hints.explain(exc)            -> a one-sentence hint for a Triton error, or None
    hints.install()               -> in IPython/Jupyter: every traceback of a known error ends with "Hint: ..."

Exercise hints are written in the solution notebooks (a markdown cell tagged `hints`); the generator
collects them into exercise_hints.json beside this file and gives the student a `hints.offer` cell in
their place, so no hint is on the student's screen until asked for. Every hint opened is noted in the
student's log (journal), which the scoreboard counts. A checker's failure names the hint that
addresses its diagnosis (`pointer`).

Triton reports mistakes in its own vocabulary ("arange's range must be a power of 2", "Pointer
argument cannot be accessed from Triton (cpu tensor?)"), and the same mistake reads differently under
the CPU interpreter and on a GPU. Each rule below matches the text both of them produce.
"""
from __future__ import annotations

import functools
import html
import json
import os
from pathlib import Path

from . import environment as env
from . import journal

_NO_GRID = ("a @triton.jit function is launched with a grid, kernel[grid](...), not called like a Python "
            "function.")
_RAISE_IN_KERNEL = ("a kernel cannot raise. The interpreter ran this `raise` as Python; on a GPU the "
                    "kernel would not even compile. Replace the raise with the kernel's body.")

# Two hints that more than one message leads to.
_SHAPE_FOR_NUMBER = ("a shape (x.shape) reached the kernel where it expects a number: pass the element count, "
                     "x.numel(), or one dimension, x.shape[0].")
_NO_SUCH_AXIS = ("the reduction names an axis the value does not have. A block built from one tl.arange is 1-D: "
                 "its only axis is 0, so tl.max(x, axis=0) and tl.sum(x, axis=0) reduce it to one number; axis=1 "
                 "exists only in a 2-D block, rows by columns. (tl.max(a, b) reads b as the axis: the larger of "
                 "two values, lane by lane, is tl.maximum(a, b).)")
_TENSOR_FOR_CONSTEXPR = ("a tensor was passed where the kernel declares a tl.constexpr, a number fixed when the "
                         "kernel compiles (SCALE=0.99, BLOCK=1024): pass a plain Python number there.")

# (text to look for in the error's message or type name, or in those of its cause; the hint).
# The first match wins, so the specific rules come before the general ones.
_HINTS = [
    # tl.max(m, v), PyTorch's habit (torch.max(a, b) is element-wise): Triton reads v as the axis to reduce along,
    # and m, one value, has none. Before any rule on other "out of bounds" texts.
    ("out of bounds for shape []",
     "tl.max (like tl.sum and tl.min) reduces one block along an axis, and its second argument is that axis: "
     "tl.max(m, v) reads v as the axis, and m, a single value, has no axis to reduce. The larger of two values, "
     "or of two blocks lane by lane, is tl.maximum(m, v); the largest value of one block is tl.max(x, axis=0)."),
    ("arange's range must be a power of 2",
     "tl.arange(0, BLOCK) needs a power-of-two BLOCK (64, 128, 256, ...): pick one, or round up with "
     "triton.next_power_of_2(n), and let the mask switch off the lanes past the end."),
    ("must be of type tl.constexpr",
     "a size that shapes a block (BLOCK in tl.arange(0, BLOCK)) must be known when the kernel compiles: "
     "declare it `BLOCK: tl.constexpr` in the kernel's parameters and pass it at launch (BLOCK=256). A size "
     "known only when the kernel runs, such as n, cannot shape a block: cover n with blocks of BLOCK and mask "
     "the lanes past n."),
    ("module 'triton.language' has no attribute",
     "Triton's language has no function of that name. Inside a kernel, arithmetic is Python's operators "
     "(+, -, *, /) on the loaded vectors, and the math is tl's functions (tl.exp, tl.cos, tl.sqrt, ...): "
     "lesson 01's list, and Triton's documentation of triton.language for all of them."),
    ("must be Tensor, not tensor",
     "a PyTorch function (torch.add, torch.cos, ...) was called inside a kernel, on Triton's vectors. A kernel "
     "can call only Triton's functions (tl.*), Python's operators, a few Python built-ins (range, min, max) "
     "and other @triton.jit functions: write a + b, tl.cos(v) instead."),
    ("Unsupported function referenced",
     "the kernel calls a function Triton cannot compile: a PyTorch function (torch.add, torch.cos) or a plain "
     "Python one. A kernel can call only Triton's functions (tl.*), Python's operators, a few Python "
     "built-ins (range, min, max) and other @triton.jit functions: write a + b, tl.cos(v) instead."),
    # a reduction along an axis the value lacks: the interpreter's words, then the compiler's (before "constexpr",
    # which the interpreter's shape, ['constexpr[128]'], contains)
    ("out of bounds for shape", _NO_SUCH_AXIS),
    ("invalid axis", _NO_SUCH_AXIS),
    ("Mask argument cannot be block type",
     "tl.load or tl.store got a mask for a whole block but a single address: a pointer plus one number (a "
     "program id, a row index) points at one element. To load a block, add a block of offsets (built with "
     "tl.arange) to the pointer, as wide as the mask; to load one value, give no mask."),
    ("constexpr",
     "a value that fixes a shape must be a compile-time constant: declare it `NAME: tl.constexpr` in the "
     "kernel's parameters and pass it as a keyword at launch."),
    ("cannot be accessed from Triton",
     "a CPU tensor reached a kernel that runs on the GPU, which cannot read CPU memory: create tensors "
     "with device=cu.DEVICE, or move them with .to(cu.DEVICE)."),
    ("unsupported AST node type: Raise",
     "a kernel cannot raise: Triton compiles the @triton.jit function for the GPU, where there is no "
     "exception to raise. Remove the `raise` and write the kernel's body."),
    ("OutOfBounds",
     "a load or store reached outside its tensor. The interpreter stopped it; on a GPU it would read "
     "garbage or overwrite other memory without a word. Mask the tail: mask = offsets < n, passed to "
     "tl.load and tl.store."),
    ("illegal memory access",
     "a kernel touched memory outside its tensors (usually an unmasked tail or a grid too large). The GPU "
     "context is now broken: restart the Python kernel, fix the mask, and let a check replay your kernel "
     "in the bounds-checking interpreter."),
    ("object of type 'int' has no len()",
     "the grid must be a tuple, even in one dimension: kernel[(n_programs,)](...), with the comma."),
    ("'float' object cannot be interpreted as an integer",
     "the grid needs whole numbers of programs: triton.cdiv(n, BLOCK), not n / BLOCK."),
    ("exceeds triton maximum tensor numel",
     "the block is larger than Triton allows (2**20 elements): keep BLOCK in the hundreds or "
     "thousands and launch more programs."),
    ("Unsupported ptr type",
     "tl.load or tl.store got a number where a pointer belongs: compare the order of the arguments at "
     "the launch with the order of the kernel's parameters."),
    ("outside of the scope of a kernel", _NO_GRID),     # on a GPU; the interpreter's is found below
    ("No function definition found for kernel",
     "Triton compiles a kernel from its source, and found no `def name(...):` line in it: write the kernel "
     "as a plain function, `@triton.jit` on the line above `def`, in a file or a cell of its own (not a "
     "lambda, nor a function made by exec), and run that cell again."),
    ("required positional argument",
     "a call left out an argument its function declares. At a launch, pass every parameter of the kernel in "
     "the order of its `def`, the constexpr ones by name (BLOCK=...). The name in the message is the one "
     "left over at the end, not always the one forgotten: every argument after a forgotten one slides into "
     "the parameter before its own. Compare the launch with the kernel's first line, one by one."),
    ("got multiple values for argument",
     "an argument arrived twice, by position and by name: count the arguments before the first `name=` "
     "at the launch against the kernel's parameters; one too many spills into the parameter named later."),
    ("invalid operands of type pointer",
     "a pointer was used as a value. Either a tensor arrived where the kernel computes with a number (a tensor "
     "passed at launch becomes a pointer: pass a plain Python number for a scalar, float(alpha) or "
     "alpha.item()), or the load is missing: tl.load(x_ptr + offsets, mask=mask) gives the values."),
    ("'torch.Size' object", _SHAPE_FOR_NUMBER),
    # Triton 3.6 (the GPUs', Colab's) compiling for a GPU: the shape arrives as a tuple of integers
    ("of type <class 'triton.language.core.tuple'> to tensor", _SHAPE_FOR_NUMBER),
    ("has no attribute 'is_ptr'", _TENSOR_FOR_CONSTEXPR),
    ("'builtin_function_or_method' object has no attribute 'scalar'", _TENSOR_FOR_CONSTEXPR),   # Triton 3.6, GPU
    ("out of resource",
     "the block needs more on-chip memory than one SM has: use a smaller BLOCK."),
]

_TRITON_DIR = os.path.dirname(os.path.abspath(__import__("triton").__file__))
_COURSE_DIR = os.path.dirname(os.path.abspath(__file__))


def _chain(exc: BaseException, depth: int = 3):
    """exc, then what caused it or was being handled when it was raised, a few levels deep."""
    seen = []
    while exc is not None and len(seen) < depth and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _message(exc: BaseException) -> str:
    # A CompilationError's text quotes the kernel's source (where `tl.constexpr` may well appear):
    # match its own message only.
    return f"{type(exc).__name__}: {getattr(exc, 'error_message', None) or exc}"


def _frames(exc: BaseException):
    tb = exc.__traceback__
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def _in(frame, folder: str) -> bool:
    return os.path.abspath(frame.f_code.co_filename).startswith(folder)


def _raised_in_interpreted_kernel(exc: BaseException) -> bool:
    """Under TRITON_INTERPRET a `raise` in a kernel runs: it arrives as that very exception, raised
    while the interpreter ran a program (its context is Triton's InterpreterError), from the kernel's
    own code. The course's stub NotImplementedError is raised outside any kernel."""
    ctx = exc.__context__
    if ctx is None or type(ctx).__name__ != "InterpreterError":
        return False
    frames = list(_frames(exc))
    return bool(frames) and not (_in(frames[-1], _TRITON_DIR) or _in(frames[-1], _COURSE_DIR))


def _called_without_grid(exc: BaseException) -> bool:
    """Under the interpreter `kernel(...)` runs the kernel as a device function, outside any grid,
    and fails somewhere inside with a message that says nothing useful."""
    first = next((f for f in _frames(exc) if _in(f, _TRITON_DIR)), None)
    return (first is not None and first.f_code.co_name == "__call__"
            and type(first.f_locals.get("self")).__name__ == "InterpretedFunction")


def _source_without_def(exc: BaseException) -> bool:
    """Triton 3.6 looks for the kernel's `def` line with a regular expression and, finding none (a jitted
    lambda), fails on the missing match: an AttributeError inside its jit module (later releases say it)."""
    for e in _chain(exc):
        if isinstance(e, AttributeError) and "attribute 'start'" in str(e):
            frames = list(_frames(e))
            if frames and _in(frames[-1], _TRITON_DIR) and frames[-1].f_code.co_filename.endswith("jit.py"):
                return True
    return False


def _indexed_a_pointer(exc: BaseException) -> bool:
    """`x_ptr[offsets]`, a tensor's indexing written on a kernel's pointer: Triton's __getitem__ fails inside,
    with a TypeError ("not iterable") under the interpreter, and compiled by Triton 3.6 (the GPUs', Colab's)
    with a ValueError that asks whether @triton.jit was forgotten, which it was not."""
    for e in _chain(exc):
        if (isinstance(e, TypeError) and "not iterable" in str(e) or
                isinstance(e, ValueError) and "_semantic" in str(e)) and any(
                _in(f, _TRITON_DIR) and f.f_code.co_name == "__getitem__" for f in _frames(e)):
            return True
    return False


def explain(exc: BaseException) -> str | None:
    """A plain hint for the Triton errors students meet most, or None: never for a check's own verdict."""
    if _a_verdict(exc):
        return None
    compiled = compile_diagnosis(exc)
    if compiled is not None and compiled[1] is not None:
        return compiled[0]
    return _explain(exc)


def _explain(exc: BaseException) -> str | None:
    if _raised_in_interpreted_kernel(exc):
        return _RAISE_IN_KERNEL
    if _called_without_grid(exc):
        return _NO_GRID
    if _indexed_a_pointer(exc):
        return ("a kernel does not index a pointer like a tensor (x_ptr[offsets]): it adds the offsets to "
                "the pointer and loads, tl.load(x_ptr + offsets, mask=mask), and stores the same way.")
    if _source_without_def(exc):
        return dict(_HINTS)["No function definition found for kernel"]
    text = " | ".join(_message(e) for e in _chain(exc))
    for needle, hint in _HINTS:
        if needle in text:
            return hint
    return None


# --- a kernel a GPU refuses to compile ------------------------------------------------------------------
# The interpreter runs a kernel as Python, so it runs what a GPU compile refuses. On a GPU the refusal comes at the
# launch; on the CPU a check compiles each launch for the course's GPUs first (course_utils/gpu_compile.py). Either
# way it is a CompilationError, told here in the course's words: (message, diagnosis key). The keys: "block-if" (a
# Python `if` or `while` on a block), "global" (a plain global read in a kernel), "undefined-name" (a name the kernel
# neither receives nor assigns: a typo of a parameter, a helper never defined), "fp16-acc" (an fp16 accumulator that a
# loop turns fp32), "loop-dtype" (any other loop-carried variable whose dtype a loop changes).


def _compilation_error(exc: BaseException):
    from triton.compiler.errors import CompilationError
    return next((e for e in _chain(exc, 5) if isinstance(e, CompilationError)), None)


def compile_diagnosis(exc: BaseException) -> tuple[str, str | None] | None:
    """For a Triton CompilationError in exc's chain: (a diagnosis that names the kernel's line and the cause, its
    key: one of those above, or None where the cause is not one the course recognises). None for any other
    error."""
    error = _compilation_error(exc)
    if error is None:
        return None
    import re
    from . import gpu_compile
    where = getattr(error, "course_where", None) or gpu_compile.locate(error)
    inner = where["error"]
    why = str(inner.error_message or "").strip()
    triton_says = why.splitlines()[0] if why else ""
    kernel = where["kernel"] or "the kernel"
    code = _without_comment(where["code"])
    place = ", ".join(filter(None, [f"line {where['line']}" if where["line"] else "", f"`{code}`" if code else ""]))
    target = getattr(error, "course_target", None)
    head = (f"`{kernel}` does not compile for a GPU" + (f" ({target}, compiled here as the course's GPUs would)"
                                                        if target else "") + (f": {place}" if place else ""))
    said = f' (Triton: "{_short(triton_says)}")'
    interpreted = (" The interpreter ran it anyway, as Python; a GPU refuses it at the launch." if target else "")
    params = _parameters(inner.src or "")

    if "Boolean value of Tensor with more than one value is ambiguous" in why or (
            "scf.condition" in why and "tensor<" in why):
        if code.startswith("while") or "scf.condition" in why:   # MLIR's verifier says it, in MLIR's words
            return (f"{head}, is a Python `while` on a block. The condition holds one value per lane, and the lanes "
                    "of a program run the same instructions together, so they cannot each stop their own loop."
                    f"{interpreted} Loop a number of times every lane shares (for i in range(steps)), and let "
                    "tl.where(cond, a, b) decide per lane what each step changes.", "block-if")
        return (f"{head}, is a Python `if` on a block{said}. The condition holds one value per lane, and the lanes "
                "of a program run the same instructions together, so Python's `if` cannot take a branch for each "
                f"lane.{interpreted} Choose per lane with tl.where(cond, a, b); to switch off the lanes past the end, "
                "give the condition to tl.load and tl.store as their mask (mask=offsets < n).", "block-if")

    found = re.search(r"Cannot access global variable (\w+)", why)
    if found or re.search(r"(\w+) is not defined", why):
        name = found[1] if found else re.search(r"(\w+) is not defined", why)[1]
        close = _closest(name, params)
        value = _global_value(where["function"], name) if found else None
        if close or not found:
            read = (f" The interpreter read your notebook's global `{name}`{f' (= {value})' if value else ''} in "
                    "its place." if found and target else "")
            if re.search(rf"\b{name}\s*\(", code) and not close:
                return (f"{head}: `{name}` is called but defined nowhere the kernel can see{said}. A function a "
                        "kernel calls is a @triton.jit function defined before the launch (its cell run), or one "
                        "of Triton's (tl.*): is it spelled as defined?", "undefined-name")
            mean = f" Did you mean `{close}`, the kernel's parameter?" if close else (
                " Is it a parameter missing from the `def`, or a variable assigned only below this line?")
            return (f"{head}, uses `{name}`, which the kernel neither receives as a parameter nor assigns{said}."
                    f"{read}{mean}", "undefined-name")
        example = f"tl.constexpr({value})" if value else "tl.constexpr(...)"
        return (f"{head}, reads `{name}`, a global of your notebook or module, and a compiled kernel reads only its "
                f"arguments and the constants fixed when it compiles{said}.{interpreted} Pass `{name}` as an "
                f"argument, write its value in the kernel, or define it as a compile-time constant: `{name} = "
                f"{example}` (a `{name}: tl.constexpr = ...` annotation does not make one).", "global")

    found = re.search(r"Loop-carried variable (\w+) has initial type (.+?) but is re-assigned to (.+?) in loop", why)
    if found:
        var, before, after = found[1], _dtype(found[2]), _dtype(found[3])
        start = _assigned_before(inner.src or "", var, getattr(inner.node, "lineno", None), before)
        started = f" `{start}` starts it as {before}" if start else f" `{var}` enters the loop as {before}"
        low = before in ("fp16", "bf16") and after == "fp32"
        if low:
            fix = (f"Start the accumulator in fp32, tl.zeros(..., dtype=tl.float32): tl.dot of {before} blocks "
                   f"adds up in fp32, and so does the running sum; convert once, as you store.")
        elif before.startswith("int") and after.startswith(("fp", "bf")):
            fix = f"Start it as a float (0.0, or tl.zeros(..., dtype=tl.{_torch_name(after)}))."
        else:
            fix = f"Start it with the dtype the loop gives it, {after}, or convert inside the loop to {before}."
        return (f"{head}: the loop changes the dtype of `{var}`.{started}, and an iteration leaves it {after}; a "
                f"compiled loop keeps each variable's type fixed{said}.{interpreted} {fix}",
                "fp16-acc" if low else "loop-dtype")

    hint = _explain(inner)
    return (f"{head}: {triton_says or type(inner).__name__}." + (f"\nHint: {hint}" if hint else ""), None)


def _short(text: str, limit: int = 160) -> str:
    """Triton's sentence, up to its first full stop (its messages go on with advice of their own)."""
    text = text.strip().removeprefix("NameError(").removeprefix("AssertionError(").strip("\"')")
    cut = min((i for i in (text.find(". "), text.find("! ")) if i > 0), default=-1)
    text = text[:cut + 1] if 0 < cut < limit else text
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return text.rstrip(".")


def _without_comment(line: str) -> str:
    """A line of code as written, less its comment."""
    import io
    import tokenize
    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type == tokenize.COMMENT:
                return line[:token.start[1]].rstrip()
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return line


def _dtype(text: str) -> str:
    """fp16 from "fp16" (Triton 3.6) or from "<['16', '16'], fp16>" (3.9)."""
    import re
    found = re.findall(r"[a-z]+\d+\w*", text)
    return found[-1] if found else text.strip()


def _torch_name(dtype: str) -> str:
    return {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}.get(dtype, dtype)


def _parameters(src: str) -> list[str]:
    import ast
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return []
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    return [a.arg for a in fn.args.args] if fn is not None else []


def _closest(name: str, params: list[str]) -> str | None:
    """The parameter `name` most likely means: the same but for case (k for K), else a near spelling."""
    import difflib
    same = [p for p in params if p.lower() == name.lower() and p != name]
    if same:
        return same[0]
    near = difflib.get_close_matches(name, params, n=1, cutoff=0.8)
    return near[0] if near else None


def _global_value(fn, name: str) -> str | None:
    """The value of the global the kernel's function fn read, as a literal for the message, when it is a number."""
    value = getattr(fn, "__globals__", {}).get(name)
    return repr(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _assigned_before(src: str, var: str, before_line: int | None, dtype: str) -> str | None:
    """The line before line `before_line` of src that assigns var, where a loop-carried variable starts: the last
    one that names its dtype (fp16: float16, fp16 or half), else the last."""
    import re
    lines = src.split("\n")[:(before_line - 1) if before_line else None]
    found = [ln.strip() for ln in lines if re.match(rf"\s*{re.escape(var)}\s*(:[^=]*)?=[^=]", ln)]
    names = {dtype, _torch_name(dtype), {"fp16": "half", "fp32": "float", "int32": "int"}.get(dtype, dtype)}
    named = [ln for ln in found if any(re.search(rf"\b{n}\b", ln) for n in names)]
    return (named or found or [None])[-1]


# --- IPython: end the traceback of a known error with its hint -----------------------------------------
_installed_on = []  # the shells whose handler we set


def _a_verdict(exc: BaseException) -> bool:
    """A check's or a grader's failure (CheckFailed, GradeFailed; found by name, since both modules import this
    one), or a message that already carries its hint: it says the cause itself, and a generic translation of
    words it happens to contain ("declare alpha without tl.constexpr") would contradict it."""
    names = {k.__name__ for k in type(exc).__mro__}
    text = str(exc)
    return bool(names & {"CheckFailed", "GradeFailed"}) or "Hint:" in text or "See hint " in text


def _show_with_hint(shell, etype, value, tb, tb_offset=None):
    """IPython's custom exception handler: the traceback as usual, then one line of hint."""
    try:
        hint = None if _a_verdict(value) else explain(value)
    except Exception:  # noqa: BLE001  (a hint must never hide the error itself)
        hint = None
    if hint is None:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return None
    stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    stb = list(stb) + [f"\x1b[1;33mHint:\x1b[0m {hint}"]
    shell._showtraceback(etype, value, stb)
    if getattr(shell, "call_pdb", False):
        shell.debugger(force=True)
    return stb


def install(shell=None) -> bool:
    """In IPython or Jupyter, end each traceback of a known Triton error with a one-line hint.
    Returns False (and does nothing) outside IPython. Harmless to call again."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False
    if shell not in _installed_on:
        shell.set_custom_exc((Exception,), _show_with_hint)
        _installed_on.append(shell)
    return True


def uninstall(shell=None) -> None:
    """Put IPython's own error display back."""
    if shell is None:
        from IPython import get_ipython
        shell = get_ipython()
    if shell in _installed_on:
        shell.set_custom_exc((), None)
        _installed_on.remove(shell)



# --- tiered hints for each exercise -------------------------------------------------------------------
HINTS_FILE = Path(__file__).with_name("exercise_hints.json")
_offered: list[str] = []   # exercises offered in this process: what the scoreboard reports on


@functools.cache
def _all() -> dict:
    try:
        return json.loads(HINTS_FILE.read_text(encoding="utf-8"))
    except OSError:
        return {}


def tiers(exercise: str) -> list[dict]:
    """The hints of one exercise, in order: each a dict with title, text and addresses (the diagnosis keys
    of the checker that it helps with)."""
    known = _all()
    if exercise not in known:
        raise KeyError(f"no hints for {exercise!r}; exercises with hints: {', '.join(sorted(known)) or 'none'}. "
                       "(They are made by `python tools/generate.py` from the solution notebooks.)")
    return known[exercise]["hints"]


def _heading(exercise: str, n: int, hint: dict) -> str:
    return f"Hint {n} of {len(tiers(exercise))} for {exercise}: {hint['title']}"


def show(exercise: str, n: int):
    """Show hint n (1 = the idea) of `exercise`, and note in the log that it was opened."""
    hs = tiers(exercise)
    if not isinstance(n, int) or not 1 <= n <= len(hs):
        raise ValueError(f"{exercise} has hints 1 to {len(hs)}; asked for {n!r}")
    hint = hs[n - 1]
    journal.append({"hint": exercise, "tier": n, "title": hint["title"]})
    if env.in_notebook():
        from IPython.display import Markdown, display
        display(Markdown(f"**{_heading(exercise, n, hint)}**\n\n{hint['text']}"))
    else:
        print(f"{_heading(exercise, n, hint)}\n{hint['text']}")


def offer(exercise: str):
    """Under an exercise: one button per hint. Nothing is shown until the student presses one."""
    hs = tiers(exercise)
    if exercise not in _offered:
        _offered.append(exercise)
    titles = "; ".join(f"{i} {h['title']}" for i, h in enumerate(hs, 1))
    # a lab's hints stop at the idea (the lab is graded); a lesson's go on to the recipe
    reach = "ideas only: the lab is yours to design" if "." in exercise else "from the idea to the recipe"
    if not env.live():
        print(f"{len(hs)} hints for {exercise}, {reach} ({titles}). "
              f"Open one with cu.hints.show({exercise!r}, 1).")
        return None
    import ipywidgets as w
    from IPython.display import display
    out = w.Output()
    buttons = []
    for i, h in enumerate(hs, 1):
        b = w.Button(description=f"Hint {i}: {h['title']}", tooltip=f"opens hint {i}; opening it is noted in your log",
                     layout=w.Layout(width="auto"))

        def on_click(_, i=i, b=b):
            b.button_style = "info"
            with out:
                show(exercise, i)
        b.on_click(on_click)
        buttons.append(b)
    note = w.HTML(f"<i>Stuck on {html.escape(exercise)}? Hints, {reach}: open the first one first.</i>")
    display(w.VBox([note, w.HBox(buttons), out]))
    return None


def opened(exercises=None) -> dict[str, list[int]]:
    """{exercise: sorted tiers opened}, from the log: every exercise, or those named."""
    seen: dict[str, set] = {}
    for e in journal.entries():
        if e.get("hint") is not None and isinstance(e.get("tier"), int):
            seen.setdefault(str(e["hint"]), set()).add(e["tier"])
    return {ex: sorted(t) for ex, t in seen.items() if exercises is None or ex in exercises}


def summary(exercises=None) -> str:
    """One line for the scoreboard: the hints opened for the exercises offered here (or those named)."""
    exercises = list(_offered) if exercises is None else list(exercises)
    if not exercises:
        return ""
    got = opened(exercises)
    parts = []
    for ex in exercises:
        try:
            total = len(tiers(ex))
        except KeyError:
            continue
        used = got.get(ex, [])
        parts.append(f"{ex} {len(used)} of {total}" + (f" (hint {', '.join(map(str, used))})" if used else ""))
    return "hints opened: " + "; ".join(parts) if parts else ""


def pointer(exercise: str, diagnosis: str | None) -> str:
    """The sentence a failed check ends with: which hint addresses this diagnosis, or "" if none does."""
    if not diagnosis:
        return ""
    try:
        hs = tiers(exercise)
    except KeyError:
        return ""
    for i, h in enumerate(hs, 1):
        if diagnosis in h.get("addresses", ()):
            return (f"See hint {i} ({h['title']}): its button under the exercise, or "
                    f"cu.hints.show({exercise!r}, {i}).")
    return ""
