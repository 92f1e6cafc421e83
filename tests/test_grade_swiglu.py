"""grade.swiglu passes right kernels written two ways and fails the stub and realistic wrong answers, each
with its diagnosis on the scorecard; on the CPU its performance row is not measured."""
import pytest

from course_utils import grade
import lab_kernels_1_2 as k
from hinted import assert_names_hint


def _grade(fn):
    with pytest.raises(grade.GradeFailed) as e:
        grade.swiglu(fn, performance=False)
    return e.value


@pytest.mark.parametrize("right", [k.swiglu, k.swiglu_strided])
def test_swiglu_accepts_correct_kernels(right):
    result = grade.swiglu(right, performance=False)
    assert repr(result).startswith("✓ Lab 1 · fused SwiGLU: ")
    budget = next(r for r in result.rows if r.name.startswith("one launch"))
    assert budget.measured == "1 launch, 24 KiB"          # 3 · 2 bytes · 4096 elements
    perf = result.rows[-1]         # timing is for the notebook, not for a test
    assert perf.status == "not measured" and repr(result).endswith("1 not measured")


# Each wrong kernel is graded once: the row that must fail, a regex its diagnosis must match, and the hint it
# must name (None: not asserted).
@pytest.mark.parametrize("wrong, row, message, hint", [
    (k.swiglu_stub, "float32, ordinary", "still the stub", 1),
    (k.swiglu_swapped, "float32, ordinary", "silu is applied to up and gate multiplies it", 1),
    (k.swiglu_sigmoid_only, "float32, ordinary", r"sigmoid\(gate\) · up: silu\(g\) is g · sigmoid\(g\)", 1),
    (k.swiglu_exp_ratio, "large gates",
     r"are NaN .* where the answer is finite\. Is sigmoid computed as exp\(g\) / ", 2),
    (k.swiglu_floor_grid, "ragged sizes", r"the last \d+ elements? were never written", 1),
    (k.swiglu_fp32_out, "float16, ordinary", "returned torch.float32 for torch.float16 inputs", None),
    (k.swiglu_two_launches, "one launch", "2 launches where 1 should do", None),
    (k.swiglu_eager, "one launch", "2 launches where 1 should do", None),
    (k.swiglu_forgets_return, "float32, ordinary", "returned None", None),
])
def test_swiglu_rejects(wrong, row, message, hint):
    """Also checks that the failed row names its hint, where the row gives one."""
    import re
    e = _grade(wrong)
    card = e.card
    failed = {r.name: r for r in card.failed}
    hit = [r for name, r in failed.items() if name.startswith(row)]
    assert hit, f"row {row!r} did not fail: {card.text()}"
    assert re.search(message, hit[0].diagnosis), hit[0].diagnosis
    if hint is not None:
        assert_names_hint(hit[0].diagnosis, "lab1.swiglu", hint)
    assert card.rows[-1].status == "not measured"       # a wrong kernel is never timed


def test_swiglu_rejects_a_function_that_is_not_callable():
    e = _grade("swiglu")
    assert "takes your function itself" in e.card.rows[0].diagnosis
