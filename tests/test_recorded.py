"""course_utils.recorded: a cell's output in the recorded GPU runs, shown under a line naming the GPU and the
date, from made-up runs and from the course's own; one line where there is none; a clear error on bad input."""
import json
from pathlib import Path

import pytest

from course_utils import recorded, timeline


def _run(folder, device, cells, date="2026-11-28 13:46 UTC"):
    folder.mkdir(parents=True, exist_ok=True)
    nb = {"cells": cells, "metadata": {"gpu_run": {"device": device, "date": date, "torch": "2.11.0+cu130"}},
          "nbformat": 4, "nbformat_minor": 5}
    (folder / "lab9_made_up.ipynb").write_text(json.dumps(nb))


def _cell(cell_id, *outputs):
    return {"cell_type": "code", "id": cell_id, "source": "", "metadata": {}, "outputs": list(outputs)}


STREAM = {"output_type": "stream", "name": "stdout", "text": ["SDPA, B = 1: 2 kernels\n", "  (32, 8, 1)  256\n"]}
RESULT = {"output_type": "execute_result", "data": {"text/plain": "13 of 13 passed"}, "metadata": {}}
FIGURE = {"output_type": "display_data", "data": {"text/plain": "<Figure size 640x480 with 1 Axes>"}, "metadata": {}}


def test_every_gpu_run_with_the_cell_is_shown_labelled(tmp_path, capsys):
    _run(tmp_path / "nvidia-h100-80gb-hbm3" / "labs", "NVIDIA H100 80GB HBM3", [_cell("other")], "2026-11-27")
    _run(tmp_path / "nvidia-h200" / "labs", "NVIDIA H200", [_cell("profile", STREAM, RESULT, FIGURE)])
    _run(tmp_path / "cpu" / "labs", "cpu", [_cell("profile", STREAM)])          # a run without a GPU: not shown
    (out,) = recorded.show("labs/lab9_made_up", "profile", runs=tmp_path)
    assert out.device == "NVIDIA H200" and out.text == "SDPA, B = 1: 2 kernels\n  (32, 8, 1)  256\n13 of 13 passed"
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == ("No GPU here. Recorded on NVIDIA H200, 2026-11-28 13:46 UTC (torch 2.11.0+cu130), "
                          "by tools/gpu_run.py: that GPU's output, not this machine's:")
    assert printed[1:] == ["  SDPA, B = 1: 2 kernels", "    (32, 8, 1)  256", "  13 of 13 passed"]


def test_no_run_of_the_cell_is_one_line(tmp_path, capsys):
    assert recorded.show("labs/lab9_made_up", "profile", runs=tmp_path / "nowhere") == []
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("No GPU here, and no recorded GPU run of this cell")
    assert "docs/gpu-results/notebooks/" in line


def test_bad_arguments_say_what_to_pass():
    with pytest.raises(TypeError, match="two strings"):
        recorded.outputs("labs/lab5_flash_decoding", 3)


def test_the_course_s_own_runs_are_found():
    runs = recorded.outputs("labs/lab5_flash_decoding", "lab5-hook-code")
    assert {r.device for r in runs} >= {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}
    assert all("SDPA, B =  1:" in r.text for r in runs)


def test_the_recorded_sdpa_trace_is_the_h200_run_s_profile():
    # tests/sdpa_decode_trace_sample.json (SDPA at lab 5's shape, torch.profiler on an H200, read by
    # test_timeline.py) holds the kernels that the recorded H200 run of lab 5 printed, call by call, in order
    traces = json.loads((Path(__file__).parent / "sdpa_decode_trace_sample.json").read_text())
    (run,) = [r for r in recorded.outputs("labs/lab5_flash_decoding", "lab5-sdpa-kernels") if r.device == "NVIDIA H200"]
    for label in ("SDPA, B = 1", "SDPA, B = 32"):
        rows = timeline.from_chrome_trace(traces[label], after=timeline.MARK).kernel_rows()
        table = run.text.split(label + ":")[1].splitlines()
        assert table[0].startswith(f" {len(rows)} kernel")
        printed = [line.split()[-1].rstrip("…") for line in table[2:2 + len(rows)]]
        assert [timeline.kernel_label(r.name)[:len(p)] for r, p in zip(rows, printed)] == printed
