"""Kernels for tests/test_check_softmax.py: right and wrong answers to lesson 06's softmax(x) -> y."""
import torch
import triton
import triton.language as tl

# mistakes, picked by a constexpr so that one kernel holds every variant (tl.constexpr: a compiled
# kernel may read a global only if it is one)
RIGHT, NO_MAX, PAD_ZERO, MAX_IN_NUM_ONLY, UNMASKED, NOT_DIVIDED, PAD_ZERO_MAX_ONLY, ROW_BLOCK, AXIS_1 = \
    map(tl.constexpr, range(9))


@triton.jit
def _row_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, MISTAKE: tl.constexpr):
    # one program per row, the whole row in one block
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    offs = (row * BLOCK if MISTAKE == ROW_BLOCK else row * N) + cols
    if MISTAKE == PAD_ZERO or MISTAKE == PAD_ZERO_MAX_ONLY:
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    elif MISTAKE == UNMASKED:
        x = tl.load(x_ptr + offs).to(tl.float32)
    else:
        x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
    if MISTAKE == AXIS_1:              # torch's habit, dim=1 for a row: a 1-D block has only axis 0
        e = tl.exp(x - tl.max(x, axis=1))
        s = tl.sum(e, axis=0)
    elif MISTAKE == NO_MAX:
        e = tl.exp(x)
        s = tl.sum(e, axis=0)
    elif MISTAKE == MAX_IN_NUM_ONLY:
        e = tl.exp(x - tl.max(x, axis=0))
        s = tl.sum(tl.exp(x), axis=0)
    elif MISTAKE == PAD_ZERO_MAX_ONLY:
        e = tl.exp(x - tl.max(x, axis=0))
        s = tl.sum(tl.where(mask, e, 0.0), axis=0)
    else:
        e = tl.exp(x - tl.max(x, axis=0))
        s = tl.sum(e, axis=0)
    y = e if MISTAKE == NOT_DIVIDED else e / s
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _row(x, mistake=RIGHT, num_warps=4):
    y = torch.empty_like(x)
    _row_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]), MISTAKE=mistake.value,
                               num_warps=num_warps)
    return y


def softmax(x):
    """Right: the lesson's kernel, one row per program."""
    return _row(x)


def softmax_8_warps(x):
    """Right: the same kernel, launched with 8 warps."""
    return _row(x, num_warps=8)


@triton.jit
def _rows_kernel(x_ptr, y_ptr, M, N, ROWS: tl.constexpr, BLOCK: tl.constexpr, AXIS: tl.constexpr):
    # ROWS rows per program in a [ROWS, BLOCK] block; AXIS = 1 reduces along each row (right), 0 down columns
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < M) & (cols < N)
    x = tl.load(x_ptr + rows * N + cols, mask=mask, other=-float("inf")).to(tl.float32)
    if AXIS == 1:
        e = tl.exp(x - tl.max(x, axis=1)[:, None])
        y = e / tl.sum(e, axis=1)[:, None]
    else:
        e = tl.exp(x - tl.max(x, axis=0)[None, :])
        y = e / tl.sum(e, axis=0)[None, :]
    tl.store(y_ptr + rows * N + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax_4_rows(x):
    """Right, written differently: four rows per program, reduced along axis 1."""
    M, N = x.shape
    y = torch.empty_like(x)
    _rows_kernel[(triton.cdiv(M, 4),)](x, y, M, N, ROWS=4, BLOCK=triton.next_power_of_2(N), AXIS=1)
    return y


def sm_columns(x):
    """Wrong: four rows per program, reduced along axis 0 (down the columns of the block)."""
    M, N = x.shape
    y = torch.empty_like(x)
    _rows_kernel[(triton.cdiv(M, 4),)](x, y, M, N, ROWS=4, BLOCK=triton.next_power_of_2(N), AXIS=0)
    return y


@triton.jit
def _persistent_kernel(x_ptr, y_ptr, M, N, BLOCK: tl.constexpr):
    # a fixed grid of programs, each taking every num_programs-th row
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * N + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def softmax_persistent(x):
    """Right, written differently: 3 programs walk the rows."""
    y = torch.empty_like(x)
    _persistent_kernel[(min(3, x.shape[0]),)](x, y, x.shape[0], x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


@triton.jit
def _loop_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    # one program per row, walking it BLOCK columns at a time: a running max and a running sum rescaled
    # whenever the max grows, then a second walk that writes
    base = tl.program_id(0) * N
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(tl.where(m_new == -float("inf"), 0.0, m - m_new)) + \
            tl.exp(tl.where(m_new == -float("inf"), -float("inf"), x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp(tl.where(m == -float("inf"), -float("inf"), m - row_max)), axis=0)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + base + cols, (tl.exp(x - row_max) / row_sum).to(y_ptr.dtype.element_ty), mask=cols < N)


def softmax_loop(x):
    """Right, written differently: blocks of 256 along the row, two walks (x read twice, from the cache)."""
    y = torch.empty_like(x)
    _loop_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=256)
    return y


def softmax_stub(x):
    raise NotImplementedError("one program per row: load the row with other=-inf, subtract its max, exp, divide by the sum")


def sm_no_max(x):
    """Wrong on large rows: exp(x) / sum(exp(x)), which overflows past x = 88.7."""
    return _row(x, NO_MAX)


def sm_pad_zero(x):
    """Wrong on ragged rows: masked lanes load 0, so they take part in the max and add to the sum."""
    return _row(x, PAD_ZERO)


def sm_pad_zero_max_only(x):
    """Wrong on rows far below 0: masked lanes load 0 and win the max; the sum leaves them out."""
    return _row(x, PAD_ZERO_MAX_ONLY)


def sm_max_in_numerator_only(x):
    """Wrong: exp(x - max) / sum(exp(x))."""
    return _row(x, MAX_IN_NUM_ONLY)


def sm_row_block(x):
    """Wrong: row r placed at r * BLOCK, the block's power-of-two width, not at r * N."""
    return _row(x, ROW_BLOCK)


def sm_axis_1(x):
    """Wrong: tl.max(x, axis=1) on the 1-D block of one row."""
    return _row(x, AXIS_1)


def sm_not_divided(x):
    """Wrong: exp(x - max), never divided by the sum."""
    return _row(x, NOT_DIVIDED)


def sm_unmasked(x):
    """Wrong: the load has no mask, so lanes past the row read the next row (and past the last, nothing)."""
    return _row(x, UNMASKED)


@triton.jit
def _flat_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # lesson 04's flat grid: blocks of the flattened tensor, blind to where rows start
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def sm_flat_blocks(x):
    """Wrong: softmax over each block of 256 consecutive elements of the flattened x."""
    y = torch.empty_like(x)
    _flat_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


@triton.jit
def _stats_kernel(x_ptr, max_ptr, sum_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    tl.store(max_ptr + row, m)
    tl.store(sum_ptr + row, tl.sum(tl.exp(x - m), axis=0))


@triton.jit
def _normalise_kernel(x_ptr, max_ptr, sum_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    y = tl.exp(x - tl.load(max_ptr + row)) / tl.load(sum_ptr + row)
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=cols < N)


def sm_two_kernels(x):
    """Right numbers, over budget: row statistics in one kernel, normalisation in a second (x read twice)."""
    M, N = x.shape
    BLOCK = triton.next_power_of_2(N)
    mx = torch.empty(M, device=x.device, dtype=torch.float32)
    sm = torch.empty(M, device=x.device, dtype=torch.float32)
    y = torch.empty_like(x)
    _stats_kernel[(M,)](x, mx, sm, N, BLOCK=BLOCK)
    _normalise_kernel[(M,)](x, mx, sm, y, N, BLOCK=BLOCK)
    return y


@triton.jit
def _scratch_kernel(x_ptr, e_ptr, y_ptr, N, BLOCK: tl.constexpr):
    # stores exp(x - max) to an fp32 scratch tensor, then reads it back to divide
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(e_ptr + row * N + cols, e, mask=mask)
    s = tl.sum(e, axis=0)
    e2 = tl.load(e_ptr + row * N + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, (e2 / s).to(y_ptr.dtype.element_ty), mask=mask)


def sm_scratch(x):
    """Right numbers in one launch, over the byte budget: the exponentials go through an fp32 scratch tensor."""
    e = torch.empty(x.shape, device=x.device, dtype=torch.float32)
    y = torch.empty_like(x)
    _scratch_kernel[(x.shape[0],)](x, e, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


def sm_torch(x):
    """Right numbers, one launch, but PyTorch's kernel, not a Triton kernel."""
    return torch.softmax(x, dim=-1)


def sm_eager_chain(x):
    """Right numbers, seven launches: to fp32, max, subtract, exp, sum, divide, back to x's dtype."""
    xf = x.float()
    e = torch.exp(xf - xf.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


def sm_fp32_out(x):
    """Wrong dtype: always returns fp32."""
    return softmax(x.float()) if x.dtype != torch.float32 else softmax(x)


# --- as Triton's fused-softmax tutorial launches it: compiled ahead, the grid sized from the compiled kernel --
@triton.jit
def _ahead_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_rows, n_cols, BLOCK: tl.constexpr,
                  STAGES: tl.constexpr):
    # a persistent grid: each program walks the rows first, first + programs, ...
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * y_row_stride + cols, e / tl.sum(e, axis=0), mask=mask)


def softmax_compiled_ahead(x):
    """Right (GPU only): the kernel is compiled first (warmup), the number of programs that fit on the GPU at once
    is read from its registers and shared memory, and the compiled kernel is launched from its handle,
    compiled[grid](...), every argument by position: the launch that JITFunction.run never sees."""
    from triton.runtime import driver
    rows, cols = x.shape
    block, warps, stages = triton.next_power_of_2(cols), 8, 2
    y = torch.empty_like(x)
    compiled = _ahead_kernel.warmup(y, x, x.stride(0), y.stride(0), rows, cols, BLOCK=block, STAGES=stages,
                                    num_warps=warps, grid=(1,))
    compiled._init_handles()
    gpu = driver.active.utils.get_device_properties(x.device.index)
    per_sm = gpu["max_num_regs"] // max(1, compiled.n_regs * gpu["warpSize"] * warps)
    if compiled.metadata.shared:
        per_sm = min(per_sm, gpu["max_shared_mem"] // compiled.metadata.shared)
    programs = min(gpu["multiprocessor_count"] * max(1, per_sm), rows)
    compiled[(programs, 1, 1)](y, x, x.stride(0), y.stride(0), rows, cols, block, stages)
    return y
