"""Run a notebook in a fresh kernel of this very Python, as a student would (for the notebook tests).

headless=True is what `./course test` does (COURSE_HEADLESS=1: a prediction takes its default at once).
headless=False is the live path: a kernel like JupyterLab's, where the predict widgets are displayed and
wait for a click that never comes, so Run All goes past them with nothing committed."""
from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
CELL_TIMEOUT = 300  # seconds


def execute(path: Path, *, headless: bool = True, passes: int = 1, stop_before=None, predictions=None):
    """Run the notebook at `path` (cwd: its folder), errors allowed, `passes` times over in one kernel.

    stop_before: a predicate on a cell; the run ends before the first cell it accepts.
    Returns a list with one list of executed cells per pass."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if headless:
        env.update(COURSE_HEADLESS="1", MPLBACKEND=os.environ.get("MPLBACKEND", "Agg"))
    else:  # as in JupyterLab: inline figures, no COURSE_HEADLESS (the kernel inherits none of ours)
        env.update(COURSE_HEADLESS="0", MPLBACKEND="module://matplotlib_inline.backend_inline")
    if predictions:
        env["COURSE_PREDICTIONS"] = str(predictions)

    class CurrentEnv(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name="course (current env)", language="python", env=env)

    nb = nbformat.read(path, as_version=4)
    if stop_before is not None:
        first = next((i for i, c in enumerate(nb.cells) if stop_before(c)), len(nb.cells))
        nb.cells = nb.cells[:first]
    one_pass = len(nb.cells)
    nb.cells = [copy.deepcopy(c) for _ in range(passes) for c in nb.cells]
    km = KernelManager(kernel_name="course-current-env", kernel_spec_manager=CurrentEnv())
    NotebookClient(nb, km=km, timeout=CELL_TIMEOUT, startup_timeout=120, allow_errors=True,
                   record_timing=False, resources={"metadata": {"path": str(path.parent)}}).execute()
    return [nb.cells[i * one_pass:(i + 1) * one_pass] for i in range(passes)]
