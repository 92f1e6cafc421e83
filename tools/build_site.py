#!/usr/bin/env python3
"""Build the browsable edition of the course: every lesson and lab as it ran on the GPU, as a static site.

    ./course site                            build into build/site/ (index.html at its root)
    python tools/build_site.py               the same, in an environment that has the course
    python tools/build_site.py --out DIR     build elsewhere
    python tools/build_site.py --source-only write the Sphinx source (build/site-src/) and stop

Each page is made from the executed notebook that `tools/gpu_run.py` keeps for that solution
(docs/gpu-results/notebooks/<gpu>/<name>.ipynb): its cells pass through tools/generate.py's
student_notebook(), so every exercise shows the student's stub, never the solution; a hints cell shows
as the student's call for hints (no hint text); a `spoiler` cell shows its output without its code; the
`solution-only` cells are left out. The outputs (numbers, tables, figures) are the run's, and each page
opens with the run's date, GPU and versions. Where a notebook has runs on several machines, a GPU's run
wins over a CPU's, then the latest. A CPU run (folder cpu/) is a stand-in, labelled as one on its page;
a notebook with no run at all shows its code and says it has not run yet; a page whose lesson's code has
changed since its run says so (it shows the version that ran, with that run's outputs).

The builder is Sphinx with myst-nb (notebooks as pages, never executed here) and sphinx-book-theme;
docs/site/ holds its configuration and front page. Publishing: build/site/ is a plain static folder, so
any static host serves it (GitHub Pages: see the README).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import generate as gen  # noqa: E402  (tools/generate.py: the student version of a notebook)

ARTIFACTS = ROOT / "docs" / "gpu-results" / "notebooks"
SITE_FILES = ROOT / "docs" / "site"          # conf.py, index.md (committed)
SOURCE = ROOT / "build" / "site-src"         # the Sphinx source this script writes
OUT = ROOT / "build" / "site"
STANDIN = "cpu"                              # the artifacts folder of a run without a GPU
WIDGET = "application/vnd.jupyter.widget-view+json"
OWN_CELLS = (*gen.COLAB_IDS, gen.KEEP_ID)          # the generator's cells a page leaves out


# --- which run each page shows ---------------------------------------------------------------------
def pages() -> list[tuple[Path, str]]:
    """(solution notebook, page path in the site without suffix) for every lesson and lab."""
    out = []
    for src, dst in gen.targets():
        folder = "labs" if dst.parent.name == "labs" else "lessons"
        out.append((src, f"{folder}/{src.stem}"))
    return out


def artifact_name(src: Path) -> str:
    """The artifact's path under docs/gpu-results/notebooks/<gpu>/ (tools/gpu_run.py's artifact_name)."""
    return f"labs/{src.name}" if src.parent.name == "labs" else src.name


def runs_of(src: Path, artifacts: Path = ARTIFACTS) -> list[Path]:
    return sorted(artifacts.glob(f"*/{artifact_name(src)}")) if artifacts.is_dir() else []


def pick_run(src: Path, artifacts: Path = ARTIFACTS) -> Path | None:
    """A GPU's run before a CPU's stand-in, then the latest."""
    def key(path: Path):
        run = nbformat.read(path, as_version=4).metadata.get("gpu_run", {})
        return (path.relative_to(artifacts).parts[0] != STANDIN, run.get("date", ""))
    found = runs_of(src, artifacts)
    return max(found, key=key) if found else None


# --- one page --------------------------------------------------------------------------------------
def clean_output(o):
    """An output as the page may show it: no widget views (nothing to draw them with), and no traceback
    (it would quote the solution's code): an error keeps its type and message."""
    o = nbformat.from_dict(json.loads(json.dumps(o)))
    if o.output_type == "error":
        return nbformat.v4.new_output("stream", name="stderr", text=f"{o.ename}: {o.evalue}\n")
    if "data" in o and WIDGET in o.data:
        del o.data[WIDGET]
        if not o.data:
            return None
    return o


def run_line(run: dict) -> str:
    """'NVIDIA H100 80GB HBM3 (compute capability 9.0, driver 580.1), PyTorch 2.11.0+cu130, ...'"""
    machine = run.get("device", "an unknown machine")
    extra = ", ".join(f"{label} {run[key]}" for key, label in (("capability", "compute capability"),
                                                                ("driver", "driver")) if run.get(key))
    versions = ", ".join(f"{label} {run[key]}" for key, label in (("torch", "PyTorch"), ("cuda", "CUDA"),
                                                                   ("triton", "Triton"), ("python", "Python"))
                         if run.get(key))
    return (f"{machine}{f' ({extra})' if extra else ''}, {versions}; run {run.get('date', 'on an unknown date')}, "
            f"{run.get('status', '?')} in {run.get('wall_s', '?')} s.")


def run_cell(run: dict | None, standin: bool, colab: str, changed: bool = False) -> nbformat.NotebookNode:
    """The markdown cell under a page's title: where and when its outputs were made."""
    yourself = f"Run it yourself: `./course lab`, or [open it in Colab]({colab})."
    if changed:
        yourself = ("**The lesson has changed since this run**: this page shows the version that ran, and "
                    "the current one may differ. " + yourself)
    if run is None:
        return nbformat.v4.new_markdown_cell(
            ":::{admonition} Not run yet\n:class: warning\n"
            "No recorded run of this notebook: its code is shown, without outputs. "
            f"`python3 tools/gpu_run.py` on a GPU records one. {yourself}\n:::")
    if standin:
        title, cls = "Stand-in: run on a CPU, not on a GPU", "warning"
        words = ("These outputs come from a run without a GPU, through Triton's interpreter, kept until a GPU's "
                 "run is recorded: its wall-clock times mean nothing, and its GPU times are models.")
    else:
        title, cls = f"As it ran on the {run.get('device', 'GPU')}", "note"
        words = "Every output on this page was printed by this run."
    return nbformat.v4.new_markdown_cell(
        f":::{{admonition}} {title}\n:class: {cls} gpu-run\n**{run_line(run)}**\n\n{words} Where the lesson "
        "asks for code, the page shows the student's stub, not the code that ran; the outputs under it are those "
        f"of the solution. {yourself}\n:::")


def code_of(nb) -> list[str]:
    """What the student reads and runs: the code cells, Colab's aside."""
    return [c.source for c in nb.cells if c.cell_type == "code" and c.get("id") not in OWN_CELLS]


def page_notebook(src: Path, run_path: Path | None, pin, standin: bool = False) -> nbformat.NotebookNode:
    """The student version of the executed notebook (or of the solution, with no run), with the run's
    outputs under each cell and the run's details at the top."""
    name = src.relative_to(ROOT).as_posix()
    executed = nbformat.read(run_path if run_path else src, as_version=4)
    run = executed.metadata.get("gpu_run") if run_path else None
    student_path = f"{'labs' if src.parent.name == 'labs' else 'notebooks'}/{src.name}"
    # An executed notebook can predate the stub-width rule (layout, enforced on the sources by generate.py
    # --check); it does not decide what a stub hides, so the page applies every other rule.
    student = gen.student_notebook(executed, name, width=None)
    changed = bool(run_path) and src.exists() and \
        code_of(student) != code_of(gen.student_notebook(nbformat.read(src, as_version=4), name))
    by_id = {c.get("id"): c for c in executed.cells}
    colab = f"https://colab.research.google.com/github/{pin.repo}/blob/{pin.ref}/{student_path}"
    cells, placed = [], False
    for cell in student.cells:
        tags = cell.metadata.setdefault("tags", [])
        if cell.get("id") in OWN_CELLS:
            continue                                     # Colab's cells (the run box links to Colab instead), the log's
        if cell.cell_type == "code":
            ran = by_id.get(cell.get("id"))
            hint_call = ran is not None and ran.cell_type == "markdown"   # a hints cell, now the button call
            if ran is not None and ran.cell_type == "code" and not hint_call:
                cell.outputs = [o for o in map(clean_output, ran.get("outputs", [])) if o is not None]
                cell.execution_count = ran.get("execution_count")
            if "spoiler" in tags:
                tags.append("remove-input")              # its code gives the exercise away; its output not
                cell.source = "# this cell's code gives an exercise away: the page shows its output alone"
            cell.metadata.pop("jupyter", None)
            cell.metadata.pop("cellView", None)
        cells.append(cell)
        if not placed and cell.cell_type == "markdown" and cell.source.startswith("# "):
            cells.append(run_cell(run, standin, colab, changed))  # under the title
            placed = True
    if not placed:
        cells.insert(0, run_cell(run, standin, colab, changed))
    student.cells = cells
    student.metadata["gpu_run"] = run or {}
    return student


# --- the site --------------------------------------------------------------------------------------
def runs_page(rows: list[tuple[str, str, dict | None, bool]]) -> str:
    lines = ["# The runs behind this edition", "",
             "Each page shows the outputs of one run of its solution notebook, made by `tools/gpu_run.py` and "
             "kept in `docs/gpu-results/notebooks/`. A run on a CPU is a stand-in until the GPU's is recorded.", "",
             "| page | machine | PyTorch | Triton | run | status | wall time (s) |", "|---|---|---|---|---|---|---|"]
    for title, page, run, standin in rows:
        if run is None:
            lines.append(f"| [{title}]({page}.ipynb) | not run yet | | | | | |")
        else:
            machine = run.get("device", "?") + (" (stand-in)" if standin else "")
            lines.append(f"| [{title}]({page}.ipynb) | {machine} | {run.get('torch', '')} | {run.get('triton', '')} "
                         f"| {run.get('date', '')} | {run.get('status', '')} | {run.get('wall_s', '')} |")
    return "\n".join(lines) + "\n"


def title_of(nb) -> str:
    for c in nb.cells:
        if c.cell_type == "markdown":
            for line in c.source.split("\n"):
                if line.startswith("# "):
                    return line[2:].strip()
    return "untitled"


def write_source(source: Path = SOURCE, artifacts: Path = ARTIFACTS) -> list[tuple[str, str, dict | None, bool]]:
    if source.exists():
        shutil.rmtree(source)
    shutil.copytree(SITE_FILES, source)
    pin, rows = gen.release(), []
    for src, page in pages():
        run_path = pick_run(src, artifacts)
        standin = bool(run_path) and run_path.relative_to(artifacts).parts[0] == STANDIN
        nb = page_notebook(src, run_path, pin, standin)
        target = source / f"{page}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        rows.append((title_of(nb), page, nb.metadata["gpu_run"] or None, standin))
    (source / "runs.md").write_text(runs_page(rows), encoding="utf-8")
    return rows


def build(out: Path = OUT, source: Path = SOURCE, artifacts: Path = ARTIFACTS) -> int:
    t0 = time.perf_counter()
    rows = write_source(source, artifacts)
    doctrees = source.parent / (source.name + "-doctrees")
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-E", "-d", str(doctrees), str(source), str(out)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(cmd, cwd=ROOT, env=env)
    if done.returncode:
        return done.returncode
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    ran = sum(r[2] is not None for r in rows)
    print(f"site: {len(rows)} pages ({ran} with a recorded run) in {out}/index.html, "
          f"{size / 1e6:.1f} MB, built in {time.perf_counter() - t0:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT, help="where the site goes (default build/site)")
    ap.add_argument("--source", type=Path, default=SOURCE, help="where its Sphinx source goes (build/site-src)")
    ap.add_argument("--artifacts", type=Path, default=ARTIFACTS, help="the executed notebooks' folder")
    ap.add_argument("--source-only", action="store_true", help="write the Sphinx source and stop")
    args = ap.parse_args(argv)
    if args.source_only:
        write_source(args.source.resolve(), args.artifacts.resolve())
        return 0
    return build(args.out.resolve(), args.source.resolve(), args.artifacts.resolve())


if __name__ == "__main__":
    sys.exit(main())
