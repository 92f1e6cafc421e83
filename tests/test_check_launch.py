"""check.tiny_chain must pass a one-kernel chain and reject the stubs and the realistic wrong kernels
of lesson 02, with a message that names the cause."""
import pytest
import torch
import triton
import triton.language as tl

from course_utils import check
from course_utils.check.launch import N_OPS, SCALE, SHIFT
from hinted import assert_names_hint

BLOCK = 256
STEPS = N_OPS // 2


@triton.jit
def chain_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr, SHIFT: tl.constexpr, STEPS: tl.constexpr,
                 ADD_FIRST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    for _ in tl.static_range(STEPS):
        if ADD_FIRST:
            x = (x + SHIFT) * SCALE
        else:
            x = x * SCALE + SHIFT
    tl.store(out_ptr + offs, x, mask=mask)


@triton.jit
def two_loops_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr, SHIFT: tl.constexpr, STEPS: tl.constexpr,
                     BLOCK: tl.constexpr):
    # every op present, in the wrong order: all multiplies, then all adds
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    for _ in tl.static_range(STEPS):
        x = x * SCALE
    for _ in tl.static_range(STEPS):
        x = x + SHIFT
    tl.store(out_ptr + offs, x, mask=mask)


@triton.jit
def store_every_step_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr, SHIFT: tl.constexpr, STEPS: tl.constexpr,
                            BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    for _ in tl.static_range(STEPS):
        x = x * SCALE + SHIFT
        tl.store(out_ptr + offs, x, mask=mask)


@triton.jit
def stores_into_x_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr, SHIFT: tl.constexpr, STEPS: tl.constexpr,
                         BLOCK: tl.constexpr):
    # the launch is in order; the store goes through the wrong pointer
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    for _ in tl.static_range(STEPS):
        x = x * SCALE + SHIFT
    tl.store(x_ptr + offs, x, mask=mask)


def _other(kernel, x):
    out = torch.empty_like(x)
    kernel[_grid(x)](x, out, x.numel(), SCALE=SCALE, SHIFT=SHIFT, STEPS=STEPS, BLOCK=BLOCK)
    return out


@triton.jit
def chain_kernel_no_mask(x_ptr, out_ptr, n, SCALE: tl.constexpr, SHIFT: tl.constexpr, STEPS: tl.constexpr,
                         BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for _ in tl.static_range(STEPS):
        x = x * SCALE + SHIFT
    tl.store(out_ptr + offs, x)


@triton.jit
def chain_kernel_blank(x_ptr, out_ptr, n, SCALE: tl.constexpr, SHIFT: tl.constexpr, STEPS: tl.constexpr,
                       BLOCK: tl.constexpr):
    pass  # the student stub as generated


@triton.jit
def one_op_kernel(x_ptr, out_ptr, n, VALUE: tl.constexpr, MULTIPLY: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * VALUE if MULTIPLY else x + VALUE, mask=mask)


def _grid(x):
    return (triton.cdiv(x.numel(), BLOCK),)


def tiny_chain(x, steps=STEPS, add_first=False):
    out = torch.empty_like(x)
    chain_kernel[_grid(x)](x, out, x.numel(), SCALE=SCALE, SHIFT=SHIFT, STEPS=steps, ADD_FIRST=add_first,
                           BLOCK=BLOCK)
    return out


def tiny_chain_stub(x):
    raise NotImplementedError("launch one kernel for the whole chain")


def tiny_chain_blank(x):
    out = torch.empty_like(x)
    chain_kernel_blank[_grid(x)](x, out, x.numel(), SCALE=SCALE, SHIFT=SHIFT, STEPS=STEPS, BLOCK=BLOCK)
    return out


def tiny_chain_no_mask(x):
    out = torch.empty_like(x)
    chain_kernel_no_mask[_grid(x)](x, out, x.numel(), SCALE=SCALE, SHIFT=SHIFT, STEPS=STEPS, BLOCK=BLOCK)
    return out


def tiny_chain_one_launch_per_op(x):
    # right values, but each op is its own kernel: 100 launches, every intermediate through memory
    for _ in range(STEPS):
        y = torch.empty_like(x)
        one_op_kernel[_grid(x)](x, y, x.numel(), VALUE=SCALE, MULTIPLY=True, BLOCK=BLOCK)
        x = torch.empty_like(y)
        one_op_kernel[_grid(y)](y, x, y.numel(), VALUE=SHIFT, MULTIPLY=False, BLOCK=BLOCK)
    return x


def tiny_chain_in_place(x):
    chain_kernel[_grid(x)](x, x, x.numel(), SCALE=SCALE, SHIFT=SHIFT, STEPS=STEPS, ADD_FIRST=False, BLOCK=BLOCK)
    return x


def eager_chain(x):
    for _ in range(STEPS):
        x = x * SCALE
        x = x + SHIFT
    return x


def tiny_chain_out_first(x):
    out = torch.empty_like(x)  # (out, x) where the kernel declares (x_ptr, out_ptr): it stores into x
    chain_kernel[_grid(x)](out, x, x.numel(), SCALE=SCALE, SHIFT=SHIFT, STEPS=STEPS, ADD_FIRST=False, BLOCK=BLOCK)
    return out


def test_accepts_a_one_kernel_chain():
    r = check.tiny_chain(tiny_chain)
    assert "✓" in repr(r) and r.traffic.launches == 1 and r.traffic.bytes == 8 * 4096


# Each wrong kernel runs through the checker once: the row holds its message and, where it has one, the
# diagnosis and the hint the failure names (None: not asserted; a None message matches any).
@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    (tiny_chain_stub, "still the stub", "stub", 1),
    (tiny_chain_blank, r"^`tiny_chain` \(n = 16\): 1 program ran but none stored anything: all 16 elements were "
                       r"never written. Does the kernel end with tl.store", "no-store", 1),
    (tiny_chain_out_first, r"^`tiny_chain` \(n = 16\): the kernel stored into x, an input, and never into the output. "
                           r"The kernel declares .*`x_ptr` received the output and `out_ptr` received x: the launch "
                           r"passes its arguments in another order", "argument-order", 1),
    (tiny_chain_no_mask, "Out-of-bounds.*tail masked", "out-of-bounds", 1),
    (tiny_chain_one_launch_per_op, "made 100 launches where 1 should do: this is not fused", "launches", 1),
    (eager_chain, "made 100 launches where 1 should do: this is not fused", None, None),
    (lambda x: tiny_chain(x, steps=STEPS - 1), "what 49 multiply-add steps give .98 ops.*Check how many times the loop runs",
     "step-count", 2),
    (lambda x: tiny_chain(x, steps=STEPS // 2), "what 25 multiply-add steps give", None, None),
    (lambda x: tiny_chain(x, steps=N_OPS), "you apply the multiply-add 100 times. The chain is 100 ops",
     "step-count", 2),
    (lambda x: tiny_chain(x, add_first=True), "add SHIFT before multiplying", "order", 2),
    (lambda x: tiny_chain(x, steps=0), "output equals the input", "no-steps", 2),
    (lambda x: _other(two_loops_kernel, x), "all 50 multiplies come first and all 50 adds after them", "order", 2),
    (lambda x: _other(stores_into_x_kernel, x), r"the kernel stored into x, an input, and never into the output. "
     r"The launch hands each tensor to the parameter of its name \(`x_ptr` received x, `out_ptr` received the "
     r"output\), so its order is not the cause.*tl.store write to `x_ptr \+ offsets` where it means "
     r"`out_ptr \+ offsets`", "store-pointer", 1),
    (lambda x: _other(store_every_step_kernel, x), None, "repeat-store", 1),   # its message: test_check_chains
    (tiny_chain_in_place, "changed its input x in place", "in-place", 1),
    (lambda x: None, "returned None", None, None),
    ("tiny_chain", "takes your function", None, None),
])
def test_rejects(wrong, message, diagnosis, hint):
    # also checks that each failure names the hint that addresses its diagnosis
    with pytest.raises(check.CheckFailed, match=message) as e:
        check.tiny_chain(wrong)
    if diagnosis is not None:
        assert e.value.diagnosis == diagnosis
        assert_names_hint(e.value, "tiny_chain", hint)
