"""predict: headless it never blocks and never calls input(); every reveal is logged; the scoreboard reads the log."""
import builtins
import json

import pytest

from course_utils import numbers, predict


@pytest.fixture(autouse=True)
def _headless(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_HEADLESS", "1")
    monkeypatch.setenv("COURSE_PREDICTIONS", str(tmp_path / "p.jsonl"))
    monkeypatch.setattr(builtins, "input", lambda *a: pytest.fail("predict called input()"))
    monkeypatch.setattr(predict, "_asked", [])
    return tmp_path / "p.jsonl"


def _log(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_number_with_a_default_measures_at_once_and_logs(_headless, capsys):
    p = predict.number("t.copy", "How many ms?", lambda: 4.0, unit="ms", default=2.0)
    assert (p.guess, p.measured) == (2.0, 4.0)
    out = capsys.readouterr().out
    assert "your guess 2 ms · measured 4 ms · off by ×2" in out
    (entry,) = _log(_headless)
    assert {k: entry[k] for k in ("key", "question", "guess", "measured", "unit")} == \
        {"key": "t.copy", "question": "How many ms?", "guess": 2.0, "measured": 4.0, "unit": "ms"}
    assert "time" in entry


def test_a_guess_in_code_wins_over_default_and_is_headless_even_without_the_env(monkeypatch, capsys):
    monkeypatch.delenv("COURSE_HEADLESS")
    p = predict.number("t.g", "q", lambda: 1.0, guess=10, default=2.0)
    assert p.guess == 10 and p.measured == 1.0 and "off by ×10" in capsys.readouterr().out


def test_no_guess_still_shows_the_measurement(capsys):
    p = predict.number("t.none", "q", lambda: 3.0, unit="GB/s")
    assert p.guess is None and p.measured == 3.0
    assert "no guess recorded · measured 3 GB/s" in capsys.readouterr().out


def test_a_model_is_labelled_as_such(capsys):
    predict.number("t.model", "q", lambda: 0.5, default=1, label="MODEL (H100 datasheet)")
    out = capsys.readouterr().out
    assert "MODEL (H100 datasheet) 0.5" in out and "measured" not in out


def test_choice(_headless, capsys):
    p = predict.choice("t.c", "Which?", ["memory-bound", "compute-bound"], lambda: "memory-bound",
                       default="compute-bound")
    assert p.measured == "memory-bound" and "not this time" in capsys.readouterr().out
    with pytest.raises(ValueError):
        predict.choice("t.c2", "Which?", ["a", "b"], lambda: "a", guess="c")


def test_scoreboard_reads_the_log(_headless):
    predict.number("s.close", "q", lambda: 3.0, default=2.0)     # within 2x
    predict.number("s.far", "q", lambda: 100.0, default=1.0)
    predict.number("s.none", "q", lambda: 1.0)
    predict.choice("s.pick", "q", ["a", "b"], lambda: "b", guess="b")
    board = predict.scoreboard()
    rows = {r["key"]: r for r in board.rows}
    assert rows["s.close"]["close"] is True and rows["s.far"]["close"] is False
    assert rows["s.none"]["close"] is None and rows["s.pick"]["close"] is True
    assert "2 of 4 close" in repr(board) and "<table>" in board._repr_html_()
    assert "not scored" not in repr(board)
    assert [r["key"] for r in predict.scoreboard(prefix="s.f").rows] == ["s.far"]


def test_a_guess_against_a_model_is_shown_but_not_scored(_headless):
    """On a CPU a reveal may be the model the question quotes, and the headless default equals it: no hit."""
    predict.number("m.model", "q", lambda: 1.07, default=1.07, label="MODEL (instruction count)")
    predict.number("m.far", "q", lambda: 100.0, default=1.0)
    board = predict.scoreboard()
    rows = {r["key"]: r for r in board.rows}
    assert rows["m.model"]["close"] is None and rows["m.model"]["modelled"]
    assert "model, not scored" in repr(board)
    assert "0 of 1 close (counts: within 3%; other numbers: within 2x; choices: right); 1 revealed by a model, not scored" in repr(board)


def test_a_count_is_close_only_when_it_is_exact(_headless):
    """Bytes per element or programs in a grid have one right answer: 8 against 16 is a miss, not 'within 2x'."""
    predict.number("c.half", "q", lambda: 16, default=8, label="counted")
    predict.number("c.exact", "q", lambda: 16, default=16.0, label="counted")
    predict.number("c.timed", "q", lambda: 16.0, default=8, label="measured")
    rows = {r["key"]: r for r in predict.scoreboard().rows}
    assert rows["c.half"]["close"] is False and rows["c.exact"]["close"] is True
    assert rows["c.timed"]["close"] is True


@pytest.mark.parametrize("guess, count, close", [
    (20, 20.33, True),    # lesson 05: the by-hand 20·M·N, counted with weight, bias and statistics at 32 x 96
    (32, 32.17, True),    # lesson 06: 32·M·N, counted with one value per row at 16 x 96
    (16, 20.33, False),   # lesson 05's usual miss: h's write, or its read back, forgotten
    (40, 32.17, False),   # lesson 06's usual miss: five full passes
    (2, 2.33, False),     # lesson 07: lesson 04's ratio carried over
    (23, 24, False),      # an off-by-one count of masked lanes (lesson 03)
    (3, 4, False),        # an off-by-one count of programs (lesson 03)
])
def test_one_rule_scores_every_lessons_counts(guess, count, close):
    """A count is close within COUNT_TOLERANCE: the small tensors of a counting size are in, an off-by-one is out,
    and the scoreboard of every lesson says so in the same words."""
    assert predict._close(predict._ratio(guess, count), "counted") is close
    assert predict.RULE.startswith("counts: within 3%")


def test_scoreboard_without_a_log():
    assert "no predictions" in repr(predict.scoreboard())


def test_the_widgets_lock_on_commit_and_measure_on_reveal(monkeypatch):
    """The live-notebook path, driven by clicking the buttons in code."""
    pytest.importorskip("ipywidgets")
    monkeypatch.setattr(predict, "_interactive", lambda guess: True)
    import IPython.display
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: None)
    measured = []
    p = predict.number("w.n", "q", lambda: measured.append(1) or 8.0, unit="ms", default=1.0)
    w = p._widgets
    assert p.guess is None and p.measured is None and w["reveal"].disabled
    assert w["entry"].value == ""                 # empty: the default does not anchor the guess
    w["entry"].value = "four"
    w["commit"].click()
    assert p.guess is None and w["reveal"].disabled  # not a number: nothing committed
    w["entry"].value = "4"
    w["commit"].click()
    assert p.guess == 4.0 and w["entry"].disabled and not w["reveal"].disabled and not measured
    w["reveal"].click()
    assert p.measured == 8.0 and measured == [1] and p.ratio == 2.0


def test_a_guess_shows_as_typed_and_a_measurement_without_an_exponent(capsys):
    p = predict.number("t.typed", "q", lambda: 2147483648, unit="B", default=2000)
    assert "your guess 2000 B · measured 2,150,000,000 B" in capsys.readouterr().out
    assert p.yours() == "your guess: 2000 B"
    assert numbers.typed(0.00001) == "0.00001" and numbers.typed(2.5) == "2.5"
    assert numbers.readable(0.716) == "0.716" and numbers.readable(717.3) == "717"


def test_a_later_cell_can_always_print_the_guess(monkeypatch):
    """Live, Run All passes the widgets with nothing committed: the guess is None, and saying so
    must not raise (f"{p.guess:g}" did, in lesson 03)."""
    pytest.importorskip("ipywidgets")
    monkeypatch.setattr(predict, "_interactive", lambda guess: True)
    import IPython.display
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: None)
    p = predict.number("w.none", "q", lambda: 1.0, unit="%", default=5.0)
    assert p.guess is None and "no guess committed" in p.yours()
    assert "not revealed yet" in p.line()


def test_the_scoreboard_names_what_was_asked_and_not_revealed(monkeypatch):
    pytest.importorskip("ipywidgets")
    predict.number("b.done", "q", lambda: 2.0, default=1.0)
    monkeypatch.setattr(predict, "_interactive", lambda guess: True)
    import IPython.display
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: None)
    predict.number("b.open", "q", lambda: 1.0, default=5.0)
    board = predict.scoreboard()
    assert [r["key"] for r in board.rows] == ["b.done"]
    assert "1 prediction asked here and not revealed yet (b.open)" in repr(board)
    assert "b.open" in board._repr_html_()


def test_a_large_miss_reads_without_an_exponent(capsys):
    predict.number("t.miss", "q", lambda: 3100.0, unit="ms", default=1.0)
    assert "off by ×3,100" in capsys.readouterr().out
