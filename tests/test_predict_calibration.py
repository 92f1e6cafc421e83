"""predict.calibration reads every numeric prediction of every lesson from the log (the latest reveal per key)
and plot.calibration draws guess against revealed, log-log, with the diagonal."""
import json

import matplotlib
import pytest

from course_utils import plot, predict

matplotlib.use("Agg")


@pytest.fixture
def log(monkeypatch, tmp_path):
    path = tmp_path / "p.jsonl"
    monkeypatch.setenv("COURSE_PREDICTIONS", str(path))
    entries = [
        {"key": "01.bytes", "guess": 8, "measured": 16.0, "kind": "number", "label": "counted", "unit": "B"},
        {"key": "01.bytes", "guess": 16, "measured": 16.0, "kind": "number", "label": "counted", "unit": "B"},
        {"key": "04.speedup", "guess": 1.5, "measured": 2.19, "kind": "number", "label": "measured"},
        {"key": "09.mem", "guess": 1, "measured": 8.0, "kind": "number", "label": "MODEL (H100 datasheet)"},
        {"key": "05.which", "guess": "a", "measured": "b", "kind": "choice"},
        {"key": "03.none", "guess": None, "measured": 4.0, "kind": "number"},
        {"key": "03.zero", "guess": 0, "measured": 4.0, "kind": "number"},
    ]
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\nnot json\n")
    return path


def test_latest_numeric_predictions_of_every_lesson(log):
    c = predict.calibration()
    assert [r["key"] for r in c.rows] == ["01.bytes", "04.speedup", "09.mem"]
    first = c.rows[0]
    assert (first["guess"], first["measured"], first["ratio"], first["lesson"]) == (16.0, 16.0, 1.0, "01")
    assert c.rows[2]["ratio"] == 8.0
    text = repr(c)
    assert "3 numeric predictions from lessons 01, 04, 09: of 2 measured or counted, 2 close (100%; a count within 3%, a measurement within 2x)" in text
    assert "1 guessed low, 0 guessed high; 1 revealed by a model (hollow markers), not scored" in text


def test_prefix_and_empty_log(log, monkeypatch, tmp_path):
    assert [r["key"] for r in predict.calibration(prefix="09").rows] == ["09.mem"]
    monkeypatch.setenv("COURSE_PREDICTIONS", str(tmp_path / "missing.jsonl"))
    assert predict.calibration().rows == [] and "no numeric predictions" in repr(predict.calibration())


def test_the_picture_has_the_diagonal_and_one_marker_per_prediction(log):
    ax = predict.calibration().plot()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    xs, ys = ax.lines[0].get_data()
    assert list(xs) == list(ys)                                         # the diagonal
    points = [(x, y) for line in ax.lines[1:] for x, y in zip(*line.get_data())]
    assert sorted(points) == [(1.0, 8.0), (1.5, 2.19), (16.0, 16.0)]
    hollow = [line for line in ax.lines[1:] if line.get_markerfacecolor() == "none"]
    assert len(hollow) == 1                                             # the modelled one


def test_an_empty_picture_says_so():
    ax = plot.calibration([])
    assert "no predictions" in ax.texts[0].get_text()


def test_each_lesson_has_a_colour_and_a_marker_of_its_own_and_a_legend_beside_the_plot():
    """Ten lessons are more than colours alone tell apart (and red against green fails a colour-blind reader):
    each gets an Okabe-Ito colour and a marker, the pair its own; the legend sits outside the axes."""
    from matplotlib.colors import to_hex
    rows = [{"lesson": f"{i:02d}", "guess": 1.0 + i, "measured": 2.0 + i, "modelled": False} for i in range(10)]
    ax = plot.calibration(rows)
    looks = [(to_hex(line.get_color()).upper(), line.get_marker()) for line in ax.lines[1:]]
    assert len(set(looks)) == 10 and {c for c, _ in looks} <= {c.upper() for c in plot.CYCLE}
    assert [t.get_text() for t in ax.get_legend().get_texts()][2:] == [f"lesson {i:02d}" for i in range(10)]
    assert ax.get_legend().get_bbox_to_anchor().x0 > ax.get_position().x1 * ax.figure.bbox.width * 0.9
    assert ax.figure.get_size_inches()[0] >= 9      # as wide as the page's column at 100 dpi, not a thumbnail
