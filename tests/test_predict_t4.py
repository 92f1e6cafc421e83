"""tools/predict_t4.py: the T4 model on a tiny fake executed notebook (what each kind of cell becomes), the
timings it reads from outputs, the peak memory column, and the table in docs/instructor.md kept current."""
import datetime as dt
import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("predict_t4", ROOT / "tools" / "predict_t4.py")
pt = sys.modules.setdefault("predict_t4", importlib.util.module_from_spec(_spec))
if not hasattr(pt, "predict"):
    _spec.loader.exec_module(pt)

CEILINGS = {"copy_gbs": 3200.0, "matmul_tflops": 810.0}   # round figures: bytes x10, tl.dot x100, vendor x12.46


def ran(source, seconds, text="", start=0.0):
    """A code cell as nbclient leaves it: its output and its timing metadata."""
    t0 = dt.datetime(2026, 11, 24, 12, 0, 0) + dt.timedelta(seconds=start)
    stamp = lambda t: t.isoformat() + "Z"  # noqa: E731
    cell = new_code_cell(source, outputs=[new_output("stream", name="stdout", text=text)] if text else [])
    cell.metadata["execution"] = {"iopub.status.busy": stamp(t0), "shell.execute_reply": stamp(t0 + dt.timedelta(seconds=seconds))}
    return cell


def notebook(tmp_path, *cells, name="05_x.ipynb", peak="absent"):
    nb = new_notebook(cells=list(cells))
    nb.metadata["gpu_run"] = {"wall_s": sum(pt.cell_seconds(c) for c in cells) + 1.0, "date": "2026-11-24 12:00 UTC"}
    if peak != "absent":
        nb.metadata["gpu_run"]["peak_gpu_memory"] = peak
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def test_host_and_compile_time_scale_by_the_cpu_factor_and_short_timings_add_nothing(tmp_path):
    path = notebook(tmp_path,
                    ran("import course_utils as cu", 4.0),
                    ran("compiled = torch.compile(f)", 3.0),
                    ran("bench.compare({'eager': f})", 2.0, "fused  0.50 ms  (measured)\n"),
                    ran("x = 1", 0.5))
    p = pt.predict(path, CEILINGS, cpu_factor=2.0)
    assert [c.kind for c in p.cells] == ["imports", "compile", "timed", "host"]
    # 0.5 ms x 10 = 5 ms a call: do_bench still runs for its budget, so the timing costs what it did
    assert [c.t4_s for c in p.cells] == [8.0, 6.0, pytest.approx(4.0 + (pt.bench_ms(5.0) - pt.bench_ms(0.5)) / 1e3), 1.0]
    assert p.t4_s == pytest.approx(sum(c.t4_s for c in p.cells) + 1.0 * 2.0)   # the kernel's start: host time


def test_a_long_call_pays_its_calls_at_the_bound_it_has(tmp_path):
    table = ("gelu(a @ w + b), 8,192³ fp16\n"
             "impl                       ms (measured)  TFLOP/s  of matmul ceiling\n"
             "cuBLAS a @ w                        2.00      550                95%\n"
             "your matmul_bias_gelu               2.50      440                86%\n\n")
    path = notebook(tmp_path, ran("import x", 1.0), ran("bench.compare(impls, rounds=3)", 3.0, table))
    cell = pt.predict(path, CEILINGS, cpu_factor=1.0).cells[1]
    assert [(t.ms, t.bound) for t in cell.timings] == [(2.0, "vendor"), (2.5, "tl.dot")]
    # cuBLAS on the T4's tensor cores: x810/65, 24.9 ms; Triton's tl.dot without them: x100, 250 ms a call
    assert (pt.ratio("vendor", CEILINGS), pt.ratio("tl.dot", CEILINGS)) == (810 / 65, 100)
    assert pt.bench_ms(250.0) == 7 * 250.0   # 5 to estimate, one warm-up, one timed
    extra = 3 * (pt.bench_ms(2.0 * 810 / 65) - pt.bench_ms(2.0) + pt.bench_ms(250.0) - pt.bench_ms(2.5))
    assert cell.kind == "timed" and cell.t4_s == pytest.approx(3.0 + extra / 1e3)


def test_bytes_bound_timings_and_lines_that_are_not_timings():
    text = ("add + LayerNorm, 32,768 x 4,096 float16\n"
            "impl                      ms (measured)  useful GB/s  of copy ceiling  × vs eager\n"
            "eager add + F.layer_norm          0.513        2,090              70%          1\n"
            "your add_layernorm                0.362        2,970              99%       1.41\n\n"
            "fp16        N = 4,096 ms  of copy   N = 65,536 ms  of copy   (measured)\n"
            "one block per row (yours)     0.363      99%            2.999      12%\n\n"
            "MODEL at n = 8,192: the matmul needs 1.586 ms of arithmetic\n")
    got = [(t.ms, t.bound) for t in pt.timings(text, {})]
    assert got == [(0.513, "bytes"), (0.362, "bytes"), (0.363, "bytes"), (2.999, "bytes")]


def test_a_rate_table_is_priced_with_the_notebooks_own_flops(tmp_path):
    defs = ("def bench_shape(n, d=64):\n    return (16384 // n, 2048 // d, n, d)\n\n\n"
            "def flops(shape, causal=False):\n    b, h, n, d = shape\n    return 4 * b * h * n * n * d / (2 if causal else 1)\n")
    text = ("TFLOP/s, fp16 (measured, median of 3 interleaved rounds); peak extra memory in GiB after the slash\n"
            "     N    D                      naive              yours\n"
            " 4,096   64 full             43 / 8.00         400 / 0.00\n"
            " 4,096   64 causal               — / —         200 / 0.00\n")
    path = notebook(tmp_path, ran("import x", 1.0), ran(defs, 0.0),
                    ran("ROUNDS = 3\nbench.interleaved(calls, ROUNDS, warmup=10, rep=15)", 2.0, text))
    cell = pt.predict(path, CEILINGS, cpu_factor=1.0).cells[2]
    flops = 4 * 4 * 32 * 4096 * 4096 * 64
    assert [(round(t.ms, 4), t.bound) for t in cell.timings] == [
        (round(flops / 43e9, 4), "vendor"), (round(flops / 400e9, 4), "tl.dot"), (round(flops / 2 / 200e9, 4), "tl.dot")]
    extra = 3 * sum(pt.bench_ms(t.ms * pt.ratio(t.bound, CEILINGS), 10, 15) - pt.bench_ms(t.ms, 10, 15)
                    for t in cell.timings)
    assert cell.t4_s == pytest.approx(2.0 + extra / 1e3)


@pytest.mark.parametrize("peak, says", [("absent", "not yet measured"), (None, "none (no GPU used)"),
                                        ({"allocated": 6e9, "reserved": 7.5e9}, "6.0 GB allocated, 7.5 GB reserved (50% of 15 GB)")])
def test_peak_memory_is_what_the_run_recorded_and_never_a_typed_number(tmp_path, peak, says):
    p = pt.predict(notebook(tmp_path, ran("import x", 1.0), peak=peak), CEILINGS)
    assert pt.memory(p.peak) == says


def test_the_table_flags_a_notebook_over_three_minutes(tmp_path):
    setup = ran("import x", 1.0, "copy                 0 FLOP/byte      0.717 ms   3,200 GB/s   (measured)\n"
                "matmul 8192³  2.73e+03 FLOP/byte       1.48 ms   810 TFLOP/s   (measured)\n")
    notebook(tmp_path, setup, name="00_setup.ipynb")
    notebook(tmp_path, ran("import x", 1.0), ran("y = slow()", 100.0), name="05_x.ipynb")
    assert pt.h100_ceilings(tmp_path) == CEILINGS
    text = pt.table(tmp_path, others={"H200": None})
    row = next(ln for ln in text.splitlines() if ln.startswith("| 05_x.ipynb"))
    assert "3.4 min **over budget**" in row and "| not yet run |" in row and "not yet measured" in row


def test_instructor_md_holds_the_current_table():
    assert pt.main(["--check"]) == 0, "run python3 tools/predict_t4.py --write"
