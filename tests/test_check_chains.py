"""check.cos_chain must pass a one-kernel cos chain and reject the blank stub and the ways students
really get it wrong, with a message that names the cause."""
import pytest
import torch
import triton
import triton.language as tl

from course_utils import check
from hinted import assert_names_hint

BLOCK = 256


# --- the right kernel ------------------------------------------------------------------------------
@triton.jit
def cos_chain_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    for _ in tl.static_range(K):
        v = tl.cos(v)
    tl.store(out_ptr + offs, v, mask=mask)


def _launch(kernel, x, k, out=None):
    out = torch.empty_like(x) if out is None else out
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), K=k, BLOCK=BLOCK)
    return out


def cos_chain(x, k=2):
    return _launch(cos_chain_kernel, x, k)


# --- wrong kernels -----------------------------------------------------------------------------------
@triton.jit
def blank_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    pass  # YOUR CODE HERE: the student stub as generated


@triton.jit
def once_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    # forgets the loop: one cosine whatever K is
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, tl.cos(v), mask=mask)


@triton.jit
def cos_of_x_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    # loops, but takes the cosine of x every time instead of the previous result
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    v = x
    for _ in tl.static_range(K):
        v = tl.cos(x)
    tl.store(out_ptr + offs, v, mask=mask)


@triton.jit
def off_by_one_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    # one cosine before the loop and K more inside it
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32))
    for _ in tl.static_range(K):
        v = tl.cos(v)
    tl.store(out_ptr + offs, v, mask=mask)


@triton.jit
def no_mask_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs).to(tl.float32)
    for _ in tl.static_range(K):
        v = tl.cos(v)
    tl.store(out_ptr + offs, v)


@triton.jit
def fp16_cos_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    # no conversion to fp32: tl.cos refuses an fp16 input
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask)
    for _ in tl.static_range(K):
        v = tl.cos(v)
    tl.store(out_ptr + offs, v, mask=mask)


@triton.jit
def through_memory_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    # one launch, but every step is stored to `out` and loaded back: the intermediate still goes to HBM
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    for _ in tl.static_range(K):
        tl.store(out_ptr + offs, tl.cos(v), mask=mask)
        v = tl.load(out_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, v, mask=mask)


@triton.jit
def store_in_loop_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    # right values, one launch, no extra distinct bytes: but every step is stored, K stores per element
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    for _ in tl.static_range(K):
        v = tl.cos(v)
        tl.store(out_ptr + offs, v, mask=mask)


k = 8   # what lesson 01's `for k in (1, 2, 3, 4, 8)` leaves in the notebook


@triton.jit
def range_of_global_k_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    # `k` for `K`: the interpreter reads the notebook's k (8 cosines); a GPU compile refuses the global
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    for _ in range(k):
        v = tl.cos(v)
    tl.store(out_ptr + offs, v, mask=mask)


def cos_chain_range_of_global_k(x, k=2):
    return _launch(range_of_global_k_kernel, x, k)


def cos_chain_store_in_loop(x, k=2):
    return _launch(store_in_loop_kernel, x, k)


def cos_chain_blank(x, k=2):
    return _launch(blank_kernel, x, k)


def cos_chain_stub(x, k=2):
    raise NotImplementedError("write the kernel")


def cos_chain_k_launches(x, k=2):
    # correct values, but one kernel per cosine: k launches, the intermediates round-trip through HBM
    out = x
    for _ in range(k):
        out = _launch(cos_chain_kernel, out, 1)
    return out


def cos_chain_once(x, k=2):
    return _launch(once_kernel, x, k)


def cos_chain_cos_of_x(x, k=2):
    return _launch(cos_of_x_kernel, x, k)


def cos_chain_off_by_one(x, k=2):
    return _launch(off_by_one_kernel, x, k)


def cos_chain_ignores_k(x, k=2):
    return _launch(cos_chain_kernel, x, 2)  # K hard-wired to the default


def cos_chain_no_mask(x, k=2):
    return _launch(no_mask_kernel, x, k)


def cos_chain_fp16_cos(x, k=2):
    return _launch(fp16_cos_kernel, x, k)


def cos_chain_through_memory(x, k=2):
    return _launch(through_memory_kernel, x, k)


def cos_chain_in_place(x, k=2):
    return _launch(cos_chain_kernel, x, k, out=x)


def cos_chain_torch(x, k=2):
    for _ in range(k):
        x = x.cos()
    return x


# --- tests ---------------------------------------------------------------------------------------------
@triton.jit
def no_block_stride_kernel(x_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) + tl.arange(0, BLOCK)  # forgets `* BLOCK`: the programs' blocks overlap
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    for _ in tl.static_range(K):
        v = tl.cos(v)
    tl.store(out_ptr + offs, v, mask=mask)


def cos_chain_no_block_stride(x, k=2):
    out = torch.empty_like(x)
    no_block_stride_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), K=k, BLOCK=1024)
    return out


def test_cos_chain_accepts_a_fused_kernel():
    r = check.cos_chain(cos_chain)
    assert "✓" in repr(r)
    assert r.traffic.launches == 1 and r.traffic.bytes == 2 * 4 * 4096
    assert any("k=3" in c for c in r.cases) and any("float16" in c for c in r.cases)


# Each wrong kernel runs through the checker once: the row gives the message and, where the failure points to a
# hint, its diagnosis and the hint that addresses it (None: not asserted).
@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    (cos_chain_stub, "still the stub", "stub", 1),
    (cos_chain_blank, r"^`cos_chain` \(n = 1000, k = 1, float32\): 4 programs ran but none stored anything: all 1000 "
                      r"elements were never written. Does the kernel end with tl.store", "no-store", 1),
    # offsets without `* BLOCK`: program i starts at element i, so the 4 programs of n = 4095 cover 0..1026
    (cos_chain_no_block_stride, r"^`cos_chain` \(n = 4095, k = 1, float32\): the programs overlap. Only elements "
                                r"0..1026 were written, which is what 4 programs of BLOCK 1024 cover when program i "
                                r"starts at offset i.*pid \* BLOCK", "overlap", 1),
    (cos_chain_k_launches, r"with k=2 .*made 2 launches where 1 should do: this is not fused", "launches", 1),
    (cos_chain_torch, r"with k=2 .*made 2 launches where 1 should do", None, None),
    (cos_chain_once, r"with k=2 the output is cos\(x\), a single cosine", "one-cosine", 2),
    (cos_chain_cos_of_x, r"with k=2 the output is cos\(x\), a single cosine.*previous step's result", None, None),
    (cos_chain_off_by_one, r"with k=1 the output is the cosine applied 2 times.*should run 1", "loop-count", 2),
    (cos_chain_ignores_k, r"with k=1 the output is the cosine applied 2 times.*is K=k passed", None, None),
    (cos_chain_no_mask, r"Out-of-bounds load.*is the tail masked", None, None),
    (cos_chain_fp16_cos, r"fp16 input with k=1: tl.cos works on fp32", "fp16-cos", 2),
    # range(k) for range(K): the interpreter reads the module's k = 8 (every element wrong, unless the check
    # compiles the kernel first, as it does); a GPU refuses the global
    (cos_chain_range_of_global_k, r"^`range_of_global_k_kernel` does not compile for a GPU.*`for _ in range\(k\):`, uses "
                                  r"`k`, which the kernel neither receives as a parameter nor assigns.*Did you mean `K`",
     "undefined-name", 2),
    (cos_chain_through_memory, r"with k=1 .*moved \d+ bytes; the budget is 32768.*intermediate goes to memory",
     "bytes", 1),
    (cos_chain_in_place, "changed its input x", "in-place", 1),
    (cos_chain_store_in_loop, r"with k=2 .*each element is written 2 times on average. Is a tl.store inside the loop",
     "repeat-store", 1),
    (lambda x, k: x, "the output equals the input: no cosine was applied", None, None),
    (lambda x, k: None, "returned None", None, None),
    (lambda x, k: cos_chain(x, k).double(), "keep the input's dtype", None, None),
    ("cos_chain", "takes your function", None, None),
])
def test_cos_chain_rejects(wrong, message, diagnosis, hint):
    """Also checks the failure's diagnosis and the hint it names, where the row gives them."""
    with pytest.raises(check.CheckFailed, match=message) as e:
        check.cos_chain(wrong)
    if diagnosis is not None:
        assert e.value.diagnosis == diagnosis
    if hint is not None:
        assert_names_hint(e.value, "cos_chain", hint)
