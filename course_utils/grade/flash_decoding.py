"""Lab 5's grader: flash-decoding, attention for one new token per sequence against a KV cache, the keys
of each (sequence, head) split over many programs whose partial results are merged.

    o = fn(q, k, v, seq_lens=None)
    q (B, H, 1, D); k, v (B, H_kv, N, D) with H % H_kv == 0 (grouped-query attention: query head h reads
    KV head h // (H / H_kv)); seq_lens None or int32 (B,): keys at positions >= seq_lens[b] are ignored;
    o = softmax(q·kᵀ / √D)·v, q's shape and dtype.

The reference is computed in float64. Wrong answers that do not depend on how the student split the keys
(seq_lens ignored or off by one, the head mapping, the scale) are computed directly; "the last keys
dropped" is found by comparing each output row with attention over every shorter prefix of its keys; a
merge or a running sum that is not rescaled is told apart by two probes with crafted scores."""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F

from .. import bench, capability, targets, trips
from ..targets import TARGETS
from ..check._core import CheckFailed, compare, fail, run
from ..environment import DEVICE, INTERPRET, ON_GPU, pick
from ._card import Scorecard, _bytes, diagnose_crash

__all__ = ["flash_decoding"]

HINTS = "lab5.flash_decoding"
# What the grader tries, each named as the contract in the notebook names it (tests/test_contracts.py checks
# that it does); the rows below are titled from these names.
GQA, DIMS, ODD_N = "1, 4 and 8 query heads per KV head", "D = 64 and 128", "N that no block divides"
STRIDED_Q = "a q that is not contiguous"
RAGGED = "sequences of 1 key and of N keys"
EQUAL, FALLING, RISING = ("every score equal", "scores that fall steadily along the keys",
                          "scores that rise steadily along the keys")
# (B, H, H_kv, N, D, seq_lens): GQA ratios 1, 4 and 8, D 64 and 128, N that no block divides. "ragged":
# random lengths with a 1 and an N among them.
_SHAPES = [(2, 2, 2, 37, 64, None), (1, 8, 2, 300, 64, None), (1, 8, 1, 129, 128, None),
           (3, 4, 1, 200, 128, "ragged")] + pick(gpu=[(2, 32, 8, 4099, 128, "ragged"), (4, 8, 8, 1000, 64, None)],
                                                 cpu=[])
_FP32_SHAPES = [(2, 4, 1, 100, 64, "ragged")]
# the partial results a design may keep: at most this many splits of one (sequence, KV head), and no more
# than one split per SPLIT_MIN keys; each split an fp32 output of D numbers and two more (its max and sum,
# or its log-sum-exp) per query head
MAX_SPLITS, SPLIT_MIN = 64, 64
# (B, H, H_kv, N, D) of the byte count, and of the search for an N-sized write: a long cache and a small D,
# where the scores of every key (B·H·N numbers) outweigh every partial result the budget allows
BUDGET_SHAPE = (1, 8, 2, 320, 64)
SCORES_SHAPE = (1, 2, 1, 8192, 16)
# Targets: course_utils/targets.py ("lab5.*"), each a ratio to a reference timed in the same run on this GPU: at
# B = 1 a kernel that only reads the same K and V bytes, and SDPA; at B = 8, 32, 64 SDPA (parity within its
# tolerance where SDPA is at the copy ceiling). docs/gpu-results/targets-per-gpu-2026-11-26.md has the H100 and H200 runs.
PERF_HEADS = (32, 8, 128)            # H, H_kv, D: an 8B-class Llama
PERF_N = 8192
SDPA_BATCHES = (8, 32, 64)
_SLOW = ("Likely causes: too few programs (at B = 1 there are only 8 KV heads: are the keys split so that "
         "B · H_kv · splits is a few times the number of SMs?), too many splits (each writes D + 2 fp32 numbers "
         "per query head that the merge reads back), or small blocks of keys per loop step.")
# at B >= 32 SDPA already streams the cache at the copy ceiling: a kernel can tie it, not beat it
_AT_CEILING = ("At this batch there are hundreds of (sequence, KV head) pairs and SDPA already moves the cache near "
               "the copy ceiling (the line above gives both shares): nothing is left to beat it by, and a kernel that "
               "ties it lands within about half a percent either side from run to run. A miss past the parity band: "
               "extra bytes (more splits than this batch needs write partial results and add a merge), or a tile of "
               "keys too small or too large for the stages.")


def max_splits(n: int) -> int:
    """The most splits the byte budget allows for a cache of n keys."""
    return max(1, min(MAX_SPLITS, math.ceil(n / SPLIT_MIN)))


# the slack of both counts: one more write of the partial results (a torch.zeros of them, say) and 2 %
SLACK = 0.02


def _shape_name(shape) -> str:
    b, h, h_kv, n, d = shape
    return f"B = {b}, H = {h}, H_kv = {h_kv}, N = {n:,}, D = {d}"


CASES = (
    (GQA, "fp16, the shapes of _SHAPES without seq_lens: H / H_kv = 1, 4 and 8"),
    (DIMS, "the head dimension of those shapes"),
    (ODD_N, "N = 37, 129, 200, 300; on a GPU also 1,000 and 4,099"),
    (STRIDED_Q, "fp16, q a slice of a wider tensor (a fused QKV projection's output)"),
    (RAGGED, "seq_lens random in 1 … N, with a 1 and an N among them: fp16, fp32 and bf16"),
    ("fp32", "one ragged batch"),
    ("bf16", "one ragged batch, on a GPU whose Triton has bf16"),
    (EQUAL, "after a wrong answer: q = 0, so every block and split has one maximum"),
    (FALLING, "after a wrong answer: each split's maximum is its first key, and the splits' maxima differ"),
    (RISING, "after a wrong answer: every block of keys raises the running maximum"),
    (_shape_name(BUDGET_SHAPE), "fp16, seq_lens None: the launches and bytes of one call are counted"),
    (_shape_name(SCORES_SHAPE), "fp16, seq_lens None: the bytes written are counted"),
)
# The bad calls, each to be refused with a ValueError (name as the contract gives it, the call itself)
BAD_CALLS = (
    ("H not a multiple of H_kv", "H = 6 query heads for H_kv = 4"),
    ("a q that is not (B, H, 1, D)", "q with 2 queries per sequence, (1, 4, 2, 64)"),
    ("k and v of different shapes", "k (1, 2, 40, 64) and v (1, 2, 41, 64)"),
    ("q's D not the cache's D", "q's D = 32 against the cache's D = 64"),
    ("q's B not the cache's B", "q with B = 2 against a cache with B = 1"),
    ("a seq_lens not of shape (B,)", "seq_lens of shape (2,) for B = 1"),
    ("a seq_lens not int32", "seq_lens as float32"),
)


def _lens(kind, b, n, gen):
    if kind is None:
        return None
    lens = torch.randint(1, n + 1, (b,), generator=gen, dtype=torch.int32)
    lens[0] = 1
    if b > 1:
        lens[1] = n
    return lens.to(DEVICE)


def _inputs(b, h, h_kv, n, d, dtype, gen, strided_q=False):
    q = torch.randn(b, h, 1, d, generator=gen)
    k = torch.randn(b, h_kv, n, d, generator=gen)
    v = torch.randn(b, h_kv, n, d, generator=gen)
    q, k, v = q.to(dtype).to(DEVICE), k.to(dtype).to(DEVICE), v.to(dtype).to(DEVICE)
    if strided_q:                  # q a view into a wider tensor, its rows 2·D apart (as a QKV projection gives)
        q = torch.cat([torch.randn(b, h, 1, d, generator=gen).to(dtype).to(DEVICE), q], -1)[..., d:]
    return q, k, v


def _kv_of(h, h_kv, how="group"):
    g = h // h_kv
    heads = torch.arange(h)
    return {"group": heads // g, "modulo": heads % h_kv, "divide": heads // h_kv}[how].clamp(max=h_kv - 1)


def reference(q, k, v, seq_lens=None, *, heads="group", scale=None, lens_shift=0, ignore_lens=False):
    """softmax(q·kᵀ·scale)·v in float64, (B, H, 1, D); the keyword arguments make the wrong answers."""
    b, h, _, d = q.shape
    h_kv, n = k.shape[1], k.shape[2]
    idx = _kv_of(h, h_kv, heads).to(k.device)
    kd, vd = k.double()[:, idx], v.double()[:, idx]
    s = (q.double() @ kd.transpose(-1, -2)) * (1 / math.sqrt(d) if scale is None else scale)
    if seq_lens is not None and not ignore_lens:
        lens = (seq_lens.long() + lens_shift).clamp(1, n)
        s = s.masked_fill(torch.arange(n, device=q.device)[None, None, None, :] >= lens[:, None, None, None],
                          float("-inf"))
    return torch.softmax(s, dim=-1) @ vd


def _closest_prefix(out, q, k, v, seq_lens):
    """(attention over the first L keys of each row, L chosen per (sequence, head) as the L < its length
    nearest to `out`, and a sentence about one such row), or (None, "") where no row can drop a key."""
    b, h, _, d = q.shape
    h_kv, n = k.shape[1], k.shape[2]
    idx = _kv_of(h, h_kv).to(k.device)
    kd, vd = k.double()[:, idx], v.double()[:, idx]
    s = (q.double() @ kd.transpose(-1, -2))[:, :, 0, :] / math.sqrt(d)             # (B, H, N)
    lens = (seq_lens.long() if seq_lens is not None else torch.full((b,), n, device=q.device))
    keys = torch.arange(n, device=q.device)
    s = s.masked_fill(keys[None, None, :] >= lens[:, None, None], float("-inf"))
    e = torch.exp(s - s.amax(-1, keepdim=True))
    num = torch.cumsum(e[..., None] * vd, dim=2)                                   # (B, H, N, D)
    den = torch.cumsum(e, dim=2)[..., None]
    prefix = num / den.clamp_min(1e-300)                                           # row L-1: first L keys
    err = (prefix - out.double()[:, :, :1, :]).abs().amax(-1)                      # (B, H, N)
    err = err.masked_fill(keys[None, None, :] >= (lens - 1)[:, None, None], float("inf"))   # only L < len
    if not bool(torch.isfinite(err).any()):
        return None, ""
    best = err.argmin(-1)                                                          # (B, H): L - 1
    alt = torch.gather(prefix, 2, best[..., None, None].expand(b, h, 1, d))
    full = reference(q, k, v, seq_lens)
    short = lens[:, None] - 1 > best                                               # a row that drops keys
    alt = torch.where(torch.isfinite(err.amin(-1))[..., None, None], alt, full)
    if not bool(short.any()):
        return None, ""
    bi, hi = (int(i) for i in torch.nonzero(short)[0])
    got, of = int(best[bi, hi]) + 1, int(lens[bi])
    return alt, (f"each output is attention over the first keys of its sequence only (sequence {bi}, head {hi}: the "
                 f"first {got} of its {of} keys). The keys past the last whole split are dropped: a split length "
                 f"of N // splits leaves N % splits keys out. Round the split length up (a ceiling division), "
                 f"and clamp the last split at the sequence's end.")


def _wrong(out, q, k, v, seq_lens):
    """(tensor, message, key) for the mistakes that do not depend on how the keys were split: a generator, so
    that compare() computes them only for an output that is wrong."""
    h, h_kv, d = q.shape[1], k.shape[1], q.shape[-1]
    if seq_lens is not None:
        yield (reference(q, k, v, seq_lens, ignore_lens=True),
               "seq_lens is ignored: every key of the cache is attended to, also those at positions >= seq_lens[b] "
               "(in a batch of ragged sequences, the cache past a sequence's end holds another request's data or "
               "nothing). Mask the keys at positions >= seq_lens[b], and only read those below it.", "seq-lens")
        yield (reference(q, k, v, seq_lens, lens_shift=1),
               "one key too many: the key at position seq_lens[b] is attended to. seq_lens[b] counts the valid keys, "
               "so they sit at positions 0 … seq_lens[b] − 1 (mask with position < seq_lens[b]).", "seq-lens")
    if h != h_kv and h_kv > 1:
        g = h // h_kv
        yield (reference(q, k, v, seq_lens, heads="modulo"),
               f"query head h reads KV head h % H_kv: the heads are interleaved. In grouped-query attention the {g} "
               f"query heads that share a KV head are neighbours: h reads KV head h // {g} (H / H_kv = {h} / {h_kv}).",
               "gqa")
        yield (reference(q, k, v, seq_lens, heads="divide"),
               f"query head h reads KV head h // H_kv = h // {h_kv}: the group size is H / H_kv = {g}, so h reads KV "
               f"head h // {g}.", "gqa")
    yield (reference(q, k, v, seq_lens, scale=1.0),
           f"the scores are not scaled: softmax(q·kᵀ / √D) divides them by √D = {math.sqrt(d):g}.", "scale")
    alt, msg = _closest_prefix(out, q, k, v, seq_lens)
    if alt is not None:
        yield (alt, msg, "remainder")


def _tol(dtype):
    if dtype == torch.float16:
        return dict(atol=5e-3, rtol=1e-2)
    if dtype == torch.bfloat16:
        return dict(atol=3e-2, rtol=3e-2)
    if ON_GPU and not INTERPRET:           # tl.dot on fp32 runs in tf32 by default
        return dict(atol=5e-3, rtol=5e-3)
    return dict(atol=1e-5, rtol=1e-5)


EMPTY_SPLIT = ("Where seq_lens is short, the splits past a sequence's end hold no key: such a split has a maximum "
               "of −inf and a sum of 0, so its partial output 0 / 0 is NaN, and in the merge a weight of 0 times NaN "
               "is still NaN. An empty split must come out with weight exactly 0 and an output that is a number "
               "(or be skipped).")


def _call(card, fn, q, k, v, seq_lens, name):
    return card.call(fn, q, k, v, seq_lens, name=name) if seq_lens is not None else card.call(fn, q, k, v, name=name)


def _probe(card, fn, name, shape_args, seq_lens, kind):
    """Run fn on scores built to tell the rescaling mistakes apart: "equal" (q = 0: every score 0, so every
    block and every split has the same maximum), "falling" (scores fall along the keys: within a split the
    maximum is its first key, but splits differ) or "rising" (every block raises the maximum). True if right."""
    b, h, h_kv, n, d, dtype = shape_args
    gen = torch.Generator().manual_seed(7)
    q = torch.zeros(b, h, 1, d)
    k = torch.randn(b, h_kv, n, d, generator=gen)
    v = torch.randn(b, h_kv, n, d, generator=gen)
    if kind != "equal":
        q[..., 0] = math.sqrt(d)                        # score of key j = k[j, 0]
        ramp = torch.linspace(8.0, 0.0, n) if kind == "falling" else torch.linspace(0.0, 8.0, n)
        k[:, :, :, 0] = ramp
    q, k, v = (t.to(dtype).to(DEVICE) for t in (q, k, v))
    try:
        out = _call(card, fn, q, k, v, seq_lens, name)
    except CheckFailed:
        return False
    ref = reference(q, k, v, seq_lens)
    return isinstance(out, torch.Tensor) and out.shape == ref.shape and bool(
        torch.isclose(out.double(), ref, **_tol(dtype)).all())


def _check_case(card, fn, name, shape, dtype, gen, strided_q=False):
    b, h, h_kv, n, d, kind = shape
    q, k, v = _inputs(b, h, h_kv, n, d, dtype, gen, strided_q)
    seq_lens = _lens(kind, b, n, gen)
    out = _call(card, fn, q, k, v, seq_lens, name)
    ref = reference(q, k, v, seq_lens)
    what = f"{name}, B={b} H={h} H_kv={h_kv} N={n} D={d}" + (", q not contiguous" if strided_q else "") + (
        f", seq_lens={seq_lens.tolist()}" if seq_lens is not None and b <= 4 else "")
    wrong = _wrong(out, q, k, v, seq_lens) if isinstance(out, torch.Tensor) and out.shape == ref.shape else []
    try:
        compare(out, ref.to(dtype), name=what, like=q, tol=_tol(dtype), wrong_answers=wrong)
    except CheckFailed as e:
        if strided_q and e.diagnosis not in ("stub", "raised", "return", "dtype"):
            raise CheckFailed(f"{e}\nThe same shapes with a contiguous q passed: this q is a view whose rows are "
                              f"{q.stride(1)} elements apart, not {d}. Index q with its strides (q.stride()), or "
                              "copy it first (q.contiguous(): 2·B·H·D·s bytes, within the budget's slack).",
                              "q-strides") from None
        if e.diagnosis == "nonfinite" and seq_lens is not None and bool((seq_lens < n).any()):
            full = _call(card, fn, q, k, v, None, name)    # the same cache, every key valid: no split is empty
            if isinstance(full, torch.Tensor) and bool(torch.isfinite(full).all()):
                raise CheckFailed(f"{e}\nWith seq_lens=None the same cache gives no NaN. {EMPTY_SPLIT}",
                                  "empty-split") from None
        if e.diagnosis not in ("wrong", "factor", "tail"):
            raise
        args = (b, h, h_kv, n, d, dtype)
        if not _probe(card, fn, name, args, seq_lens, "equal"):
            raise
        if not _probe(card, fn, name, args, seq_lens, "falling"):
            raise CheckFailed(f"{e}\nRight when every score is equal, wrong when the scores fall along the keys (then "
                              "each split's maximum is its first key's score, and the splits' maxima differ): the "
                              "partial results are merged without rescaling them to one common maximum. Each split's "
                              "sum and output are relative to its own maximum m_s; before they are added up, each "
                              "needs the factor exp(m_s − M), M the largest of the m_s (or weights from the "
                              "log-sum-exps).", "merge-rescale") from None
        if not _probe(card, fn, name, args, seq_lens, "rising"):
            raise CheckFailed(f"{e}\nRight when every score is equal and when they fall along the keys, wrong when "
                              "each block of keys raises the maximum: inside a split, the running sum and output "
                              "are not rescaled by exp(m − m_new) when the maximum grows (lesson 08's recurrence).",
                              "loop-rescale") from None
        raise


def _bad_inputs(card, fn, name):
    """Each bad call must raise ValueError (a kernel handed mismatched shapes reads past its tensors)."""
    f16 = dict(dtype=torch.float16, device=DEVICE)
    q, k = torch.randn(1, 4, 1, 64, **f16), torch.randn(1, 2, 40, 64, **f16)
    built = {
        "H not a multiple of H_kv": (torch.randn(1, 6, 1, 64, **f16), torch.randn(1, 4, 40, 64, **f16),
                                     torch.randn(1, 4, 40, 64, **f16)),
        "a q that is not (B, H, 1, D)": (torch.randn(1, 4, 2, 64, **f16), k, k.clone()),
        "k and v of different shapes": (q, k, torch.randn(1, 2, 41, 64, **f16)),
        "q's D not the cache's D": (torch.randn(1, 4, 1, 32, **f16), k, k.clone()),
        "q's B not the cache's B": (torch.randn(2, 4, 1, 64, **f16), k, k.clone()),
        "a seq_lens not of shape (B,)": (q, k, k.clone(), torch.ones(2, dtype=torch.int32, device=DEVICE)),
        "a seq_lens not int32": (q, k, k.clone(), torch.ones(1, dtype=torch.float32, device=DEVICE)),
    }
    cases = [(what, built[rule]) for rule, what in BAD_CALLS]
    # on a GPU, a kernel launched with such shapes may read outside its tensors and break the CUDA context:
    # every launch is replayed in the bounds-checked interpreter first
    guard = trips.counting if ON_GPU and not INTERPRET else contextlib.nullcontext
    for what, args in cases:
        try:
            with guard():
                fn(*args)
        except ValueError as e:
            if not str(e).strip():
                fail(f"`{name}` raised ValueError for {what}, with no message: say what is wrong.", "bad-input")
            continue
        except NotImplementedError as e:
            fail(f"`{name}` is still the stub ({e}).", "stub")
        except Exception as e:  # noqa: BLE001
            # Only the refusal the contract asks for, a ValueError, is recognised. Anything else is a crash, whose
            # cause nobody recognised: it gets no key, so no hint (hint 2, the contract's edges, would send a
            # function that crashes on every call to the wrong place)
            fail(f"`{name}`, given {what}: {diagnose_crash(e)}\nThe contract asks for a ValueError raised before any "
                 "kernel runs; this is another error, from inside.", None)
        else:
            fail(f"`{name}` accepted {what}: it should raise ValueError before launching anything (a kernel handed "
                 "such shapes reads outside its tensors or returns nonsense).", "bad-input")
    card.measured(f"{len(cases)} bad calls refused")


def byte_budget(b, h, h_kv, n, d, s=2):
    """(the budget, its limit with the slack, the K and V bytes, the partial results P) of one call: K and V
    read once, q read and o written once, P = at most max_splits(N) splits of D + 2 fp32 numbers per query
    head, written once and read once, and seq_lens (4 bytes a sequence). The slack: one more P and 2 %."""
    kv = 2 * b * h_kv * n * d * s
    partial = max_splits(n) * b * h * (d + 2) * 4
    budget = kv + 2 * b * h * d * s + 2 * partial + 4 * b
    return budget, budget * (1 + SLACK) + partial, kv, partial


def write_budget(b, h, h_kv, n, d, s=2):
    """(the budget, its limit) of the bytes one call writes: o and the partial results P; the slack: one
    more write of P and 2 %."""
    partial = max_splits(n) * b * h * (d + 2) * 4
    budget = b * h * d * s + partial
    return budget, budget * (1 + SLACK) + partial


def _budget(card, fn, name):
    b, h, h_kv, n, d = BUDGET_SHAPE
    q, k, v = _inputs(b, h, h_kv, n, d, torch.float16, torch.Generator().manual_seed(3))
    kv = 2 * b * h_kv * n * d * 2
    qo = 2 * b * h * d * 2
    budget, limit, _, partial = byte_budget(b, h, h_kv, n, d)
    with card.criterion("bytes: K and V read once, partial results bounded by splits × B × H × (D + 2)",
                        target=f"≤ {_bytes(limit)} (the sum {_bytes(budget)}, + one more write of the partial "
                               f"results and 2 %), ≤ 3 launches"):
        tr = trips.count(run, fn, q, k, v, name=name, poison=False)
        # every load as issued: a K/V tile loaded by each of the G query heads that share it counts G times,
        # though each tensor's distinct bytes (tr.bytes) stay within the budget
        card.measured(f"{tr.launches} launches, {_bytes(tr.requested)} requested by the loads and stores "
                      f"(K and V: {_bytes(kv)})")
        problems = []
        if not any(x.kind == "triton" for x in tr.kernels):
            problems.append(f"no Triton kernel ran: the output comes from PyTorch ({', '.join(x.name for x in tr.kernels[:4])}"
                            ", …). The lab asks for your own kernels.")
        if tr.requested > limit and tr.bytes <= limit:
            g = h // h_kv
            problems.append(
                f"your loads ask for {_bytes(tr.requested)}, the limit is {_bytes(limit)}, though the distinct bytes "
                f"they touch ({_bytes(tr.bytes)}) fit: the same elements are loaded more than once, about "
                f"{(tr.requested_read - qo / 2 - partial) / kv:.1f} times K and V. Here G = H / H_kv = {g} query heads share each KV "
                f"head: is each K and V tile loaded once per query head, by {g} programs? The contract asks for each "
                "element once, whichever query heads share it: one program can load a tile once and use it for every "
                "query head of its group.")
        elif tr.requested > limit:
            extra = tr.requested - kv - qo
            problems.append(
                f"moved {_bytes(tr.requested)}; the limit is {_bytes(limit)}: K and V ({_bytes(kv)}) once, q and o, and the "
                f"partial results of at most {max_splits(n)} splits written and read back ({_bytes(2 * partial)}), "
                f"and a slack of one more write of them and 2 %. "
                f"Beyond K, V, q and o this moved {_bytes(extra)}: "
                + ("about another copy of K and V: are they read twice (a pass for the maximum, another for the "
                   "sum), or repeated to match the query heads (repeat_interleave), where each group of query heads "
                   "can share one read?" if extra > 0.5 * kv else
                   "more partial results than the splits need, or an N-sized intermediate (the scores?) in memory."))
        if tr.launches > 3:
            problems.append(f"{tr.launches} launches where 2 do (the split kernel and the merge).")
        if problems:
            fail("\n".join(problems) + f"\n{tr.table(max_rows=8)}", "bytes")


def _no_scores(card, fn, name):
    # a long cache and a small D: an N-sized tensor per query head (the scores or the probabilities) is then
    # larger than every partial result the budget allows
    b, h, h_kv, n, d = SCORES_SHAPE
    q, k, v = _inputs(b, h, h_kv, n, d, torch.float16, torch.Generator().manual_seed(4))
    budget, limit = write_budget(b, h, h_kv, n, d)
    target = (f"≤ {_bytes(limit)} written (o and the partial results {_bytes(budget)}, + one more write of them and "
              f"2 %; B·H·N fp16 scores alone: {_bytes(2 * b * h * n)})")
    with card.criterion("no N-sized tensor of scores in memory", target=target):
        tr = trips.count(run, fn, q, k, v, name=name, poison=False)
        card.measured(f"{_bytes(tr.bytes_written)} written")
        if tr.bytes_written > limit:
            big = max(((lab, w) for x in tr.kernels for lab, w in x.writes.items()), key=lambda e: e[1],
                      default=("?", 0))
            fail(f"wrote {_bytes(tr.bytes_written)} for B = {b}, H = {h}, N = {n:,}, D = {d}; o and the partial results "
                 f"of {max_splits(n)} splits need at most {_bytes(budget)} ({_bytes(limit)} with the slack). The largest write, {big[0]} "
                 f"({_bytes(big[1])}), grows with N: the scores (or the probabilities) of every key go to memory. "
                 "Keep them in registers, one block of keys at a time, and write only each split's output and its "
                 f"maximum and sum.\n{tr.table(max_rows=6)}", "scores-in-memory")
        if ON_GPU and not INTERPRET:
            hh, hk, dd = PERF_HEADS
            nn = 65536
            q2 = torch.randn(1, hh, 1, dd, device="cuda", dtype=torch.float16)
            k2 = torch.randn(1, hk, nn, dd, device="cuda", dtype=torch.float16)
            v2 = torch.randn_like(k2)
            peak = bench.peak_bytes(lambda: fn(q2, k2, v2), beyond_output=True)
            allowed = max_splits(nn) * hh * (dd + 2) * 4 + 64 * 1024
            card.measured(f"{_bytes(tr.bytes_written)} written; GPU scratch at N = 65,536: {_bytes(peak)}")
            if peak > allowed:
                fail(f"at B = 1, H = {hh}, N = 65,536, D = {dd} your function allocated {_bytes(peak)} beyond its output; "
                     f"the partial results of {max_splits(nn)} splits need {_bytes(allowed)} at most, the scores of "
                     f"every key {_bytes(4 * hh * nn)}.", "scores-in-memory")
            del q2, k2, v2


ROTATE = 4          # copies of K and V a timed B = 1 graph cycles through: 128 MiB, more than an H100's L2


def _graph_ms(calls):
    return bench.graph_time(calls)


_READ = None


def _bare_read_ms(sets):
    """The fastest of a few grids for a kernel that only reads each set's K and V, timed as _graph_ms."""
    global _READ
    import triton
    import triton.language as tl
    if _READ is None:
        @triton.jit
        def read_kv(k_ptr, v_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
            acc = tl.zeros([BLOCK], tl.float32)
            for i in range(ITERS):
                o = (tl.program_id(0) * ITERS + i).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
                acc += tl.load(k_ptr + o, mask=o < n, other=0.0).to(tl.float32)
                acc += tl.load(v_ptr + o, mask=o < n, other=0.0).to(tl.float32)
            tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0))
        _READ = read_kv
    n = sets[0][1].numel()
    out = torch.empty(8192, device=sets[0][1].device)
    best = float("inf")
    for block, iters in ((1024, 4), (1024, 8), (2048, 4)):
        grid = (triton.cdiv(n, block * iters),)
        ms = _graph_ms([lambda s=s: _READ[grid](s[1], s[2], out, n, BLOCK=block, ITERS=iters) for s in sets])
        best = min(best, ms if ms is not None else best)
    return best


def _performance(card, fn):
    hh, hk, dd = PERF_HEADS
    dtype = capability.plan().low_dtype(bf16=True)
    dname = {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
    label = f"{dname}, GQA {hh}/{hk}, D = {dd}, N = {PERF_N:,}"
    b1_read = f"B = 1, {label}: against a bare read of the same K and V bytes (CUDA graph)"
    b1_sdpa = f"B = 1, {label}: against SDPA (CUDA graph)"
    if not ON_GPU or INTERPRET:
        card.against(b1_read, TARGETS["lab5.b1_of_read"], None)
        card.against(b1_sdpa, TARGETS["lab5.b1_vs_sdpa"], None)
        for bb in targets.sdpa_batches(SDPA_BATCHES):
            card.against(f"B = {bb}, {label}: against SDPA", TARGETS["lab5.vs_sdpa"], None)
        return

    def inputs(bb):
        need = 2 * bb * hk * PERF_N * dd * dtype.itemsize
        free = bench.free_bytes()
        if need * 2.5 > free:
            card.not_measured(f"needs about {_bytes(2.5 * need)} of GPU memory, {_bytes(free)} free.")
        q = torch.randn(bb, hh, 1, dd, device="cuda", dtype=dtype)
        k = torch.randn(bb, hk, PERF_N, dd, device="cuda", dtype=dtype)
        return q, k, torch.randn_like(k), need

    # At B = 1 one call moves 32 MiB in about 10 µs at the copy ceiling, less than Python takes to launch it
    # (20-35 µs a launch measured on the H100), and do_bench's L2 flush leaves dirty lines that the next read pays
    # to write back. So B = 1 times a CUDA graph (lab 6) of calls back to back over ROTATE copies of K and V (none
    # left in L2), no host cost, no flush; and, the same way, SDPA and a kernel that only reads the same bytes.
    timed = {}

    def b1():
        if not timed:
            sets = [inputs(1) for _ in range(ROTATE)]
            kv, copy = sets[0][3], bench.ceilings().copy_gbps
            mine = _graph_ms([lambda s=s: fn(*s[:3]) for s in sets])
            how = f"CUDA-graph replay, {2 * ROTATE} calls back to back over {ROTATE} copies of K and V"
            if mine is None:   # not capturable (a sync or a host copy inside): do_bench, host cost included
                mine = bench.time(lambda: fn(*sets[0][:3]))
                how = "do_bench: your function could not be captured in a CUDA graph, so its host cost counts"
            timed.update(mine=mine, bare=_bare_read_ms(sets), how=how, share=lambda ms: kv / ms / 1e6 / copy,
                         sdpa=_graph_ms([lambda s=s: F.scaled_dot_product_attention(*s[:3], enable_gqa=True)
                                         for s in sets]))
        return timed

    def vs_read():
        t = b1()
        return (t["mine"], t["bare"], None, f"{t['how']}; shares of the copy ceiling: yours {t['share'](t['mine']):.0%}, "
                f"the bare read {t['share'](t['bare']):.0%}, SDPA {t['share'](t['sdpa']):.0%}")

    def vs_sdpa_b1():
        t = b1()
        return t["mine"], t["sdpa"], t["share"](t["sdpa"]), t["how"]

    card.against(b1_read, TARGETS["lab5.b1_of_read"], vs_read, diagnosis=_SLOW)
    card.against(b1_sdpa, TARGETS["lab5.b1_vs_sdpa"], vs_sdpa_b1, diagnosis=_SLOW)
    for bb in targets.sdpa_batches(SDPA_BATCHES):
        def vs_sdpa(bb=bb):
            # a CUDA graph too, of one set (the cache alone is more than L2 holds): what a decode step runs, and no
            # host cost that a 70 µs call at B = 8 would otherwise be measured by
            q, k, v, kv = inputs(bb)
            mine = _graph_ms([lambda: fn(q, k, v)])
            how = "CUDA-graph replay"
            if mine is None:
                mine, how = bench.time(lambda: fn(q, k, v)), "do_bench: yours could not be captured, host cost counts"
            theirs = _graph_ms([lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)])
            copy = bench.ceilings().copy_gbps
            share = kv / theirs / 1e6 / copy
            return mine, theirs, share, f"{how}; shares of the copy ceiling: yours {kv / mine / 1e6 / copy:.0%}, SDPA {share:.0%}"
        card.against(f"B = {bb}, {label}: against SDPA", TARGETS["lab5.vs_sdpa"], vs_sdpa,
                     diagnosis=_AT_CEILING if bb >= 32 else _SLOW)
    torch.cuda.empty_cache()


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "es" if what.endswith("h") else "s")


def flash_decoding(fn):
    """Grade fn(q, k, v, seq_lens=None) -> o, attention of one query per sequence against a KV cache."""
    name = getattr(fn, "__name__", "flash_decoding")
    card = Scorecard("Lab 5 · flash-decoding", note="one query per sequence, the keys split over many programs",
                     hints=HINTS)
    gen = torch.Generator().manual_seed(torch.randint(0, 2**31, ()).item())
    if ON_GPU and not INTERPRET:
        # on a GPU an access outside a tensor breaks the CUDA context for good: one ragged case in the
        # bounds-checked interpreter first
        with card.criterion("loads and stores stay inside the tensors (one case replayed in the interpreter)",
                            target="no access outside") as row:
            q, k, v = _inputs(2, 4, 2, 37, 64, torch.float16, gen)
            with trips.counting():
                _call(card, fn, q, k, v, torch.tensor([1, 37], dtype=torch.int32, device=DEVICE), name)
        if row.status != "passed":
            return card.finish()
    plain = [s for s in _SHAPES if s[5] is None]
    with card.criterion(f"fp16: {GQA}, {DIMS}, {ODD_N}, {STRIDED_Q}", target="rtol 1e-2"):
        for shape in plain:
            _check_case(card, fn, name, shape, torch.float16, gen)
        if plain:
            _check_case(card, fn, name, plain[0], torch.float16, gen, strided_q=True)
        card.measured(f"{_count(len(plain), 'shape')}, N = {', '.join(str(s[3]) for s in plain)}; q a view: "
                      f"{_shape_name(plain[0][:5]) if plain else 'none'}")
    ragged = [s for s in _SHAPES if s[5] is not None]
    with card.criterion(f"fp16: seq_lens ragged, with {RAGGED}", target="rtol 1e-2"):
        for shape in ragged:
            _check_case(card, fn, name, shape, torch.float16, gen)
        card.measured(_count(len(ragged), "batch"))
    with card.criterion("fp32, seq_lens ragged", target="rtol 1e-5" if INTERPRET or not ON_GPU else "rtol 5e-3 (tf32)"):
        for shape in _FP32_SHAPES:
            _check_case(card, fn, name, shape, torch.float32, gen)
        card.measured(_count(len(_FP32_SHAPES), "batch"))
    with card.criterion("bf16 (on GPUs that have it)", target="rtol 3e-2"):
        if not capability.plan().bf16 or INTERPRET:
            card.not_measured("this machine has no bf16 for Triton (a T4, or the CPU interpreter); fp16 stands in.")
        _check_case(card, fn, name, (2, 8, 2, 1000, 128, "ragged"), torch.bfloat16, gen)
        card.measured("1 batch")
    with card.criterion("bad input is refused with a ValueError that says why",
                        target=f"{len(BAD_CALLS)} of {len(BAD_CALLS)}"):
        _bad_inputs(card, fn, name)
    _budget(card, fn, name)
    _no_scores(card, fn, name)
    _performance(card, fn)
    return card.finish()
