"""Checker for lesson 08: online_softmax(x) -> y, the softmax over the last dimension of a 2-D x for rows
longer than any one block, in at most two reads and one write of x."""
from __future__ import annotations

import inspect

import torch

from .. import trips
from ..environment import DEVICE, INTERPRET, ON_GPU, pick
from ._core import CheckFailed, Passed, compare, fail, own_kernels, run, unwritten

__all__ = ["online_softmax"]

NAME = "online_softmax"
# The kinds of row the check tries, in order, each in fp32 and then fp16; the contract in lesson 08's
# stub names each of them, and every case's label starts with its kind.
CASES = ("ordinary rows", "huge values", "max rising along the row", "one-hot rows", "rows of equal values",
         "−inf entries", "rows starting with −inf", "one row of 1,048,593")
# The budget, counted on 4 x 3,000 in blocks of split_block(3000) = 1,024: reads and writes of x, each
# with 5% slack
BUDGET_SHAPE, MAX_READS, MAX_WRITES = (4, 3000), 2.05, 1.05
# Every case runs in blocks that cut its rows into SPLIT pieces or a few fewer, then at the student's
# default block, whatever it is: a default as long as the row would take every row in one block, where
# a sum never rescaled or a max never guarded gives the right answer.
SPLIT = 4
# ... and no block above SPLIT_CAP: at the 4 warps a launch gets unless it asks for more, a block of 16,384 is 128
# values a thread; a GPU compiles far larger ones slowly (with blocks of 2**19 for the long row, 4,096 values a
# thread, tests/test_check_online.py's first check had not finished after 200 s on an H200)
SPLIT_CAP = 2**14
LONG = 2**20 + 17     # Triton caps a block at 2**20 elements: no single block can hold this row
INF = float("inf")

# the tolerance for y: relative, since a softmax output may be 1e-20 and still matter; fp16 stores
# about 3 significant digits, and below 6e-5 its spacing is 6e-8
_TOL = {torch.float32: dict(rtol=1e-4, atol=1e-8), torch.float16: dict(rtol=2e-3, atol=1e-7)}

_NAN_NO_HINT = "Is something divided by 0, or is inf − inf computed?"
_HINT_HUGE = ("These rows hold values of 1e4 and more, and exp of anything past 88.7 is inf in fp32, so "
              "inf / inf = NaN. Likely cause: exp is taken of values with no running max subtracted first.")
_HINT_LEADING_INF = ("These rows start with a whole block of −inf, and while the running max is still −inf, "
                     "every exponent that subtracts it is −inf − (−inf) = NaN, which spreads to the sum. Likely "
                     "cause: nothing guards the exponents of walk 1 while no finite value has been seen.")
_HINT_NEGATIVE = ("Row 0 holds −10,000 only, so every exp of it underflows to 0 unless the max subtracted is "
                  "near −10,000 too, and then 0 / 0 = NaN. Likely cause: the running max "
                  "starts at 0, or the padded lanes load 0, so the max never goes below 0.")
_HINT_ONE_HOT = ("A row with one large value: exp(x − m) overflows if m is not that value. Does walk 2 subtract "
                 "the max of the whole row, the m that walk 1 ended with?")


# the causes the check names, each with the diagnosis key its hint lists
_HINT_KEYS = {_HINT_HUGE: "no-max", _HINT_LEADING_INF: "inf-guard", _HINT_NEGATIVE: "m-from-zero",
              _HINT_ONE_HOT: "last-max"}


# --- the cases: ordinary rows first, then the adversarial ones ----------------------------------------
def _cases(dtype):
    big = 1e4 if dtype == torch.float16 else 1e37      # near the top of the dtype's range
    shapes = [(4, 3000), (7, 37), (3, 5000), (2, 6151), pick(gpu=(64, 70_001), cpu=(2, 9000)), (1, 1)]
    ordinary, huge, rising, one_hot, equal, scattered, leading, long = CASES
    for m, n in shapes:
        yield f"{ordinary} {m}x{n}", 3 * torch.randn(m, n), _NAN_NO_HINT

    x = 1e4 + 100 * torch.randn(4, 3000)                # far past exp's range, exact differences
    x[3] = (big * torch.randn(3000)).clamp(-6e4, 6e4) if dtype == torch.float16 else big * torch.randn(3000)
    yield f"{huge} (1e4 and beyond)", x, _HINT_HUGE

    n = 4000                                          # every block raises the max: each step rescales
    yield rising, torch.linspace(0, 40, n).repeat(4, 1) + 0.1 * torch.randn(4, n), _NAN_NO_HINT

    x = torch.zeros(3, 3000)
    x[0, 0], x[1, 1700], x[2, -1] = 1e4, 1e4, 1e4      # first, middle and last column
    yield one_hot, x, _HINT_ONE_HOT

    x = torch.tensor([-1e4, 0.0, 7.0, 1e4]).repeat_interleave(3000).view(4, 3000)
    yield f"{equal} (−1e4, 0, 7, 1e4)", x, _HINT_NEGATIVE

    x = 3 * torch.randn(4, 3000)
    x[torch.rand(4, 3000) < 0.3] = -INF
    yield f"{scattered} (30%)", x, _NAN_NO_HINT

    x = 3 * torch.randn(3, 20_000)
    x[0, :16_400], x[1, :5000] = -INF, -INF            # a whole first block of −inf, for blocks up to 16384
    yield f"{leading} (16,400 and 5,000 of them)", x, _HINT_LEADING_INF

    if dtype == torch.float32 or not INTERPRET:         # the interpreter walks this row slowly: once is enough
        yield f"{long} (longer than any block)", 3 * torch.randn(1, LONG), _NAN_NO_HINT


# --- what the usual mistakes produce, for blocks of b columns -------------------------------------------
def _blocks(xd, b, pad):
    m, n = xd.shape
    c = -(-n // b)
    padded = torch.full((m, c * b), pad, dtype=xd.dtype)
    padded[:, :n] = xd
    return padded.view(m, c, b)


def _mistakes(xd, b):
    """(y, diagnosis, key) for each usual mistake of a kernel that walks the row in blocks of b columns."""
    blocks = _blocks(xd, b, -INF)
    bmax = blocks.amax(-1)                                   # each block's max
    run_max = torch.cummax(bmax, dim=1).values               # the running max after each block
    m = run_max[:, -1:]
    safe = torch.where(run_max == -INF, 0.0, run_max)
    bsum = torch.exp(blocks - safe[..., None]).sum(-1)        # each block's sum, relative to the running max
    e = torch.exp(xd - m)
    s = e.sum(-1, keepdim=True)
    p0 = _blocks(xd, b, 0.0).flatten(1)                      # padded lanes that loaded 0
    m0 = p0.amax(-1, keepdim=True)
    nan_rows = torch.where((bmax[:, :1] == -INF), torch.nan, e / s)
    out = []
    c = blocks.shape[1]
    if c > 1:
        # walk 1 stopped one block short: the max and the sum of every block but the last
        head = xd[:, :(c - 1) * b]
        m1 = head.amax(-1, keepdim=True)
        m1 = torch.where(m1 == -INF, 0.0, m1)
        out.append((torch.exp(xd - m1) / torch.exp(head - m1).sum(-1, keepdim=True),
                    f"y comes out exactly as if walk 1 never reached the last block of each row (columns "
                    f"{(c - 1) * b:,} to {xd.shape[1] - 1:,} here): the max and the sum were taken over the blocks "
                    "before it only, so the sum is too small. Likely cause: the bound of walk 1's loop, which stops "
                    "one block short of the row's end.", "last-block"))
    return out + [
        (e / bsum.sum(-1, keepdim=True),
         "y comes out too small on the rows whose max grows after their first block, exactly as if the running "
         "sum were not rescaled when the max changes: terms taken against an old, smaller max stay as large "
         "as they were, and the sum they go into is too large.", "no-rescale"),
        (e / (bsum * torch.exp(m - safe)).sum(-1, keepdim=True),
         "the sum comes out too large, exactly as if the rescale factor were upside down: when the max grows, "
         "the old sum is made larger instead of smaller.", "inverted-rescale"),
        (torch.exp(xd - bmax[:, -1:]) / s,
         "y comes out exactly as if walk 2 subtracted the max of the last block, not the max the running sum "
         "was taken against.", "last-max"),
        (torch.exp(xd - m0) / torch.exp(p0 - m0).sum(-1, keepdim=True),
         f"the sum comes out exactly as if the padded lanes past the end of the row loaded 0, each adding "
         f"exp(0 − m) to it (here {(-xd.shape[1]) % b} per row). Likely cause: what the masked load puts in "
         "the lanes past the row.", "pad-zero"),
        (nan_rows,
         "the rows that start with a whole block of −inf come out NaN, and the others right. While the running "
         "max is still −inf, an exponent that subtracts it is −inf − (−inf) = NaN. Likely cause: nothing guards "
         "walk 1's exponents until a finite value has been seen.", "inf-guard"),
    ]


def _all_mistakes(xd):
    n = xd.shape[1]
    if n > 100_000:       # the long row is there for one-block kernels; the short rows catch these
        return
    b = 16
    while b < 2 * n:
        yield from _mistakes(xd, b)
        b *= 2


# --- comparing ------------------------------------------------------------------------------------------
def _row_sums(out):
    sums = out.double().sum(-1)
    sums = sums[torch.isfinite(sums)]
    if sums.numel() == 0:
        return ""
    lo, hi = float(sums.min()), float(sums.max())
    if abs(lo - 1) < 1e-3 and abs(hi - 1) < 1e-3:
        return ""         # the finite rows are fine: "they sum to 1" would only confuse
    return f" Your rows sum to {lo:.4g}" + (f" … {hi:.4g}" if hi - lo > 1e-6 else "") + " (each should sum to 1)."


# --- telling the causes of NaN apart: probes, not the first guess that fits ---------------------------
FULL = 2**16      # a power of two: it fills every lane of every block of any power-of-two BLOCK up to it


def _all_nan(fn, x, name):
    """Every element came out NaN: find out why by running probe rows, and fail naming that cause only
    when the probes single it out (otherwise the ordinary comparison says what it can)."""
    def probe(n, values):
        row = values(n).to(x.dtype).to(DEVICE)
        out = run(fn, row, name=NAME)
        if not isinstance(out, torch.Tensor) or out.shape != row.shape:
            return "other"
        got = out.double().cpu()
        if bool(torch.isnan(got).all()):
            return "nan"
        want = torch.softmax(row.double(), -1).to(x.dtype).double().cpu()
        return "right" if bool(torch.isclose(got, want, **_TOL[x.dtype]).all()) else "other"

    ordinary = lambda n: 3 * torch.randn(1, n)   # noqa: E731
    full = probe(FULL, ordinary)                  # fills every block: no position sees only padding
    short = probe(37, ordinary)                   # positions 37 and up of its one block never see a value
    if full == "right" and short == "nan":
        fail(f"`{name}`: every element is NaN, and so is a row of 37 ordinary values, yet one row of {FULL:,} "
             "ordinary values, a length that fills every block of any power-of-two BLOCK with values of the row, "
             "comes out right. So the NaN comes from the padding past the end of a row, which loads −inf. The "
             "lesson's recurrence keeps one running max per row (tl.max over the block): a block with one value "
             "of the row has a finite max, and its padding adds exp(−inf − m) = 0. A NaN here means some max "
             "was taken over padding alone and stayed −inf, so that exp(−inf − (−inf)) = NaN. Likely cause: a "
             "max kept for each position of the block (a vector of BLOCK) rather than one per row, with no "
             "guard for a position that has seen only padding.", "lane-inf")
    if full == "nan" and short == "nan" and probe(1, lambda n: torch.full((1, n), 2.0)) == "nan":
        fail(f"`{name}`: every element is NaN, on every row, even one of {FULL:,} ordinary values and a row "
             "of one 2.0. Likely cause: the rescale factor is upside down. At the first block the old sum is 0 "
             "and the old max −inf: the right factor is then 0, harmless, but the inverted one is exp(+inf) = "
             "inf, and 0 · inf = NaN.", "inverted-rescale")


def _verify(fn, out, x, label, hint):
    xd = x.double()
    ref = torch.softmax(xd, dim=-1)
    tol = _TOL[x.dtype]
    name = f"{NAME}, {str(x.dtype)[6:]} {label}"    # the label ends with the block it ran in
    if isinstance(out, torch.Tensor) and out.shape == x.shape and out.dtype == x.dtype and out.device == x.device:
        never = unwritten(out).cpu()
        if bool(never.any()) and not bool(never.all()):
            first = never.int().argmax(-1)               # first unwritten column of each row
            cols = torch.arange(x.shape[1])
            if bool((never == (cols >= first[:, None])).all()) and bool(never[:, -1].all()):
                c = int(first.min())
                fail(f"`{name}`: only the first {c:,} columns of each row were written, the rest still hold the "
                     f"poison the check put in fresh memory. The kernel handles one block of each row: a row longer "
                     f"than BLOCK needs a loop over it, BLOCK columns at a time.", "one-block")
        got = out.double().cpu()                          # the diagnosis runs on the CPU, in float64
        want = ref.to(x.dtype).double().cpu()
        if not bool(never.any()) and not bool(torch.isclose(got, want, **tol, equal_nan=True).all()):
            if bool(torch.isnan(got).all()) and bool(torch.isfinite(want).all()):
                _all_nan(fn, x, name)
            for alt, message, key in _all_mistakes(xd.cpu()):
                if bool(torch.isclose(got, alt.to(x.dtype).double(), **tol, equal_nan=True).all()):
                    fail(f"`{name}`: {message}{_row_sums(out)}", key)
    try:
        compare(out, ref.to(x.dtype), name=name, like=x, tol=tol, overflow_hint=hint)
    except CheckFailed as e:
        extra = _row_sums(out) if isinstance(out, torch.Tensor) and out.shape == x.shape else ""
        key = _HINT_KEYS.get(hint, e.diagnosis) if e.diagnosis == "nonfinite" else e.diagnosis
        raise CheckFailed(str(e) + extra, key) from None


def split_block(n: int) -> int:
    """The block the check passes for rows of n: the least power of two >= n / SPLIT, at most SPLIT_CAP, so that
    a row of 3 or more takes 3 or 4 blocks, more past 65,536 (1,024 for 3,000 columns, 16 for 37, 1 for 1,
    16,384 for 1,048,593)."""
    return min(SPLIT_CAP, 1 << (-(-n // SPLIT) - 1).bit_length())


def _blocks_named(fn):
    """Refuse, in words, a function the check cannot pass a block to: the contract's signature has one."""
    try:
        inspect.signature(fn).bind(torch.empty(0), 1024)
    except TypeError:
        fail(f"`{NAME}` cannot be called as {NAME}(x, block): the check passes blocks of its own as well as "
             "calling it with your default, so keep the signature the stub gives, "
             f"{NAME}(x, block=8192).", "signature")
    except ValueError:       # no signature to read (a builtin): calling it will tell
        pass


def _call(fn, x, label, block=None):
    try:
        return run(fn, x, name=NAME) if block is None else run(fn, x, block, name=NAME)
    except CheckFailed as e:
        if "maximum tensor numel" not in str(e) and "larger than Triton allows" not in str(e):
            raise
        raise CheckFailed(
            f"`{NAME}` failed on {label}: Triton refuses a block of more than 2**20 = {2**20:,} elements, and one "
            f"block holding this row would need {1 << (x.shape[1] - 1).bit_length():,}. One block per row cannot hold "
            f"this row: it has to be walked, a block at a time.\n(What Triton said: {str(e).splitlines()[0]})",
            "one-block") from None


# --- the byte budget --------------------------------------------------------------------------------------
def _budget(fn, dtype):
    m, n = BUDGET_SHAPE
    x = (3 * torch.randn(m, n)).to(dtype).to(DEVICE)
    t = trips.count(run, fn, x, split_block(n), name=NAME, poison=False)
    if t.launches == 0:
        fail(f"`{NAME}` launched no kernel at all: did it compute on the CPU side, or return early?", "no-launch")
    own_kernels(t, NAME, f"\n{t.table()}")
    if t.launches > 1:
        fail(f"`{NAME}` made {t.launches} launches where 1 should do: every launch writes its result to HBM and "
             f"the next reads it back.\n{t.table()}", "launches")
    xb = m * n * dtype.itemsize
    reads, writes = t.requested_read / xb, t.requested_written / xb
    if reads > MAX_READS or writes > MAX_WRITES:
        fail(f"`{NAME}` gives the right numbers but its loads read x {reads:.2f} times and its stores write it "
             f"{writes:.2f} times ({str(dtype)[6:]}, {m} x {n} in blocks of {split_block(n):,}); the budget is "
             "2 reads + 1 write. "
             + ("Three walks, max, then sum, then write? The online recurrence takes the max and the sum in one "
                "walk." if reads > MAX_READS else
                "Is y written more than once, e.g. unnormalised first and fixed up after?")
             + f"\n{t.table()}", "bytes")
    return t


def _pytorch_first(fn):
    """Is it PyTorch doing the work? Asked before any number is judged: PyTorch's own fp32 softmax sums a
    row of 2**20 in long fp32 chains and lands up to 2e-4 off (measured on the CPU), past the tolerance a
    kernel that walks the row in blocks meets easily, so judging its numbers first would call it wrong."""
    x = (3 * torch.randn(4, 3000)).to(DEVICE)
    t = trips.count(run, fn, x, name=NAME, poison=False)
    out = t.result
    if isinstance(out, torch.Tensor) and out.shape == x.shape and out.dtype == x.dtype and bool(
            torch.isclose(out.double(), torch.softmax(x.double(), -1).to(x.dtype).double(), **_TOL[x.dtype]).all()):
        own_kernels(t, NAME, f"\n{t.table()}")


def online_softmax(fn) -> Passed:
    """fn(x, block) -> y: torch.softmax(x, dim=-1) for a contiguous 2-D x in fp32 or fp16, for rows of any
    length (one row of 2**20 + 17 included, longer than any block Triton allows), in one launch that reads
    x at most twice and writes y once. Each case runs in blocks of split_block(N), then as fn(x), at the
    default block."""
    result = Passed(NAME)
    if callable(fn):
        _blocks_named(fn)
    if ON_GPU and not INTERPRET:   # replay one case through the bounds-checked interpreter
        with trips.counting():
            run(fn, torch.randn(3, 3000, device=DEVICE), split_block(3000), name=NAME)
    _pytorch_first(fn)
    for dtype in (torch.float32, torch.float16):
        for label, x, hint in _cases(dtype):
            x = x.to(dtype).to(DEVICE)
            b = split_block(x.shape[1])
            for block, how in ((b, f"in blocks of {b:,}"), (None, "at your default block")):
                _verify(fn, _call(fn, x, f"{label}, {how}", block), x, f"{label}, {how}", hint)
            result.cases.append(f"{str(dtype)[6:]} {label}")
    for dtype in (torch.float32, torch.float16):
        t = _budget(fn, dtype)
        if dtype == torch.float32:
            result.traffic = t
    return result

