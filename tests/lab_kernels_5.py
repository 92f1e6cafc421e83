"""Kernels for tests/test_grade_flash_decoding.py: right answers to lab 5 (flash-decoding) written two ways,
the blank stub, and realistic wrong ones. Mistakes are tl.constexpr codes so that every variant compiles on
a real GPU too.

    o = flash_decoding(q (B, H, 1, D), k, v (B, H_kv, N, D), seq_lens=None or int32 (B,))"""
import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

# the mistake codes: tl.constexpr, since compiled Triton lets a @triton.jit function read a global only when it
# is one (the interpreter reads any global, so a plain int passed on the CPU and failed on the GPU)
RIGHT, MERGE_NO_RESCALE, LENS_IGNORED, HEADS_INTERLEAVED, LOOP_NO_RESCALE, EMPTY_SPLIT_NAN = (
    tl.constexpr(c) for c in range(6))


def _validate(q, k, v, seq_lens):
    if q.dim() != 4 or k.dim() != 4 or q.shape[2] != 1:
        raise ValueError(f"q must be (B, H, 1, D) and k, v (B, H_kv, N, D); got {tuple(q.shape)} and {tuple(k.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have one shape; got {tuple(k.shape)} and {tuple(v.shape)}")
    (b, h, _, d), (bk, h_kv, _, dk) = q.shape, k.shape
    if b != bk or d != dk or h % h_kv:
        raise ValueError(f"q {tuple(q.shape)} does not fit the cache {tuple(k.shape)}: same B and D, H a multiple of H_kv")
    if seq_lens is not None and (seq_lens.shape != (b,) or seq_lens.dtype != torch.int32):
        raise ValueError(f"seq_lens must be int32 of shape ({b},); got {seq_lens.dtype} {tuple(seq_lens.shape)}")


def _split_count(b, h_kv, n, device):
    # enough programs for two waves over the GPU's SMs (8 on the interpreter), at most one split per 64 keys
    target = 2 * torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
    return max(1, min(64, triton.cdiv(n, 64), triton.cdiv(target, b * h_kv)))


# ------------------------------------------------------------------------------------------------------
# Right, way 1: one program per (sequence, KV head, split), the G query heads of the group in one tl.dot
# ------------------------------------------------------------------------------------------------------
@triton.jit
def _split(q_ptr, k_ptr, v_ptr, lens_ptr, po_ptr, plse_ptr, N, SPLIT, scale, H: tl.constexpr, H_KV: tl.constexpr,
           D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, RAGGED: tl.constexpr,
           MISTAKE: tl.constexpr):
    pair, split = tl.program_id(0), tl.program_id(1)
    n_splits = tl.num_programs(1)
    b = pair // H_KV
    G: tl.constexpr = H // H_KV
    g = tl.arange(0, BLOCK_H)
    d = tl.arange(0, D)
    if MISTAKE == HEADS_INTERLEAVED:
        heads = b * H + pair % H_KV + g * H_KV
    else:
        heads = b * H + (pair % H_KV) * G + g
    q = tl.load(q_ptr + heads[:, None] * D + d[None, :], mask=g[:, None] < G, other=0.0)
    n = N
    if RAGGED and MISTAKE != LENS_IGNORED:
        n = tl.load(lens_ptr + b)
    lo = split * SPLIT
    hi = tl.minimum(lo + SPLIT, n)
    base = pair.to(tl.int64) * N * D
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D], tl.float32)
    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        kv = base + cols[:, None] * D + d[None, :]
        k = tl.load(k_ptr + kv, mask=cols[:, None] < hi, other=0.0)
        s = tl.where(cols[None, :] < hi, tl.dot(q, tl.trans(k)) * scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        v = tl.load(v_ptr + kv, mask=cols[:, None] < hi, other=0.0)
        if MISTAKE == LOOP_NO_RESCALE:
            l = l + tl.sum(p, axis=1)
            acc = acc + tl.dot(p.to(v.dtype), v)
        else:
            alpha = tl.exp(m - m_new)
            l = l * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    part = heads * n_splits + split
    keep = g < G
    if MISTAKE == EMPTY_SPLIT_NAN:
        o = acc / l[:, None]
    else:
        o = acc / tl.where(l > 0, l, 1.0)[:, None]
    tl.store(po_ptr + part[:, None] * D + d[None, :], o, mask=keep[:, None])
    if MISTAKE == MERGE_NO_RESCALE:
        tl.store(plse_ptr + part, tl.log(l), mask=keep)       # each split's sum, relative to its own max
    else:
        tl.store(plse_ptr + part, m + tl.log(l), mask=keep)


@triton.jit
def _merge(po_ptr, plse_ptr, o_ptr, n_splits, D: tl.constexpr, BLOCK_S: tl.constexpr):
    row = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    d = tl.arange(0, D)
    lse = tl.load(plse_ptr + row * n_splits + s, mask=s < n_splits, other=float("-inf"))
    w = tl.exp(lse - tl.max(lse, axis=0))
    po = tl.load(po_ptr + (row * n_splits + s)[:, None] * D + d[None, :], mask=s[:, None] < n_splits, other=0.0)
    o = tl.sum(w[:, None] * po, axis=0) / tl.sum(w, axis=0)
    tl.store(o_ptr + row * D + d, o.to(o_ptr.dtype.element_ty))


def _grouped(q, k, v, seq_lens=None, splits=None, mistake=RIGHT, drop_remainder=False, scale=None, zeros=False,
             q_strides=False):
    _validate(q, k, v, seq_lens)
    b, h, _, d = q.shape
    h_kv, n = k.shape[1], k.shape[2]
    if not q_strides:
        q = q.contiguous()
    k, v = k.contiguous(), v.contiguous()
    splits = splits or _split_count(b, h_kv, n, q.device)
    if drop_remainder:
        split_len = n // splits                      # the mistake: N % splits keys belong to no split
    else:
        split_len = triton.cdiv(triton.cdiv(n, splits), 64) * 64
        splits = triton.cdiv(n, split_len)
    po = (torch.zeros if zeros else torch.empty)(b, h, splits, d, dtype=torch.float32, device=q.device)
    plse = torch.empty(b, h, splits, dtype=torch.float32, device=q.device)
    o = torch.empty_like(q)
    _split[(b * h_kv, splits)](q, k, v, seq_lens if seq_lens is not None else plse, po, plse, n, split_len,
                               scale or 1 / math.sqrt(d), H=h, H_KV=h_kv, D=d, BLOCK_H=max(16, triton.next_power_of_2(h // h_kv)),
                               BLOCK_N=64, RAGGED=seq_lens is not None, MISTAKE=mistake.value)
    _merge[(b * h,)](po, plse, o, splits, D=d, BLOCK_S=max(16, triton.next_power_of_2(splits)))
    return o


def flash_decoding(q, k, v, seq_lens=None, splits=None):
    """Right: the lab's design, one program per (sequence, KV head, split), partials merged by log-sum-exp."""
    return _grouped(q, k, v, seq_lens, splits)


# ------------------------------------------------------------------------------------------------------
# Right numbers, wrong traffic: one program per (sequence, query head, split), no tl.dot, partial max and sum
# kept apart; each K and V tile is loaded by all G query heads that share it
# ------------------------------------------------------------------------------------------------------
@triton.jit
def _head_split(q_ptr, k_ptr, v_ptr, lens_ptr, pacc_ptr, pm_ptr, pl_ptr, N, SPLIT, scale, H: tl.constexpr,
                H_KV: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr, RAGGED: tl.constexpr):
    bh, split = tl.program_id(0), tl.program_id(1)
    b, hq = bh // H, bh % H
    kvh = hq // (H // H_KV)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + bh * D + d).to(tl.float32) * scale
    n = tl.load(lens_ptr + b) if RAGGED else N
    end = tl.minimum((split + 1) * SPLIT, n)
    base = (b * H_KV + kvh).to(tl.int64) * N * D
    m = float("-inf")
    l = 0.0
    acc = tl.zeros([D], tl.float32)
    for start in range(split * SPLIT, end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        inside = cols < end
        k = tl.load(k_ptr + base + cols[:, None] * D + d[None, :], mask=inside[:, None], other=0.0).to(tl.float32)
        s = tl.where(inside, tl.sum(k * q[None, :], axis=1), float("-inf"))
        top = tl.maximum(m, tl.max(s, axis=0))
        p = tl.exp(s - top)
        v = tl.load(v_ptr + base + cols[:, None] * D + d[None, :], mask=inside[:, None], other=0.0).to(tl.float32)
        shrink = tl.exp(m - top)
        acc = acc * shrink + tl.sum(p[:, None] * v, axis=0)
        l = l * shrink + tl.sum(p, axis=0)
        m = top
    part = bh * tl.num_programs(1) + split
    tl.store(pacc_ptr + part * D + d, acc)
    tl.store(pm_ptr + part, m)
    tl.store(pl_ptr + part, l)


@triton.jit
def _head_merge(pacc_ptr, pm_ptr, pl_ptr, o_ptr, n_splits, D: tl.constexpr):
    bh = tl.program_id(0)
    d = tl.arange(0, D)
    top = float("-inf")
    for i in range(0, n_splits):
        top = tl.maximum(top, tl.load(pm_ptr + bh * n_splits + i))
    num = tl.zeros([D], tl.float32)
    den = 0.0
    for i in range(0, n_splits):
        w = tl.exp(tl.load(pm_ptr + bh * n_splits + i) - top)     # an empty split: exp(-inf) = 0
        num += w * tl.load(pacc_ptr + (bh * n_splits + i) * D + d)
        den += w * tl.load(pl_ptr + bh * n_splits + i)
    tl.store(o_ptr + bh * D + d, (num / den).to(o_ptr.dtype.element_ty))


def flash_decoding_per_head(q, k, v, seq_lens=None):
    """Right numbers, but a program per query head: K and V requested once per head of a group (G times), where
    the contract asks for each element once. The score a sum of products, the max and the sum stored apart."""
    _validate(q, k, v, seq_lens)
    q = q.contiguous()             # the kernel indexes q as (B·H, D) rows
    b, h, _, d = q.shape
    h_kv, n = k.shape[1], k.shape[2]
    splits = max(1, min(8, triton.cdiv(n, 128)))
    split_len = triton.cdiv(n, splits)
    pacc = torch.empty(b * h * splits, d, dtype=torch.float32, device=q.device)
    pm = torch.empty(b * h * splits, dtype=torch.float32, device=q.device)
    pl = torch.empty_like(pm)
    o = torch.empty_like(q)
    _head_split[(b * h, splits)](q, k, v, seq_lens if seq_lens is not None else pm, pacc, pm, pl, n, split_len,
                                 1 / math.sqrt(d), H=h, H_KV=h_kv, D=d, BLOCK_N=32, RAGGED=seq_lens is not None)
    _head_merge[(b * h,)](pacc, pm, pl, o, splits, D=d)
    return o


# ------------------------------------------------------------------------------------------------------
# The blank stub and the wrong answers
# ------------------------------------------------------------------------------------------------------
def flash_decoding_stub(q, k, v, seq_lens=None):
    raise NotImplementedError("your kernels and their launch")


def fd_merge_no_rescale(q, k, v, seq_lens=None):
    """Each split's log-sum-exp without its max: the merge weighs splits by sums taken at different maxima."""
    return _grouped(q, k, v, seq_lens, mistake=MERGE_NO_RESCALE)


def fd_lens_ignored(q, k, v, seq_lens=None):
    return _grouped(q, k, v, seq_lens, mistake=LENS_IGNORED)


def fd_heads_interleaved(q, k, v, seq_lens=None):
    """Query head h reads KV head h % H_kv."""
    return _grouped(q, k, v, seq_lens, mistake=HEADS_INTERLEAVED)


def fd_remainder_dropped(q, k, v, seq_lens=None):
    """Split length N // splits: the last N % splits keys are never read."""
    return _grouped(q, k, v, seq_lens, drop_remainder=True)


def fd_loop_no_rescale(q, k, v, seq_lens=None):
    """Two splits, whatever the GPU: with the split count of a GPU with many SMs, each split of the lean case
    would be one block of keys, where a running sum needs no rescaling and the mistake cannot show."""
    return _grouped(q, k, v, seq_lens, splits=2, mistake=LOOP_NO_RESCALE)


def fd_empty_split_nan(q, k, v, seq_lens=None):
    return _grouped(q, k, v, seq_lens, mistake=EMPTY_SPLIT_NAN)


def fd_no_scale(q, k, v, seq_lens=None):
    """The scores not divided by √D."""
    return _grouped(q, k, v, seq_lens, scale=1.0)


def fd_repeat_kv(q, k, v, seq_lens=None):
    """GQA by repeating K and V to H heads first: right numbers, G times the bytes."""
    g = q.shape[1] // k.shape[1]
    return _grouped(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), seq_lens)


@triton.jit
def _scores(q_ptr, k_ptr, s_ptr, N, scale, H: tl.constexpr, H_KV: tl.constexpr, D: tl.constexpr,
            BLOCK_N: tl.constexpr):
    bh, blk = tl.program_id(0), tl.program_id(1)
    b, hq = bh // H, bh % H
    d = tl.arange(0, D)
    cols = blk * BLOCK_N + tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + bh * D + d).to(tl.float32)
    base = (b * H_KV + hq // (H // H_KV)).to(tl.int64) * N * D
    k = tl.load(k_ptr + base + cols[:, None] * D + d[None, :], mask=cols[:, None] < N, other=0.0).to(tl.float32)
    tl.store(s_ptr + bh * N + cols, tl.sum(k * q[None, :], axis=1) * scale, mask=cols < N)


@triton.jit
def _softmax_v(s_ptr, v_ptr, o_ptr, N, H: tl.constexpr, H_KV: tl.constexpr, D: tl.constexpr,
               BLOCK_N: tl.constexpr):
    bh = tl.program_id(0)
    b, hq = bh // H, bh % H
    d = tl.arange(0, D)
    base = (b * H_KV + hq // (H // H_KV)).to(tl.int64) * N * D
    m = float("-inf")
    l = 0.0
    acc = tl.zeros([D], tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        s = tl.load(s_ptr + bh * N + cols, mask=cols < N, other=float("-inf"))
        top = tl.maximum(m, tl.max(s, axis=0))
        p = tl.exp(s - top)
        v = tl.load(v_ptr + base + cols[:, None] * D + d[None, :], mask=cols[:, None] < N, other=0.0).to(tl.float32)
        acc = acc * tl.exp(m - top) + tl.sum(p[:, None] * v, axis=0)
        l = l * tl.exp(m - top) + tl.sum(p, axis=0)
        m = top
    tl.store(o_ptr + bh * D + d, (acc / l).to(o_ptr.dtype.element_ty))


def fd_scores_in_memory(q, k, v, seq_lens=None):
    """Right numbers without seq_lens, but the scores of every key go to memory (B·H·N fp32)."""
    _validate(q, k, v, seq_lens)
    b, h, _, d = q.shape
    h_kv, n = k.shape[1], k.shape[2]
    s = torch.empty(b * h, n, dtype=torch.float32, device=q.device)
    o = torch.empty_like(q)
    _scores[(b * h, triton.cdiv(n, 256))](q, k, s, n, 1 / math.sqrt(d), H=h, H_KV=h_kv, D=d, BLOCK_N=256)
    _softmax_v[(b * h,)](s, v, o, n, H=h, H_KV=h_kv, D=d, BLOCK_N=256)
    return o


def fd_sdpa(q, k, v, seq_lens=None):
    """PyTorch's SDPA: right numbers, no kernel of the student's."""
    _validate(q, k, v, seq_lens)
    mask = None
    if seq_lens is not None:
        mask = (torch.arange(k.shape[2], device=q.device)[None, :] < seq_lens[:, None].long())[:, None, None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def fd_zeroed_partials(q, k, v, seq_lens=None):
    """Right, with one extra write: the partial outputs allocated with torch.zeros (the budget's slack)."""
    return _grouped(q, k, v, seq_lens, zeros=True)


def fd_lens_values_refused(q, k, v, seq_lens=None):
    """Right, and it also refuses seq_lens values outside 1 … N (a host sync the contract does not ask for)."""
    if seq_lens is not None and (int(seq_lens.min()) < 1 or int(seq_lens.max()) > k.shape[2]):
        raise ValueError("seq_lens values must lie in 1 … N")
    return _grouped(q, k, v, seq_lens)


def fd_q_strides_ignored(q, k, v, seq_lens=None):
    """Indexes q as if it were contiguous, whatever its strides."""
    return _grouped(q, k, v, seq_lens, q_strides=True)


def fd_unchecked(q, k, v, seq_lens=None):
    """Right numbers, but bad input is launched anyway."""
    b, h, _, d = q.shape
    if k.shape[1] == 0 or h % k.shape[1] or k.shape != v.shape or q.shape[-1] != k.shape[-1]:
        return torch.zeros_like(q)
    return _grouped(q, k, v, None if seq_lens is None or seq_lens.shape != (b,) else seq_lens.to(torch.int32))
