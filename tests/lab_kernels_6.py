"""Steps for tests/test_grade_decode_step.py: right answers to lab 6 (one decode step) written two ways, the
blank stub, and realistic wrong ones, each a piece of the step gone wrong the way a student's kernel goes.

    logits = decode_step(model, cache, tokens, pos)      # course_utils.decoder's contract

`step` uses Triton kernels for every piece (add + RMSNorm, the projections, RoPE with the cache write,
flash-decoding, SwiGLU); `step_cublas` all of them but the projections; `step_two_kernels` replaces only add +
RMSNorm and SwiGLU (right numbers, too many kernels). The wrong steps change
one piece of `step` in plain PyTorch: the grader sees the step's output, not how a piece was written."""

import torch
import triton
import triton.language as tl

from course_utils import decoder

import lab_kernels_5


@triton.jit
def _add_rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, out_r_ptr, n, eps, HAS_RES: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * n
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row + c, mask=c < n, other=0.0).to(tl.float32)
    if HAS_RES:
        x += tl.load(r_ptr + row + c, mask=c < n, other=0.0).to(tl.float32)
    tl.store(out_r_ptr + row + c, x.to(out_r_ptr.dtype.element_ty), mask=c < n)
    w = tl.load(w_ptr + c, mask=c < n, other=0.0).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / n + eps) * w
    tl.store(y_ptr + row + c, y.to(y_ptr.dtype.element_ty), mask=c < n)


def add_rmsnorm(x, residual, weight, eps):
    y, r = torch.empty_like(x), torch.empty_like(x)
    _add_rmsnorm[(x.shape[0],)](x, x if residual is None else residual, weight, y, r, x.shape[1], eps,
                                HAS_RES=residual is not None, BLOCK=triton.next_power_of_2(x.shape[1]))
    return y, r


@triton.jit
def _skinny(x_ptr, w_ptr, y_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pn = tl.program_id(0)
    rm = tl.arange(0, BLOCK_M)
    rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        x = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[:, None].to(tl.int64) * K + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K),
                    other=0.0)
        acc += tl.dot(x, tl.trans(w))
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def linear(x, w):
    m, k = x.shape
    n = w.shape[0]
    y = torch.empty(m, n, device=x.device, dtype=x.dtype)
    bn, bk = (32, 64) if x.is_cuda else (64, 128)      # the interpreter: fewer, larger programs
    _skinny[(triton.cdiv(n, bn),)](x, w, y, m, n, k, BLOCK_M=max(16, triton.next_power_of_2(m)), BLOCK_N=bn,
                                   BLOCK_K=bk)
    return y


@triton.jit
def _rope_cache(qkv_ptr, cos_ptr, sin_ptr, pos_ptr, q_ptr, k_ptr, v_ptr, L, H: tl.constexpr,
                H_KV: tl.constexpr, D: tl.constexpr):
    b, h = tl.program_id(0), tl.program_id(1)
    half = tl.arange(0, D // 2)
    p = tl.load(pos_ptr + b)
    src = qkv_ptr + (b * (H + 2 * H_KV) + h) * D
    x1 = tl.load(src + half).to(tl.float32)
    x2 = tl.load(src + D // 2 + half).to(tl.float32)
    if h < H + H_KV:
        c = tl.load(cos_ptr + p * (D // 2) + half)
        s = tl.load(sin_ptr + p * (D // 2) + half)
        x1, x2 = x1 * c - x2 * s, x2 * c + x1 * s
    if h < H:
        dst = q_ptr + (b * H + h) * D
    elif h < H + H_KV:
        dst = k_ptr + ((b * H_KV + h - H).to(tl.int64) * L + p) * D
    else:
        dst = v_ptr + ((b * H_KV + h - H - H_KV).to(tl.int64) * L + p) * D
    tl.store(dst + half, x1.to(k_ptr.dtype.element_ty))
    tl.store(dst + D // 2 + half, x2.to(k_ptr.dtype.element_ty))


def rope_cache(qkv, cos, sin, pos, k_cache, v_cache):
    b, h_kv, length, d = k_cache.shape
    h = qkv.shape[1] // d - 2 * h_kv
    q = torch.empty(b, h, 1, d, device=qkv.device, dtype=qkv.dtype)
    _rope_cache[(b, h + 2 * h_kv)](qkv, cos, sin, pos, q, k_cache, v_cache, length, H=h, H_KV=h_kv, D=d)
    return q


def attention(q, k, v, seq_lens):
    """Lab 5's right flash-decoding (tests/lab_kernels_5.py) over the cache, at most 16 splits."""
    return lab_kernels_5.flash_decoding(q, k, v, seq_lens, splits=max(1, min(16, triton.cdiv(k.shape[2], 64))))


@triton.jit
def _swiglu(gu_ptr, h_ptr, F, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    g = tl.load(gu_ptr + row * 2 * F + c, mask=c < F, other=0.0).to(tl.float32)
    u = tl.load(gu_ptr + row * 2 * F + F + c, mask=c < F, other=0.0).to(tl.float32)
    tl.store(h_ptr + row * F + c, (g * tl.sigmoid(g) * u).to(h_ptr.dtype.element_ty), mask=c < F)


def swiglu(gate_up):
    m, f = gate_up.shape[0], gate_up.shape[1] // 2
    h = torch.empty(m, f, device=gate_up.device, dtype=gate_up.dtype)
    _swiglu[(m, triton.cdiv(f, 1024))](gate_up, h, f, BLOCK=1024)
    return h


MINE = decoder.Ops(add_rmsnorm=add_rmsnorm, linear=linear, rope_cache=rope_cache, attention=attention, swiglu=swiglu)


def step(model, cache, tokens, pos):
    return model.step(tokens, cache, pos, ops=MINE)


def step_two_kernels(model, cache, tokens, pos):
    return model.step(tokens, cache, pos, ops=decoder.with_ops(add_rmsnorm=add_rmsnorm, swiglu=swiglu))


def step_cublas(model, cache, tokens, pos):
    # right too: every piece a kernel of ours but the projections, left to PyTorch's matmul (one kernel each)
    return model.step(tokens, cache, pos, ops=decoder.Ops(**{**MINE.__dict__, "linear": decoder.linear}))


def step_stub(model, cache, tokens, pos):
    raise NotImplementedError("one decode step with your kernels")


# --- wrong: one piece of `step` as a student gets it wrong -----------------------------------------------
def _with(**pieces):
    ops = decoder.Ops(**{**MINE.__dict__, **pieces})

    def decode_step(model, cache, tokens, pos):
        return model.step(tokens, cache, pos, ops=ops)
    return decode_step


def _rope(qkv, cos, sin, pos, k_cache, v_cache, *, shift=0, write=True):
    # RoPE in plain PyTorch, its angles taken at pos + shift; k and v written at pos only if `write`
    b, h_kv, _, d = k_cache.shape
    q, k, v = qkv.view(b, -1, d).split([qkv.shape[1] // d - 2 * h_kv, h_kv, h_kv], dim=1)
    at = (pos + shift).long()
    c, s = cos[at][:, None, :], sin[at][:, None, :]

    def rotate(t):
        t1, t2 = t.float().chunk(2, dim=-1)
        return torch.cat([t1 * c - t2 * s, t2 * c + t1 * s], dim=-1).to(t.dtype)

    if write:
        rows = torch.arange(b, device=qkv.device)
        k_cache[rows, :, pos.long()] = rotate(k)
        v_cache[rows, :, pos.long()] = v
    return rotate(q)[:, :, None, :]


def _rope_off_by_one(*args):
    return _rope(*args, shift=1)     # the angle of the count of tokens, this one included


def _rope_no_write(*args):
    return _rope(*args, write=False)  # attention then reads whatever the slot held


def _attention_interleaved(q, k, v, seq_lens):
    idx = torch.arange(q.shape[1], device=q.device) % k.shape[1]      # head h reads KV head h % H_kv
    valid = torch.arange(k.shape[2], device=q.device)[None, :] < seq_lens.long()[:, None]
    return torch.nn.functional.scaled_dot_product_attention(q, k[:, idx], v[:, idx], attn_mask=valid[:, None, None, :])


def _norm_eps_outside(x, residual, weight, eps):
    r = x if residual is None else x + residual
    f = r.float()
    return (f / (f.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight.float()).to(x.dtype), r


def _norm_residual_dropped(x, residual, weight, eps):
    y, _ = add_rmsnorm(x, residual, weight, eps)
    return y, x                                   # the stream goes on from the branch's output alone


def step_cache_copy(model, cache, tokens, pos):
    # the right logits, computed on a copy of the cache: the caller's cache never gets the new K and V
    return step(model, cache.clone(), tokens, pos)


step_cache_not_updated = _with(rope_cache=_rope_no_write)
step_rope_off_by_one = _with(rope_cache=_rope_off_by_one)
step_gqa_interleaved = _with(attention=_attention_interleaved)
step_eps_outside = _with(add_rmsnorm=_norm_eps_outside)
step_residual_dropped = _with(add_rmsnorm=_norm_residual_dropped)
