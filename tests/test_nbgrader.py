"""The course as an nbgrader course (tools/nbgrader_course.py), run through nbgrader itself:

* `nbgrader generate_assignment` releases the course's student notebooks: every lab and lesson as
  tools/generate.py writes it, a lab's grader call turned into two autograded test cells (correctness
  points, speed points: course_utils/grade/_points.py);
* `collect` puts one right answer to lab 1, come by four routes (the released notebook, the Colab badge's
  copy, a renamed copy, a download from the hub), into the same notebook, cell for cell; that notebook and a
  wrong answer, put through one `nbgrader autograde`, score what the scorecard `course_utils.grade` states
  for the same kernels, graded here directly (so every route scores the same);
* a notebook collect cannot place gets an error that names what is missing.
"""
import copy
import importlib.util
import json
import os
import shutil
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
_points = nbc._points

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


def test_every_lab_has_its_solution_cells_and_two_test_cells_worth_its_points(course):
    for src, lab in nbc.assignments():
        nb = nbformat.read(course / "source" / src.stem / src.name, as_version=4)
        marks = [c.metadata["nbgrader"] for c in nb.cells]
        solutions = [m for m in marks if m["solution"]]
        tests = {m["grade_id"]: m["points"] for m in marks if m["grade"]}
        assert solutions, f"{src.stem}: no solution cell"
        assert all(m["locked"] for m in marks if not m["solution"]), f"{src.stem}: a cell a student may change"
        if lab:   # the chosen weights, not this machine's row count
            points = _points.BY_LAB[src.stem]
            assert tests == {"scorecard": points.correctness, "speed": points.speed}, f"{src.stem}: {tests}"
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
        assert [c.id for c in tests] == [i for c in checks for i in (c, f"{c}-speed")], src.stem
        assert all(f"{c.source.strip()}.card" in t.source for c, t in zip(
            [c for c in want.cells if c.id in checks], tests[::2])), f"{src.stem}: a test cell does not call its grader"
        graded = {c.id for c in tests}
        assert [(i, s) for i, s in code_cells(nb) if i not in graded] == \
               [(i, s) for i, s in code_cells(want) if i not in checks], f"{src.stem}: not the student notebook"
        assert "### BEGIN SOLUTION" not in nbformat.writes(nb), src.stem


def solution_code(source) -> dict[str, str]:
    """The solution of each exercise cell of the course's source notebook, by cell id, markers dropped."""
    return {c.metadata["nbgrader"]["grade_id"]: "\n".join(ln for ln in c.source.split("\n")
                                                          if not (gen.BEGIN.match(ln) or gen.END.match(ln)))
            for c in source.cells if c.metadata["nbgrader"]["solution"]}


def answer(student_nb, source, old: str = RIGHT, new: str = RIGHT):
    """A student notebook (the released one, or the labs/ copy) with its exercise cells written: the
    source's solution, `old` made `new`."""
    sol = solution_code(source)
    nb = copy.deepcopy(student_nb)
    for cell in nb.cells:
        if cell.get("id") in sol:
            assert old in sol[cell.id] or old == new
            cell.source = sol[cell.id].replace(old, new)
    return nb


def via_colab(nb) -> dict:
    """The notebook as Colab saves a copy: nbformat 4.0, no cell ids, its own cell metadata and outputs."""
    raw = json.loads(nbformat.writes(nb))
    raw["nbformat_minor"] = 0
    raw["metadata"] = {"colab": {"provenance": [], "name": f"Copy of {LAB}.ipynb"}, "accelerator": "GPU",
                       "kernelspec": {"name": "python3", "display_name": "Python 3"}}
    for n, cell in enumerate(raw["cells"]):
        del cell["id"]
        cell["metadata"] = {"id": f"cOlAb{n:07d}"}
        if cell["cell_type"] == "code":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ran on a T4\n"]}]
            cell["execution_count"] = n
    return raw


def via_rename(nb):
    """Saved again under a new name after the cells were cut and pasted: every cell id is new."""
    nb = copy.deepcopy(nb)
    for n, cell in enumerate(nb.cells):
        cell.id = f"pasted-{n}"
    return nb


def via_hub(nb):
    """Downloaded from the hub after a run: outputs, a changed read-only cell, a scratch cell at the end."""
    nb = copy.deepcopy(nb)
    nb.metadata["kernelspec"]["display_name"] = "Python 3 (ipykernel)"
    for n, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", text="ran on the hub\n")]
            cell.execution_count = n
    setup = next(c for c in nb.cells if c.cell_type == "code" and "import course_utils" in c.source)
    setup.source += "\nprint('my own line')"
    nb.cells.append(nbformat.v4.new_code_cell("swiglu(torch.ones(3), torch.ones(3))  # trying it out"))
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


def test_every_route_collects_to_one_notebook_that_autograde_scores_as_the_scorecard(course, released, tmp_path,
                                                                                     capsys):
    release = nbformat.read(released / LAB / f"{LAB}.ipynb", as_version=4)
    source = nbformat.read(course / "source" / LAB / f"{LAB}.ipynb", as_version=4)
    labs = nbformat.read(ROOT / "labs" / f"{LAB}.ipynb", as_version=4)     # what the Colab badge and the hub open
    right = answer(labs, source)
    routes = {("by-release", f"{LAB}.ipynb"): answer(release, source),
              ("by-colab", f"Copy of {LAB}.ipynb"): via_colab(right),
              ("by-rename", f"{LAB} (1).ipynb"): via_rename(right),
              ("by-hub", f"Downloads/{LAB}.ipynb"): via_hub(right),
              ("wrong", f"Copy of {LAB}.ipynb"): via_colab(answer(labs, source, RIGHT, WRONG))}
    inbox = tmp_path / "inbox"
    for (student, name), nb in routes.items():
        path = inbox / student / name
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(nb) if isinstance(nb, dict) else nbformat.writes(nb), encoding="utf-8")
    assert nbc.main(["collect", str(inbox), "--course", str(course)]) == 0
    shown = capsys.readouterr().out
    assert "1 read-only cell changed (autograde restores it); 1 added code cell away from any exercise left out" \
        in shown, shown
    assert f"PATH={Path(sys.executable).parent}" in shown and f"nbgrader autograde {LAB} --create" in shown

    collected = {s: (course / "submitted" / s / LAB / f"{LAB}.ipynb").read_text(encoding="utf-8")
                 for s, _ in routes}
    cells = {s: [(c.id, c.cell_type, c.source, c.metadata) for c in nbformat.reads(text, as_version=4).cells]
             for s, text in collected.items()}
    first = cells["by-release"]
    assert [(i, t, m) for i, t, _, m in first] == [(c.id, c.cell_type, c.metadata) for c in release.cells]
    for student in ("by-colab", "by-rename", "by-hub"):   # one notebook, cell for cell: one score
        assert cells[student] == first, f"{student}: collected differently from the released notebook"
        assert collected[student] == collected["by-release"]
    assert cells["wrong"] != first

    for student in ("by-release", "by-rename", "by-hub"):   # autograde runs a notebook twice, as before
        shutil.rmtree(course / "submitted" / student)
    nbgrader(course, "autograde", LAB, "--create")

    from nbgrader.api import Gradebook
    points = _points.BY_LAB[LAB]
    scores, cells_scored = {}, {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in ("by-colab", "wrong"):
            sub = gb.find_submission(LAB, student)
            scores[student] = (sub.score, sub.max_score)
            cells_scored[student] = {g: gb.find_grade(g, LAB, LAB, student).score for g in ("scorecard", "speed")}
    for student in ("by-colab", "wrong"):
        card = scorecard(nbformat.reads(collected[student], as_version=4), tmp_path, student)
        score = card.score()
        assert scores[student] == (score.total, points.total), \
            f"{student}: nbgrader scored {scores[student]}, the scorecard says {score.text()}"
        assert cells_scored[student] == {"scorecard": score.correctness, "speed": score.speed}
        graded = nbformat.read(course / "autograded" / student / LAB / f"{LAB}.ipynb", as_version=4)
        test_cells = [c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade")]
        shown = [" ".join(str(o.get("data", o.get("text", ""))) for o in c.outputs) for c in test_cells]
        assert card.total() in shown[0] and score.text() in shown[0], \
            f"{student}: the autograded notebook does not show its scorecard and its score"
        assert score.speed_line in shown[1]
    from course_utils.environment import INTERPRET, ON_GPU
    if INTERPRET or not ON_GPU:   # the right kernel gets every correctness point and, untimed, no speed point
        assert scores["by-colab"] == (points.correctness, points.total)
        assert cells_scored["by-colab"]["speed"] == 0 and _points.NOT_MEASURED_HERE in score_line(course, "by-colab")
    assert 0 < scores["wrong"][0] < points.correctness        # 4 of 5 rows: 0.8 of the correctness points
    print(f"nbgrader scores (points, out of): {scores}")


def score_line(course: Path, student: str) -> str:
    graded = nbformat.read(course / "autograded" / student / LAB / f"{LAB}.ipynb", as_version=4)
    speed = next(c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "speed")
    return " ".join(o.get("text", "") for o in speed.outputs if o.output_type == "stream")


@pytest.fixture
def scratch(released, tmp_path):
    """A course folder of its own with two released labs: what collect reads, and a submitted/ no other test
    autogrades."""
    course = tmp_path / "course"
    for name in (LAB, "lab5_flash_decoding"):
        shutil.copytree(released / name, course / "release" / name)
    return course


def put(inbox: Path, name: str, nb) -> Path:
    path = inbox / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_a_notebook_collect_cannot_place_gets_an_error_that_says_what_is_missing(scratch, tmp_path, capsys):
    inbox = tmp_path / "inbox"
    put(inbox, "ann/notes.ipynb", nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")]))
    lab5 = nbformat.read(ROOT / "labs" / "lab5_flash_decoding.ipynb", as_version=4)
    lab5.cells = [c for c in lab5.cells if c.id != "lab5-function"]   # the student deleted an exercise cell
    put(inbox, "bob/lab5_flash_decoding.ipynb", lab5)
    lab1 = nbformat.read(ROOT / "labs" / f"{LAB}.ipynb", as_version=4)
    put(inbox, "cat/lab1.ipynb", lab1)
    put(inbox, "cat/lab1 again.ipynb", lab1)                          # two notebooks for one assignment
    put(inbox, f"{LAB} (1).ipynb", lab1)                              # in no student's folder
    assert nbc.main(["collect", str(inbox), "--course", str(scratch)]) == 1
    shown = capsys.readouterr().out
    errors = {line.split(": ", 1)[0].split("/")[-1]: line for line in shown.splitlines() if line.startswith("✗")}
    assert "no exercise cell of any released assignment is in it" in errors["notes.ipynb"]
    assert "(lab1_swiglu: swiglu, swiglu_kernel; lab5_flash_decoding: 'your Triton kernels (as many as you " \
           "need)' | flash_decoding)" in errors["notes.ipynb"]
    assert ("it is lab5_flash_decoding (found: the cell whose stub says 'your Triton kernels (as many as you "
            "need)') but an exercise cell is missing: the cell that defines `flash_decoding`") \
        in errors["lab5_flash_decoding.ipynb"]
    assert "cat has 2 notebooks for lab1_swiglu (cat/lab1 again.ipynb, cat/lab1.ipynb)" in errors["lab1.ipynb"]
    assert "cat has 2 notebooks" in errors["lab1 again.ipynb"]
    assert "lies directly in" in errors[f"{LAB} (1).ipynb"]
    assert "nothing was written for them, so autograde would score those students 0" in shown
    assert not (scratch / "submitted").exists()

    # by file name, as an LMS names downloads; and one notebook that two released assignments fit equally
    inbox = tmp_path / "lms"
    put(inbox, f"dan_12345_{LAB}.ipynb", lab1)
    put(inbox, f"Copy of {LAB}.ipynb", lab1)
    written, errors = nbc.collect(scratch, inbox, "filename")
    assert [(s, a) for s, a, *_ in written] == [("dan", LAB)]
    assert [(p.name, e.split(":")[0]) for p, e in errors] == \
        [(f"Copy of {LAB}.ipynb", "its file name has no student in it")]
    again = scratch / "release" / "lab1_again"
    shutil.copytree(scratch / "release" / LAB, again)
    (again / f"{LAB}.ipynb").rename(again / "lab1_again.ipynb")
    written, errors = nbc.collect(scratch, inbox, "filename")
    assert not written and "it matches lab1_again and lab1_swiglu equally" in errors[1][1], errors
    written, errors = nbc.collect(scratch, inbox, "filename", assignment=LAB)
    assert [(s, a) for s, a, *_ in written] == [("dan", LAB)]
