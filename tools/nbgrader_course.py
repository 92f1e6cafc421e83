#!/usr/bin/env python3
"""Make the course an nbgrader course: the labs graded by their scorecards, the lessons released ungraded.

    python tools/nbgrader_course.py                 write build/nbgrader/ (source/ and nbgrader_config.py)
    python tools/nbgrader_course.py --course DIR    write the course folder elsewhere
    python tools/nbgrader_course.py --labs-only     the labs alone
    python tools/nbgrader_course.py collect FOLDER [--student-from folder|filename] [--assignment NAME]
                                                    put the students' notebooks, however they came, into
                                                    submitted/<student>/<assignment>/ for autograde

then, in that folder, nbgrader as usual (it prints these lines with the PATH nbgrader needs):

    nbgrader generate_assignment lab1_swiglu        release/lab1_swiglu/: the student version
    nbgrader autograde lab1_swiglu --create         grade submitted/<student>/lab1_swiglu/
    nbgrader export                                 grades.csv

What goes into source/<assignment>/<assignment>.ipynb, from solutions/labs/ (and solutions/):
* the cells of the student version (tools/generate.py: the Colab cells, hints as buttons, `spoiler`
  cells folded, `solution-only` cells left out), except that a cell with an exercise holds the solution,
  its `### BEGIN SOLUTION: hint` markers kept: an nbgrader solution cell. `nbgrader generate_assignment`
  stubs it with the course's own rule (the hint in the stub; `pass` inside a @triton.jit function), so
  the released notebook is the course's student notebook, through CourseStubs in nbgrader_config.py;
* a lab's `check` cell, the one call to its grader, becomes two autograded test cells: the first shows
  the scorecard and scores the lab's correctness points, the second its speed points, as the card's own
  score line states them (course_utils/grade/_points.py: the weights, the same on every machine, and the
  rule, correct before fast: speed points only for a kernel whose correctness and budget rows all passed,
  and only where a GPU measured them; on a machine without one the speed cell says so and scores 0);
* every other cell is read-only: autograde puts back the original of any that a student changed.
A lesson has no test cell: released, it is the lesson; autograded, it scores nothing.

`collect` is the step between gathering the students' notebooks and `nbgrader autograde`. A notebook may
come as the released nbgrader notebook, as the Colab badge's copy of labs/ (no nbgrader metadata, no cell
ids, saved as "Copy of lab1_swiglu.ipynb"), renamed by a browser ("lab1_swiglu (1).ipynb") or downloaded
from the hub. It is matched to its released assignment by its exercise cells (the released notebook's
solution cells): by cell id where the id survived, else by the names the stub defines (`def swiglu`), else
by the stub's own text, else by its place between the read-only cells around it. It is written as the
released notebook, its nbgrader metadata and read-only cells, with the student's exercise cells put in
(and any code cell the student added beside one). A notebook that cannot be matched gets an error that
names what is missing and what to do, and nothing is written for it: never a silent 0.
"""
from __future__ import annotations

import argparse
import ast
import copy
import difflib
import functools
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import generate as gen  # noqa: E402  (tools/generate.py: the student version of a notebook)


def _load_points():
    """course_utils/grade/_points.py, each lab's points (the one place they are written), read from this
    checkout without importing course_utils, which would bring torch and Triton into nbgrader's process."""
    spec = importlib.util.spec_from_file_location("course_points", ROOT / "course_utils" / "grade" / "_points.py")
    module = sys.modules["course_points"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_points = _load_points()

COURSE = ROOT / "build" / "nbgrader"
COURSE_ID = "feed-the-beast"
SCHEMA = 3
TEST_CELL = '''\
# Autograded by nbgrader (read-only): this lab's scorecard and its correctness points, {points} of the lab's
# {total}: those points times the share of the card's correctness and budget rows that passed (a row not
# measured here counts neither way). The next cell scores its speed points (docs/classroom.md: the rubric).
import contextlib as _contextlib
import sys as _sys

with _contextlib.redirect_stderr(_sys.stdout):   # nbgrader scores 0 for a test cell that writes to stderr
    try:
        _card = {call}.card
    except grade.GradeFailed as _failed:
        _card = _failed.card
_card.score().correctness'''
SPEED_CELL = '''\
# Autograded by nbgrader (read-only): this lab's speed points, {points} of the lab's {total}, from the
# scorecard above: awarded only to a kernel whose correctness and budget rows all passed, times the share
# of its performance rows that met their target. A GPU measures them; without one they are not awarded.
print(_card.score().speed_line)
_card.score().speed'''
SPEED_MARK = "# Autograded by nbgrader (read-only): this lab's speed points"
GRADER_CALL = re.compile(r"_card = (grade\.\w+\([\w., =]*\))\.card")

CONFIG = '''\
# nbgrader's configuration for Feed the Beast, written by tools/nbgrader_course.py (run it again rather
# than edit this file). The labs and lessons are in source/; see that script for what they hold.
import os
import sys

sys.path.insert(0, {tools!r})
import nbgrader_course  # noqa: E402  (the course's stubs for generate_assignment)

c = get_config()  # noqa: F821
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = {course_id!r}
# generate_assignment: the course's stubs (the hint in the stub, `pass` inside a @triton.jit function)
c.GenerateAssignment.preprocessors = nbgrader_course.generate_preprocessors()
# autograde: a lab runs top to bottom, measurements included; a cell of Triton's CPU interpreter is slow
c.Execute.timeout = 900
# a prediction takes its default at once: no one is there to click
os.environ.setdefault("COURSE_HEADLESS", "1")
'''


def nbgrader_command(course: Path, *args: str) -> str:
    """The shell line that runs `nbgrader args` in the course folder with this environment's nbgrader, and
    its `alembic` on the PATH (nbgrader runs it by name: without it, "No such file or directory: 'alembic'")."""
    bin_dir = os.path.dirname(os.path.abspath(sys.executable))
    return (f"cd {shlex.quote(str(course))} && PATH={shlex.quote(bin_dir)}:\"$PATH\" "
            f"nbgrader {' '.join(shlex.quote(a) for a in args)}")


# --- nbgrader's side --------------------------------------------------------------------------------
def course_stubs():
    from nbgrader.preprocessors import ClearSolutions

    class CourseStubs(ClearSolutions):
        """ClearSolutions with the course's stubs (tools/generate.py's stub_source) in code cells."""

        def _replace_solution_region(self, cell, language):
            if cell.cell_type != "code":
                return super()._replace_solution_region(cell, language)
            cell.source, regions = gen.stub_source(cell.source, f"cell {cell.metadata.get('nbgrader', {}).get('grade_id')}")
            return bool(regions)

    return CourseStubs


def generate_preprocessors() -> list:
    """nbgrader's generate_assignment preprocessors, its ClearSolutions swapped for the course's stubs."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearSolutions
    stubs = course_stubs()
    return [stubs if pp is ClearSolutions else pp for pp in GenerateAssignment.class_traits()["preprocessors"].default()]


# --- the source notebooks ---------------------------------------------------------------------------
def meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    m = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": SCHEMA, "solution": solution}
    if points is not None:
        m["points"] = points
    return m


def lab_points(name: str):
    """The lab's points (course_utils/grade/_points.py), or a clear stop where it has none."""
    points = _points.BY_LAB.get(name)
    if points is None:
        raise SystemExit(f"{name}: no points for this lab in course_utils/grade/_points.py; add a LabPoints row "
                         "there (its correctness and speed points, and the work that sets them)")
    return points


def source_notebook(src: Path, lab: bool) -> nbformat.NotebookNode:
    name = src.relative_to(ROOT).as_posix()
    solution = nbformat.read(src, as_version=4)
    student_path = f"{'labs' if lab else 'notebooks'}/{src.name}"
    nb = gen.with_colab_cells(gen.student_notebook(solution, name), gen.release(), student_path)
    original = {c.get("id"): c for c in solution.cells}
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        cid = cell.get("id")
        ran = original.get(cid)
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code" and ran is not None and ran.cell_type == "code" and gen.find_regions(ran.source):
            cell.source = ran.source                    # the solution, markers kept: generate_assignment stubs it
            cell.metadata["nbgrader"] = meta(cid, solution=True)
        elif lab and "check" in tags:
            call = cell.source.strip()
            if not re.fullmatch(r"grade\.\w+\([\w., =]*\)", call):
                raise SystemExit(f"{name}: the `check` cell of a lab is one call, grade.<lab>(fn); it is {call!r}")
            points = lab_points(src.stem)
            cell.source = TEST_CELL.format(call=call, points=points.correctness, total=points.total)
            cell.metadata["nbgrader"] = meta("scorecard", grade=True, locked=True, points=points.correctness)
            cell.metadata["tags"] = [t for t in tags if t != "raises-exception"]
            speed = nbformat.v4.new_code_cell(SPEED_CELL.format(points=points.speed, total=points.total))
            speed.id = f"{cid}-speed"[:64]
            speed.metadata["nbgrader"] = meta("speed", grade=True, locked=True, points=points.speed)
            cells.append(speed)
        else:
            cell.metadata["nbgrader"] = meta(cid, locked=True)
    nb.cells = cells
    return nb


def assignments(labs_only: bool = False) -> list[tuple[Path, bool]]:
    """(solution notebook, is a lab) for each assignment: the labs, then the lessons."""
    out = [(src, True) for src, dst in gen.targets() if dst.parent.name == "labs"]
    if not labs_only:
        out += [(src, False) for src, dst in gen.targets() if dst.parent.name != "labs"]
    return out


def write_course(course: Path = COURSE, labs_only: bool = False) -> list[str]:
    course.mkdir(parents=True, exist_ok=True)
    if (course / "source").exists():
        shutil.rmtree(course / "source")
    written = []
    for src, lab in assignments(labs_only):
        target = course / "source" / src.stem / src.name
        target.parent.mkdir(parents=True)
        nbformat.write(source_notebook(src, lab), target)
        written.append(src.stem)
    (course / "nbgrader_config.py").write_text(
        CONFIG.format(tools=str(ROOT / "tools"), root=str(course.resolve()), course_id=COURSE_ID), encoding="utf-8")
    return written


# --- collecting the students' notebooks -------------------------------------------------------------
class Unmatched(Exception):
    """A notebook that cannot be put into a released assignment; the message says what is missing and
    what to do."""


@dataclass
class Released:
    """A released assignment: its notebook, and which of its cells are exercises (solution cells)."""
    name: str
    path: Path
    nb: nbformat.NotebookNode
    exercises: list[int]


@dataclass
class Match:
    """Where a student's notebook holds each exercise cell of one released assignment."""
    released: Released
    cells: dict = field(default_factory=dict)      # exercise index in the release -> student cell indices
    how: dict = field(default_factory=dict)        # exercise index -> how it was found, in words
    direct: int = 0                                # exercise cells found by id, definitions or stub text
    anchors: int = 0                               # read-only cells found unchanged
    restored: int = 0                              # read-only cells the student changed (autograde restores them)
    left_out: list = field(default_factory=list)   # student's cells that belong to no exercise

    @property
    def missing(self) -> list[int]:
        return [i for i in self.released.exercises if i not in self.cells]

    def rank(self) -> tuple[int, int]:
        return self.direct, self.anchors


def _source(cell) -> str:
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _key(cell) -> tuple:
    """What a cell is, for finding the read-only cells: its type and text; a lab's test cells stand for the
    grader call they make (the labs/ copy has `grade.swiglu(swiglu)` where the release has its test cells)."""
    text = _normal(_source(cell))
    if cell.get("cell_type") == "code":
        call = GRADER_CALL.search(text)
        if call:
            return "code", call[1]
    return cell.get("cell_type"), text


@functools.lru_cache(maxsize=4096)   # a student's cell is asked about once per exercise of every assignment
def _defined(source: str) -> frozenset[str]:
    """The names a cell defines at its top level (functions and classes)."""
    try:
        tree = ast.parse(gen.mask_magics(source.split("\n")))
    except SyntaxError:   # a half-written cell: its def lines still say what it defines
        return frozenset(re.findall(r"^(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", source, re.M))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return frozenset(n.name for n in tree.body if isinstance(n, kinds))


def _stub_texts(source: str) -> list[str]:
    """The hint texts of a stub: NotImplementedError("...") and `pass  # YOUR CODE HERE: ...`."""
    texts = []
    for m in re.finditer(r'NotImplementedError\(("(?:[^"\\]|\\.)*")\)', source):
        with_escapes = m[1]
        try:
            texts.append(json.loads(with_escapes))
        except ValueError:
            texts.append(with_escapes[1:-1])
    texts += [t.strip() for t in re.findall(r"# YOUR CODE HERE:(.*)$", source, re.M)]
    return [t for t in texts if t]


def describe(cell) -> str:
    """An exercise cell as an instructor recognises it: what it defines, or its stub's text."""
    names = sorted(_defined(_source(cell)))
    if names:
        return "the cell that defines " + ", ".join(f"`{n}`" for n in names)
    texts = _stub_texts(_source(cell))
    return f"the cell whose stub says {texts[0]!r}" if texts else f"cell {cell.get('id')}"


def _short(cell) -> str:
    names = sorted(_defined(_source(cell)))
    texts = _stub_texts(_source(cell))
    return ", ".join(names) if names else repr(texts[0]) if texts else str(cell.get("id"))


def released_assignments(course: Path) -> list[Released]:
    out = []
    for folder in sorted((course / "release").glob("*/")):
        path = folder / f"{folder.name}.ipynb"
        if not path.is_file():
            continue
        nb = nbformat.read(path, as_version=4)
        exercises = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution")]
        if exercises:
            out.append(Released(folder.name, path, nb, exercises))
    if not out:
        raise SystemExit(f"collect: no released assignment in {course / 'release'}: release the labs first, e.g.\n"
                         f"  {nbgrader_command(course, 'generate_assignment', 'lab1_swiglu')}")
    return out


def _ids_kept(student: list) -> bool:
    return any(c.get("id") for c in student)


def _alike(a: str, b: str) -> bool:
    """Nearly the same text (a read-only cell the student edited): difflib's ratio, its cheap bounds first."""
    m = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return m.real_quick_ratio() >= 0.8 and m.quick_ratio() >= 0.8 and m.ratio() >= 0.8


def match(released: Released, student: list, forced: bool = False) -> Match:
    """Find each exercise cell of `released` among the student's cells (a list of cells). Unless `forced`
    (the instructor named the assignment), a notebook none of whose exercise cells is found by id, by what it
    defines or by its stub's text is not this assignment, and the search stops there."""
    tcells, found = released.nb.cells, Match(released)
    exercises = released.exercises
    tkeys = [("exercise", i) if i in exercises else _key(c) for i, c in enumerate(tcells)]
    skeys = [_key(c) for c in student]
    anchor = {}   # release index -> student index, for read-only cells found unchanged
    for block in difflib.SequenceMatcher(None, tkeys, skeys, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            anchor[block.a + k] = block.b + k
    found.anchors = len(anchor)
    claimed = set(anchor.values())
    code = [j for j, c in enumerate(student) if c.get("cell_type") == "code" and j not in claimed]
    names = {i: _defined(_source(tcells[i])) for i in exercises}

    def take(i, js, how, direct=True):
        found.cells[i], found.how[i] = list(js), how
        claimed.update(js)
        found.direct += direct

    ids = {c.get("id"): j for j, c in enumerate(student) if c.get("id")}
    for i in exercises:                                           # 1. the cell id survived
        j = ids.get(tcells[i].get("id"))
        if j is not None and j not in claimed and student[j].get("cell_type") == "code":
            take(i, [j], "found by its cell id")
    for i in exercises:                                           # 2. what the stub defines
        if i in found.cells or not names[i]:
            continue
        j = next((j for j in code if j not in claimed and names[i] <= _defined(_source(student[j]))), None)
        if j is not None:
            take(i, [j], "found by what it defines")
    texts = {i: _stub_texts(_source(tcells[i])) for i in exercises}
    for i in exercises:                                           # 3. the stub's own text, unchanged
        own = [t for t in texts[i] if sum(t in texts[k] for k in texts) == 1]
        if i in found.cells or not own:
            continue
        j = next((j for j in code if j not in claimed and any(t in _source(student[j]) for t in own)), None)
        if j is not None:
            take(i, [j], "found by its stub's text")
    if not found.direct and not forced:
        return found
    # a read-only cell the student changed is not theirs to hand in: autograde restores it
    template_ids = {c.get("id") for k, c in enumerate(tcells) if k not in exercises}
    loose = [k for k in range(len(tcells)) if k not in exercises and k not in anchor and tcells[k].cell_type == "code"]
    changed = {j for j in code if j not in claimed and (
        (_ids_kept(student) and student[j].get("id") in template_ids) or
        any(_alike(_source(tcells[k]), _source(student[j])) for k in loose))}
    found.restored = len(changed)
    claimed |= changed
    # 4. its place: the unclaimed code cells between the cells placed around it, in order (exercises that
    # share a place, with no read-only cell between them, take one cell each, the last the rest)
    placed = dict(anchor)
    placed.update({i: js[0] for i, js in found.cells.items()})
    slots = {}
    for i in exercises:
        if i not in found.cells:
            before = max((k for k in placed if k < i), default=None)
            after = min((k for k in placed if k > i), default=None)
            slots.setdefault((before, after), []).append(i)
    for (before, after), pending in slots.items():
        lo = placed[before] if before is not None else -1
        hi = placed[after] if after is not None else len(student)
        js = [j for j in code if lo < j < hi and j not in claimed]
        for n, i in enumerate(pending):
            mine = js[n:n + 1] if n < len(pending) - 1 else js[n:]
            if mine:
                take(i, mine, "found by its place in the notebook", direct=False)
    # an exercise written into another exercise's cell: its stub's definitions are there, or (a stub that
    # defines nothing, such as "your Triton kernels") its neighbour with no read-only cell between was found
    for i in exercises:
        if i in found.cells:
            continue
        host = next((k for k, js in found.cells.items() if js and names[i] and
                     any(names[i] <= _defined(_source(student[j])) for j in js)), None)
        if host is None and not names[i]:
            host = next((k for k in (i - 1, i + 1) if k in exercises and found.cells.get(k)), None)
        if host is not None:
            found.cells[i], found.how[i] = [], f"written in the cell of another exercise ({describe(tcells[host])})"
    # a code cell the student added beside an exercise belongs to it: the nearest exercise before it, or
    # after it, with no read-only cell between
    owner = {j: i for i, js in found.cells.items() for j in js}
    read_only = set(anchor.values()) | changed
    for j in code:
        if j in claimed:
            continue
        i = None
        for step in (-1, 1):
            k = j + step
            while 0 <= k < len(student) and k not in owner and k not in read_only:
                k += step
            if 0 <= k < len(student) and k in owner:
                i = owner[k]
                break
        if i is None:
            found.left_out.append(j)
        else:
            found.cells[i] = sorted(found.cells[i] + [j])
            claimed.add(j)
    return found


def identify(student: list, releases: list[Released], assignment: str | None = None) -> Match:
    """The released assignment the student's cells belong to, or Unmatched saying why none does."""
    if assignment is not None:
        releases = [r for r in releases if r.name == assignment]
        if not releases:
            raise Unmatched(f"--assignment {assignment}: no such released assignment (release/{assignment}/ holds "
                            "none)")
    matches = [match(r, student, forced=assignment is not None) for r in releases]
    if assignment is None:
        matches = [m for m in matches if m.direct]
    if not matches:
        looked = "; ".join(f"{r.name}: " + " | ".join(_short(r.nb.cells[i]) for i in r.exercises) for r in releases)
        raise Unmatched("no exercise cell of any released assignment is in it, by cell id, by what the stubs "
                        f"define or by the stubs' text ({looked}). If it is a lab notebook whose exercise "
                        "cells the student renamed, give its assignment with --assignment NAME.")
    complete = sorted((m for m in matches if not m.missing), key=Match.rank, reverse=True)
    if not complete:
        best = max(matches, key=Match.rank)
        cells = best.released.nb.cells
        have = ", ".join(describe(cells[i]) for i in best.cells) or "none"
        lost = "; ".join(describe(cells[i]) for i in best.missing)
        raise Unmatched(f"it is {best.released.name} (found: {have}) but an exercise cell is missing: {lost}. "
                        f"Ask the student for the notebook with that cell, or copy it from "
                        f"{best.released.path} into theirs, their code in it; then run collect again.")
    if len(complete) > 1 and complete[0].rank() == complete[1].rank():
        names = " and ".join(m.released.name for m in complete if m.rank() == complete[0].rank())
        raise Unmatched(f"it matches {names} equally (the same exercise cells found): give the one it is "
                        "with --assignment NAME.")
    return complete[0]


def normalised(found: Match, student: list) -> nbformat.NotebookNode:
    """The released notebook with the student's exercise cells put in, their outputs left out."""
    nb = copy.deepcopy(found.released.nb)
    for i, js in found.cells.items():
        cell = nb.cells[i]
        cell.source = "\n\n".join(_source(student[j]).rstrip("\n") for j in js) or f"# {found.how[i]}"
        cell.outputs, cell.execution_count = [], None
    return nb


def student_of(path: Path, root: Path, how: str, assignments: list[str]) -> str:
    rel = path.relative_to(root)
    if how == "folder":
        if len(rel.parts) < 2:
            raise Unmatched(f"it lies directly in {root}: with --student-from folder each student's notebooks are "
                            f"in a folder named after the student ({root}/<student>/...); or name the files "
                            "<student>_<anything>.ipynb and use --student-from filename")
        student = rel.parts[0]
    else:
        student = path.stem.split("_", 1)[0] if "_" in path.stem else ""
        if not student or " " in student or any(a.startswith(student + "_") for a in assignments):
            raise Unmatched(f"its file name has no student in it: with --student-from filename files are named "
                            f"<student>_<anything>.ipynb (as an LMS downloads them); rename it, or put it in a "
                            "folder named after the student and use --student-from folder")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._@+-]*", student):
        raise Unmatched(f"{student!r} is not a student id nbgrader takes (letters, digits, . _ @ + -): rename "
                        f"the {'folder' if how == 'folder' else 'file'}")
    return student


def collect(course: Path, submissions: Path, how: str = "folder", assignment: str | None = None):
    """Put every notebook under `submissions` into course/submitted/<student>/<assignment>/<assignment>.ipynb.
    Returns ([(student, assignment, written path, file, Match)], [(file, error)])."""
    if not submissions.is_dir():
        raise SystemExit(f"collect: {submissions} is not a folder: give the folder that holds the students' notebooks")
    releases = released_assignments(course)
    names = [r.name for r in releases]
    found, errors = {}, []
    files = sorted(p for p in submissions.rglob("*.ipynb")
                   if not any(part.startswith(".") for part in p.relative_to(submissions).parts))
    if not files:
        raise SystemExit(f"collect: no .ipynb file under {submissions}")
    for path in files:
        try:
            student = student_of(path, submissions, how, names)
            try:
                nb = nbformat.read(path, as_version=4)
            except Exception as e:   # nbformat's errors vary: JSON, schema, a version it cannot convert
                raise Unmatched(f"it cannot be read as a notebook ({type(e).__name__}: {str(e)[:200]}): ask the "
                                "student for the .ipynb file itself (File > Download), not an export") from None
            m = identify(nb.cells, releases, assignment)
        except Unmatched as e:
            errors.append((path, str(e)))
            continue
        found.setdefault((student, m.released.name), []).append((path, m, nb))
    written = []
    for (student, name), entries in found.items():
        if len(entries) > 1:   # which one to grade is the instructor's call, not a guess
            paths = [str(path.relative_to(submissions)) for path, *_ in entries]
            errors += [(path, f"{student} has {len(entries)} notebooks for {name} ({', '.join(paths)}): keep the "
                              "one to grade and run collect again") for path, *_ in entries]
            continue
        path, m, nb = entries[0]
        target = course / "submitted" / student / name / f"{name}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(normalised(m, nb.cells), target)
        written.append((student, name, target, path, m))
    return written, errors


def collect_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="nbgrader_course.py collect", description=(
        "Put the students' notebooks, however they came (the released notebook, the Colab badge's copy, a "
        "renamed copy, a download from the hub), into submitted/<student>/<assignment>/<assignment>.ipynb "
        "with the released notebook's nbgrader metadata, ready for `nbgrader autograde`."))
    ap.add_argument("submissions", type=Path, help="the folder that holds the students' notebooks")
    ap.add_argument("--course", type=Path, default=COURSE, help="the nbgrader course folder (build/nbgrader)")
    ap.add_argument("--student-from", choices=("folder", "filename"), default="folder",
                    help="folder: <submissions>/<student>/...ipynb (default); filename: <student>_<anything>.ipynb")
    ap.add_argument("--assignment", help="every notebook is this assignment (where its exercise cells were renamed)")
    args = ap.parse_args(argv)
    course = args.course.resolve()
    written, errors = collect(course, args.submissions.resolve(), args.student_from, args.assignment)
    for student, name, target, path, m in written:
        how = "; ".join(f"{describe(m.released.nb.cells[i])}: {m.how[i]}" for i in m.released.exercises)
        notes = ([f"{m.restored} read-only cell{'s' if m.restored > 1 else ''} changed (autograde restores "
                  f"{'them' if m.restored > 1 else 'it'})"] if m.restored else []) + \
                ([f"{len(m.left_out)} added code cell{'s' if len(m.left_out) > 1 else ''} away from any exercise "
                  "left out"] if m.left_out else [])
        print(f"✓ {student}: {path.relative_to(args.submissions.resolve())} -> {target.relative_to(course)} "
              f"({how}{'; ' + '; '.join(notes) if notes else ''})")
    for path, error in errors:
        print(f"✗ {path}: {error}")
    done = sorted({name for _, name, *_ in written})
    if done:
        print("next:\n" + "\n".join(f"  {nbgrader_command(course, 'autograde', name, '--create')}" for name in done))
    if errors:
        print(f"collect: {len(errors)} notebook{'s' if len(errors) > 1 else ''} not collected (above): nothing was "
              "written for them, so autograde would score those students 0. Fix each and run collect again.")
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["collect"]:
        return collect_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="python tools/nbgrader_course.py collect --help: the students' notebooks")
    ap.add_argument("--course", type=Path, default=COURSE, help="the nbgrader course folder (build/nbgrader)")
    ap.add_argument("--labs-only", action="store_true", help="the labs alone, no lesson")
    args = ap.parse_args(argv)
    os.environ.setdefault("COURSE_HEADLESS", "1")
    course = args.course.resolve()
    written = write_course(course, args.labs_only)
    print(f"nbgrader_course: {len(written)} assignments in {course / 'source'}: {', '.join(written)}")
    release = f'for a in {" ".join(written)}; do nbgrader generate_assignment "$a" || break; done'
    bin_dir = os.path.dirname(os.path.abspath(sys.executable))
    print(f"next, to release them: cd {shlex.quote(str(course))} && export PATH={shlex.quote(bin_dir)}:\"$PATH\" && "
          f"{release}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
