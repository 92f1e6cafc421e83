"""bench on the CPU: the model's arithmetic, ceilings without a GPU, and compare's honest labels."""
import json
import math

import pytest
import torch

from course_utils import bench, trips


def test_reference_is_the_h100_datasheet_and_says_so():
    r = bench.REFERENCE
    assert (r.copy_gbps, r.matmul_tflops, r.launch_us) == (3350.0, 989.0, 5.0)
    assert r.measured is False and "datasheet" in r.source
    assert "assumption" in r.launch_source
    assert r.ridge == pytest.approx(989e12 / 3350e9)          # ~295 FLOP/byte


def test_model_ms_memory_bound():
    # 3.35 GB over 3350 GB/s is 1 ms, plus one 5 µs launch
    assert bench.model_ms(3.35e9) == pytest.approx(1.005)
    assert bench.model_ms(3.35e9, launches=3) == pytest.approx(1.015)
    assert bench.model_ms(0, launches=0) == 0


def test_model_ms_takes_the_max_not_the_sum():
    flops = 989e9                                            # 1 ms of arithmetic
    assert bench.model_ms(3.35e9, launches=0, flops=flops) == pytest.approx(1.0)
    assert bench.model_ms(1e3, launches=0, flops=2 * flops) == pytest.approx(2.0)


def test_model_ms_uses_the_gpu_given():
    slow = bench.Ceilings("toy", copy_gbps=1.0, matmul_tflops=1.0, measured=False, source="test", launch_us=0)
    assert bench.model_ms(1e6, gpu=slow) == pytest.approx(1.0)   # 1 GB/s moves 1e6 bytes per ms
    assert bench.model_ms(0, flops=1e9, gpu=slow) == pytest.approx(1.0)


def test_ceilings_without_a_gpu_is_the_unmeasured_reference():
    if bench.on_gpu():
        pytest.skip("a GPU is present: ceilings are measured")
    c = bench.ceilings()
    assert c is bench.REFERENCE and not c.measured


def test_time_returns_a_median_in_ms():
    calls = []
    ms = bench.time(lambda: calls.append(1), warmup=0, rep=1)
    assert ms >= 0 and len(calls) >= 2


def _stub():
    raise NotImplementedError("write the fused kernel")


def test_compare_on_the_interpreter_shows_a_model_and_a_meaningless_wallclock(monkeypatch):
    monkeypatch.setattr(bench, "on_gpu", lambda: False)
    x = torch.randn(1024)
    r = bench.compare({"copy": lambda: x.clone(), "cos cos": lambda: x.cos().cos(), "fused": _stub},
                      bytes=8 * 1024, title="toy", plot=False)
    text = repr(r)
    assert "MODEL" in text and "MEANINGLESS" in text and "meaningless" in text
    rows = {row["impl"]: row for row in r.rows}
    assert rows["copy"]["launches"] == 1 and rows["copy"]["bytes"] == 8 * 1024
    assert rows["cos cos"]["launches"] == 2 and rows["cos cos"]["bytes"] == 16 * 1024
    assert rows["copy"]["model ms"] == pytest.approx(bench.model_ms(8 * 1024, 1))
    assert rows["fused"]["status"] == "not written yet" and "not written yet" in text
    assert r.speedup("copy", "cos cos") == pytest.approx(rows["cos cos"]["model ms"] / rows["copy"]["model ms"])
    assert math.isnan(r.speedup("fused", "copy"))
    assert "MODEL" in r._repr_html_() and "not written yet" in r._repr_html_()


class _FakeTrips:
    def __init__(self, launches, nbytes):
        self.launches, self.bytes = launches, nbytes


def test_compare_uses_trips_count(monkeypatch):
    """compare must go through trips.count, whatever trips does inside."""
    monkeypatch.setattr(bench, "on_gpu", lambda: False)
    fake = {"a": _FakeTrips(1, 3350e6), "b": _FakeTrips(4, 3350e6 * 2)}
    monkeypatch.setattr(trips, "count", lambda fn: fake[fn()])
    r = bench.compare({"a": lambda: "a", "b": lambda: "b"}, flops={"a": 0, "b": 989e9 * 5}, plot=False)
    rows = {row["impl"]: row for row in r.rows}
    assert rows["a"]["model ms"] == pytest.approx(1.005)
    assert rows["b"]["model ms"] == pytest.approx(5.020)      # compute-bound: 5 ms + 4 launches
    assert r.speedup("a", "b") == pytest.approx(5.020 / 1.005)


def test_compare_on_a_gpu_reports_rates_and_fractions(monkeypatch):
    """The GPU branch's arithmetic, with the clock and the ceilings faked."""
    monkeypatch.setattr(bench, "on_gpu", lambda: True)
    fake = bench.Ceilings("fake GPU", copy_gbps=1000.0, matmul_tflops=100.0, measured=True, source="faked")
    monkeypatch.setattr(bench, "ceilings", lambda refresh=False: fake)
    times = {"unfused": 2.0, "fused": 1.0}
    monkeypatch.setattr(bench, "time", lambda fn, **kw: times[fn()])
    r = bench.compare({"unfused": lambda: "unfused", "fused": lambda: "fused", "todo": _stub},
                      bytes={"unfused": 1e9, "fused": 5e8}, flops=1e10, plot=False)
    rows = {row["impl"]: row for row in r.rows}
    assert rows["unfused"]["GB/s"] == pytest.approx(500.0)        # 1e9 bytes in 2 ms
    assert rows["unfused"]["useful GB/s"] == pytest.approx(250.0)  # only 5e8 bytes were needed
    assert rows["fused"]["GB/s"] == pytest.approx(500.0)
    assert rows["fused"]["of copy ceiling"] == pytest.approx(0.5)
    assert rows["fused"]["TFLOP/s"] == pytest.approx(10.0)
    assert rows["fused"]["of matmul ceiling"] == pytest.approx(0.1)
    assert rows["fused"]["speedup"] == pytest.approx(2.0)
    assert rows["todo"]["status"] == "not written yet"
    assert r.speedup("fused", "unfused") == pytest.approx(2.0)
    text = repr(r)
    assert "measured" in text and "MODEL" not in text and "fake GPU" in text and "50%" in text

    one = bench.compare({"fused": lambda: "fused"}, bytes=5e8, plot=False)
    assert one.rows[0]["useful GB/s"] == pytest.approx(500.0) and "GB/s" not in one.rows[0]


def test_ceilings_are_cached_per_gpu(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(bench, "on_gpu", lambda: True)
    monkeypatch.setattr(bench.env, "gpu_name", lambda: "NVIDIA Test GPU 80GB")
    monkeypatch.setattr(bench, "_measured", {})
    made = []

    def measure(name):
        made.append(name)
        return bench.Ceilings(name, 2000.0, 500.0, True, "faked measurement")
    monkeypatch.setattr(bench, "_measure", measure)
    c = bench.ceilings()
    path = tmp_path / "feed-the-beast" / "ceilings-nvidia-test-gpu-80gb.json"
    assert json.loads(path.read_text())["copy_gbps"] == 2000.0
    monkeypatch.setattr(bench, "_measured", {})          # a new session reads the file
    assert bench.ceilings() == c and made == ["NVIDIA Test GPU 80GB"]
    bench.ceilings(refresh=True)
    assert len(made) == 2


def test_model_at_another_size_scales_bytes_but_not_launches():
    import torch
    from course_utils import trips
    x = torch.randn(4096)
    t = trips.count(lambda: x.cos().cos())          # 2 launches, 16 bytes per element
    n = 2**28
    assert bench.model_ms_at(t, 4096, n) == pytest.approx(bench.model_ms(16 * n, launches=2))


@pytest.mark.skipif(bench.on_gpu(), reason="on a GPU compare measures; the model is the interpreter's")
def test_compare_models_the_size_it_is_told():
    import torch
    x, y = torch.randn(4096), torch.randn(4096)
    impls = {"two": lambda: x * 2 + y, "one": lambda: torch.add(y, x, alpha=2)}
    small = bench.compare(impls, plot=False)
    big = bench.compare(impls, plot=False, size=(4096, 2**24))
    # at 4096 elements the launches dominate; at 2**24 the bytes (20 vs 12 per element) do
    assert big.speedup("one", "two") == pytest.approx(
        bench.model_ms(20 * 2**24, 2) / bench.model_ms(12 * 2**24, 1))
    assert small.speedup("one", "two") != pytest.approx(big.speedup("one", "two"))
    assert "scaled to 16,777,216" in repr(big)


def test_time_back_to_back_divides_by_the_calls():
    calls = []
    per_call = bench.time(lambda: calls.append(1), calls=7, warmup=0, rep=1)
    assert per_call >= 0 and len(calls) % 7 == 0


def test_verdict_judges_against_references_timed_now(monkeypatch):
    rows = [{"impl": "eager", "status": "ok", "ms": 2.0, "of copy ceiling": 0.45},
            {"impl": "torch.compile", "status": "ok", "ms": 1.0, "of copy ceiling": 0.8},
            {"impl": "yours", "status": "ok", "ms": 1.05, "of copy ceiling": 0.86},
            {"impl": "stub", "status": "not written yet"}]
    monkeypatch.setattr(bench, "stream_ms", lambda nbytes: 0.84)     # a fake bare copy of the same bytes
    monkeypatch.setattr(bench.env, "gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(bench.env, "ON_GPU", True)
    monkeypatch.setattr(bench.env, "INTERPRET", False)
    measured = bench.Report("t", rows, [("ms", "ms")], [], measured=True, bytes=2**28)
    line = measured.verdict("yours", eager="eager")
    assert "86.0% of the copy ceiling; 0.952x the speed of torch.compile; 1.90x eager (measured)" in line
    assert "0.8× the speed of a bare copy of the same bytes" in line and "target ≥ 0.85×: NOT met" in line
    assert "0.952× the speed of torch.compile" in line and "target ≥ 0.97×: NOT met" in line
    assert line.count("timed now on NVIDIA H200") == 2
    assert "target ≥ 0.75×: met" in measured.verdict("yours", eager="eager", of_stream=0.75)
    assert "target ≥ 0.95×: met" in measured.verdict("yours", eager="eager", vs_rival=0.95)
    assert measured.verdict("stub", eager="eager") == "stub is not written yet"
    model = bench.Report("t", [dict(r, **{"model ms": r.get("ms")}) for r in rows], [], [], measured=False)
    assert "(MODEL)" in model.verdict("yours", eager="eager") and "copy ceiling needs a GPU" in model.verdict("yours", eager="eager")
    with pytest.raises(KeyError):
        measured.verdict("nobody", eager="eager")


@pytest.mark.skipif(bench.on_gpu(), reason="without a GPU the time is the model of the small copy")
def test_ms_or_model_models_the_small_copy_at_the_large_size():
    import torch
    x = torch.randn(1024)
    # x + x reads x once and writes once: 8 bytes per element, one launch, at 2**28 elements
    assert bench.ms_or_model(lambda: None, lambda: x + x, 1024, 2**28) == bench.model_ms(8 * 2**28, launches=1)


@pytest.mark.skipif(bench.on_gpu(), reason="the CPU's answer: no allocator to read")
def test_peak_bytes_without_a_gpu_says_so_rather_than_measure():
    with pytest.raises(RuntimeError, match="needs a GPU|where a GPU is"):
        bench.peak_bytes(lambda: torch.zeros(4))


@pytest.mark.skipif(bench.on_gpu(), reason="the CPU's answer: no graph to replay")
def test_graph_time_without_a_gpu_says_so_rather_than_measure():
    with pytest.raises(RuntimeError, match="where a GPU is"):
        bench.graph_time([lambda: torch.zeros(4)])


def test_interleaved_takes_turns_reverses_every_other_round_and_keeps_going_past_a_failure(monkeypatch):
    order, ms = [], {"a": iter([3.0, 1.0, 2.0]), "b": iter([5.0, 9.0, 4.0])}

    def fake_time(fn, **kw):
        return fn()

    def timed(name):
        def fn():
            order.append(name)
            if name == "c":
                raise RuntimeError("no such back-end")
            return next(ms[name])
        return fn

    monkeypatch.setattr(bench, "time", fake_time)
    out = bench.interleaved({n: timed(n) for n in "abc"}, rounds=3)
    assert order == ["a", "b", "c", "b", "a", "a", "b"]     # c raised in round 1 and is not called again
    assert out["a"] == 2.0 and out["b"] == 5.0             # medians of each name's own rounds
    assert isinstance(out["c"], RuntimeError)


# --- other GPUs by name, and goal lines that say where they ran ----------------------------------------
def test_datasheet_ceilings_of_a_t4_model_its_tl_dot_without_tensor_cores():
    t4 = bench.datasheet_ceilings("Tesla T4")
    assert (t4.device, t4.copy_gbps, t4.matmul_tflops, t4.measured) == ("NVIDIA T4", 320.0, 8.1, False)
    assert "T4 Tensor Core GPU" in t4.source and "without tensor cores" in t4.source
    assert bench.datasheet_ceilings("Tesla T4", tensor_cores=True).matmul_tflops == 65.0
    # the same traffic takes the T4 over ten times the H100's time: 3.35 GB in 1 ms there
    assert bench.model_ms(3.35e9, launches=0, gpu=t4) == pytest.approx(3.35e9 / 320e6)


def test_datasheet_ceilings_of_an_h200_and_the_reference():
    h200 = bench.datasheet_ceilings("NVIDIA H200")
    assert (h200.copy_gbps, h200.matmul_tflops) == (4800.0, 989.0) and "H200" in h200.source
    assert bench.REFERENCE == bench.datasheet_ceilings("NVIDIA H100 80GB HBM3")


def test_datasheet_ceilings_of_an_unknown_card_say_what_to_do():
    with pytest.raises(ValueError, match="no datasheet.*bench.ceilings"):
        bench.datasheet_ceilings("NVIDIA B200")


def _fake_gpu(monkeypatch, rehearse=""):
    from course_utils import environment
    monkeypatch.setattr(environment, "DEVICE", "cuda")
    monkeypatch.setattr(environment, "compute_capability", lambda: (9, 0))
    monkeypatch.setattr(environment, "gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(bench, "on_gpu", lambda: True)
    fake = bench.Ceilings("NVIDIA H200", copy_gbps=4000.0, matmul_tflops=700.0, measured=True, source="faked")
    monkeypatch.setattr(bench, "ceilings", lambda refresh=False: fake)
    if rehearse:
        monkeypatch.setenv("COURSE_PLAN", rehearse)
    else:
        monkeypatch.delenv("COURSE_PLAN", raising=False)


def test_a_goal_line_names_the_gpu_it_ran_on(monkeypatch):
    _fake_gpu(monkeypatch)
    assert bench.goal(">= 1.3x sdpa-flash", True) == \
        "goal: >= 1.3x sdpa-flash: met (measured on NVIDIA H200)"
    assert bench.goal(">= 1.3x sdpa-flash", False).endswith("NOT met (measured on NVIDIA H200)")


def test_a_goal_line_without_a_gpu_is_not_measured(monkeypatch):
    monkeypatch.setattr(bench, "on_gpu", lambda: False)
    assert bench.goal(">= 92% of the copy ceiling", True).endswith(": not measured: no GPU here")


def test_a_goal_line_while_rehearsing_is_not_measured(monkeypatch):
    _fake_gpu(monkeypatch, rehearse="7.5")
    line = bench.goal(">= 1.3x sdpa-flash", True)
    assert "not measured: rehearsing the T4's plan" in line and "met" not in line.split(": not measured")[1]


def test_compare_and_verdict_while_rehearsing_say_whose_times_they_are(monkeypatch):
    _fake_gpu(monkeypatch, rehearse="T4")
    monkeypatch.setattr(bench, "time", lambda fn, **kw: fn())
    r = bench.compare({"torch.compile": lambda: 1.0, "eager": lambda: 2.0, "yours": lambda: 1.0},
                      bytes=4e9, plot=False)
    assert r.rehearsal == "the T4's plan" and r.device == "NVIDIA H200"
    assert any("Rehearsing the T4's plan" in n and "not measured on the GPU rehearsed" in n for n in r.notes)
    line = r.verdict("yours", eager="eager")
    assert "(measured on NVIDIA H200)" in line and "not measured: rehearsing the T4's plan" in line
    assert "(met)" not in line and "NOT met" not in line
    monkeypatch.delenv("COURSE_PLAN")
    monkeypatch.setattr(bench, "stream_ms", lambda nbytes, **kw: 1.0)   # the bare copy of the same bytes
    plain = bench.compare({"torch.compile": lambda: 1.0, "eager": lambda: 2.0, "yours": lambda: 1.0},
                          bytes=4e9, plot=False).verdict("yours", eager="eager")
    assert "rehears" not in plain and "(measured on NVIDIA H200)" in plain and ": met" in plain


def test_free_bytes_without_a_gpu_holds_anything(monkeypatch):
    monkeypatch.setattr(bench, "on_gpu", lambda: False)          # as on the CPU, on any machine
    assert bench.free_bytes() == float("inf")
