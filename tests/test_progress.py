"""progress: a bar when someone watches; otherwise silence for quick loops and a log line for slow ones."""
import pytest

from course_utils import environment, progress


def test_headless_quick_loop_prints_nothing(capsys):
    assert list(progress.steps([1, 2, 3], "quick")) == [1, 2, 3]
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


def test_headless_slow_loop_logs_where_it_is(monkeypatch, capsys):
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)
    assert list(progress.steps("abc", "timing")) == ["a", "b", "c"]
    err = capsys.readouterr().err
    assert "[timing: 1/3 done" in err and "[timing: 2/3 done" in err and "3/3" not in err


def test_live_shows_a_bar_that_follows_the_steps(monkeypatch):
    pytest.importorskip("ipywidgets")
    monkeypatch.setattr(environment, "live", lambda: True)
    import IPython.display
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda w: shown.append(w))
    seen = []
    for k in progress.steps([1, 2, 4], "k sweep", show=lambda k: f"k={k}"):
        bar = shown[0]
        seen.append((bar.value, bar.description))
    assert seen == [(0, "k sweep: k=1"), (1, "k sweep: k=2"), (2, "k sweep: k=4")]
    assert bar.value == bar.max == 3 and bar.bar_style == "success" and "done in" in bar.description


def test_nothing_to_do():
    assert list(progress.steps([], "empty")) == []
