"""The student's log (course_utils.journal): one file for every lesson and lab, the student's id from each
source, Colab's places for it (google.colab and the Drive faked), the copy in a class folder written
whole (a reader never sees half a line), and the class's logs read back from a class folder or from
collected submissions."""
import json
import os
import sys
import threading
import types

import pytest

from course_utils import journal, predict


@pytest.fixture(autouse=True)
def _clean(monkeypatch, tmp_path):
    for var in ("COURSE_PREDICTIONS", "COURSE_STUDENT", "JUPYTERHUB_USER", "COURSE_CLASS_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COURSE_HEADLESS", "1")
    monkeypatch.setattr(journal, "_said", set())
    monkeypatch.setattr(journal, "_asked", False)
    monkeypatch.setattr(predict, "_asked", [])
    monkeypatch.chdir(tmp_path)


def course(tmp_path):
    for folder in ("notebooks", "labs"):
        (tmp_path / "course" / folder).mkdir(parents=True)
    return tmp_path / "course"


def lines(path):
    return [json.loads(ln) for ln in path.read_text().splitlines()]


# --- one log --------------------------------------------------------------------------------------
def test_lessons_and_labs_share_one_log_and_the_calibration_reads_both(tmp_path, monkeypatch):
    root = course(tmp_path)
    monkeypatch.chdir(root / "notebooks")              # Jupyter runs a notebook in its folder
    assert journal.path() == root / "predictions.jsonl"
    predict.number("03.bytes", "q", lambda: 8.0, default=4.0)
    monkeypatch.chdir(root / "labs")
    assert journal.path() == root / "predictions.jsonl"
    predict.number("lab1.ms", "q", lambda: 1.0, default=1.5)
    monkeypatch.chdir(root / "notebooks")
    assert [e["key"] for e in journal.entries()] == ["03.bytes", "lab1.ms"]
    assert "from lessons 03, lab1" in predict.calibration().summary()   # lesson 09's "all lessons"
    assert all(e["student"] == "" and e["time"] for e in lines(root / "predictions.jsonl"))


def test_outside_a_course_folder_the_log_is_in_the_working_folder_and_the_env_wins(tmp_path, monkeypatch):
    (tmp_path / "release" / "lab1_swiglu").mkdir(parents=True)      # an nbgrader assignment's folder
    monkeypatch.chdir(tmp_path / "release" / "lab1_swiglu")
    assert journal.path() == tmp_path / "release" / "lab1_swiglu" / "predictions.jsonl"
    monkeypatch.setenv("COURSE_PREDICTIONS", str(tmp_path / "mine" / "p.jsonl"))
    journal.append({"hint": "demo", "tier": 1})
    assert journal.path() == tmp_path / "mine" / "p.jsonl" and len(lines(journal.path())) == 1
    with pytest.raises(TypeError, match="takes a dict"):
        journal.append("a guess")


# --- who ------------------------------------------------------------------------------------------
def test_the_student_id_from_each_source(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_PREDICTIONS", str(tmp_path / "p.jsonl"))
    assert journal.student() == ""                               # headless, nothing set: unnamed, not asked
    (tmp_path / "p.student").write_text("ana\n")                 # typed once, remembered beside the log
    assert journal.student() == "ana"
    monkeypatch.setenv("JUPYTERHUB_USER", "hub-ana")
    assert journal.student() == "hub-ana"
    monkeypatch.setenv("COURSE_STUDENT", "s123")
    assert journal.student() == "s123"
    journal.append({"key": "k", "guess": 1})
    journal.append({"key": "k", "guess": 2, "student": "someone else"})  # the journal stamps it, not the caller
    assert [e["student"] for e in lines(tmp_path / "p.jsonl")] == ["s123", "s123"]


def test_entries_are_this_students(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_PREDICTIONS", str(tmp_path / "p.jsonl"))
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(e) for e in [
        {"key": "old"}, {"key": "a", "student": "ana"}, {"key": "b", "student": "bo"}]) + "\nnot json\n")
    monkeypatch.setenv("COURSE_STUDENT", "ana")
    assert [e["key"] for e in journal.entries()] == ["old", "a"]
    monkeypatch.delenv("COURSE_STUDENT")
    assert [e["key"] for e in journal.entries()] == ["old", "a", "b"]    # unnamed: the whole file


def test_live_and_unnamed_the_first_prediction_asks_once_and_the_name_is_kept(tmp_path, monkeypatch):
    pytest.importorskip("ipywidgets")
    import ipykernel  # noqa: F401  (a kernel's process has it)
    import IPython.display

    from course_utils import environment
    root = course(tmp_path)
    monkeypatch.chdir(root / "notebooks")
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.extend(a))
    monkeypatch.setattr(environment, "live", lambda: True)
    monkeypatch.setattr(journal, "_at_a_cell", lambda: True)
    assert journal.student() == "" and journal.student() == ""
    (ui,) = shown                                               # asked once in this process
    text, save = ui.children[1].children
    text.value = "  Ana B "
    save.click()
    assert (root / "predictions.student").read_text() == "Ana B\n" and journal.student() == "Ana B"
    assert "logged as Ana B's" in ui.children[2].value


def test_where_the_log_is_set_up_elsewhere_no_one_is_asked(tmp_path, monkeypatch):
    import IPython.display

    from course_utils import environment
    monkeypatch.setenv("COURSE_PREDICTIONS", str(tmp_path / "p.jsonl"))   # the hub's, a test kernel's
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: pytest.fail("asked for a name"))
    monkeypatch.setattr(environment, "live", lambda: True)
    monkeypatch.setattr(journal, "_at_a_cell", lambda: True)
    assert journal.student() == ""


# --- Colab ----------------------------------------------------------------------------------------
@pytest.fixture
def colab(tmp_path, monkeypatch):
    downloads = []
    files = types.ModuleType("google.colab.files")
    files.download = downloads.append
    fake = types.ModuleType("google.colab")
    fake.files = files
    monkeypatch.setitem(sys.modules, "google.colab", fake)
    monkeypatch.setitem(sys.modules, "google.colab.files", files)
    monkeypatch.setattr(journal, "COLAB_CONTENT", tmp_path / "content")
    (tmp_path / "content").mkdir()
    monkeypatch.chdir(tmp_path / "content")
    return downloads


def test_on_colab_without_drive_the_log_is_downloaded_at_the_end(tmp_path, colab, capsys):
    runtime = tmp_path / "content" / "feed-the-beast" / "predictions.jsonl"
    assert journal.path() == runtime
    journal.keep()
    assert colab == [] and "nothing to keep" in capsys.readouterr().out
    predict.number("00.copy", "q", lambda: 2.0, default=1.0)
    capsys.readouterr()
    assert journal.keep() == runtime and colab == [str(runtime)]
    assert "downloading" in capsys.readouterr().out


def test_on_colab_with_drive_the_log_is_in_drive_and_earlier_guesses_move_there(tmp_path, colab, capsys):
    journal.append({"key": "before.mount", "guess": 1})
    (tmp_path / "content" / "feed-the-beast" / "predictions.student").write_text("ana\n")
    (tmp_path / "content" / "drive" / "MyDrive").mkdir(parents=True)       # drive.mount('/content/drive')
    kept = tmp_path / "content" / "drive" / "MyDrive" / "feed-the-beast" / "predictions.jsonl"
    assert journal.path() == kept and journal.student() == "ana"
    journal.append({"key": "after.mount", "guess": 2})
    assert [e["key"] for e in lines(kept)] == ["before.mount", "after.mount"]
    assert not (tmp_path / "content" / "feed-the-beast" / "predictions.jsonl").exists()
    journal.keep()
    out = capsys.readouterr().out
    assert colab == [] and out == f"Your log: 2 entries in your Drive, {kept}\n"


def test_elsewhere_keep_says_where_the_log_is_in_one_line(tmp_path, capsys):
    journal.append({"key": "k", "guess": 1})
    journal.keep()
    assert capsys.readouterr().out == f"Your log: 1 entries in {tmp_path / 'predictions.jsonl'}\n"


# --- the class folder -----------------------------------------------------------------------------
def test_the_class_copy_is_written_whole_and_a_reader_never_sees_half_a_line(tmp_path, monkeypatch):
    own, klass = tmp_path / "own.jsonl", tmp_path / "class"
    klass.mkdir()
    monkeypatch.setenv("COURSE_PREDICTIONS", str(own))
    monkeypatch.setenv("COURSE_CLASS_DIR", str(klass))
    monkeypatch.setenv("COURSE_STUDENT", "ana")
    # a long log: a copy written in place, in pieces, would be caught half written
    own.write_text("".join(json.dumps({"key": f"k{i}", "guess": i, "question": "x" * 200, "student": "ana"}) + "\n"
                           for i in range(1500)))
    copy, seen, done = klass / "ana.jsonl", [], threading.Event()

    def read():
        while not done.is_set():
            try:
                text = copy.read_text()
            except FileNotFoundError:
                continue
            ok = text.endswith("\n") and all(json.loads(ln) for ln in text.splitlines())
            seen.append((ok, text.count("\n")))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(20):
            journal.append({"key": "new", "guess": i})
    finally:
        done.set()
        reader.join()
    partial = sum(not ok for ok, _ in seen)
    assert seen and not partial, f"{partial} of {len(seen)} reads saw a partial file"
    assert lines(copy) == lines(own) and len(lines(copy)) == 1520
    assert oct(copy.stat().st_mode & 0o777) == "0o640" and sorted(p.name for p in klass.iterdir()) == ["ana.jsonl"]


def test_a_class_folder_that_cannot_be_written_does_not_stop_the_lesson(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PREDICTIONS", str(tmp_path / "own.jsonl"))
    monkeypatch.setenv("COURSE_CLASS_DIR", str(tmp_path / "no such folder"))
    monkeypatch.setenv("COURSE_STUDENT", "ana")
    predict.number("t.a", "q", lambda: 1.0, default=1.0)
    predict.number("t.b", "q", lambda: 1.0, default=1.0)
    err = capsys.readouterr().err
    assert err.count("could not be written") == 1 and "your guesses stay in your own log" in err
    assert [e["key"] for e in lines(tmp_path / "own.jsonl")] == ["t.a", "t.b"]


def test_the_class_reads_a_class_folder(tmp_path, monkeypatch):
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "ana.jsonl").write_text('{"key": "a", "guess": 1, "time": "2026-01-01T10:00:01"}\nhalf a li')
    (klass / "bo.jsonl").write_text('{"key": "a", "guess": 9, "student": "bo", "time": "2026-01-01T10:00:00"}\n[1]\n')
    (klass / ".bo.jsonl.x1.tmp").write_text('{"key": "a", "guess": 99}\n')     # a copy being written
    (klass / "cy.jsonl").symlink_to(tmp_path / "gone")                          # cannot be read
    with pytest.raises(ValueError, match="COURSE_CLASS_DIR"):
        journal.class_logs()
    monkeypatch.setenv("COURSE_CLASS_DIR", str(klass))
    with pytest.warns(UserWarning, match="could not read: .*cy.jsonl") as caught:
        logs = journal.class_logs()
    assert len(caught) == 1
    assert logs == {"ana": [{"key": "a", "guess": 1, "time": "2026-01-01T10:00:01", "student": "ana"}],
                    "bo": [{"key": "a", "guess": 9, "student": "bo", "time": "2026-01-01T10:00:00"}]}
    with pytest.raises(FileNotFoundError, match="does not exist"):
        journal.class_logs(tmp_path / "nowhere")


def test_the_class_reads_collected_submissions(tmp_path):
    def log(path, *entries):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    ana = {"key": "lab1.ms", "guess": 2, "student": "Ana B", "time": "2026-01-02T09:00:00"}
    bo = {"key": "lab2.ms", "guess": 3, "student": "", "time": "2026-01-03T09:00:00"}
    hint = {"hint": "lab2.x", "tier": 1, "time": "2026-01-03T09:01:00"}
    nb = tmp_path / "nbgrader"
    log(nb / "submitted" / "ana" / "lab1_swiglu" / "predictions.jsonl", ana)         # nbgrader's id wins
    log(nb / "submitted" / "bo" / "lab2_x" / "predictions.jsonl", bo, hint, hint)   # a hint opened twice
    log(nb / "autograded" / "bo" / "lab2_x" / "predictions.jsonl", bo, hint, hint)  # the same log again
    log(nb / "uploads" / "predictions (1).jsonl", {"key": "00.a", "student": "cy", "time": "1"},
        {"hint": "x", "tier": 2, "time": "2"})                                    # a Colab download, uploaded
    log(nb / "uploads" / "dee" / "predictions.jsonl", {"key": "00.a", "time": "1"})  # a folder per student
    logs = journal.class_logs(nb)
    assert sorted(logs) == ["ana", "bo", "cy", "dee"]
    assert logs["ana"] == [{**ana, "student": "ana"}]
    assert logs["bo"] == [{**bo, "student": "bo"}, {**hint, "student": "bo"}, {**hint, "student": "bo"}]
    assert [e.get("hint") for e in logs["cy"]] == [None, "x"]                # its unnamed entry is cy's too
    assert journal.class_logs(nb / "submitted") == {k: logs[k] for k in ("ana", "bo")}
    assert journal.class_logs(nb / "uploads" / "predictions (1).jsonl") == {"cy": logs["cy"]}


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_in_a_shared_sticky_folder_a_file_not_written_by_its_account_is_left_out(tmp_path):
    import pwd
    account = pwd.getpwuid(1).pw_name                        # an account every Unix has (daemon, bin)
    klass = tmp_path / "class"
    klass.mkdir()
    klass.chmod(0o1733)
    (klass / f"{account}.jsonl").write_text('{"key": "a", "guess": 1}\n')
    os.chown(klass / f"{account}.jsonl", 4242, -1)           # someone else wrote it under that name
    with pytest.warns(UserWarning, match=f"not written by the account {account}"):
        assert journal.class_logs(klass) == {}
