"""The course as an nbgrader course (tools/nbgrader_course.py), run through nbgrader itself:

* `nbgrader generate_assignment` releases the course's student notebooks: every lab and lesson as
  tools/generate.py writes it, a lab's grader call turned into an autograded test cell;
* a right and a wrong answer to lab 1, submitted and put through `nbgrader autograde`, score the points
  that the scorecard `course_utils.grade` prints for the same kernels, graded here directly.
"""
import copy
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("nbgrader", reason="nbgrader is not installed (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("course_nbgrader", ROOT / "tools" / "nbgrader_course.py")
nbc = sys.modules["course_nbgrader"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nbc)
gen = nbc.gen

LAB = "lab1_swiglu"
# A realistic wrong answer: sigmoid written as e^g / (1 + e^g), which overflows to inf / inf = NaN for
# large gates (the lab warns about it); every other row of the card still passes.
RIGHT, WRONG = "tl.sigmoid(g)", "(tl.exp(g) / (1 + tl.exp(g)))"


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    bin_dir = str(Path(sys.executable).parent)   # nbgrader runs `alembic` from the PATH
    env = dict(os.environ, COURSE_HEADLESS="1", PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("nbgrader")
    nbc.write_course(course)
    return course


def code_cells(nb) -> list[tuple[str, str]]:
    return [(c.get("id"), c.source) for c in nb.cells if c.cell_type == "code"]


def student_version(src: Path, folder: str):
    nb = gen.student_notebook(nbformat.read(src, as_version=4), src.relative_to(ROOT).as_posix())
    return gen.with_colab_cells(nb, gen.release(), f"{folder}/{src.name}")


def test_every_lab_has_its_solution_cells_and_a_test_cell_worth_its_card(course):
    for src, lab in nbc.assignments():
        nb = nbformat.read(course / "source" / src.stem / src.name, as_version=4)
        marks = [c.metadata["nbgrader"] for c in nb.cells]
        solutions = [m for m in marks if m["solution"]]
        tests = [m for m in marks if m["grade"]]
        assert solutions, f"{src.stem}: no solution cell"
        assert all(m["locked"] for m in marks if not m["solution"]), f"{src.stem}: a cell a student may change"
        if lab:
            assert len(tests) == 1 and tests[0]["points"] >= 3, f"{src.stem}: {tests}"
        else:
            assert not tests, f"{src.stem}: a lesson stays ungraded"


@pytest.fixture(scope="module")
def released(course, tmp_path_factory):
    """Every assignment through `nbgrader generate_assignment`, in this process (nbgrader's API, with the
    course's generated nbgrader_config.py): a second each, where the command takes five."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    path = os.environ.get("PATH", "")
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + path   # nbgrader runs `alembic`
    try:
        config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
        api = NbGraderAPI(CourseDirectory(config=config), config=config)
        for src, _ in nbc.assignments():
            result = api.generate_assignment(src.stem, force=True)
            assert result["success"], f"generate_assignment {src.stem}:\n{result.get('error', '')[-3000:]}"
    finally:
        os.environ["PATH"] = path
    return course / "release"


def test_generate_assignment_releases_the_courses_student_notebooks(released):
    for src, lab in nbc.assignments():
        nb = nbformat.read(released / src.stem / src.name, as_version=4)
        want = student_version(src, "labs" if lab else "notebooks")
        tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        checks = [c.id for c in want.cells if "check" in c.metadata.get("tags", [])] if lab else []
        assert len(tests) == len(checks) and [c.id for c in tests] == checks, src.stem
        assert all(f"{c.source.strip()}.card" in t.source for c, t in zip(
            [c for c in want.cells if c.id in checks], tests)), f"{src.stem}: the test cell does not call its grader"
        assert [(i, s) for i, s in code_cells(nb) if i not in checks] == \
               [(i, s) for i, s in code_cells(want) if i not in checks], f"{src.stem}: not the course's student notebook"
        assert "### BEGIN SOLUTION" not in nbformat.writes(nb), src.stem


def answer(released, source, old: str = RIGHT, new: str = RIGHT):
    """The released notebook with its solution cells written: the source's solution, `old` made `new`."""
    sol = {c.metadata["nbgrader"]["grade_id"]: c for c in source.cells if c.metadata["nbgrader"]["solution"]}
    nb = copy.deepcopy(released)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in sol:
            lines = sol[grade_id].source.split("\n")
            cell.source = "\n".join(ln for ln in lines if not (gen.BEGIN.match(ln) or gen.END.match(ln)))
            assert old in cell.source or old == new
            cell.source = cell.source.replace(old, new)
    return nb


def scorecard(nb, tmp_path: Path, name: str):
    """The lab's grader run here, directly, on the kernel that notebook `nb` writes: its card."""
    from course_utils import grade
    code = "\n\n".join(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    module = tmp_path / f"{name}.py"   # Triton reads a kernel's source from its file
    module.write_text("import torch\nimport triton\nimport triton.language as tl\n\n" + code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"answer_{name}", module)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        return grade.swiglu(mod.swiglu).card
    except grade.GradeFailed as failed:
        return failed.card


def test_autograde_scores_what_the_scorecard_says(course, released, tmp_path):
    released = nbformat.read(released / LAB / f"{LAB}.ipynb", as_version=4)
    source = nbformat.read(course / "source" / LAB / f"{LAB}.ipynb", as_version=4)
    answers = {"right": answer(released, source), "wrong": answer(released, source, RIGHT, WRONG)}
    for student, nb in answers.items():
        target = course / "submitted" / student / LAB / f"{LAB}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)
    nbgrader(course, "autograde", LAB, "--create")

    from nbgrader.api import Gradebook
    points = next(c.metadata["nbgrader"]["points"] for c in source.cells if c.metadata["nbgrader"]["grade"])
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in answers:
            sub = gb.find_submission(LAB, student)
            scores[student] = (sub.score, sub.max_score)
    for student, nb in answers.items():
        card = scorecard(nb, tmp_path, student)
        measured = [r.status for r in card.rows if r.status != "not measured"]
        expected = round(points * measured.count("passed") / len(measured), 2)
        assert scores[student] == (expected, points), \
            f"{student}: nbgrader scored {scores[student]}, the scorecard says {card.total()} -> {expected}"
        graded = nbformat.read(course / "autograded" / student / LAB / f"{LAB}.ipynb", as_version=4)
        test_cell = next(c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade"))
        shown = " ".join(str(o.get("data", o.get("text", ""))) for o in test_cell.outputs)
        assert card.total() in shown, f"{student}: the autograded notebook does not show its scorecard"
    assert scores["right"] == (points, points)
    assert 0 < scores["wrong"][0] < points
    print(f"nbgrader scores (points, out of): {scores}")
