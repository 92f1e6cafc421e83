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


@triton.jit
def add_kernel_block_zero(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)  # forgot pid * BLOCK: every program works on block 0
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add_block_zero(x, y):
    out = torch.empty_like(x)  # lesson 03's BLOCK: right while n <= 1024, so n = 1025 is the first to fail
    add_kernel_block_zero[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


def vector_add_out_first(x, y):
    out = torch.empty_like(x)  # the output passed first, where the kernel declares x_ptr: it stores into y
    add_kernel[(triton.cdiv(x.numel(), BLOCK),)](out, x, y, x.numel(), BLOCK=BLOCK)
    return out


def vector_add_out_second(x, y):
    out = torch.empty_like(x)  # the output in y_ptr's place: the kernel adds the poison to x and stores into y
    add_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, y, x.numel(), BLOCK=BLOCK)
    return out


# A Python `if` for the mask: the interpreter runs it as Python (a block is "true" there), so every lane
# loads and stores, and it reads past the end; a GPU compile refuses the `if` itself.
@triton.jit
def add_kernel_if_mask(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if offs < n:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


def vector_add_if_mask(x, y):
    out = torch.empty_like(x)
    add_kernel_if_mask[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
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


@triton.jit
def scaled_add_kernel_alpha_constexpr(x_ptr, y_ptr, out_ptr, alpha: tl.constexpr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def scaled_add_alpha_constexpr(x, y, alpha):
    out = torch.empty_like(x)  # right numbers; but every new alpha compiles the kernel again
    scaled_add_kernel_alpha_constexpr[(triton.cdiv(x.numel(), 1024),)](x, y, out, alpha, x.numel(), BLOCK=1024)
    return out


def scaled_add_n_alpha_swapped(x, y, alpha):
    out = torch.empty_like(x)
    n = x.numel()  # n and alpha in the wrong order: the kernel masks against alpha and scales by n
    scaled_add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, alpha, BLOCK=1024, MISTAKE=0)
    return out


@triton.jit
def scaled_add_kernel_loads_alpha(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(alpha)  # alpha is a number, not a pointer to one
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def scaled_add_loads_alpha(x, y, alpha):
    out = torch.empty_like(x)
    scaled_add_kernel_loads_alpha[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, alpha, x.numel(), BLOCK=BLOCK)
    return out


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


# --- kernels that call Triton's standard library (jit functions themselves) and helpers of their own ----
# On a GPU these are JITFunctions the compiler inlines; the replay behind trips.count must call them.
@triton.jit
def _row_sum_kernel(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def _per_row(kernel, x, out):
    """Launch a one-row-per-program kernel whose block holds a whole row."""
    kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def row_sum(x):
    return _per_row(_row_sum_kernel, x, torch.empty(x.shape[0], device=x.device, dtype=x.dtype))


@triton.jit
def _row_sum_looped_kernel(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    # rows wider than one block: tl.cdiv (a jit function too) sets the trip count
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, tl.cdiv(N, BLOCK)):
        cols = i * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def row_sum_looped(x, block=32):
    out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
    _row_sum_looped_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=block)
    return out


@triton.jit
def _row_softmax_kernel(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(z), 0.0)
    tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


def row_softmax(x):
    return _per_row(_row_softmax_kernel, x, torch.empty_like(x))


@triton.jit
def _row_argmax_kernel(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=-float("inf"))
    tl.store(out_ptr + row, tl.argmax(x, axis=0))


def row_argmax(x):
    return _per_row(_row_argmax_kernel, x, torch.empty(x.shape[0], device=x.device, dtype=torch.int32))


@triton.jit
def _row_cumsum_kernel(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride + cols, tl.cumsum(x, axis=0), mask=mask)


def row_cumsum(x):
    return _per_row(_row_cumsum_kernel, x, torch.empty_like(x))


@triton.jit
def _silu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x * tl.sigmoid(x)).to(out_ptr.dtype.element_ty), mask=mask)


def silu(x):
    out = torch.empty_like(x)
    _silu_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
    return out


@triton.jit
def _gelu_erf(v):
    return 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))


@triton.jit
def _gelu_tanh_by_sigmoid(v):
    # 0.5·v·(1 + tanh(u)) = v·sigmoid(2u): the tanh approximation written with tl.sigmoid
    return v * tl.sigmoid(1.5957691216057308 * (v + 0.044715 * v * v * v))


@triton.jit
def _bias_gelu_helper_kernel(x_ptr, b_ptr, out_ptr, N, stride_row, BLOCK_N: tl.constexpr, TANH: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    v = tl.load(x_ptr + row * stride_row + cols, mask=mask).to(tl.float32) + \
        tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    y = _gelu_tanh_by_sigmoid(v) if TANH else _gelu_erf(v)
    tl.store(out_ptr + row * stride_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _bias_gelu_helper(x, b, tanh):
    out = torch.empty_like(x)
    m, n = x.shape
    _bias_gelu_helper_kernel[(m, triton.cdiv(n, 128))](x, b, out, n, x.stride(0), BLOCK_N=128, TANH=tanh)
    return out


def bias_gelu_with_helper(x, b):
    """Right: the exact GELU in a @triton.jit helper of the student's own."""
    return _bias_gelu_helper(x, b, tanh=False)


def bias_gelu_tanh_sigmoid(x, b):
    """Wrong on purpose: the tanh approximation, through tl.sigmoid."""
    return _bias_gelu_helper(x, b, tanh=True)


@triton.jit
def _small_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # one program, one tile: enough to exercise tl.dot and tl.where in a replay
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    c = tl.dot(a, b)
    c = tl.where(c > 0, c, 0.0)              # relu, as an epilogue
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))


def small_matmul_relu(a, b):
    (m, k), n = a.shape, b.shape[1]
    c = torch.empty(m, n, device=a.device, dtype=torch.float32)
    _small_matmul_kernel[(1,)](a, b, c, m, n, k, BM=32, BN=32, BK=32)
    return c


@triton.jit
def _row_sum_no_mask_kernel(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * stride + tl.arange(0, BLOCK))     # no mask: reads past the last row
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def row_sum_no_mask(x):
    return _per_row(_row_sum_no_mask_kernel, x, torch.empty(x.shape[0], device=x.device, dtype=x.dtype))


def _references():
    """name -> (kernel wrapper, reference, input maker): the standard-library cases shared by the tests."""
    import torch.nn.functional as F
    rows = lambda dev: (torch.randn(6, 100, device=dev),)  # noqa: E731  (100: not a power of two)
    return {
        "tl.sum": (row_sum, lambda x: x.sum(1), rows),
        "tl.cdiv + tl.sum, looped": (row_sum_looped, lambda x: x.sum(1), rows),
        "tl.max + tl.sum + tl.where": (row_softmax, lambda x: torch.softmax(x, 1), rows),
        "tl.argmax": (row_argmax, lambda x: x.argmax(1).to(torch.int32), rows),
        "tl.cumsum": (row_cumsum, lambda x: x.cumsum(1), rows),
        "tl.sigmoid": (silu, F.silu, lambda dev: (torch.randn(1000, device=dev),)),
        "own @triton.jit helper": (bias_gelu_with_helper, lambda x, b: F.gelu(x + b),
                                   lambda dev: (torch.randn(5, 300, device=dev), torch.randn(300, device=dev))),
        "tl.dot + tl.where": (small_matmul_relu, lambda a, b: torch.relu(a @ b),
                              lambda dev: (torch.randn(20, 24, device=dev), torch.randn(24, 30, device=dev))),
    }


STANDARD_LIBRARY = _references()


# --- bias_gelu, lesson 04: right answers written differently, and the mistakes of the flattened grid -----
# The lesson's kernel walks x as one flat vector: element o is in column o % N. These variants share one
# kernel; MISTAKE picks the error (a string constexpr, resolved when the kernel compiles).
@triton.jit
def _bg_flat_kernel(x_ptr, b_ptr, out_ptr, n, N, BLOCK: tl.constexpr, MISTAKE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if MISTAKE == "bias by row":
        cols = offs // N                         # the row of the element, not its column
    elif MISTAKE == "bias not wrapped":
        cols = offs                              # b has N elements, not n
    else:
        cols = offs % N
    x = tl.load(x_ptr + offs, mask=mask)
    bias = tl.load(b_ptr + cols, mask=mask)
    if MISTAKE != "no upcast":
        x = x.to(tl.float32)
        bias = bias.to(tl.float32)
    if MISTAKE == "bias after gelu":
        y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476)) + bias
    elif MISTAKE == "tanh":
        v = x + bias
        u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
        y = 0.5 * v * (1.0 + (1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)))   # tanh(u), written with exp
    elif MISTAKE == "erf of v":
        v = x + bias
        y = 0.5 * v * (1.0 + tl.erf(v))          # forgot the 1/sqrt(2)
    else:
        v = x + bias
        y = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def _bg_flat(x, b, block=1024, mistake=""):
    out = torch.empty_like(x)
    n = x.numel()
    _bg_flat_kernel[(triton.cdiv(n, block),)](x, b, out, n, x.shape[1], BLOCK=block, MISTAKE=mistake)
    return out


def bg_flat(x, b):
    """Right: one program per 1024 elements of the flattened x, bias at offs % N (lesson 04's kernel)."""
    return _bg_flat(x, b)


def bg_flat_block_256(x, b):
    """Right: the same with BLOCK = 256, four times the programs."""
    return _bg_flat(x, b, block=256)


@triton.jit
def _bg_row_loop_kernel(x_ptr, b_ptr, out_ptr, N, stride_row, BLOCK_N: tl.constexpr):
    # one program per row, walking along it BLOCK_N columns at a time
    row = tl.program_id(0)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        v = tl.load(x_ptr + row * stride_row + cols, mask=mask).to(tl.float32) + \
            tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        y = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
        tl.store(out_ptr + row * stride_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def bg_row_loop(x, b):
    """Right: a grid of one program per row, each looping over its columns in blocks of 64."""
    out = torch.empty_like(x)
    _bg_row_loop_kernel[(x.shape[0],)](x, b, out, x.shape[1], x.stride(0), BLOCK_N=64)
    return out


def bg_flat_bias_by_row(x, b):
    """Wrong: offs // N is the row of an element; its bias is b[offs % N]."""
    return _bg_flat(x, b, mistake="bias by row")


def bg_flat_bias_not_wrapped(x, b):
    """Wrong: b_ptr + offs walks past the end of b, which has one value per column."""
    return _bg_flat(x, b, mistake="bias not wrapped")


def bg_bias_after_gelu(x, b):
    """Wrong: gelu(x) + b, the bias added after the activation."""
    return _bg_flat(x, b, mistake="bias after gelu")


def bg_tanh(x, b):
    """Wrong: the tanh approximation of GELU, tanh written out with tl.exp."""
    return _bg_flat(x, b, mistake="tanh")


def bg_erf_of_v(x, b):
    """Wrong: erf(v) where GELU needs erf(v / sqrt(2))."""
    return _bg_flat(x, b, mistake="erf of v")


def bg_no_upcast(x, b):
    """Wrong on fp16: tl.erf is given fp16 values (no .to(tl.float32) after the loads)."""
    return _bg_flat(x, b, mistake="no upcast")


def bg_casts_in_launcher(x, b):
    """Right numbers, wrong trips on fp16: the launcher converts to fp32 and back with PyTorch."""
    return _bg_flat(x.float(), b.float()).to(x.dtype)


# --- bias_gelu: what the interpreter runs and a GPU compile refuses ------------------------------------------
SQRT1_2 = 0.7071067811865476   # a constant defined in the notebook: a plain float, which a compiled kernel cannot read


@triton.jit
def _bg_plain_global_kernel(x_ptr, b_ptr, out_ptr, n, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(b_ptr + offs % N, mask=mask).to(tl.float32)
    y = 0.5 * v * (1.0 + tl.erf(v * SQRT1_2))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def bg_plain_global(x, b):
    """Right numbers on the interpreter, refused by a GPU: the kernel reads SQRT1_2, a plain global."""
    out = torch.empty_like(x)
    _bg_plain_global_kernel[(triton.cdiv(x.numel(), 1024),)](x, b, out, x.numel(), x.shape[1], BLOCK=1024)
    return out


@triton.jit
def _bg_if_large_kernel(x_ptr, b_ptr, out_ptr, n, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(b_ptr + offs % N, mask=mask).to(tl.float32)
    if v > 10.0:                 # "GELU is v up there": a Python if on a block
        y = v
    else:
        y = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def bg_if_large(x, b):
    """Wrong on a GPU (it does not compile); on the interpreter the `if` is taken for every block: x + b."""
    out = torch.empty_like(x)
    _bg_if_large_kernel[(triton.cdiv(x.numel(), 1024),)](x, b, out, x.numel(), x.shape[1], BLOCK=1024)
    return out


@triton.jit
def _bg_scratch_kernel(x_ptr, b_ptr, tmp_ptr, out_ptr, n, N, BLOCK: tl.constexpr):
    # one launch, but x + b is stored to a scratch tensor and loaded back, as two eager ops would
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(b_ptr + offs % N, mask=mask).to(tl.float32)
    tl.store(tmp_ptr + offs, v, mask=mask)
    tl.debug_barrier()   # on a GPU another thread of the program may load what this one stored
    v = tl.load(tmp_ptr + offs, mask=mask)
    y = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def bg_scratch(x, b):
    """Right numbers in one launch, but the intermediate x + b goes to memory and back."""
    out = torch.empty_like(x)
    tmp = torch.empty(x.shape, device=x.device, dtype=torch.float32)
    n = x.numel()
    _bg_scratch_kernel[(triton.cdiv(n, 1024),)](x, b, tmp, out, n, x.shape[1], BLOCK=1024)
    return out
