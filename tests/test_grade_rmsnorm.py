"""grade.add_rmsnorm passes right forward/backward pairs written two ways and fails the stub, the missing
backward, and realistic wrong forwards and backwards, each with its diagnosis on the scorecard; a
numerically right answer over the byte or launch budget fails its budget row."""
import re

import pytest

from course_utils import grade
import lab_kernels_1_2 as k
from hinted import assert_names_hint


def _card_of_failure(fn):
    with pytest.raises(grade.GradeFailed) as e:
        grade.add_rmsnorm(fn, performance=False)
    return e.value.card


@pytest.mark.parametrize("right", [k.add_rmsnorm, k.add_rmsnorm_long_programs])
def test_add_rmsnorm_accepts_correct_answers(right):
    result = grade.add_rmsnorm(right, performance=False)
    assert repr(result).startswith("✓ Lab 2 · fused add + RMSNorm")
    fwd = next(r for r in result.rows if r.name.startswith("forward, one launch"))
    assert fwd.measured == "1 launch, 129 KiB"           # 4 · 2 · 64 · 256 + 2 · 256 + 4 · 64 bytes
    assert [r.status for r in result.rows[-2:]] == ["not measured"] * 2    # timing is for the notebook
    assert all(r.status == "passed" for r in result.rows[:-2])


# Each wrong answer is graded once: `fails` maps each scorecard row that must fail to a regex its diagnosis must
# match, and `hint` is the hint the first of those rows must name (None: not asserted). The ids spell out
# `fails`: most wrong answers here come from one factory, so their names are all add_rmsnorm.
@pytest.mark.parametrize("wrong, fails, hint", [
    (k.add_rmsnorm_stub, {"forward, float32": "still the stub"}, 1),
    (k.add_rmsnorm_backward_stub, {"backward, float32": "still the stub"}, 1),
    (k.add_rmsnorm_detached, {"backward, float32": "y does not require grad: autograd cannot see the kernel"}, 2),
    (k.rms_eps_outside, {"forward, float32": "eps is added after the square root"}, 1),
    (k.rms_no_dh, {"backward, float32": "dx misses the gradient that arrives through h"}, 2),
    (k.rms_rstd_const, {"backward, float32": "rstd is treated as a constant",
                        "gradcheck": "gradcheck in float64 says the backward is not the derivative"}, 2),
    (k.rms_sum_not_mean, {"backward, float32": "the sum Σ\\(dy·w·n\\) where the mean belongs"}, None),
    (k.rms_dw_of_h, {"backward, float32": "dweight = Σ dy · h: the rows must be normalised first"}, None),
    (k.rms_dw_first, {"backward, float32": r"over the first \d+ of \d+ rows only: the partial sums"}, 2),
    (k.rms_partial_per_row, {"backward, ≤ 2 launches": r"moved [\d,]+ bytes; the budget is"}, 2),
    (k.add_rmsnorm_eager, {"forward, one launch": r"launches where 1 should do",
                           "backward, ≤ 2 launches": r"launches where 2 should do"}, None),
], ids=lambda v: "; ".join(f"{row}: {message}" for row, message in v.items()) if isinstance(v, dict) else None)
def test_add_rmsnorm_rejects(wrong, fails, hint):
    """Also checks that the first failed row names its hint, where the row gives one."""
    card = _card_of_failure(wrong)
    diagnoses = []
    for row, message in fails.items():
        hit = [r for r in card.failed if r.name.startswith(row)]
        assert hit, f"row {row!r} did not fail:\n{card.text()}"
        assert re.search(message, hit[0].diagnosis), hit[0].diagnosis
        diagnoses.append(hit[0].diagnosis)
    if hint is not None:
        assert_names_hint(diagnoses[0], "lab2.add_rmsnorm", hint)
    assert all(r.status == "not measured" for r in card.rows[-2:])   # a wrong answer is never timed
