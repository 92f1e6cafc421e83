"""The scorecard under every lab's grader: a failed check, a crash or the stub fails its own row with a
diagnosis and never stops the rows after it; performance is not measured without a GPU; the budget row
counts with trips; finish() shows the card and raises GradeFailed if a row failed. A lab's card states its
score (grade/_points.py: correct before fast, a wrong kernel never above a right one) and notes its verdict
in the student's log."""
import html

import pytest
import torch
import triton
import triton.language as tl

import course_utils as cu
from course_utils import grade, trips
from course_utils.check import CheckFailed
from course_utils.grade import _card, _points



@pytest.fixture(autouse=True)
def timing_as_a_student_has_it(monkeypatch):
    """These tests play a GPU with made-up measurements: the suite's COURSE_TIMING=off would stop them."""
    monkeypatch.delenv("COURSE_TIMING", raising=False)


def test_the_suites_switch_leaves_speed_rows_not_measured(monkeypatch):
    monkeypatch.setattr(_card, "ON_GPU", True)
    monkeypatch.setattr(_card, "INTERPRET", False)
    monkeypatch.setenv("COURSE_TIMING", "off")
    card = _card.Scorecard("Lab 0")
    assert card.performance("speed", lambda: 2.0, target=1) is None
    assert card.rows[-1].status == "not measured" and "COURSE_TIMING=off" in card.rows[-1].diagnosis

def test_a_card_that_passes_returns_its_total():
    card = grade.Scorecard("Lab 0 · nothing")
    with card.criterion("fp32: matches", target="rtol 1e-5"):
        card.measured(2.5e-7)
    with card.criterion("fp16: matches"):
        pass
    result = card.finish(show=False)
    assert repr(result) == "✓ Lab 0 · nothing: 2 of 2 passed"
    assert [r.status for r in result.rows] == ["passed", "passed"]
    assert "fp32: matches: passed; measured 2.5e-07; target rtol 1e-5" in card.text()


def test_each_failure_is_its_own_row_and_finish_raises_grade_failed(capsys):
    card = grade.Scorecard("Lab 0 · failing")
    with card.criterion("first"):
        raise CheckFailed("the last 3 elements were never written. Is the grid big enough?")
    with card.criterion("second"):
        {}["missing"]
    with card.criterion("third"):
        raise NotImplementedError("h = x + residual")
    with card.criterion("fourth, still run"):
        card.measured("fine")
    with pytest.raises(grade.GradeFailed, match=r"1 of 4 passed\. First failure, first: the last 3 elements"):
        card.finish()
    assert issubclass(grade.GradeFailed, AssertionError)
    shown = capsys.readouterr().out            # the card is printed before the error
    assert "✗ first: failed" in shown and "✓ fourth, still run: passed" in shown
    rows = {r.name: r for r in card.rows}
    assert rows["second"].diagnosis.startswith("crashed: KeyError: 'missing' (in test_each_failure")
    assert "Likely cause" in rows["second"].diagnosis
    assert "still the stub (h = x + residual)" in rows["third"].diagnosis


@triton.jit
def _arange_not_pow2(x_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def _unmasked(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)


def test_a_crashing_kernel_is_diagnosed_with_the_course_hint():
    card = grade.Scorecard("Lab 0 · kernels")
    x = torch.ones(100, device=cu.DEVICE)
    with card.criterion("non-power-of-two block"):
        _arange_not_pow2[(1,)](x, N=100)
    with card.criterion("past the end"):
        with trips.counting():     # on a GPU too: replayed in the bounds-checking interpreter
            card.call(lambda t: _unmasked[(1,)](t, BLOCK=128), x)
    first, second = card.rows
    assert first.status == "failed" and first.diagnosis.startswith("crashed: ")
    assert "power-of-two BLOCK" in first.diagnosis
    assert second.status == "failed" and "outside" in second.diagnosis.lower()


def test_a_cuda_error_stops_the_rows_after_it():
    card = grade.Scorecard("Lab 0 · cuda")
    with card.criterion("crashes"):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    with card.criterion("after"):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    crash, after = card.rows
    assert crash.status == "failed" and "restart the Python kernel" in crash.diagnosis
    assert after.status == "not measured" and after.diagnosis.startswith("not run: the GPU context is broken")


def test_keyboard_interrupt_is_not_swallowed():
    card = grade.Scorecard("Lab 0")
    with pytest.raises(KeyboardInterrupt):
        with card.criterion("interrupted"):
            raise KeyboardInterrupt


def test_performance_is_not_measured_without_a_gpu(monkeypatch):
    monkeypatch.setattr(_card, "ON_GPU", False)
    calls = []
    card = grade.Scorecard("Lab 0 · perf")
    value = card.performance("fp16 at 256 MiB", lambda: calls.append(1) or 99.0, target=90, unit=" % of copy")
    assert value is None and calls == []          # never a CPU time
    (row,) = card.rows
    assert row.status == "not measured" and row.diagnosis.startswith("not measured: no GPU here")
    assert row.target == "≥ 90 % of copy"
    assert repr(card.finish(show=False)) == "✓ Lab 0 · perf: nothing judged, 1 not measured"


@pytest.mark.parametrize("value, higher, status", [(95.0, True, "passed"), (80.0, True, "failed"),
                                                   (0.4, False, "passed"), (1.2, False, "failed")])
def test_performance_on_a_gpu_compares_with_the_target(monkeypatch, value, higher, status):
    monkeypatch.setattr(_card, "ON_GPU", True)
    monkeypatch.setattr(_card, "INTERPRET", False)
    card = grade.Scorecard("Lab 0 · perf")
    target = 90 if higher else 1.0
    got = card.performance("speed", lambda: (value, "0.41 ms"), target=target, higher_is_better=higher,
                           diagnosis="Is BLOCK at least 1024?")
    (row,) = card.rows
    assert got == value and row.status == status and row.measured.endswith("(0.41 ms)")
    if status == "failed":
        assert "short of the target" in row.diagnosis and row.diagnosis.endswith("Is BLOCK at least 1024?")


def test_performance_switched_off_is_not_measured(monkeypatch):
    monkeypatch.setattr(_card, "ON_GPU", True)
    monkeypatch.setattr(_card, "INTERPRET", False)
    card = grade.Scorecard("Lab 0", performance=False)
    assert card.performance("speed", lambda: 1 / 0, target=1) is None
    assert card.rows[-1].diagnosis == "not measured: timing switched off (performance=False)."


def test_performance_while_rehearsing_another_gpus_plan_is_not_measured(monkeypatch):
    """COURSE_PLAN=7.5 on an H100: the T4's dtypes and tiles run there, but the H100's speed is not a T4's."""
    from course_utils import capability, environment
    monkeypatch.setattr(_card, "ON_GPU", True)
    monkeypatch.setattr(_card, "INTERPRET", False)
    monkeypatch.setattr(environment, "DEVICE", "cuda")
    monkeypatch.setattr(environment, "compute_capability", lambda: (9, 0))
    monkeypatch.setattr(environment, "gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    monkeypatch.setenv("COURSE_PLAN", "7.5")
    card = grade.Scorecard("Lab 0")
    with card.criterion("right numbers"):
        pass
    assert card.performance("speed", lambda: 1 / 0, target=1) is None
    assert [r.status for r in card.rows] == ["passed", "not measured"]
    assert card.rows[-1].diagnosis.startswith("not measured: rehearsing the T4's plan")
    monkeypatch.delenv("COURSE_PLAN")
    assert capability.rehearsal() == "" and card.performance("speed", lambda: 2.0, target=1) == 2.0


def test_performance_after_a_failed_row_is_not_measured(monkeypatch):
    monkeypatch.setattr(_card, "ON_GPU", True)
    monkeypatch.setattr(_card, "INTERPRET", False)
    card = grade.Scorecard("Lab 0")
    with card.criterion("wrong"):
        raise CheckFailed("wrong numbers")
    assert card.performance("speed", lambda: 1 / 0, target=1) is None
    assert card.rows[-1].status == "not measured" and "earlier row failed" in card.rows[-1].diagnosis


def test_a_slow_row_does_not_stop_the_next_performance_row(monkeypatch):
    monkeypatch.setattr(_card, "ON_GPU", True)
    monkeypatch.setattr(_card, "INTERPRET", False)
    card = grade.Scorecard("Lab 0")
    assert card.performance("small size", lambda: 0.5, target=1) == 0.5
    assert card.performance("large size", lambda: 2.0, target=1) == 2.0
    assert [r.status for r in card.rows] == ["failed", "passed"]


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def double(x):
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y


def test_budget_counts_launches_and_bytes():
    x = torch.ones(100, device=cu.DEVICE)
    card = grade.Scorecard("Lab 0 · budget")
    t = card.budget("one launch", double, (x,), launches=1, bytes=800)
    assert t.launches == 1 and card.rows[0].status == "passed"
    assert card.rows[0].measured == "1 launch, 800 B" and card.rows[0].target == "≤ 1 launch, ≤ 800 B + 5 % = 840 B"
    assert card.budget("tight", double, (x,), launches=1, bytes=400) is None
    assert "moved 800 bytes; the budget is 400" in card.rows[1].diagnosis
    assert card.budget("eager", lambda x: x * 2 + 1, (x,), launches=1, bytes=800) is None
    assert "2 launches where 1 should do" in card.rows[2].diagnosis
    card.budget("one PyTorch op", lambda x: x * 2, (x,), launches=1, bytes=800)
    assert "not by a Triton kernel of yours" in card.rows[3].diagnosis


def test_measured_outside_a_block_says_where_it_belongs():
    with pytest.raises(RuntimeError, match="inside a `with card.criterion"):
        grade.Scorecard("Lab 0").measured("x")


def test_html_escapes_and_shows_every_column():
    card = grade.Scorecard("Lab <0>")
    with card.criterion("a < b", target="≤ 1"):
        raise CheckFailed("got <3>\nsecond line")
    h = card._repr_html_()
    assert "Lab &lt;0&gt;" in h and "a &lt; b" in h and "<pre" in h and "✗ failed" in h and "0 of 1 passed" in h


def test_a_failed_row_names_the_hint_for_its_diagnosis_and_so_does_grade_failed():
    card = _card.Scorecard("Lab 1 · test", performance=False, hints="lab1.swiglu")
    with card.criterion("overflow"):
        raise CheckFailed("39 of 500 elements are NaN", "nonfinite")   # lab 1's hint 2 addresses it
    with card.criterion("something no hint addresses"):
        raise CheckFailed("odd", "a-key-no-hint-lists")
    assert card.rows[0].diagnosis.endswith("cu.hints.show('lab1.swiglu', 2).")
    assert "See hint" not in card.rows[1].diagnosis
    with pytest.raises(grade.GradeFailed, match=r"(?s)First failure, overflow: 39 of 500.*\nSee hint 2 "):
        card.finish(show=False)


def lab_card(exercise: str, gate: list[str], speed: list[str]) -> grade.Scorecard:
    """A lab's card with rows of fixed statuses: correctness and budget rows, then performance rows."""
    card = _card.Scorecard("Lab · fixed rows", hints=exercise)
    card.rows = [_card.Row(f"gate {n}", status=s) for n, s in enumerate(gate)] + \
                [_card.Row(f"speed {n}", status=s, timed=True) for n, s in enumerate(speed)]
    return card


def test_a_wrong_kernel_never_scores_above_a_right_slow_one():
    """Lab 5 on a GPU: a kernel failing one correctness row (its speed then not measured) against a correct
    kernel that misses every speed target. Counting rows, the first scored 7/8 = 0.88 and the second 8/13."""
    points = _points.BY_EXERCISE["lab5.flash_decoding"]
    wrong = lab_card(points.exercise, ["passed"] * 7 + ["failed"], ["not measured"] * 5).score()
    slow = lab_card(points.exercise, ["passed"] * 8, ["failed"] * 5).score()
    fast = lab_card(points.exercise, ["passed"] * 8, ["passed"] * 4 + ["failed"]).score()
    assert wrong.total == round(points.correctness * 7 / 8, 2) < slow.total == points.correctness < fast.total
    assert fast.speed == points.speed * 4 / 5 and wrong.speed == 0
    assert "awarded only to a kernel whose correctness and budget rows all pass" in wrong.speed_line
    assert slow.speed_line == f"speed 0 of {points.speed}: 0 of 5 performance rows met their target"
    # the worst wrong kernel and the best: one failed row of many, every speed row passed had it been timed
    many = lab_card(points.exercise, ["passed"] * 40 + ["failed"], ["passed"] * 5).score()
    assert many.total < slow.total


def test_without_a_gpu_the_speed_points_are_not_awarded_and_the_card_says_so_in_one_line():
    card = lab_card("lab1.swiglu", ["passed"] * 5 + ["not measured"], ["not measured"])
    score = card.score()
    assert (score.correctness, score.speed, score.points) == (8, 0, 10)   # a row not measured counts neither way
    assert score.speed_line == _points.NOT_MEASURED_HERE == "speed: not measured here, grade on the class's GPU"
    text = card.text()
    assert text.splitlines()[-1] == f"score 8 of 10: correctness 8 of 8; {_points.NOT_MEASURED_HERE}"
    assert html.escape(f"score 8 of 10: correctness 8 of 8; {_points.NOT_MEASURED_HERE}") in card._repr_html_()
    assert grade.Scorecard("Lab 0").score() is None and "score" not in grade.Scorecard("Lab 0").text()
    with pytest.raises(ValueError, match="a count of rows"):
        _points.score(_points.BY_LAB["lab1_swiglu"], gate_passed=-1, gate_failed=0, speed_passed=0,
                      speed_failed=0, speed_rows=1)


def test_every_lab_has_its_points_in_one_place():
    """Each grader's exercise has a row in grade/_points.py, and each row a lab notebook and a grader."""
    import importlib
    import pkgutil
    from pathlib import Path
    exercises = set()
    for mod in pkgutil.iter_modules(grade.__path__):
        if not mod.name.startswith("_"):
            m = importlib.import_module(f"course_utils.grade.{mod.name}")
            exercises.add(getattr(m, "EXERCISE", None) or getattr(m, "HINTS"))
    assert exercises == set(_points.BY_EXERCISE)
    labs = Path(__file__).resolve().parent.parent / "labs"
    assert {p.stem for p in labs.glob("*.ipynb")} == set(_points.BY_LAB)
    assert all(p.correctness > 0 and p.speed > 0 and p.why for p in _points.LABS)


def test_finish_notes_a_labs_verdict_in_the_students_log(monkeypatch, tmp_path):
    from course_utils import journal
    monkeypatch.setenv("COURSE_PREDICTIONS", str(tmp_path / "log.jsonl"))
    lab_card("lab1.swiglu", ["passed"] * 5, ["not measured"]).finish(show=False)
    card = lab_card("lab2.add_rmsnorm", ["passed", "failed", "failed"], ["not measured"])
    with pytest.raises(grade.GradeFailed):
        card.finish(show=False)
    grade.Scorecard("Lab 0 · no lab").finish(show=False)           # a card of no lab is nobody's verdict
    got = [{k: e[k] for k in ("check", "passed", "diagnosis")} for e in journal.entries()]
    assert got == [{"check": "lab1.swiglu", "passed": True, "diagnosis": None},
                   {"check": "lab2.add_rmsnorm", "passed": False, "diagnosis": "gate 1"}]
