"""plot: each function returns Axes, headless; the roofline's ridge sits at rate / bandwidth."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course_utils import bench, plot  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _ridge_annotation(ax):
    return [t for t in ax.texts if t.get_text().startswith("ridge")]


def test_roofline_ridge_is_rate_over_bandwidth():
    c = bench.Ceilings("toy", copy_gbps=2000.0, matmul_tflops=400.0, measured=True, source="test")
    ax = plot.roofline(c, points=[("a", 0.25, 0.4), ("b", 1000.0, 300.0)])
    assert isinstance(ax, matplotlib.axes.Axes)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    (ridge,) = _ridge_annotation(ax)
    assert ridge.xy[0] == pytest.approx(400e12 / 2000e9)     # 200 FLOP/byte
    line = ax.lines[0]
    xs, ys = line.get_xdata(), line.get_ydata()
    assert max(ys) == pytest.approx(400.0)                   # the compute roof
    assert ys[0] == pytest.approx(xs[0] * 2.0)               # the memory slope: 2000 GB/s = 2 TFLOP/s per FLOP/B
    assert "measured on toy" in ax.get_title()
    assert sum(line.get_marker() == "o" for line in ax.lines) == 2   # the two dots


def test_roofline_of_the_reference_says_model():
    ax = plot.roofline(bench.REFERENCE, points=[("copy", 0, 0)])
    assert ax.get_title().startswith("MODEL:") and "datasheet" in ax.get_title()
    assert _ridge_annotation(ax)[0].xy[0] == pytest.approx(bench.REFERENCE.ridge)
    footnote = ax.get_xlabel().split("\n")[-1]   # under the label: the layout keeps the two apart
    assert "copy" in footnote and "not drawn" in footnote


def test_bars_from_a_dict_and_from_a_report(monkeypatch):
    ax = plot.bars({"a": 1.0, "b": 2.0}, ylabel="ms")
    assert [p.get_height() for p in ax.patches] == [1.0, 2.0]

    class R:  # the shape of a bench.Report without running anything
        rows = [{"impl": "unfused", "status": "ok", "model ms": 2.0},
                {"impl": "fused", "status": "not written yet"}]
        key, title, measured = "model ms", "toy", False

        def header(self, key):
            return "MODEL ms"
    ax = plot.bars(R())
    assert "MODEL" in ax.get_title() and ax.get_ylabel() == "MODEL ms"
    assert any(t.get_text() == "not written yet" for t in ax.texts)


def test_curves_returns_axes_with_the_scales_asked():
    ax = plot.curves([1, 10, 100], {"fused": [1, 2, 3], "unfused": [2, 4, 6]}, "n", "ms", logy=False, title="t")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "linear"
    assert len(ax.lines) == 2 and ax.get_title() == "t"


def test_memory_hierarchy_labels_the_gpu_and_its_sources():
    ax = plot.memory_hierarchy(bench.REFERENCE)     # no GPU: the H100 SXM's datasheet, said so
    assert ax.get_title().endswith("MODEL: H100 SXM datasheet figures, no GPU here")
    labels = [t.get_text() for t in ax.texts]
    assert "50 MiB, shared by all 132 SMs" in labels and any("copy not measured here" in t for t in labels)
    assert "H100 Tensor Core GPU datasheet" in ax.figure.get_supxlabel()
    measured = bench.Ceilings("NVIDIA H100 80GB HBM3", copy_gbps=3003.0, matmul_tflops=695.0, measured=True,
                              source="test")
    ax = plot.memory_hierarchy(measured)
    assert ax.get_title().endswith("NVIDIA H100 80GB HBM3")
    assert any("a copy measured 3,003 GB/s" in t.get_text() for t in ax.texts)
    unknown = bench.Ceilings("Some Future GPU", copy_gbps=9000.0, matmul_tflops=2000.0, measured=True, source="t")
    assert "standing in for Some Future GPU" in plot.memory_hierarchy(unknown).get_title()


def test_programs_on_sms_draws_each_program_and_refuses_what_it_cannot_draw():
    ax = plot.programs_on_sms(20, 8, sms=2)
    texts = [t.get_text() for t in ax.texts]
    assert {"program 0", "program 1", "program 2"} <= set(texts)
    assert "SM 0: program 0, then program 2" in texts
    with pytest.raises(ValueError, match="at least 1"):
        plot.programs_on_sms(0, 8)
    with pytest.raises(ValueError, match="too many to draw"):
        plot.programs_on_sms(10_000, 1024)


def test_the_pictures_use_the_colour_blind_safe_palette():
    """Okabe-Ito colours in the order plot.CYCLE gives them, for lines drawn here and by hand (plot.pyplot()), a
    marker per line as well, and no red against green anywhere (the memory pyramid's two tints included)."""
    from matplotlib.colors import to_hex
    ax = plot.curves([1, 2, 3], {"a": [1, 2, 3], "b": [2, 3, 4], "c": [3, 4, 5]}, "n", "ms")
    assert [to_hex(line.get_color()).upper() for line in ax.lines] == [c.upper() for c in plot.CYCLE[:3]]
    assert len({line.get_marker() for line in ax.lines}) == 3
    _, by_hand = plot.pyplot().subplots()
    assert to_hex(by_hand.plot([1, 2])[0].get_color()).upper() == plot.OKABE_ITO["blue"]
    assert {to_hex(p.get_facecolor()).upper() for p in plot.bars({"a": 1.0, "b": 2.0}).patches} == {plot.OKABE_ITO["blue"]}
    fills = {to_hex(p.get_facecolor()) for p in plot.memory_hierarchy(bench.REFERENCE).patches}
    assert fills == {"#bfe3f6", "#f7dc9c"}          # tints of sky blue and orange: not the green and red they were
