"""Only on a GPU (skipped elsewhere): trips.count and the checkers on compiled kernels that use Triton's
standard library, helpers of their own, tl.dot and tl.where. Run on the H100 by the course's GPU run;
its result is recorded in docs/gpu-results/. tests/test_replay.py covers the same path on a CPU."""
import pytest
import torch

import course_utils as cu
from course_utils import _interp, check, trips
import kernels as k

pytestmark = pytest.mark.skipif(not (cu.ON_GPU and not cu.INTERPRET), reason="needs a GPU (Triton compiling)")


def _close(got, want):
    # tl.dot on float32 runs in tf32 on the tensor cores by default: about 3 decimal digits
    return torch.allclose(got.float(), want.float(), atol=5e-2, rtol=2e-2)


@pytest.mark.parametrize("name", list(k.STANDARD_LIBRARY))
def test_counts_standard_library_kernels_on_the_gpu(name):
    fn, ref, make = k.STANDARD_LIBRARY[name]
    args = make("cuda")
    t = trips.count(fn, *args)
    assert t.launches == 1 and t.kernels[0].kind == "triton"
    assert t.bytes_read == sum(a.numel() * a.element_size() for a in args)
    assert t.bytes_written == t.result.numel() * t.result.element_size()
    assert t.result.is_cuda and _close(t.result, ref(*args))     # the real launch ran, and is right


def test_a_kernel_compiled_after_a_replay_is_still_right():
    """A replay must leave triton.language as the compiler expects it: count one reduction, then
    compile and run fresh kernels that use the same builtins."""
    x = torch.randn(33, 300, device="cuda")
    trips.count(k.row_softmax, x)
    before = {id(v) for o in _interp._language_objects() for v in vars(o).values()}
    assert _close(k.row_sum_looped(x, block=64), x.sum(1))            # a new BLOCK: a new compilation
    assert _close(k.row_cumsum(x[:, :200].contiguous()), x[:, :200].cumsum(1))
    assert before == {id(v) for o in _interp._language_objects() for v in vars(o).values()}


def test_out_of_bounds_in_a_reduction_is_caught_before_the_gpu_runs_it():
    with pytest.raises(_interp.OutOfBounds, match="elements 300..327"):
        trips.count(k.row_sum_no_mask, torch.randn(3, 100, device="cuda"))


def test_bias_gelu_checker_accepts_a_helper_and_rejects_tanh_by_diagnosis():
    assert "bias_gelu" in repr(check.bias_gelu(k.bias_gelu_with_helper))
    with pytest.raises(check.CheckFailed, match="tanh approximation"):
        check.bias_gelu(k.bias_gelu_tanh_sigmoid)


def test_vector_add_checker_names_the_missing_mask_on_the_gpu():
    with pytest.raises(check.CheckFailed, match="Out-of-bounds load"):
        check.vector_add(k.vector_add_no_mask)


def test_an_autotuned_kernel_counts_only_the_launch_that_counts():
    """@triton.autotune tries each config on the real arguments first: those trials (and do_bench's
    cache flushes) are neither counted nor replayed; the chosen config's launch is."""
    import triton
    import triton.language as tl

    @triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (128, 256, 1024)], key=["n"])
    @triton.jit
    def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    x = torch.randn(10_000, device="cuda")
    out = torch.empty_like(x)
    t = trips.count(lambda: double_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel()))
    assert t.launches == 1 and t.bytes == 2 * x.numel() * 4, t.table()
    assert torch.equal(out, 2 * x)


def test_peak_bytes_sees_scratch_and_can_leave_the_output_out():
    from course_utils import bench

    def scratchy():
        scratch = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")   # 1 MiB, freed before the return
        return torch.zeros(1024, dtype=torch.float32, device="cuda") + scratch[:1].float()  # 4 KiB out
    with_out, scratch_only = bench.peak_bytes(scratchy), bench.peak_bytes(scratchy, beyond_output=True)
    assert (1 << 20) <= with_out < (1 << 20) + (64 << 10)
    assert with_out - scratch_only == 4096


def test_a_kernel_compiled_ahead_and_launched_from_its_handle_is_counted_and_checked():
    """Triton's fused-softmax tutorial compiles its kernel first (warmup), sizes a persistent grid from the
    compiled kernel's registers, and launches the compiled kernel, compiled[grid](...): no JITFunction.run, so
    trips and the checks must see CompiledKernel's launch (trips._shadow_gpu_launches)."""
    import softmax_kernels
    x = torch.randn(64, 300, device="cuda")
    t = trips.count(softmax_kernels.softmax_compiled_ahead, x)
    assert t.launches == 1 and t.kernels[0].kind == "triton", t.table()
    assert (t.bytes_read, t.bytes_written) == (4 * x.numel(), 4 * x.numel()), t.table()
    assert torch.allclose(t.result, torch.softmax(x, dim=-1), atol=1e-6, rtol=1e-5)   # the real launch ran
    assert "✓" in repr(check.softmax(softmax_kernels.softmax_compiled_ahead))


def test_a_kernel_the_gpu_refuses_gets_the_courses_diagnosis_not_the_interpreters():
    """On a GPU the launch compiles, and trips compiles it before replaying it: `if offs < n:` is named as a Python
    `if` on a block (the replay alone would call it an unmasked tail), SQRT1_2 as a plain global."""
    with pytest.raises(check.CheckFailed, match=r"`if offs < n:`, is a Python `if` on a block") as e:
        check.vector_add(k.vector_add_if_mask)
    assert e.value.diagnosis == "block-if"
    with pytest.raises(check.CheckFailed, match=r"reads `SQRT1_2`, a global") as e:
        check.bias_gelu(k.bg_plain_global)
    assert e.value.diagnosis == "global"
