"""Each checker must pass the right kernel and reject the blank stub and realistic wrong kernels,
with a message that names the cause."""
import pytest

from course_utils import check
import kernels as k


def test_vector_add_accepts_a_correct_kernel():
    r = check.vector_add(k.vector_add)
    assert "✓" in repr(r) and r.traffic.launches == 1


@pytest.mark.parametrize("wrong, message", [
    (k.vector_add_stub, "still the stub"),
    (k.vector_add_blank, "never written"),
    (k.vector_add_no_mask, "is the tail masked"),
    (k.vector_add_floor_grid, r"the last \d+ elements were never written.*cdiv"),
    (k.vector_add_off_by_one, "one element past the end"),
    (k.vector_add_two_passes, "not fused"),
    (lambda x, y: x, "never add|equals x|is y loaded"),
    (lambda x, y: None, "returned None"),
    (lambda x, y: (x + y).float(), "keep the input's dtype"),
    ("vector_add", "takes your function"),
])
def test_vector_add_rejects(wrong, message):
    with pytest.raises(check.CheckFailed, match=message):
        check.vector_add(wrong)


def test_bias_gelu_accepts_a_correct_kernel():
    r = check.bias_gelu(k.bias_gelu)
    assert r.traffic.launches == 1


@pytest.mark.parametrize("wrong, message", [
    (k.bias_gelu_stub, "still the stub"),
    (k.bias_gelu_no_bias, "bias is never added"),
    (k.bias_gelu_bias_by_row, "indexed by row"),
    (k.bias_gelu_unfused, "2 launches.*not fused"),
    (lambda x, b: x + b, "GELU is never applied"),
])
def test_bias_gelu_rejects(wrong, message):
    with pytest.raises(check.CheckFailed, match=message):
        check.bias_gelu(wrong)
