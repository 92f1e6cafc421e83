#!/usr/bin/env python3
"""Make the course an nbgrader course: the labs graded by their scorecards, the lessons released ungraded.

    python tools/nbgrader_course.py                 write build/nbgrader/ (source/ and nbgrader_config.py)
    python tools/nbgrader_course.py --course DIR    write the course folder elsewhere
    python tools/nbgrader_course.py --labs-only     the labs alone

then, in that folder, nbgrader as usual:

    nbgrader generate_assignment lab1_swiglu        release/lab1_swiglu/: the student version
    nbgrader autograde lab1_swiglu --create         grade submitted/<student>/lab1_swiglu/
    nbgrader export                                 grades.csv

What goes into source/<assignment>/<assignment>.ipynb, from solutions/labs/ (and solutions/):
* the cells of the student version (tools/generate.py: the Colab cells, hints as buttons, `spoiler`
  cells folded, `solution-only` cells left out), except that a cell with an exercise holds the solution,
  its `### BEGIN SOLUTION: hint` markers kept: an nbgrader solution cell. `nbgrader generate_assignment`
  stubs it with the course's own rule (the hint in the stub; `pass` inside a @triton.jit function), so
  the released notebook is the course's student notebook, through CourseStubs in nbgrader_config.py;
* a lab's `check` cell, the one call to its grader, becomes an autograded test cell worth as many
  points as the grader's scorecard has rows this machine measures. Its score is those points times the
  share of measured rows that passed, the ratio the card's own total states ("4 of 5 passed, 1 not
  measured"): on the machine that prepared the course, one point per row passed. A performance row is
  measured only on a GPU, so prepare and grade on the class's GPU machine;
* every other cell is read-only: autograde puts back the original of any that a student changed.
A lesson has no test cell: released, it is the lesson; autograded, it scores nothing.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import generate as gen  # noqa: E402  (tools/generate.py: the student version of a notebook)

COURSE = ROOT / "build" / "nbgrader"
COURSE_ID = "feed-the-beast"
SCHEMA = 3
TEST_CELL = '''\
# Autograded by nbgrader (read-only). The scorecard below is this lab's grade: the cell scores its points
# times the share of the card's measured rows that passed ({points} points: the rows measured where the
# course was prepared). A row not measured here (performance, without a GPU) counts neither way.
import contextlib as _contextlib
import sys as _sys

with _contextlib.redirect_stderr(_sys.stdout):   # nbgrader scores 0 for a test cell that writes to stderr
    try:
        _card = {call}.card
    except grade.GradeFailed as _failed:
        _card = _failed.card
_measured = [_row.status for _row in _card.rows if _row.status != "not measured"]
round({points} * _measured.count("passed") / max(len(_measured), 1), 2)'''

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
def grader_rows(call: str) -> int:
    """How many rows of the grader that `call` ("grade.swiglu(swiglu)") names this machine measures: its
    card for an answer that is still the stub (no kernel runs; each row fails at once)."""
    from course_utils import grade

    def stub(*args, **kwargs):
        raise NotImplementedError("the stub")

    name = call.split("(")[0].split(".")[-1]
    with contextlib.redirect_stdout(io.StringIO()):   # the card it shows is not news
        try:
            card = getattr(grade, name)(stub).card
        except grade.GradeFailed as failed:
            card = failed.card
    return sum(row.status != "not measured" for row in card.rows)


def meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    m = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": SCHEMA, "solution": solution}
    if points is not None:
        m["points"] = points
    return m


def source_notebook(src: Path, lab: bool) -> nbformat.NotebookNode:
    name = src.relative_to(ROOT).as_posix()
    solution = nbformat.read(src, as_version=4)
    student_path = f"{'labs' if lab else 'notebooks'}/{src.name}"
    nb = gen.with_colab_cells(gen.student_notebook(solution, name), gen.release(), student_path)
    original = {c.get("id"): c for c in solution.cells}
    for cell in nb.cells:
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
            points = grader_rows(call)
            cell.source = TEST_CELL.format(call=call, points=points)
            cell.metadata["nbgrader"] = meta("scorecard", grade=True, locked=True, points=points)
            cell.metadata["tags"] = [t for t in tags if t != "raises-exception"]
        else:
            cell.metadata["nbgrader"] = meta(cid, locked=True)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--course", type=Path, default=COURSE, help="the nbgrader course folder (build/nbgrader)")
    ap.add_argument("--labs-only", action="store_true", help="the labs alone, no lesson")
    args = ap.parse_args(argv)
    os.environ.setdefault("COURSE_HEADLESS", "1")
    written = write_course(args.course.resolve(), args.labs_only)
    print(f"nbgrader_course: {len(written)} assignments in {args.course / 'source'}: {', '.join(written)}")
    print(f"next: cd {args.course} && nbgrader generate_assignment <assignment>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
