"""Compile a Triton kernel for a GPU that is not here: the front end for a check, the whole way for a tool.

Triton compiles for a target it does not have: given the target (`gpu_target(cc)`), its front end (the kernel's
Python to Triton's IR) and its backend down to the cubin (ptxas included) run on a CPU. Two users:

- a check, on the interpreter (`compiling_launches()`, which check/_core.run wraps around the student's function).
  The interpreter runs a kernel as Python, so it runs what a GPU compile refuses: a plain global read in a kernel, a
  Python `if` on a block, a loop-carried variable whose dtype changes, a name the kernel never defined that the
  notebook happens to have. So each launch is compiled first, with its real argument types and constexprs, for the
  course's GPU targets (CHECKED: the T4's sm_75 and the H100's sm_90; the front end judges a kernel without fp8
  alike for both, so it runs for the first alone: `_depends_on_target`), and the GPU's error is raised where the GPU
  would raise it, at the launch, before the interpreter runs anything. Only the front end runs (`front_end`, the AST
  to TTIR): it is where those errors arise, at a fraction of the cost of the rest (compile_launch's docstring has
  the measurements). Each (kernel and the globals it reads, argument types, constexprs, target) is compiled once a
  process (`_verdicts`); a launch already judged costs a lookup of about 0.04 ms.
- tools/compile_targets.py, which plays each supported GPU and compiles what every notebook launches
  (`compile_launch(..., until="llir")` in CI, "cubin" for the full table).

On a GPU none of this runs for a check: the launch compiles for real, and its CompilationError reaches the check
the same way (hints.compile_diagnosis turns either into the course's words).
"""
from __future__ import annotations

import contextlib
import inspect
import types

from . import _interp, capability

CHECKED = (capability.SMALLEST_CC, capability.REFERENCE_CC)   # the T4 (sm_75) and the H100 / H200 (sm_90)


def gpu_target(cc):
    """Triton's name for the NVIDIA GPU of compute capability cc, e.g. (9, 0): what it compiles for."""
    from triton.backends.compiler import GPUTarget
    return GPUTarget("cuda", cc[0] * 10 + cc[1], 32)


_backends: dict = {}


def _backend(cc):
    if cc not in _backends:
        from triton.compiler.compiler import make_backend
        _backends[cc] = make_backend(gpu_target(cc))
    return _backends[cc]


# --- compiling a launch ---------------------------------------------------------------------------------
def _stop_after_llir(kernel_name: str):
    """A knobs.runtime.add_stages_inspection_hook that ends Triton's pipeline at the LLVM IR: the shared memory
    a kernel needs is known there; LLVM's code generation and ptxas, minutes for a T4's tl.dot kernels, are
    left out (and with them the registers and spills)."""
    def hook(*args):
        if not args:              # Triton asks for a key first: this pipeline is cached apart
            return "llir-only", "llir-only-1"
        stages = args[1]          # (backend, stages, options, language, capability)

        def no_ptx(src, metadata):
            metadata["name"] = kernel_name   # what make_ptx would have read from the PTX
            return ""
        stages["ptx"] = no_ptx
        stages["cubin"] = lambda src, metadata: b""
    return hook


def front_end(fn, signature, constexprs, attrs, options, cc):
    """The kernel's Triton IR for target cc, as Triton's front end makes it from the kernel's Python (the AST to
    TTIR, nothing written to disk, none of the later passes); raises the CompilationError a GPU would raise. fn is
    a JITFunction; the rest is what the JIT passes to its compiler for one launch (`signature_of`).

    What MLIR's verifier refuses (a Python `while` on a block) reaches Python as "RuntimeError: error encountered
    during parsing", its reason printed on the process's stderr and the whole module on stdout: both are kept off
    the student's screen, and the reason raised as the CompilationError of its line."""
    from triton.compiler.compiler import ASTSource
    backend, target = _backend(cc), gpu_target(cc)
    src = ASTSource(fn, signature, constexprs, attrs)
    printed: list = []
    try:
        with _kept_quiet(printed):
            module = src.make_ir(target, options, backend.get_codegen_implementation(options),
                                 backend.get_module_map(), _context(cc))
    except RuntimeError as e:
        refused = _verifier_error(fn, "".join(printed))
        if refused is None:
            raise
        raise refused from e
    if "".join(printed).strip():   # a warning of Triton's while it compiled (`and` on blocks...): the student's
        import sys
        sys.stderr.write("".join(printed))
    return module


_contexts: dict = {}


def _context(cc):
    """An MLIR context with Triton's dialects and the target's loaded: made once a target (5-10 ms each time)."""
    if cc not in _contexts:
        from triton._C.libtriton import ir
        context = ir.context()
        ir.load_dialects(context)
        _backend(cc).load_dialects(context)
        _contexts[cc] = context
    return _contexts[cc]


def _kept_quiet(into: list):
    """Inside the block, what is written on file descriptor 2 (MLIR's diagnostics, from C++) and on sys.stdout
    (Triton prints a module that fails to verify) goes into `into`, not on the student's screen."""
    import io
    import os
    import sys
    import tempfile

    @contextlib.contextmanager
    def kept():
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        printed = io.StringIO()
        with tempfile.TemporaryFile() as tmp, contextlib.redirect_stdout(printed):
            held = os.dup(2)
            os.dup2(tmp.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(held, 2)
                os.close(held)
                tmp.seek(0)
                into.append(tmp.read().decode(errors="replace") + printed.getvalue())
    return kept()


def _verifier_error(fn, printed: str):
    """The CompilationError of the first "file:line:col: error: why" MLIR printed, placed in fn's source; None
    where it printed none."""
    import re
    from triton.compiler.errors import CompilationError
    found = re.search(r"^(.*?):(\d+):(\d+): error: (.*)$", printed, re.MULTILINE)
    if found is None:
        return None
    line, col, why = int(found[2]), int(found[3]), found[4].strip()
    first = _def_line(fn.fn)
    at = line - first + 1 if first is not None and found[1] == fn.fn.__code__.co_filename else None
    node = types.SimpleNamespace(lineno=at, col_offset=col - 1) if at and at >= 1 else types.SimpleNamespace()
    return CompilationError(fn.src, node, why)


_def_lines: dict = {}


def _def_line(py_fn) -> int | None:
    """The line of the file (or notebook cell) where py_fn's `def` stands, below its decorators."""
    code = py_fn.__code__
    if code not in _def_lines:
        try:
            lines, start = inspect.getsourcelines(py_fn)
            _def_lines[code] = start + next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("def "))
        except (OSError, TypeError, StopIteration):
            _def_lines[code] = None
    return _def_lines[code]


def locate(error) -> dict:
    """Where a CompilationError is: {"kernel": the function's name, "line": its line in the file or cell (None if
    unknown), "code": that line's text, "error": the innermost CompilationError (a helper's, when the kernel's
    error wraps the one of a @triton.jit function it calls), "function": the Python function of that line (None if
    not found)}."""
    from triton.compiler.errors import CompilationError
    inner = error
    while isinstance(inner.__cause__, CompilationError):
        inner = inner.__cause__
    src = getattr(inner, "src", None) or ""
    lines = src.split("\n")
    name = next((ln.split("def ", 1)[1].split("(")[0].strip() for ln in lines if ln.lstrip().startswith("def ")), "")
    relative = getattr(getattr(inner, "node", None), "lineno", None)
    code = lines[relative - 1].strip() if relative and relative <= len(lines) else ""
    py_fn = _compiled_function(error, inner, src, name)
    first = _def_line(py_fn) if py_fn is not None else None
    line = first + relative - 1 if first is not None and relative else None
    return {"kernel": name, "line": line, "code": code, "error": inner, "function": py_fn}


def _compiled_function(error, inner, src: str, name: str):
    """The Python function whose source `src` is: the kernel the frames of the compile hold (a JITFunction, or
    the ASTSource's), or a helper of that name among its globals. (Triton strips its code generator's frames
    from a compile error's traceback, so the helper's own JITFunction is not among them.)"""
    held = [getattr(error, "course_kernel", None)]
    for e in (inner, error):
        tb = e.__traceback__
        while tb is not None:
            local = tb.tb_frame.f_locals
            for value in (local.get("self"), local.get("src"), local.get("jit_fn"), local.get("fn")):
                held += [value, getattr(value, "fn", None), getattr(value, "jit_fn", None)]
            tb = tb.tb_next
    kernels = [k for k in held if isinstance(getattr(k, "src", None), str) and callable(getattr(k, "fn", None))]
    for k in kernels:
        if k.src == src:
            return k.fn
    for k in kernels + [f for f in held if isinstance(f, types.FunctionType)]:
        helper = getattr(k, "fn", k).__globals__.get(name)
        if isinstance(getattr(helper, "src", None), str) and helper.src == src:
            return helper.fn
        if callable(getattr(helper, "fn", None)) and getattr(helper.fn, "__name__", None) == name:
            return helper.fn
    return None


def compile_launch(fn, signature, constexprs, attrs, options, cc, until: str = "cubin"):
    """One recorded launch of fn (a JITFunction) compiled for cc: until "ttir", the Triton IR its front end makes
    (front_end); "llir", a CompiledKernel without PTX or cubin (its metadata.shared is known); "cubin", the whole
    way. Measured on a 2-core machine (Triton 3.9, median of 3, Triton's cache empty; sm_75 and sm_90 alike):
    lesson 03's add_kernel 3.5 ms to its TTIR, 55 ms to its PTX (no ptxas), 75 ms to its cubin; lesson 04's
    flattened bias + GELU 6-13, 165 and 180-240 ms; lesson 06's softmax row 10, 66 and 96-116 ms; lesson 07's
    matmul (tl.dot) 34-74, 590-730 and 770-820 ms. The front end is a tenth of the way to the PTX, or less."""
    if until == "ttir":
        return front_end(fn, signature, constexprs, attrs, options, cc)
    import triton
    src = triton.compiler.ASTSource(fn, signature, constexprs, attrs)
    if until == "cubin":
        return triton.compile(src, target=gpu_target(cc), options=options.__dict__)
    if until != "llir":
        raise ValueError(f"compile_launch: until is 'ttir', 'llir' or 'cubin', not {until!r}")
    held = triton.knobs.runtime.add_stages_inspection_hook
    triton.knobs.runtime.add_stages_inspection_hook = _stop_after_llir(fn.__name__)
    try:
        return triton.compile(src, target=gpu_target(cc), options=options.__dict__)
    finally:
        triton.knobs.runtime.add_stages_inspection_hook = held


def _binder(fn, cc):
    """The JIT's own function that binds a launch's arguments for target cc (made once per kernel and target)."""
    binders = fn.__dict__.setdefault("_course_binders", {})
    if cc not in binders:
        from triton.runtime.jit import create_function_from_signature
        binders[cc] = create_function_from_signature(fn.signature, fn.params, _backend(cc))
    return binders[cc]


def signature_of(fn, args, kwargs, cc):
    """(signature, constexprs, attrs, options) of fn(*args, **kwargs) launched on cc, exactly as the JIT derives
    them before it compiles (argument types, the integers it specializes, the pointers' alignment). fn is a
    JITFunction."""
    bound, specialization, options = _binder(fn, cc)(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(_backend(cc), kwargs, bound, specialization, options)
    return signature, constexprs, attrs, options


def describe(error: BaseException) -> str:
    """One line for a compile error: Triton's own message, and where in the kernel (a CompilationError's first
    line is only "at 5:55:")."""
    from triton.compiler.errors import CompilationError
    while isinstance(error.__cause__, CompilationError):   # a helper's error, wrapped by its caller's
        error = error.__cause__
    message = getattr(error, "error_message", None)
    node, src = getattr(error, "node", None), getattr(error, "src", None)
    if message is None:
        text = str(error).strip().splitlines()
        return f"{type(error).__name__}: {text[0][:200] if text else ''}"
    line = getattr(node, "lineno", None)
    code = src.split("\n")[line - 1].strip() if src and line and line <= len(src.split("\n")) else ""
    return f"{type(error).__name__}: {str(message).splitlines()[0][:200]}" + (f" (at `{code}`)" if code else "")


# --- the interpreter's kernels, compiled ------------------------------------------------------------------
# Under TRITON_INTERPRET every @triton.jit function is an InterpretedFunction, Triton's own tl.sum and tl.cdiv
# included, and Triton's compiler takes none of them. Each gets a twin, a JITFunction of the same Python
# function, in place of the original while a compile runs: in triton.language, and in the globals of the
# kernel and of the helpers it calls.
_twins: dict = {}   # InterpretedFunction -> its JITFunction twin


def _interpreted(value) -> bool:
    return type(value).__name__ == "InterpretedFunction" and hasattr(value, "fn")


def _twin(f):
    if f not in _twins:
        from triton.runtime.jit import JITFunction
        accepted = inspect.signature(JITFunction.__init__).parameters
        _twins[f] = JITFunction(f.fn, **{k: v for k, v in getattr(f, "kwargs", {}).items() if k in accepted})
    return _twins[f]


def _names(code) -> set:
    """The global names a function's code (and the code nested in it) may read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _helpers(fn, seen: dict) -> dict:
    """{id(globals): (globals, {name: InterpretedFunction})} for fn and every @triton.jit function it reaches."""
    g = fn.__globals__
    found = seen.setdefault(id(g), (g, {}))[1]
    for name in _names(fn.__code__):
        value = g.get(name)
        if _interpreted(value) and name not in found:
            found[name] = value
            _helpers(value.fn, seen)
    return seen


@contextlib.contextmanager
def _twins_in_place(fn):
    """While the block runs, the twins stand where the interpreted functions were: in triton.language and in
    the globals the kernel and its helpers read."""
    reached = _helpers(fn, {})
    with _interp.language_as_imported(lambda v: _twin(v) if _interpreted(v) else v):
        for g, found in reached.values():
            g.update({name: _twin(f) for name, f in found.items()})
        try:
            yield
        finally:
            for g, found in reached.values():
                g.update(found)


def _fingerprint(fn, seen=None) -> tuple:
    """What decides whether fn compiles, besides its arguments: its code, and each global it reads (a helper by
    its own fingerprint, a module by name, a number by value and type, anything else by identity)."""
    seen = set() if seen is None else seen
    if fn in seen:
        return (fn.__code__,)
    seen.add(fn)
    from triton.language import constexpr
    g, refs = fn.__globals__, []
    for name in sorted(_names(fn.__code__)):
        if name not in g:
            continue
        v = g[name]
        if _interpreted(v) or hasattr(v, "fn") and type(v).__name__ == "JITFunction":
            refs.append((name, _fingerprint(v.fn, seen)))
        elif isinstance(v, types.ModuleType):
            refs.append((name, "module", v.__name__))
        elif isinstance(v, (bool, int, float, str, type(None))):
            refs.append((name, type(v).__name__, v))
        elif isinstance(v, constexpr):
            refs.append((name, "constexpr", repr(v.value)))
        else:
            refs.append((name, type(v).__qualname__, id(v)))
    return (fn.__code__, tuple(refs))


_verdicts: dict = {}   # (fingerprint, signature, constexprs, cc) -> None (it compiles) or its CompilationError


def verdict(interpreted, args, kwargs, ccs=CHECKED):
    """None if this launch of an interpreted kernel compiles for every target in ccs, else the first
    CompilationError (its `.course_kernel` the kernel's Python function, `.course_target` e.g. "sm_90"). Any
    other failure of this machinery (an older Triton's API, an argument the JIT cannot bind) is not the
    student's: None, and the interpreter has its say."""
    import warnings
    with warnings.catch_warnings():
        # Triton 3.9 warns of a default that changes in 3.10 when it reads its options: not the student's business
        warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION")
        return _verdict(interpreted, args, kwargs, ccs)


def _verdict(interpreted, args, kwargs, ccs):
    from triton.compiler.errors import CompilationError
    fn = interpreted.fn
    try:
        twin = _twin(interpreted)
        prints = _fingerprint(fn)
        ccs = ccs if _depends_on_target(fn, kwargs) else ccs[:1]
    except Exception:  # noqa: BLE001
        return None
    for cc in ccs:
        try:
            bound, specialization, options = _binder(twin, cc)(*args, **kwargs)
            # the argument types and the constexprs' values, as the JIT's own cache key has them (less the
            # alignments, which change no front end's verdict)
            key = (prints, repr([s[0] for s in specialization]),
                   repr([v for s, v in zip(specialization, bound.values()) if s[0] == "constexpr"]), cc)
            if key not in _verdicts:
                options, signature, constexprs, attrs = twin._pack_args(_backend(cc), kwargs, bound, specialization,
                                                                         options)
                _verdicts[key] = _compiled(twin, fn, signature, constexprs, attrs, options, cc, CompilationError)
        except Exception:  # noqa: BLE001  (the interpreter says what is wrong with the arguments)
            return None
        if _verdicts[key] is not None:
            return _verdicts[key]
    return None


def _depends_on_target(fn, kwargs) -> bool:
    """Whether the front end may judge this launch differently for sm_75 and sm_90. What it is given of the target
    (the backend's parse_options and get_codegen_implementation, Triton 3.6 and 3.9 alike) differs between the two
    only in the fp8 types each supports (and how a tl.dot of them runs) and in num_ctas (sm_90 on); tl.dot's
    smallest tile is the same for both. So a kernel that names no fp8 type and a launch without num_ctas get one
    verdict, sm_75's, for both."""
    names = set().union(*(_names(f.fn.__code__) for _, found in _helpers(fn, {}).values() for f in found.values()),
                        _names(fn.__code__))
    return "num_ctas" in kwargs or any(n.startswith(("float8", "fp8")) for n in names)


@contextlib.contextmanager
def _driver_of(cc):
    """Triton's language asks the active driver for its target in places (whether TMA is native): inside the
    block it is a stand-in for cc, as the GPU's own driver would answer; no GPU driver is touched or needed."""
    from triton.runtime import driver
    held = driver._active
    driver._active = types.SimpleNamespace(get_current_target=lambda: gpu_target(cc), get_current_device=lambda: 0,
                                           get_current_stream=lambda device=None: 0)
    try:
        yield
    finally:
        driver._active = held


def _compiled(twin, fn, signature, constexprs, attrs, options, cc, CompilationError):
    from triton import knobs
    try:
        with knobs.runtime.scope(), _twins_in_place(fn), _driver_of(cc):
            knobs.runtime.interpret = False    # Triton's constexpr functions read it while they compile
            front_end(twin, signature, constexprs, attrs, options, cc)
        return None
    except CompilationError as e:
        e.course_kernel, e.course_target = fn, f"sm_{cc[0]}{cc[1]}"
        e.course_where = locate(e)   # now, while its traceback holds the code generator's frames
        return e
    except Exception:  # noqa: BLE001  (see verdict)
        return None


@contextlib.contextmanager
def compiling_launches(at_once=lambda error: True):
    """Inside the block, each launch of an interpreted kernel is first compiled for the course's GPUs (CHECKED).
    Where one refuses it, the GPU's CompilationError is raised at the launch if at_once(error), else once the
    block has run without an error of its own (the interpreter may refuse the same kernel in words a checker
    knows). Nothing changes on a GPU, which compiles anyway."""
    from .environment import INTERPRET
    if not INTERPRET:
        yield
        return
    later: list = []

    def before(interpreted, args, kwargs):
        error = verdict(interpreted, args, kwargs)
        if error is not None:
            if at_once(error):
                raise error.with_traceback(None)
            later.append(error)
    _interp._before_launch.append(before)
    try:
        yield
    finally:
        _interp._before_launch.remove(before)
    if later:
        raise later[0].with_traceback(None)
