"""The GPU path of trips.count and the checkers, run on this CPU (tests/compiled_mode.py explains how).

On a GPU every launch is replayed in the instrumented interpreter before it runs. That replay meets
@triton.jit functions that are compiled objects, Triton's own tl.sum among them; CI has no GPU, so
without these tests the path would only ever run on one (tests/test_gpu.py runs it there for real)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import course_utils as cu
import kernels

HERE = Path(__file__).resolve().parent
# On a GPU the real path runs (tests/test_gpu.py); the stand-in is for machines without one.
pytestmark = pytest.mark.skipif(cu.ON_GPU and not cu.INTERPRET, reason="a GPU runs the real thing: test_gpu.py")


def scenario(name: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(HERE / "compiled_mode.py"), name], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def standard_library():
    return scenario("standard_library")


def test_the_stand_in_reproduces_the_gpu_bug():
    """With JITFunction's own __call__, a replay of tl.sum fails exactly as it did on the H100."""
    assert "Cannot call @triton.jit'd outside of the scope of a kernel" in scenario("without_call_patch")["error"]


@pytest.mark.parametrize("name", list(kernels.STANDARD_LIBRARY))
def test_counts_kernels_that_call_the_standard_library(standard_library, name):
    got = standard_library["kernels"][name]
    assert "error" not in got, got.get("error")
    assert got["launches"] == 1 and got["kinds"] == ["triton"] and got["right"]


def test_counted_bytes_match_the_interpreter(standard_library):
    """The replay counts what the CPU interpreter counts: one read of x, one write of the output."""
    row_sum = standard_library["kernels"]["tl.sum"]
    assert (row_sum["bytes_read"], row_sum["bytes_written"]) == (6 * 100 * 4, 6 * 4)
    softmax = standard_library["kernels"]["tl.max + tl.sum + tl.where"]
    assert (softmax["bytes_read"], softmax["bytes_written"]) == (6 * 100 * 4, 6 * 100 * 4)


def test_triton_language_is_left_as_it_was(standard_library):
    """The compiler of the next kernel must meet Triton's own builtins, not the interpreter's."""
    assert standard_library["language_changed"] == []


def test_without_the_restore_a_nested_call_would_leave_triton_patched():
    """Why _language_restored exists: the interpreter's nested calls patch and never restore."""
    assert scenario("without_restore")["language_changed"] > 0


def test_bounds_are_checked_in_a_reduction_kernel():
    got = scenario("out_of_bounds")
    assert got["error"] == "OutOfBounds" and "elements 300..327" in got["message"], got


def test_checkers_diagnose_on_the_gpu_path():
    got = scenario("checks")
    crashed = {k: v for k, v in got.items() if "crashed" in v}
    assert not crashed, crashed
    assert "passed" in got["bias_gelu with helper"] and "passed" in got["bias_gelu"]
    assert "passed" in got["vector_add"]
    assert "tanh approximation" in got["bias_gelu tanh via sigmoid"]["failed"]
    assert "Out-of-bounds load" in got["vector_add no mask"]["failed"]
