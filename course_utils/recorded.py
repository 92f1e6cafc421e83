"""What a cell printed in the course's recorded GPU runs: shown, labelled, where there is no GPU.

    recorded.show("labs/lab5_flash_decoding", "lab5-sdpa-kernels")   # every recorded run of that cell
    recorded.outputs("09_flash_attention", "3a5e4f9f")               # the same, as data

`tools/gpu_run.py` keeps the executed notebooks of each GPU run in docs/gpu-results/notebooks/<gpu>/
(labs in labs/), each with the GPU's name, the date and the versions in its metadata. Where a cell shows
what a GPU did (the kernels a library launched, the bytes its counters saw) and the machine at hand has
no GPU, the cell can print what it printed there instead, under a line that names the GPU and the date:
a recording, never this machine's measurement. A copy of the course without that folder (the student
edition, a pip install) gets one line that says so.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

RUNS = Path(__file__).resolve().parent.parent / "docs" / "gpu-results" / "notebooks"
NOT_GPUS = ("cpu",)            # folders of runs made without a GPU


@dataclass
class Output:
    """One recorded run's output of one cell."""
    device: str       # the GPU's name, as the run recorded it
    date: str
    torch: str
    text: str         # what the cell printed: its streams and plain-text results, figures left out
    path: Path        # the executed notebook

    def header(self) -> str:
        return (f"Recorded on {self.device}, {self.date} (torch {self.torch}), "
                "by tools/gpu_run.py: that GPU's output, not this machine's:")


def _text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append("".join(out.get("text", "")))
        elif "data" in out:
            plain = "".join(out["data"].get("text/plain", ""))
            if plain and not plain.startswith("<Figure size"):
                parts.append(plain + "\n")
    return "".join(parts).rstrip("\n")


def outputs(notebook: str, cell_id: str, runs: Path | str = RUNS) -> list[Output]:
    """The outputs of cell `cell_id` of `notebook` ("09_flash_attention", "labs/lab5_flash_decoding") in
    every recorded GPU run under `runs` that has it, one per GPU, in the order of the GPU folders' names."""
    if not isinstance(notebook, str) or not isinstance(cell_id, str):
        raise TypeError("recorded.outputs(notebook, cell_id) takes two strings, e.g. "
                        "('labs/lab5_flash_decoding', 'lab5-sdpa-kernels'): the notebook's path under "
                        f"notebooks/ without .ipynb and the cell's id; got {notebook!r}, {cell_id!r}")
    runs = Path(runs)
    name = notebook.removesuffix(".ipynb") + ".ipynb"
    found = []
    for folder in sorted(p for p in runs.glob("*") if p.is_dir() and p.name not in NOT_GPUS) if runs.is_dir() else []:
        path = folder / name
        if not path.is_file():
            continue
        nb = json.loads(path.read_text(encoding="utf-8"))
        meta = nb.get("metadata", {}).get("gpu_run", {})
        cell = next((c for c in nb.get("cells", []) if c.get("id") == cell_id), None)
        if cell is None or not meta.get("device"):
            continue
        found.append(Output(meta["device"], meta.get("date", "date not recorded"), meta.get("torch", "?"),
                            _text(cell), path))
    return found


def show(notebook: str, cell_id: str, runs: Path | str = RUNS) -> list[Output]:
    """Print what cell `cell_id` printed in each recorded GPU run, each under a line naming the GPU and the
    date; or one line saying there is none here. Returns the outputs shown."""
    found = outputs(notebook, cell_id, runs)
    if not found:
        print(f"No GPU here, and no recorded GPU run of this cell in this copy of the course ({notebook}, cell "
              f"{cell_id}; tools/gpu_run.py keeps them in docs/gpu-results/notebooks/, and the course's site shows "
              "them): on a GPU this cell measures.")
    for i, out in enumerate(found):
        print(("\n" if i else "") + "No GPU here. " * (i == 0) + out.header())
        print("\n".join("  " + line if line else "" for line in out.text.splitlines()))
    return found
