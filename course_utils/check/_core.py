"""The machinery every checker shares: run the student's function safely, compare with a reference,
and turn a mismatch into a sentence that names the likely cause."""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode

from .. import _interp, environment, gpu_compile, trips
from ..hints import compile_diagnosis, explain  # noqa: F401  (check.explain is part of the API)
from ..environment import ON_GPU, INTERPRET


class CheckFailed(AssertionError):
    """The student's answer is wrong; the message says how and the likely cause.

    diagnosis: a short key for that cause ("unwritten", "tail", "launches", or a checker's own such as
    "tanh"); the exercise's hints list the keys each one addresses, so the failure can name a hint.
    None when no cause was recognised (an arbitrary exception from the student's code): then no hint is
    named, since none was written for it."""

    def __init__(self, message: str = "", diagnosis: str | None = None):
        super().__init__(message)
        self.diagnosis = diagnosis


@dataclass
class Passed:
    name: str
    cases: list = field(default_factory=list)
    traffic: object = None

    def __repr__(self) -> str:
        s = f"✓ {self.name}: {len(self.cases)} cases passed ({'; '.join(self.cases[:6])}"
        s += ", …)" if len(self.cases) > 6 else ")"
        if self.traffic is not None:
            s += f"\n  traffic: {self.traffic.summary()}"
        return s


def fail(msg: str, diagnosis: str | None = None):
    raise CheckFailed(msg, diagnosis)


# --- the verdict where no shell shows it -------------------------------------------------------------
def say(verdict: str) -> None:
    """Print a check's or a grader's verdict where nothing else would show it: a script, pytest, `python -c`.
    Jupyter, IPython and the plain REPL show a returned value's repr and an error's traceback themselves, so
    printing there too would show the verdict twice (environment.shows_results)."""
    if not environment.shows_results():
        print(verdict, flush=True)   # flushed: before the traceback that stderr prints next


def failed_verdict(name: str, message: str) -> str:
    """"✗ name: failed", then the diagnosis indented under it, as a scorecard shows a failed row."""
    return "\n".join([f"✗ {name}: failed"] + ["    " + line for line in str(message).strip().splitlines()])


# --- poisoned allocations: an output element nobody wrote keeps this exact bit pattern -------------
_POISON_BITS = {torch.float32: (torch.int32, 0x7FC0DEAD), torch.float16: (torch.int16, 0x7E5A),
                torch.bfloat16: (torch.int16, 0x7FDA), torch.float64: (torch.int64, 0x7FF8DEADBEEF0000)}
_FACTORIES = {torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty}


def _poison(t: torch.Tensor) -> None:
    if t.dtype in _POISON_BITS:
        as_int, bits = _POISON_BITS[t.dtype]
        t.view(as_int).fill_(bits)
    elif t.dtype.is_floating_point is False and t.dtype != torch.bool:
        t.fill_(-12345 if t.dtype.is_signed else 123)


def unwritten(t: torch.Tensor) -> torch.Tensor:
    """Boolean mask of elements still holding the poison: nothing stored there."""
    if t.dtype not in _POISON_BITS:
        return torch.zeros(t.shape, dtype=torch.bool, device=t.device)
    as_int, bits = _POISON_BITS[t.dtype]
    return t.contiguous().view(as_int) == bits


class _PoisonAllocations(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in _FACTORIES and isinstance(out, torch.Tensor):
            _poison(out)
        return out


# --- running the student's code ---------------------------------------------------------------------
def run(fn, *args, name: str, poison: bool = True):
    """Call the student's function with poisoned allocations; turn its failures into CheckFailed.

    On the interpreter each kernel it launches is first compiled for the course's GPUs (gpu_compile), so a kernel
    a GPU refuses fails here, at its launch, as it would on the GPU, before the interpreter runs it and before
    anything is compared: what the GPU rejects is the first thing to fix."""
    if not callable(fn):
        fail(f"check.{name} takes your function itself (e.g. check.{name}({name})), "
             f"not {type(fn).__name__}", "not-callable")
    try:
        with gpu_compile.compiling_launches(at_once=_recognised):
            if not poison:
                return fn(*args)
            with _PoisonAllocations():
                return fn(*args)
    except CheckFailed:
        raise
    except NotImplementedError as e:
        # from None: the student needs this one sentence, not the chain through the course's code
        raise CheckFailed(f"`{getattr(fn, '__name__', name)}` is still the stub ({e}). Write the code marked "
                          "YOUR CODE HERE, run that cell, then run this check again.", "stub") from None
    except _interp.OutOfBounds as e:
        raise CheckFailed(str(e), "out-of-bounds") from None
    except Exception as e:  # the student's own bug: keep the chain so they can read the trace
        compiled = compile_diagnosis(e)   # a GPU refused the kernel (here: would refuse it), at its launch
        if compiled is not None:
            # an unrecognised cause keeps Triton's error as the cause: a checker may recognise its text
            raise CheckFailed(*compiled) from (None if compiled[1] else e)
        # No diagnosis key: nothing recognised the cause, so no exercise hint addresses it (a catch-all key
        # sent lab 5's "No function definition found for kernel" to hint 1, the idea). The help is Triton's
        # error in plain words, when explain() knows it; a checker that recognises the text re-raises with
        # a key of its own (cos_chain's "fp16-cos").
        hint = explain(e)
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        msg = f"`{getattr(fn, '__name__', name)}` raised {type(e).__name__}: {first}"
        raise CheckFailed(msg + (f"\nHint: {hint}" if hint else ""), None) from (None if hint else e)


def _recognised(error) -> bool:
    """A compile error the course has words for (a Python `if` on a block, a plain global...): it comes before
    anything the interpreter would say. Another waits for the interpreter, which often refuses the same kernel
    in words a checker recognises."""
    found = compile_diagnosis(error)
    return found is not None and found[1] is not None


def bounds_check_on_gpu(fn, *args, name: str):
    """On a GPU an out-of-bounds access may go unnoticed; replaying one small case through the
    instrumented interpreter (as trips.count does) catches it."""
    if ON_GPU and not INTERPRET:
        with trips.counting():
            run(fn, *args, name=name)


# --- what a launch did: its arguments, its grid, what its programs stored ---------------------------
@dataclass
class KernelCall:
    """One launch of a Triton kernel as the (instrumented) interpreter ran it: on a CPU the run itself, on a
    GPU the replay that trips.counting makes before the real launch."""
    kernel: str
    args: dict                    # parameter -> the value the launch passed
    constexprs: tuple             # the parameters declared tl.constexpr
    grid: tuple = ()
    stored: int = 0               # bytes stored, every program's counted: a block stored twice counts twice
    stored_distinct: int = 0      # distinct bytes stored

    @property
    def programs(self) -> int:
        return self.grid[0] if self.grid else 0


def _constexprs(fn) -> tuple:
    """The parameters of a kernel's Python function annotated tl.constexpr (what Triton's own GridExecutor
    lists, in the releases that keep that list)."""
    return tuple(name for name, ann in getattr(fn, "__annotations__", {}).items() if "constexpr" in str(ann))


@contextlib.contextmanager
def watching_launches():
    """`with watching_launches() as calls:` records a KernelCall for every interpreted launch in the block."""
    from triton.runtime import interpreter
    calls: list[KernelCall] = []
    inner = interpreter.GridExecutor.__call__

    def call(self, *args, **kwargs):
        real = lambda a: _interp.replayed_from.get(id(a), a)  # noqa: E731  (a GPU replay runs on copies)
        record = KernelCall(getattr(self.fn, "__name__", "kernel"),
                            {**{k: real(a) for k, a in zip(self.arg_names, args)},
                             **{k: real(v) for k, v in kwargs.items() if k in self.arg_names}},
                            tuple(getattr(self, "constexprs", None) or _constexprs(self.fn)))

        def listen(launch):
            record.grid = tuple(interpreter.interpreter_builder.grid_dim)
            record.stored = launch.requested_written
            record.stored_distinct = launch.distinct_bytes("write")
        _interp._listeners.append(listen)
        try:
            return inner(self, *args, **kwargs)
        finally:
            _interp._listeners.remove(listen)
            calls.append(record)
    interpreter.GridExecutor.__call__ = call
    try:
        yield calls
    finally:
        interpreter.GridExecutor.__call__ = inner


# A case is replayed on a GPU through the bounds-checked interpreter, which records its launch, up to this many
# elements: the largest sizes would take the replay seconds.
REPLAYED_UP_TO = 4096


def recorded(call, n: int):
    """call() with its launch recorded: (what it returned, the KernelCall of its one launch, or None). On a CPU
    the interpreter's run is the record; on a GPU a replay through it comes first, for cases of up to
    REPLAYED_UP_TO elements (None above that, where compare() falls back on the output alone)."""
    with watching_launches() as calls:
        if ON_GPU and not INTERPRET and n <= REPLAYED_UP_TO:
            with trips.counting():
                out = call()
        else:
            out = call()
    return out, (calls[-1] if len(calls) == 1 else None)


def counted(k: int, noun: str) -> str:
    """1 program, 8 programs."""
    return f"{k} {noun}{'' if k == 1 else 's'}"


def inputs_kept(out, inputs, *, name: str, case: str = "", launch: KernelCall | None = None) -> None:
    """Fail where the student's function wrote into one of its inputs. inputs: (label, tensor, its copy from
    before the call). A kernel that stores into an input most often got its arguments in another order than
    it declares its parameters (Triton matches them by position): the launch shows which parameter got what."""
    changed = [label for label, t, before in inputs if not torch.equal(t, before)]
    if not changed:
        return
    who = f"`{name}`" + (f" ({case})" if case else "")
    label = changed[0]
    tensor = next(t for lb, t, _ in inputs if lb == label)
    if isinstance(out, torch.Tensor) and out.numel() and out.data_ptr() == tensor.data_ptr():
        fail(f"{who}: the result was written into {label}, an input, and returned: write it to a new tensor "
             "(out = torch.empty_like(x)) and leave the inputs as they were; the caller still needs them.",
             "in-place")
    untouched = isinstance(out, torch.Tensor) and bool(unwritten(out).all())
    what = f"{who}: the kernel stored into {label}, an input, " + ("and never into the output. " if untouched else
                                                                  "which must stay as it was. ")
    if launch is not None and isinstance(out, torch.Tensor):
        tensors = [(lb, t) for lb, t, _ in inputs] + [("the output", out)]
        pairs = [(p, lb) for p, v in launch.args.items() if isinstance(v, torch.Tensor) and v.numel()
                 for lb, t in tensors if t.numel() and v.data_ptr() == t.data_ptr()]
        received = [f"`{p}` received {lb}" for p, lb in pairs]
        inputs_named = {lb for lb, _, _ in inputs}
        # only where the output was never written: a launcher that changes x itself (x *= alpha) and then
        # launches correctly is another mistake
        if untouched and len(pairs) == len(tensors) and all(_named_for(p, lb, inputs_named) for p, lb in pairs):
            into = next(p for p, lb in pairs if lb == label)
            to = next(p for p, lb in pairs if lb == "the output")
            fail(what + f"The launch hands each tensor to the parameter of its name ({', '.join(received)}), so "
                 f"its order is not the cause: the kernel itself stores through `{into}`. Does a tl.store write "
                 f"to `{into} + offsets` where it means `{to} + offsets`?", "store-pointer")
        if received:
            what += (f"The kernel declares ({', '.join(launch.args)}), and "
                     f"{', '.join(received[:-1])} and {received[-1]}: " if len(received) > 1 else f"{received[0]}: ")
    fail(what + "the launch passes its arguments in another order than the kernel declares its parameters. "
         "Triton matches them by position, as Python does: pass the inputs and the output in the kernel's order.",
         "argument-order")


def _named_for(param: str, label: str, inputs: set) -> bool:
    """Does the kernel's parameter name say it is for this tensor: `x_ptr` for x, `out_ptr` for the output?"""
    name = param.lower().removesuffix("_ptr")
    if label == "the output":
        return name.startswith("out") or (name in ("y", "o", "dst", "result") and name not in inputs)
    return name == label.lower()


def _pow2(b: int) -> bool:
    return b >= 1 and b & (b - 1) == 0


def _clean_prefix(never: torch.Tensor) -> int | None:
    """w when elements 0..w-1 were written and w..n-1 never (0 < w < n); None for any other pattern."""
    flat = never.flatten()
    w = flat.numel() - int(flat.sum())
    if 0 < w < flat.numel() and not bool(flat[:w].any()) and bool(flat[w:].all()):
        return w
    return None


def unwritten_cause(never: torch.Tensor, launch: KernelCall | None) -> tuple[str, str] | None:
    """(the cause, its key) of the elements of a 1-D output that no program wrote, read from what the launch's
    programs stored; None where the pattern does not give it away.

    Unwritten elements are called a grid problem only when the grid was too small: a grid big enough whose
    programs all stored the same block is an offset mistake, and one whose programs stopped inside a block
    is a mask mistake (the mask compared with something other than n)."""
    if launch is None or not launch.grid or never.dim() != 1:
        return None
    n, p = never.numel(), launch.programs
    if p == 0:
        return (f"the grid had 0 programs, so nothing ran and all {n} elements were never written. n // BLOCK is 0 "
                "whenever n < BLOCK: use triton.cdiv(n, BLOCK), which rounds up.", "grid-zero")
    if bool(never.all()):
        return (f"{counted(p, 'program')} ran but none stored anything: all {n} elements were never written. Does "
                "the kernel "
                "end with tl.store(out_ptr + offsets, result, mask=mask)?", "no-store")
    w = _clean_prefix(never)
    if w is None:
        return None
    if launch.stored > launch.stored_distinct:          # several programs stored the same elements
        if p > 1 and launch.stored == p * launch.stored_distinct:
            enough = f"the grid is big enough ({p} programs × {w} = {p * w} ≥ n = {n}), but " if p * w >= n else ""
            return (f"{enough}every program seems to work on block 0: each of the {p} programs stored the same "
                    f"elements 0..{w - 1}, and none stored past them, so "
                    f"{f'the last {n - w} were' if n - w > 1 else 'the last element was'} never written. A "
                    "program's offsets start at its own block: pid * BLOCK + tl.arange(0, BLOCK).", "overlap")
        block = w - p + 1
        if p > 1 and _pow2(block):
            return (f"the programs overlap. Only elements 0..{w - 1} were written, which is what {p} programs of "
                    f"BLOCK {block} cover when program i starts at offset i. Each program must start at its own "
                    "block: offsets = pid * BLOCK + tl.arange(0, BLOCK).", "overlap")
        return (f"several programs stored the same elements ({launch.stored} bytes stored, {launch.stored_distinct} "
                f"distinct), and elements {w}..{n - 1} were never written. Does each program start at its own "
                "block, pid * BLOCK + tl.arange(0, BLOCK)?", "overlap")
    if w % p == 0 and _pow2(w // p):
        block = w // p
        return (f"the grid is too small. {counted(p, 'program')} × BLOCK {block} = {w} elements, but n = {n}: the last "
                f"{n - w} element{'s were' if n - w > 1 else ' was'} never written. n // BLOCK rounds down; the grid "
                f"needs triton.cdiv(n, BLOCK) = {-(-n // block)} programs.", "grid-too-small")
    return (f"elements {w}..{n - 1} were never written, though the grid is not what left them out: its {p} "
            f"program{'s' if p > 1 else ''} stored elements 0..{w - 1} once each, and {w} is no whole number of "
            "blocks. The mask switched the rest off: what does it compare the offsets with? It needs n, the "
            "number of elements. Is n passed where the kernel expects it (Triton matches the arguments of a launch "
            "to the kernel's parameters by position)?", "unwritten")


# --- comparing --------------------------------------------------------------------------------------
def tolerance(dtype: torch.dtype) -> dict:
    return {torch.float16: dict(atol=2e-3, rtol=2e-3), torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}.get(
        dtype, dict(atol=1e-5, rtol=1e-5))


def _tail_run(flat_bad: torch.Tensor) -> int:
    """Length of the run of bad elements that ends at the last element (0 if the last one is fine)."""
    if not bool(flat_bad[-1]):
        return 0
    good = torch.nonzero(~flat_bad).flatten()
    return flat_bad.numel() if good.numel() == 0 else flat_bad.numel() - 1 - int(good[-1])


def _where(bad: torch.Tensor, what: str) -> str:
    """Describe where the bad elements are: the tail, trailing columns, whole rows, or scattered."""
    n, k = bad.numel(), int(bad.sum())
    if k == n:
        return f"all {n} elements {what}" if n > 1 else f"the only element {what.replace('were', 'was').replace('are', 'is')}"
    tail = _tail_run(bad.flatten())
    if tail == k:
        if k == 1:
            return f"the last element {what.replace('were', 'was').replace('are', 'is')}"
        return f"the last {k} elements {what}"
    if bad.dim() == 2:
        col_bad = bad.all(dim=0)
        cols = int(col_bad.sum())
        if cols and bool(bad[:, -1].all()) and int(bad.sum()) == cols * bad.shape[0] and \
                _tail_run(col_bad) == cols:
            return f"the last {cols} columns of every row {what}"
        rows = bad.all(dim=1)
        if int(rows.sum()) * bad.shape[1] == k:
            first = int(torch.nonzero(rows)[0])
            if int(rows.sum()) == 1:
                return f"the whole of row {first} {what.replace('were', 'was').replace('are', 'is')}"
            return f"{int(rows.sum())} whole rows (first: row {first}) {what}"
    first = tuple(int(i) for i in torch.nonzero(bad)[0])
    return f"{k} of {n} elements {what} (first at index {first if len(first) > 1 else first[0]})"


def compare(out, ref: torch.Tensor, *, name: str, like: torch.Tensor | None = None, wrong_answers=(),
            overflow_hint: str = "", overflow_key: str = "nonfinite", tol: dict | None = None, case: str = "",
            launch: KernelCall | None = None) -> None:
    """Fail with a diagnosis unless out matches ref.

    wrong_answers: (tensor, message) or (tensor, message, diagnosis key) triples, realistic mistakes
    computed by the checker; if out matches one of them, its message is the diagnosis.
    overflow_hint, overflow_key: the likely cause of NaN or inf where the answer is finite, and its key, for a
    checker that knows its exercise's (the general guess otherwise).
    case: the case that failed ("n = 1025, float32"), named in every failure: where the student's kernel
    breaks tells them as much as how.
    launch: the KernelCall of the launch that made out (watching_launches), to tell a grid too small from
    programs that overlap or a mask that stops early when elements were never written."""
    like = ref if like is None else like
    who = f"`{name}`" + (f" ({case})" if case else "")
    if out is None:
        fail(f"{who} returned None: did you forget `return out`?", "return")
    if not isinstance(out, torch.Tensor):
        fail(f"{who} returned a {type(out).__name__}; it should return a torch.Tensor", "return")
    if out.device.type != like.device.type:
        fail(f"{who} returned a tensor on {out.device}, but the inputs are on {like.device}: allocate the "
             "output like the input (torch.empty_like(x)).", "return")
    if tuple(out.shape) != tuple(ref.shape):
        fail(f"{who} returned shape {tuple(out.shape)}; expected {tuple(ref.shape)}", "return")
    if out.dtype != like.dtype:
        fail(f"{who} returned {out.dtype} for {like.dtype} inputs: keep the input's dtype "
             "(torch.empty_like(x)), and cast inside the kernel if you compute in fp32.", "dtype")
    tol = tol or tolerance(like.dtype)
    never = unwritten(out).cpu()
    if bool(never.any()):
        found = unwritten_cause(never, launch)
        if found:
            fail(f"{who}: {found[0]}", found[1])
        written = _clean_prefix(never)
        if bool(never.all()):
            cause = "Does the kernel store, and is it launched?"
        elif written is not None and written > 1 and _pow2(written):
            # a whole block's worth: too few programs, or programs that all stored block 0; without the launch
            # the output alone cannot tell which
            cause = (f"Only the first {written} elements were written, a power of two: one whole block? Then either "
                     "the grid has too few programs (it needs triton.cdiv(n, BLOCK)), or every program works on "
                     "block 0 (its offsets must be pid * BLOCK + tl.arange(0, BLOCK)).")
        else:
            cause = "Is the grid big enough (triton.cdiv(n, BLOCK) programs)? Is the mask off by one?"
        fail(f"{who}: {_where(never, 'were never written')} (they still hold the poison the "
             f"check put in freshly allocated memory). {cause}", "unwritten")
    got, want = out.double(), ref.double()
    if bool((~torch.isfinite(got) & torch.isfinite(want)).any()):
        kind = "NaN" if bool((torch.isnan(got) & torch.isfinite(want)).any()) else "inf"
        # a NaN is most often 0 / 0, inf − inf or 0 · inf (an exp that overflowed, a max still −inf); an inf a
        # value past the dtype's range. A checker that knows its exercise's likely cause passes overflow_hint.
        guess = ("Is something divided by 0, or is inf − inf or 0 · inf computed (an exp that overflowed, a max "
                 "still −inf)?" if kind == "NaN" else "Overflow? Is an intermediate too large for the dtype?")
        fail(f"{who}: {_where((~torch.isfinite(got) & torch.isfinite(want)).cpu(), f'are {kind}')} where the "
             f"answer is finite. {overflow_hint or guess}", overflow_key if overflow_hint else "nonfinite")
    close = torch.isclose(got, want, **tol, equal_nan=True)
    if bool(close.all()):
        return
    size = float(want.abs().max()) if want.numel() else 0.0
    for alt, message, *key in wrong_answers:
        if alt is not None and alt.shape == out.shape:
            # recognised at the precision its own size allows: a mistake that makes the numbers 1e5 times too
            # large rounds 1e5 times coarser than the answer the tolerance was set for
            big = float(alt.abs().max()) if alt.numel() else 0.0
            alt_tol = dict(tol, atol=tol.get("atol", 1e-8) * max(1.0, big / size)) if size > 0 and math.isfinite(big) else tol
            if bool(torch.isclose(got, alt.double(), **alt_tol, equal_nan=True).all()):
                fail(f"{who}: {message}", key[0] if key else "wrong-answer")
    bad = ~close
    err = (got - want).abs().masked_fill(~bad, 0)
    worst = tuple(int(i) for i in torch.nonzero(err == err.max())[0])
    idx = worst if len(worst) > 1 else worst[0]
    msg = f"{who}: {_where(bad.cpu(), 'are wrong')}. Worst at {idx}: got {got[worst].item():.6g}, " \
          f"expected {want[worst].item():.6g}."
    diagnosis = "wrong"
    ratio = (got[bad] / want[bad]).cpu()
    ratio = ratio[torch.isfinite(ratio)]
    k = int(bad.sum())
    if ratio.numel() >= 2 and float(ratio.std()) < 1e-3 * max(1.0, abs(float(ratio.mean()))) and \
            abs(float(ratio.mean()) - 1) > 1e-2:
        msg += f" Every wrong element is off by the same factor, ×{float(ratio.mean()):.4g}: a missing or extra scale?"
        diagnosis = "factor"
    elif k < bad.numel() and _tail_run(bad.flatten()) == k:   # a tail: some elements before it are right
        per = out.numel() // out.shape[0] if out.dim() > 1 and out.shape[0] > 1 else 0
        if per and k % per == 0:    # whole entries of a batch, not the ragged end of one
            msg += (f" The wrong elements are the whole of the last {k // per} of the {out.shape[0]} "
                    "entries along the first dimension: what differs for them (their length, where they start)?")
        else:
            msg += " Only the tail is wrong: is the last, partial block masked correctly?"
            diagnosis = "tail"
    fail(msg, diagnosis)


# keys too general to call two outputs' failures "the same mistake"
_GENERAL_KEYS = ("wrong", "factor", "tail", "unwritten", "nonfinite", "return", "dtype")


def compare_each(outputs, *, name: str) -> None:
    """compare() for the several outputs of one call: [(out, ref, label, compare's other keywords)], in the
    order to judge them. A failure names only what is wrong: the first wrong output's diagnosis (and its key),
    then which of the others are wrong too and which are right, so that a student never rewrites a part that
    worked."""
    failures, right = [], []
    for out, ref, label, kw in outputs:
        try:
            compare(out, ref, name=f"{name}, {label}", **kw)
            right.append(label)
        except CheckFailed as e:
            failures.append((label, e))
    if not failures:
        return
    first = failures[0][1]
    lines = [str(first)]
    for label, e in failures[1:]:
        if e.diagnosis == first.diagnosis and e.diagnosis not in _GENERAL_KEYS:
            lines.append(f"{label} has the same mistake.")
        else:
            text = str(e).split("`: ", 1)[-1].split("\n")[0]
            lines.append(f"{label} is wrong too: {text.split('. ')[0].rstrip('.')}.")
    if right:
        lines.append(f"{listed(right)} {'is' if len(right) == 1 else 'are'} right.")
    raise CheckFailed("\n".join(lines), first.diagnosis)


def ready(fn, cases, *, checker: str, atol: float = 1e-5, rtol: float = 1e-5) -> bool:
    """Before a lesson times fn: True when fn(*args) matches `want` (a tensor, or a tuple of them) on every
    (args, want) case; False while fn is still the stub. A kernel that runs but gives wrong numbers would be
    timed for nothing, so that raises, naming `checker`, the check that says what is wrong."""
    name = getattr(fn, "__name__", "your function")
    for args, want in cases:
        try:
            got = fn(*args)
        except NotImplementedError:
            return False
        gots = tuple(got) if isinstance(got, (tuple, list)) else (got,)
        wants = tuple(want) if isinstance(want, (tuple, list)) else (want,)
        if len(gots) != len(wants) or not all(
                isinstance(g, torch.Tensor) and g.shape == w.shape and
                torch.allclose(g.double(), w.double(), atol=atol, rtol=rtol) for g, w in zip(gots, wants)):
            dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor)), None)
            raise RuntimeError(f"{name} gives wrong numbers{f' in {dtype}' if dtype else ''}: {checker} says what is "
                               "wrong. Fix it in the Write section, then come back to time it.")
    return True


def own_kernels(t, name: str, advice: str = ""):
    """Fail if a count shows PyTorch doing the work (the right numbers, but not the student's kernel)."""
    foreign = [k.name for k in t.kernels if k.kind != "triton"]
    if foreign:
        fail(f"`{name}` computes the right numbers, but with PyTorch ({', '.join(foreign)}), not with a Triton "
             f"kernel of yours{advice}.", "pytorch")


def pair(out, name: str, names: str, why: str):
    """fn's two outputs, or a failure that says what came back instead of the pair `names`, e.g. "(y, h)"."""
    if out is None:
        fail(f"`{name}` returned None: it should return the pair {names}.", "return")
    if isinstance(out, torch.Tensor):
        fail(f"`{name}` returned one tensor; it should return two, {names}: {why}.", "return")
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        fail(f"`{name}` returned {type(out).__name__}; it should return the pair {names}.", "return")
    return out


def by(shape) -> str:
    """(3, 37) as a case's name gives it: 3 × 37."""
    return " × ".join(str(v) for v in shape)


def listed(values, unique: bool = False) -> str:
    """1, 37 and 1025: the values a case tries, as its name gives them (unique: each value once)."""
    values = [str(v) for v in values]
    if unique:
        values = list(dict.fromkeys(values))
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


# a byte budget's slack: what a count may run over the formula (a few small tensors, rounding); each
# contract gives it beside its formula (tests/test_contracts.py)
BYTES_SLACK = 0.05


def budget(fn, args, *, name: str, launches: int, bytes: int, slack: float = BYTES_SLACK,
           store_once: bool = False):
    """Count the trips of one call and fail if it launches or moves more than the budget allows.

    store_once: the exercise writes each output element once (an element-wise chain). Stores repeated on the
    same addresses move no more distinct bytes, so only the stores the kernel asked for show them."""
    t = trips.count(run, fn, *args, name=name, poison=False)
    if t.launches == 0:
        fail(f"`{name}` launched no kernel at all: did it compute on the CPU side, or return early?", "no-launch")
    if t.launches > launches:
        fail(f"`{name}` made {t.launches} launches where {launches} should do: this is not fused. "
             f"Every launch writes its result to HBM and the next reads it back.\n{t.table()}", "launches")
    if t.bytes > bytes * (1 + slack):
        fail(f"`{name}` moved {t.bytes} bytes; the budget is {bytes}, {bytes * (1 + slack):.0f} with its "
             f"{100 * slack:g} % slack: something is read or written "
             f"more than once, or an intermediate goes to memory.\n{t.table()}", "bytes")
    if store_once and t.launches and t.requested_written > t.bytes_written * (1 + slack):
        times = t.requested_written / max(t.bytes_written, 1)
        fail(f"`{name}` stored {t.requested_written} bytes into an output of {t.bytes_written}: each element "
             f"is written {times:.2g} times on average. Is a tl.store inside the loop, or is there a second "
             "store? Between the load and the one store at the end the values stay in registers, so each "
             "element needs storing once.\n"
             f"{t.table()}", "repeat-store")
    return t
