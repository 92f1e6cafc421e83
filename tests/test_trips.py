import pytest
import torch
import torch.nn.functional as F

from course_utils import trips, _interp, DEVICE, INTERPRET
import kernels as k

M, N = 8, 100


def test_unfused_bias_gelu_is_two_launches_and_16_bytes_per_element_plus_bias():
    x, b = torch.randn(M, N, device=DEVICE), torch.randn(N, device=DEVICE)
    t = trips.count(lambda: F.gelu(x + b))
    assert t.launches == 2
    assert t.bytes == 16 * M * N + 4 * N
    assert t.bytes_read == 8 * M * N + 4 * N and t.bytes_written == 8 * M * N
    assert [kern.name for kern in t.kernels] == ["aten.add", "aten.gelu"]


def test_fused_triton_bias_gelu_is_one_launch_and_8_bytes_per_element_plus_bias():
    x, b = torch.randn(M, N, device=DEVICE), torch.randn(N, device=DEVICE)
    t = trips.count(k.bias_gelu, x, b)
    assert t.launches == 1 and t.kernels[0].kind == "triton"
    assert t.bytes_read == 4 * M * N + 4 * N and t.bytes_written == 4 * M * N
    # the bias is loaded once per row, but a perfect cache fetches it once: requested > distinct
    assert t.requested_read == 4 * M * N + 4 * N * M
    assert t.kernels[0].reads == {"x_ptr": 4 * M * N, "b_ptr": 4 * N}
    assert torch.allclose(t.result, F.gelu(x + b), atol=1e-5)


def test_unfused_triton_version_counts_the_intermediate_twice():
    x, b = torch.randn(M, N, device=DEVICE), torch.randn(N, device=DEVICE)
    t = trips.count(k.bias_gelu_unfused, x, b)
    assert t.launches == 2
    assert t.bytes == 16 * M * N + 4 * N


def test_views_and_allocations_are_not_launches():
    x = torch.randn(64, 64, device=DEVICE)
    t = trips.count(lambda: (torch.empty_like(x), x.t(), x.view(-1), x[1:]))
    assert t.launches == 0 and t.bytes == 0


def test_broadcast_input_counts_its_distinct_bytes_once():
    x, b = torch.randn(M, N, device=DEVICE), torch.randn(N, device=DEVICE)
    t = trips.count(lambda: x * b.expand(M, N))
    assert t.bytes_read == 4 * M * N + 4 * N


def test_inplace_and_copy():
    x, y = torch.randn(1000, device=DEVICE), torch.randn(1000, device=DEVICE)
    t = trips.count(lambda: x.add_(y))
    assert (t.bytes_read, t.bytes_written) == (8000, 4000)
    t = trips.count(lambda: x.copy_(y))
    assert (t.bytes_read, t.bytes_written) == (4000, 4000)


def test_cos_cos_is_two_launches_eager():
    x = torch.randn(4096, device=DEVICE)
    assert trips.count(lambda: x.cos()).launches == 1
    t = trips.count(lambda: x.cos().cos())
    assert t.launches == 2 and t.bytes == 4 * 4 * 4096


@pytest.mark.skipif(not INTERPRET, reason="the bounds check guards the interpreter; on a GPU see trips/check")
def test_out_of_bounds_is_refused_before_memory_is_touched():
    x, y = torch.randn(1000, device=DEVICE), torch.randn(1000, device=DEVICE)
    with pytest.raises(_interp.OutOfBounds, match="is the tail masked"):
        k.vector_add_no_mask(x, y)
    with pytest.raises(_interp.OutOfBounds, match="one element past the end"):
        k.vector_add_off_by_one(x, y)


def test_table_and_summary_render():
    x, b = torch.randn(M, N, device=DEVICE), torch.randn(N, device=DEVICE)
    text = repr(trips.count(k.bias_gelu, x, b))
    assert "bias_gelu_kernel" in text and "x_ptr" in text and "1 launch" in text
    assert "requested" in text


def test_count_rejects_a_non_callable():
    with pytest.raises(TypeError, match="lambda"):
        trips.count(torch.randn(3))


def test_compiled_cos_cos_is_one_launch_of_8_bytes_per_element():
    x = torch.randn(4096, device=DEVICE)
    t = trips.count_compiled(lambda x: x.cos().cos(), x)
    assert t.launches == 1 and t.bytes == 8 * 4096
    assert torch.allclose(t.result, x.cos().cos())


def test_out_of_bounds_is_caught_while_counting_on_any_device():
    # On a GPU the count replays the launch in the instrumented interpreter, which refuses it.
    x, y = torch.randn(1000, device=DEVICE), torch.randn(1000, device=DEVICE)
    with pytest.raises(_interp.OutOfBounds, match="is the tail masked"):
        trips.count(k.vector_add_no_mask, x, y)


def test_trips_compile_is_counted_as_the_compiled_graph_not_eager_ops():
    x, y = torch.randn(4096, device=DEVICE), torch.randn(4096, device=DEVICE)
    f = trips.compile(lambda x, y: 2.5 * x + y)
    # outside a count: plain torch.compile (its fused multiply-add rounds differently near zero)
    assert torch.allclose(f(x, y), 2.5 * x + y, atol=1e-5)
    t = trips.count(lambda: f(x, y))
    assert t.launches == 1 and t.kernels[0].kind == "inductor"
    assert t.bytes == 3 * 4 * 4096                         # two distinct f32 inputs, one output


@pytest.mark.parametrize("name", list(k.STANDARD_LIBRARY))
def test_counts_kernels_that_call_the_standard_library(name):
    """tl.sum, tl.sigmoid, a helper of one's own, tl.dot...: counted like any kernel (the GPU path of
    the same is in test_replay.py and test_gpu.py)."""
    fn, ref, make = k.STANDARD_LIBRARY[name]
    args = make(DEVICE)
    t = trips.count(fn, *args)
    assert t.launches == 1 and t.kernels[0].kind == "triton"
    assert t.bytes_read == sum(a.numel() * a.element_size() for a in args)
    assert t.bytes_written == t.result.numel() * t.result.element_size()
    assert torch.allclose(t.result.float(), ref(*args).float(), atol=1e-2, rtol=1e-2)


def test_a_scalar_tensor_is_an_index_under_any_numpy():
    """range(tl.cdiv(n, BLOCK)) in a kernel needs the interpreter's scalar tensors to be indexes:
    Triton 3.6 calls int() on a shape-(1,) array, which NumPy 2.3 refuses; the course patches it."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as itp
    scope = itp._LangPatchScope()
    before = tl.tensor.__dict__.get("__index__")
    itp._patch_lang_tensor(tl.tensor, scope)
    try:
        one = tl.tensor(itp.TensorHandle(np.array([7], dtype=np.int32), tl.int32), tl.int32)
        assert list(range(one)) == list(range(7)) and bool(one)
    finally:
        scope.restore()
    assert tl.tensor.__dict__.get("__index__") is before


@pytest.mark.skipif(not INTERPRET, reason="about the interpreter (and a GPU compiles no kernel from python -c)")
def test_tl_sum_works_when_triton_language_was_imported_first():
    """`import triton.language` before `import course_utils` leaves Triton's own jit functions
    compiled-mode objects on a CPU; a kernel that calls tl.sum must still run in the interpreter."""
    import subprocess
    import sys
    code = ("import triton, triton.language as tl\n"
            "import course_utils, torch\n"
            "@triton.jit\n"
            "def k(x_ptr, out_ptr, BLOCK: tl.constexpr):\n"
            "    tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0))\n"
            "x, out = torch.arange(8.0), torch.empty(1)\n"
            "k[(1,)](x, out, BLOCK=8)\n"
            "print(out.item())\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "28.0", done.stderr[-2000:]


@pytest.mark.parametrize("make", [
    lambda x: torch.zeros_like(x), lambda x: torch.ones_like(x), lambda x: torch.full_like(x, 2.0),
    lambda x: torch.rand_like(x), lambda x: torch.randn_like(x), lambda x: torch.randint_like(x, 10),
    lambda x: x.new_zeros(x.shape), lambda x: x.new_ones(x.shape), lambda x: x.new_full(x.shape, 2.0),
], ids=["zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like", "new_zeros", "new_ones",
        "new_full"])
def test_an_allocation_shaped_like_a_tensor_reads_none_of_it(make):
    """torch.zeros_like(x) takes x's shape, dtype and device, never its values: it writes 16 KiB and reads 0, as
    torch.zeros does."""
    x = torch.randn(4096, device=DEVICE)
    t = trips.count(make, x)
    assert (t.launches, t.bytes_read, t.bytes_written) == (1, 0, 4 * 4096), t.table()


def _course_imports() -> dict:
    """{module: the course_utils modules its import statements name}, read from the source: every `import` and
    `from ... import`, at the top or inside a function."""
    import ast
    from pathlib import Path
    root = Path(trips.__file__).resolve().parent

    def name(path):
        parts = path.with_suffix("").relative_to(root.parent).parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    modules = {name(p): p for p in root.rglob("*.py")}
    found = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        named = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                candidates = [f"{target}.{a.name}" for a in node.names] + [target]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            named |= {next(c for c in candidates if c in modules)} if any(c in modules for c in candidates) else set()
        found[module] = named - {module}
    return found


def test_no_two_course_modules_import_each_other():
    """One layer sits below the other: trips re-exports hardware_bytes's API (trips.hardware), and hardware_bytes
    takes its byte formatting from numbers, never from trips."""
    imports = _course_imports()
    assert "course_utils.hardware_bytes" in imports["course_utils.trips"]
    mutual = {tuple(sorted((a, b))) for a, named in imports.items() for b in named if a in imports.get(b, ())}
    # environment asks capability for the plan inside traps(), a function, and capability builds on environment:
    # known, and outside this test's files
    known = {("course_utils.capability", "course_utils.environment")}
    assert mutual <= known, f"modules that import each other: {sorted(mutual - known)}"
    assert trips.hardware is __import__("course_utils.hardware_bytes").hardware_bytes.hardware
