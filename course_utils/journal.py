"""The student's log: one JSON object a line, one file per student for every lesson and lab.

predict appends a line for every guess committed and every reveal (it has a "key"; a committed guess not
yet revealed has "measured": null), hints one for every hint opened (a "hint"), the checks one for every
verdict (a "check"). Every line carries "student" (the id, "" when unnamed) and "time". The scoreboard
and the calibration picture read it back; an instructor reads the class's logs with class_logs().

Where it lives (path()): the file COURSE_PREDICTIONS names (the course's JupyterHub sets it); on Colab,
the student's Drive when it is mounted, else the runtime's disk, which Colab forgets when the runtime
stops (keep() then downloads it); elsewhere predictions.jsonl in the course folder (the folder holding
notebooks/ and labs/), so lessons and labs share it, or in the working folder outside a course folder
(an nbgrader assignment's folder, which `nbgrader submit` then collects with the notebook).

Where a class folder exists (COURSE_CLASS_DIR, set by the hub), every append also rewrites the student's
copy there, <class>/<student>.jsonl, through a temporary file and a rename, so a reader never sees half
a line. This module imports nothing of the course at the top: everything else builds on it.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import stat
import sys
import tempfile
import warnings
from pathlib import Path

LOG = "predictions.jsonl"
COLAB_CONTENT = Path("/content")      # Colab's working folder (the tests point it at a folder of theirs)
COLAB_FOLDER = "feed-the-beast"       # the log's folder, in Drive or in the runtime
_said: set[str] = set()               # what say_once() already said in this process
_asked = False                        # the name box was shown in this process


# --- where ----------------------------------------------------------------------------------------
def on_colab() -> bool:
    return "google.colab" in sys.modules


def _drive() -> Path:
    return COLAB_CONTENT / "drive" / "MyDrive"


def course_root(start: Path | None = None) -> Path:
    """The folder holding both notebooks/ and labs/, walking up from `start` (the working folder, which in
    Jupyter is the notebook's); `start` itself when there is none above it."""
    start = Path.cwd() if start is None else Path(start)
    for folder in (start, *start.parents):
        if (folder / "notebooks").is_dir() and (folder / "labs").is_dir():
            return folder
    return start


def path() -> Path:
    """The one log of this student (see the module's docstring for where)."""
    named = os.environ.get("COURSE_PREDICTIONS")
    if named:
        return Path(named).expanduser()
    if on_colab():
        runtime = COLAB_CONTENT / COLAB_FOLDER / LOG
        if not _drive().is_dir():
            return runtime
        kept = _drive() / COLAB_FOLDER / LOG
        if runtime.exists():          # Drive mounted after the first guesses: those move to Drive
            _move_into(runtime, kept)
        return kept
    return course_root() / LOG


def _move_into(runtime: Path, kept: Path) -> None:
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        with kept.open("a", encoding="utf-8") as f:
            f.write(runtime.read_text(encoding="utf-8"))
        runtime.unlink()
        name = _name_file(runtime)
        if name.exists() and not _name_file(kept).exists():
            name.replace(_name_file(kept))
    except OSError as err:
        say_once(f"the log on Colab's disk ({runtime}) could not move to your Drive ({kept}): {err}")


def say_once(text: str) -> None:
    """A problem that must not stop the lesson, said once a process (on stderr: a notebook shows it)."""
    if text not in _said:
        _said.add(text)
        print(text, file=sys.stderr)


# --- who ------------------------------------------------------------------------------------------
def _name_file(log: Path) -> Path:
    return log.with_name(log.stem + ".student")


def student() -> str:
    """The student's id: COURSE_STUDENT if set; on a JupyterHub the hub user; else the name this student
    typed once (remembered next to the log); else "" (unnamed). In a live notebook where the course chose
    the log's place (not the hub, not a test), the first prediction shows a box that asks for it."""
    for var in ("COURSE_STUDENT", "JUPYTERHUB_USER"):
        if os.environ.get(var, "").strip():
            return os.environ[var].strip()
    try:
        remembered = _name_file(path()).read_text(encoding="utf-8").strip()
    except OSError:
        remembered = ""
    if remembered:
        return remembered
    _ask()
    return ""


def _at_a_cell() -> bool:
    """Is the kernel running a cell (not a button's callback, whose output would land in that widget)?"""
    try:
        from IPython import get_ipython
        return get_ipython().kernel.get_parent()["header"]["msg_type"] == "execute_request"
    except Exception:   # no kernel, or one that keeps its messages otherwise: do not ask
        return False


def _ask() -> None:
    global _asked
    # An explicit COURSE_PREDICTIONS means the log's owner is set up elsewhere (the hub, a test's kernel)
    if _asked or os.environ.get("COURSE_PREDICTIONS") or "ipykernel" not in sys.modules:
        return
    from . import environment
    if not environment.live() or not _at_a_cell():
        return
    _asked = True
    import html

    import ipywidgets as w
    from IPython.display import display
    log = path()
    box = w.Text(value="", placeholder="name or student id", layout=w.Layout(width="14em"))
    save = w.Button(description="Save name")
    note = w.HTML("")

    def on_save(_):
        name = box.value.strip()
        if not name:
            note.value = "type a name first"
            return
        try:
            _name_file(log).parent.mkdir(parents=True, exist_ok=True)
            _name_file(log).write_text(name + "\n", encoding="utf-8")
        except OSError as err:
            note.value = html.escape(f"not saved ({err}): your log stays unnamed")
            return
        box.disabled = save.disabled = True
        note.value = html.escape(f"saved: your guesses are logged as {name}'s from now on", quote=False)

    save.on_click(on_save)
    display(w.VBox([w.HTML("Who is guessing? Your name or student id, as your instructor wants it: it goes "
                           f"into your log ({html.escape(str(log))}) with each guess. Leave it empty to stay "
                           "unnamed."), w.HBox([box, save]), note]))


# --- writing --------------------------------------------------------------------------------------
def append(entry: dict) -> None:
    """Add one entry, stamped with the student and the time; where a class folder is set, rewrite the
    student's copy there too. A folder that cannot be written must not stop the lesson: it is said once."""
    if not isinstance(entry, dict):
        raise TypeError("journal.append takes a dict, e.g. {'key': '00.copy', 'guess': 1.0}, "
                        f"not {type(entry).__name__}")
    who = student()
    entry = {**entry, "student": who, "time": datetime.datetime.now().isoformat(timespec="seconds")}
    log = path()
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, default=str) + "\n")
        written = True
    except OSError as err:
        say_once(f"your log {log} could not be written ({err.strerror or err}): this session's guesses are not kept")
        written = False
    folder = os.environ.get("COURSE_CLASS_DIR", "").strip()
    if folder:
        _copy_to_class(Path(folder).expanduser(), who, entries() + ([] if written else [entry]))


def file_name(student_id: str) -> str:
    """The class folder's file name of a student id (what a file name may not hold replaced by _)."""
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", student_id).lstrip(".")[:100]


def _copy_to_class(folder: Path, who: str, items: list[dict]) -> None:
    name = file_name(who)
    if not name:
        say_once(f"no student id (set COURSE_STUDENT): nothing goes to the class folder {folder}")
        return
    # A folder one may read but not write is an instructor's view of the class (the hub's group): an
    # instructor's own guesses stay out of it.
    if folder.is_dir() and not os.access(folder, os.W_OK) and os.access(folder, os.R_OK | os.X_OK):
        return
    text = "".join(json.dumps(e, default=str) + "\n" for e in items)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, 0o640)     # the instructors' group may read it, no one else (see the hub's config)
            os.replace(tmp, folder / f"{name}.jsonl")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as err:
        say_once(f"the class folder {folder} could not be written ({err.strerror or err}): your guesses stay "
                 "in your own log")


# --- reading --------------------------------------------------------------------------------------
def _read(file: Path) -> list[dict]:
    """Every JSON object of the file, in order; a line that is not one is skipped. OSError if unreadable."""
    out = []
    for line in file.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            out.append(e)
    return out


def entries() -> list[dict]:
    """This student's entries in the order written (a line of another named student is left out)."""
    try:
        found = _read(path())
    except OSError:
        return []
    who = student()
    return [e for e in found if not who or e.get("student") in (None, "", who)]


def keep() -> Path:
    """The last cell of every notebook: where the log is kept, in one line. On Colab without Drive
    mounted, it also downloads the log, since the runtime's disk is lost when the runtime stops."""
    log = path()
    n = len(entries())
    if not log.exists():
        print("no guesses or hints logged yet: nothing to keep")
    elif on_colab() and not os.environ.get("COURSE_PREDICTIONS") and not log.is_relative_to(_drive()):
        from google.colab import files
        files.download(str(log))
        print(f"Your log ({n} entries) is downloading to your computer as {log.name}: Colab loses {log} when "
              "the runtime stops. Keep that file (hand it in with a lab if asked); to keep one log across "
              "notebooks, mount your Drive (Files, then Mount Drive) before the first prediction.")
    else:
        where = "your Drive, " if on_colab() and log.is_relative_to(_drive()) else ""
        print(f"Your log: {n} entries in {where}{log}")
    return log


# --- the class --------------------------------------------------------------------------------------
_NBGRADER = ("submitted", "autograded", "feedback")   # nbgrader's <folder>/<student>/<assignment>/ layout


def _place_id(file: Path, where: Path) -> tuple[str, str]:
    """(an id the file's place gives, how sure): nbgrader's student folder or a <student>.jsonl name
    ("sure": it wins over the entries' own "student"), else the folder holding a predictions.jsonl
    ("folder": the entries' own id wins over it), else ("", "")."""
    inside = file.relative_to(where).parts if where.is_dir() else (file.name,)
    parts = ((where.name,) if where.is_dir() else ()) + inside
    for i, part in enumerate(parts[:-2]):
        if part in _NBGRADER:
            return parts[i + 1], "sure"
    if not file.stem.startswith("predictions"):     # a download may be "predictions (1).jsonl"
        return file.stem, "sure"
    return (inside[-2], "folder") if len(inside) >= 2 else ("", "")


def _forged(file: Path, sid: str) -> bool:
    """In a shared sticky folder (the hub's), a file named after an account must be that account's own."""
    try:
        import pwd
        return file.stat().st_uid not in (0, pwd.getpwnam(sid).pw_uid)
    except (ImportError, KeyError, OSError):
        return False


def _log_files(where: Path) -> tuple[list[Path], list[str]]:
    if where.is_file():
        return [where], []
    unreadable: list[str] = []
    files = []
    def say(err):
        unreadable.append(f"{err.filename} ({err.strerror})")
    for folder, dirs, names in os.walk(where, onerror=say):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))    # .ipynb_checkpoints and the like
        files += [Path(folder) / n for n in sorted(names) if n.endswith(".jsonl") and not n.startswith(".")]
    return files, unreadable


def class_logs(where=None) -> dict[str, list[dict]]:
    """Every student's entries, keyed by student id, sorted by id; each student's in time order, a line
    found twice (the same log collected twice) kept once, every entry's "student" set to its key.

    where: the class folder (default: COURSE_CLASS_DIR, which the course's hub sets); or a folder of
    collected logs, read through all its subfolders: nbgrader's submitted/<student>/<assignment>/
    predictions.jsonl, files named <student>.jsonl, or any *.jsonl whose entries carry "student"; or one
    log file. Lines that are not JSON objects are skipped; a file that cannot be read is named in one
    warning. Where the folder may not be listed (a student's view of the hub's class folder), only this
    student's own file is read."""
    if where is None:
        where = os.environ.get("COURSE_CLASS_DIR", "").strip()
        if not where:
            raise ValueError("no class folder: pass one, class_logs('path/to/folder'), or set COURSE_CLASS_DIR "
                             "(the course's JupyterHub sets it for every server)")
    where = Path(where).expanduser()
    if not where.exists():
        raise FileNotFoundError(f"{where} does not exist: give the class folder, a folder of collected logs "
                                "(e.g. nbgrader's submitted/), or one log file")
    if where.is_dir() and not os.access(where, os.R_OK):
        own = where / f"{file_name(student())}.jsonl"
        warnings.warn(f"{where} may not be listed from this account (only the instructors may): "
                      f"reading only {own.name}", stacklevel=2)
        files, unreadable = ([own] if student() and own.is_file() else []), []
    else:
        files, unreadable = _log_files(where)
    sticky = where.is_dir() and bool(where.stat().st_mode & stat.S_ISVTX)
    # {student: {line: [entry, times]}}: a line found in several files (the same log collected twice, by
    # nbgrader's submitted/ and autograded/) counts as often as in the file holding it most
    by_student: dict[str, dict[str, list]] = {}
    for file in files:
        try:
            found = _read(file)
        except OSError as err:
            unreadable.append(f"{file} ({err.strerror or err})")
            continue
        place, sure = _place_id(file, where)
        if sticky and file.parent == where and _forged(file, place):
            unreadable.append(f"{file} (not written by the account {place}: left out)")
            continue
        names = {str(e["student"]) for e in found if e.get("student")}
        one_name = next(iter(names)) if len(names) == 1 else ""   # also the file's unnamed entries'
        here: dict[tuple[str, str], list] = {}
        for e in found:
            sid = place if sure == "sure" else (str(e.get("student") or "") or one_name or place)
            e = {**e, "student": sid}
            here.setdefault((sid, json.dumps(e, sort_keys=True, default=str)), [e, 0])[1] += 1
        for (sid, line), (e, times) in here.items():
            kept = by_student.setdefault(sid, {}).setdefault(line, [e, 0])
            kept[1] = max(kept[1], times)
    if unreadable:
        warnings.warn("could not read: " + "; ".join(unreadable), stacklevel=2)
    return {sid: sorted((e for e, times in lines.values() for _ in range(times)), key=lambda e: str(e.get("time", "")))
            for sid, lines in sorted(by_student.items())}
