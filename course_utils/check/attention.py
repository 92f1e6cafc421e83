"""Checker for lesson 09's exercise: flash_attention(q, k, v, causal=False) -> o, scaled dot-product attention
softmax(q·kᵀ / √D) · v over (B, H, N, D) tensors, computed in one launch that never writes an N×N tensor."""
from __future__ import annotations

import math

import torch

from .. import capability, trips
from ..environment import DEVICE, INTERPRET, ON_GPU
from ._core import CheckFailed, Passed, compare, fail, run, own_kernels, unwritten

__all__ = ["flash_attention"]

# Ordinary shapes first, then the edges. No N is a multiple of 16, so whatever the block sizes, the last
# K/V tile and the last query tile are ragged. (B, H, N, D).
# D = 48 is not a power of two: tl.arange cannot span it, so it takes BLOCK_D = 64 with the dims >= D masked.
_SHAPES = [(1, 2, 67, 32), (2, 1, 83, 64), (1, 1, 45, 16), (1, 1, 70, 128), (1, 1, 37, 48), (1, 1, 1, 32)]
_GPU_SHAPES = [(2, 3, 1000, 64), (1, 2, 2049, 128)]
_BLOCKS = (16, 32, 64, 128, 256)     # the K/V tile sizes a student may pick: the emulated mistakes try each
_SKIP_SHAPE = (1, 1, 390, 16)        # long enough that a causal kernel which skips tiles requests far less
_BUDGET_SHAPE = (1, 2, 96, 32)       # where the bytes are counted, fp16
BYTES_SLACK = 1.05                   # distinct bytes may exceed 4·B·H·N·D·s by 5%
SKIP_MAX = 0.9                       # causal: at most 90% of the full attention's requested loads
_HUGE, _V1000 = "scores near ±100", "v near 1000"
# Every case the check tries, by the name lesson 09's contract gives it: the shapes (B, H, N, D), the
# interpreter's and then, on a GPU, the long ones; the two hard inputs; the interpreter replay on a GPU.
CASES = (tuple(str(s) for s in _SHAPES + _GPU_SHAPES) + (_HUGE, _V1000)
         + ("replayed through the interpreter",))


def _ordinary():
    """(dtype, shape, masks) of the ordinary cases. The interpreter runs every shape in fp32 and fp16, full and
    causal. On a GPU each distinct (dtype, D, causal, N == 1) is a compile of the student's kernel, about a
    second each, so each reason is tested once: in fp16, the lesson's dtype, every shape full (each D, batch and
    head offsets, N = 1) and causal at D = 32, 48, 64 and 128; fp32 (tf32 dots, twice the shared memory per tile)
    at the largest D; bf16 (another element type) at D = 64."""
    both = (False, True)
    if not ON_GPU or INTERPRET:
        return [(dtype, shape, both) for dtype in _dtypes() for shape in _SHAPES]
    return ([(torch.float16, shape, both if shape[3] >= 32 and shape[2] > 1 else (False,)) for shape in _SHAPES] +
            [(torch.float32, _SHAPES[3], (False,))] +
            [(dtype, _SHAPES[1], (False,)) for dtype in _dtypes() if dtype == torch.bfloat16])


def _long():
    """(dtype, shape, masks) of the long cases, GPU only: they reuse the compiles of _ordinary's."""
    both = (False, True)
    cases = [(torch.float16, _GPU_SHAPES[0], both), (torch.float16, _GPU_SHAPES[1], both),
             (torch.float32, _GPU_SHAPES[1], (False,)), (torch.bfloat16, _GPU_SHAPES[0], (False,))]
    return [case for case in cases if case[0] in _dtypes()]


def _tol(dtype):
    # fp32 inputs: from sm_80 on, a GPU's tl.dot rounds them to tf32 (10 mantissa bits) unless told otherwise
    # (sm_75 has no tf32); the tolerance covers the tf32 case
    if dtype == torch.float32:
        return dict(atol=5e-3, rtol=5e-3) if ON_GPU and not INTERPRET else dict(atol=1e-4, rtol=1e-4)
    return dict(atol=5e-3, rtol=5e-3) if dtype == torch.float16 else dict(atol=3e-2, rtol=3e-2)


def _dtypes():
    extra = (torch.bfloat16,) if capability.plan().bf16 and not INTERPRET else ()
    return (torch.float32, torch.float16) + extra


def _attention(q, k, v, causal, scale, *, diagonal=1):
    """softmax(q·kᵀ·scale)·v in float64; the causal mask hides keys j >= i + diagonal."""
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(diagonal), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def _tiled(q, k, v, causal, scale, block, *, rescale_acc=True, rescale_l=True, divide=True):
    """The online-softmax loop over K/V tiles of `block` keys, in float64, with a mistake switched on."""
    n = q.shape[-2]
    m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros_like(q)
    rows = torch.arange(n, device=q.device)
    for start in range(0, n, block):
        s = (q @ k[..., start:start + block, :].transpose(-2, -1)) * scale
        if causal:
            cols = torch.arange(start, min(start + block, n), device=q.device)
            s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1))
        p = torch.exp(s - m_new[..., None])
        alpha = torch.exp(m - m_new)
        l = (l * alpha if rescale_l else l) + p.sum(-1)
        acc = (acc * alpha[..., None] if rescale_acc else acc) + p @ v[..., start:start + block, :]
        m = m_new
    return acc / l[..., None] if divide else acc


def _padded_keys(q, k, v, causal, scale, block):
    """What a kernel computes when the keys past N load as 0 but their scores are not set to −inf."""
    n = k.shape[-2]
    pad = -n % block
    if pad == 0:
        return None
    z = torch.zeros(*k.shape[:-2], pad, k.shape[-1], dtype=k.dtype, device=k.device)
    kk, vv = torch.cat([k, z], -2), torch.cat([v, z], -2)
    s = (q @ kk.transpose(-2, -1)) * scale
    if causal:
        cols, rows = torch.arange(n + pad, device=q.device), torch.arange(n, device=q.device)
        s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
    return torch.softmax(s, dim=-1) @ vv


def _wrong_answers(qd, kd, vd, causal, d):
    """(tensor or None, diagnosis, key) triples: the realistic mistakes, each computed in float64; the key
    names the hint of the exercise that addresses the mistake."""
    scale = d ** -0.5
    out = [
        (_attention(qd, kd, vd, causal, 1.0), "the scores are never scaled: divide q·kᵀ by √D (multiply by "
                                              "scale = D ** -0.5) before the softmax.", "scale"),
        (_attention(qd, kd, vd, causal, 1.0 / d), "the scores are divided by D; the scale is 1/√D (D ** -0.5).",
         "scale"),
        (_attention(qd, kd, vd, causal, math.sqrt(d)), "the scores are multiplied by √D; the scale is 1/√D.",
         "scale"),
        (_attention(qd, kd, vd, causal, scale * math.log(2)),
         "the exponential is tl.math.exp2 but log2(e) is not folded into the scale: 2^s is e^(s·ln 2). Multiply "
         "the scale by log2(e) = 1.4427 (qk_scale = D ** -0.5 * 1.4427), or use tl.exp.", "exp-base"),
        (_attention(qd, kd, vd, causal, scale * math.log2(math.e)),
         "the scale holds log2(e) but the exponential is tl.exp: e^(s·log2 e) is not 2^s. With log2(e) in the "
         "scale, use tl.math.exp2 (for p and for alpha); with tl.exp, leave log2(e) out.", "exp-base"),
        (_attention(qd, kd, vd, causal, 1.0) * scale,
         "the scale multiplies the output. It belongs on the scores, before the softmax: s = q·kᵀ · scale.",
         "scale"),
        (_tiled(qd, kd, vd, causal, scale, 1 << 30, divide=False),
         "the output is never divided by the normaliser: o = acc / l at the end, after the loop.", "no-divide"),
    ]
    if causal:
        out += [
            (_attention(qd, kd, vd, False, scale), "the causal mask is missing: query i must not see keys j > i.",
             "causal-missing"),
            (_attention(qd, kd, vd, True, scale, diagonal=0),
             "the causal mask is off by one: it hides key i from query i too (j < i where j <= i belongs), so "
             "query 0 sees no key at all and its row is 0/0 = NaN. Keep key j when j <= i.", "causal-off-by-one"),
            (_attention(qd, kd, vd, True, scale, diagonal=2),
             "the causal mask is off by one: query i also sees key i + 1 (most rows match that). Keep key j "
             "when j <= i.", "causal-off-by-one"),
            (_attention(qd.flip(-2), kd.flip(-2), vd.flip(-2), True, scale).flip(-2),
             "the causal mask hides the wrong triangle: query i sees keys j >= i instead of j <= i.", "causal-flipped"),
        ]
    for block in _BLOCKS:
        if block >= qd.shape[-2]:
            break
        out += [
            (_tiled(qd, kd, vd, causal, scale, block, rescale_acc=False),
             f"the accumulator is not rescaled (this matches K/V tiles of {block}): when a tile raises the "
             "running max from m to m_new, what acc already holds was weighted by exp(s − m) and must be "
             "multiplied by alpha = exp(m − m_new) before the tile's p·v is added.", "no-rescale-acc"),
            (_tiled(qd, kd, vd, causal, scale, block, rescale_l=False),
             f"the normaliser l is not rescaled (this matches K/V tiles of {block}): l = l · alpha + "
             "sum(p), with alpha = exp(m − m_new), like the accumulator.", "no-rescale-l"),
            (_tiled(qd, kd, vd, causal, scale, block, rescale_acc=False, rescale_l=False),
             f"neither the accumulator nor l is rescaled (this matches K/V tiles of {block}): when the "
             "running max grows, both must be multiplied by alpha = exp(m − m_new).", "no-rescale"),
        ]
    for block in _BLOCKS:
        alt = _padded_keys(qd, kd, vd, causal, scale, block)
        if alt is not None:
            out.append((alt, f"the keys past the end (N = {kd.shape[-2]} is not a multiple of your K/V tile "
                             f"of {block}) count in the softmax: they load as 0, so their score is 0, not −inf. "
                             "Mask the scores too: s = tl.where(cols[None, :] < N, s, float('-inf')).", "keys-past-n"))
    return out


def _inputs(shape, dtype, *, spread=1.0, q_zero=False, v_offset=0.0):
    b, h, n, d = shape
    q, k, v = (torch.randn(b, h, n, d, device=DEVICE) for _ in range(3))
    q, k = q * spread, k * spread
    if q_zero:
        q = torch.zeros_like(q)
    v = v + v_offset
    return q.to(dtype), k.to(dtype), v.to(dtype)


def _verify(out, q, k, v, causal, *, name, hint="", key=None):
    """Compare with float64 attention; on a mismatch, name the mistake it matches if it is a known one. `key`:
    the diagnosis of a failure that this case's `hint` explains (NaN, inf or wrong numbers)."""
    dtype, d = q.dtype, q.shape[-1]
    qd, kd, vd = q.double(), k.double(), v.double()
    ref = _attention(qd, kd, vd, causal, d ** -0.5)
    tol = _tol(dtype)
    if isinstance(out, torch.Tensor) and out.shape == ref.shape and out.dtype == dtype and \
            bool(torch.isclose(out.double(), ref, **tol).all()):
        return
    wrong = [] if not isinstance(out, torch.Tensor) else _wrong_answers(qd, kd, vd, causal, d)
    if isinstance(out, torch.Tensor) and out.shape == ref.shape and out.dtype == dtype and \
            not bool(unwritten(out).any()):
        # Matched before compare's NaN check: a mistake may leave NaN (a row with every key masked). A mask
        # mistake may also be hidden on some rows by where the student's tiles end: most rows will do.
        got = out.double()
        for alt, msg, diagnosis in wrong:
            if alt is None:
                continue
            rows_ok = torch.isclose(got, alt, **tol, equal_nan=True).all(-1)
            if bool(rows_ok.all()) or ("causal mask" in msg and float(rows_ok.double().mean()) >= 0.75):
                fail(f"`{name}`: {msg}", diagnosis)
    try:
        compare(out, ref.to(dtype), name=name, like=q, tol=tol, overflow_hint=hint,
                wrong_answers=[w for w in wrong if w[0] is not None and not bool(torch.isnan(w[0]).any())])
    except CheckFailed as e:
        diagnosis = key if key and e.diagnosis in ("nonfinite", "wrong", "factor", "tail") else e.diagnosis
        raise CheckFailed(f"{e}{hint and chr(10) + hint if 'Worst at' in str(e) else ''}", diagnosis) from None


def _case_name(shape, dtype, causal, what=""):
    b, h, n, d = shape
    return f"{str(dtype)[6:]} B={b} H={h} N={n} D={d}{' causal' if causal else ''}{what}"


def _causal(fn):
    """fn with causal=True, under fn's own name (the stub message names it)."""
    def call(q, k, v):
        return fn(q, k, v, causal=True)
    call.__name__ = getattr(fn, "__name__", "flash_attention")
    return call


def _call(fn, q, k, v, causal, name, poison=True):
    return run(_causal(fn) if causal else fn, q, k, v, name=name, poison=poison)


def _case(fn, shape, dtype, result, name, masks=(False, True)):
    for causal in masks:
        q, k, v = _inputs(shape, dtype)
        try:
            out = _call(fn, q, k, v, causal, name)
        except CheckFailed as e:
            # the interpreter says "power of 2"; a GPU's compile error arrives with the course's hint, "power-of-two"
            if shape[3] & (shape[3] - 1) == 0 or not any(w in str(e) for w in ("power of 2", "power-of-two")):
                raise
            raise CheckFailed(f"{e}\nD = {shape[3]} here is not a power of two. Load the head dimension "
                              "with BLOCK_D = triton.next_power_of_2(D) lanes, masked dims < D.", "block-d") from None
        _verify(out, q, k, v, causal, name=f"{name}, {_case_name(shape, dtype, causal)}")
        result.cases.append(_case_name(shape, dtype, causal))


def flash_attention(fn) -> Passed:
    """fn(q, k, v, causal=False) -> o: softmax(q·kᵀ / √D)·v for q, k, v of shape (B, H, N, D), the causal version
    hiding key j from query i when j > i, in fp32 and fp16 (bf16 on GPUs that have it); any N, D from 16 to
    128. One launch that reads q, k and v once and writes o once: nothing of size N×N goes to memory."""
    name = "flash_attention"
    result = Passed(name)
    if ON_GPU and not INTERPRET:   # one case through the bounds-checking interpreter: a GPU would not complain
        with trips.counting():
            for causal in (False, True):
                _call(fn, *_inputs((1, 1, 45, 32), torch.float32), causal, name)
        result.cases.append(f"(1, 1, 45, 32) float32 {CASES[-1]}")
    for dtype, shape, masks in _ordinary():
        _case(fn, shape, dtype, result, name, masks)
    # right on every ordinary case: now the bytes (plain PyTorch attention fails here), then the hard cases
    result.traffic = _budget(fn, name)
    # Scores near ±100, in fp16 (in fp32 a GPU's tf32 dot would blur them): exp(s) overflows unless the
    # running max is subtracted before the exponential.
    shape = (1, 2, 67, 32)
    q, k, v = _inputs(shape, torch.float16, spread=6.0)
    _verify(_call(fn, q, k, v, False, name), q, k, v, False, name=f"{name}, {_case_name(shape, q.dtype, False)} "
            f"with {_HUGE}",
            hint="The scores here reach about ±100 and exp(100) is far beyond even fp32 (max about 3.4e38): is the "
                 "running max subtracted before the exponential, p = exp(s − m_new), and the correction "
                 "alpha = exp(m − m_new) taken between two maxima?", key="no-max")
    result.cases.append(_case_name(shape, q.dtype, False, f" {_HUGE}"))
    # Every score 0 and v near 1000: the unnormalised sum of p·v reaches N·1000, past fp16's 65,504.
    shape = (1, 1, 150, 32)
    q, k, v = _inputs(shape, torch.float16, q_zero=True, v_offset=1000.0)
    _verify(_call(fn, q, k, v, False, name), q, k, v, False,
            name=f"{name}, {_case_name(shape, q.dtype, False)} with {_V1000} and equal scores",
            hint="Here every score is equal and v is near 1000, so before the final division the accumulator "
                 f"holds the sum of {shape[2]} values near 1000, about {shape[2] * 1000:,}: past fp16's largest "
                 "number, 65,504. Keep acc, l and m in fp32 (tl.zeros(..., tl.float32)) and convert only the "
                 "final o to the output's dtype.", key="fp16-acc")
    result.cases.append(_case_name(shape, q.dtype, False, f" {_V1000} (fp16 accumulator)"))
    for dtype, shape, masks in (_long() if ON_GPU and not INTERPRET else []):   # on a GPU: long sequences
        _case(fn, shape, dtype, result, name, masks)
    _skips_masked_tiles(fn, name)
    return result


def _budget(fn, name):
    """One launch that moves q, k, v and o once: 4·B·H·N·D·s distinct bytes. Plain PyTorch attention gets the
    numbers right and fails here, because it writes the N×N scores and probabilities."""
    b, h, n, d = _BUDGET_SHAPE
    q, k, v = _inputs((b, h, n, d), torch.float16)
    budget = 4 * b * h * n * d * 2
    t = trips.count(run, fn, q, k, v, name=name, poison=False)
    square = [f"{k_.name} wrote {lab}" for k_ in t.kernels for lab in k_.writes if lab.endswith(f"{n}, {n}]")]
    if t.launches == 0:
        fail(f"`{name}` launched no kernel at all: did it compute on the CPU side, or return early?", "no-launch")
    if square or t.bytes > budget * BYTES_SLACK:
        what = (f" It writes tensors of N×N = {n}×{n}: " + "; ".join(square[:3]) + "." if square else
                f" It writes {t.bytes_written:,} bytes where o alone is {budget // 4:,}: scores or probabilities "
                "are going to memory.")
        fail(f"`{name}` gives the right numbers but moved {t.bytes:,} bytes; the budget is {budget:,} "
             f"(q, k and v read once, o written once: 4·B·H·N·D·2 bytes in fp16, B={b} H={h} N={n} D={d}).{what} "
             "That N×N traffic is what FlashAttention removes: keep each tile of scores and probabilities "
             "on chip, in the loop over K/V tiles.\n" + t.table(), "bytes")
    if t.launches > 1:
        fail(f"`{name}` made {t.launches} launches where 1 should do: each launch would hand its result to the "
             f"next through HBM.\n{t.table()}", "launches")
    own_kernels(t, name)
    return t


def _skips_masked_tiles(fn, name):
    """Causal: a K/V tile entirely after a query block's last row holds only masked keys. Loading it costs
    bytes and time for nothing; the requested bytes show whether the loop stops at the diagonal."""
    q, k, v = _inputs(_SKIP_SHAPE, torch.float16)
    full = trips.count(_call, fn, q, k, v, False, name, poison=False).requested_read
    causal = trips.count(_call, fn, q, k, v, True, name, poison=False).requested_read
    if causal > SKIP_MAX * full:
        n = _SKIP_SHAPE[2]
        fail(f"`{name}` is right, causal too, but with causal=True it requested {causal:,} bytes of loads, "
             f"{causal / full:.0%} of the {full:,} the full attention requests (N = {n}). Tiles of keys that "
             "lie entirely after a query block's last row are loaded and then masked away, so the causal "
             "kernel costs as much as the full one. Stop the loop over K/V at the block's end: "
             "range(0, tl.minimum(start_m + BLOCK_M, N), BLOCK_N) when CAUSAL.", "no-skip")
