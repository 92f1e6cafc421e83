"""The class's guesses on the instructor's screen (course_utils.classroom) and the after-class pages
(tools/after_class.py), from simulated classes: no kernel, no browser (tests/test_browser.py drives the
reveal in JupyterLab)."""
import json
import math
import sys
from pathlib import Path

import pytest

from course_utils import classroom, journal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import after_class  # noqa: E402

PLANTED = "ada_lovelace_planted"   # a student id that must appear on no page
QUESTION = "fp32, 256 MiB of x: how many times faster than eager is one fused kernel?"


def entry(student, minute, **e):
    return {**e, "student": student, "time": f"2026-11-28T10:{minute:02d}:00"}


def student_id(i: int) -> str:
    return PLANTED if i == 7 else f"s{i:02d}"


def simulated_class(folder: Path, n: int = 30) -> dict[str, list[dict]]:
    """n students' logs as the class folder holds them (<student>.jsonl), lessons 00 and 04, built so that
    every number the pages show is known: see the tests below."""
    folder.mkdir(parents=True, exist_ok=True)
    logs = {}
    for i in range(n):
        s = student_id(i)
        speed = [8.0, 6.0, 10.0][i % 3]           # 04.speedup, measured 2: the class guessed 4x too high
        casts = [1.5, 1.0, 2.0][i % 3]            # 04.fp16_casts, measured 3: 2x too low
        es = [
            entry(s, 0, key="00.cos_bound", question="memory-bound or compute-bound?", kind="choice",
                  guess="compute-bound" if i < 20 else "memory-bound", measured="memory-bound", unit="",
                  label="measured"),
            entry(s, 1, key="04.bytes_eager", question="bytes per element?", kind="number", unit="bytes",
                  guess=16.0 if i % 2 else 15.0, measured=16.0, label="counted (trips.count)"),
            entry(s, 2, key="04.speedup", question=QUESTION if i != 7 else f"{PLANTED} was here", kind="number",
                  unit="×", guess=speed, measured=None, label="measured"),   # committed, not yet revealed
            entry(s, 3, key="04.speedup", question=QUESTION, kind="number", unit="×", guess=speed,
                  measured=2.0, label="measured"),
            entry(s, 4, key="04.fp16_casts", question="fp16 casts outside: how many times as long?",
                  kind="number", unit="×", guess=casts, measured=3.0, label="measured"),
        ]
        if i < 20:
            es.append(entry(s, 5, hint="bias_gelu", tier=1, title="whatever the log says"))
        if i < 8:
            es.append(entry(s, 6, hint="bias_gelu", tier=2, title="t2"))
        if i < 10:      # first failure: tail, then passed
            es += [entry(s, 7, check="bias_gelu", passed=False, diagnosis="tail"),
                   entry(s, 8, check="bias_gelu", passed=True, diagnosis=None)]
        elif i < 15:    # first failure: the stub, then a tail, never passed
            es += [entry(s, 7, check="bias_gelu", passed=False, diagnosis="stub"),
                   entry(s, 8, check="bias_gelu", passed=False, diagnosis="tail")]
        elif i < 20:
            es.append(entry(s, 7, check="bias_gelu", passed=True, diagnosis=None))
        if i == 7:      # the planted student's own words, where a log holds free text: a first failure
            es.insert(-2, entry(s, 6, check="bias_gelu", passed=False, diagnosis=PLANTED))
        (folder / f"{journal.file_name(s)}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in es))
        logs[s] = es
    return logs


@pytest.fixture
def own_log(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_PREDICTIONS", str(tmp_path / "mine.jsonl"))
    monkeypatch.setenv("COURSE_STUDENT", "instructor")
    monkeypatch.delenv("COURSE_CLASS_DIR", raising=False)
    return tmp_path / "mine.jsonl"


# --- the reveal's numbers ---------------------------------------------------------------------------------
def test_median_on_either_scale():
    assert classroom.median([3, 1, 2]) == 2
    assert classroom.median([1, 100]) == 50.5
    assert classroom.median([1, 100], log=True) == pytest.approx(10)
    assert math.isnan(classroom.median([]))


def test_log_scale_only_where_positive_guesses_span_a_factor_of_ten():
    assert classroom.log_scale([0.5, 2, 5])          # 10x
    assert not classroom.log_scale([1, 2, 9.9])
    assert not classroom.log_scale([0, 1, 100])      # a zero has no place on a log axis
    assert not classroom.log_scale([])


def test_close_share_follows_the_course_rule():
    assert classroom.close_share([1, 2, 4, 8, -1], 2.0) == pytest.approx(3 / 5)     # 1, 2, 4 within 2x
    assert classroom.close_share([16, 16.1, 15, 32], 16, "counted (trips)") == pytest.approx(2 / 4)   # within 3%


def test_most_common_wrong_choice_and_ties():
    answers = ["a", "b", "b", "c", "c", "d"]
    assert classroom.wrong_choices(answers, "a") == [("b", 2), ("c", 2)]
    assert classroom.wrong_choices(answers, "b") == [("c", 2)]
    assert classroom.wrong_choices(["a"], "a") == []
    assert classroom.right_share(answers, "c") == pytest.approx(2 / 6)


def test_the_view_of_a_class(tmp_path, own_log):
    simulated_class(tmp_path / "class")
    v = classroom.view("04.speedup", tmp_path / "class", measured=2.0)
    assert v.n == 30 and v.kind == "number" and v.unit == "×"
    assert v.question == QUESTION                      # the class's majority, not one student's words
    assert v.median == 8.0 and not v.log(False) and not v.log(True)   # 2 to 10: under 10x, a linear axis
    assert v.share == 0.0 and v.sides() == (0, 30)
    hidden, shown = v.paragraph(shown=False), v.paragraph(shown=True)
    assert "30 guesses" in hidden and "median 8 ×" in hidden and "2 ×" not in hidden
    assert "behind the button" in hidden
    assert "Measured on this GPU: 2 ×" in shown and "0 of 30 within 2×" in shown and "30 higher" in shown
    c = classroom.view("00.cos_bound", tmp_path / "class", measured="memory-bound")
    assert c.kind == "choice" and c.share == pytest.approx(10 / 30)
    assert "the most common wrong answer: “compute-bound” (20)" in c.paragraph()
    assert "most common wrong" not in c.paragraph(shown=False)
    assert c.png(False)[:4] == b"\x89PNG" and c.png(True, names=True)[:4] == b"\x89PNG"
    assert v.png(True, names=True)[:4] == b"\x89PNG"


def test_the_latest_guess_of_each_student_counts(tmp_path, own_log):
    folder = tmp_path / "class"
    folder.mkdir()
    lines = [entry("a", 1, key="k.q", guess=1.0), entry("a", 2, key="k.q", guess=4.0),
             entry("b", 1, key="k.q", guess="lots"), entry("c", 1, key="k.q", guess=None)]
    for who in "abc":
        (folder / f"{who}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines if e["student"] == who))
    v = classroom.view("k.q", folder)
    assert [(g.student, g.value) for g in v.guesses] == [("a", 4.0)]
    assert any("1 guess that is not a number" in n for n in v.notes), v.notes


def test_the_measurement_is_this_kernels_own_reveal(tmp_path, own_log):
    simulated_class(tmp_path / "class")
    own_log.write_text(json.dumps(entry("instructor", 0, key="04.speedup", guess=3.0, measured=9.0)).replace(
        "2026-11-28", "2001-01-01") + "\n")             # a reveal from another day's kernel: not this one's
    assert classroom.view("04.speedup", tmp_path / "class").measured is None
    journal.append({"key": "04.speedup", "question": QUESTION, "guess": 3.0, "measured": 2.5, "unit": "×",
                    "label": "measured", "kind": "number"})   # what predict logs at a reveal, now
    v = classroom.view("04.speedup", tmp_path / "class")
    assert v.measured == 2.5 and v.label == "measured" and v.me == ""   # the instructor is not in the class
    assert "No measurement" in classroom.view("04.nothing", tmp_path / "class").paragraph()


def test_a_student_sees_their_own_point(tmp_path, own_log, monkeypatch):
    simulated_class(tmp_path / "class")
    monkeypatch.setenv("COURSE_STUDENT", "s03")
    v = classroom.view("04.speedup", tmp_path / "class", measured=2.0)
    assert v.me == "s03" and v.mine.value == 8.0
    # on the hub a student may not list the class folder: their own guess against their own reveal
    monkeypatch.setattr(classroom.os, "access", lambda path, mode: False)
    journal.append({"key": "04.speedup", "question": QUESTION, "guess": 3.0, "measured": 2.5, "unit": "×",
                    "label": "measured", "kind": "number"})
    v = classroom.view("04.speedup", tmp_path / "class")
    assert v.scope == "own" and v.n == 1 and v.mine.value == 3.0 and v.measured == 2.5
    text = v.paragraph()
    assert "your guess 3 ×" in text and "within 2×" in text and "instructor's screen" in text


def test_bad_input_says_what_to_do(tmp_path, own_log):
    with pytest.raises(ValueError, match="prediction's key"):
        classroom.reveal("")
    with pytest.raises(FileNotFoundError, match="class folder"):
        classroom.reveal("04.speedup", where=tmp_path / "nowhere")
    with pytest.raises(ValueError, match="not a number"):
        classroom.view("04.speedup", None, measured="fast")
    with pytest.raises(ValueError, match="every="):
        classroom.reveal("04.speedup", every=-1)
    simulated_class(tmp_path / "c")
    v = classroom.view("04.speedp", tmp_path / "c")
    assert "is the key right? Keys in the logs: 04.bytes_eager, 04.fp16_casts, 04.speedup" in v.paragraph()


def test_headless_prints_one_paragraph(tmp_path, own_log, capsys):
    simulated_class(tmp_path / "class")
    r = classroom.reveal("04.speedup", where=tmp_path / "class", measured=2.0)
    out = capsys.readouterr().out.strip()
    assert "\n" not in out and out == repr(r) and "0 of 30 within 2×" in out


def test_the_widget_hides_then_shows_then_updates(tmp_path, own_log, monkeypatch):
    """The live path without a browser: the button and a new guess, read synchronously (every=0)."""
    pytest.importorskip("ipywidgets")
    simulated_class(tmp_path / "class")
    shown = []
    monkeypatch.setattr(classroom.env, "live", lambda: True)
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.extend(a))
    r = classroom.reveal("04.speedup", where=tmp_path / "class", measured=2.0, every=0)
    text, button = r._widgets["text"], r._widgets["button"]
    assert shown and "behind the button" in text.value and not button.disabled
    hidden_png = r._widgets["picture"].value
    button.click()
    assert "0 of 30 within 2×" in text.value and button.disabled and r._widgets["picture"].value != hidden_png
    (tmp_path / "class" / "s30.jsonl").write_text(json.dumps(entry("s30", 9, key="04.speedup", guess=2.2)) + "\n")
    assert r.refresh() and "31 guesses" in text.value and "1 of 31 within 2×" in text.value
    assert not r.refresh()                              # nothing new: nothing redrawn


# --- after class ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    simulated_class(folder)
    logs = journal.class_logs(folder)          # read back as the tool reads them
    out = folder.parent / "after-class"
    return logs, {p.name: p.read_text() for p in after_class.build(logs, out)}


def test_after_class_names_no_student(pages):
    logs, written = pages
    assert set(written) == {"index.html", "00.html", "04.html"}
    assert PLANTED in logs                                      # the planted id is in the class...
    for name, text in written.items():
        assert PLANTED not in text, name                       # ...and on no page, not even its own words
        for sid in logs:
            assert f">{sid}<" not in text and f" {sid} " not in text, (name, sid)
    assert "a student" in written["04.html"]                    # the planted diagnosis, blanked


def test_after_class_rankings(pages):
    logs, _ = pages
    ex = after_class.exercise_lessons()
    numbers, choices, models = after_class.model_broke(logs, "04", ex)
    assert [r["key"] for r in numbers] == ["04.speedup", "04.fp16_casts", "04.bytes_eager"]
    assert numbers[0]["median_ratio"] == pytest.approx(4.0) and numbers[0]["close"] == 0
    assert numbers[1]["median_ratio"] == pytest.approx(0.5) and numbers[1]["close"] == 20   # 1.5 and 2 of 3
    assert numbers[2]["close"] == 15 and models == 0           # a count: only the exact 16s
    _, choices, _ = after_class.model_broke(logs, "00", ex)
    assert choices == [{"key": "00.cos_bound", "question": "memory-bound or compute-bound?", "n": 30,
                        "right": 10, "wrong": ["compute-bound"], "wrong_n": 20}]
    opened = after_class.hints_opened(logs, "04", ex)
    assert [(r["tier"], r["students"]) for r in opened] == [(1, 20), (2, 8)]
    assert opened[0]["title"] != "whatever the log says"       # the title is the course's, not the log's
    failures = after_class.first_failures(logs, "04", ex)
    assert [(r["diagnosis"], r["students"]) for r in failures][:2] == [("tail", 9), ("stub", 5)]
    assert failures[0]["hint"].startswith("hint ")              # bias_gelu has a hint for a tail
    done, active = after_class.finished(logs, "04", ex)
    assert active == 30 and {"exercise": "bias_gelu", "tried": 20, "finished": 15} in done


def test_after_class_page_reads_right(pages):
    _, written = pages
    page = written["04.html"]
    assert page.index("04.speedup") < page.index("04.fp16_casts") < page.index("04.bytes_eager")
    assert "×4 too high" in page and "×2 too low" in page and "15 of 30 (50%)" in page
    assert "course.css" not in page and ".bd-page-width" in page        # the site's stylesheet, inlined


def test_after_class_tool_says_what_is_missing(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("COURSE_CLASS_DIR", raising=False)
    assert after_class.main([]) == 2 and "COURSE_CLASS_DIR" in capsys.readouterr().err
    assert after_class.main([str(tmp_path / "none")]) == 2 and "does not exist" in capsys.readouterr().err


# --- checks in the log --------------------------------------------------------------------------------------
def test_every_check_call_leaves_one_line(own_log):
    from course_utils import check
    from course_utils.check._core import fail

    def stub(x, y):
        raise NotImplementedError("write vector_add")
    with pytest.raises(check.CheckFailed):
        check.vector_add(stub)                      # a real checker, stopped at the stub before any kernel
    check.showing_verdict("demo", lambda: "fine")()
    with pytest.raises(check.CheckFailed):
        check.showing_verdict("demo", lambda: fail("too many bytes", "bytes"))()
    with pytest.raises(TypeError):
        check.showing_verdict("demo", lambda: 1 + "1")()   # no verdict on the kernel: not passed, no cause
    logged = [{k: e.get(k) for k in ("check", "passed", "diagnosis")} for e in journal.entries()]
    assert logged == [{"check": "vector_add", "passed": False, "diagnosis": "stub"},
                      {"check": "demo", "passed": True, "diagnosis": None},
                      {"check": "demo", "passed": False, "diagnosis": "bytes"},
                      {"check": "demo", "passed": False, "diagnosis": None}]
    assert all(e["student"] == "instructor" and e["time"] for e in journal.entries())
