"""The student edition (tools/student_edition.py, `./course edition`): the repository a class gets.

* it holds no solution code: no line of a solution region or solution-only cell (longer than 20 characters,
  comments no stub shows included) in any file, nothing in a lab even folded, no file named for a solution,
  no solutions/, tests/ or tools/; and the search finds a solution line planted in a module, a notebook's
  cell, a lab's folded cell, and a file named for one, and the tool then commits nothing;
* it is what a student installs and opens: the notebooks as generated, every module of course_utils and its
  hints, a pyproject.toml with the course's dependencies and no test extra, an environment.yml that agrees,
  a README whose Colab link opens this edition at this release, a `course` that opens lesson 00 with the
  course's JupyterLab settings, and a JupyterHub configuration that serves the edition's own notebooks;
* it is a git repository with the release tag, and a later build commits on top without moving the tag.
Building copies files; it executes nothing (about a second here).
"""
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import student_edition as se  # noqa: E402

gen, search = se.gen, se.search
PROJECT = se.project()
STUDENT_REPO = gen.release().repo


@pytest.fixture(scope="module")
def secret():
    return se.secrets()


@pytest.fixture(scope="module")
def edition(tmp_path_factory, secret):
    dest = tmp_path_factory.mktemp("edition") / "feed-the-beast-student"
    t0 = time.perf_counter()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(se, "secrets", lambda: secret)   # the same lines, found once for the module
        assert se.main([str(dest)]) == 0
    print(f"student edition built in {time.perf_counter() - t0:.1f} s")
    return dest


def git(dest: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(dest), *args], capture_output=True, text=True, check=True).stdout.strip()


# --- no solution code ---------------------------------------------------------------------------------
def test_the_edition_holds_no_solution_code(edition, secret):
    assert len(secret) > 200, f"only {len(secret)} solution lines: the search would prove little"
    assert se.problems(edition, secret) == []
    top = {p.name for p in edition.iterdir()}
    assert not top & {"solutions", "tests", "tools"}, top
    assert not (edition / "docs" / "gpu-results" / "notebooks").exists()


def test_the_search_finds_a_planted_solution_line(edition, secret, tmp_path, capsys):
    """A solution line in a module, the stub of lesson 04 swapped for its solution, a lab's answer in a
    folded cell, and a file named for a solution: each is found, and `--check` fails on the copy."""
    copy = tmp_path / "copy"
    shutil.copytree(edition, copy, ignore=shutil.ignore_patterns(".git"))
    assert se.main(["--check", str(copy)]) == 0
    src = nbformat.read(ROOT / "solutions" / "04_fuse_bias_gelu.ipynb", as_version=4)
    cell = next(c for c in src.cells if c.cell_type == "code" and gen.find_regions(c.source))
    lesson_line = sorted(search.solution_lines(nbformat.v4.new_notebook(cells=[cell])) & secret)[-1]
    lab = nbformat.read(ROOT / "solutions" / "labs" / "lab1_swiglu.ipynb", as_version=4)
    lab_cell = next(c for c in lab.cells if c.cell_type == "code" and gen.find_regions(c.source))
    lab_line = sorted(search.solution_lines(nbformat.v4.new_notebook(cells=[lab_cell])) & secret)[-1]

    with open(copy / "course_utils" / "numbers.py", "a", encoding="utf-8") as f:
        f.write(f"\n\ndef _planted():\n    {lesson_line}\n")
    nb_path = copy / "notebooks" / "04_fuse_bias_gelu.ipynb"
    nb = nbformat.read(nb_path, as_version=4)
    stub = next(c for c in nb.cells if "stub" in c.metadata.get("tags", []))
    stub.source = cell.source
    nbformat.write(nb, nb_path)
    lab_path = copy / "labs" / "lab1_swiglu.ipynb"
    nb = nbformat.read(lab_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("def folded():\n    " + lab_line, metadata={"tags": ["spoiler"]}))
    nbformat.write(nb, lab_path)
    (copy / "labs" / "lab1_solution.py").write_text("# nothing here but the name\n")

    found = se.problems(copy, secret)
    assert f"course_utils/numbers.py: {lesson_line}" in found
    assert f"notebooks/04_fuse_bias_gelu.ipynb: {lesson_line}" in found
    assert f"labs/lab1_swiglu.ipynb: {lab_line}" in found
    assert "labs/lab1_solution.py: its name says solution" in found
    capsys.readouterr()
    assert se.main(["--check", str(copy)]) == 1
    assert lesson_line in capsys.readouterr().err


def test_a_build_that_would_hold_a_solution_commits_nothing(tmp_path, monkeypatch, capsys, secret):
    line = sorted(secret)[0]
    write = se.write

    def leaky(dest):
        files = write(dest)
        (dest / "course_utils" / "leak.py").write_text(line + "\n")
        return files
    monkeypatch.setattr(se, "write", leaky)
    monkeypatch.setattr(se, "secrets", lambda: secret)
    dest = tmp_path / "edition"
    assert se.build(dest) == 1
    assert "nothing committed" in capsys.readouterr().err and not (dest / ".git").exists()


# --- what a student installs and opens ------------------------------------------------------------------
def test_the_notebooks_and_course_utils_are_the_courses(edition):
    for folder in se.COPIED:
        names = sorted(p.name for p in (ROOT / folder).glob("*.ipynb"))
        assert names and names == sorted(p.name for p in (edition / folder).iterdir())
        for name in names:
            assert (edition / folder / name).read_bytes() == (ROOT / folder / name).read_bytes()
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "course_utils"], capture_output=True, text=True)
    if tracked.returncode or not tracked.stdout.strip():   # a copy of the tree whose git index is not this one's
        pytest.skip("not a git checkout (or an empty index): no list of course_utils' files to compare with")
    copied = sorted(p.relative_to(edition).as_posix() for p in (edition / "course_utils").rglob("*") if p.is_file())
    assert copied == sorted(tracked.stdout.split())


def test_its_pyproject_and_environment_install_the_course_without_the_tests(edition):
    data = gen.tomllib.loads((edition / "pyproject.toml").read_text(encoding="utf-8"))
    proj = data["project"]
    assert proj["dependencies"] == PROJECT["project"]["dependencies"]
    assert (proj["name"], proj["version"]) == (PROJECT["project"]["name"], PROJECT["project"]["version"])
    assert list(proj["optional-dependencies"]) == ["hub"]
    assert proj["urls"] == {"Repository": f"https://github.com/{STUDENT_REPO}"}
    assert data["tool"]["setuptools"] == PROJECT["tool"]["setuptools"]
    env = (edition / "environment.yml").read_text(encoding="utf-8").split("  - pip:\n")[1]
    pip = [ln.strip()[2:] for ln in env.splitlines() if ln.strip().startswith("- ")]
    assert pip == proj["dependencies"] + ["-e ."]


def test_its_readme_opens_lesson_00_of_this_edition_in_colab(edition):
    readme = (edition / "README.md").read_text(encoding="utf-8")
    link = f"https://colab.research.google.com/github/{STUDENT_REPO}/blob/v{PROJECT['project']['version']}/notebooks/00_setup.ipynb"
    assert link in readme and "./course lab" in readme
    assert "solutions/" not in readme and "./course test" not in readme
    for name in [p.stem for folder in se.COPIED for p in (edition / folder).glob("*.ipynb")]:
        assert f"`{name}`" in readme, f"README.md does not list {name}"


def fake_venv(edition: Path, venv: Path) -> None:
    """A set-up .venv as `./course setup` leaves it (its stamp), whose jupyter prints what it was given."""
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("#!/bin/sh\nexit 0\n")
    (venv / "bin" / "jupyter").write_text('#!/bin/sh\necho "$@"\necho "config: $JUPYTER_CONFIG_PATH"\n')
    for tool in ("python", "jupyter"):
        (venv / "bin" / tool).chmod(0o755)
    want = hashlib.sha256((edition / "pyproject.toml").read_bytes() + (edition / "course").read_bytes())
    (venv / ".course-stamp").write_text(want.hexdigest()[:16] + "\n")


def test_its_course_opens_lesson_00_with_the_courses_settings(edition, tmp_path):
    venv = tmp_path / "venv"
    fake_venv(edition, venv)
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_CONFIG_PATH"} | {"COURSE_VENV": str(venv)}
    run = lambda *args: subprocess.run(["./course", *args], cwd=edition, env=env, capture_output=True, text=True)  # noqa: E731
    first, second = run("lab"), run()
    assert first.returncode == 0, first.stderr
    assert f"lab --ServerApp.root_dir={edition} --ServerApp.file_to_run={edition}/notebooks/00_setup.ipynb" in first.stdout
    assert f"config: {edition}/jupyter\n" in first.stdout
    assert second.returncode == 0 and second.stdout.startswith("lab") and "file_to_run" not in second.stdout
    helped, wrong = run("--help"), run("test")
    assert helped.returncode == 0 and "lab" in helped.stdout and "setup" in helped.stdout
    assert wrong.returncode == 2 and "usage: ./course [lab|setup]" in wrong.stderr


def test_its_hub_serves_the_editions_own_notebooks(edition, tmp_path):
    """jupyter/hub/jupyterhub_config.py, as copied, points at the edition: its settings and, on a student's
    first start, a copy of its lessons and labs in the student's home."""
    from traitlets.config import Config
    c, path = Config(), edition / "jupyter" / "hub" / "jupyterhub_config.py"
    scope = {"get_config": lambda: c, "__file__": str(path)}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), scope)
    assert scope["COURSE"] == edition
    assert c.Spawner.environment["JUPYTER_CONFIG_PATH"] == str(edition / "jupyter")
    home = tmp_path / "ada"
    c.Spawner.pre_spawn_hook(SimpleNamespace(home_dir=str(home), user=SimpleNamespace(name="ada")))
    for folder in se.COPIED:
        assert sorted(p.name for p in (home / scope["WORKDIR"] / folder).glob("*.ipynb")) == \
            sorted(p.name for p in (edition / folder).glob("*.ipynb"))


# --- a git repository, ready to push ----------------------------------------------------------------------
def test_it_is_one_commit_tagged_with_the_release(edition):
    assert git(edition, "status", "--porcelain") == ""
    assert git(edition, "rev-list", "--count", "HEAD") == "1"
    assert git(edition, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(edition, "rev-parse", f"v{PROJECT['project']['version']}^{{commit}}") == git(edition, "rev-parse", "HEAD")


def test_a_later_build_commits_on_top_and_leaves_the_tag(edition, tmp_path, monkeypatch, capsys, secret):
    monkeypatch.setattr(se, "secrets", lambda: secret)
    dest = tmp_path / "again"
    shutil.copytree(edition, dest, symlinks=True)
    first = git(dest, "rev-parse", "HEAD")
    (dest / "stray.txt").write_text("a file the source does not have\n")
    assert se.build(dest) == 0 and "nothing changed" in capsys.readouterr().out
    assert git(dest, "rev-parse", "HEAD") == first and not (dest / "stray.txt").exists()
    monkeypatch.setattr(se, "README", se.README + "\nA line added since.\n")
    assert se.build(dest) == 0
    assert "already names an earlier build" in capsys.readouterr().err
    assert git(dest, "rev-list", "--count", "HEAD") == "2"
    assert git(dest, "rev-parse", f"v{PROJECT['project']['version']}^{{commit}}") == first


def test_it_refuses_a_folder_it_did_not_write(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine\n")
    assert se.main([str(tmp_path)]) == 1
    assert "not a student edition built before" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").exists()
