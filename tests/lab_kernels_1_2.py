"""Kernels for tests/test_grade_swiglu.py and tests/test_grade_rmsnorm.py: right answers to labs 1 and 2,
written two ways each, and the wrong answers students write (mistake codes are tl.constexpr, so every
variant compiles on a GPU)."""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

import course_utils as cu

# ------------------------------------------------------------------ lab 1: swiglu(gate, up) = silu(gate) * up
RIGHT, SWAPPED, SIGMOID_ONLY, EXP_RATIO, NO_MASK_FLOOR = map(tl.constexpr, range(5))


@triton.jit
def _swiglu_kernel(g_ptr, u_ptr, out_ptr, n, BLOCK: tl.constexpr, MISTAKE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask).to(tl.float32)
    if MISTAKE == SWAPPED:
        out = u * tl.sigmoid(u) * g
    elif MISTAKE == SIGMOID_ONLY:
        out = tl.sigmoid(g) * u
    elif MISTAKE == EXP_RATIO:
        e = tl.exp(g)
        out = g * (e / (1.0 + e)) * u          # inf / inf = NaN for a large gate
    else:
        out = g * tl.sigmoid(g) * u
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def _swiglu(gate, up, mistake=RIGHT, block=1024, grid=None):
    out = torch.empty_like(gate)
    n = gate.numel()
    _swiglu_kernel[(grid or triton.cdiv(n, block),)](gate, up, out, n, BLOCK=block, MISTAKE=mistake.value)
    return out


def swiglu(gate, up):
    """Right: the lab's solution, blocks of 1024."""
    return _swiglu(gate, up)


@triton.jit
def _swiglu_strided_kernel(g_ptr, u_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # a fixed number of programs, each striding over the tensor; sigmoid written out as 1 / (1 + e^-g)
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, (g / (1.0 + tl.exp(-g)) * u).to(out_ptr.dtype.element_ty), mask=mask)


def swiglu_strided(gate, up):
    """Right, written differently: a capped number of programs of 512 that stride over the tensor."""
    out = torch.empty_like(gate)
    n = gate.numel()
    _swiglu_strided_kernel[(min(cu.pick(gpu=8192, cpu=4), triton.cdiv(n, 512)),)](gate, up, out, n, BLOCK=512)
    return out


def swiglu_stub(gate, up):
    raise NotImplementedError("one program per BLOCK elements: load gate and up, store g·sigmoid(g)·u")


def swiglu_swapped(gate, up):
    """Wrong: silu(up) * gate."""
    return _swiglu(gate, up, SWAPPED)


def swiglu_sigmoid_only(gate, up):
    """Wrong: sigmoid(gate) * up, the g of silu forgotten."""
    return _swiglu(gate, up, SIGMOID_ONLY)


def swiglu_exp_ratio(gate, up):
    """Wrong for large gates: sigmoid as e^g / (1 + e^g)."""
    return _swiglu(gate, up, EXP_RATIO)


def swiglu_floor_grid(gate, up):
    """Wrong: n // BLOCK programs, so the tail past the last full block is never written."""
    return _swiglu(gate, up, grid=max(1, gate.numel() // 1024))


def swiglu_fp32_out(gate, up):
    """Wrong: the output allocated in fp32 whatever the input."""
    out = torch.empty(gate.shape, device=gate.device, dtype=torch.float32)
    _swiglu_kernel[(triton.cdiv(gate.numel(), 1024),)](gate, up, out, gate.numel(), BLOCK=1024,
                                                      MISTAKE=RIGHT.value)
    return out


@triton.jit
def _silu_kernel(g_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (g * tl.sigmoid(g)).to(out_ptr.dtype.element_ty), mask=mask)


def swiglu_two_launches(gate, up):
    """Right numbers, not fused: a silu kernel, then PyTorch's multiply."""
    s = torch.empty_like(gate)
    _silu_kernel[(triton.cdiv(gate.numel(), 1024),)](gate, s, gate.numel(), BLOCK=1024)
    return s * up


def swiglu_eager(gate, up):
    """Right numbers, PyTorch's: two launches."""
    return F.silu(gate) * up


def swiglu_forgets_return(gate, up):
    _swiglu(gate, up)


# ------------------------------------------------------------------ lab 2: add + RMSNorm, forward and backward
MAX_PROGRAMS = 4 * torch.cuda.get_device_properties(0).multi_processor_count if cu.DEVICE == "cuda" else 16
B_RIGHT, B_NO_DH, B_RSTD_CONST, B_SUM_NOT_MEAN, B_DW_OF_H, B_DW_FIRST = map(tl.constexpr, range(6))
F_RIGHT, F_EPS_OUTSIDE = map(tl.constexpr, range(2))


@triton.jit
def _fwd_kernel(x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, rstd_ptr, N, eps, BLOCK: tl.constexpr, MISTAKE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    offs = row * N + cols
    h = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(h_ptr + offs, h.to(h_ptr.dtype.element_ty), mask=mask)
    if MISTAKE == F_EPS_OUTSIDE:
        rstd = 1.0 / (tl.sqrt(tl.sum(h * h, axis=0) / N) + eps)
    else:
        rstd = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / N + eps)
    tl.store(rstd_ptr + row, rstd)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bwd_kernel(dy_ptr, dh_ptr, h_ptr, w_ptr, rstd_ptr, dx_ptr, part_ptr, M, N, ROWS, BLOCK: tl.constexpr,
                MISTAKE: tl.constexpr):
    p = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], tl.float32)
    for row in range(p * ROWS, tl.minimum(p * ROWS + ROWS, M)):
        offs = row * N + cols
        rstd = tl.load(rstd_ptr + row)
        h = tl.load(h_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        n = h * rstd
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        g = dy * w
        if MISTAKE == B_RSTD_CONST:
            dx = rstd * g
        elif MISTAKE == B_SUM_NOT_MEAN:
            dx = rstd * (g - n * tl.sum(g * n, axis=0))
        else:
            dx = rstd * (g - n * (tl.sum(g * n, axis=0) / N))
        if MISTAKE != B_NO_DH:
            dx += tl.load(dh_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        if MISTAKE == B_DW_OF_H:
            dw += dy * h
        else:
            dw += dy * n
    tl.store(part_ptr + p * N + cols, dw, mask=mask)


@triton.jit
def _sum_rows_kernel(part_ptr, out_ptr, P, N, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    acc = tl.zeros([BLOCK], tl.float32)
    for p in range(0, P):
        acc += tl.load(part_ptr + p * N + cols, mask=mask, other=0.0)
    tl.store(out_ptr + cols, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _forward(x, r, w, eps, mistake=F_RIGHT):
    M, N = x.shape
    y, h = torch.empty_like(x), torch.empty_like(x)
    rstd = torch.empty(M, device=x.device, dtype=torch.float32)
    _fwd_kernel[(M,)](x, r, w, y, h, rstd, N, eps, BLOCK=triton.next_power_of_2(N), MISTAKE=mistake.value)
    return y, h, rstd


def _backward(dy, dh, h, w, rstd, mistake=B_RIGHT, rows_min=8):
    M, N = h.shape
    dy, dh = dy.contiguous(), dh.contiguous()
    P = min(triton.cdiv(M, rows_min), MAX_PROGRAMS)
    rows = triton.cdiv(M, P)
    P = triton.cdiv(M, rows)
    dx = torch.empty_like(h)
    part = torch.empty((P, N), device=h.device, dtype=torch.float32)
    _bwd_kernel[(P,)](dy, dh, h, w, rstd, dx, part, M, N, rows, BLOCK=triton.next_power_of_2(N), MISTAKE=mistake.value)
    dw = torch.empty_like(w)
    _sum_rows_kernel[(triton.cdiv(N, 256),)](part, dw, 1 if mistake == B_DW_FIRST else P, N, BLOCK=256)
    return dx, dw


def _function(fwd_mistake=F_RIGHT, bwd_mistake=B_RIGHT, rows_min=8):
    class AddRMSNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, residual, weight, eps):
            y, h, rstd = _forward(x, residual, weight, eps, fwd_mistake)
            ctx.save_for_backward(h, weight, rstd)
            return y, h

        @staticmethod
        def backward(ctx, dy, dh):
            h, weight, rstd = ctx.saved_tensors
            dx, dw = _backward(dy, dh, h, weight, rstd, bwd_mistake, rows_min)
            return dx, dx, dw, None

    def add_rmsnorm(x, residual, weight, eps=1e-6):
        return AddRMSNorm.apply(x, residual, weight, eps)
    return add_rmsnorm


add_rmsnorm = _function()                                   # right: the lab's solution
rms_no_dh = _function(bwd_mistake=B_NO_DH)                  # dx misses the gradient that arrives through h
rms_rstd_const = _function(bwd_mistake=B_RSTD_CONST)        # dx = rstd · dy · w: rstd treated as a constant
rms_sum_not_mean = _function(bwd_mistake=B_SUM_NOT_MEAN)    # Σ(g·n) where mean(g·n) belongs
rms_dw_of_h = _function(bwd_mistake=B_DW_OF_H)              # dw = Σ dy · h, rstd forgotten
rms_dw_first = _function(bwd_mistake=B_DW_FIRST)            # only the first program's partial dw is kept
rms_eps_outside = _function(fwd_mistake=F_EPS_OUTSIDE)      # forward: 1 / (sqrt(ms) + eps)
rms_partial_per_row = _function(rows_min=1)                 # one partial dw row per input row: over budget


# Right, written differently: 32 rows or more per backward program (fewer, longer programs and fewer
# partial rows of dw)
add_rmsnorm_long_programs = _function(rows_min=32)


def add_rmsnorm_eager(x, residual, weight, eps=1e-6):
    """Right numbers and gradients, PyTorch's: many launches forward and backward."""
    h = x + residual
    hf = h.float()
    return (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype), h


def add_rmsnorm_stub(x, residual, weight, eps=1e-6):
    raise NotImplementedError("AddRMSNorm.apply(x, residual, weight, eps)")


class _NoBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, weight, eps):
        y, h, _ = _forward(x, residual, weight, eps)
        return y, h

    @staticmethod
    def backward(ctx, dy, dh):
        raise NotImplementedError("dx = rstd · (dy·w − n · mean(dy·w·n)) + dh; dw = Σ dy · n")


def add_rmsnorm_backward_stub(x, residual, weight, eps=1e-6):
    """The forward written, the backward still the stub."""
    return _NoBackward.apply(x, residual, weight, eps)


def add_rmsnorm_detached(x, residual, weight, eps=1e-6):
    """Wrong: the kernel called directly, outside an autograd.Function: no gradients at all."""
    y, h, _ = _forward(x, residual, weight, eps)
    return y, h
