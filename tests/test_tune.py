"""tune.compile_ahead: the kernels a list of calls would launch, compiled side by side, none of them run.

On the CPU it does nothing (the interpreter compiles nothing). Its Triton path runs here all the same, against a
stand-in driver that names a GPU (sm_80): Triton compiles for a GPU it does not have, down to the cubin. On a GPU
(skipped elsewhere), a kernel compiled ahead then runs right, and an autotuned one still times its configs."""
import pytest
import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase
from triton.runtime import driver
from triton.runtime.jit import JITFunction

import course_utils as cu
from course_utils import _interp, tune

ON_GPU = cu.ON_GPU and not cu.INTERPRET


def _twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)


class _StandIn(DriverBase):
    """The few questions Triton's JIT asks of a driver before it compiles, answered as an sm_80 GPU would."""

    def __init__(self):
        pass

    @staticmethod
    def is_active():
        return True

    def get_current_target(self):
        return GPUTarget("cuda", 80, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        return torch.device("meta")

    def get_device_interface(self):
        return torch.cuda

    def get_benchmarker(self):
        raise AssertionError("compile_ahead must time nothing")

    def map_python_to_cpp_type(self, ty):
        return ty


@pytest.fixture
def as_a_gpu(monkeypatch, tmp_path):
    """This process as an sm_80 GPU for the course and for Triton's JIT (tensors on the meta device: no memory), with
    an empty Triton cache, so that each kernel really compiles."""
    monkeypatch.setattr(tune.bench, "on_gpu", lambda: True)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    before = driver._active
    driver.set_active(_StandIn())
    # triton.language as imported: an interpreted launch earlier in this process (a check, trips) leaves the
    # interpreter's versions of its functions in place, which Triton's compiler cannot take (on a GPU, none ran)
    with _interp.language_as_imported():
        yield
    driver._active = before


def _compiled(kernel: JITFunction) -> list:
    return [k for cache in kernel.device_caches.values() for k in cache[0].values()]


@pytest.mark.skipif(ON_GPU, reason="on a GPU the test below runs the real thing")
def test_on_the_cpu_nothing_is_compiled():
    assert tune.compile_ahead([lambda: pytest.fail("called")]) == 0


@pytest.mark.skipif(ON_GPU, reason="a stand-in for a GPU, where there is none")
def test_every_kernel_and_every_config_is_compiled_and_none_is_run(as_a_gpu):
    plain = JITFunction(_twice)
    tuned = triton.autotune([triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256}, num_warps=8)],
                            key=["n"])(JITFunction(_twice))
    x = torch.empty(1000, device="meta")
    out = torch.empty_like(x)
    calls = [lambda: plain[(16,)](x, out, 1000, BLOCK=64),
             lambda: plain[(16,)](x, out, 1000, BLOCK=64),                  # the same kernel: compiled once
             lambda: tuned[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, out, 1000),
             lambda: 1 / 0]                                                 # a call that fails stops alone
    assert tune.compile_ahead(calls) == 3
    assert [type(k).__name__ for k in _compiled(plain)] == ["CompiledKernel"]
    assert sorted(k.metadata.num_warps for k in _compiled(tuned.fn)) == [4, 8]    # each config, compiled
    assert tuned.cache == {}                                                # and the autotuner chose none
    assert JITFunction.run is not None and "request" not in JITFunction.run.__qualname__   # put back


@pytest.mark.skipif(not ON_GPU, reason="needs a GPU")
def test_on_a_gpu_a_kernel_compiled_ahead_runs_right_and_the_autotuner_still_times():
    plain = triton.jit(_twice)
    tuned = triton.autotune([triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})], key=["n"])(
        triton.jit(_twice))
    x = torch.randn(1000, device="cuda")
    out = torch.full_like(x, -1.0)
    launch = lambda: plain[(16,)](x, out, 1000, BLOCK=64)   # noqa: E731
    grid = lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)   # noqa: E731
    assert tune.compile_ahead([launch, lambda: tuned[grid](x, out, 1000)]) == 3
    torch.cuda.synchronize()
    assert torch.equal(out, torch.full_like(x, -1.0)), "compiling ahead ran a kernel"
    assert len(_compiled(plain)) == 1 and len(_compiled(tuned.fn)) == 2 and tuned.cache == {}
    launch()
    assert torch.equal(out, x * 2)
    out.fill_(-1.0)
    tuned[grid](x, out, 1000)     # the autotuner times both configs now, and keeps one
    assert torch.equal(out, x * 2) and len(tuned.cache) == 1
