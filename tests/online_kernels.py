"""Kernels for tests/test_check_online.py: right and wrong answers to online_softmax(x, block) -> y, the
softmax over the last dimension of a 2-D x for rows longer than one block. Each takes `block`, as the
lesson's signature does (the check passes blocks of its own); the default is the block it takes otherwise."""
import torch
import triton
import triton.language as tl


def warps_for(block):
    # as lessons 06 and 08 launch their kernels: about 16 fp32 values of a row per thread, 4 to 32 warps. At the
    # default 4 warps a block of 2**19 is 4,096 values a thread: on an H200 the first test of
    # test_check_online.py, which passes such blocks, had not finished after 200 s
    return min(32, max(4, block // 512))


# mistakes, picked by a constexpr so that one kernel holds every variant (tl.constexpr: a compiled
# kernel may read a global only if it is one)
RIGHT, NOT_RESCALED, INVERTED, NAN_CHUNK, PAD_ZERO, LAST_MAX, M_FROM_ZERO, SHORT_WALK = map(tl.constexpr, range(8))


@triton.jit
def _online_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, MISTAKE: tl.constexpr):
    # one program per row: walk 1 keeps the running max m and the running sum s (relative to m),
    # walk 2 writes exp(x - m) / s
    base = tl.program_id(0).to(tl.int64) * N
    if MISTAKE == M_FROM_ZERO:
        m = 0.0
    else:
        m = float("-inf")
    m_blk = float("-inf")
    s = 0.0
    if MISTAKE == SHORT_WALK:
        end = N - BLOCK             # one block short: the last block never joins the max and the sum
    else:
        end = N
    for start in range(0, end, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        if MISTAKE == PAD_ZERO:
            x = tl.load(x_ptr + base + cols, mask=cols < N, other=0.0).to(tl.float32)
        else:
            x = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        m_blk = tl.max(x, axis=0)
        m_new = tl.maximum(m, m_blk)
        if MISTAKE == NAN_CHUNK:
            m_safe = m_new
        else:
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        if MISTAKE == NOT_RESCALED:
            s = s + tl.sum(tl.exp(x - m_safe), axis=0)
        elif MISTAKE == INVERTED:
            s = s * tl.exp(m_safe - m) + tl.sum(tl.exp(x - m_safe), axis=0)
        else:
            s = s * tl.exp(m - m_safe) + tl.sum(tl.exp(x - m_safe), axis=0)
        m = m_new
    if MISTAKE == LAST_MAX:
        m = m_blk
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + base + cols, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=cols < N)


def _online(x, block=1024, mistake=RIGHT):
    y = torch.empty_like(x)
    M, N = x.shape
    BLOCK = min(block, triton.next_power_of_2(N))
    _online_kernel[(M,)](x, y, N, BLOCK=BLOCK, num_warps=warps_for(BLOCK), MISTAKE=mistake.value)
    return y


def online_softmax(x, block=1024):
    """Right: the lesson's kernel, blocks of 1024."""
    return _online(x, block)


def online_softmax_2048(x, block=2048):
    """Right, another default block."""
    return _online(x, block)


def online_softmax_4096(x, block=4096):
    """Right, another default block (a 5000-column row is two blocks, one of them ragged)."""
    return _online(x, block)


@triton.jit
def _lanes_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, GUARD: tl.constexpr = True):
    # right, written differently: every lane keeps its own running max and sum; they are merged once.
    # GUARD=False is the mistake: no guard for a lane that has seen only -inf (the padded lanes past the
    # end of a short row), where exp(m - m_new) = exp(-inf - -inf) = NaN, and the merge spreads that NaN
    base = tl.program_id(0).to(tl.int64) * N
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        if GUARD:
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            m_safe = m_new
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    m_row = tl.max(m, axis=0)
    if GUARD:
        s_row = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - m_row)), axis=0)
    else:
        s_row = tl.sum(s * tl.exp(m - m_row), axis=0)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + base + cols, (tl.exp(x - m_row) / s_row).to(y_ptr.dtype.element_ty), mask=cols < N)


def online_softmax_lanes(x, block=2048):
    """Right, written differently: per-lane running max and sum, blocks of 2048."""
    y = torch.empty_like(x)
    BLOCK = min(block, triton.next_power_of_2(x.shape[1]))
    _lanes_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=warps_for(BLOCK))
    return y


def lanes_unguarded(x, block=2048):
    """Wrong: per-lane running max and sum with no -inf guard; a lane that sees only padding is NaN."""
    y = torch.empty_like(x)
    BLOCK = min(block, triton.next_power_of_2(x.shape[1]))
    _lanes_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=warps_for(BLOCK),
                                 GUARD=False)
    return y


@triton.jit
def _three_pass_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    # right numbers, over budget: the max, then the sum, then the write, each a walk that reads x
    base = tl.program_id(0).to(tl.int64) * N
    m = float("-inf")
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    s = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        s += tl.sum(tl.exp(x - m), axis=0)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + base + cols, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=cols < N)


def three_pass(x, block=4096):
    """Right numbers, 3 reads + 1 write: over the byte budget."""
    y = torch.empty_like(x)
    BLOCK = min(block, triton.next_power_of_2(x.shape[1]))
    _three_pass_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=warps_for(BLOCK))
    return y


@triton.jit
def _no_max_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    # wrong on large values: sum exp(x) with no max subtracted, which overflows past x = 88
    base = tl.program_id(0).to(tl.int64) * N
    s = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        s += tl.sum(tl.exp(tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")).to(tl.float32)), axis=0)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + base + cols, (tl.exp(x) / s).to(y_ptr.dtype.element_ty), mask=cols < N)


def no_max(x, block=1024):
    """Wrong: the unsafe two-pass softmax, exp(x) / sum(exp(x)), which overflows on large values."""
    y = torch.empty_like(x)
    BLOCK = min(block, triton.next_power_of_2(x.shape[1]))
    _no_max_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=warps_for(BLOCK))
    return y


@triton.jit
def _one_block_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    # lesson 06's kernel: the whole row in one block
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * N + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=cols < N)


def one_block(x, block=8192):
    """Wrong for long rows: one block of next_power_of_2(N), whatever the block asked, which Triton refuses
    past 2**20 elements."""
    y = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(x.shape[1])
    _one_block_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=warps_for(BLOCK))
    return y


def one_block_capped(x, block=8192):
    """Wrong for long rows: one block capped at 4096, whatever the block asked, so the rest of a longer row is
    never touched."""
    y = torch.empty_like(x)
    BLOCK = min(4096, triton.next_power_of_2(x.shape[1]))
    _one_block_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=warps_for(BLOCK))
    return y


def not_rescaled(x, block=1024):
    """Wrong: s += sum(exp(x - m_new)) without first rescaling the old s by exp(m_old - m_new)."""
    return _online(x, block, NOT_RESCALED)


def not_rescaled_big_default(x, block=2**20):
    """Wrong as not_rescaled, with a default block that holds every row the interpreter checks in one block,
    where a sum never rescaled is right (a student's trial, lesson 08)."""
    return _online(x, block, NOT_RESCALED)


def inverted(x, block=1024):
    """Wrong: the rescale factor upside down, exp(m_new - m_old); with m starting at -inf, 0 * inf = NaN."""
    return _online(x, block, INVERTED)


def nan_chunk(x, block=1024):
    """Wrong on a row that starts with a block of -inf: exp(-inf - -inf) = NaN."""
    return _online(x, block, NAN_CHUNK)


def nan_chunk_big_default(x, block=2**20):
    """Wrong as nan_chunk, with a default block so large that no row starts with a whole block of -inf."""
    return _online(x, block, NAN_CHUNK)


def pad_zero(x, block=1024):
    """Wrong: the masked lanes load 0 instead of -inf, so each adds exp(0 - m) to the sum."""
    return _online(x, block, PAD_ZERO)


def last_max(x, block=1024):
    """Wrong: walk 2 subtracts the last block's max, not the row's."""
    return _online(x, block, LAST_MAX)


def short_walk(x, block=1024):
    """Wrong: walk 1 runs range(0, N - BLOCK, BLOCK), one block short, so the last block is in no max or sum."""
    return _online(x, block, SHORT_WALK)


@triton.jit
def _torch_max_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    # wrong: tl.max(m, block_max), the torch habit (torch.max(a, b) is element-wise); tl.max takes a block and an axis
    base = tl.program_id(0).to(tl.int64) * N
    m = float("-inf")
    s = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        m_new = tl.max(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + base + cols, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=cols < N)


def torch_max(x, block=1024):
    """Wrong: the running max taken with tl.max(m, block_max), which reads block_max as an axis."""
    y = torch.empty_like(x)
    BLOCK = min(block, triton.next_power_of_2(x.shape[1]))
    _torch_max_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=warps_for(BLOCK))
    return y


def m_from_zero(x, block=1024):
    """Wrong on very negative rows: the running max starts at 0, so every exp underflows to 0."""
    return _online(x, block, M_FROM_ZERO)


def online_softmax_stub(x, block=8192):
    raise NotImplementedError("walk 1: running max m and sum s; walk 2: write exp(x - m) / s")


def without_block(x):
    """Right numbers for a block of its own, but no `block` to take: the check cannot pass it blocks."""
    return _online(x)


def eager(x, block=8192):
    """Right numbers, not a Triton kernel of yours."""
    return torch.softmax(x, dim=-1)
