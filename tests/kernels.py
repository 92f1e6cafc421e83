"""Right and realistically wrong kernels for the checker and trips tests: the mistakes students make."""
import torch
import triton
import triton.language as tl

BLOCK = 128


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def add_kernel_no_mask(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


@triton.jit
def add_kernel_off_by_one(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs <= n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def add_kernel_blank(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass  # the student stub as generated


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out


def vector_add_stub(x, y):
    raise NotImplementedError("launch the kernel")


def vector_add_blank(x, y):
    out = torch.empty_like(x)
    add_kernel_blank[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out


def vector_add_no_mask(x, y):
    out = torch.empty_like(x)
    add_kernel_no_mask[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out


def vector_add_floor_grid(x, y):
    out = torch.empty_like(x)
    add_kernel[(max(1, x.numel() // BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out


def vector_add_off_by_one(x, y):
    out = torch.empty_like(x)
    add_kernel_off_by_one[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out


def vector_add_torch(x, y):
    return x + y  # correct values, but is it a kernel of yours? (1 launch, fine for the budget)


def vector_add_two_passes(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, torch.zeros_like(y), out, x.numel(), BLOCK=BLOCK)
    add_kernel[(triton.cdiv(x.numel(), BLOCK),)](out, y, out, x.numel(), BLOCK=BLOCK)
    return out


@triton.jit
def add_kernel_no_stride(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) + tl.arange(0, BLOCK)  # forgot * BLOCK: the programs overlap
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def add_kernel_x_twice(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask), mask=mask)


def vector_add_no_stride(x, y):
    out = torch.empty_like(x)
    add_kernel_no_stride[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out


def vector_add_zero_grid(x, y):
    out = torch.empty_like(x)  # BLOCK 1024 > n = 1000: n // BLOCK launches nothing
    add_kernel[(x.numel() // 1024,)](x, y, out, x.numel(), BLOCK=1024)
    return out


def vector_add_grid_per_element(x, y):
    out = torch.empty_like(x)
    add_kernel[(x.numel(),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out


def vector_add_x_twice(x, y):
    out = torch.empty_like(x)
    add_kernel_x_twice[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out


def vector_add_big_block(x, y):
    out = torch.empty_like(x)  # one program covers everything below 4096: still right
    add_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, out, x.numel(), BLOCK=4096)
    return out


# --- scaled add: out = alpha * x + y ------------------------------------------------------------------
@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr, MISTAKE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    if MISTAKE == 1:
        out = x + y
    elif MISTAKE == 2:
        out = x + alpha * y
    elif MISTAKE == 3:
        out = alpha * (x + y)
    else:
        out = alpha * x + y
    tl.store(out_ptr + offs, out, mask=mask)


@triton.jit
def scaled_add_kernel_no_mask(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


def _scaled_add(x, y, alpha, mistake):
    out = torch.empty_like(x)
    scaled_add_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, alpha, x.numel(), BLOCK=BLOCK, MISTAKE=mistake)
    return out


def scaled_add(x, y, alpha):
    return _scaled_add(x, y, alpha, 0)


def scaled_add_fp32_math(x, y, alpha):
    # the same kernel, with the arithmetic in float32 and one rounding at the store
    out = torch.empty_like(x)
    scaled_add_kernel[(triton.cdiv(x.numel(), BLOCK),)](x.float(), y.float(), out, alpha, x.numel(),
                                                        BLOCK=BLOCK, MISTAKE=0)
    return out


def scaled_add_no_alpha(x, y, alpha):
    return _scaled_add(x, y, alpha, 1)


def scaled_add_alpha_on_y(x, y, alpha):
    return _scaled_add(x, y, alpha, 2)


def scaled_add_alpha_on_sum(x, y, alpha):
    return _scaled_add(x, y, alpha, 3)


def scaled_add_no_mask(x, y, alpha):
    out = torch.empty_like(x)
    scaled_add_kernel_no_mask[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, alpha, x.numel(), BLOCK=BLOCK)
    return out


def scaled_add_floor_grid(x, y, alpha):
    out = torch.empty_like(x)
    scaled_add_kernel[(max(1, x.numel() // BLOCK),)](x, y, out, alpha, x.numel(), BLOCK=BLOCK, MISTAKE=0)
    return out


def scaled_add_eager(x, y, alpha):
    return alpha * x + y  # two kernels: alpha * x goes to memory and comes back


def scaled_add_torch_fused(x, y, alpha):
    return torch.add(y, x, alpha=alpha)  # one kernel, right numbers, but PyTorch's


def scaled_add_stub(x, y, alpha):
    raise NotImplementedError("launch the kernel")


@triton.jit
def bias_gelu_kernel(x_ptr, b_ptr, out_ptr, N, stride_row, BLOCK_N: tl.constexpr,
                     BIAS_BY_ROW: tl.constexpr, APPLY_GELU: tl.constexpr, ADD_BIAS: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask).to(tl.float32)
    if ADD_BIAS:
        if BIAS_BY_ROW:
            x += tl.load(b_ptr + row + cols * 0, mask=mask).to(tl.float32)
        else:
            x += tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    if APPLY_GELU:
        x = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(out_ptr + row * stride_row + cols, x.to(out_ptr.dtype.element_ty), mask=mask)


def _bias_gelu(x, b, **flags):
    out = torch.empty_like(x)
    m, n = x.shape
    bias_gelu_kernel[(m, triton.cdiv(n, 128))](x, b, out, n, x.stride(0), BLOCK_N=128, **flags)
    return out


def bias_gelu(x, b):
    return _bias_gelu(x, b, BIAS_BY_ROW=False, APPLY_GELU=True, ADD_BIAS=True)


def bias_gelu_no_bias(x, b):
    return _bias_gelu(x, b, BIAS_BY_ROW=False, APPLY_GELU=True, ADD_BIAS=False)


def bias_gelu_bias_by_row(x, b):
    return _bias_gelu(x, b, BIAS_BY_ROW=True, APPLY_GELU=True, ADD_BIAS=True)


def bias_gelu_unfused(x, b):
    # two kernels: bias add, then GELU, with x + b written to memory in between
    tmp = _bias_gelu(x, b, BIAS_BY_ROW=False, APPLY_GELU=False, ADD_BIAS=True)
    return _bias_gelu(tmp, b, BIAS_BY_ROW=False, APPLY_GELU=True, ADD_BIAS=False)


def bias_gelu_stub(x, b):
    raise NotImplementedError("write the fused kernel")
