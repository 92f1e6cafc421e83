"""Run course code the way it runs on a GPU, on this CPU: a stand-in for the GPU path, for tests.

    python tests/compiled_mode.py SCENARIO     prints one JSON object

On a GPU, Triton compiles: every @triton.jit function is a JITFunction (Triton's own tl.sum too), and
trips.count and the checkers replay each launch in the instrumented interpreter before the real one.
On a CPU the course runs everything in the interpreter, so that path never runs in CI. Here, Triton is
imported with TRITON_INTERPRET=0, so the test kernels and triton.language are JITFunctions as on a GPU;
course_utils is told it is on a GPU; and the "GPU launch" (JITFunction.run) is a stand-in that runs the
kernel in the plain interpreter on the real tensors (CPU tensors: this machine has no device memory).
Everything between the student's call and that launch is the course's real GPU code path.
"""
import json
import os
import sys
import traceback

os.environ["TRITON_INTERPRET"] = "0"      # before triton is imported: compiled-mode objects
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels  # noqa: E402  (defined now: JITFunctions, as on a GPU)

assert isinstance(tl.sum, JITFunction) and isinstance(kernels._row_sum_kernel, JITFunction)

import course_utils  # noqa: E402,F401
from course_utils import _interp, check, trips  # noqa: E402
import course_utils.check._core as _core  # noqa: E402
import course_utils.check.elementwise as _elementwise  # noqa: E402

# course_utils believes it is on a GPU (its tensors stay on the CPU: DEVICE is unchanged)
for mod in (trips, _core, _elementwise):
    if hasattr(mod, "ON_GPU"):
        mod.ON_GPU = True
    mod.INTERPRET = False


def _stand_in_gpu_launch(self, *args, grid, warmup, **kwargs):
    """What the GPU would compute; run muted, so that it is nobody's traffic (the replay is counted)."""
    if warmup:
        return None
    with _interp.muted(), _interp._language_restored():
        return _interp._interpreted_fn(self.fn).run(*args, grid=grid, warmup=False, **kwargs)


JITFunction.run = _stand_in_gpu_launch


def language_snapshot() -> dict:
    """What triton.language holds, by identity (names the interpreter adds to a module are left out)."""
    return {f"{getattr(o, '__module__', '')}:{getattr(o, '__name__', o)}.{k}": id(v)
            for o in _interp._language_objects() for k, v in vars(o).items()}


def scenario_standard_library():
    """Count every standard-library kernel; compare results; triton.language must come back intact."""
    out = {}
    before = language_snapshot()
    for name, (fn, ref, make) in kernels.STANDARD_LIBRARY.items():
        args = make("cpu")
        try:
            t = trips.count(fn, *args)
            ok = torch.allclose(t.result.float(), ref(*args).float(), atol=1e-3, rtol=1e-3)
            out[name] = {"launches": t.launches, "bytes_read": t.bytes_read, "bytes_written": t.bytes_written,
                         "kinds": [k.kind for k in t.kernels], "right": bool(ok)}
        except Exception as e:  # noqa: BLE001  (report it as the test's result)
            out[name] = {"error": f"{type(e).__name__}: {e}"}
    changed = sorted(k for k, v in language_snapshot().items() if k in before and before[k] != v)
    return {"kernels": out, "language_changed": changed[:10]}


def scenario_without_call_patch():
    """The interpreter's old refusal, reproduced: a replay that cannot call tl.sum."""
    JITFunction.__call__ = _interp._orig_jit_call       # the refusal, as before the course's patch
    try:
        trips.count(kernels.row_sum, torch.randn(4, 100))
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"}
    return {"error": None}


def scenario_without_restore():
    """Without restoring triton.language, a replay with a nested call leaves it patched."""
    import contextlib
    _interp._language_restored = contextlib.nullcontext
    before = language_snapshot()
    trips.count(kernels.row_sum, torch.randn(4, 100))
    return {"language_changed": len([k for k, v in language_snapshot().items() if k in before and before[k] != v])}


def scenario_out_of_bounds():
    try:
        trips.count(kernels.row_sum_no_mask, torch.randn(3, 100))
    except Exception as e:  # noqa: BLE001
        return {"error": type(e).__name__, "message": str(e)}
    return {"error": None}


def _check(fn):
    try:
        return {"passed": repr(fn())}
    except check.CheckFailed as e:
        return {"failed": str(e)}
    except Exception as e:  # noqa: BLE001  (a crash: what the checkers must never do)
        return {"crashed": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}


def scenario_checks():
    return {
        "bias_gelu with helper": _check(lambda: check.bias_gelu(kernels.bias_gelu_with_helper)),
        "bias_gelu tanh via sigmoid": _check(lambda: check.bias_gelu(kernels.bias_gelu_tanh_sigmoid)),
        "bias_gelu": _check(lambda: check.bias_gelu(kernels.bias_gelu)),
        "vector_add": _check(lambda: check.vector_add(kernels.vector_add)),
        "vector_add no mask": _check(lambda: check.vector_add(kernels.vector_add_no_mask)),
    }


if __name__ == "__main__":
    print(json.dumps(globals()[f"scenario_{sys.argv[1]}"]()))
