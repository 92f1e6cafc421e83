"""tools/gpu_run.py keeps every executed notebook as an artifact (what the browsable edition is built
from): the run in its metadata, a place per GPU, and a merge that never lets an older run win."""
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
