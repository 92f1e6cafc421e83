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
    assert "0.8× SDPA's speed" in missed.text and "NOT met" in missed.text


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


def test_every_text_names_the_gpu():
    t = TARGETS["lab5.vs_sdpa"]
    assert "both timed now on NVIDIA H200" in t.text("NVIDIA H200")
    assert "NVIDIA H200" in t.judge(1.0, 1.0, gpu="NVIDIA H200").text
    share = TARGETS["lab6.b1"]
    assert "the ceiling measured on NVIDIA H100" in share.judge(1.0, 0.8, gpu="NVIDIA H100").text
    assert "80 % of the ideal step" in share.judge(1.0, 0.8, gpu="x").text
    assert "the GPU at hand" in t.text()                       # the interpreter: no GPU name to give


def test_percent_targets_show_and_compare_percentages():
    v = TARGETS["lab6.b16"].judge(mine_ms=1.0, ref_ms=0.8, gpu="g")
    assert v.value == pytest.approx(80.0) and v.threshold == pytest.approx(100 * TARGETS["lab6.b16"].ratio)


def test_bad_timings_are_refused_with_a_sentence():
    with pytest.raises(ValueError, match="two positive times"):
        TARGETS["lab5.vs_sdpa"].judge(0.0, 1.0)


def test_every_target_says_why():
    assert all(t.why and t.ratio > 0 for t in targets.TARGETS.values())
