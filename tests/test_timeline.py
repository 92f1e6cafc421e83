"""course_utils.timeline: the stats and the Gantt chart from synthetic events, the parsing of a
torch.profiler Chrome trace, and what it says and draws where there is no GPU."""
import json
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils import DEVICE, timeline, trips  # noqa: E402
from course_utils.timeline import Span, Timeline  # noqa: E402

MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
       "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor"
       "<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)")


def synthetic() -> Timeline:
    # kernels: [0,1], [5,6] and [5.5,7] overlapping (merged to [5,7]), [10,11]
    kernels = [Span("k1", 0, 1), Span("k2", 5, 1), Span("k3", 5.5, 1.5), Span("k4", 10, 1)]
    launches = [Span("cudaLaunchKernel", -2, 1.5), Span("cudaLaunchKernel", 3, 1.5), Span("cudaLaunchKernel", 8, 1.5)]
    return Timeline(kernels, launches, label="synthetic", measured=False)


def test_stats_merge_overlaps_and_measure_the_gaps():
    t = synthetic()
    assert t.count == 4
    assert t.span_us == pytest.approx(11.0)
    assert t.busy_us == pytest.approx(4.0)                  # 1 + 2 + 1
    assert t.gaps == [(1, 5), (7, 10)]
    assert t.gap_us == pytest.approx(7.0)
    assert t.mean_gap_us == pytest.approx(3.5)              # two hand-overs between three busy stretches
    assert t.busy_fraction == pytest.approx(4 / 11)
    s = t.summary()
    assert "4 kernels in 11.0 µs" in s and "busy 4.0 µs (36%)" in s and "mean gap 3.50 µs" in s
    assert "NOT MEASURED" in repr(t)


def test_one_kernel_and_no_kernel():
    one = Timeline([Span("k", 2, 3)])
    assert (one.count, one.span_us, one.gap_us, one.mean_gap_us, one.busy_fraction) == (1, 3, 0, 0, 1)
    assert "mean gap" not in one.summary()
    assert "no kernel ran" in Timeline([]).summary()


def _trace():
    """A trimmed Chrome trace in the shape torch.profiler exports (torch 2.11 on an H100)."""
    base = 4472721161000.0
    ev = [{"ph": "M", "name": "process_name", "ts": base, "pid": 0, "tid": 0, "args": {"name": "python"}},
          {"ph": "X", "cat": "user_annotation", "name": "timeline: first call, not kept", "ts": base, "dur": 50},
          {"ph": "X", "cat": "kernel", "name": "old", "ts": base + 20, "dur": 1.0, "args": {"grid": [1, 1, 1]}},
          {"ph": "X", "cat": "user_annotation", "name": timeline.MARK, "ts": base + 100, "dur": 40},
          {"ph": "X", "cat": "gpu_user_annotation", "name": timeline.MARK, "ts": base + 110, "dur": 20},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "ts": base + 100, "dur": 8},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": base + 102, "dur": 5},
          {"ph": "X", "cat": "kernel", "name": MUL, "ts": base + 110, "dur": 1.2,
           "args": {"grid": [1, 1, 1], "block": [128, 1, 1]}},
          {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "ts": base + 112, "dur": 6},
          {"ph": "X", "cat": "kernel", "name": "tiny_chain_kernel", "ts": base + 120, "dur": 1.0,
           "args": {"grid": [4, 1, 1], "block": [], "registers per thread": 32, "shared memory": 16640}},
          {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": base + 125, "dur": 2.0},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": base + 113, "dur": 20},
          {"ph": "f", "cat": "ac2g", "name": "ac2g", "ts": base + 110, "id": 8},
          {"ph": "i", "name": "Iteration Start", "ts": base}]
    return {"schemaVersion": 1, "traceEvents": ev}


def test_from_chrome_trace_keeps_gpu_work_and_launch_calls_after_the_mark(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_trace()))
    for source in (_trace(), _trace()["traceEvents"], str(path), path):
        t = timeline.from_chrome_trace(source, label="x", after=timeline.MARK)
        assert [k.name for k in t.kernels] == [MUL, "tiny_chain_kernel", "Memcpy DtoD"]
        assert [s.name for s in t.launches] == ["cudaLaunchKernel", "cuLaunchKernelEx"]  # not the synchronize
        assert t.launches[0].start_us == 0 and t.kernels[0].start_us == pytest.approx(8.0)
        assert [k.blocks for k in t.kernels] == [1, 4, None]
        assert [k.threads for k in t.kernels] == [128, None, None]
        assert [(k.registers, k.shared_bytes) for k in t.kernels] == [(None, None), (32, 16640), (None, None)]
        assert t.count == 3 and t.gap_us == pytest.approx(8.8 + 4.0)


# Two calls of SDPA at lab 5's shape on an H200, as torch.profiler recorded them (the file says how): at B = 1
# cuDNN's flash kernel and a reduction kernel, at B = 32 the flash kernel alone. Its events carry no launch
# arguments (no grid, block, registers or shared memory).
SDPA_TRACES = json.loads((Path(__file__).parent / "sdpa_decode_trace_sample.json").read_text())
FLASH = "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_"


def test_a_recorded_profile_keeps_the_marked_call_s_kernels_and_launches():
    b1 = timeline.from_chrome_trace(SDPA_TRACES["SDPA, B = 1"], after=timeline.MARK)
    assert b1.count == 2 and len(b1.launches) == 2     # the L2 flush and the first call, before the mark, left out
    flash, reduce = b1.kernel_rows()
    assert flash.name.startswith(FLASH) and "lean_reduction_kernel" in reduce.name
    assert (flash.calls, reduce.calls) == (1, 1)
    assert (flash.us, reduce.us) == (pytest.approx(15.648), pytest.approx(2.688))
    assert b1.busy_us == pytest.approx(15.648 + 2.688) and b1.span_us == pytest.approx(19.456, abs=1e-3)
    assert (flash.grid, flash.blocks, flash.threads, flash.registers) == (None, None, None, None)   # none recorded
    (one,) = timeline.from_chrome_trace(SDPA_TRACES["SDPA, B = 32"], after=timeline.MARK).kernel_rows()
    assert one.name.startswith(FLASH) and one.calls == 1 and one.us == pytest.approx(242.814)


def test_kernel_rows_group_calls_of_one_kernel_and_grid_in_order_of_first_run():
    t = Timeline([Span("b", 0, 2, (4, 1, 1), (128, 1, 1)), Span("a", 3, 1, (2, 1, 1)),
                  Span("b", 5, 3, (4, 1, 1), (128, 1, 1)), Span("b", 9, 1, (8, 1, 1), (128, 1, 1))])
    rows = t.kernel_rows()
    assert [(r.name, r.grid, r.calls, r.us) for r in rows] == [("b", (4, 1, 1), 2, 5.0), ("a", (2, 1, 1), 1, 1.0),
                                                                ("b", (8, 1, 1), 1, 1.0)]
    assert rows[1].threads is None and rows[0].threads == 128


def test_kernel_table_prints_grid_blocks_threads_time_and_a_short_name():
    t = Timeline([Span(FLASH + "knob_35_kernel0_0", 0, 15.9, (32, 8, 1), (128, 1, 1), 183, 86323),
                  Span("lean_reduction_kernel", 16, 3.0, (1, 32, 1), (256, 1, 1), 32, 16589)])
    head, first, second = t.kernel_table(width=30).splitlines()
    assert head.split() == ["grid", "blocks", "threads", "regs", "smem", "KiB", "calls", "µs", "kernel"]
    cells = first.split()
    assert cells[:-1] == ["(32,", "8,", "1)", "256", "128", "183", "84.3", "1", "15.9"]
    assert len(cells[-1]) == 30 and cells[-1].endswith("…")
    assert second.split()[3:] == ["32", "256", "32", "16.2", "1", "3.0", "lean_reduction_kernel"]
    b1 = timeline.from_chrome_trace(SDPA_TRACES["SDPA, B = 1"], after=timeline.MARK)   # no launch arguments
    assert [row.split()[:5] + row.split()[-2:-1] for row in b1.kernel_table().splitlines()[1:]] == \
        [["-"] * 5 + ["15.6"], ["-"] * 5 + ["2.7"]]


def test_kernels_refuses_what_it_cannot_profile():
    with pytest.raises(TypeError, match="dict"):
        timeline.kernels(lambda: None)
    with pytest.raises(TypeError, match="not a function"):
        timeline.kernels({"x": 3})
    with pytest.raises(ValueError, match="bytes has"):
        timeline.kernels({"x": lambda: None}, bytes={"y": 1})
    if DEVICE != "cuda":
        with pytest.raises(timeline.NeedsGPU, match="No GPU here"):
            timeline.kernels({"x": lambda: None})


def test_without_the_mark_everything_is_kept():
    t = timeline.from_chrome_trace(_trace())
    assert t.count == 4 and t.kernels[0].name == "old"


def test_kernel_labels_are_short():
    assert timeline.kernel_label(MUL) == "vectorized_elementwise_kernel [MulFunctor]"
    assert timeline.kernel_label("triton_poi_fused_add_mul_0") == "triton_poi_fused_add_mul_0"
    copy = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
            "TensorListMetadata<2>, at::native::(anonymous namespace)::UnaryOpFunctor<float, 2, 1, 1>>(int)")
    assert timeline.kernel_label(copy) == "multi_tensor_apply_kernel"


def _boxes(ax):
    return sum(len(c.get_paths()) for c in ax.collections)


def test_draw_puts_every_kernel_launch_and_gap_on_the_axes():
    t = synthetic()
    ax = t.draw()
    assert _boxes(ax) == 4 + 3 + 2          # kernels, launch calls, shaded gaps
    assert ax.get_title().startswith("NOT MEASURED")
    assert "time (µs)" in ax.get_xlabel()
    labels = [x.get_text() for x in ax.get_yticklabels()]
    assert any("synthetic" in s and "GPU kernels" in s for s in labels) and "CPU launches" in labels
    assert any("4 kernels" in txt.get_text() and "idle 7.0 µs" in txt.get_text() for txt in ax.texts)
    plt.close("all")


def test_draw_several_rows_share_one_axis():
    measured = Timeline([Span("a", 0, 1), Span("b", 3, 1)], [Span("cudaGraphLaunch", 0, 2)], source="unit test")
    ax = timeline.draw({"eager": synthetic(), "graph": measured})
    assert _boxes(ax) == (4 + 3 + 2) + (2 + 1 + 1)
    assert len(ax.get_yticks()) == 4 and ax.get_title().startswith("NOT MEASURED")
    ax2 = timeline.draw({"graph": measured})
    assert ax2.get_title() == "Kernel timeline, unit test"
    plt.close("all")


def test_table_lists_each_timeline():
    text = timeline.table({"eager": synthetic(), "one kernel": Timeline([Span("k", 0, 2)])})
    lines = text.splitlines()
    assert lines[0].split() == ["kernels", "span", "µs", "busy", "µs", "idle", "µs", "mean", "gap", "µs", "busy", "%"]
    assert lines[1].split() == ["eager", "4", "11.0", "4.0", "7.0", "3.50", "36"]
    assert lines[2].split()[-1] == "100"


@pytest.mark.skipif(DEVICE == "cuda", reason="the message is for machines without a GPU")
def test_record_without_a_gpu_says_so():
    with pytest.raises(timeline.NeedsGPU, match="No GPU here"):
        timeline.record(lambda: None)


@pytest.mark.skipif(DEVICE == "cuda", reason="the message is for machines without a GPU")
def test_show_without_a_gpu_prints_why_and_draws_a_labelled_schematic(capsys):
    x = torch.randn(16)

    def unwritten():
        raise NotImplementedError("later")

    assert timeline.show({"eager": lambda: (x * 2) + 1, "yours": unwritten}) is None
    out = capsys.readouterr().out
    assert "No GPU here" in out and "SCHEMATIC" in out and "nothing was timed" in out
    assert "not written yet: yours" in out
    ax = plt.gca()
    assert "SCHEMATIC" in ax.get_title() and "not a measurement" in ax.get_title()
    assert list(ax.get_xticks()) == [] and "not to scale" in ax.get_xlabel()
    assert any("2 launches counted" in t.get_text() for t in ax.texts)
    plt.close("all")
    assert timeline.show({"eager": lambda: x + 1}, schematic_on_cpu=False) is None
    assert plt.get_fignums() == []


def test_schematic_draws_one_block_pair_per_counted_launch():
    x = torch.randn(8, device=DEVICE)
    counted = {"three ops": trips.count(lambda: ((x * 2) + 1) * 3), "one op": trips.count(lambda: x * 2)}
    ax = timeline.schematic(counted)
    assert _boxes(ax) == 2 * 3 + 2 * 1
    assert "SCHEMATIC" in ax.get_title()
    plt.close("all")


@pytest.mark.skipif(DEVICE != "cuda", reason="records a real trace: needs a GPU")
def test_record_on_a_gpu_sees_each_kernel_and_its_launch():
    x = torch.randn(16, device="cuda")
    t = timeline.record(lambda: ((x * 2) + 1) * 3, label="three ops")
    assert t.count == 3 and len(t.launches) == 3
    assert all(k.blocks == 1 for k in t.kernels)
    assert t.launches[0].start_us == 0 and t.kernels[0].start_us > 0
    assert "3 kernels" in t.summary() and t.measured


@pytest.mark.skipif(DEVICE != "cuda", reason="records a real trace: needs a GPU")
def test_kernels_on_a_gpu_prints_each_kernel_s_grid(capsys):
    x = torch.randn(1 << 20, device="cuda")
    (t,) = timeline.kernels({"two ops": lambda: (x * 2) + 1}, bytes={"two ops": 4 * x.numel() * 4}).values()
    out = capsys.readouterr().out
    assert t.count == 2 and "two ops: 2 kernels" in out and "GB/s" in out and "L2 flushed" in out
    assert all(k.blocks and k.threads for k in t.kernels)
    (g,) = timeline.kernels({"two ops": lambda: (x * 2) + 1}, graph=True).values()
    assert g.count == 2 and "replayed from a CUDA graph" in capsys.readouterr().out
