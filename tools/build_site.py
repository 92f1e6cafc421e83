#!/usr/bin/env python3
"""Build the browsable edition of the course for one GPU: every lesson and lab as it ran there, as a static site.

    ./course site                            the default GPU's edition into build/site/ (index.html at its root)
    python tools/build_site.py               the same, in an environment that has the course
    python tools/build_site.py --gpu h200    the H200's edition into build/site-nvidia-h200/ (a GPU's folder under
                                             docs/gpu-results/notebooks/, or a unique part of its name)
    python tools/build_site.py --gpu all     every GPU's edition, each into build/site-<gpu>/, in one Sphinx process
    python tools/build_site.py --list        the GPUs with recorded runs: how complete, how recent, which is the default
    python tools/build_site.py --out DIR     build elsewhere (one edition)
    python tools/build_site.py --source-only write the Sphinx source (build/site-src/<gpu>/) and stop

An edition is one GPU's runs. Each page is made from the executed notebook that `tools/gpu_run.py` kept for
that solution on that GPU (docs/gpu-results/notebooks/<gpu>/<name>.ipynb): its cells pass through
tools/generate.py's student_notebook(), so every exercise shows the student's stub, never the solution; a
hints cell shows as the student's call for hints (no hint text); a `spoiler` cell shows its output without
its code; the `solution-only` cells are left out. The outputs (numbers, tables, figures) are the run's, each
figure with an alt text that says what it shows (figure_alt), and each page opens with the run's date, GPU
and versions. The index and the title name the GPU and say which notebooks ran to the end, which stopped
with an error and which were not run on it. A notebook without a run on the GPU shows a CPU stand-in where
one is kept (folder cpu/, labelled as one on its page), else its code alone; a page whose lesson's code has
changed since its run says so (it shows the version that ran, with that run's outputs).

The default GPU is the H100 (REFERENCE): the course's prose numbers are held to its runs (tools/prose_numbers.py,
`run:`), so its edition is the one whose pages print what their prose states, and recording another GPU
never changes what `./course site` publishes. Without an H100 run, the default is the GPU whose runs are
the most complete, then the newest.

The builder is Sphinx with myst-nb (notebooks as pages, never executed here) and sphinx-book-theme;
docs/site/ holds its configuration, style and front page (index.md, whose {{...}} fields this script fills).
Publishing: the output is a plain static folder, so any static host serves it (GitHub Pages: see the README).
"""
from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import generate as gen  # noqa: E402  (tools/generate.py: the student version of a notebook)

ARTIFACTS = ROOT / "docs" / "gpu-results" / "notebooks"
SITE_FILES = ROOT / "docs" / "site"          # conf.py, index.md, _static/ (committed)
SOURCE = ROOT / "build" / "site-src"         # the Sphinx source this script writes, one folder per edition
OUT = ROOT / "build" / "site"                # the default edition; a GPU named with --gpu: build/site-<gpu>/
STANDIN = "cpu"                              # the artifacts folder of a run without a GPU
REFERENCE = "nvidia-h100-80gb-hbm3"          # the default edition: the GPU the prose's `run:` markers read
WIDGET = "application/vnd.jupyter.widget-view+json"


# --- the GPUs and their editions ----------------------------------------------------------------------
class Edition(NamedTuple):
    gpu: str        # its folder under the artifacts ("nvidia-h200"); "" where no GPU has a run
    device: str     # as torch names it ("NVIDIA H200")
    name: str       # as a sentence names it ("H200", "T4", "H100 SXM")

    @property
    def title(self) -> str:
        return f"Feed the Beast: the {self.name} edition" if self.gpu else "Feed the Beast: no run recorded yet"


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


def run_of(path: Path) -> dict:
    """The run an artifact records (its metadata's gpu_run), read without validating the whole notebook."""
    return json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("gpu_run", {})


def gpus_with_runs(artifacts: Path = ARTIFACTS) -> list[str]:
    """The GPU folders under `artifacts` that hold at least one executed notebook (the CPU stand-ins aside)."""
    if not artifacts.is_dir():
        return []
    return sorted(d.name for d in artifacts.iterdir()
                  if d.is_dir() and d.name != STANDIN and any(d.rglob("*.ipynb")))


def standing(gpu: str, artifacts: Path = ARTIFACTS) -> tuple[int, int, str]:
    """(notebooks that ran to the end, notebooks with a run, the newest run's date) of `gpu`'s runs."""
    runs = [run_of(p) for src, _ in pages() if (p := artifacts / gpu / artifact_name(src)).is_file()]
    return (sum(r.get("status") == "ok" for r in runs), len(runs), max((r.get("date", "") for r in runs), default=""))


def default_gpu(artifacts: Path = ARTIFACTS) -> str | None:
    """The H100 where it has a run (see the module's docstring); else the GPU whose runs are the most complete,
    then the newest; None where no GPU has a run."""
    found = gpus_with_runs(artifacts)
    if REFERENCE in found:
        return REFERENCE
    return max(found, key=lambda g: (standing(g, artifacts)[0], standing(g, artifacts)[2]), default=None)


def resolve_gpu(name: str, artifacts: Path = ARTIFACTS) -> str:
    """A GPU's folder from what --gpu gave: the folder's name, or a unique part of it ("h200", "t4")."""
    found = gpus_with_runs(artifacts)
    if name in found:
        return name
    hits = [g for g in found if name.lower() in g.lower()]
    if len(hits) == 1:
        return hits[0]
    raise ValueError(f"--gpu {name!r} names {'several' if hits else 'no'} GPU with recorded runs in {artifacts}: "
                     f"give one of {', '.join(found) or '(none: run tools/gpu_run.py on a GPU first)'}")


def gpus_table():
    """course_utils/gpus.py, loaded alone (as tools/gpu_run.py loads it): it imports nothing of the course."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("course_gpus", ROOT / "course_utils" / "gpus.py")
    module = sys.modules.setdefault("course_gpus", importlib.util.module_from_spec(spec))   # dataclasses look it up
    spec.loader.exec_module(module)
    return module


def edition_name(device: str) -> str:
    """"H200" for "NVIDIA H200", "T4" for "Tesla T4": the course's short name of a card it knows (course_utils/
    gpus.py), else the name torch gives without the vendor's words."""
    card = gpus_table().lookup(device)
    return card.short if card else re.sub(r"^(NVIDIA|Tesla|GeForce)\s+", "", device).strip() or device


def edition(gpu: str | None, artifacts: Path = ARTIFACTS) -> Edition:
    if not gpu:
        return Edition("", "", "")
    device = next((run_of(p).get("device") for p in sorted((artifacts / gpu).rglob("*.ipynb"))
                   if run_of(p).get("device")), gpu)
    return Edition(gpu, device, edition_name(device))


def pick_run(src: Path, artifacts: Path = ARTIFACTS, gpu: str | None = None) -> Path | None:
    """The executed notebook the page of `src` shows in `gpu`'s edition (default: default_gpu()): that GPU's
    run, whatever its status; without one, a CPU stand-in where one is kept; else None."""
    gpu = default_gpu(artifacts) if gpu is None else gpu
    for folder in filter(None, (gpu, STANDIN)):
        path = artifacts / folder / artifact_name(src)
        if path.is_file():
            return path
    return None


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


def run_cell(run: dict | None, standin: bool, colab: str, changed: bool = False,
             ed: Edition | None = None) -> nbformat.NotebookNode:
    """The markdown cell under a page's title: where and when its outputs were made, and whether the run
    reached the end."""
    yourself = f"Run it yourself: `./course lab`, or [open it in Colab]({colab})."
    gpu = f"the {ed.name}" if ed and ed.gpu else "a GPU"
    if changed:
        yourself = ("**The lesson has changed since this run**: this page shows the version that ran, and "
                    "the current one may differ. " + yourself)
    if run is None:
        return nbformat.v4.new_markdown_cell(
            f":::{{admonition}} Not run on {gpu}\n:class: warning\n"
            f"No recorded run of this notebook on {gpu}: its code is shown, without outputs. "
            f"`python3 tools/gpu_run.py` on that GPU records one. {yourself}\n:::")
    if standin:
        title, cls = "Stand-in: run on a CPU, not on a GPU", "warning"
        words = (f"No run of this notebook on {gpu} is recorded. These outputs come from a run without a GPU, "
                 "through Triton's interpreter, kept until a GPU's run is recorded: its wall-clock times mean "
                 "nothing, and its GPU times are models.")
    elif run.get("status", "ok") != "ok":
        title, cls = f"As it ran on the {run.get('device', 'GPU')}, until it stopped", "warning"
        words = (f"The run stopped ({run['status']}): the outputs end there, and the cells after it show their "
                 "code alone.")
    else:
        title, cls = f"As it ran on the {run.get('device', 'GPU')}", "note"
        words = "Every output on this page was printed by this run."
    return nbformat.v4.new_markdown_cell(
        f":::{{admonition}} {title}\n:class: {cls} gpu-run\n**{run_line(run)}**\n\n{words} Where the lesson "
        "asks for code, the page shows the student's stub, not the code that ran; the outputs under it are those "
        f"of the solution. {yourself}\n:::")


def code_of(nb) -> list[str]:
    """What the student reads and runs: the code cells, Colab's aside."""
    return [c.source for c in nb.cells if c.cell_type == "code" and c.get("id") not in gen.COLAB_IDS]


# --- what a figure shows: its alt text -------------------------------------------------------------------
# A call in a figure's cell, and what the figure it draws shows; the first that the cell calls wins.
FIGURES = (
    ("calibration.plot", "A scatter plot of your predictions: each guess against the value revealed, on "
                         "log-log axes, with the diagonal where a perfect guess lands and a band of a factor of 2 "
                         "around it; one colour and marker per lesson"),
    ("memory_hierarchy", "A pyramid of where a kernel's bytes live on this GPU, fastest and smallest on top: "
                         "registers, shared memory, L2 cache and HBM, each with its size, and the copy bandwidth"),
    ("roofline", "A roofline on log-log axes: attainable TFLOP/s against arithmetic intensity (FLOP per byte); "
                 "the memory ceiling's slope meets the compute ceiling at the ridge, the measured operations are dots"),
    ("programs_on_sms", "A launch drawn: the elements in blocks, one program per block, the programs handed "
                        "out to the SMs, and the masked lanes past the end hatched"),
    ("timeline.show", "A timeline of the kernels each version launched, one row per version, time running left "
                      "to right, with the gaps where the GPU waited and the CPU calls that submitted the work"),
    ("compare", "A bar chart of each implementation's time, one bar per row of the table above it (shorter is "
                "faster)"),
    ("bars", "A bar chart"),
    ("curves", "A line chart"),
)
LABELS = {"xlabel": "x", "ylabel": "y", "title": "title"}
SETTERS = {"set_xlabel": "x", "set_ylabel": "y", "set_title": "title", "suptitle": "title"}


def _text(node) -> str | None:
    """A string literal's text; an f-string's with each {...} as "…"; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):   # "ms" + (" (MODEL)" if ... else "")
        left, right = _text(node.left), _text(node.right)
        return None if left is None and right is None else (left or "…") + (right or "")
    return None


def figure_labels(code: str) -> dict[str, list[str]]:
    """The axis labels, titles and line names a cell's code gives its figures as literals: {"x": [...],
    "y": [...], "title": [...], "lines": [...]}, in the order written (what is computed at run time is not
    known here, and shows as "…")."""
    found: dict[str, list[str]] = {"x": [], "y": [], "title": [], "lines": []}
    try:
        tree = ast.parse(code)
    except SyntaxError:          # an IPython magic, say: no labels, the figure's kind still known
        return found

    def add(kind, node):
        text = _text(node) if node is not None else None
        if text and text.strip("… ") and text not in found[kind]:
            found[kind].append(" ".join(text.split()))

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for kw in node.keywords:
            if kw.arg in LABELS:
                add(LABELS[kw.arg], kw.value)
        if name in SETTERS and node.args:
            add(SETTERS[name], node.args[0])
        if name == "curves":      # plot.curves(x, series, xlabel, ylabel, ...)
            for kind, i in (("x", 2), ("y", 3)):
                add(kind, node.args[i] if len(node.args) > i else None)
            if len(node.args) > 1 and isinstance(node.args[1], ast.Dict):
                for key in node.args[1].keys:
                    add("lines", key)
    return found


def report_titles(cell) -> list[str]:
    """The titles of the bench.compare tables a cell printed: the line above each table's "impl" header."""
    text = "".join(o.get("text", "") if o.get("output_type") == "stream" else o.get("data", {}).get("text/plain", "")
                   for o in cell.get("outputs", []) if o.get("output_type") != "error")
    lines = text.split("\n")
    return [lines[i - 1].strip() for i in range(1, len(lines)) if lines[i].startswith("impl ") and lines[i - 1].strip()]


def figure_alt(cell, heading: str = "") -> str:
    """What the figures of an executed code cell show, in words, for the page's alt text: the kind of figure
    (from the course's plotting call the cell makes), its axes and titles (from the cell's literals, or the
    printed tables' titles), how many panels or figures, and the section it belongs to."""
    code = cell.get("source", "")
    calls = set(re.findall(r"([A-Za-z_][\w.]*)\s*\(", code))
    called = lambda key: any(c == key or c.endswith("." + key) for c in calls)   # noqa: E731
    kind = next((words for key, words in FIGURES if called(key)), "A figure")
    figures = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
    axes = [int(m[1]) for o in figures if (m := re.search(r"with (\d+) Axes", "".join(o.get("data", {}).get(
        "text/plain", ""))))]
    labels = figure_labels(code)
    alt = kind
    if max(axes, default=1) > 1:
        alt += f", in {max(axes)} panels side by side"
    if len(figures) > 1:
        alt += f", {len(figures)} figures, one per table above them"
    if not called("roofline"):       # its axes are said in its kind
        y, x = " and ".join(labels["y"][:2]), (labels["x"] or [""])[0]
        alt += f": {y} against {x}" if y and x else f": {y}" if y else f": against {x}" if x else ""
    if labels["lines"]:
        alt += "; one line each for " + ", ".join(f"“{n}”" for n in labels["lines"][:6])
    titles = (report_titles(cell) if called("compare") else []) or labels["title"]
    if titles:
        alt += "; titled " + "; ".join(f"“{t}”" for t in titles[:4])
    alt += "."
    if heading:
        alt += f" From the section “{heading}”."
    return alt


def page_notebook(src: Path, run_path: Path | None, pin, standin: bool = False,
                  ed: Edition | None = None) -> nbformat.NotebookNode:
    """The student version of the executed notebook (or of the solution, with no run), with the run's
    outputs under each cell, an alt text on each figure, and the run's details at the top."""
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
    cells, placed, heading = [], False, ""
    for cell in student.cells:
        tags = cell.metadata.setdefault("tags", [])
        if cell.get("id") in gen.COLAB_IDS:
            continue                                     # Colab's cells: the run box links to Colab instead
        if cell.cell_type == "markdown":
            heading = next((ln.lstrip("#").strip() for ln in reversed(cell.source.split("\n"))
                            if re.match(r"#{1,4} ", ln)), heading)
        if cell.cell_type == "code":
            ran = by_id.get(cell.get("id"))
            hint_call = ran is not None and ran.cell_type == "markdown"   # a hints cell, now the button call
            if ran is not None and ran.cell_type == "code" and not hint_call:
                cell.outputs = [o for o in map(clean_output, ran.get("outputs", [])) if o is not None]
                cell.execution_count = ran.get("execution_count")
                if any("image/png" in o.get("data", {}) for o in cell.outputs):
                    cell.metadata["mystnb"] = {"image": {"alt": figure_alt(ran, heading)}}
            if "spoiler" in tags:
                tags.append("remove-input")              # its code gives the exercise away; its output not
                cell.source = "# this cell's code gives an exercise away: the page shows its output alone"
            cell.metadata.pop("jupyter", None)
            cell.metadata.pop("cellView", None)
        cells.append(cell)
        if not placed and cell.cell_type == "markdown" and cell.source.startswith("# "):
            cells.append(run_cell(run, standin, colab, changed, ed))  # under the title
            placed = True
    if not placed:
        cells.insert(0, run_cell(run, standin, colab, changed, ed))
    student.cells = cells
    student.metadata["gpu_run"] = run or {}
    return student


# --- the site --------------------------------------------------------------------------------------
Row = tuple  # (title, page, run or None, standin)


def runs_page(rows: list[Row], ed: Edition | None = None, others: list[str] = ()) -> str:
    which = f"the {ed.name} edition" if ed and ed.gpu else "this edition"
    lines = [f"# The runs behind {which}", "",
             "Each page shows the outputs of one run of its solution notebook, made by `tools/gpu_run.py` and "
             "kept in `docs/gpu-results/notebooks/`. A run on a CPU is a stand-in until the GPU's is recorded.", "",
             "| page | machine | PyTorch | Triton | run | status | wall time (s) |", "|---|---|---|---|---|---|---|"]
    for title, page, run, standin in rows:
        if run is None:
            lines.append(f"| [{title}]({page}.ipynb) | not run {f'on the {ed.name}' if ed and ed.gpu else 'yet'} "
                         "| | | | | |")
        else:
            machine = run.get("device", "?") + (" (stand-in)" if standin else "")
            lines.append(f"| [{title}]({page}.ipynb) | {machine} | {run.get('torch', '')} | {run.get('triton', '')} "
                         f"| {run.get('date', '')} | {run.get('status', '')} | {run.get('wall_s', '')} |")
    if others:
        lines += ["", "Other GPUs have recorded runs too; each has an edition of its own: "
                  + ", ".join(f"`python tools/build_site.py --gpu {g}`" for g in others) + "."]
    return "\n".join(lines) + "\n"


def state_of(rows: list[Row], ed: Edition) -> str:
    """The index's paragraph on how complete the edition is: every notebook that did not run to the end on
    its GPU is named, with what happened."""
    if not ed.gpu:
        return ("**No run of any notebook is recorded yet**: every page shows its code alone. `python3 "
                "tools/gpu_run.py --edition` on a GPU records one and builds that GPU's edition.")
    link = lambda title, page: f"[{title}]({page}.ipynb)"   # noqa: E731
    ok = [r for r in rows if r[2] and not r[3] and r[2].get("status") == "ok"]
    stopped = [r for r in rows if r[2] and not r[3] and r[2].get("status") != "ok"]
    missing = [r for r in rows if not r[2] or r[3]]
    days = sorted({r[2].get("date", "")[:10] for r in ok + stopped if r[2].get("date")})
    versions = sorted({f"PyTorch {r[2]['torch']}, Triton {r[2]['triton']}" for r in ok + stopped
                       if r[2].get("torch") and r[2].get("triton")})
    when = f" (runs of {', '.join(days)}{'; ' + '; '.join(versions) if versions else ''})" if days else ""
    if not stopped and not missing:
        return f"All {len(rows)} lessons and labs ran to the end on the {ed.name}{when}."
    text = [f"**{len(ok)} of {len(rows)} lessons and labs ran to the end on the {ed.name}**{when}."]
    if stopped:
        text.append("Stopped with an error, their pages showing the outputs up to it: " + "; ".join(
            f"{link(t, p)} ({run.get('status')})" for t, p, run, _ in stopped) + ".")
    if missing:
        text.append(f"Not run on the {ed.name}, their pages showing the code alone (or a CPU stand-in, labelled "
                    "as one): " + ", ".join(link(t, p) for t, p, *_ in missing) + ".")
    return " ".join(text)


def title_of(nb) -> str:
    for c in nb.cells:
        if c.cell_type == "markdown":
            for line in c.source.split("\n"):
                if line.startswith("# "):
                    return line[2:].strip()
    return "untitled"


def write_source(source: Path = SOURCE, artifacts: Path = ARTIFACTS, gpu: str | None = None) -> list[Row]:
    """Write `gpu`'s edition (default: default_gpu()) as Sphinx source into `source`: a page per notebook,
    the runs page, and the front page filled in."""
    gpu = default_gpu(artifacts) if gpu is None else gpu
    ed = edition(gpu, artifacts)
    if source.exists():
        shutil.rmtree(source)
    shutil.copytree(SITE_FILES, source)
    pin, rows = gen.release(), []
    for src, page in pages():
        run_path = pick_run(src, artifacts, gpu or "")
        standin = bool(run_path) and run_path.relative_to(artifacts).parts[0] == STANDIN
        nb = page_notebook(src, run_path, pin, standin, ed)
        target = source / f"{page}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        rows.append((title_of(nb), page, nb.metadata["gpu_run"] or None, standin))
    others = [g for g in gpus_with_runs(artifacts) if g != gpu]
    (source / "runs.md").write_text(runs_page(rows, ed, others), encoding="utf-8")
    index = source / "index.md"
    device = f"the {ed.device}" if ed.gpu else "no GPU yet"
    fields = {"title": ed.title, "device": device, "state": state_of(rows, ed)}
    index.write_text(re.sub(r"\{\{(\w+)\}\}", lambda m: fields[m[1]], index.read_text(encoding="utf-8")),
                     encoding="utf-8")
    return rows


# One Sphinx process for every edition asked for: Sphinx's imports and the theme's set-up, paid once, are
# most of a small site's build time.
SPHINX = ("import json, sys\nfrom sphinx.cmd.build import build_main\n"
          "sys.exit(max(build_main(argv) for argv in json.loads(sys.argv[1])))")


def build_editions(editions: dict, source: Path = SOURCE, artifacts: Path = ARTIFACTS) -> int:
    """Build each edition, {gpu or None (the default): output folder}, its Sphinx source in source/<gpu>/,
    all of them in one Sphinx process."""
    t0 = time.perf_counter()
    jobs = []
    for gpu, out in editions.items():
        gpu = default_gpu(artifacts) if gpu is None else gpu
        src = source / (gpu or "none")
        rows = write_source(src, artifacts, gpu)
        if out.exists():
            shutil.rmtree(out)
        jobs.append((edition(gpu, artifacts), rows, out, ["-b", "html", "-q", "-E", "-d", str(src) + "-doctrees",
                     "-D", f"html_title={edition(gpu, artifacts).title}", str(src), str(out)]))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", SPHINX, json.dumps([argv for *_, argv in jobs])], cwd=ROOT, env=env)
    if done.returncode:
        return done.returncode
    for ed, rows, out, _ in jobs:
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        ran = sum(r[2] is not None for r in rows)
        print(f"site: {ed.title}, {len(rows)} pages ({ran} with a recorded run) in {out}/index.html, "
              f"{size / 1e6:.1f} MB")
    print(f"site: {len(jobs)} edition(s) built in {time.perf_counter() - t0:.0f} s")
    return 0


def build(out: Path = OUT, source: Path = SOURCE, artifacts: Path = ARTIFACTS, gpu: str | None = None) -> int:
    """One edition: `gpu`'s (default: default_gpu()) into `out`."""
    return build_editions({gpu: out}, source, artifacts)


def listing(artifacts: Path = ARTIFACTS) -> str:
    default = default_gpu(artifacts)
    lines = []
    for gpu in gpus_with_runs(artifacts):
        ok, ran, newest = standing(gpu, artifacts)
        lines.append(f"{gpu}: {edition(gpu, artifacts).device}, {ok} of {len(pages())} notebooks ran to the end "
                     f"({ran} run), newest run {newest or '?'}{'  [the default edition]' if gpu == default else ''}")
    return "\n".join(lines) or f"no GPU has a recorded run in {artifacts}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--gpu", action="append", metavar="GPU",
                    help="whose edition: a folder of --artifacts (nvidia-h200) or a unique part of its name (h200); "
                         "repeat it for several, or 'all' (default: the H100's, see --list)")
    ap.add_argument("--out", type=Path, help="where the site goes, for one edition (default build/site for the "
                    "default GPU, build/site-<gpu> for one named)")
    ap.add_argument("--source", type=Path, default=SOURCE, help="where the Sphinx source goes (build/site-src)")
    ap.add_argument("--artifacts", type=Path, default=ARTIFACTS, help="the executed notebooks' folder")
    ap.add_argument("--source-only", action="store_true", help="write the Sphinx source and stop")
    ap.add_argument("--list", action="store_true", help="list the GPUs with recorded runs and stop")
    args = ap.parse_args(argv)
    artifacts = args.artifacts.resolve()
    if args.list:
        print(listing(artifacts))
        return 0
    try:
        gpus = [None] if not args.gpu else gpus_with_runs(artifacts) if args.gpu == ["all"] else \
            [resolve_gpu(g, artifacts) for g in args.gpu]
    except ValueError as e:
        ap.error(str(e))
    if args.out and len(gpus) != 1:
        ap.error("--out names the folder of one edition: give one --gpu with it, or let each go to build/site-<gpu>/")
    editions = {g: (args.out or (OUT if g is None else OUT.parent / f"site-{g}")).resolve() for g in gpus}
    if args.source_only:
        for g in gpus:
            g = default_gpu(artifacts) if g is None else g
            write_source(args.source.resolve() / (g or "none"), artifacts, g)
        return 0
    return build_editions(editions, args.source.resolve(), artifacts)


if __name__ == "__main__":
    sys.exit(main())
