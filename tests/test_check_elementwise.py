"""Each checker must pass the right kernel and reject the blank stub and realistic wrong kernels,
with a message that names the cause."""
import pytest
import torch

from course_utils import INTERPRET, check
import kernels as k
from hinted import assert_names_hint


def assert_rejects(checker, wrong, message, diagnosis, hint):
    """One run of the checker on a wrong kernel serves every assertion about it: the message, and where the row
    gives them, the diagnosis and the hint that addresses it."""
    with pytest.raises(check.CheckFailed, match=message) as e:
        getattr(check, checker)(wrong)
    if diagnosis is not None:
        assert e.value.diagnosis == diagnosis
    if hint is not None:
        assert_names_hint(e.value, checker, hint)


def test_vector_add_accepts_a_correct_kernel():
    r = check.vector_add(k.vector_add)
    assert "✓" in repr(r) and r.traffic.launches == 1


@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    (k.vector_add_stub, "still the stub", "stub", 1),
    (k.vector_add_blank, "never written", "no-store", 1),
    (k.vector_add_no_mask, "n = 1000.*is the tail masked", "out-of-bounds", 2),
    (k.vector_add_floor_grid, r"grid is too small. 7 programs × BLOCK 128 = 896.*the last \d+ elements were never "
                              r"written.*triton.cdiv\(n, BLOCK\) = 8 programs", "grid-too-small", 2),
    (k.vector_add_off_by_one, "one element past the end", None, None),
    (k.vector_add_two_passes, "not fused", "launches", 1),
    (k.vector_add_zero_grid, "0 programs.*triton.cdiv", "grid-zero", 2),
    (k.vector_add_no_stride, "programs overlap.*pid \\* BLOCK", "overlap", 2),
    # every program on block 0: right up to n = 1024 (BLOCK), so the case that fails is named, and the grid,
    # big enough, is not blamed
    (k.vector_add_block_zero, r"^`vector_add` \(n = 1025, float32\): the grid is big enough \(2 programs × 1024 = 2048 "
                              r"≥ n = 1025\), but every program seems to work on block 0.*the last element was never "
                              r"written.*pid \* BLOCK", "overlap", 2),
    (k.vector_add_grid_per_element, "1000 programs for n = 1000.*one per element", "grid-per-element", 2),
    # the launch's arguments in another order than the kernel's parameters: the store lands in y, an input
    (k.vector_add_out_first, r"^`vector_add` \(n = 1000, float32\): the kernel stored into y, an input, and never into "
                             r"the output. The kernel declares \(x_ptr, y_ptr, out_ptr, n, BLOCK\), and `x_ptr` "
                             r"received the output, `y_ptr` received x and `out_ptr` received y: the launch passes its "
                             r"arguments in another order.*by position", "argument-order", 1),
    (k.vector_add_out_second, r"stored into y, an input, and never into the output.*`y_ptr` received the output and "
                              r"`out_ptr` received y", "argument-order", 1),
    (k.vector_add_x_twice, "x \\+ x: is the second load reading from x_ptr", "same-pointer", 1),
    (k.vector_add_torch, "with PyTorch \\(aten.add\\), not with a Triton kernel", "pytorch", 1),
    # `if offs < n:` for a mask: the interpreter takes the `if` for the whole block and reads past the end; the
    # check compiles the kernel for the GPUs first, and names the `if`, not the unmasked tail
    (k.vector_add_if_mask, r"^`add_kernel_if_mask` does not compile for a GPU.*line \d+, `if offs < n:`, is a "
                           r"Python `if` on a block.*tl.where.*mask=offsets < n", "block-if", 2),
    (lambda x, y: x, "never add|equals x|is y loaded", None, None),
    (lambda x, y: None, "returned None", None, None),
    (lambda x, y: (x + y).float(), "keep the input's dtype", None, None),
    ("vector_add", "takes your function", None, None),
])
def test_vector_add_rejects(wrong, message, diagnosis, hint):
    """Also checks the failure's diagnosis and the hint of lesson 03 it names, where the row gives them."""
    assert_rejects("vector_add", wrong, message, diagnosis, hint)


@pytest.mark.skipif(not INTERPRET, reason="a GPU compiles at the launch itself; the check compiles nothing more")
def test_the_gpu_compile_costs_a_right_kernel_little_and_a_second_check_nothing(monkeypatch):
    """Each check compiles the kernels it launches for the course's GPUs (course_utils/gpu_compile.py), once per
    kernel, signature and target in a process: the first check of vector_add compiles 4 launches (2 dtypes x n = 1
    or not; one target, since the front end judges a kernel without fp8 alike for both) in well under a second
    (about 0.1 s measured on a 2-core machine), the second none, and its cached lookups add under 50 ms."""
    import time
    from course_utils import gpu_compile
    monkeypatch.setattr(gpu_compile, "_verdicts", {})     # as in a fresh process
    compiled, looked_up = [], []
    real_compile, real_verdict = gpu_compile._compiled, gpu_compile.verdict

    def timed(real, into):
        def call(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                into.append(time.perf_counter() - t0)
        return call
    monkeypatch.setattr(gpu_compile, "_compiled", timed(real_compile, compiled))
    monkeypatch.setattr(gpu_compile, "verdict", timed(real_verdict, looked_up))
    check.vector_add(k.vector_add)
    assert len(compiled) == 4 and sum(compiled) < 1.0, (len(compiled), sum(compiled))
    compiled.clear(), looked_up.clear()
    check.vector_add(k.vector_add)
    assert not compiled and looked_up and sum(looked_up) < 0.05, (len(compiled), len(looked_up), sum(looked_up))


def test_vector_add_accepts_other_block_sizes():
    assert check.vector_add(k.vector_add_big_block).traffic.launches == 1


def test_scaled_add_accepts_a_correct_kernel():
    r = check.scaled_add(k.scaled_add)
    assert "✓" in repr(r) and r.traffic.launches == 1 and r.traffic.bytes == 3 * 4 * 4096


def test_scaled_add_accepts_float32_arithmetic():
    check.scaled_add(k.scaled_add_fp32_math)


@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    (k.scaled_add_stub, "still the stub", "stub", 1),
    (k.scaled_add_no_alpha, r"this is x \+ y: alpha \(= 2.5\) is never applied", "no-alpha", 2),
    (k.scaled_add_alpha_on_y, r"x \+ alpha \* y: alpha scales y", "alpha-on-y", 2),
    (k.scaled_add_alpha_on_sum, r"alpha \* \(x \+ y\): alpha scales the sum", "alpha-on-sum", 2),
    (k.scaled_add_no_mask, "n = 1000.*is the tail masked", None, None),
    (k.scaled_add_floor_grid, r"grid is too small.*triton.cdiv\(n, BLOCK\) = 8 programs", "grid-too-small", 1),
    (k.scaled_add_n_alpha_swapped, r"^`scaled_add` \(n = 1000, float32\): the kernel's parameter `alpha` received 1000, "
                                   r"and `n` received alpha = 2.5.*matches them by position", "argument-order", 2),
    (k.scaled_add_alpha_constexpr, r"`alpha` is declared tl.constexpr.*every new value of alpha compiles a new kernel",
     "alpha-constexpr", 2),
    (k.scaled_add_loads_alpha, r"^`scaled_add` \(n = 1000, float32\): the kernel loads alpha as if it were a pointer "
                               r"\(tl.load\(alpha\)\). alpha arrives as a number, not as a pointer to one: use it directly",
     "alpha-loaded", 2),
    (k.scaled_add_eager, "2 launches where 1 should do: this is not fused", "launches", 1),
    (k.scaled_add_torch_fused, r"with PyTorch \(aten.add\)", None, None),
    (lambda x, y, alpha: y, "equals y", None, None),
    (lambda x, y, alpha: None, "returned None", None, None),
])
def test_scaled_add_rejects(wrong, message, diagnosis, hint):
    """Also checks the failure's diagnosis and the hint of lesson 03 it names, where the row gives them."""
    assert_rejects("scaled_add", wrong, message, diagnosis, hint)


def test_bias_gelu_accepts_a_correct_kernel():
    r = check.bias_gelu(k.bias_gelu)
    assert r.traffic.launches == 1


@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    (k.bias_gelu_stub, "still the stub", "stub", 1),
    (k.bias_gelu_no_bias, "bias is never added", "no-bias", 1),
    (k.bias_gelu_bias_by_row, "indexed by row", None, None),
    (k.bias_gelu_unfused, "2 launches.*not fused", None, None),
    (lambda x, b: x + b, "GELU is never applied", None, None),
    # right numbers on the interpreter, which reads the notebook's SQRT1_2; a GPU compile refuses the global
    (k.bg_plain_global, r"^`_bg_plain_global_kernel` does not compile for a GPU.*`y = 0.5 \* v \* \(1.0 \+ "
                        r"tl.erf\(v \* SQRT1_2\)\)`, reads `SQRT1_2`, a global.*SQRT1_2 = tl.constexpr\(0.7071067811865476\)",
     "global", 3),
    # the interpreter takes the `if` for every block (x + b, "GELU is never applied"); the GPU compile refuses it
    (k.bg_if_large, r"^`_bg_if_large_kernel` does not compile.*`if v > 10.0:`, is a Python `if` on a block.*tl.where",
     "block-if", 3),
])
def test_bias_gelu_rejects(wrong, message, diagnosis, hint):
    """Also checks the failure's diagnosis and the hint of lesson 04 it names, where the row gives them."""
    assert_rejects("bias_gelu", wrong, message, diagnosis, hint)


# --- bias_gelu, lesson 04: other grids and blocks pass; the mistakes of a first fused kernel do not -------
@pytest.mark.parametrize("right", [k.bg_flat, k.bg_flat_block_256, k.bg_row_loop],
                         ids=["flattened, BLOCK 1024", "flattened, BLOCK 256", "one program per row, looped"])
def test_bias_gelu_accepts_other_grids_and_blocks(right):
    r = check.bias_gelu(right)
    assert "✓" in repr(r) and r.traffic.launches == 1 and r.traffic.bytes == 4 * (2 * 16 * 256 + 256)


@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    (k.bg_tanh, r"tanh approximation.*0\.5·v·\(1 \+ erf\(v/√2\)\)", "tanh", 3),
    (k.bg_bias_after_gelu, r"gelu\(x\) \+ b: the bias goes in before the activation", "bias-after-gelu", 1),
    (k.bg_erf_of_v, r"takes erf\(v\); GELU takes erf\(v/√2\)", "erf-scale", 3),
    (k.bg_flat_bias_by_row, r"indexed by row.*b\[col\]", "bias-by-row", 2),
    # 37 columns here; on a GPU the replay of a 5 x 300 case finds it first
    (k.bg_flat_bias_not_wrapped, r"Out-of-bounds.*`b_ptr` \((37|300) elements\)(.|\n)*That is the bias.*b\[o % N\]",
     "bias-not-wrapped", 2),
    # the interpreter and the GPU compiler refuse tl.erf on fp16 alike ("Expected dtype ['fp32', 'fp64']")
    # ... and the message asks only for what lesson 01 taught: convert after the load, the store converts back
    (k.bg_no_upcast, r"fails on float16 input: tl\.erf .* fp32 or fp64 only.*\.to\(tl\.float32\).*tl\.store converts "
                     r"what it stores to the output's dtype by itself \(lesson 01\)", "fp16-erf", 3),
])
def test_bias_gelu_names_the_mistake(wrong, message, diagnosis, hint):
    """Also checks the failure's diagnosis and the hint of lesson 04 it names, where the row gives them."""
    assert_rejects("bias_gelu", wrong, message, diagnosis, hint)


@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    # right numbers, one launch, but x + b goes to a scratch tensor and comes back: 16 bytes per element
    (k.bg_scratch, r"moved 66560 bytes; the budget is 33792.*an intermediate goes to memory(.|\n)*tmp_ptr", "bytes", 1),
    # right numbers, but on fp16 the casts run as PyTorch kernels around the Triton one
    (k.bg_casts_in_launcher, r"on float16 input it converts with PyTorch: 3 × aten\._to_copy besides your "
                             r"kernel, 4 launches", "casts", 3),
])
def test_bias_gelu_rejects_right_numbers_over_budget(wrong, message, diagnosis, hint):
    """Also checks the failure's diagnosis and the hint of lesson 04 it names, where the row gives them."""
    assert_rejects("bias_gelu", wrong, message, diagnosis, hint)


def test_compare_calls_a_ragged_end_a_tail_and_a_whole_batch_entry_not():
    """A new user's lab 5 trial: a batch's second sequence, wrong from its first element, was reported as
    "Only the tail is wrong: is the last, partial block masked?", a lead to the wrong place."""
    from course_utils.check._core import compare
    want = torch.arange(1.0, 25.0)
    got = want.clone()
    got[-5:] += 100                                  # wrong, but by no common factor
    with pytest.raises(check.CheckFailed, match="Only the tail is wrong") as e:
        compare(got, want, name="t")
    assert e.value.diagnosis == "tail"
    got, want = want.clone().view(2, 3, 4), want.view(2, 3, 4)
    got[1] += 100
    with pytest.raises(check.CheckFailed, match=r"the whole of the last 1 of the 2 entries along the first") as e:
        compare(got, want, name="t")
    assert e.value.diagnosis == "wrong" and "tail" not in str(e.value)


def test_compare_calls_nothing_a_tail_when_every_element_is_wrong():
    """Lab 4's backward with the scale left out of S, in fp32, read "all 1280 elements are wrong ... Only the tail
    is wrong: is the last, partial block masked?": a run of bad elements that ends at the last one is a tail
    only when some element before it is right."""
    from course_utils.check._core import compare
    want = torch.arange(1.0, 25.0)
    with pytest.raises(check.CheckFailed) as e:
        compare(want + torch.linspace(50, 90, 24), want, name="t")
    assert "all 24 elements are wrong" in str(e.value) and "tail" not in str(e.value)
    assert e.value.diagnosis == "wrong"


def test_compare_names_the_case_and_reads_whole_blocks_without_blaming_the_grid():
    """The case that failed is named; a written prefix of a power of two is not called a grid or a mask problem
    alone: with the launch unknown, both causes of a whole block are given."""
    from course_utils.check._core import compare
    out = torch.empty(1025)
    check._core._poison(out)
    out[:1024] = 1.0
    with pytest.raises(check.CheckFailed) as e:
        compare(out, torch.ones(1025), name="f", case="n = 1025, float32")
    text = str(e.value)
    assert text.startswith("`f` (n = 1025, float32): the last element was never written")
    assert "every program works on block 0" in text and "Is the mask off by one" not in text


def test_compare_each_names_only_what_is_wrong():
    from course_utils.check._core import compare_each
    right, wrong = torch.ones(8), torch.ones(8) * 3
    with pytest.raises(check.CheckFailed) as e:
        compare_each([(right, torch.ones(8), "a", {}), (wrong, torch.ones(8), "b", {}),
                      (right, torch.ones(8), "c", {})], name="f")
    lines = str(e.value).splitlines()
    assert lines[0].startswith("`f, b`: all 8 elements are wrong") and lines[-1] == "a and c are right."
