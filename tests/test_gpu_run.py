"""tools/gpu_run.py keeps every executed notebook as an artifact (what the browsable edition is built
from): the run in its metadata, a place per GPU, and a merge that never lets an older run win. The class's GPU
in one step (--edition, --resume, tools/record_this_gpu.ipynb): what it skips, what it refuses, the zip it
hands back and merges, and the Colab notebook's calls; no notebook is run here."""
import importlib.util
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("course_gpu_run", ROOT / "tools" / "gpu_run.py")
gpu_run = sys.modules["course_gpu_run"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_run)

INFO = {"device": "NVIDIA H100 80GB HBM3", "capability": "9.0", "driver": "580.1", "torch": "2.11.0+cu130",
        "cuda": "13.0", "triton": "3.6.0", "python": "3.12.3", "date": "2026-11-22 17:42 UTC", "error": ""}


def executed(text: str):
    return new_notebook(cells=[new_code_cell("print(1)", outputs=[new_output("stream", name="stdout", text=text)])])


def test_artifact_names_follow_the_solutions_layout():
    assert gpu_run.artifact_name("solutions/05_fused_add_norm.ipynb") == "05_fused_add_norm.ipynb"
    assert gpu_run.artifact_name("solutions/labs/lab1_swiglu.ipynb") == "labs/lab1_swiglu.ipynb"


def test_an_artifact_carries_its_run_and_keeps_its_outputs(tmp_path):
    nb = executed("3.35 TB/s\n")
    peak = {"allocated": 3 * 2**30, "reserved": 4 * 2**30}
    kept = gpu_run.artifact(nb, "solutions/00_setup.ipynb", INFO, "ok", 22.14, peak)
    assert "gpu_run" not in nb.metadata          # the notebook the report is written from is untouched
    run = kept.metadata["gpu_run"]
    assert run == {**{k: v for k, v in INFO.items() if k != "error"},
                   "source": "solutions/00_setup.ipynb", "status": "ok", "wall_s": 22.1, "peak_gpu_memory": peak}
    path = gpu_run.save_artifact(kept, tmp_path, gpu_run.slug(INFO["device"]), "solutions/00_setup.ipynb")
    assert path == tmp_path / "nvidia-h100-80gb-hbm3" / "00_setup.ipynb"
    assert nbformat.read(path, as_version=4).cells[0].outputs[0].text == "3.35 TB/s\n"


def test_merge_keeps_the_latest_run(tmp_path):
    def came_back(folder, date, text):
        nb = gpu_run.artifact(executed(text), "solutions/labs/lab1_swiglu.ipynb", {**INFO, "date": date}, "ok", 1)
        return gpu_run.save_artifact(nb, tmp_path / folder, "h100", "solutions/labs/lab1_swiglu.ipynb")

    results = tmp_path / "results"
    target = results / "notebooks" / "nvidia-h100-80gb-hbm3" / "labs" / "lab1_swiglu.ipynb"
    assert gpu_run.merge([came_back("a", "2026-11-22 18:00 UTC", "new")], results) == 0
    assert gpu_run.merge([came_back("b", "2026-11-22 17:00 UTC", "old")], results) == 0
    assert nbformat.read(target, as_version=4).cells[0].outputs[0].text == "new"
    gpu_run.merge([came_back("c", "2026-11-23 09:00 UTC", "newer")], results)
    assert nbformat.read(target, as_version=4).cells[0].outputs[0].text == "newer"


def test_merge_takes_the_executed_notebooks_from_the_zip_that_came_back(tmp_path):
    """A lent machine sends back a few files: the zip holds every executed notebook with its run."""
    import zipfile
    came_back = tmp_path / "call" / "executed-nvidia-h100-80gb-hbm3.zip"
    came_back.parent.mkdir()
    with zipfile.ZipFile(came_back, "w") as zf:
        for rel, text in [("solutions/00_setup.ipynb", "zero"), ("solutions/labs/lab1_swiglu.ipynb", "one")]:
            zf.writestr(rel, nbformat.writes(gpu_run.artifact(executed(text), rel, INFO, "ok", 1)))
    results = tmp_path / "results"
    assert gpu_run.merge([came_back], results) == 0
    kept = results / "notebooks" / "nvidia-h100-80gb-hbm3"
    assert nbformat.read(kept / "00_setup.ipynb", as_version=4).cells[0].outputs[0].text == "zero"
    assert nbformat.read(kept / "labs" / "lab1_swiglu.ipynb", as_version=4).metadata["gpu_run"]["source"] == \
        "solutions/labs/lab1_swiglu.ipynb"


def test_a_student_path_run_is_never_kept_as_a_solution_artifact(tmp_path):
    rel = "build/student-path/notebooks/00_setup.ipynb"
    nb = gpu_run.artifact(executed("student"), rel, INFO, "ok", 1)
    came_back = tmp_path / "00_setup.ipynb"
    nbformat.write(nb, came_back)
    results = tmp_path / "results"
    gpu_run.merge([came_back], results)
    assert not (results / "notebooks").exists() or not any((results / "notebooks").rglob("*.ipynb"))


def test_the_student_path_is_the_filled_student_notebook(tmp_path):
    [path] = gpu_run.student_path([ROOT / "solutions" / "00_setup.ipynb"], tmp_path)
    assert path == tmp_path / "notebooks" / "00_setup.ipynb"
    nb = nbformat.read(path, as_version=4)
    assert any("cu.hints.offer(" in c.source for c in nb.cells)          # the student's notebook...
    assert not any("BEGIN SOLUTION" in c.source for c in nb.cells)      # ...with the stubs written


class FakeKernel:
    """A kernel manager whose kernel answers PEAK_PROBE as a GPU kernel would, by printing one line."""

    def __init__(self, line, alive=True):
        self.line, self.alive, self.ran = line, alive, []

    def is_alive(self):
        return self.alive

    def client(self):
        kernel = self

        class Client:
            def start_channels(self): pass
            def stop_channels(self): pass
            def wait_for_ready(self, timeout): pass

            def execute_interactive(self, code, timeout, store_history, output_hook):
                kernel.ran.append(code)
                output_hook({"msg_type": "stream", "content": {"name": "stdout", "text": kernel.line + "\n"}})
        return Client()


def test_the_peak_gpu_memory_is_asked_of_the_notebooks_kernel_and_reported():
    km = FakeKernel('gpu_run peak: {"allocated": 3221225472, "reserved": 4294967296}')
    peak = gpu_run.peak_memory(km)
    assert km.ran == [gpu_run.PEAK_PROBE] and "max_memory_allocated()" in km.ran[0] and "max_memory_reserved()" in km.ran[0]
    assert peak == {"allocated": 3 * 2**30, "reserved": 4 * 2**30}
    assert gpu_run.peak_text(peak) == "peak GPU memory 3.00 GiB allocated, 4.00 GiB reserved"
    assert gpu_run.peak_memory(FakeKernel("gpu_run peak: null")) is None          # torch never touched a GPU
    assert gpu_run.peak_memory(FakeKernel("", alive=False)) is None               # the kernel died
    section = gpu_run.section("solutions/00_setup.ipynb", executed("x\n"), "ok", 20.0, INFO["date"], peak)
    assert "**ok** in 20.0 s (run 2026-11-22 17:42 UTC); peak GPU memory 3.00 GiB allocated" in section


# --- --plan: another GPU's plan rehearsed on this one --------------------------------------------------
def test_a_plan_is_named_in_the_report_and_its_own_file():
    said, part = gpu_run.plan_of("7.5")
    assert part == "sm75" and said.startswith("the T4's plan (COURSE_PLAN=7.5), rehearsed")
    assert gpu_run.plan_of("T4")[1] == "sm75" and gpu_run.plan_of("sm_86")[0].startswith("the A10's plan")
    text = gpu_run.report({**INFO, "plan": said}, {})
    assert f"| plan | {said} |" in text


def test_a_plan_that_names_nothing_stops_with_what_to_give():
    import pytest
    with pytest.raises(SystemExit, match="names no compute capability"):
        gpu_run.plan_of("a potato")


def test_the_kernel_gets_the_plan_and_nothing_else_does():
    assert gpu_run.kernel_manager("7.5").kernel_spec_manager.get_kernel_spec("x").env["COURSE_PLAN"] == "7.5"
    assert "COURSE_PLAN" not in gpu_run.kernel_manager().kernel_spec_manager.get_kernel_spec("x").env


def test_a_rehearsal_never_becomes_the_sites_page(tmp_path):
    rel = "solutions/00_setup.ipynb"
    nb = gpu_run.artifact(executed("rehearsed"), rel, {**INFO, "plan": gpu_run.plan_of("7.5")[0]}, "ok", 1)
    assert nb.metadata["gpu_run"]["plan"].startswith("the T4's plan")
    came_back = tmp_path / "00_setup.ipynb"
    nbformat.write(nb, came_back)
    results = tmp_path / "results"
    gpu_run.merge([came_back], results)
    assert not (results / "notebooks").exists() or not any((results / "notebooks").rglob("*.ipynb"))


# --- --resume and --edition: the class's GPU in one step ----------------------------------------------
def test_resume_skips_only_what_this_gpu_ran_with_todays_code(tmp_path):
    src = ROOT / "solutions" / "00_setup.ipynb"
    kept = tmp_path / "notebooks" / "tesla-t4"
    assert not gpu_run.already_ran(src, kept)                          # never ran here
    nb = nbformat.read(src, as_version=4)
    gpu_run.save_artifact(gpu_run.artifact(nb, "solutions/00_setup.ipynb", INFO, "ok", 1), tmp_path / "notebooks",
                          "tesla-t4", "solutions/00_setup.ipynb")
    assert gpu_run.already_ran(src, kept)
    gpu_run.save_artifact(gpu_run.artifact(nb, "solutions/00_setup.ipynb", INFO, "error in cell 7", 1),
                          tmp_path / "notebooks", "tesla-t4", "solutions/00_setup.ipynb")
    assert gpu_run.already_ran(src, kept)                              # it stopped with today's code: the edition says so
    older = nbformat.read(src, as_version=4)
    next(c for c in older.cells if c.cell_type == "code").source += "\nprint('the code as it was')"
    gpu_run.save_artifact(gpu_run.artifact(older, "solutions/00_setup.ipynb", INFO, "ok", 1), tmp_path / "notebooks",
                          "tesla-t4", "solutions/00_setup.ipynb")
    assert not gpu_run.already_ran(src, kept)                          # the lesson changed since


def test_an_edition_is_refused_at_once_where_it_could_not_end_in_a_site(monkeypatch):
    import argparse
    import importlib.util
    import pytest
    with pytest.raises(SystemExit, match="not with --plan or --student"):
        gpu_run.refuse_edition(argparse.Namespace(plan="7.5", student=False))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "myst_nb" else real(name))
    with pytest.raises(SystemExit, match="needs myst_nb: pip install sphinx myst-nb sphinx-book-theme"):
        gpu_run.refuse_edition(argparse.Namespace(plan="", student=False))


def test_an_edition_zips_report_notebooks_and_site_and_merges_back_as_it_is(tmp_path):
    """What --edition hands back (a Colab download, a Drive folder) is one zip, and --merge takes it whole:
    the report and every executed notebook land where the instructor's repository keeps them."""
    results, rel = tmp_path / "drive", "solutions/labs/lab1_swiglu.ipynb"
    info = {**INFO, "device": "Tesla T4", "capability": "7.5"}
    nb = gpu_run.artifact(executed("on the T4\n"), rel, info, "ok", 3.0)
    gpu_run.save_artifact(nb, results / "notebooks", "tesla-t4", rel)
    (results / "tesla-t4.md").write_text(gpu_run.report(info, {rel: ("ok", "3.0", info["date"], gpu_run.section(
        rel, executed("on the T4\n"), "ok", 3.0, info["date"]))}), encoding="utf-8")
    site = tmp_path / "site-tesla-t4"
    (site / "labs").mkdir(parents=True)
    (site / "index.html").write_text("<title>Feed the Beast: the T4 edition</title>")
    (site / "labs" / "lab1_swiglu.html").write_text("on the T4")
    zipped = gpu_run.zip_edition(tmp_path, results, "tesla-t4", site)
    import zipfile
    assert sorted(zipfile.ZipFile(zipped).namelist()) == [
        "notebooks/tesla-t4/labs/lab1_swiglu.ipynb", "site-tesla-t4/index.html", "site-tesla-t4/labs/lab1_swiglu.html",
        "tesla-t4.md"]
    home = tmp_path / "repo" / "docs" / "gpu-results"
    assert gpu_run.merge([zipped], home) == 0
    assert (home / "tesla-t4.md").read_text(encoding="utf-8").startswith("# GPU results: Tesla T4")
    assert "| solutions/labs/lab1_swiglu.ipynb | ok | 3.0 s |" in (home / "tesla-t4.md").read_text(encoding="utf-8")
    kept = nbformat.read(home / "notebooks" / "tesla-t4" / "labs" / "lab1_swiglu.ipynb", as_version=4)
    assert kept.cells[0].outputs[0].text == "on the T4\n"


def test_an_edition_run_records_then_builds_this_gpus_site(tmp_path, monkeypatch):
    """--edition --resume on a GPU whose every notebook already ran (here the H200's recorded run, the
    machine faked): nothing runs again, and the edition is built from the runs kept in --results, then zipped.
    The build itself is tests/test_site.py's (the H200 edition); here it is only asked for."""
    import shutil
    results = tmp_path / "results"
    shutil.copytree(ROOT / "docs" / "gpu-results" / "notebooks" / "nvidia-h200", results / "notebooks" / "nvidia-h200")
    shutil.copy(ROOT / "docs" / "gpu-results" / "nvidia-h200.md", results / "nvidia-h200.md")
    monkeypatch.setattr(gpu_run, "machine", lambda: {**INFO, "device": "NVIDIA H200"})
    monkeypatch.setattr(gpu_run, "refuse_edition", lambda args: None)
    monkeypatch.setattr(gpu_run, "already_ran", lambda path, kept: (kept / gpu_run.artifact_name(
        path.relative_to(ROOT).as_posix())).is_file())     # today's code or not: this test runs no notebook
    monkeypatch.setattr(gpu_run, "execute", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran a notebook")))
    asked = []

    def build(site, results_, name):
        asked.append((site, results_, name))
        (site / "index.html").parent.mkdir(parents=True, exist_ok=True)
        (site / "index.html").write_text("the H200 edition")
        return 0
    monkeypatch.setattr(gpu_run, "build_edition", build)
    out = tmp_path / "out"
    site = tmp_path / "site"
    assert gpu_run.main(["--edition", "--resume", "--results", str(results), "--out", str(out), "--site", str(site)]) == 0
    assert asked == [(site, results, "nvidia-h200")]
    import zipfile
    names = zipfile.ZipFile(out / "edition-nvidia-h200.zip").namelist()
    assert "nvidia-h200.md" in names and "site-nvidia-h200/index.html" in names
    assert sum(n.startswith("notebooks/nvidia-h200/") for n in names) == 16


def test_the_colab_notebook_records_every_solution_then_builds_the_edition():
    """tools/record_this_gpu.ipynb, what an instructor opens from a badge: its code compiles, it installs the
    course from the repository and tag the lessons' badges pin, its chunks name every solution once, and every
    call it makes to tools/gpu_run.py parses."""
    import ast
    import shlex
    sys.path.insert(0, str(ROOT / "tools"))
    import generate as gen
    nb = nbformat.read(ROOT / "tools" / "record_this_gpu.ipynb", as_version=4)
    nbformat.validate(nb)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit it without outputs"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    tree = ast.parse(code)
    values = {t.id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Name)}
    pin = gen.release()
    assert (ast.literal_eval(values["REPO"]), ast.literal_eval(values["REF"])) == (pin.repo, pin.ref)
    assert f"github/{pin.repo}/blob/{pin.ref}/tools/record_this_gpu.ipynb" in nb.cells[0].source
    chunks = ast.literal_eval(values["CHUNKS"])
    named = [p for chunk in chunks for p in gpu_run.resolve(chunk)]
    assert sorted(named) == sorted(gpu_run.all_notebooks()), "the chunks run every solution exactly once"
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "run"
             and len(node.args) > 1 and ast.literal_eval(node.args[1]) == "tools/gpu_run.py"]
    editions = []
    for call in sorted(calls, key=lambda c: c.lineno):   # placeholders for the values known only on Colab
        argv = [a.value if isinstance(a, ast.Constant) else "PLACEHOLDER" for a in call.args[2:]
                if not isinstance(a, ast.Starred)]
        args = gpu_run.parser().parse_args(argv)
        assert args.resume and str(args.results) == "PLACEHOLDER", shlex.join(argv)
        editions.append(args.edition)
    assert editions == [False, True], "the chunks record the run, then one call builds the edition"
