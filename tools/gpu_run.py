#!/usr/bin/env python3
"""Run the solution notebooks top to bottom on a real GPU and write what they printed to
docs/gpu-results/<gpu>.md.

    python3 tools/gpu_run.py                        every solution notebook (solutions/, solutions/labs/)
    python3 tools/gpu_run.py 03 solutions/05_x.ipynb  those named (a path, a file name, or its start)
    python3 tools/gpu_run.py --tests                 the test suite (pytest tests), then every notebook
    python3 tools/gpu_run.py --tests-only --select "tests/test_gpu.py"   a part of the test suite alone
    python3 tools/gpu_run.py --student 04 05        the student's path: those student notebooks with
                                                     their stubs written (as ./course test runs them)
    python3 tools/gpu_run.py --merge build/gpu/*/*.md   fold reports that came back from other calls into
                                                     docs/gpu-results/ (per section, the latest run wins)
    python3 tools/gpu_run.py --plan 7.5             rehearse another GPU's plan (here the T4's) on this one:
                                                     every notebook runs with COURSE_PLAN=7.5, its report is
                                                     <gpu>-plan-sm75.md, and no artifact reaches the site
    python3 tools/gpu_run.py --edition              the class's GPU in one step: every solution on this GPU,
                                                     recorded, then this GPU's edition of the site built into
                                                     build/site-<gpu>/, and report + executed notebooks + site
                                                     zipped into --out/edition-<gpu>.zip
    python3 tools/gpu_run.py --edition --resume --results DIR   the same, in pieces that survive a lost
                                                     machine (Colab): the notebooks this GPU already ran with
                                                     today's code, in DIR (a Drive folder), are skipped
    options: --out DIR (default $OUT, else build/gpu-run)  --timeout SECONDS per cell (300)  --fresh

Each notebook runs in a fresh kernel of this very Python (no kernelspec needs installing), with its
folder as the working directory and COURSE_HEADLESS=1, and stops at its first error, as a student
would. The report holds, per notebook: status, wall time, and each code cell's text output (stdout,
results; figures as [figure]), trimmed, plus the error if any. Sections of notebooks not run this time
are kept from the existing report, unless --fresh. A copy of the report and a zip of the executed
notebooks go to --out.

Each executed notebook, outputs and figures included, is also kept as an artifact (what
`./course site` builds the browsable edition from): docs/gpu-results/notebooks/<gpu>/<name>.ipynb,
with the run in its metadata under "gpu_run" (date, device, capability, driver, torch, CUDA,
Triton, Python, status, wall time, source path, and the peak GPU memory the notebook held:
torch.cuda.max_memory_allocated() and max_memory_reserved(), asked of its kernel after the run), and in the zip under --out. Bring what came back
from a GPU machine home with --merge, the zip as well as the report:
    python3 tools/gpu_run.py --merge build/gpu/*/*.md build/gpu/*/*.zip
(an artifact replaces the one there only if its run is not older). An edition's zip merges the same way, its
report and notebooks both: python3 tools/gpu_run.py --merge edition-tesla-t4.zip

The report is rewritten after every notebook, and each executed notebook is kept as soon as it ends, so a
run cut short (a Colab runtime recycled) loses only the notebook it was in; --resume goes on from there.
tools/record_this_gpu.ipynb does all this on Colab, from a badge (docs/colab.md).

Where Jupyter is not installed (the lent GPU machines), carry the wheels that tools/gpu_wheels.sh
fetches and put them on the path first:
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAN_VARIABLE = "COURSE_PLAN"   # course_utils/capability.py reads it
SOURCES = ["solutions", "solutions/labs"]
MAX_LINES, MAX_CHARS = 40, 4000   # per cell, after which the middle is elided
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SECTION = re.compile(r"<!-- section: (?P<name>.+?) \| (?P<status>.+?) \| (?P<wall>.+?) \| (?P<date>.+?) -->\n"
                     r"(?P<body>.*?)<!-- end section -->\n?", re.S)


# --- which notebooks, which machine -----------------------------------------------------------------
def all_notebooks() -> list[Path]:
    return [p for d in SOURCES for p in sorted((ROOT / d).glob("*.ipynb"))]


def resolve(names: list[str]) -> list[Path]:
    if not names:
        return all_notebooks()
    found = []
    for name in names:
        p = Path(name)
        if p.suffix == ".ipynb" and p.exists():
            found.append(p.resolve())
            continue
        hits = [q for q in all_notebooks() if q.name == name or q.name.startswith(name)]
        if len(hits) != 1:
            sys.exit(f"gpu_run: {name!r} names {len(hits)} solution notebooks: "
                     f"{[h.name for h in hits] or 'none'}")
        found.append(hits[0])
    return found


def student_path(solutions: list[Path], folder: Path = ROOT / "build" / "student-path") -> list[Path]:
    """The student notebook of each solution with its stubs written, under build/student-path/ as
    ./course test makes them; run from there, their sections are named build/student-path/..."""
    import nbformat
    sys.path.insert(0, str(ROOT / "tools"))
    import generate as gen  # tools/generate.py, as build_site.py and nbgrader_course.py use it
    students = dict(gen.targets())
    out = []
    for src in solutions:
        path = folder / students[src].relative_to(ROOT)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(gen.filled_student_notebook(src), path)
        out.append(path)
    return out


def machine() -> dict:
    """The device and versions, read in a child process so that this one holds no CUDA context."""
    code = ("import json, platform, torch, triton\n"
            "ok = torch.cuda.is_available()\n"
            "print(json.dumps({'device': torch.cuda.get_device_name() if ok else 'cpu (no GPU)',\n"
            "  'capability': '.'.join(map(str, torch.cuda.get_device_capability())) if ok else '',\n"
            "  'torch': torch.__version__, 'cuda': torch.version.cuda or '', 'triton': triton.__version__,\n"
            "  'python': platform.python_version()}))")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        info = json.loads(out.stdout.strip().splitlines()[-1])
    except Exception as e:  # noqa: BLE001  (report what we can)
        info = {"device": "unknown", "error": f"{type(e).__name__}: {e}"}
    try:
        info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True, timeout=30).stdout.split("\n")[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def slug(device: str) -> str:
    return "cpu" if device.startswith("cpu") else re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-") or "unknown"


# --- the executed notebooks, kept as artifacts ------------------------------------------------------
RUN_KEYS = ("device", "capability", "plan", "driver", "torch", "cuda", "triton", "python", "date")


def gpus_table():
    """course_utils/gpus.py, loaded alone: it imports nothing of the course (nor torch), and this process
    must hold no CUDA context."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("course_gpus", ROOT / "course_utils" / "gpus.py")
    module = sys.modules.setdefault("course_gpus", importlib.util.module_from_spec(spec))   # dataclasses look it up
    spec.loader.exec_module(module)
    return module


def plan_of(value: str) -> tuple[str, str]:
    """(what the report and artifacts say, a file-name part) of --plan VALUE: ("the T4's plan (COURSE_PLAN=7.5)
    rehearsed: ...", "sm75"). A value that names no plan stops the run with what to give."""
    gpus = gpus_table()
    try:
        cc, card = gpus.parse_plan(value, "--plan")
    except ValueError as e:
        sys.exit(f"gpu_run: {e}")
    return (f"{gpus.plan_label(cc, card)} ({PLAN_VARIABLE}={value}), rehearsed: the times are this GPU's, "
            f"not measured on the GPU rehearsed", f"sm{cc[0]}{cc[1]}")


def artifact_name(rel: str) -> str:
    """solutions/05_x.ipynb -> 05_x.ipynb, solutions/labs/lab1_y.ipynb -> labs/lab1_y.ipynb."""
    parts = Path(rel).parts
    return Path(*parts[1:]).as_posix() if len(parts) > 1 and parts[0] == "solutions" else Path(rel).name


def artifact(nb, rel: str, info: dict, status: str, seconds: float, peak: dict | None = None):
    """A copy of the executed notebook with the run it came from in its metadata (peak GPU memory in
    bytes under "peak_gpu_memory": {"allocated", "reserved"}, or null where no GPU was used)."""
    import copy
    nb = copy.deepcopy(nb)
    nb.metadata["gpu_run"] = {**{k: info[k] for k in RUN_KEYS if info.get(k)},
                              "source": rel, "status": status, "wall_s": round(seconds, 1),
                              "peak_gpu_memory": peak}
    return nb


def save_artifact(nb, folder: Path, gpu: str, rel: str) -> Path:
    import nbformat
    target = folder / gpu / artifact_name(rel)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return target


def merge_artifact(path: Path, results: Path) -> Path | None:
    """Put an executed notebook that came back from another machine into results/notebooks/<gpu>/,
    unless the one there is from a later run."""
    import nbformat
    nb = nbformat.read(path, as_version=4)
    run = nb.metadata.get("gpu_run")
    if not run or "source" not in run:
        sys.exit(f"gpu_run: {path} has no gpu_run metadata: not an artifact of tools/gpu_run.py")
    if not run["source"].startswith("solutions/"):
        return None   # a --student run: the solutions' runs are the artifacts
    if run.get("plan"):
        return None   # a --plan rehearsal: its times are not the GPU's own, so the site never shows them
    target = results / "notebooks" / slug(run.get("device", "unknown")) / artifact_name(run["source"])
    if target.exists():
        old = nbformat.read(target, as_version=4).metadata.get("gpu_run", {})
        if old.get("date", "") > run.get("date", ""):
            return None
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return target


# --- running one notebook ---------------------------------------------------------------------------
def kernel_manager(plan: str = ""):
    """A kernel of this very Python, whatever kernelspecs are (not) installed; plan: COURSE_PLAN's value."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager

    env = {"COURSE_HEADLESS": "1", "PYTHONUNBUFFERED": "1",
           # figures come back as images (a caller's MPLBACKEND=Agg would swallow them)
           "MPLBACKEND": "module://matplotlib_inline.backend_inline",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if plan:
        env[PLAN_VARIABLE] = plan

    class ThisPython(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name="python (gpu_run)", language="python", env=env)

    return KernelManager(kernel_name="gpu-run", kernel_spec_manager=ThisPython())


# Asked of the kernel after the notebook's last cell (or its failure), before it shuts down: the most GPU
# memory the notebook's tensors held at once, and what PyTorch's caching allocator reserved for them
# (what a T4's 15 GB must hold). None where torch never touched a GPU.
PEAK_PROBE = """import json as _json, sys as _sys
_t = _sys.modules.get("torch")
print("gpu_run peak:", _json.dumps({"allocated": _t.cuda.max_memory_allocated(),
                                    "reserved": _t.cuda.max_memory_reserved()}
      if _t is not None and _t.cuda.is_available() and _t.cuda.is_initialized() else None))"""


def peak_memory(km, timeout: int = 60) -> dict | None:
    """PEAK_PROBE's answer from the kernel of `km`: {"allocated": bytes, "reserved": bytes}, or None where
    the notebook used no GPU or the kernel is gone."""
    try:
        if not km.is_alive():
            return None
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=timeout)
            said = []
            kc.execute_interactive(PEAK_PROBE, timeout=timeout, store_history=False, output_hook=lambda msg: said.append(
                msg["content"].get("text", "")) if msg["msg_type"] == "stream" else None)
        finally:
            kc.stop_channels()
    except Exception:  # noqa: BLE001  (a missing number, never a failed run)
        return None
    line = next((ln for ln in "".join(said).splitlines() if ln.startswith("gpu_run peak:")), None)
    return json.loads(line.split(":", 1)[1]) if line else None


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def peak_text(peak: dict | None) -> str:
    return (f"peak GPU memory {gib(peak['allocated'])} allocated, {gib(peak['reserved'])} reserved"
            if peak else "peak GPU memory: none (no GPU used)")


def execute(path: Path, timeout: int, plan: str = ""):
    """Run the notebook (with COURSE_PLAN=plan, if given); return (executed notebook, status, seconds, peak GPU
    memory as PEAK_PROBE gives it)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    km = kernel_manager(plan)
    client = NotebookClient(nb, km=km, timeout=timeout, startup_timeout=180, allow_errors=False,
                            record_timing=True, resources={"metadata": {"path": str(path.parent)}})
    t0, status = time.perf_counter(), "ok"
    try:
        client.execute()
    except CellExecutionError:
        status = f"error in cell {failed_cell(nb)}"
    except CellTimeoutError:
        status = f"timeout (> {timeout} s) in cell {running_cell(nb)}"
    except DeadKernelError:
        status = f"kernel died in cell {running_cell(nb)}"
    except Exception as e:  # noqa: BLE001  (a kernel that would not start, say: report and go on)
        status = f"could not run: {type(e).__name__}: {str(e).strip()[:300]}"
    seconds = time.perf_counter() - t0
    peak = peak_memory(km)
    try:   # the kernel was ours (km given): shut it down, so the next notebook starts with the GPU empty
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    except Exception:  # noqa: BLE001
        pass
    return nb, re.sub(r"[|\s]+", " ", status), seconds, peak


def failed_cell(nb) -> int | str:
    for i, c in enumerate(nb.cells):
        if c.cell_type == "code" and any(o.output_type == "error" for o in c.get("outputs", [])) \
                and "raises-exception" not in c.metadata.get("tags", []):
            return i
    return "?"


def running_cell(nb) -> int | str:
    """The cell that started but did not finish."""
    for i, c in enumerate(nb.cells):
        ex = c.metadata.get("execution", {})
        if "iopub.status.busy" in ex and "shell.execute_reply" not in ex:
            return i
    return "?"


# --- the test suite ---------------------------------------------------------------------------------
def run_tests(out: Path, selection: list[str]) -> tuple[str, float, str]:
    """Run `pytest tests` as `./course test` would on this machine (the browser test aside: no
    JupyterLab here); return (status, seconds, report body). GPU-only tests run only here."""
    import xml.etree.ElementTree as ET
    junit = out / "pytest-junit.xml"
    env = dict(os.environ, COURSE_HEADLESS="1", MPLBACKEND="Agg", PYTHONHASHSEED="0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "pytest", *selection, "-q", "-rfE", "-m", "not browser", f"--junitxml={junit}"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    (out / "pytest.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    summary = next((ln.strip("= ") for ln in reversed(done.stdout.splitlines()) if " in " in ln), "no summary")
    lines = [f"`{shlex.join(['python3', '-m'] + cmd[2:-1])}`: **{summary}**", ""]
    try:
        cases = ET.parse(junit).getroot().iter("testcase")
    except (OSError, ET.ParseError):
        cases = []
    gpu_only, failed = [], []
    for c in cases:
        verdict = "skipped" if c.find("skipped") is not None else "FAILED" if (
            c.find("failure") is not None or c.find("error") is not None) else "passed"
        name = f"{c.get('classname', '').replace('tests.', '')}::{c.get('name')}"
        if "test_gpu" in name:
            gpu_only.append(f"- {verdict}: {name}")
        if verdict == "FAILED":
            bad = c.find("failure") if c.find("failure") is not None else c.find("error")
            failed.append(f"- {name}: {(bad.get('message') or '').strip()[:300]}")
    if gpu_only:
        lines += ["The GPU-only tests (tests/test_gpu.py):", ""] + gpu_only + [""]
    if failed:
        lines += ["Failures:", ""] + failed + [""]
    status = "ok" if done.returncode == 0 else f"failed (pytest exit {done.returncode})"
    return status, seconds, "\n".join(lines)


def tests_name(selection: list[str]) -> str:
    return f"pytest {' '.join(selection)}".replace("|", "/")


def tests_section(name: str, status: str, seconds: float, body: str, date: str) -> str:
    return (f"<!-- section: {name} | {status} | {seconds:.1f} | {date} -->\n## {name}\n\n"
            f"**{status}** in {seconds:.1f} s (run {date})\n\n{body}\n<!-- end section -->\n")


# --- the report -------------------------------------------------------------------------------------
def trim(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    if len(lines) > MAX_LINES:
        cut = len(lines) - MAX_LINES
        lines = lines[:MAX_LINES // 2] + [f"[... {cut} lines left out ...]"] + lines[-MAX_LINES // 2:]
    text = "\n".join(lines)
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS // 2] + f"\n[... {len(text) - MAX_CHARS} characters left out ...]\n" + text[-MAX_CHARS // 2:]
    return text


def output_text(o) -> str:
    if o.output_type == "stream":
        text = "".join(o.text) if isinstance(o.text, list) else o.text
        return text if o.name == "stdout" else "".join(f"[stderr] {ln}\n" for ln in text.rstrip("\n").split("\n"))
    if o.output_type == "error":
        tb = ANSI.sub("", "\n".join(o.get("traceback", [])))
        return f"[error] {o.ename}: {o.evalue}\n" + "\n".join(tb.strip().split("\n")[-12:]) + "\n"
    data = o.get("data", {})
    if any(k.startswith("image/") for k in data):
        return "[figure]\n"
    if "application/vnd.jupyter.widget-view+json" in data:
        return "[widget]\n"
    text = data.get("text/plain", "")
    return ("".join(text) if isinstance(text, list) else text) + "\n" if text else ""


def cell_seconds(cell) -> str:
    ex = cell.metadata.get("execution", {})
    try:
        a, b = (dt.datetime.fromisoformat(ex[k].replace("Z", "+00:00"))
                for k in ("iopub.status.busy", "shell.execute_reply"))
        return f"{(b - a).total_seconds():.2f} s"
    except (KeyError, ValueError):
        return "not run"


def fence(text: str) -> str:
    ticks = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return f"{ticks}text\n{text}\n{ticks}"


def section(name: str, nb, status: str, seconds: float, date: str, peak: dict | None = None) -> str:
    parts = [f"<!-- section: {name} | {status} | {seconds:.1f} | {date} -->",
             f"## {name}", "", f"**{status}** in {seconds:.1f} s (run {date}); {peak_text(peak)}", ""]
    for i, c in enumerate(nb.cells):
        if c.cell_type != "code" or not c.get("outputs"):
            continue
        lines = [ln.strip() for ln in c.source.split("\n") if ln.strip()]
        first = next((ln for ln in lines if not ln.startswith("#")), lines[0] if lines else "")[:80]
        text = "".join(output_text(o) for o in c.outputs).strip("\n")
        if text:
            parts += [f"**cell {i}** ({cell_seconds(c)}): `{first.replace('`', chr(39))}`", "", fence(trim(text)), ""]
    parts.append("<!-- end section -->")
    return "\n".join(parts) + "\n"


def report(info: dict, sections: dict[str, tuple[str, str, str, str]]) -> str:
    head = [f"# GPU results: {info.get('device', 'unknown')}", "",
            "Written by `python3 tools/gpu_run.py`: every solution notebook run top to bottom on this machine.", "",
            "| | |", "|---|---|"]
    for key in RUN_KEYS:
        if info.get(key):
            head.append(f"| {key} | {info[key]} |")
    head += ["", "| notebook | status | wall time | run |", "|---|---|---|---|"]
    for name, (status, wall, date, _) in sections.items():
        head.append(f"| {name} | {status} | {wall} s | {date} |")
    return "\n".join(head) + "\n\n" + "\n".join(body for *_, body in sections.values())


def existing_sections(path: Path) -> dict:
    if not path.exists():
        return {}
    return {m["name"]: (m["status"], m["wall"], m["date"], m[0] if m[0].endswith("\n") else m[0] + "\n")
            for m in SECTION.finditer(path.read_text(encoding="utf-8"))}


def header_info(path: Path) -> dict:
    rows = re.findall(r"^\| (\w+) \| (.+?) \|$", path.read_text(encoding="utf-8"), re.M)
    return {k: v for k, v in rows if k in RUN_KEYS}


def merge(reports: list[Path], results: Path) -> int:
    """Each device call is a fresh machine with the report as it was when the call started, so reports of
    calls made side by side each lack the others' sections: keep, per section, the latest run."""
    results.mkdir(parents=True, exist_ok=True)
    notebooks = [r for r in reports if r.suffix == ".ipynb"]
    zips = [r for r in reports if r.suffix == ".zip"]
    reports = [r for r in reports if r.suffix not in (".ipynb", ".zip")]
    for i, z in enumerate(zips):   # executed-<gpu>.zip or edition-<gpu>.zip, as it came back
        unpacked = Path(tempfile.mkdtemp(prefix=f"gpu_run_zip{i}_"))  # what came back may be read-only
        with zipfile.ZipFile(z) as zf:
            zf.extractall(unpacked)
        notebooks += sorted(unpacked.rglob("*.ipynb"))
        # an edition's zip carries its report at the top (its site holds no notebook, and no report)
        reports += [r for r in sorted(unpacked.glob("*.md")) if r.read_text(encoding="utf-8").startswith("# GPU results:")]
    kept = [t for t in (merge_artifact(p, results) for p in notebooks) if t]
    if notebooks:
        print(f"gpu_run: {len(kept)} of {len(notebooks)} executed notebook(s) kept in {results / 'notebooks'}")
    by_file: dict[str, list[Path]] = {}
    for r in reports:
        by_file.setdefault(r.name, []).append(r)
    for name, paths in by_file.items():
        target = results / name
        sections = existing_sections(target)
        infos = [header_info(target)] if target.exists() else []
        for p in paths:
            infos.append(header_info(p))
            for key, sec in existing_sections(p).items():
                if key not in sections or sec[2] >= sections[key][2]:
                    sections[key] = sec
        info = max(infos, key=lambda i: i.get("date", ""))
        order = {p.relative_to(ROOT).as_posix(): i for i, p in enumerate(all_notebooks())}
        sections = dict(sorted(sections.items(), key=lambda kv: (not kv[0].startswith("pytest "),
                                                                 order.get(kv[0], len(order)), kv[0])))
        target.write_text(report(info, sections), encoding="utf-8")
        print(f"gpu_run: merged {len(paths)} report(s) into {target} ({len(sections)} sections)")
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("notebooks", nargs="*", help="solution notebooks to run (default: all)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or ROOT / "build" / "gpu-run"),
                    help="where the executed notebooks and a copy of the report go (default: $OUT)")
    ap.add_argument("--results", type=Path, default=ROOT / "docs" / "gpu-results", help="the reports' folder")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    ap.add_argument("--fresh", action="store_true", help="drop sections of notebooks not run this time")
    ap.add_argument("--tests", action="store_true", help="run the test suite first and report it too")
    ap.add_argument("--tests-only", action="store_true", help="run the test suite and no notebook")
    ap.add_argument("--select", default="tests", help="what pytest runs, e.g. \"tests -k 'not TestLive'\" "
                    "(default: tests); each selection is a section of its own")
    ap.add_argument("--student", action="store_true",
                    help="run the student notebooks of those solutions instead, stubs written with the solution's "
                         "code (tools/generate.py --filled), as ./course test runs them on the CPU")
    ap.add_argument("--plan", default="", metavar="CC",
                    help="rehearse another GPU's plan on this one (COURSE_PLAN): a capability, 7.5 or sm_75, or a "
                         "card, T4; the report is <gpu>-plan-sm75.md and no executed notebook goes to the site")
    ap.add_argument("--edition", action="store_true",
                    help="then build this GPU's edition of the site (build/site-<gpu>/) from every run of it in "
                         "--results, and zip report, executed notebooks and site into --out/edition-<gpu>.zip")
    ap.add_argument("--site", type=Path, help="where --edition builds the site (default build/site-<gpu>)")
    ap.add_argument("--resume", action="store_true",
                    help="skip the notebooks this GPU already ran in --results with the code they have now (to the "
                         "end or to an error): a run cut short goes on where it stopped")
    ap.add_argument("--merge", nargs="+", type=Path, metavar="REPORT",
                    help="merge these reports (and executed notebooks, .ipynb) into --results instead of "
                         "running anything")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.merge:
        return merge(args.merge, args.results)
    try:
        import ipykernel  # noqa: F401
        import nbclient  # noqa: F401
    except ImportError as e:
        sys.exit(f"gpu_run: {e}. Install the test extra, or carry the wheels of tools/gpu_wheels.sh.")
    if args.edition:
        refuse_edition(args)      # before an hour of notebooks, not after

    rehearsal = plan_of(args.plan) if args.plan else None
    paths = [] if args.tests_only else resolve(args.notebooks)
    if args.student:
        paths = student_path(paths)
    info = machine()
    info["date"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    name = slug(info.get("device", "unknown"))
    if rehearsal:
        info["plan"], part = rehearsal
        name += f"-plan-{part}"     # a report of its own: a rehearsal's times are never the GPU's own
    if args.edition and name == "cpu":
        sys.exit(f"gpu_run: --edition records a GPU's edition, and this machine has none ({info.get('device')}): "
                 "on Colab, Runtime > Change runtime type > T4 GPU")
    if args.resume:
        done = [p for p in paths if already_ran(p, args.results / "notebooks" / name)]
        paths = [p for p in paths if p not in done]
        if done:
            print(f"gpu_run: --resume: {len(done)} notebook(s) already ran on this GPU with today's code: "
                  + ", ".join(p.stem for p in done), flush=True)
    print(f"gpu_run: {len(paths)} notebook(s) on {info.get('device')} -> {name}.md", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    args.results.mkdir(parents=True, exist_ok=True)
    report_path = args.results / f"{name}.md"
    sections = {} if args.fresh else existing_sections(report_path)

    import nbformat
    failed = 0
    if args.tests or args.tests_only:
        selection = shlex.split(args.select)
        run = tests_name(selection)
        print(f"  {run} ...", end=" ", flush=True)
        status, seconds, body = run_tests(args.out, selection)
        print(f"{status} ({seconds:.1f} s)", flush=True)
        failed += status != "ok"
        sections[run] = (status, f"{seconds:.1f}", info["date"], tests_section(run, status, seconds, body, info["date"]))
    with zipfile.ZipFile(args.out / f"executed-{name}.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for path in paths:
            rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
            print(f"  {rel} ...", end=" ", flush=True)
            nb, status, seconds, peak = execute(path, args.timeout, args.plan)
            print(f"{status} ({seconds:.1f} s; {peak_text(peak)})", flush=True)
            failed += status != "ok"
            sections[rel] = (status, f"{seconds:.1f}", info["date"],
                             section(rel, nb, status, seconds, info["date"], peak))
            kept = artifact(nb, rel, info, status, seconds, peak)
            zf.writestr(rel, nbformat.writes(kept))  # one file comes back from a lent machine, not one per notebook
            if not args.student and not args.plan:   # the site is built from the solutions' own runs
                save_artifact(kept, args.results / "notebooks", name, rel)
            write_report(report_path, info, sections)   # after each notebook: a lost machine loses only the next
    write_report(report_path, info, sections)
    if args.out.resolve() != args.results.resolve():
        shutil.copy(report_path, args.out / report_path.name)
    print(f"gpu_run: wrote {report_path}, {args.out / f'executed-{name}.zip'}"
          f"{f' and {len(paths)} notebook(s) in ' + str(args.results / 'notebooks' / name) if paths and not args.student and not args.plan else ''}; "
          f"{failed} notebook(s) failed")
    if args.edition:
        site = args.site or ROOT / "build" / f"site-{name}"
        if build_edition(site, args.results, name):
            return 2
        print(f"gpu_run: the {name} edition in {site}/index.html; all of it in {zip_edition(args.out, args.results, name, site)}")
    return 1 if failed else 0


def write_report(path: Path, info: dict, sections: dict) -> None:
    order = {p.relative_to(ROOT).as_posix(): i for i, p in enumerate(all_notebooks())}
    # the test suite first, then the notebooks in course order
    sections = dict(sorted(sections.items(), key=lambda kv: (not kv[0].startswith("pytest "),
                                                             order.get(kv[0], len(order)), kv[0])))
    path.write_text(report(info, sections), encoding="utf-8")


# --- --resume and --edition: the class's GPU in one step --------------------------------------------
SITE_PACKAGES = ("sphinx", "myst_nb", "sphinx_book_theme")   # what tools/build_site.py builds with


def refuse_edition(args) -> None:
    """Stop at once, saying why, where --edition could not end in a site."""
    import importlib.util
    if args.plan or args.student:
        sys.exit("gpu_run: --edition records the solutions on this GPU as they are: not with --plan or --student")
    missing = [m for m in SITE_PACKAGES if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(f"gpu_run: --edition builds the site and needs {', '.join(missing)}: "
                 "pip install sphinx myst-nb sphinx-book-theme (or the course's test extra)")


def code_cells(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


def already_ran(path: Path, kept: Path) -> bool:
    """True when `kept` (results/notebooks/<gpu>/) holds a run of this solution with the code it has now, to the
    end or to an error: --resume goes on where a run was cut short, and runs a notebook that failed with
    today's code again only when it is named without --resume (the edition says it failed)."""
    import nbformat
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    artifact_path = kept / artifact_name(rel)
    if not artifact_path.is_file():
        return False
    ran = nbformat.read(artifact_path, as_version=4)
    return bool(ran.metadata.get("gpu_run")) and code_cells(ran) == code_cells(nbformat.read(path, as_version=4))


def build_edition(site: Path, results: Path, name: str) -> int:
    """tools/build_site.py's edition of GPU `name` from the runs kept in results/notebooks/."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_site
    return build_site.build(site, artifacts=results / "notebooks", gpu=name)


def zip_edition(out: Path, results: Path, name: str, site: Path) -> Path:
    """out/edition-<name>.zip: the report (<name>.md), every executed notebook of this GPU (notebooks/<name>/)
    and its site (site-<name>/). `gpu_run.py --merge` takes the zip as it is."""
    target = out / f"edition-{name}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        report_path = results / f"{name}.md"
        if report_path.is_file():
            zf.write(report_path, report_path.name)
        for folder, prefix in ((results / "notebooks" / name, f"notebooks/{name}"), (site, f"site-{name}")):
            for f in sorted(folder.rglob("*")):
                if f.is_file():
                    zf.write(f, f"{prefix}/{f.relative_to(folder).as_posix()}")
    return target


if __name__ == "__main__":
    sys.exit(main())
