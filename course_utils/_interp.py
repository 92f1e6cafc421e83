"""An instrumented Triton interpreter: it bounds-checks every load and store before memory is
touched, and (when someone listens) records which addresses each launch reads and writes.

Why: under TRITON_INTERPRET=1 an unmasked load past the end of a tensor returns garbage silently,
and an unmasked store can abort the whole Python process ("munmap_chunk(): invalid pointer"),
killing a student's notebook. We refuse such accesses with a message that names the argument.
The same recording is what `trips.count` uses to measure a Triton kernel's HBM traffic.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import dataclass, field

import numpy as np
import torch

import triton.language as _tl
from triton.runtime import interpreter as _itp
from triton.runtime.jit import JITFunction, TensorWrapper


class OutOfBounds(IndexError):
    """A kernel touched memory outside every tensor argument it was given."""


@dataclass
class _Range:
    name: str
    lo: int
    hi: int
    numel: int
    dtype: torch.dtype


@dataclass
class Launch:
    """What one kernel launch touched. Addresses are grouped by element size."""
    name: str
    grid: tuple = ()
    ranges: list = field(default_factory=list)
    reads: dict = field(default_factory=dict)    # itemsize -> list of address arrays
    writes: dict = field(default_factory=dict)
    requested_read: int = 0
    requested_written: int = 0

    def _distinct(self, groups) -> dict[int, np.ndarray]:
        return {size: np.unique(np.concatenate(arrs)) for size, arrs in groups.items() if arrs}

    def distinct_bytes(self, which: str) -> int:
        groups = self._distinct(self.reads if which == "read" else self.writes)
        return int(sum(size * len(a) for size, a in groups.items()))

    def by_argument(self, which: str) -> dict[str, int]:
        """Distinct bytes per tensor argument, e.g. {'x': 4096, 'b': 64}."""
        out: dict[str, int] = {}
        for size, addrs in self._distinct(self.reads if which == "read" else self.writes).items():
            for r in self.ranges:
                n = int(np.count_nonzero((addrs >= r.lo) & (addrs < r.hi)))
                if n:
                    out[r.name] = out.get(r.name, 0) + n * size
        return out


_tls = threading.local()
_listeners: list = []          # callables receiving each finished Launch


def _current() -> Launch | None:
    return getattr(_tls, "launch", None)


@contextlib.contextmanager
def muted():
    """Torch work done on the course's behalf (copying arguments for a replay) is nobody's traffic."""
    _tls.depth = getattr(_tls, "depth", 0) + 1
    try:
        yield
    finally:
        _tls.depth -= 1


def inside_launch() -> bool:
    """True while an interpreted kernel runs (its own torch copies are not the student's traffic)."""
    return getattr(_tls, "depth", 0) > 0


def _tensor_ranges(arg_names, args, kwargs) -> list[_Range]:
    ranges = []

    def add(name, a):
        if isinstance(a, tuple):
            for i, item in enumerate(a):
                add(f"{name}[{i}]", item)
            return
        base = getattr(a, "base", None)
        if base is not None and not hasattr(a, "data_ptr") and hasattr(base, "data_ptr"):
            a = base  # a TensorDescriptor: bound it by its base tensor
        if not hasattr(a, "data_ptr"):
            return
        t = a.base if isinstance(a, TensorWrapper) else a
        span = 0
        if t.numel() > 0:
            span = (sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + 1) * t.element_size()
        ranges.append(_Range(name, t.data_ptr(), t.data_ptr() + span, t.numel(), t.dtype))

    for name, a in zip(arg_names, args):
        add(name, a)
    for name, a in kwargs.items():
        add(name, a)
    return ranges


def _describe(kind: str, launch: Launch, bad: np.ndarray, n_active: int, itemsize: int, all_enabled: bool) -> str:
    first = int(bad.min())
    nearest = min(launch.ranges, key=lambda r: min(abs(first - r.lo), abs(first - r.hi)), default=None)
    pid = getattr(_itp.interpreter_builder, "grid_idx", None)
    if isinstance(pid, tuple) and len(pid) == 3 and not any(pid[1:]):
        pid = pid[0]          # a 1-D grid: tl.program_id(0), as the lessons teach it
    msg = (f"Out-of-bounds {kind} in kernel `{launch.name}` (program_id {pid}): {len(bad)} of {n_active} "
           f"enabled lanes point outside every tensor argument.")
    if nearest is not None:
        lo_el = (int(bad.min()) - nearest.lo) // itemsize
        hi_el = (int(bad.max()) - nearest.lo) // itemsize
        msg += (f" Nearest argument: `{nearest.name}` ({nearest.numel} elements); those lanes would touch "
                f"elements {lo_el}..{hi_el}.")
        if lo_el < 0:
            msg += " That is before its start: are the offsets negative?"
        elif lo_el == hi_el == nearest.numel and not all_enabled:
            msg += " Exactly one element past the end: an off-by-one mask (`<=` where `<` belongs)?"
        elif itemsize > 1 and len(bad) > 1 and bool((np.diff(np.sort(bad)) == itemsize * itemsize).all()):
            # neighbouring lanes itemsize elements apart: offsets multiplied by the element size
            msg += (f" Do the offsets count bytes? `{nearest.name} + offsets` counts elements (a pointer knows "
                    f"its dtype), so the offsets need no × {itemsize}.")
    msg += (" Every lane of this access was enabled: is the tail masked (mask=offsets < n)?" if all_enabled
            else " The mask let these lanes through: compare the mask with the tensor's real size.")
    return msg


def _guard(kind: str, ptrs, mask, write: bool, read: bool):
    launch = _current()
    if launch is None:
        return
    addrs = np.asarray(ptrs.data)
    enabled = np.broadcast_to(np.asarray(mask.data, dtype=bool), addrs.shape) if mask is not None \
        else np.ones(addrs.shape, dtype=bool)
    active = addrs[enabled].astype(np.uint64, copy=False)
    if active.size == 0:
        return
    itemsize = np.dtype(_itp._get_np_dtype(ptrs.get_element_ty())).itemsize
    ok = np.zeros(active.shape, dtype=bool)
    for r in launch.ranges:
        ok |= (active >= r.lo) & (active + itemsize <= r.hi)
    if not ok.all():
        raise OutOfBounds(_describe(kind, launch, active[~ok], active.size, itemsize, bool(enabled.all())))
    if _listeners:
        if read:
            launch.reads.setdefault(itemsize, []).append(active.copy())
            launch.requested_read += active.size * itemsize
        if write:
            launch.writes.setdefault(itemsize, []).append(active.copy())
            launch.requested_written += active.size * itemsize


def _scalar(t):
    """The one value of a scalar tensor. Triton 3.6's interpreter calls int() on its shape-(1,) array,
    which NumPy 2.3 refuses ("only 0-dimensional arrays can be converted to Python scalars"): so on
    the H100's Triton every `for i in range(tl.cdiv(n, BLOCK))` failed in a replay."""
    return np.asarray(t.handle.data).reshape(-1)[0]


_orig_patch_tensor = _itp._patch_lang_tensor


def _patch_lang_tensor(tensor, *rest, **kw):
    _orig_patch_tensor(tensor, *rest, **kw)
    # set over the interpreter's own patch, which it records and restores as before
    tensor.__index__ = lambda self: int(_scalar(self))
    tensor.__bool__ = lambda self: bool(_scalar(self)) if np.asarray(self.handle.data).size == 1 else True


_orig_patch_lang = _itp._patch_lang
_lang_modules_of: dict = {}     # id(a module's globals) -> the triton.language modules among them


def _patch_lang(fn):
    """Triton's interpreter patches the language again at every call of a @triton.jit helper (tl.sum, tl.max,
    tl.cdiv, ...) inside a kernel: a walk over every member of triton.language, about a millisecond per call
    and a quarter of a reduction kernel's interpreted time. Within one launch, once the modules a function
    sees are patched they stay patched until the launch ends, so the walk is made once per launch (in one
    run of check.online_softmax under cProfile: 20,537 walks, 24 s of 87)."""
    key = _lang_modules_of.get(id(fn.__globals__))
    if key is None:
        key = _lang_modules_of[id(fn.__globals__)] = frozenset(
            id(v) for v in fn.__globals__.values() if isinstance(v, type(sys)) and v in (_tl, _tl.core))
    done = getattr(_tls, "patched", None)
    if key and done is not None and key <= done:      # no key: Triton's own call says what is missing
        return _itp._LangPatchScope() if hasattr(_itp, "_LangPatchScope") else None
    result = _orig_patch_lang(fn)
    if done is not None:
        done |= key
    return result


# Callables (interpreted function, args, kwargs) run before each launch of an interpreted kernel: a check
# compiles the kernel for the course's GPUs there (course_utils/gpu_compile.py), before the interpreter runs it.
_before_launch: list = []
_orig_run = _itp.InterpretedFunction.run


def _run(self, *args, grid, warmup, **kwargs):
    if not warmup and _before_launch and not inside_launch():
        for hook in list(_before_launch):
            hook(self, args, kwargs)
    return _orig_run(self, *args, grid=grid, warmup=warmup, **kwargs)


_B = _itp.InterpreterBuilder
_orig = {name: getattr(_B, name) for name in ("create_masked_load", "create_masked_store",
                                               "create_atomic_rmw", "create_atomic_cas")}
_orig_call = _itp.GridExecutor.__call__
_orig_jit_call = JITFunction.__call__
_orig_init = _itp.GridExecutor._init_args_hst


# Argument lists differ between Triton releases (3.6 passes cache and eviction separately): take the
# leading arguments we need by name and pass the rest through untouched.
def _masked_load(self, ptrs, mask, *rest, **kw):
    _guard("load", ptrs, mask, write=False, read=True)
    return _orig["create_masked_load"](self, ptrs, mask, *rest, **kw)


def _masked_store(self, ptrs, value, mask, *rest, **kw):
    _guard("store", ptrs, mask, write=True, read=False)
    return _orig["create_masked_store"](self, ptrs, value, mask, *rest, **kw)


def _atomic_rmw(self, rmwOp, ptr, val, mask, *rest, **kw):
    _guard("atomic", ptr, mask, write=True, read=True)
    return _orig["create_atomic_rmw"](self, rmwOp, ptr, val, mask, *rest, **kw)


def _atomic_cas(self, ptr, cmp, val, *rest, **kw):
    _guard("atomic", ptr, None, write=True, read=True)
    return _orig["create_atomic_cas"](self, ptr, cmp, val, *rest, **kw)


def _init_args_hst(self, args_dev, kwargs):
    args_hst, kwargs_hst = _orig_init(self, args_dev, kwargs)
    launch = _current()
    if launch is not None:
        launch.ranges = _tensor_ranges(self.arg_names, args_hst, kwargs_hst)
    return args_hst, kwargs_hst


def _call(self, *args, **kwargs):
    launch = Launch(getattr(self.fn, "__name__", "kernel"))
    prev = _current()
    _tls.launch = launch
    _tls.depth = getattr(_tls, "depth", 0) + 1
    patched_before, _tls.patched = getattr(_tls, "patched", None), set()
    try:
        # NumPy warns where a GPU silently gives inf or 0 (exp of a large number): keep notebooks quiet
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            _orig_call(self, *args, **kwargs)
    except _itp.InterpreterError as e:
        cause = _root_cause(e)
        if isinstance(cause, (OutOfBounds, NotImplementedError)):
            raise cause from None  # the student's own error, not a Triton internals trace
        raise
    finally:
        _tls.launch = prev
        _tls.depth -= 1
        _tls.patched = patched_before
    if not inside_launch():  # a launch made on the course's behalf (muted) is nobody's traffic
        for listen in list(_listeners):
            listen(launch)


def _root_cause(e: BaseException) -> BaseException:
    """The error under the interpreter's wrappers: each nested @triton.jit call wraps it once more."""
    while isinstance(e, _itp.InterpreterError) and e.__cause__ is not None:
        e = e.__cause__
    return e


# --- replaying a compiled kernel's launch (what trips.count and the checkers do on a GPU) -----------
_interpreted: dict = {}        # python function -> its InterpretedFunction, made once


def _interpreted_fn(fn):
    if fn not in _interpreted:
        _interpreted[fn] = _itp.InterpretedFunction(fn)
    return _interpreted[fn]


def _call_jit_function(self, *args, **kwargs):
    """A @triton.jit function called from an interpreted kernel runs as the interpreter's device function.

    A JITFunction is what Triton makes of every @triton.jit function when it compiles (on a GPU): its
    own tl.sum, tl.max, tl.sigmoid, tl.softmax, tl.cdiv, tl.argmax, tl.cumsum (jit functions of
    triton.language.standard) as well as a student's helpers. A compiled kernel inlines them; called
    from Python, a JITFunction refuses ("Cannot call @triton.jit'd outside of the scope of a kernel").
    That happens in a replay on a GPU, and on a CPU too when triton.language was imported before
    course_utils switched the interpreter on. Outside an interpreted launch the refusal stands."""
    if _current() is None:
        return _orig_jit_call(self, *args, **kwargs)
    return _interpreted_fn(self.fn)(*args, **kwargs)


def _language_objects() -> list:
    """The modules of triton.language and the classes they define: what the interpreter patches."""
    mods = [m for name, m in list(sys.modules.items())
            if m is not None and (name == "triton.language" or name.startswith("triton.language."))]
    classes = {v for m in mods for v in vars(m).values()
               if isinstance(v, type) and getattr(v, "__module__", "").startswith("triton.language")}
    return mods + list(classes)


@contextlib.contextmanager
def _language_restored():
    """Put triton.language back exactly as it was after a replay.

    The interpreter swaps the language's builtins for NumPy versions while it runs. It restores what it
    patched for the kernel, but each nested device-function call (tl.sum, say) patches triton.language.core
    again and never restores it (Triton 3.6 to 3.9). Harmless when everything is interpreted; on a GPU the
    compiler would then meet interpreter builtins in the next kernel it compiles."""
    saved = [(obj, dict(vars(obj))) for obj in _language_objects()]
    try:
        yield
    finally:
        for obj, before in saved:
            _put(obj, before, dict(vars(obj)))


_MISSING = object()


# --- the language as it was imported: what a compile for a GPU must meet -----------------------------
# A snapshot taken when the course is imported, before any kernel runs: every later interpreted launch may
# leave interpreter builtins behind (see _language_restored), and Triton's compiler must not meet those.
_AS_IMPORTED = [(obj, dict(vars(obj))) for obj in _language_objects()]


def _put(obj, before: dict, now: dict) -> None:
    """Give obj the attributes `before` holds where `now` (its current ones) differs. New names in a module are
    the interpreter's own globals, which the rewritten functions it caches still need, and stay; a name new to
    a class is a patch (tensor.__bool__, say) and goes."""
    for key in (now.keys() - before.keys()) if isinstance(obj, type) else ():
        with contextlib.suppress(AttributeError, TypeError):
            delattr(obj, key)
    for key, value in before.items():
        if now.get(key, _MISSING) is not value:
            with contextlib.suppress(AttributeError, TypeError):
                setattr(obj, key, value)


@contextlib.contextmanager
def language_as_imported(replace=lambda value: value):
    """triton.language inside the block as it was when the course was imported, each of its values passed
    through replace() (course_utils/gpu_compile.py swaps the interpreter's @triton.jit functions, tl.sum and
    the like, for compilable twins); as it was before the block afterwards."""
    held = [(obj, dict(vars(obj))) for obj, _ in _AS_IMPORTED]
    try:
        for (obj, before), (_, now) in zip(_AS_IMPORTED, held):
            _put(obj, {key: replace(value) for key, value in before.items()}, now)
        yield
    finally:
        for obj, before in held:
            _put(obj, before, dict(vars(obj)))


def replay(kernel, args, kwargs, grid) -> None:
    """Run one launch of a compiled kernel (a JITFunction) through this instrumented interpreter.

    The launch runs on copies of its tensor arguments, so the real launch that follows meets them
    untouched; its loads and stores are bounds-checked and reported to the listeners, as on the CPU.
    Made on the course's behalf, the copies are nobody's traffic."""
    copy = lambda a: a.clone() if isinstance(a, torch.Tensor) else a  # noqa: E731
    with torch.no_grad(), muted():
        args_copy = [copy(a) for a in args]
        kwargs_copy = {k: copy(v) for k, v in kwargs.items()}
    # A checker that records the launch asks which tensor each parameter received: the originals, not copies.
    pairs = list(zip(args_copy, args)) + [(kwargs_copy[k], v) for k, v in kwargs.items()]
    replayed_from.update({id(c): o for c, o in pairs if isinstance(c, torch.Tensor)})
    try:
        with _language_restored():
            _interpreted_fn(kernel.fn).run(*args_copy, grid=grid, warmup=False, **kwargs_copy)
    finally:
        for c, _ in pairs:
            replayed_from.pop(id(c), None)


replayed_from: dict = {}   # id(a replay's copy of a tensor) -> the tensor the real launch receives


def install() -> None:
    """Patch the interpreter once; harmless to call again."""
    if getattr(_B, "_course_guarded", False):
        return
    _B.create_masked_load = _masked_load
    _B.create_masked_store = _masked_store
    _B.create_atomic_rmw = _atomic_rmw
    _B.create_atomic_cas = _atomic_cas
    _itp.GridExecutor._init_args_hst = _init_args_hst
    _itp.GridExecutor.__call__ = _call
    _itp._patch_lang_tensor = _patch_lang_tensor
    _itp._patch_lang = _patch_lang
    JITFunction.__call__ = _call_jit_function
    _itp.InterpretedFunction.run = _run
    _B._course_guarded = True


install()
