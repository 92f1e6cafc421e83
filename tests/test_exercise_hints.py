"""Tiered hints: shown only when asked for, noted in the student's log, counted on the scoreboard, and
named by a failed check whose diagnosis they address."""
import json

import pytest

from course_utils import check, hints, predict
from course_utils.check import CheckFailed
from course_utils.check._core import fail

TIERS = {
    "demo": {"notebook": "solutions/99_demo.ipynb", "hints": [
        {"title": "the idea", "text": "What does one program own?", "addresses": ["stub"]},
        {"title": "the mask", "text": "Which lanes are past the end?", "addresses": ["unwritten", "tail"]},
        {"title": "the recipe", "text": "```\nload, add, store\n```", "addresses": []},
    ]},
}


@pytest.fixture(autouse=True)
def _log(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_HEADLESS", "1")
    monkeypatch.setenv("COURSE_PREDICTIONS", str(tmp_path / "p.jsonl"))
    monkeypatch.setattr(hints, "_all", lambda: TIERS)
    monkeypatch.setattr(hints, "_offered", [])
    monkeypatch.setattr(predict, "_asked", [])
    return tmp_path / "p.jsonl"


def entries(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_offer_shows_no_hint_text_and_logs_nothing(_log, capsys):
    hints.offer("demo")
    out = capsys.readouterr().out
    assert "3 hints for demo" in out and "cu.hints.show('demo', 1)" in out
    assert "What does one program own" not in out and entries(_log) == []


def test_show_prints_one_tier_and_logs_it(_log, capsys):
    hints.show("demo", 2)
    out = capsys.readouterr().out
    assert out.startswith("Hint 2 of 3 for demo: the mask") and "Which lanes" in out
    assert "What does one program own" not in out
    (e,) = entries(_log)
    assert (e["hint"], e["tier"], e["title"]) == ("demo", 2, "the mask") and "time" in e


@pytest.mark.parametrize("n", [0, 4, "1"])
def test_a_tier_that_does_not_exist_says_which_do(n):
    with pytest.raises(ValueError, match="hints 1 to 3"):
        hints.show("demo", n)


def test_an_unknown_exercise_names_the_known_ones():
    with pytest.raises(KeyError, match="exercises with hints: demo"):
        hints.offer("nope")


def test_opened_and_the_scoreboard_count_what_was_asked_for(_log):
    hints.offer("demo")
    hints.show("demo", 1)
    hints.show("demo", 3)
    hints.show("demo", 1)
    assert hints.opened() == {"demo": [1, 3]}
    assert hints.summary() == "hints opened: demo 2 of 3 (hint 1, 3)"
    assert "hints opened: demo 2 of 3" in repr(predict.scoreboard())
    # a prediction's scoreboard ignores the hint lines, and the hint count ignores predictions
    predict.number("t.x", "q", lambda: 2.0, default=1.0)
    board = predict.scoreboard()
    assert [r["key"] for r in board.rows] == ["t.x"] and hints.opened() == {"demo": [1, 3]}


def test_nothing_opened_is_said_too():
    hints.offer("demo")
    assert hints.summary() == "hints opened: demo 0 of 3"


def test_the_pointer_names_the_first_hint_that_addresses_the_diagnosis():
    assert hints.pointer("demo", "tail").startswith("See hint 2 (the mask)")
    assert "cu.hints.show('demo', 2)" in hints.pointer("demo", "unwritten")
    assert hints.pointer("demo", "bytes") == "" and hints.pointer("demo", None) == ""
    assert hints.pointer("unknown", "stub") == ""


def test_a_failed_check_ends_with_the_hint_for_its_diagnosis():
    def demo(fn):
        fn()
        fail("`f`: the last 3 elements were never written", "unwritten")

    wrapped = check.pointing_to_hints("demo", demo)
    with pytest.raises(CheckFailed) as e:
        wrapped(lambda: None)
    assert str(e.value).splitlines()[-1].startswith("See hint 2 (the mask)")
    assert e.value.diagnosis == "unwritten"
    with pytest.raises(ZeroDivisionError):       # anything but a CheckFailed passes through untouched
        wrapped(lambda: 1 / 0)
    unaddressed = check.pointing_to_hints("demo", lambda: fail("too many bytes", "bytes"))
    with pytest.raises(CheckFailed, match=r"^too many bytes$"):
        unaddressed()


def test_every_exported_checker_points_to_its_hints():
    """check.<name> is wrapped; the name is its exercise's (the hints cell's title)."""
    assert check.roofline_time.__wrapped__.__name__ == "roofline_time"


def test_offer_live_shows_a_button_per_hint_and_a_click_opens_and_logs_it(_log, monkeypatch):
    """The live path, without a browser: the widget is built, and pressing Hint 2 shows it and logs it."""
    ipywidgets = pytest.importorskip("ipywidgets")
    shown = []
    monkeypatch.setattr(hints.env, "live", lambda: True)
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: shown.extend(objs))
    hints.offer("demo")
    (box,) = shown
    note, row, out = box.children
    assert isinstance(row, ipywidgets.HBox) and [b.description for b in row.children] == \
        ["Hint 1: the idea", "Hint 2: the mask", "Hint 3: the recipe"]
    assert entries(_log) == []
    row.children[1].click()
    assert [(e["hint"], e["tier"]) for e in entries(_log)] == [("demo", 2)]
