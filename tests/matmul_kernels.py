"""Kernels for tests/test_check_matmul.py: right and wrong answers to matmul_bias_gelu(a, w, b)."""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

# mistakes, picked by a constexpr so that one kernel holds every variant and each compiles on a GPU
(RIGHT, BIAS_ROWS, TANH, K_UNMASKED, K_DROP_TAIL, FP16_ACC, EPI_PER_K, W_TRANSPOSED, NO_BIAS, BIAS_AFTER,
 NO_GELU, MM_ONLY, FP16_ZEROS, W_STRIDE_K) = map(tl.constexpr, range(14))


@triton.jit
def _gelu(v, TANH_FORM: tl.constexpr):
    if TANH_FORM:
        u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
        t = 2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0            # tanh(u)
        return 0.5 * v * (1.0 + t)
    else:
        return 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))


@triton.jit
def _mm_kernel(a_ptr, w_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, MISTAKE: tl.constexpr):
    # one program per output tile, in grouped order
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * num_n)
    size_m = min(tl.cdiv(M, BLOCK_M) - group * GROUP_M, GROUP_M)
    pid_m = group * GROUP_M + (pid % (GROUP_M * num_n)) % size_m
    pid_n = (pid % (GROUP_M * num_n)) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if MISTAKE == FP16_ACC or MISTAKE == FP16_ZEROS:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if MISTAKE == K_DROP_TAIL:
        steps = K // BLOCK_K
    else:
        steps = tl.cdiv(K, BLOCK_K)
    for k in range(0, steps):
        kk = k * BLOCK_K + rk
        if MISTAKE == K_UNMASKED:
            a_mask = rm[:, None] < M
            w_mask = rn[None, :] < N
        else:
            a_mask = (rm[:, None] < M) & (kk[None, :] < K)
            w_mask = (kk[:, None] < K) & (rn[None, :] < N)
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=a_mask, other=0.0)
        if MISTAKE == W_TRANSPOSED:
            w = tl.load(w_ptr + rn[None, :] * K + kk[:, None], mask=w_mask, other=0.0)
        elif MISTAKE == W_STRIDE_K:
            w = tl.load(w_ptr + kk[:, None] * K + rn[None, :], mask=w_mask, other=0.0)
        else:
            w = tl.load(w_ptr + kk[:, None] * N + rn[None, :], mask=w_mask, other=0.0)
        if MISTAKE == FP16_ACC:
            acc = tl.dot(a, w, acc, out_dtype=tl.float16)
        elif MISTAKE == FP16_ZEROS:
            acc += tl.dot(a, w)      # fp32 products into an fp16 accumulator: the loop changes its type
        else:
            acc = tl.dot(a, w, acc)
        if MISTAKE == EPI_PER_K:
            acc = _gelu(acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :], False)
    v = acc.to(tl.float32)
    if MISTAKE == BIAS_ROWS:
        v = v + tl.load(b_ptr + rm, mask=rm < M, other=0.0).to(tl.float32)[:, None]
    elif MISTAKE != NO_BIAS and MISTAKE != BIAS_AFTER and MISTAKE != EPI_PER_K and MISTAKE != MM_ONLY:
        v = v + tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if MISTAKE != NO_GELU and MISTAKE != EPI_PER_K and MISTAKE != MM_ONLY:
        v = _gelu(v, MISTAKE == TANH)
    if MISTAKE == BIAS_AFTER:
        v = v + tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], v.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _mm(a, w, b, mistake=RIGHT, bm=32, bn=64, bk=32, group=4, out_dtype=None):
    M, K = a.shape
    N = w.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=out_dtype or a.dtype)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _mm_kernel[grid](a, w, b, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group,
                     MISTAKE=mistake.value)
    return c


def matmul_bias_gelu(a, w, b):
    """Right: grouped program order, 32 x 64 x 32 tiles."""
    return _mm(a, w, b)


@triton.jit
def _mm_2d_kernel(a_ptr, w_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    # a 2-D grid, column tiles first, pointers advanced along K, the K tail masked through `other`
    rm = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    w_ptrs = w_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k0), other=0.0)
        w = tl.load(w_ptrs, mask=(rk[:, None] < K - k0) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, w)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * N
    v = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    y = 0.5 * v * (1.0 + tl.erf(v / 1.4142135623730951))
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], y.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_bias_gelu_2d(a, w, b):
    """Right, written differently: a 2-D grid (column tiles along axis 0), 64 x 32 x 16 tiles."""
    M, K = a.shape
    N = w.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    _mm_2d_kernel[(triton.cdiv(N, 32), triton.cdiv(M, 64))](a, w, b, c, M, N, K, BLOCK_M=64, BLOCK_N=32,
                                                           BLOCK_K=16)
    return c


def matmul_bias_gelu_big_tiles(a, w, b):
    """Right: one tile larger than most test shapes, no grouping (GROUP_M = 1)."""
    return _mm(a, w, b, bm=128, bn=128, bk=64, group=1)


def matmul_bias_gelu_stub(a, w, b):
    raise NotImplementedError("tile loop over K with tl.dot into an fp32 accumulator, then bias + GELU, then store")


def bias_rows(a, w, b):
    """Wrong: the bias indexed by the row (b[rm]) instead of the column."""
    return _mm(a, w, b, BIAS_ROWS)


def tanh_gelu(a, w, b):
    """Wrong: the tanh approximation of GELU."""
    return _mm(a, w, b, TANH)


def k_unmasked(a, w, b):
    """Wrong: the K tail is not masked, so the last step reads past the row."""
    return _mm(a, w, b, K_UNMASKED)


def k_drop_tail(a, w, b):
    """Wrong: the K loop runs K // BLOCK_K steps and drops the tail."""
    return _mm(a, w, b, K_DROP_TAIL)


def fp16_acc(a, w, b):
    """Wrong: the accumulator is fp16."""
    return _mm(a, w, b, FP16_ACC)


def fp16_zeros(a, w, b):
    """Wrong on a GPU (it does not compile): acc starts as fp16 zeros and acc += tl.dot(a, w) makes it fp32; the
    interpreter lets the type change and gives right numbers."""
    return _mm(a, w, b, FP16_ZEROS)


def epilogue_per_k(a, w, b):
    """Wrong: bias + GELU applied to the accumulator after every K step."""
    return _mm(a, w, b, EPI_PER_K)


def w_transposed(a, w, b):
    """Wrong: w read as if stored (N, K), like nn.Linear's weight."""
    return _mm(a, w, b, W_TRANSPOSED)


def w_stride_k(a, w, b):
    """Wrong: w's rows stepped through by K instead of N (right only where N = K)."""
    return _mm(a, w, b, W_STRIDE_K)


def w_stride_k_unseen(a, w, b):
    """Wrong as w_stride_k, the way a GPU runs it: where K > N the loads past w go unnoticed and return whatever
    lies there (here a constant), where K <= N the answer with w's rows stepped through by K."""
    (M, K), N = a.shape, w.shape[1]
    if K > N:
        return torch.full((M, N), 3.0, dtype=a.dtype, device=a.device)
    rows = torch.arange(K, device=w.device)[:, None] * K + torch.arange(N, device=w.device)[None, :]
    return F.gelu(a.float() @ w.reshape(-1)[rows].float() + b.float()).to(a.dtype)


def no_bias(a, w, b):
    return _mm(a, w, b, NO_BIAS)


def bias_after(a, w, b):
    """Wrong: gelu(a @ w) + b."""
    return _mm(a, w, b, BIAS_AFTER)


def no_gelu(a, w, b):
    return _mm(a, w, b, NO_GELU)


@triton.jit
def _bias_gelu_kernel(y_ptr, b_ptr, out_ptr, n, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(y_ptr + offs, mask=mask).to(tl.float32) + tl.load(b_ptr + offs % N, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))).to(out_ptr.dtype.element_ty),
             mask=mask)


def two_kernels(a, w, b):
    """Right numbers, over budget: a Triton matmul that stores fp32 (so nothing is rounded twice), then
    lesson 04's bias_gelu kernel."""
    y = _mm(a, w, b, MM_ONLY, out_dtype=torch.float32)
    out = torch.empty(y.shape, device=y.device, dtype=a.dtype)
    _bias_gelu_kernel[(triton.cdiv(y.numel(), 1024),)](y, b, out, y.numel(), y.shape[1], BLOCK=1024)
    return out


def eager(a, w, b):
    """Right numbers, PyTorch: cuBLAS (or the CPU's matmul) and two element-wise kernels."""
    return F.gelu(a @ w + b)


def fp32_out(a, w, b):
    """Wrong dtype: returns the fp32 result."""
    return _mm(a, w, b).float()
