"""grade.decode_step passes a decode step written two ways and rejects the stub and realistic wrong steps,
each with its own diagnosis on the scorecard, which names the lab's hint that addresses it. Tiny dimensions
(course_utils.decoder.TINY): the interpreter grades a step in seconds."""
import importlib
import re

import pytest

from course_utils import grade
from course_utils.grade._card import FAILED, PASSED
import lab_kernels_6 as k

dsg = importlib.import_module("course_utils.grade.decode_step")   # grade.decode_step is the grader itself


@pytest.fixture
def lean(monkeypatch):
    # the wrong steps fail the first row; the rows after it would only spend the interpreter's time
    for row in ("_low_precision", "_greedy_row", "_kernels"):
        monkeypatch.setattr(dsg, row, lambda *a: None)


def _card_of(fn):
    with pytest.raises(grade.GradeFailed) as e:
        grade.decode_step(fn)
    return e.value.card


@pytest.mark.parametrize("right", [k.step, k.step_cublas])
def test_accepts_correct_steps(right, monkeypatch):
    # right, but neither captured in a CUDA graph nor tuned: on a GPU their speed is not the point (the
    # solution notebook's step is timed against the targets there)
    monkeypatch.setattr(dsg, "_performance", lambda *a: None)
    g = grade.decode_step(right)
    assert all(r.status != FAILED for r in g.card.rows), g.card.text()
    assert sum(r.status == PASSED for r in g.card.rows) >= 4


def test_the_stub_fails_and_points_to_hint_1():
    card = _card_of(k.step_stub)
    judged = [r for r in card.rows if r.status != "not measured"]
    assert judged and all(r.status == FAILED for r in judged)
    assert "still the stub" in card.rows[0].diagnosis
    assert re.search(r"See hint 1 \(", card.rows[0].diagnosis), card.rows[0].diagnosis


@pytest.mark.parametrize("wrong, message, hint", [
    (k.step_cache_not_updated, r"K and V never reach the cache", 1),
    (k.step_cache_copy, r"the logits are right, but layer 0's K of the new token is not in the cache at pos\[b\] "
                        r"after the step \(the slot is still zero\)", 1),
    (k.step_rope_off_by_one, r"RoPE turns q and k by the angle of position pos \+ 1", 1),
    (k.step_gqa_interleaved, r"query head h reads KV head h % H_kv", 1),
    (k.step_eps_outside, r"eps belongs inside the root", 2),
    (k.step_residual_dropped, r"the residual stream is dropped", 2),
])
def test_rejects_with_its_diagnosis_and_hint(wrong, message, hint, lean):
    card = _card_of(wrong)
    row = card.rows[0]
    assert row.status == FAILED and re.search(message, row.diagnosis), card.text()
    assert f"See hint {hint} (" in row.diagnosis, row.diagnosis


def test_a_step_with_eager_pieces_is_over_the_kernel_budget():
    card = _card_of(k.step_two_kernels)
    row = next(r for r in card.rows if r.name == "kernels per step")
    assert row.status == FAILED and "kernels per step for 2 layers" in row.diagnosis, card.text()
    assert all(r.status != FAILED for r in card.rows if r is not row)
