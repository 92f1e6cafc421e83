"""The exercise rule (CONTRIBUTING, "Exercises"): a stub states the contract, the hints hold the how.

Measured with tools/stub_share.py over the whole student notebook: at most 20% of an exercise's
solution (token trigrams, its signature left out) may be visible outside the stub, the hints, <details>
and folded spoilers, or the ceiling stub_share.CEILINGS names for it with its reason; a lesson's
exercise has 2 to 4 hints, a lab's 1 or 2 (the idea, no recipe); a stub cell fits the notebook's width."""
import json
import re
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import stub_share as share  # noqa: E402

gen = share.gen
ROOT = share.ROOT
SOLUTIONS = [src for src, _ in gen.targets()]
HINTS = json.loads((ROOT / gen.HINTS_JSON).read_text())


def _measured(*cells, tmp_path):
    """The share of a made-up exercise's solution that `cells` (around its stub cell) show."""
    nb = nbformat.v4.new_notebook(cells=list(cells))
    (tmp_path / "solutions").mkdir(exist_ok=True)
    path = tmp_path / "solutions" / "99_x.ipynb"
    nbformat.write(nb, path)
    old = share.ROOT
    share.ROOT = tmp_path
    try:
        (ex,) = share.exercises(path, hints={})
    finally:
        share.ROOT = old
    return ex.share


BODY = "offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    tl.store(out_ptr + offsets, x, mask=offsets < n)"
SOLUTION = f"@triton.jit\ndef k(out_ptr, n, BLOCK: tl.constexpr):\n    ### BEGIN SOLUTION\n    {BODY}\n    ### END SOLUTION"


def test_the_measure_counts_what_the_student_sees():
    """On a made-up exercise: a recipe in the markdown is counted; the same text in <details> is not, nor
    a folded spoiler."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        code = nbformat.v4.new_code_cell(SOLUTION)
        head = nbformat.v4.new_markdown_cell("## Write")
        assert _measured(head, code, tmp_path=tmp) == 0
        assert _measured(head, nbformat.v4.new_markdown_cell(f"Write:\n```\n{BODY}\n```"), code, tmp_path=tmp) == 1
        assert _measured(head, nbformat.v4.new_markdown_cell(f"<details>{BODY}</details>"), code, tmp_path=tmp) == 0
        spoiler = nbformat.v4.new_code_cell(BODY.replace("    ", ""))
        spoiler.metadata["tags"] = ["spoiler"]
        assert _measured(head, code, spoiler, tmp_path=tmp) == 0


def test_a_worked_example_sections_before_the_exercise_counts():
    """The old measure started at the exercise's section, so lesson 08's walking kernel, shown in
    its Predict section, went uncounted (79% of the solution). The whole notebook counts now."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        example = nbformat.v4.new_code_cell(f"@triton.jit\ndef given(out_ptr, n, BLOCK: tl.constexpr):\n    {BODY}")
        assert _measured(nbformat.v4.new_markdown_cell("## Predict"), example, nbformat.v4.new_markdown_cell("## Write"),
                         nbformat.v4.new_code_cell(SOLUTION), tmp_path=tmp) == 1


@pytest.mark.parametrize("src", SOLUTIONS, ids=lambda p: p.name)
def test_each_exercise_stays_under_its_ceiling(src):
    over = [f"{ex.name}: {ex.share:.0%} ({ex.visible} of {ex.trigrams} trigrams), ceiling {ex.ceiling:.0%} "
            f"({ex.reason})" for ex in share.exercises(src) if ex.share > ex.ceiling]
    assert not over, (
        f"{src.name}: more of the solution visible in the student notebook than its ceiling allows: "
        f"{'; '.join(over)}. Hold a piece back (move the how into the hints cell, or tag a later cell that shows "
        "a variant of the answer `spoiler`), or, for a worked example meant to carry that much, give the "
        "exercise a ceiling and its reason in stub_share.CEILINGS and say why in CONTRIBUTING. "
        "`python tools/stub_share.py` shows every exercise.")


def test_every_ceiling_names_an_exercise_and_a_reason():
    names = {ex.name for ex in share.all_exercises()}
    stale = sorted(set(share.CEILINGS) - names)
    assert not stale, f"stub_share.CEILINGS names exercises that no notebook has: {stale}"
    for name, (ceiling, reason) in share.CEILINGS.items():
        assert share.CEILING < ceiling <= 0.65 and len(reason) > 20, f"{name}: a ceiling above the default needs a reason"
    # above 30%, CONTRIBUTING must say why (Part I's worked examples, lab 4's given forward, ...)
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    for name, (ceiling, _) in share.CEILINGS.items():
        if ceiling > 0.30:
            assert f"`{name}`" in contributing, f"{name}: its ceiling of {ceiling:.0%} is not explained in CONTRIBUTING"


def _lab(exercise: str) -> bool:
    return re.match(r"lab\d+\.", exercise) is not None


@pytest.mark.parametrize("exercise", sorted(HINTS))
def test_hint_tiers_per_exercise(exercise):
    tiers = HINTS[exercise]["hints"]
    if _lab(exercise):
        assert 1 <= len(tiers) <= 2, f"{exercise}: a lab gets the idea, in 1 or 2 hints; it has {len(tiers)}"
        assert not any("```" in h["text"] for h in tiers), f"{exercise}: no pseudo-code in a lab's hints"
    else:
        assert 2 <= len(tiers) <= 4, f"{exercise}: a lesson's exercise has 2 to 4 hints; it has {len(tiers)}"
    assert "stub" in tiers[0]["addresses"], f"{exercise}: the stub's failure should point to hint 1"


@pytest.mark.parametrize("src", SOLUTIONS, ids=lambda p: p.name)
def test_stub_cells_fit_the_notebook(src):
    student = gen.student_notebook(nbformat.read(src, as_version=4), src.name)
    wide = [f"cell {i}, line {n + 1}: {len(line)} characters" for i, c in enumerate(student.cells)
            if "stub" in c.metadata.get("tags", []) for n, line in enumerate(c.source.split("\n"))
            if len(line) > gen.CODE_WIDTH]
    assert not wide, f"{src.name}: stub lines wider than {gen.CODE_WIDTH}: " + "; ".join(wide)
