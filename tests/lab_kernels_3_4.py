"""Kernels for tests/test_grade_cross_entropy.py and tests/test_grade_flash_backward.py: right answers to
labs 3 (fused cross-entropy) and 4 (FlashAttention backward), written two ways each, and the realistic
wrong ones. Mistakes are tl.constexpr codes so that every variant compiles on a real GPU too."""
import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

# ------------------------------------------------------------------------------------------------------
# Lab 3: cross_entropy(logits (M, V), target (M,) int64, ignore_index=-100) -> (mean loss, dlogits)
# ------------------------------------------------------------------------------------------------------
CE_RIGHT, NO_MAX, MEAN_OVER_ALL, GRAD_NO_MEAN, IGNORED_GRAD, NO_ONE_HOT, UNMASKED_TARGET = map(tl.constexpr, range(7))


@triton.jit
def _ce_kernel(x_ptr, t_ptr, g_ptr, loss_ptr, nvalid_ptr, M, V, ignore_index,
               BLOCK: tl.constexpr, MISTAKE: tl.constexpr):
    # one program per row; walk 1: running max and sum of exp; walk 2: write the gradient
    row = tl.program_id(0)
    base = row.to(tl.int64) * V
    target = tl.load(t_ptr + row)
    valid = target != ignore_index
    if MISTAKE == MEAN_OVER_ALL:
        n = M * 1.0
    else:
        n = tl.load(nvalid_ptr).to(tl.float32)
    cols = tl.arange(0, BLOCK)
    m = float("-inf")
    s = 0.0
    for start in range(0, V, BLOCK):
        x = tl.load(x_ptr + base + start + cols, mask=start + cols < V, other=float("-inf")).to(tl.float32)
        if MISTAKE == NO_MAX:
            s += tl.sum(tl.exp(x), axis=0)
        else:
            m_new = tl.maximum(m, tl.max(x, axis=0))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
            m = m_new
    if MISTAKE == NO_MAX:
        lse = tl.log(s)
    else:
        lse = m + tl.log(s)
    if MISTAKE == UNMASKED_TARGET:
        x_t = tl.load(x_ptr + base + target).to(tl.float32)
    else:
        x_t = tl.load(x_ptr + base + target, mask=valid, other=0.0).to(tl.float32)
    tl.atomic_add(loss_ptr, tl.where(valid, (lse - x_t) / n, 0.0))
    for start in range(0, V, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + base + c, mask=c < V, other=0.0).to(tl.float32)
        if MISTAKE == NO_ONE_HOT:
            g = tl.exp(x - lse)
        else:
            g = tl.exp(x - lse) - tl.where(c == target, 1.0, 0.0)
        if MISTAKE != GRAD_NO_MEAN:
            g = g / n
        if MISTAKE != IGNORED_GRAD:
            g = tl.where(valid, g, 0.0)
        tl.store(g_ptr + base + c, g.to(g_ptr.dtype.element_ty), mask=c < V)


def _ce(logits, target, ignore_index=-100, mistake=CE_RIGHT, block=None):
    M, V = logits.shape
    block = block or (4096 if logits.is_cuda else 1024)
    n_valid = (target != ignore_index).sum()
    loss = torch.zeros((), dtype=torch.float32, device=logits.device)
    grad = torch.empty_like(logits)
    _ce_kernel[(M,)](logits, target, grad, loss, n_valid, M, V, ignore_index,
                     BLOCK=min(block, max(16, triton.next_power_of_2(V))), MISTAKE=mistake.value, num_warps=8)
    return loss, grad


def cross_entropy(logits, target, ignore_index=-100):
    """Right: the lab's solution, one program per row, two walks, the mean added atomically."""
    return _ce(logits, target, ignore_index)


@triton.jit
def _ce_rows_kernel(x_ptr, t_ptr, g_ptr, rowloss_ptr, nvalid_ptr, V, ignore_index, BLOCK: tl.constexpr):
    # written differently: a running max per lane, per-row losses summed by PyTorch afterwards
    row = tl.program_id(0)
    base = row.to(tl.int64) * V
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -1e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        x = tl.load(x_ptr + base + start + cols, mask=start + cols < V, other=-1e30).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    mx = tl.max(m, axis=0)
    lse = mx + tl.log(tl.sum(s * tl.exp(m - mx), axis=0))
    target = tl.load(t_ptr + row)
    keep = (target != ignore_index).to(tl.float32)
    safe = tl.where(target != ignore_index, target, 0)
    tl.store(rowloss_ptr + row, keep * (lse - tl.load(x_ptr + base + safe).to(tl.float32)))
    inv = keep / tl.load(nvalid_ptr).to(tl.float32)
    for start in range(0, V, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + base + c, mask=c < V, other=0.0).to(tl.float32)
        g = (tl.exp(x - lse) - (c == target).to(tl.float32)) * inv
        tl.store(g_ptr + base + c, g.to(g_ptr.dtype.element_ty), mask=c < V)


def cross_entropy_rows(logits, target, ignore_index=-100):
    """Right, written differently: other blocks, per-lane statistics, per-row losses, mean by PyTorch."""
    M, V = logits.shape
    n_valid = (target != ignore_index).sum()
    rows = torch.empty(M, dtype=torch.float32, device=logits.device)
    grad = torch.empty_like(logits)
    _ce_rows_kernel[(M,)](logits, target, grad, rows, n_valid, V, ignore_index,
                          BLOCK=min(2048 if logits.is_cuda else 256, max(16, triton.next_power_of_2(V))), num_warps=8)
    return rows.sum() / n_valid, grad


def cross_entropy_stub(logits, target, ignore_index=-100):
    raise NotImplementedError("one program per row: walk 1, the running max and sum; walk 2, the gradient")


def ce_no_max(logits, target, ignore_index=-100):
    """Wrong: sum of exp(x) with no max subtracted; overflows on large logits."""
    return _ce(logits, target, ignore_index, NO_MAX)


def ce_mean_over_all(logits, target, ignore_index=-100):
    """Wrong: divides by M, counting the ignored rows in the mean."""
    return _ce(logits, target, ignore_index, MEAN_OVER_ALL)


def ce_grad_no_mean(logits, target, ignore_index=-100):
    """Wrong: the gradient is softmax - one_hot, without the 1/n_valid of the mean."""
    return _ce(logits, target, ignore_index, GRAD_NO_MEAN)


def ce_ignored_grad(logits, target, ignore_index=-100):
    """Wrong: the ignored rows get a gradient (softmax / n) instead of zeros."""
    return _ce(logits, target, ignore_index, IGNORED_GRAD)


def ce_no_one_hot(logits, target, ignore_index=-100):
    """Wrong: the gradient is the softmax alone; the one-hot of the target is never subtracted."""
    return _ce(logits, target, ignore_index, NO_ONE_HOT)


def ce_unmasked_target(logits, target, ignore_index=-100):
    """Wrong: loads logits[row, target] even where target is ignore_index (-100): out of bounds."""
    return _ce(logits, target, ignore_index, UNMASKED_TARGET)


@triton.jit
def _softmax_to_memory(x_ptr, p_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * V + c, mask=c < V, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(p_ptr + row * V + c, e / tl.sum(e, axis=0), mask=c < V)


@triton.jit
def _grad_from_probs(p_ptr, t_ptr, g_ptr, loss_ptr, nvalid_ptr, V, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    p = tl.load(p_ptr + row * V + c, mask=c < V, other=0.0)
    target = tl.load(t_ptr + row)
    valid = target != ignore_index
    n = tl.load(nvalid_ptr).to(tl.float32)
    p_t = tl.sum(tl.where(c == target, p, 0.0), axis=0)
    tl.atomic_add(loss_ptr, tl.where(valid, -tl.log(p_t) / n, 0.0))
    g = tl.where(valid, (p - (c == target).to(tl.float32)) / n, 0.0)
    tl.store(g_ptr + row * V + c, g.to(g_ptr.dtype.element_ty), mask=c < V)


def ce_probs_in_memory(logits, target, ignore_index=-100):
    """Right numbers, over the byte budget: the softmax written to an fp32 buffer, then read back."""
    M, V = logits.shape
    n_valid = (target != ignore_index).sum()
    probs = torch.empty(M, V, dtype=torch.float32, device=logits.device)
    loss = torch.zeros((), dtype=torch.float32, device=logits.device)
    grad = torch.empty_like(logits)
    block = max(16, triton.next_power_of_2(V))
    _softmax_to_memory[(M,)](logits, probs, V, BLOCK=block)
    _grad_from_probs[(M,)](probs, target, grad, loss, n_valid, V, ignore_index, BLOCK=block)
    return loss, grad


def ce_fixed_ignore(logits, target, ignore_index=-100):
    """Wrong when ignore_index is not -100: the count of kept rows ignores the argument."""
    M, V = logits.shape
    n_valid = (target != -100).sum()
    loss = torch.zeros((), dtype=torch.float32, device=logits.device)
    grad = torch.empty_like(logits)
    _ce_kernel[(M,)](logits, target, grad, loss, n_valid, M, V, ignore_index,
                     BLOCK=min(1024, max(16, triton.next_power_of_2(V))), MISTAKE=0)
    return loss, grad


def ce_eager(logits, target, ignore_index=-100):
    """Right numbers, over budget: PyTorch's cross_entropy and autograd."""
    x = logits.detach().requires_grad_()
    loss = F.cross_entropy(x.float(), target, ignore_index=ignore_index)
    (grad,) = torch.autograd.grad(loss, x)
    return loss.detach(), grad


# ------------------------------------------------------------------------------------------------------
# Lab 4: attention(q, k, v, causal) through a torch.autograd.Function whose backward is the exercise
# ------------------------------------------------------------------------------------------------------
@triton.jit
def _attn_fwd(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, N, scale,
              D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    pid_m, bh = tl.program_id(0), tl.program_id(1)
    off = bh.to(tl.int64) * N * D
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + off + rows[:, None] * D + d[None, :], mask=rows[:, None] < N, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, N) if CAUSAL else N
    for start in range(0, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        kv = off + cols[:, None] * D + d[None, :]
        k = tl.load(k_ptr + kv, mask=cols[:, None] < N, other=0.0)
        v = tl.load(v_ptr + kv, mask=cols[:, None] < N, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        keep = cols[None, :] < N
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    tl.store(o_ptr + off + rows[:, None] * D + d[None, :], (acc / l[:, None]).to(o_ptr.dtype.element_ty),
             mask=rows[:, None] < N)
    tl.store(lse_ptr + bh * N + rows, m + tl.log(l), mask=rows < N)


def flash_forward(q, k, v, causal, scale):
    B, H, N, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N, dtype=torch.float32, device=q.device)
    bm, bn, warps = ((64 if D <= 64 else 128), 64, (4 if D <= 64 else 8)) if q.is_cuda else (16, 16, 4)
    _attn_fwd[(triton.cdiv(N, bm), B * H)](q, k, v, o, lse, N, scale, D=D, BLOCK_M=bm, BLOCK_N=bn,
                                           CAUSAL=causal, num_warps=warps)
    return o, lse


(FA_RIGHT, NO_DELTA, NO_P, NO_SCALE, NO_CAUSAL_BWD, NOT_ACCUMULATED, DQ_NO_SCALE, S_UNSCALED, DV_ASSIGNED,
 STORES_SWAPPED) = map(tl.constexpr, range(10))


@triton.jit
def _bwd_delta(o_ptr, do_ptr, delta_ptr, N, D: tl.constexpr, BLOCK_M: tl.constexpr):
    pid_m, bh = tl.program_id(0), tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, D)
    offs = bh.to(tl.int64) * N * D + rows[:, None] * D + d[None, :]
    o = tl.load(o_ptr + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    tl.store(delta_ptr + bh * N + rows, tl.sum(o * do, axis=1), mask=rows < N)


@triton.jit
def _bwd_dkdv(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, N, scale,
              D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
              MISTAKE: tl.constexpr):
    pid_n, bh = tl.program_id(0), tl.program_id(1)
    off = bh.to(tl.int64) * N * D
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    d = tl.arange(0, D)
    k = tl.load(k_ptr + off + cols[:, None] * D + d[None, :], mask=cols[:, None] < N, other=0.0)
    v = tl.load(v_ptr + off + cols[:, None] * D + d[None, :], mask=cols[:, None] < N, other=0.0)
    dk = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, D], tl.float32)
    lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M if CAUSAL and MISTAKE != NO_CAUSAL_BWD else 0
    for start in range(lo, N, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        qo = off + rows[:, None] * D + d[None, :]
        q = tl.load(q_ptr + qo, mask=rows[:, None] < N, other=0.0)
        do = tl.load(do_ptr + qo, mask=rows[:, None] < N, other=0.0)
        lse = tl.load(lse_ptr + bh * N + rows, mask=rows < N, other=0.0)
        delta = tl.load(delta_ptr + bh * N + rows, mask=rows < N, other=0.0)
        keep = (rows[:, None] < N) & (cols[None, :] < N)
        if CAUSAL and MISTAKE != NO_CAUSAL_BWD:
            keep = keep & (cols[None, :] <= rows[:, None])
        if MISTAKE == S_UNSCALED:    # S = QKᵀ, the scale forgotten: exp(S − lse) overflows
            p = tl.where(keep, tl.exp(tl.dot(q, tl.trans(k)) - lse[:, None]), 0.0)
        else:
            p = tl.where(keep, tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v)).to(tl.float32)
        if MISTAKE == NO_DELTA:
            ds = p * dp
        elif MISTAKE == NO_P:
            ds = tl.where(keep, dp - delta[:, None], 0.0)
        else:
            ds = p * (dp - delta[:, None])
        if MISTAKE == NOT_ACCUMULATED:
            dv = tl.dot(tl.trans(p.to(do.dtype)), do)
            dk = tl.dot(tl.trans(ds.to(q.dtype)), q)
        elif MISTAKE == DV_ASSIGNED:   # dk += as it should; dv = overwrites what earlier query blocks gave
            dv = tl.dot(tl.trans(p.to(do.dtype)), do)
            dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
        else:
            dv += tl.dot(tl.trans(p.to(do.dtype)), do)
            dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
    if MISTAKE != NO_SCALE:
        dk = dk * scale
    kvo = off + cols[:, None] * D + d[None, :]
    if MISTAKE == STORES_SWAPPED:   # each accumulator stored at the other's pointer
        tl.store(dk_ptr + kvo, dv.to(dk_ptr.dtype.element_ty), mask=cols[:, None] < N)
        tl.store(dv_ptr + kvo, dk.to(dv_ptr.dtype.element_ty), mask=cols[:, None] < N)
    else:
        tl.store(dk_ptr + kvo, dk.to(dk_ptr.dtype.element_ty), mask=cols[:, None] < N)
        tl.store(dv_ptr + kvo, dv.to(dv_ptr.dtype.element_ty), mask=cols[:, None] < N)


@triton.jit
def _bwd_dq(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, N, scale,
            D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
            MISTAKE: tl.constexpr):
    pid_m, bh = tl.program_id(0), tl.program_id(1)
    off = bh.to(tl.int64) * N * D
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, D)
    qo = off + rows[:, None] * D + d[None, :]
    q = tl.load(q_ptr + qo, mask=rows[:, None] < N, other=0.0)
    do = tl.load(do_ptr + qo, mask=rows[:, None] < N, other=0.0)
    lse = tl.load(lse_ptr + bh * N + rows, mask=rows < N, other=0.0)
    delta = tl.load(delta_ptr + bh * N + rows, mask=rows < N, other=0.0)
    dq = tl.zeros([BLOCK_M, D], tl.float32)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, N) if CAUSAL and MISTAKE != NO_CAUSAL_BWD else N
    for start in range(0, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        kv = off + cols[:, None] * D + d[None, :]
        k = tl.load(k_ptr + kv, mask=cols[:, None] < N, other=0.0)
        v = tl.load(v_ptr + kv, mask=cols[:, None] < N, other=0.0)
        keep = (rows[:, None] < N) & (cols[None, :] < N)
        if CAUSAL and MISTAKE != NO_CAUSAL_BWD:
            keep = keep & (cols[None, :] <= rows[:, None])
        if MISTAKE == S_UNSCALED:
            p = tl.where(keep, tl.exp(tl.dot(q, tl.trans(k)) - lse[:, None]), 0.0)
        else:
            p = tl.where(keep, tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v)).to(tl.float32)
        if MISTAKE == NO_DELTA:
            ds = p * dp
        elif MISTAKE == NO_P:
            ds = tl.where(keep, dp - delta[:, None], 0.0)
        else:
            ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    if MISTAKE != NO_SCALE and MISTAKE != DQ_NO_SCALE:
        dq = dq * scale
    tl.store(dq_ptr + qo, dq.to(dq_ptr.dtype.element_ty), mask=rows[:, None] < N)


def _bwd(q, k, v, o, lse, do, causal, scale, mistake=FA_RIGHT, block_m=None, block_n=None, torch_delta=False,
         warps=4):
    B, H, N, D = q.shape
    block_m, block_n = block_m or (64 if q.is_cuda else 16), block_n or (64 if q.is_cuda else 16)
    stages = 3 if D <= 64 else 2
    do = do.contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if torch_delta:
        delta = (o * do).sum(-1, dtype=torch.float32)
    else:
        delta = torch.empty_like(lse)
        _bwd_delta[(triton.cdiv(N, block_m), B * H)](o, do, delta, N, D=D, BLOCK_M=block_m)
    _bwd_dkdv[(triton.cdiv(N, block_n), B * H)](q, k, v, do, lse, delta, dk, dv, N, scale, D=D, BLOCK_M=block_m,
                                                BLOCK_N=block_n, CAUSAL=causal, MISTAKE=mistake.value,
                                                num_warps=warps, num_stages=stages)
    _bwd_dq[(triton.cdiv(N, block_m), B * H)](q, k, v, do, lse, delta, dq, N, scale, D=D, BLOCK_M=block_m,
                                              BLOCK_N=block_n, CAUSAL=causal, MISTAKE=mistake.value,
                                              num_warps=warps, num_stages=stages)
    return dq, dk, dv


def _attention_with(backward):
    class _Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal):
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
            scale = 1.0 / math.sqrt(q.shape[-1])
            o, lse = flash_forward(q, k, v, causal, scale)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.causal, ctx.scale = causal, scale
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, lse = ctx.saved_tensors
            return (*backward(q, k, v, o, lse, do, ctx.causal, ctx.scale), None)

    def attention(q, k, v, causal=False):
        return _Attention.apply(q, k, v, causal)
    attention.__name__ = getattr(backward, "__name__", "attention")
    return attention


attention = _attention_with(_bwd)
attention_other_blocks = _attention_with(   # delta by PyTorch; other tiles on the CPU (a GPU keeps the tuned 64 x 64)
    lambda q, *a: _bwd(q, *a, block_m=64 if q.is_cuda else 32, block_n=64 if q.is_cuda else 16, torch_delta=True))


def _stub_backward(q, k, v, o, lse, do, causal, scale):
    raise NotImplementedError("dQ, dK, dV from the saved log-sum-exp: the delta kernel, then dK/dV, then dQ")


attention_stub = _attention_with(_stub_backward)
fa_no_delta = _attention_with(lambda *a: _bwd(*a, mistake=NO_DELTA))
fa_no_p = _attention_with(lambda *a: _bwd(*a, mistake=NO_P))
fa_no_scale = _attention_with(lambda *a: _bwd(*a, mistake=NO_SCALE))
fa_dq_no_scale = _attention_with(lambda *a: _bwd(*a, mistake=DQ_NO_SCALE))
fa_no_causal_bwd = _attention_with(lambda *a: _bwd(*a, mistake=NO_CAUSAL_BWD))
fa_not_accumulated = _attention_with(lambda *a: _bwd(*a, mistake=NOT_ACCUMULATED))


fa_dk_dv_swapped = _attention_with(lambda *a: _bwd(*a, mistake=STORES_SWAPPED))
fa_s_unscaled = _attention_with(lambda *a: _bwd(*a, mistake=S_UNSCALED))
fa_dv_assigned = _attention_with(lambda *a: _bwd(*a, mistake=DV_ASSIGNED))


def _materialised(q, k, v, o, lse, do, causal, scale):
    """Right numbers, over the byte budget: P and dS as N x N fp32 matrices in memory (PyTorch)."""
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    p = torch.exp(s - lse[..., None])
    dv = torch.matmul(p.transpose(-1, -2), do.float())
    dp = torch.matmul(do.float(), v.float().transpose(-1, -2))
    ds = p * (dp - (o.float() * do.float()).sum(-1, keepdim=True))
    return ((torch.matmul(ds, k.float()) * scale).to(q.dtype), (torch.matmul(ds.transpose(-1, -2), q.float())
                                                                   * scale).to(q.dtype), dv.to(q.dtype))


fa_materialised = _attention_with(_materialised)


def fa_sdpa(q, k, v, causal=False):
    """Right numbers, not the exercise: PyTorch's own attention, forward and backward."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
