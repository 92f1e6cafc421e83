"""check.matmul_bias_gelu passes right kernels written three ways (tiles, grids, program orders) and
rejects the stub, realistic wrong kernels (each with its diagnosis) and right numbers that cost too many
launches or come from PyTorch."""
import pytest

from course_utils import check
import matmul_kernels as k
from hinted import assert_names_hint


@pytest.mark.parametrize("right", [k.matmul_bias_gelu, k.matmul_bias_gelu_2d, k.matmul_bias_gelu_big_tiles])
def test_accepts_correct_kernels(right):
    r = check.matmul_bias_gelu(right)
    assert "✓" in repr(r) and r.traffic.launches == 1
    assert r.traffic.bytes == 2 * (32 * 48 + 48 * 64 + 64 + 32 * 64)


# Each wrong kernel runs through the checker once: the row holds its message and, where it has one, the
# diagnosis and the hint the failure names (None: not asserted).
@pytest.mark.parametrize("wrong, message, diagnosis, hint", [
    (k.matmul_bias_gelu_stub, "still the stub", "stub", 1),
    (k.bias_rows, r"bias is indexed by the row.*b\[rn\]", "bias-by-row", 3),
    (k.tanh_gelu, "tanh approximation", "tanh", 3),
    (k.k_unmasked, r"(?s)Out-of-bounds.*K condition is the one usually forgotten", "k-mask", 2),
    (k.k_drop_tail, r"K // BLOCK_K\s+steps runs 0 times when K < BLOCK_K.*tl.cdiv\(K, BLOCK_K\)", "k-tail", 2),
    (k.fp16_acc, r"within 1% of gelu\(a @ w \+ b\).*an fp16 accumulator", "fp16-acc", 3),
    # passes on the interpreter, which lets acc turn fp32; compiled for the GPUs, the loop may not change its type
    (k.fp16_zeros, r"^`_mm_kernel` does not compile for a GPU.*the loop changes the dtype of `acc`. `acc = "
                   r"tl.zeros\(\(BLOCK_M, BLOCK_N\), dtype=tl.float16\)` starts it as fp16.*leaves it fp32.*Start the "
                   r"accumulator in fp32", "fp16-acc", 3),
    (k.epilogue_per_k, r"after every K step \(this matches BLOCK_K = 32\)", "epilogue-per-k", 1),
    (k.w_transposed, r"w is read as if it were stored \(N, K\)", "w-layout", 2),
    # K > N in the first case: the load leaves w, and a probe with K < N names the stride, not the K mask
    # (a GPU stops no read past w: there the probe alone names the stride, as in the next row)
    (k.w_stride_k, r"(?s)(Out-of-bounds.*`w_ptr`.*)?row stride of K.*k·N \+ n", "w-stride", 2),
    # the same where nothing stops the reads past w (a GPU): wrong numbers, and the probe names the stride
    (k.w_stride_k_unseen, r"\(64 × 96 × 128\): w is read with a row stride of K", "w-stride", 2),
    (k.no_bias, "the bias is never added", "no-bias", 3),
    (k.bias_after, r"gelu\(a @ w\) \+ b", "bias-after", 3),
    (k.no_gelu, "GELU is never applied", "no-gelu", 3),
    (k.fp32_out, "returned torch.float32 for torch.float16 inputs", "dtype", 3),
    (k.two_kernels, "2 launches where 1 should do: this is not fused", "launches", 1),
    (k.eager, r"fp16.*\(eager PyTorch|what eager PyTorch computes", "rounded-early", 3),
    (lambda a, w, b: None, "returned None", None, None),
])
def test_rejects(wrong, message, diagnosis, hint):
    # also checks that each failure names the hint that addresses its diagnosis
    with pytest.raises(check.CheckFailed, match=message) as e:
        check.matmul_bias_gelu(wrong)
    if diagnosis is not None:
        assert e.value.diagnosis == diagnosis
        assert_names_hint(e.value, "matmul_bias_gelu", hint)


def test_a_bias_read_by_row_past_its_end_is_named():
    # M > N: b[rm] leaves the bias before the values can be compared
    from course_utils import trips
    from course_utils.check import matmul as cm
    a, w, b = cm._inputs(70, 20, 16)
    # counting replays the launch through the bounds-checked interpreter on a GPU too, as the checker does
    with pytest.raises(check.CheckFailed, match="That is the bias"), trips.counting():
        cm._run(k.bias_rows, a, w, b)


def test_not_a_function():
    with pytest.raises(check.CheckFailed, match="takes your function itself"):
        check.matmul_bias_gelu(42)
