#!/usr/bin/env python3
"""Write the student edition: the repository a class gets, with no solution in it.

    python tools/student_edition.py [DEST]        write it into DEST (default build/student-edition/) and
                                                  commit it there (a git repository, branch main, tagged
                                                  v<version>), then print the commands that push it
    python tools/student_edition.py --check DEST  search DEST for a line of a solution; exit 1 if one is there

The Colab badge and install cell of every student notebook open the student edition at the tag
v<version> ([project.urls] Student-edition in pyproject.toml, written by tools/generate.py), so push it
there, tag included, before a class follows a badge. It holds what a student runs and nothing else:

    notebooks/, labs/     the lessons and labs, as tools/generate.py wrote them (stubs, hints as buttons)
    course_utils/         the package every notebook imports, its hints file included
    course                setup and lab only: ./course lab sets up .venv/ and opens lesson 00
    pyproject.toml        this one's dependencies and packages; no test extra, a `hub` extra (JupyterHub)
    environment.yml       the same dependencies for conda or mamba
    jupyter/              JupyterLab's settings and the class's JupyterHub configuration (jupyter/hub/)
    README.md             written here, for students: the three ways to start, the lessons and labs
    docs/gpu-results/*.md the recorded runs that the notebooks cite by name
    .gitignore, and LICENSE and CITATION.cff when this repository has them

No solutions/, tests/ (their kernels are answers), tools/, or executed notebooks. Before committing, every
file written is searched for every line of every solution (tools/solution_search.py: longer than 20
characters, comments a stub does not show included), and for a name that says solution; if one is found,
nothing is committed. A later build into the same DEST commits on top (the push is a fast-forward); the
tag is made once per version, never moved. It copies and writes; it executes nothing (about a second).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import generate as gen  # noqa: E402  (the repositories and release tag, from pyproject.toml)
import solution_search as search  # noqa: E402  (the lines of the solutions, and the search for them)

DEST = ROOT / "build" / "student-edition"
COPIED = ("notebooks", "labs")                       # folders of notebooks, copied as generated
JUPYTER = "jupyter"                                  # settings, and the hub's configuration
OPTIONAL = ("LICENSE", "CITATION.cff", ".gitignore")  # copied when the repository has them
HUB_PACKAGES = ("jupyterhub", "configurable-http-proxy")  # the `hub` extra, taken from pyproject.toml's extras
CITED = re.compile(r"docs/gpu-results/[\w.-]+\.md")   # a recorded run a notebook names
COMMIT_PREFIX = "Student edition"                   # every commit this tool makes starts so
MIN_CHARS = 21                                      # shorter solution lines (`return out`) are everywhere
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "predictions.jsonl")


class EditionError(RuntimeError):
    """The edition cannot be written as asked; the message says what to do."""


# --- what it writes ------------------------------------------------------------------------------------
def project() -> dict:
    return gen.tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[\n" + "".join(f"    {_toml_value(x)},\n" for x in v) + "]" if v else "[]"
    raise EditionError(f"pyproject.toml: cannot write a value of type {type(v).__name__} ({v!r})")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _toml_table(name: str, table: dict) -> list[str]:
    lines = [f"[{name}]"] + [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    for k, v in table.items():
        if isinstance(v, dict):
            lines += [""] + _toml_table(f"{name}.{_toml_key(k)}", v)
    return lines


def edition_project(data: dict, url: str) -> dict:
    """The edition's pyproject.toml, as data: this one's project and packages, the edition's own URL, and of
    the extras only `hub`, what the class's JupyterHub needs (the test extra runs the solutions)."""
    proj = {k: v for k, v in data["project"].items() if k not in ("urls", "optional-dependencies")}
    extras = [r for reqs in data["project"].get("optional-dependencies", {}).values() for r in reqs]
    hub = [r for name in HUB_PACKAGES for r in extras if re.match(rf"{re.escape(name)}\s*([<>=!~;\[]|$)", r)]
    if len(hub) != len(HUB_PACKAGES):
        raise EditionError(f"pyproject.toml: the edition's `hub` extra takes {', '.join(HUB_PACKAGES)} from an "
                           f"extra of pyproject.toml, and found only {hub}: add them to the test extra")
    proj["urls"] = {"Repository": url}
    proj["optional-dependencies"] = {"hub": hub}
    out = {"build-system": data["build-system"], "project": proj}
    if "setuptools" in data.get("tool", {}):
        out["tool"] = {"setuptools": data["tool"]["setuptools"]}
    return out


def pyproject_text(data: dict, url: str) -> str:
    want = edition_project(data, url)
    lines = ["# Feed the Beast, the student edition (written by the course's tools/student_edition.py).",
             "# `./course lab` installs this (pip install -e .) and opens lesson 00. The `hub` extra is for an",
             "# instructor running the class's JupyterHub from this repository (jupyter/hub/jupyterhub_config.py)."]
    for name, table in want.items():
        if name == "tool":
            for sub, t in table.items():
                lines += [""] + _toml_table(f"tool.{sub}", t)
        else:
            lines += [""] + _toml_table(name, table)
    text = "\n".join(lines) + "\n"
    if gen.tomllib.loads(text) != want:   # the writer above knows a few TOML types: it must read back the same
        raise EditionError("the edition's pyproject.toml does not read back as written: "
                           "tools/student_edition.py's TOML writer needs the type pyproject.toml now uses")
    return text


def environment_text(data: dict) -> str:
    proj = data["project"]
    pip = "".join(f"      - {r}\n" for r in proj["dependencies"])
    return ("# The course's environment for conda or mamba, as an alternative to `./course setup`:\n"
            f"#   mamba env create -f environment.yml && mamba activate {proj['name']}\n"
            "#   JUPYTER_CONFIG_PATH=$PWD/jupyter jupyter lab notebooks/00_setup.ipynb\n"
            "# The same names and bounds as pyproject.toml's dependencies. pip picks a CUDA build of torch on Linux;\n"
            "# on a machine without a GPU the course runs Triton's CPU interpreter all the same.\n"
            f"name: {proj['name']}\n"
            "channels:\n  - conda-forge\n"
            f"dependencies:\n  - python{proj['requires-python']}\n  - pip\n  - pip:\n{pip}"
            "      # the course's helpers (course_utils), editable, from this folder\n      - -e .\n")


LAUNCHER = r'''#!/usr/bin/env bash
# Feed the Beast, the student edition: ./course --help says what each command does.
# Setting up is idempotent: a second run only checks a stamp and goes on.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
VENV=${COURSE_VENV:-.venv}
# Where there is no GPU and no torch yet, install the release the course is tested with on a CPU.
CPU_TORCH=${COURSE_TORCH:-@CPU_TORCH@}

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

usage() {
    cat <<'USAGE'
usage: ./course [lab|setup]

  lab    set everything up (first run only) and open the course in JupyterLab (the default)
  setup  set everything up and stop: .venv/ with the course, PyTorch, Triton and JupyterLab

Linux and Python >= 3.10. A machine that already has PyTorch (a GPU box) keeps it; one with neither GPU nor
PyTorch gets the CPU build the course is tested with (COURSE_TORCH overrides it); COURSE_VENV names
another virtual environment. Colab and a class's JupyterHub need none of this: see README.md.
USAGE
}

setup() {
    local stamp="$VENV/.course-stamp" want
    want=$(cat pyproject.toml course | sha256sum | cut -c1-16)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c "import course_utils" 2>/dev/null; then
        return 0
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        # A machine that already has torch keeps its own build: the environment sees the system's packages.
        if "$PYTHON" -c "import torch" 2>/dev/null; then
            "$PYTHON" -m venv --system-site-packages "$VENV"
        else
            "$PYTHON" -m venv "$VENV"
        fi
    fi
    local py="$VENV/bin/python"
    if ! "$py" -c "import torch" 2>/dev/null; then
        if has_gpu; then "$py" -m pip install -q torch; else "$py" -m pip install -q "$CPU_TORCH"; fi
    fi
    "$py" -m pip install -q -e .
    echo "$want" > "$stamp"
}

cmd=${1:-lab}; shift || true
case "$cmd" in
    setup) setup ;;
    lab)
        setup
        # The course's JupyterLab settings (jupyter/): no prompt about Jupyter news, build clutter hidden.
        export JUPYTER_CONFIG_PATH="$PWD/jupyter${JUPYTER_CONFIG_PATH:+:$JUPYTER_CONFIG_PATH}"
        # The very first start opens lesson 00, whose first screen says what to do.
        if [ $# -eq 0 ] && [ ! -f "$VENV/.course-opened" ]; then
            touch "$VENV/.course-opened"
            set -- --ServerApp.root_dir="$PWD" --ServerApp.file_to_run="$PWD/notebooks/00_setup.ipynb"
        fi
        # root is common in containers, where JupyterLab would otherwise refuse to start
        if [ "$(id -u)" = 0 ]; then set -- "$@" --allow-root; fi
        exec "$VENV/bin/jupyter" lab "$@" ;;
    -h|--help|help) usage ;;
    *) usage >&2; exit 2 ;;
esac
'''


def launcher_text() -> str:
    """The edition's `course`: setup and lab, as this repository's `course` does them, with its CPU torch."""
    m = re.search(r"CPU_TORCH=\$\{COURSE_TORCH:-([^}\s]+)\}", (ROOT / "course").read_text(encoding="utf-8"))
    if not m:
        raise EditionError("course: no line CPU_TORCH=${COURSE_TORCH:-torch==X} to take the CPU torch from; "
                           "update launcher_text() in tools/student_edition.py")
    return LAUNCHER.replace("@CPU_TORCH@", m[1])


def readme_table(readme: str, header: str) -> str:
    """The Markdown table of README.md whose first row starts with `header`."""
    lines = readme.split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.startswith(header)), None)
    if start is None:
        raise EditionError(f"README.md: no table starting {header!r}; the edition's README copies it from there")
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


README = """\
# Feed the Beast

A course in GPU kernel fusion, taught by doing it: you write kernels (the programs a GPU runs) in Triton, a
Python language for writing them, that fuse into one what PyTorch runs as many, and measure what that buys. Every lesson has the same rhythm, **Hook → Predict → Count → Write →
Measure → Check → Recall**: you guess how many times each byte crosses the GPU's memory and what speedup
follows, count those crossings (trips), write the fused kernel, time it against PyTorch and `torch.compile`, and check it
with a checker that says what is wrong and why. When you are stuck, each exercise has hints, one button
at a time, from the idea to the recipe.

This is the student edition, release {ref}: the lessons, the labs and the course's helpers, no solutions.

## Start

**On Colab** (nothing to install, a free T4 GPU): open
[lesson 00 in Colab](https://colab.research.google.com/github/{repo}/blob/{ref}/notebooks/00_setup.ipynb),
pick a GPU (Runtime > Change runtime type > T4 GPU) and run the folded first cell: it installs the course.
Every notebook opens with the same badge. Save your work to your Drive (File > Save a copy in Drive).

**On your class's JupyterHub**, if your class has one: log in. Your own copy of the lessons and labs waits
in `feed-the-beast/` in your home, and lesson 00 opens first.

**On your own machine** (Linux, Python 3.10 or newer; a GPU if you have one):

```bash
git clone {url}.git feed-the-beast
cd feed-the-beast
./course lab
```

The first run makes `.venv/`, installs the course into it and opens lesson 00 in JupyterLab; later runs
start at once. Without a GPU every notebook still runs, on small sizes, through Triton's interpreter (which runs
kernels on the CPU, slowly): the checks work, and the timings are a model, labelled as one. With conda or mamba instead:
`mamba env create -f environment.yml` (its first lines say how to start JupyterLab).

## The lessons (`notebooks/`)

{lessons}

## The labs (`labs/`)

Graded assignments: each ends with one call that prints a scorecard, correctness first, then the byte and
launch budget and, on a GPU, the speed target.

{labs}

## What is here

- `notebooks/`, `labs/`: your notebooks. Write in them; a later release of this repository may change
  them, so keep your own copy of your work before you pull one.
- `course_utils/`: what the notebooks import: counting the bytes a piece of code moves (`trips`),
  timing (`bench`), the checks (`check`), the labs' scorecards (`grade`), your predictions (`predict`),
  the hints, and a glossary (`cu.glossary("HBM")`, for any term a lesson explains).
- `predictions.jsonl` (made as you go): your log of guesses, hints and checks, one for every lesson and
  lab; the last cell of each notebook says where it is. Hand it in with a lab if your instructor asks.
- `course`: `./course lab` (set up, then JupyterLab) and `./course setup` (set up only).
- `jupyter/`: the JupyterLab settings `./course lab` uses, and your instructor's JupyterHub configuration.
- `docs/gpu-results/`: the recorded GPU runs the notebooks cite.
"""


def readme_text(data: dict, pin, url: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    text = README.format(repo=pin.repo, ref=pin.ref, url=url, lessons=readme_table(readme, "| # | lesson"),
                         labs=readme_table(readme, "| lab | after"))
    if (ROOT / "LICENSE").exists():
        text += "\nLicense: see `LICENSE`.\n"
    return text


# --- writing and checking ------------------------------------------------------------------------------
def student_url(data: dict) -> str:
    gen.release()   # the same error as the generator's when the URL is not a GitHub repository
    return data["project"]["urls"][gen.STUDENT_EDITION].rstrip("/").removesuffix(".git")


def write(dest: Path) -> list[str]:
    """Write the edition's files into `dest` (which holds at most a .git folder); their paths."""
    data = project()
    url, pin = student_url(data), gen.release()
    for folder in COPIED:
        (dest / folder).mkdir(parents=True)
        for nb in sorted((ROOT / folder).glob("*.ipynb")):
            shutil.copy2(nb, dest / folder / nb.name)
    for package in data["tool"]["setuptools"]["packages"]:
        folder = Path(*package.split("."))
        (dest / folder).mkdir(parents=True, exist_ok=True)
        for py in sorted((ROOT / folder).glob("*.py")):
            shutil.copy2(py, dest / folder / py.name)
    for package, patterns in data["tool"]["setuptools"].get("package-data", {}).items():
        for pattern in patterns:
            for f in sorted((ROOT / Path(*package.split("."))).glob(pattern)):
                shutil.copy2(f, dest / f.relative_to(ROOT))
    shutil.copytree(ROOT / JUPYTER, dest / JUPYTER, ignore=IGNORED)
    for name in OPTIONAL:
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, dest / name)
    cited = sorted({m for nb in (dest / f for f in COPIED) for p in nb.glob("*.ipynb")
                    for m in CITED.findall(p.read_text(encoding="utf-8"))})
    for rel in cited:
        if not (ROOT / rel).exists():
            raise EditionError(f"a notebook cites {rel}, which this repository does not have")
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    (dest / "pyproject.toml").write_text(pyproject_text(data, url), encoding="utf-8")
    (dest / "environment.yml").write_text(environment_text(data), encoding="utf-8")
    (dest / "README.md").write_text(readme_text(data, pin, url), encoding="utf-8")
    (dest / "course").write_text(launcher_text(), encoding="utf-8")
    (dest / "course").chmod(0o755)
    return sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")
                  if p.is_file() and ".git" not in p.relative_to(dest).parts)


def secrets() -> frozenset[str]:
    """The solutions' lines the edition must not hold: every line of every solution region and
    solution-only cell that no student notebook shows unfolded, longer than 20 characters, comments
    included. A `spoiler` cell is the course's own choice: the student notebooks hold it folded, to be
    opened once the exercise passes, so its lines are not counted as the solution's (see problems())."""
    return search.secret_lines(search.solution_notebooks(), min_chars=MIN_CHARS, comments=True, spoilers=False)


def problems(dest: Path, secret: frozenset[str] | None = None) -> list[str]:
    """What in `dest` is solution code, one line each: a file that holds a line of a solution (a notebook's
    folded spoiler cells aside), a lab notebook that holds one even in a spoiler (a lab is graded), and a
    file or folder whose name says solution."""
    secret = secrets() if secret is None else secret
    hits = {name: lines for name, lines in search.leaks(dest, secret, spoilers=False).items()
            if not name.startswith("labs/")}
    if (dest / "labs").is_dir():
        hits.update({f"labs/{name}": lines for name, lines in search.leaks(dest / "labs", secret).items()})
    found = [f"{name}: {line}" for name, lines in sorted(hits.items()) for line in lines]
    found += [f"{p.relative_to(dest).as_posix()}: its name says solution" for p in sorted(dest.rglob("*"))
              if "solution" in p.name.lower() and ".git" not in p.relative_to(dest).parts]
    return found


def git(dest: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(["git", "-C", str(dest), *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise EditionError("git is not installed: the edition is written as a git repository; install git") from None
    if check and r.returncode:
        raise EditionError(f"git {' '.join(args)} failed in {dest}:\n{r.stderr.strip()}")
    return r


def source_commit() -> str:
    """This repository's commit, marked when the working tree differs from it; or why there is none."""
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if r.returncode:
        return "a copy outside git"
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", *COPIED, "course_utils",
                            "pyproject.toml", "README.md", JUPYTER], capture_output=True, text=True).stdout.strip()
    return r.stdout.strip() + (" with uncommitted changes" if dirty else "")


def prepare(dest: Path) -> bool:
    """Empty `dest` for a build, keeping its git history; True when it already is a repository."""
    if dest.exists() and not dest.is_dir():
        raise EditionError(f"{dest} is a file: name a folder")
    if not dest.exists() or not any(dest.iterdir()):
        return False
    if not (dest / ".git").exists():
        raise EditionError(f"{dest} holds files and is not a student edition built before: "
                           "name an empty or new folder")
    last = git(dest, "log", "-1", "--format=%s", check=False).stdout
    if not last.startswith(COMMIT_PREFIX):
        raise EditionError(f"{dest} is a git repository this tool did not write (its last commit is not "
                           f"'{COMMIT_PREFIX} ...'): name an empty or new folder")
    for p in dest.iterdir():
        if p.name != ".git":
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    return True


def build(dest: Path = DEST) -> int:
    t0 = time.perf_counter()
    dest = dest.resolve()
    if dest == ROOT or ROOT.is_relative_to(dest):
        raise EditionError(f"{dest} is this repository or holds it: name a folder of its own")
    existed = prepare(dest)
    files = write(dest)
    found = problems(dest)
    if found:
        print(f"{dest}: solution code in what was written; nothing committed:\n  " + "\n  ".join(found),
              file=sys.stderr)
        return 1
    pin, url = gen.release(), student_url(project())
    if not existed:
        git(dest, "init", "-q", "-b", "main")
    identity = [] if git(dest, "config", "user.email", check=False).stdout.strip() else \
        ["-c", "user.name=Feed the Beast", "-c", "user.email=feed-the-beast@users.noreply.github.com"]
    git(dest, "add", "-A")
    if git(dest, "diff", "--cached", "--quiet", check=False).returncode:
        git(dest, *identity, "commit", "-q", "-m", f"{COMMIT_PREFIX} {pin.ref}, from {source_commit()}")
        print(f"{dest}: {len(files)} files committed")
    else:
        print(f"{dest}: nothing changed since the last build")
    head = git(dest, "rev-parse", "HEAD").stdout.strip()
    tagged = git(dest, "rev-parse", "-q", "--verify", f"refs/tags/{pin.ref}^{{commit}}", check=False).stdout.strip()
    if not tagged:
        git(dest, "tag", pin.ref)
    elif tagged != head:
        print(f"note: {pin.ref} already names an earlier build, and the badges open {pin.ref}: to release this "
              "one, bump `version` in pyproject.toml, run tools/generate.py, and build again", file=sys.stderr)
    remote = git(dest, "remote", "get-url", "origin", check=False).stdout.strip()
    print(f"built in {time.perf_counter() - t0:.1f} s, no solution code in it. To publish it where the badges open it:")
    if not remote:
        print(f"  git -C {dest} remote add origin {url}.git")
    print(f"  git -C {dest} push origin main {pin.ref}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("dest", nargs="?", type=Path, default=DEST, help="where to write it (default: %(default)s)")
    ap.add_argument("--check", action="store_true", help="search DEST for solution code; write nothing")
    args = ap.parse_args(argv)
    try:
        if args.check:
            if not args.dest.is_dir():
                raise EditionError(f"{args.dest} is not a folder: build the edition first")
            found = problems(args.dest)
            print("\n".join(found) if found else f"{args.dest}: no solution code", file=sys.stderr if found else sys.stdout)
            return 1 if found else 0
        return build(args.dest)
    except (EditionError, gen.SourceError) as err:
        print(err, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
