"""Numbers in the prose are held to the run (CONTRIBUTING, "Numbers"): every `<!-- run: /REGEX/ ±TOL -->`
marker in a solution's markdown agrees with the recorded GPU run it names, within its tolerance.

The checker is tools/prose_numbers.py; these tests run it on every solution, then on made-up notebooks
and a planted stale number, to show that it fails where it must and says what is wrong."""
import json
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import prose_numbers as pn  # noqa: E402


@pytest.mark.parametrize("path", pn.solutions(), ids=lambda p: p.stem)
def test_every_prose_number_agrees_with_its_run(path):
    bad = [f.message() for f in pn.check_notebook(path) if not f.ok]
    assert not bad, "\n".join(bad)


# A made-up notebook and its recorded runs: each test writes the markdown, the runs print these lines.
H100_OUTPUT = ("torch.softmax      0.61 ms   2,640 GB/s   2.93× slower than yours\n"
               "knee at n = 1,395,833 elements\n"
               "max difference 7.4e-06\n")
H200_OUTPUT = "torch.softmax      0.45 ms   3,520 GB/s   2.41× slower than yours\n"


def _made_up(tmp_path, *markdown, lab=False):
    """Write a solution with these markdown cells and the H100 and H200 runs of it; return its path."""
    folder = tmp_path / "solutions" / ("labs" if lab else "")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "99_made_up.ipynb"
    code = nbformat.v4.new_code_cell("print(...)")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(m) for m in markdown] + [code]),
                   path)
    for gpu, text in [("nvidia-h100-80gb-hbm3", H100_OUTPUT), ("nvidia-h200", H200_OUTPUT)]:
        ran = nbformat.v4.new_code_cell("print(...)")
        ran.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        run_path = pn.recorded_run(path, gpu, tmp_path / "runs")
        run_path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# run"), ran]), run_path)
    return path


def _only(tmp_path, *markdown, lab=False):
    (finding,) = pn.check_notebook(_made_up(tmp_path, *markdown, lab=lab), runs=tmp_path / "runs")
    return finding


SLOWER = r"/torch\.softmax[^\n]*?([\d.]+)× slower/"


def test_a_number_that_agrees_passes(tmp_path):
    f = _only(tmp_path, f"torch.softmax is **2.9×**<!-- run: {SLOWER} ±10% --> slower than yours.")
    assert f.ok, f.message()
    assert (f.prose, f.run, f.gpu, f.tolerance) == (2.9, 2.93, "h100", "10%")


def test_a_stale_number_fails_naming_the_sentence_and_both_values(tmp_path):
    f = _only(tmp_path, "Measured on the H100.\n\nSo torch.softmax is **3.6×**"
                        f"<!-- run: {SLOWER} ±10% --> slower than yours. The rest follows.")
    assert not f.ok
    message = f.message()
    assert "So torch.softmax is **3.6×** slower than yours." in message
    assert "the prose says 3.6" in message and "printed 2.93" in message and "±10%" in message
    assert "99_made_up.ipynb, cell 0" in message and "nvidia-h100-80gb-hbm3" in message
    assert "The rest follows" not in message and "Measured on" not in message


def test_a_regex_that_matches_nothing_fails_and_says_so(tmp_path):
    f = _only(tmp_path, r"It took 0.61 ms<!-- run: /softmax took ([\d.]+) ms/ ±10% -->.")
    assert not f.ok and "matches nothing" in f.problem and "0.61" in f.problem


def test_an_absolute_tolerance(tmp_path):
    assert _only(tmp_path, r"It takes 0.65<!-- run: /([\d.]+) ms/ ±0.05 --> ms.").ok
    f = _only(tmp_path, r"It takes 0.67<!-- run: /([\d.]+) ms/ ±0.05 --> ms.")
    assert not f.ok and "±0.05" in f.problem
    # 0.67 is within 10% of 0.61: the same numbers pass a relative tolerance
    assert _only(tmp_path, r"It takes 0.67<!-- run: /([\d.]+) ms/ ±10% --> ms.").ok


def test_run_h200_checks_against_the_h200_run(tmp_path):
    f = _only(tmp_path, f"On the H200 it is 2.4×<!-- run h200: {SLOWER} ±5% --> slower.")
    assert f.ok and (f.gpu, f.run) == ("h200", 2.41)
    f = _only(tmp_path, f"On the H200 it is 2.9×<!-- run h200: {SLOWER} ±5% --> slower.")
    assert not f.ok and "H200" in f.problem and "nvidia-h200" in f.problem


def test_a_lab_is_checked_against_its_run_under_labs(tmp_path):
    f = _only(tmp_path, f"It is 2.9×<!-- run: {SLOWER} ±10% --> slower.", lab=True)
    assert f.ok and f.run_notebook.endswith("nvidia-h100-80gb-hbm3/labs/99_made_up.ipynb")


@pytest.mark.parametrize("prose, value", [
    ("the knee lies at 1,395,833<!-- run: /n = ([\\d,]+) elements/ ±1% --> elements", 1395833),
    ("2,640 GB/s<!-- run: /([\\d,]+) GB\\/s/ ±1% -->", 2640),
    ("**2.9×**<!-- run: /([\\d.]+)× slower/ ±10% -->", 2.9),
    ("2.9 x<!-- run: /([\\d.]+)× slower/ ±10% -->", 2.9),
    ("it reaches 2,640 GB/s, 293%<!-- run: /([\\d.]+)× slower/ ±1% --> of it", 293),  # the last number
    ("a difference of 7.4e-6<!-- run: /difference ([\\d.e-]+)/ ±1% -->", 7.4e-6),
    ("0.61 ms<!-- run: /([\\d.]+) ms/ ±0.01 -->", 0.61),
    ("**0.61**&nbsp;ms<!-- run: /([\\d.]+) ms/ ±0.01 -->", 0.61),
])
def test_the_prose_value_is_the_last_number_before_the_marker(tmp_path, prose, value):
    f = _only(tmp_path, prose)
    assert f.prose == pytest.approx(value)


def test_numbers_inside_markers_and_comments_are_not_prose(tmp_path):
    # The second marker's number is 0.61; the 2.93 inside the first marker and the hint comment do not count.
    path = _made_up(tmp_path, f"2.9×<!-- run: {SLOWER} ±10% --> slower, taking 0.61 ms"
                              r"<!-- run: /([\d.]+) ms/ ±0.01 --> where <!-- addresses: 2 3 --> before.")
    first, second = pn.check_notebook(path, runs=tmp_path / "runs")
    assert (first.prose, second.prose) == (2.9, 0.61) and first.ok and second.ok
    # a marker with only another marker before it has no number of its own
    f = _only(tmp_path, f"Slower<!-- run: {SLOWER} ±10% -->.")
    assert not f.ok and "no number before the marker" in f.problem


def test_a_number_in_an_earlier_cell_is_not_the_prose_value(tmp_path):
    path = _made_up(tmp_path, "It is 2.9× slower.", f"As measured<!-- run: {SLOWER} ±10% -->.")
    (f,) = pn.check_notebook(path, runs=tmp_path / "runs")
    assert not f.ok and "no number before the marker in this cell" in f.problem


def test_a_marker_far_from_its_number_fails(tmp_path):
    f = _only(tmp_path, f"It is 2.9× slower than your kernel<!-- run: {SLOWER} ±10% -->.")
    assert not f.ok and "right after the number" in f.problem


@pytest.mark.parametrize("marker, says", [
    ("<!-- run: /([\\d.]+)× slower/ -->", "malformed marker"),                        # no tolerance
    ("<!-- run: ([\\d.]+)× slower ±10% -->", "malformed marker"),                     # no slashes
    ("<!-- run: /([\\d.]+)× slower/ 10% -->", "malformed marker"),                    # no ±
    ("<!-- run t4: /([\\d.]+)× slower/ ±10% -->", "unknown GPU 't4'"),
    ("<!-- run: /([\\d.]+× slower/ ±10% -->", "does not compile"),
    ("<!-- run: /[\\d.]+× slower/ ±10% -->", "has no group"),
    ("<!-- run: /(slower)/ ±10% -->", "which is no number"),
])
def test_a_malformed_marker_fails_with_what_is_wrong(tmp_path, marker, says):
    f = _only(tmp_path, f"It is 2.9×{marker} slower.")
    assert not f.ok and says in f.problem, f.problem


def test_a_missing_recorded_run_fails(tmp_path):
    path = _made_up(tmp_path, f"It is 2.9×<!-- run: {SLOWER} ±10% --> slower.")
    (f,) = pn.check_notebook(path, runs=tmp_path / "elsewhere")
    assert not f.ok and "no recorded H100 run" in f.problem


def _passing_markers():
    for path in pn.solutions():
        for f in pn.check_notebook(path):
            if f.ok:
                yield path, f


def test_a_stale_number_planted_in_a_real_solution_fails(tmp_path):
    """Copy a solution whose tied numbers agree with its run, make one of them ten times too large."""
    path, good = next(_passing_markers(), (None, None))
    if path is None:
        pytest.skip("no solution has a marker that agrees with its run yet")
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    nb = json.loads(copy.read_text())
    cell = nb["cells"][good.cell]
    source = "".join(cell["source"])
    at = source.index(good.marker)
    number = list(pn.NUMBER.finditer(pn.COMMENT.sub(lambda m: " " * len(m.group()), source[:at])))[-1]
    stale = f"{good.prose * 10:g}"
    cell["source"] = source[:number.start()] + stale + source[number.end():]
    copy.write_text(json.dumps(nb))
    findings = [f for f in pn.check_notebook(copy) if f.cell == good.cell and f.marker == good.marker]
    (f,) = findings
    assert not f.ok
    message = f.message()
    assert f"the prose says {pn._show(good.prose * 10)}" in message
    assert f"printed {pn._show(good.run)}" in message
    assert re.sub(r"\s+", " ", stale) in message      # the sentence, with its stale number, is quoted
