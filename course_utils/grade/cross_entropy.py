"""Lab 3's grader: a fused cross-entropy that returns the mean loss and its gradient in one pass over the
logits, the probabilities never written to memory, ignore_index honoured.

    loss, grad = fn(logits, target, ignore_index=-100)
    logits (M, V) fp32 or fp16, target (M,) int64 -> loss: the mean over the rows whose target is not
    ignore_index (a one-element tensor); grad: d loss / d logits, (M, V), the logits' dtype."""
from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F

from .. import bench, trips
from ..check._core import CheckFailed, by, compare, fail, listed, pair, run
from ..environment import DEVICE, INTERPRET, ON_GPU, pick
from ..targets import TARGETS
from ._card import Scorecard, _bytes

__all__ = ["cross_entropy"]
EXERCISE = "lab3.cross_entropy"     # the name of the lab's hints: a failed row names the one that helps

IGNORE = -100
# ordinary shapes first, then the edges: one row of one class, ragged widths, rows longer than one block
_SHAPES = [(8, 96), (7, 37), (5, 1000), (1, 1), (3, 5003)]
# the GPU target: a vocabulary of 128,256 (Llama 3's) for 8,192 tokens, fp16
PERF_SHAPE = (8192, 128256)
# Targets from an H100 (torch 2.11, triton 3.6; docs/instructor.md): at PERF_SHAPE the lab's kernel took
# 2.15 and 2.17 ms in two runs against 6.22 ms for F.cross_entropy forward + backward (2.86-2.9x), and its
# peak memory above the logits was 2.10 GB (the gradient) against 6.30 GB (3.0x). The bars sit below.
MEMORY_TARGET = 2.5

OVERFLOW = ("overflow: exp of a logit near 100 is about 2.7·10^43, past fp32's largest number "
            "(3.4·10^38), so the sum of exps is inf. Subtract the row's maximum before exp: "
            "log Σ exp(x) = m + log Σ exp(x − m), with a running maximum if the row is walked in blocks.")


SHAPES = _SHAPES + [pick(gpu=(64, 32000 + 5), cpu=(2, 2049))]
NEAR_100 = ((4, 96), (3, 3001))     # logits near 100, fp32 and fp16
BUDGET_SHAPE = (16, 256)


# What the grader tries, named as the contract names it (tests/test_contracts.py): (name, what it is)
CASES = (
    (f"M × V = {listed([by(s) for s in SHAPES])}", "fp32 and fp16, a quarter of the rows ignored"),
    ("a quarter of the rows ignored", "targets set to ignore_index at random, the first row kept, the second not"),
    (f"logits near 100 at {listed([by(s) for s in NEAR_100])}", "fp32 and fp16: exp overflows unless the max is "
                                                                  "subtracted"),
    ("ignore_index = -1", "6 × 300, fp32: ignore_index taken from the argument"),
    ("all rows but one ignored", "5 × 200, fp16: n = 1"),
    (f"{by(BUDGET_SHAPE)} in fp32 and in fp16", "the launches and bytes of one call are counted"),
)


def _inputs(m, v, dtype, *, offset=0.0, ignore_index=IGNORE, ignored=0.25, gen=None):
    x = torch.randn(m, v, generator=gen) * 2 + offset
    t = torch.randint(0, v, (m,), generator=gen)
    drop = torch.rand(m, generator=gen) < ignored
    drop[0] = False       # at least one kept row (a mean over none is 0/0)
    if m > 2:
        drop[1] = True    # and at least one ignored
    t[drop] = ignore_index
    return x.to(dtype).to(DEVICE), t.to(DEVICE)


def _parts(x, t, ignore_index):
    """The pieces every reference and wrong answer is made of, in float64."""
    xd = x.double()
    valid = t != ignore_index
    n = valid.sum().double()
    lse = torch.logsumexp(xd, dim=1)
    p = torch.exp(xd - lse[:, None])
    one_hot = torch.zeros_like(xd)
    one_hot[valid, t[valid]] = 1.0
    picked = torch.zeros_like(lse)
    picked[valid] = xd[valid, t[valid]]
    rows = torch.where(valid, lse - picked, torch.zeros_like(lse))
    return xd, valid, n, p, one_hot, rows


def reference(x, t, ignore_index=IGNORE):
    """(mean loss, gradient) in float64."""
    xd, valid, n, p, one_hot, rows = _parts(x, t, ignore_index)
    return rows.sum() / n, (p - one_hot) * valid[:, None] / n


def _wrong(x, t, ignore_index):
    """(loss, grad, message, diagnosis key) for the mistakes the lab sees most; None where it coincides with
    the answer."""
    xd, valid, n, p, one_hot, rows = _parts(x, t, ignore_index)
    m = x.shape[0]
    loss, grad = rows.sum() / n, (p - one_hot) * valid[:, None] / n
    some_ignored = bool((~valid).any())
    return [
        (rows.sum() / m if some_ignored else None, grad * n / m if some_ignored else None,
         f"the mean divides by all {m} rows, the ignored ones included; it divides by the {int(n)} rows whose "
         "target is not ignore_index (count them: (target != ignore_index).sum()).", "mean-all"),
        (None, grad * n,
         f"the gradient is {int(n)}× too large: it is softmax − one_hot without the 1/n of the mean. The loss "
         "is the mean over the kept rows, so every row's gradient is divided by their number too.", "no-mean"),
        (None, (p - one_hot) * valid[:, None],
         "the gradient is not divided by the number of kept rows: the loss is a mean, so d loss / d logits "
         "carries its 1/n.", "no-mean"),
        (None, (p - one_hot * valid[:, None]) / n if some_ignored else None,
         "the ignored rows have a gradient (their softmax / n); a row whose target is ignore_index adds "
         "nothing to the loss, so its gradient is all zeros.", "ignored-rows"),
        (None, p * valid[:, None] / n,
         "the gradient is the softmax alone: subtract 1 at the target's column (d loss / d x_j = p_j − "
         "[j = target]).", "no-one-hot"),
        (None, (one_hot - p) * valid[:, None] / n, "the gradient has the wrong sign: it is p − one_hot, "
                                                   "not one_hot − p.", "sign"),
        (rows.sum(), None, "the loss is the sum over the kept rows, not their mean.", "no-mean"),
        (-rows.sum() / n, None, "the loss has the wrong sign: it is log Σ exp(x) − x[target], which is ≥ 0.",
         "sign"),
    ]


def _split(out, name):
    loss, grad = pair(out, name, "(loss, grad)", "the mean loss and its gradient with respect to the logits")
    if not isinstance(loss, torch.Tensor):
        fail(f"`{name}`: the loss is a {type(loss).__name__}; return it as a tensor (a Python float would "
             "need the GPU to stop and hand it over).")
    if loss.numel() != 1:
        fail(f"`{name}`: the loss has shape {tuple(loss.shape)}; it is one number, the mean over the kept "
             "rows. Per-row losses still need their sum divided by the number of kept rows.")
    return loss, grad


TARGET_HINT = ("In this lab the usual cause is the load of logits[row, target] in an ignored row: there target is "
               "ignore_index (−100), an offset before the row. Mask that load with target != ignore_index (and take "
               "ignore_index from the argument).")


def _call(card, fn, *args, name):
    """card.call, with the lab's likely cause added to an out-of-bounds access."""
    try:
        return card.call(fn, *args, name=name)
    except CheckFailed as e:
        if "out-of-bounds" in str(e).lower():
            raise CheckFailed(f"{e}\n{TARGET_HINT}", e.diagnosis) from None
        raise


def _check_case(card, fn, name, x, t, ignore_index, *, pass_ignore=True, overflow=False):
    args = (x, t, ignore_index) if pass_ignore else (x, t)
    loss, grad = _split(_call(card, fn, *args, name=name), name)
    ref_loss, ref_grad = reference(x, t, ignore_index)
    wrong = _wrong(x, t, ignore_index)
    tol = dict(atol=1e-5, rtol=1e-5) if x.dtype == torch.float32 else dict(atol=1e-4, rtol=1e-3)
    hint = OVERFLOW if overflow else ""
    loss32 = loss.reshape(()).to(torch.float32) if loss.dtype.is_floating_point else loss.reshape(())
    with _overflow_is("no-max" if overflow else None):
        compare(loss32, ref_loss.to(torch.float32), name=f"{name}, the loss", overflow_hint=hint, tol=tol,
                wrong_answers=[(w.to(torch.float32), msg, key) for w, _, msg, key in wrong if w is not None])
    # the gradient's entries are about 1/(n·V): judge them against the largest one, 1/n
    scale = float(ref_grad.abs().max()) or 1.0
    gtol = dict(atol=1e-6 * scale, rtol=1e-5) if x.dtype == torch.float32 else dict(atol=2e-3 * scale, rtol=2e-3)
    with _overflow_is("no-max" if overflow else None):
        compare(grad, ref_grad.to(x.dtype), name=f"{name}, the gradient", like=x, overflow_hint=hint, tol=gtol,
                wrong_answers=[(g.to(x.dtype), msg, key) for _, g, msg, key in wrong if g is not None])


@contextmanager
def _overflow_is(key):
    """Within the overflow cases, NaN or inf where the answer is finite gets the diagnosis `key`."""
    try:
        yield
    except CheckFailed as e:
        if key and e.diagnosis == "nonfinite":
            raise CheckFailed(str(e), key) from None
        raise



def eager(logits, target, ignore_index=IGNORE):
    """PyTorch's way: cross_entropy on the materialised logits, and autograd for the gradient."""
    x = logits.detach().requires_grad_()
    loss = F.cross_entropy(x, target, ignore_index=ignore_index)
    loss.backward()
    return loss.detach(), x.grad


def cross_entropy(fn, *, perf_shape=PERF_SHAPE):
    """Grade fn(logits, target, ignore_index=-100) -> (mean loss, d loss / d logits)."""
    name = getattr(fn, "__name__", "cross_entropy")
    card = Scorecard("Lab 3 · fused cross-entropy", note="loss and gradient in one pass over the logits",
                     hints=EXERCISE)
    gen = torch.Generator().manual_seed(torch.randint(0, 2**31, ()).item())
    shapes = SHAPES
    if ON_GPU and not INTERPRET:
        # on a GPU a load outside the logits (x[row, -100] of an ignored row, say) is an illegal access that
        # breaks the CUDA context for good: replay one case in the bounds-checked interpreter first
        with card.criterion("loads and stores stay inside the tensors (one case replayed in the interpreter)",
                            target="no access outside") as row:
            x, t = _inputs(6, 37, torch.float32, gen=gen)     # row 1 ignored: x[1, -100] is before the tensor
            with trips.counting():
                _call(card, fn, x, t, IGNORE, name=name)
        if row.status != "passed":
            return card.finish()
    for dtype in (torch.float32, torch.float16):
        dname = {torch.float32: "fp32", torch.float16: "fp16"}[dtype]
        with card.criterion(f"{dname}: loss and gradient match PyTorch, {CASES[1][0]}",
                            target="rtol 1e-5" if dtype == torch.float32 else "rtol 2e-3"):
            for m, v in shapes:
                _check_case(card, fn, name, *_inputs(m, v, dtype, gen=gen), IGNORE)
            card.measured(f"{len(shapes)} shapes, {shapes[0][0]}×{shapes[0][1]} to "
                          f"{max(s[0] * s[1] for s in shapes):,} elements")
    with card.criterion("logits near 100: no overflow", target="finite, rtol 1e-5"):
        for dtype in (torch.float32, torch.float16):
            for m, v in NEAR_100:
                _check_case(card, fn, name, *_inputs(m, v, dtype, offset=100.0, gen=gen), IGNORE, overflow=True)
        card.measured(f"fp32 and fp16, rows of {', '.join(f'{s[1]:,}' for s in NEAR_100)}")
    with card.criterion(f"{CASES[3][0]}, passed as an argument, and {CASES[4][0]}",
                        target="as PyTorch"):
        x, t = _inputs(6, 300, torch.float32, ignore_index=-1, gen=gen)
        try:
            _check_case(card, fn, name, x, t, -1)
        except CheckFailed as e:
            raise CheckFailed(f"{e}\nEvery earlier case used ignore_index = −100; this one passes −1. Is "
                              "ignore_index taken from the argument, in the count of kept rows and in the "
                              "kernel, rather than written as −100?", "ignore-index") from None
        x, t = _inputs(5, 200, torch.float16, gen=gen)
        t[1:] = IGNORE
        _check_case(card, fn, name, x, t, IGNORE)
        card.measured("2 cases")
    _budget(card, fn, name)
    _performance(card, fn, perf_shape)
    return card.finish()


def _budget(card, fn, name):
    # the least any version moves: the logits read once, the gradient written once; the targets, the
    # count of kept rows and the loss are small change (32 bytes a row, 1 KiB)
    m, v = BUDGET_SHAPE
    for dtype in (torch.float32, torch.float16):
        s = dtype.itemsize
        budget = 2 * s * m * v + 32 * m + 1024
        dname = {torch.float32: "fp32", torch.float16: "fp16"}[dtype]
        with card.criterion(f"{dname} bytes: the logits read once, the gradient written once, "
                            "nothing M×V in between", target=f"≤ {_bytes(budget)} + 5 %, ≤ 6 launches"):
            x, t = _inputs(m, v, dtype)
            tr = trips.count(run, fn, x, t, IGNORE, name=name, poison=False)
            card.measured(f"{tr.launches} launches, {_bytes(tr.bytes)}")
            problems, keys = [], []
            if tr.bytes_written < s * m * v:
                problems.append(f"wrote {_bytes(tr.bytes_written)}; the gradient alone is {_bytes(s * m * v)}: is it "
                                "stored, for every logit?")
                keys.append("unwritten")
            if tr.bytes > budget * 1.05:
                extra = tr.bytes - 2 * s * m * v
                problems.append(
                    f"moved {_bytes(tr.bytes)}; the budget is {_bytes(budget)} (the logits once, the gradient once), "
                    f"{_bytes(budget * 1.05)} with its 5 % slack. "
                    f"The extra {_bytes(extra)} is {extra / (m * v):.1f} bytes per logit: "
                    + ("an M×V intermediate goes to memory (the probabilities, or exp(x − m)?) and is read back. "
                       "Keep them in registers: recompute exp(x − lse) in the walk that writes the gradient."
                       if extra >= m * v else "something is read or written more than once."))
                keys.append("bytes")
            if not any(k.kind == "triton" for k in tr.kernels):
                names = ", ".join(k.name for k in tr.kernels[:4])
                problems.append(f"no Triton kernel ran: the numbers come from PyTorch ({names}, …). The lab asks for "
                                "your own fused kernel.")
                keys.insert(0, "pytorch")
            elif tr.launches > 6:
                problems.append(f"{tr.launches} launches where a handful do (count the kept rows, zero the loss, one "
                                "kernel): the loss and the gradient come from one kernel.")
                keys.append("launches")
            if problems:
                fail("\n".join(problems) + f"\n{tr.table(max_rows=8)}", keys[0])


def _performance(card, fn, shape):
    if not ON_GPU or INTERPRET:
        card.against("fp16 8,192×128,256: time against F.cross_entropy forward + backward", TARGETS["lab3.vs_torch"],
                     None)
        card.performance("fp16 8,192×128,256: peak memory, F.cross_entropy's over yours", None,
                         target=MEMORY_TARGET, unit="×")
        return
    m, v = shape
    label = f"fp16 {m:,}×{v:,}"
    data = {}

    def inputs():   # made inside the rows: after a CUDA error even an allocation fails, and a row reports it
        if not data:
            data["x"] = torch.randn(m, v, device="cuda", dtype=torch.float16) * 2
            data["t"] = torch.randint(0, v, (m,), device="cuda")
            data["t"][::10] = IGNORE
        return data["x"], data["t"]

    def speed():
        x, t = inputs()
        times = bench.interleaved({"mine": lambda: fn(x, t), "eager": lambda: eager(x, t)})
        if isinstance(times["mine"], Exception):
            raise times["mine"]
        return times["mine"], times["eager"], None, "medians of 3 interleaved rounds"

    def memory():
        x, t = inputs()
        mine, theirs = bench.peak_bytes(lambda: fn(x, t)), bench.peak_bytes(lambda: eager(x, t))
        return theirs / max(mine, 1), f"yours {_bytes(mine)}, F.cross_entropy {_bytes(theirs)} above the logits"

    card.against(f"{label}: time against F.cross_entropy forward + backward", TARGETS["lab3.vs_torch"], speed,
                 diagnosis="One program per row walks the row twice: is each walk's block large "
                     "(a few thousand logits) and is the row read in fp16, converted in registers?")
    card.performance(f"{label}: peak memory, F.cross_entropy's over yours", memory, target=MEMORY_TARGET,
                     unit="×", diagnosis="Beyond the gradient itself nothing M×V should be allocated: no "
                     "probabilities, no fp32 copy of the logits.")
    data.clear()
    torch.cuda.empty_cache()
