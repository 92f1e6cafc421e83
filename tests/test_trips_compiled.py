"""trips counts a matmul at its boundary, and a compiled graph kernel by kernel.

Eager: a matmul is one library call (cuBLAS on a GPU) that reads its operands once and writes its
output once. Compiled: one row per kernel Inductor generates (a Triton kernel on a GPU; on a CPU, a
C++ function, which may hold several loops) and one per library call it keeps, each with its own reads
and writes, so that a buffer one kernel writes and the next reads is counted written once and read once.
"""
import pytest
import torch
import torch.nn.functional as F

from course_utils import DEVICE, trips

M, K, N = 64, 32, 48
CUDA = torch.device(DEVICE).type == "cuda"


def operands(dtype=torch.float32):
    a, w, b = torch.randn(M, K, device=DEVICE), torch.randn(N, K, device=DEVICE), torch.randn(N, device=DEVICE)
    return a.to(dtype), w.to(dtype), b.to(dtype)


# --- eager: a matmul is counted at its boundary ---------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("name, fn, with_bias", [
    ("torch.mm", lambda a, w, b: torch.mm(a, w.t()), False),
    ("torch.addmm", lambda a, w, b: torch.addmm(b, a, w.t()), True),
    ("F.linear", lambda a, w, b: F.linear(a, w, b), True),
    ("F.linear, no bias", lambda a, w, b: F.linear(a, w), False),
    ("a @ w.t()", lambda a, w, b: a @ w.t(), False),
])
def test_an_eager_matmul_reads_its_operands_once_and_writes_its_output_once(name, fn, with_bias, dtype):
    a, w, b = operands(dtype)
    t = trips.count(fn, a, w, b)
    s = dtype.itemsize
    assert t.launches == 1, t.table()
    row = t.kernels[0]
    assert row.kind == "library" and "matmul" in row.name and row.name.startswith("aten.")
    assert ("cuBLAS" in row.name) == CUDA
    assert t.bytes_read == s * (M * K + N * K + (N if with_bias else 0))
    assert t.bytes_written == s * M * N
    assert torch.allclose(t.result.float(), (a.float() @ w.float().t() + (b.float() if with_bias else 0)),
                          atol=1e-2 if dtype == torch.float16 else 1e-4, rtol=1e-2)


def test_a_weight_stored_transposed_is_read_once_whichever_way_it_is_viewed():
    a, w, _ = operands()
    w_t = w.t().contiguous().t()             # the same values, stored column-major
    for weight in (w, w_t):
        t = trips.count(lambda: F.linear(a, weight))
        assert t.launches == 1 and t.bytes == 4 * (M * K + N * K + M * N)


def test_matmul_plus_bias_eager_is_the_matmul_then_an_add_that_reads_its_output_back():
    a, w, b = operands()
    t = trips.count(lambda: a @ w.t() + b)
    assert [k.kind for k in t.kernels] == ["library", "torch"]
    assert t.kernels[1].name == "aten.add"
    assert t.kernels[1].bytes_read == 4 * (M * N + N) and t.kernels[1].bytes_written == 4 * M * N
    assert t.bytes == 4 * (M * K + N * K + M * N) + 4 * (2 * M * N + N)


def test_a_batched_input_is_one_matmul_its_reshapes_are_no_launches():
    x, w = torch.randn(2, M, K, device=DEVICE), torch.randn(N, K, device=DEVICE)
    t = trips.count(lambda: x @ w.t())
    assert t.launches == 1 and t.bytes == 4 * (2 * M * K + N * K + 2 * M * N), t.table()


# --- compiled: one row per kernel, with the traffic between them ---------------------------------------

def assert_intermediates_balance(t):
    """A buffer a row writes and a later row reads is read with the bytes it was written with."""
    written = {}
    for row in t.kernels:
        for label, n in row.reads.items():
            if label in written:
                assert n == written[label], f"{label}: written {written[label]}, read {n}\n{t.table()}"
        written.update(row.writes)
    assert t.bytes == sum(k.bytes_read + k.bytes_written for k in t.kernels)
    assert t.launches == len(t.kernels)


def test_a_fused_elementwise_chain_is_one_kernel_with_the_boundary_bytes():
    x, b = torch.randn(M, N, device=DEVICE), torch.randn(N, device=DEVICE)
    t = trips.count_compiled(lambda x, b: F.gelu(x + b), x, b)
    assert t.launches == 1 and len(t.kernels) == 1, t.table()
    row = t.kernels[0]
    assert row.kind == "inductor" and row.name.startswith("triton_" if CUDA else "cpp_")
    assert row.reads == {f"x f32[{M}, {N}]": 4 * M * N, f"b f32[{N}]": 4 * N}
    assert t.bytes_read == 4 * M * N + 4 * N and t.bytes_written == 4 * M * N
    assert torch.allclose(t.result, F.gelu(x + b), atol=1e-5)


def test_kernels_on_either_side_of_a_matmul_count_the_buffers_between_them():
    """softmax -> mm -> relu: three launches on any device. The softmax kernel writes s, the matmul
    reads it and writes o, the last kernel reads o: each intermediate is written once and read once."""
    x, w = torch.randn(M, K, device=DEVICE), torch.randn(K, N, device=DEVICE)
    t = trips.count_compiled(lambda x, w: torch.relu(torch.softmax(x, -1) @ w), x, w)
    assert [k.kind for k in t.kernels] == ["inductor", "library", "inductor"], t.table()
    soft, mm, relu = t.kernels
    assert "matmul" in mm.name and mm.name.startswith("extern")
    assert soft.bytes_read == 4 * M * K and soft.bytes_written == 4 * M * K
    assert mm.bytes_read == 4 * (M * K + K * N) and mm.bytes_written == 4 * M * N
    assert relu.bytes_read == 4 * M * N and relu.bytes_written == 4 * M * N
    assert set(soft.writes) <= set(mm.reads) and set(mm.writes) == set(relu.reads)
    assert_intermediates_balance(t)
    assert torch.allclose(t.result, torch.relu(torch.softmax(x, -1) @ w), atol=1e-5)


@pytest.mark.parametrize("m, n", [(M, N), (512, 1024)])
def test_a_reduction_feeding_a_broadcast(m, n):
    """x / x.sum(). One kernel where Inductor can hold what it reads: a GPU's persistent reduction of a
    small x, or a CPU's one C++ function, which reads x back inside the call. Otherwise several kernels,
    the sum written by one and read by the next, and x read again by the division."""
    x = torch.randn(m, n, device=DEVICE)
    t = trips.count_compiled(lambda x: x / x.sum(), x)
    assert_intermediates_balance(t)
    assert [n_ for n_ in t.kernels[-1].writes.values() if n_ == 4 * m * n] == [4 * m * n], t.table()
    if t.launches == 1:
        assert t.bytes_read == 4 * m * n and 4 * m * n <= t.bytes_written <= 4 * m * n + 4, t.table()
    else:
        assert t.bytes_read >= 2 * 4 * m * n, t.table()
        for i, row in enumerate(t.kernels[1:], 1):
            earlier = {label for k in t.kernels[:i] for label in k.writes}
            assert earlier & set(row.reads), f"kernel {i + 1} reads nothing an earlier one wrote\n{t.table()}"
    if not CUDA:
        assert t.launches == 1
    assert torch.allclose(t.result, x / x.sum(), rtol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_matmul_bias_gelu_is_a_library_matmul_then_one_kernel_reading_its_output(dtype):
    """The unfused-epilogue shape of lesson 07: the matmul reads a and w once and writes its output;
    one kernel reads that output (and the bias, unless the matmul took it) and writes y."""
    a, w, b = operands(dtype)
    s = dtype.itemsize
    t = trips.count_compiled(lambda a, w, b: F.gelu(a @ w.t() + b), a, w, b)
    assert [k.kind for k in t.kernels] == ["library", "inductor"], t.table()
    mm, epilogue = t.kernels
    assert "matmul" in mm.name and ("cuBLAS" in mm.name) == CUDA
    bias_in_mm = any(n == s * N for n in mm.reads.values())
    assert mm.bytes_read == s * (M * K + N * K + (N if bias_in_mm else 0))
    assert mm.bytes_written == s * M * N
    assert epilogue.bytes_read == s * (M * N + (0 if bias_in_mm else N))
    assert epilogue.bytes_written == s * M * N
    assert set(mm.writes) <= set(epilogue.reads)
    assert t.launches == 2 and t.bytes == s * (M * K + N * K + N + 3 * M * N)
    assert_intermediates_balance(t)


# --- what the lessons count stays as it was -------------------------------------------------------------

def test_lesson_05_add_layernorm_compiled_is_one_launch_of_the_fused_bytes():
    m, n = 32, 96

    def eager(x, r, w, b):
        h = x + r
        return F.layer_norm(h, (n,), w, b, 1e-5), h

    compiled = trips.compile(eager, dynamic=False)
    for dtype in (torch.float32, torch.float16):
        x, r = torch.randn(m, n, device=DEVICE).to(dtype), torch.randn(m, n, device=DEVICE).to(dtype)
        w, b = torch.randn(n, device=DEVICE).to(dtype), torch.randn(n, device=DEVICE).to(dtype)
        t = trips.count(lambda: compiled(x, r, w, b))
        s = dtype.itemsize
        assert t.launches == 1 and t.bytes == s * (4 * m * n + 2 * n), t.table()


def test_lesson_04_bias_gelu_compiled_in_fp16_is_one_launch():
    x, b = torch.randn(M, N, device=DEVICE).half(), torch.randn(N, device=DEVICE).half()
    compiled = trips.compile(lambda x, b: F.gelu(x + b), dynamic=False)
    t = trips.count(compiled, x, b)
    assert t.launches == 1 and t.bytes == 2 * (2 * M * N + N), t.table()


def test_the_counting_twin_follows_the_shape_of_each_call():
    """trips.compile's twin compiles with dynamic shapes after the first recompile: the bytes of each
    row are worked out for the shapes of the call being counted."""
    f = trips.compile(lambda x: x.cos().cos())
    for n in (100, 200, 300):
        x = torch.randn(n, device=DEVICE)
        t = trips.count(lambda: f(x))
        assert t.launches == 1 and t.bytes == 8 * n, t.table()
        assert list(t.kernels[0].reads) == [f"x f32[{n}]"]


def test_when_the_plan_cannot_be_read_the_graph_is_counted_at_its_boundary(monkeypatch):
    class Unreadable:
        def __init__(self, nodes):
            raise RuntimeError("a scheduler this version of trips does not know")

    monkeypatch.setattr(trips, "_Plan", Unreadable)
    x, w = torch.randn(M, K, device=DEVICE), torch.randn(K, N, device=DEVICE)
    t = trips.count_compiled(lambda x, w: torch.relu(torch.softmax(x, -1) @ w), x, w)
    assert len(t.kernels) == 1 and t.kernels[0].name.startswith("compiled graph")
    assert "not counted" in t.kernels[0].name or t.launches == 1
    assert t.bytes == 4 * (M * K + K * N + M * N)
    assert torch.allclose(t.result, torch.relu(torch.softmax(x, -1) @ w), atol=1e-5)


def test_the_table_names_each_kernel_and_its_buffers():
    a, w, b = operands()
    text = trips.count_compiled(lambda a, w, b: F.gelu(a @ w.t() + b), a, w, b).table()
    assert "matmul" in text and "2 launches" in text and " -> " in text
    assert f"a f32[{M}, {K}]" in text and f"w f32[{N}, {K}]" in text
