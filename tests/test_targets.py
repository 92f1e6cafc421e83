"""course_utils.targets on fake timings (CPU only): a ratio met or not, parity within the tolerance only where the
reference is at the copy ceiling, and every sentence naming the GPU both sides ran on."""
import pytest

from course_utils import targets
from course_utils.targets import AT_CEILING, TARGETS, Target


def test_a_ratio_is_the_references_time_over_yours():
    t = Target("SDPA", 1.0)
    met = t.judge(mine_ms=0.9, ref_ms=1.0, gpu="NVIDIA H200")
    assert met.ok and met.value == pytest.approx(1.0 / 0.9) and not met.parity
    missed = t.judge(mine_ms=1.25, ref_ms=1.0, gpu="NVIDIA H200")
    assert not missed.ok and missed.value == pytest.approx(0.8)
    assert "0.8× the speed of SDPA" in missed.text and "NOT met" in missed.text


def test_parity_within_the_tolerance_only_where_the_reference_is_at_the_ceiling():
    t = Target("SDPA", 1.0, tolerance=0.01)
    tie = dict(mine_ms=1.005, ref_ms=1.0, gpu="NVIDIA H100 80GB HBM3")
    at = t.judge(**tie, ref_share=AT_CEILING + 0.05)
    assert at.ok and at.parity and at.threshold == pytest.approx(0.99)
    assert "parity within 1.0% passes" in at.text and "95% of the copy ceiling" in at.text
    below = t.judge(**tie, ref_share=AT_CEILING - 0.1)       # the reference has headroom: no band
    assert not below.ok and not below.parity
    assert not t.judge(**tie).ok                               # share unknown: no band either
    assert not t.judge(mine_ms=1.05, ref_ms=1.0, ref_share=0.97).ok   # 5 % slower is past the band


def test_every_text_names_the_gpu(monkeypatch):
    t = TARGETS["lab5.vs_sdpa"]
    assert "both timed now on NVIDIA H200" in t.text("NVIDIA H200")
    assert "NVIDIA H200" in t.judge(1.0, 1.0, gpu="NVIDIA H200").text
    share = TARGETS["lab2.bwd_of_copy"]
    assert "the ceiling measured on NVIDIA H100" in share.judge(1.0, 0.8, gpu="NVIDIA H100").text
    assert "80 % of the copy ceiling" in share.judge(1.0, 0.8, gpu="x").text
    monkeypatch.setattr(targets.env, "ON_GPU", False)           # the interpreter: no GPU name to give
    assert "the GPU at hand" in t.text()


def test_percent_targets_show_and_compare_percentages():
    v = TARGETS["lab2.bwd_of_copy"].judge(mine_ms=1.0, ref_ms=0.8, gpu="g")
    assert v.value == pytest.approx(80.0) and v.threshold == pytest.approx(100 * TARGETS["lab2.bwd_of_copy"].ratio)


def test_bad_timings_are_refused_with_a_sentence():
    with pytest.raises(ValueError, match="two positive times"):
        TARGETS["lab5.vs_sdpa"].judge(0.0, 1.0)


def test_every_target_says_why():
    assert all(t.why and t.ratio > 0 for t in targets.TARGETS.values())


def test_a_graded_row_without_a_gpu_is_not_measured_and_names_no_number(monkeypatch):
    from course_utils.grade import _card
    from course_utils.grade._card import NOT_MEASURED, Scorecard
    monkeypatch.setattr(_card, "ON_GPU", False)                 # as on the CPU, on any machine
    monkeypatch.setattr(targets.env, "ON_GPU", False)
    card = Scorecard("t")
    called = []
    assert card.against("B = 1: against SDPA", TARGETS["lab5.b1_vs_sdpa"], lambda: called.append(1)) is None
    row = card.rows[0]
    assert row.status == NOT_MEASURED and not called and "no GPU here" in row.diagnosis
    assert row.target.startswith("≥ 1× the speed of SDPA, both timed now on")


def test_tune_without_a_gpu_times_nothing_and_takes_the_first_candidate(monkeypatch):
    from course_utils import bench, tune
    monkeypatch.setattr(bench, "on_gpu", lambda: False)          # as on the CPU, on any machine
    made = []
    cands = [dict(splits=4), dict(splits=8)]
    assert tune.fastest("test.x", [1, 2], cands, lambda c, *a: made.append(c), ()) == cands[0]
    assert tune.fastest("test.y", [1], lambda: cands[::-1], lambda c, *a: made.append(c), ()) == cands[1]
    assert not made and "nothing tuned" in tune.report("test.x")


def test_tune_keeps_the_fastest_caches_it_and_uses_it_inside_a_capture(monkeypatch, tmp_path):
    # fake timings on a fake GPU: the search, the cache, and the capture (a GPU run on 2026-11-26 found the first
    # candidate used inside a CUDA-graph capture instead of the cached choice)
    import torch
    from course_utils import bench, tune
    monkeypatch.setattr(bench, "on_gpu", lambda: True)
    monkeypatch.setattr(tune.env, "gpu_name", lambda: "Fake GPU")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(tune, "_memory", {})
    monkeypatch.setattr(tune, "_hot", {})
    monkeypatch.setattr(tune, "_copies", lambda args, l2: [args])
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: type("P", (), {"L2_cache_size": 1})())
    capturing = [False]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    us = {2: 0.030, 8: 0.012, 16: 0.015}
    timed = []

    def graph_time(calls, **kw):
        timed.append(calls[0]())
        return us[timed[-1]]
    monkeypatch.setattr(bench, "graph_time", graph_time)
    cands = [dict(splits=s) for s in us]
    make = lambda c, *a: (lambda: c["splits"])  # noqa: E731
    capturing[0] = True
    assert tune.fastest("t", [1], cands, make, ()) == cands[0] and not timed   # new key in a capture: no timing
    capturing[0] = False
    assert tune.fastest("t", [1], cands, make, ()) == dict(splits=8) and timed == [2, 8, 16]
    assert (tmp_path / "feed-the-beast" / "tuned-fake-gpu.json").exists()
    tune._hot.clear()
    capturing[0] = True
    assert tune.fastest("t", [1], cands, make, ()) == dict(splits=8) and len(timed) == 3
    assert "chose splits=8" in tune.report("t") and "Fake GPU" in tune.report("t")


def test_an_sdpa_reference_that_runs_on_the_gpu_at_hand(monkeypatch):
    """FlashAttention-2 has no sm_75 kernels: on a T4 lab 4's reference is SDPA's memory-efficient backward."""
    from torch.nn.attention import SDPBackend
    from course_utils import capability, environment
    assert targets.sdpa_backend() == (SDPBackend.FLASH_ATTENTION, "flash")     # no GPU: nothing timed
    plan_of = capability.plan
    monkeypatch.setattr(environment, "DEVICE", "cuda")
    for cc, want in (((7, 5), (SDPBackend.EFFICIENT_ATTENTION, "memory-efficient")),
                     ((8, 0), (SDPBackend.FLASH_ATTENTION, "flash")), ((9, 0), (SDPBackend.FLASH_ATTENTION, "flash"))):
        monkeypatch.setattr(capability, "plan", lambda cc=cc: plan_of(cc))
        assert targets.sdpa_backend() == want, cc


def test_sdpa_batches_keep_to_what_a_t4_holds(monkeypatch):
    from course_utils import capability, environment
    assert targets.sdpa_batches((1, 8, 32, 64)) == (1, 8, 32, 64)
    plan_of = capability.plan
    monkeypatch.setattr(environment, "DEVICE", "cuda")
    monkeypatch.setattr(capability, "plan", lambda: plan_of((7, 5)))
    assert targets.sdpa_batches((1, 8, 32, 64)) == (1, 8) and targets.sdpa_batches((8, 32, 64)) == (8,)
    monkeypatch.setattr(capability, "plan", lambda: plan_of((8, 9)))
    assert targets.sdpa_batches((8, 32, 64)) == (8, 32, 64)
