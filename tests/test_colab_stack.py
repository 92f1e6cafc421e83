"""The course on Colab's stack: a virtual environment holding the versions Colab's GPU image has, the course
installed into it the way every notebook's install cell does on Colab, then lesson 00 and lesson 03 (the
lightest kernel lesson) run in it, each in one kernel, headless, on Triton's interpreter, and the live
widgets (predict, hints, progress) built and clicked under Colab's ipywidgets 7. The reason this adds to
the notebook runs of `./course test`: the same notebooks, on the oldest versions the course supports.

Colab's GPU image (googlecolab/backend-info, pip-freeze.gpu.txt, August 2026) has Python 3.13, torch
2.11.0, triton 3.6.0, ipywidgets 7.7.1, ipykernel 6.17.1, notebook 6.5.7, numpy 2.1.3, matplotlib 3.10.0.
Here, pinned exactly: triton, ipywidgets, ipykernel, notebook, numpy and matplotlib. What differs, and why:

- Python 3.11, not 3.13: this machine and CI run Debian 12, whose Python is 3.11, and no 3.13 can be
  fetched here (only PyPI, Debian and npm are reachable; Python builds come from none of them).
- torch 2.13.0+cpu (the course's own CPU build, linked from the environment running this test), not
  2.11.0: PyPI's torch 2.11.0 for Linux is the CUDA build, gigabytes with its nvidia-* wheels, for a machine
  with no GPU and for every CI run; its CPU build lies only on download.pytorch.org, which is unreachable.
  Installing even the local CPU wheel takes 3.5 minutes here, where hard-linking its files takes seconds.
- What the pinned packages require (jupyter_client, traitlets, pillow, ...) is at the version the
  environment running this test has where that fits the requirement (hard-linked), and fetched by pip where
  none does (widgetsnbextension 3 for ipywidgets 7): Colab's own versions of those are not pinned.
- None of the hundreds of other packages Colab preinstalls.

The environment is built once under build/colab-stack/ (about a minute here, downloads included) and reused
while its stamp matches the pins, the torch and pip it links and this Python; the course in it is installed
again (15 s) when course_utils/ or pyproject.toml changed. Without a way to fetch the packages (no network)
the test skips and says so; anything else that goes wrong (pip refusing the pins, the install, an import, a
cell, a widget) fails.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell

ROOT = Path(__file__).resolve().parent.parent
ENV = ROOT / "build" / "colab-stack"
COLAB = {"triton": "3.6.0", "ipywidgets": "7.7.1", "ipykernel": "6.17.1", "notebook": "6.5.7",
         "numpy": "2.1.3", "matplotlib": "3.10.0"}
# pip compiles what it installs: where PYTHONDONTWRITEBYTECODE is set (as on the machines this course is built
# on), Python keeps nothing it compiles at import, and every kernel a lesson starts would compile again
PIP = ["-q"]
NOTEBOOKS = ["solutions/00_setup.ipynb", "solutions/03_first_triton_kernel.ipynb"]

_spec = importlib.util.spec_from_file_location("course_generate", ROOT / "tools" / "generate.py")
gen = sys.modules.setdefault("course_generate", importlib.util.module_from_spec(_spec))
if not hasattr(gen, "student_notebook"):
    _spec.loader.exec_module(gen)

# google.colab as the install cell sees it on Colab; enabling the custom widget manager is announced, so
# that the test sees whether the cell thought Colab's widgets needed it (they do not, under ipywidgets 7)
FAKE_COLAB = """import sys, types
_colab = types.ModuleType("google.colab")
_colab.output = types.ModuleType("google.colab.output")
_colab.output.enable_custom_widget_manager = lambda: print("custom widget manager enabled")
sys.modules.update({"google": types.ModuleType("google"), "google.colab": _colab, "google.colab.output": _colab.output})
"""

VERSIONS = """import importlib.metadata as m, json, course_utils
print(json.dumps({"versions": {n: m.version(n) for n in %r}, "course": course_utils.__file__}))"""

# Run after lesson 00 in its kernel: the live path's widgets under ipywidgets 7.7.1, clicked as a student would
LIVE_WIDGETS = """import os
os.environ["COURSE_HEADLESS"] = "0"          # a person at the notebook: the widgets are built
import ipywidgets
import course_utils as cu
from course_utils import hints, predict, progress
assert cu.environment.live(), "the live path did not switch on"
p = predict.number("colab.sum", "2 + 2?", lambda: 4, unit="x")
p._widgets["entry"].value = "4"
p._widgets["commit"].click()
p._widgets["reveal"].click()
c = predict.choice("colab.pick", "which?", ["a", "b"], lambda: "b")
c._widgets["entry"].value = "b"
c._widgets["commit"].click()
c._widgets["reveal"].click()
assert (p.guess, p.measured, c.guess, c.measured) == (4, 4, "b", "b"), (p.guess, p.measured, c.guess, c.measured)
assert [i for i in progress.steps(range(3), "steps")] == [0, 1, 2]
hints.offer("bias_gelu")
print("live widgets work under ipywidgets", ipywidgets.__version__)
"""


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def python() -> Path:
    return ENV / "bin" / "python"


def site_packages() -> Path:
    return Path(run([python(), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())


def stamp(*parts) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def env_stamp() -> str:
    """What the environment is built from: the pins, the torch and pip it links, this Python."""
    return stamp(COLAB, sys.version, *(importlib.metadata.version(n) for n in ("torch", "pip")))


def course_stamp() -> str:
    """What the installed course is built from: a change in course_utils/ or pyproject.toml reinstalls it."""
    files = sorted(p for p in (ROOT / "course_utils").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return stamp([(p.relative_to(ROOT).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest())
                  for p in [ROOT / "pyproject.toml", *files]])


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def link(dist, target: Path) -> None:
    """Put an installed distribution of this test's environment into `target` (site-packages) by hard
    links, copies where links cannot go: seconds where pip would take minutes (torch's wheel alone)."""
    base = Path(dist.locate_file(""))
    for rel in dist.files:
        if rel.parts[0] == "..":   # console scripts: the lessons need none
            continue
        files = [Path(rel)]
        if rel.suffix == ".py":   # and its bytecode, which a RECORD lists only when pip compiled it
            files.append(Path(importlib.util.cache_from_source(str(rel))))
        for one in files:
            src, dst = base / one, target / one
            if not src.is_file() or dst.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)


def unmet(site: Path) -> list:
    """The requirements of what `site` holds that it does not satisfy."""
    from packaging.requirements import Requirement
    dists = list(importlib.metadata.distributions(path=[str(site)]))
    have = {canonical(d.metadata["Name"]): d.version for d in dists}
    out = []
    for d in dists:
        for text in d.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            version = have.get(canonical(req.name))
            if version is None or not req.specifier.contains(version, prereleases=True):
                out.append(req)
    return out


def complete(site: Path) -> None:
    """Give `site` everything its packages require: linked from this test's environment where the version
    there fits, fetched by pip where none does (ipywidgets 7 wants widgetsnbextension 3, say)."""
    for _ in range(10):
        need = unmet(site)
        if not need:
            return
        fetch, ours = [], []
        for req in need:
            try:
                dist = importlib.metadata.distribution(req.name)
            except importlib.metadata.PackageNotFoundError:
                dist = None
            if dist is not None and dist.files and req.specifier.contains(dist.version, prereleases=True):
                ours.append(dist)
            else:
                fetch.append(str(req))
        there = {canonical(d.metadata["Name"]) for d in importlib.metadata.distributions(path=[str(site)])}
        older = sorted(there & {canonical(d.metadata["Name"]) for d in ours})   # venv's own setuptools, say
        if older:
            run([python(), "-m", "pip", "uninstall", "-q", "-y", *older])
        for dist in ours:
            link(dist, site)
        if fetch:
            r = run([python(), "-m", "pip", "install", *PIP, *sorted(set(fetch))])
            assert r.returncode == 0, f"pip cannot install what Colab's stack needs {fetch}:\n{r.stderr[-3000:]}"
    raise AssertionError(f"the environment's requirements do not settle: {unmet(site)}")


def pypi_reachable() -> str | None:
    """None when pip can fetch one of the pins here; otherwise why not, in one line."""
    probe = ENV.parent / "colab-stack-probe"
    r = run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--dest", probe, "--timeout", "15",
             "--retries", "1", f"ipywidgets=={COLAB['ipywidgets']}"])
    shutil.rmtree(probe, ignore_errors=True)
    if r.returncode:
        last = next((ln for ln in reversed(r.stderr.splitlines()) if ln.strip()), "no output")
        return f"cannot fetch Colab's packages from PyPI (no network?): {last.strip()}"
    return None


def install_cell_on_colab() -> str:
    """Every notebook's install cell as tools/generate.py writes it, run as on Colab, but installing this
    checkout instead of the release tag (a direct reference to the folder: pip builds and installs it as it
    would the git checkout, --no-deps, not editable)."""
    pin = gen.release()
    source = gen.colab_cells(pin, "notebooks/x.ipynb")[1].source
    url = f"git+https://github.com/{pin.repo}@{pin.ref}"
    assert url in source, f"the install cell no longer installs {url}: {source}"
    return FAKE_COLAB + source.replace(url, ROOT.resolve().as_uri()) + "\nprint('installed')"


def build_env() -> None:
    shutil.rmtree(ENV, ignore_errors=True)
    r = run([sys.executable, "-m", "venv", "--without-pip", ENV])   # ensurepip alone takes 15 s: pip is linked
    assert r.returncode == 0, r.stderr
    site = site_packages()
    for name in ("pip", "torch"):
        link(importlib.metadata.distribution(name), site)
    pins = [f"{name}=={version}" for name, version in COLAB.items()]
    r = run([python(), "-m", "pip", "install", *PIP, "--no-deps", *pins])
    assert r.returncode == 0, f"pip cannot install Colab's stack {pins}:\n{r.stderr[-3000:]}"
    complete(site)


@pytest.fixture(scope="module")
def colab_env():
    """build/colab-stack/'s Python: built when its stamp differs (minutes), the course reinstalled by the
    install cell when course_utils/ or pyproject.toml changed since (15 s), else as it is."""
    env_file, course_file = ENV / ".stamp", ENV / ".course-stamp"
    built = env_file.exists() and env_file.read_text() == env_stamp() and python().exists()
    if not built or not course_file.exists() or course_file.read_text() != course_stamp():
        if (why := pypi_reachable()) is not None:
            pytest.skip(why)
    if not built:
        build_env()
        env_file.write_text(env_stamp())
        course_file.unlink(missing_ok=True)
    if not course_file.exists() or course_file.read_text() != course_stamp():
        run([python(), "-m", "pip", "uninstall", "-q", "-y", "feed-the-beast"])   # the same version: pip would keep it
        r = run([python(), "-c", install_cell_on_colab()], cwd=ENV)   # as the notebook's install cell does it
        assert r.returncode == 0 and r.stdout.split() == ["installed"], \
            f"the install cell failed on Colab's stack:\n{r.stdout}\n{r.stderr[-3000:]}"
        course_file.write_text(course_stamp())
    return python()


def test_pip_finds_no_conflict_in_colabs_stack_with_the_course(colab_env):
    # --no-deps leaves out what Colab lacks and the lessons never import (JupyterLab); a package there at a
    # version the course or another package refuses is a real conflict
    r = run([colab_env, "-m", "pip", "check"])
    conflicts = [ln for ln in r.stdout.splitlines()
                 if ln.strip() and not (ln.startswith("feed-the-beast ") and ln.endswith("which is not installed."))]
    assert not conflicts, "pip check on Colab's stack with the course:\n" + "\n".join(conflicts)


def test_pyproject_admits_colabs_versions():
    """The lowest versions pyproject.toml declares admit Colab's, Python and torch included (the two this
    machine cannot install)."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    project = gen.tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    bounds = {(req := Requirement(r)).name: req.specifier for r in project["dependencies"]}
    colab = {**COLAB, "torch": "2.11.0"}
    refused = {name: f"{version} not in {bounds[name]}" for name, version in colab.items()
               if name in bounds and not bounds[name].contains(version)}
    assert not refused, f"pyproject.toml refuses Colab's versions: {refused}"
    assert SpecifierSet(project["requires-python"]).contains("3.13"), project["requires-python"]


def execute(notebook, python: Path, cwd: Path) -> list:
    """Run the notebook's cells in one fresh kernel of `python`, headless on the interpreter, as
    `./course test` does, but with none of this checkout on the path."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    env = {"COURSE_HEADLESS": "1", "TRITON_INTERPRET": "1", "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0",
           "PYTHONPATH": "", "COURSE_PREDICTIONS": str(cwd / "predictions.jsonl"),
           "PYDEVD_DISABLE_FILE_VALIDATION": "1"}   # ipykernel 6.17's debugger warns of frozen modules otherwise

    class ColabStack(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return KernelSpec(argv=[str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name="Colab's stack", language="python", env=env)

    km = KernelManager(kernel_name="colab-stack", kernel_spec_manager=ColabStack())
    NotebookClient(notebook, km=km, timeout=300, startup_timeout=120, allow_errors=False,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return notebook.cells


def said(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


@pytest.mark.parametrize("source", NOTEBOOKS)
def test_the_lesson_runs_on_colabs_stack(colab_env, source, tmp_path):
    nb = gen.filled_student_notebook(ROOT / source)   # what a student opens on Colab, stubs written
    first = source == NOTEBOOKS[0]
    if first:   # in the same kernel, after the lesson: what it ran on, then the live widgets
        nb.cells += [new_code_cell(VERSIONS % list(COLAB)), new_code_cell(LIVE_WIDGETS)]
    cells = execute(nb, colab_env, tmp_path)          # raises on the first cell that fails
    if first:
        got = json.loads(said(cells[-2]).strip().splitlines()[-1])
        assert got["versions"] == COLAB
        assert Path(got["course"]).is_relative_to(site_packages()), got["course"]   # installed, not this checkout
        assert f"live widgets work under ipywidgets {COLAB['ipywidgets']}" in said(cells[-1])
