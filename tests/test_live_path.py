"""The live path: Kernel → Restart and Run All in a kernel like JupyterLab's, with nobody at the widgets.

`./course test` runs every notebook headless (COURSE_HEADLESS=1), where a prediction takes its default
at once. A student or an instructor runs them live: the predict widgets are displayed and wait for a
click, and Run All goes past them with no guess committed. Every student notebook, with its stubs written
(the solution's code, as a student has it once done), must survive that twice over in one kernel with the
same result. The solutions differ from these by their hints cells (markdown there, a button here) and any
cell tagged solution-only. This is the live Run All of every notebook (CONTRIBUTING: a notebook run twice for
the same reason is run once): tests/test_browser.py no longer runs every solution, only the few whose Run
All shows every kind of live output in a real frontend, so for the others this is the only live run. It is
also the live path on a GPU (tools/gpu_run.py runs the tests with -m "not browser")."""
import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest

import course_utils as cu
import nbrun

ROOT = nbrun.ROOT
_spec = importlib.util.spec_from_file_location("course_generate", ROOT / "tools" / "generate.py")
gen = sys.modules.setdefault("course_generate", importlib.util.module_from_spec(_spec))
if not hasattr(gen, "student_notebook"):
    _spec.loader.exec_module(gen)
SOLUTIONS = [src for src, _ in gen.targets()]
WIDGET = "application/vnd.jupyter.widget-view+json"
ON_GPU = cu.ON_GPU and not cu.INTERPRET


def errors(cells) -> list[str]:
    out = []
    for i, c in enumerate(cells):
        for o in c.get("outputs", []):
            if o.output_type == "error" and "raises-exception" not in c.metadata.get("tags", []):
                first = next((ln for ln in c.source.split("\n") if ln.strip()), "")[:70]
                out.append(f"cell {i} ({first!r}): {o.ename}: {o.evalue.strip()[:300]}")
    return out


def texts(cells) -> list[str]:
    """What each cell printed, with numbers and their signs masked: timings differ between runs (a
    difference near zero can flip its sign), the rest must not."""
    out = []
    for c in cells:
        text = ""
        for o in c.get("outputs", []):
            if o.output_type == "stream":
                text += o.text
            elif o.output_type in ("execute_result", "display_data"):
                data = o.get("data", {})
                text += "[widget]" if WIDGET in data else "[image]" if "image/png" in data else data.get("text/plain", "")
        # a table's column widths follow its numbers: mask the numbers, then the padding
        out.append(re.sub(r"[ \t]+", " ", re.sub(r"[-+]?\d[\d,.]*(e[+-]?\d+)?", "#", text)))
    return out


def filled(src: Path, folder: Path) -> Path:
    """The student notebook of solution `src`, stubs written, saved under `folder` as it sits in the repo."""
    student = dict(gen.targets())[src]
    path = folder / student.relative_to(ROOT)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(gen.filled_student_notebook(src), path)
    return path


class _LiveStudentPath:
    solution: Path

    def test_run_all_twice_live(self, tmp_path):
        path = filled(self.solution, tmp_path)
        first, second = nbrun.execute(path, headless=False, passes=2, predictions=tmp_path / "p.jsonl")
        name = path.relative_to(tmp_path)
        assert not errors(first), f"{name}, stubs written, live Run All:\n  " + "\n  ".join(errors(first))
        assert not errors(second), f"{name}, Run All again in the same kernel:\n  " + "\n  ".join(errors(second))
        if any("predict." in c.source or "hints.offer" in c.source for c in first):
            assert any(WIDGET in o.get("data", {}) for c in first for o in c.get("outputs", [])), \
                f"{name}: no widget was displayed on the live path"
        if ON_GPU:
            # What a GPU prints is measured, and a second run measures again: which goal is met, which row of an
            # Nsight Compute table is starred, a unit, how many kernels a library launched. The two runs' texts
            # are compared on the CPU, where the same cells print models and counts and every word repeats.
            return
        diff = [(i, a, b) for i, (a, b) in enumerate(zip(texts(first), texts(second))) if a != b]
        assert not diff, f"{name}: a second Run All printed something else:\n" + "\n".join(
            f"  cell {i}:\n    first:  {a[:300]!r}\n    second: {b[:300]!r}" for i, a, b in diff[:3])


for _p in SOLUTIONS:
    _n = "TestLive_" + re.sub(r"\W", "_", dict(gen.targets())[_p].relative_to(ROOT).with_suffix("").as_posix())
    globals()[_n] = type(_n, (_LiveStudentPath,), {"solution": _p})


def test_there_are_notebooks_to_run():
    if not SOLUTIONS:
        pytest.skip("no solution notebooks yet")


def test_the_import_says_it_is_loading_and_then_clears_the_line(tmp_path):
    """Importing the course takes seconds: live, a line shows at once and is blanked when done;
    headless, nothing is shown."""
    import nbformat
    path = tmp_path / "import.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import course_utils")]), path)
    (live,) = nbrun.execute(path, headless=False)
    shown = [o for o in live[0].outputs if o.output_type == "display_data"]
    assert len(shown) == 1 and shown[0].data["text/plain"] == ""     # updated in place, then blank
    (headless,) = nbrun.execute(path, headless=True)
    assert headless[0].outputs == []
