"""Kernels for tests/test_check_attention.py: right and wrong answers to flash_attention."""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

# mistakes, picked by a constexpr so that one kernel holds every variant (tl.constexpr: a compiled
# kernel may read a global only if it is one)
(RIGHT, NO_RESCALE_ACC, NO_RESCALE_L, NO_SCALE, SCALE_BY_D, DIAGONAL_MASKED, SEES_NEXT, TAIL_UNMASKED,
 FP16_ACC, NO_MAX, NO_DIVIDE, NO_SKIP, EXP2_NO_LOG2E) = map(tl.constexpr, range(13))


@triton.jit
def _attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N, scale, D: tl.constexpr, BLOCK_D: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, SWAP_GRID: tl.constexpr,
                 MISTAKE: tl.constexpr):
    if SWAP_GRID:
        start_m, bh = tl.program_id(1) * BLOCK_M, tl.program_id(0)
    else:
        start_m, bh = tl.program_id(0) * BLOCK_M, tl.program_id(1)
    base = bh.to(tl.int64) * N * D
    rows = start_m + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    q = tl.load(q_ptr + base + rows[:, None] * D + dims[None, :], mask=(rows[:, None] < N) & (dims[None, :] < D),
                other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    if MISTAKE == FP16_ACC:
        acc = tl.zeros([BLOCK_M, BLOCK_D], q_ptr.dtype.element_ty)   # fp16 for fp16 inputs
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    end = N
    if CAUSAL and MISTAKE != NO_SKIP:
        end = tl.minimum(start_m + BLOCK_M, N)
    for start_n in range(0, end, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        kv_mask = (cols[:, None] < N) & (dims[None, :] < D)
        k = tl.load(k_ptr + base + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k))
        if MISTAKE == SCALE_BY_D:
            s = s / D
        elif MISTAKE != NO_SCALE:
            s = s * scale
        keep = cols[None, :] < N
        if MISTAKE == TAIL_UNMASKED:
            keep = cols[None, :] < N + BLOCK_N
        if CAUSAL:
            if MISTAKE == DIAGONAL_MASKED:
                keep = keep & (cols[None, :] < rows[:, None])
            elif MISTAKE == SEES_NEXT:
                keep = keep & (cols[None, :] <= rows[:, None] + 1)
            else:
                keep = keep & (cols[None, :] <= rows[:, None])
        s = tl.where(keep, s, float("-inf"))
        if MISTAKE == NO_MAX:
            p = tl.exp(s)
            alpha = tl.full([BLOCK_M], 1.0, tl.float32)
        elif MISTAKE == EXP2_NO_LOG2E:      # base 2 without log2(e) in the scale
            m_new = tl.maximum(m, tl.max(s, axis=1))
            p = tl.math.exp2(s - m_new[:, None])
            alpha = tl.math.exp2(m - m_new)
            m = m_new
        else:
            m_new = tl.maximum(m, tl.max(s, axis=1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m - m_new)
            m = m_new
        if MISTAKE == NO_RESCALE_L:
            l = l + tl.sum(p, axis=1)
        else:
            l = l * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        pv = tl.dot(p.to(v.dtype), v)
        if MISTAKE == NO_RESCALE_ACC:
            acc = acc + pv.to(acc.dtype)
        else:
            acc = (acc * alpha[:, None]).to(acc.dtype) + pv.to(acc.dtype)
    if MISTAKE == NO_DIVIDE:
        o = acc
    else:
        o = acc / l[:, None]
    tl.store(o_ptr + base + rows[:, None] * D + dims[None, :], o.to(o_ptr.dtype.element_ty),
             mask=(rows[:, None] < N) & (dims[None, :] < D))


def _attn(q, k, v, causal=False, mistake=RIGHT, block_m=32, block_n=32, swap_grid=False, block_d=None):
    B, H, N, D = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    grid = (B * H, triton.cdiv(N, block_m)) if swap_grid else (triton.cdiv(N, block_m), B * H)
    _attn_kernel[grid](q, k, v, o, N, D ** -0.5, D=D, BLOCK_D=block_d or max(16, triton.next_power_of_2(D)), BLOCK_M=block_m,
                       BLOCK_N=block_n, CAUSAL=causal, SWAP_GRID=swap_grid, MISTAKE=mistake.value)
    return o


def flash_attention(q, k, v, causal=False):
    """Right: the lesson's kernel, query and K/V tiles of 32."""
    return _attn(q, k, v, causal)


def flash_attention_other_tiles(q, k, v, causal=False):
    """Right, written differently: query tiles of 16, K/V tiles of 64, the grid's axes swapped."""
    return _attn(q, k, v, causal, block_m=16, block_n=64, swap_grid=True)


def flash_attention_stub(q, k, v, causal=False):
    raise NotImplementedError("one program per (query block, batch·head): loop over K/V tiles with online softmax")


def _wrong(mistake, **kw):
    def fn(q, k, v, causal=False):
        return _attn(q, k, v, causal, mistake, **kw)
    fn.__name__ = "flash_attention"
    return fn


no_rescale_acc = _wrong(NO_RESCALE_ACC)
no_rescale_acc_16 = _wrong(NO_RESCALE_ACC, block_m=16, block_n=16)
no_rescale_l = _wrong(NO_RESCALE_L)
no_scale = _wrong(NO_SCALE)
scale_by_d = _wrong(SCALE_BY_D)
diagonal_masked = _wrong(DIAGONAL_MASKED)
sees_next = _wrong(SEES_NEXT)
tail_unmasked = _wrong(TAIL_UNMASKED)
fp16_acc = _wrong(FP16_ACC)
no_max = _wrong(NO_MAX)
no_divide = _wrong(NO_DIVIDE)
no_skip = _wrong(NO_SKIP)
exp2_no_log2e = _wrong(EXP2_NO_LOG2E)


def block_d_is_d(q, k, v, causal=False):
    """Wrong: tl.arange(0, D) where the contract passes BLOCK_D, right for every power-of-two D (a new user's trial
    passed the check this way while no D it tried was another)."""
    return _attn(q, k, v, causal, block_d=q.shape[-1])


def causal_ignored(q, k, v, causal=False):
    """Wrong: the causal flag is accepted and ignored."""
    return _attn(q, k, v, False)


def naive_torch(q, k, v, causal=False):
    """Right numbers, over budget: plain PyTorch attention writes the N×N scores and probabilities."""
    s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v


def sdpa(q, k, v, causal=False):
    """Right numbers, PyTorch's own kernel: not the student's Triton."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
