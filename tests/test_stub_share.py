"""The exercise rule (CONTRIBUTING, "Exercises"): a stub states the contract, the hints hold the how.

Measured with tools/stub_share.py: at most 15% of an exercise's solution (token trigrams, its
signature left out) may be visible in the student notebook outside the hints; a lesson's exercise has
2 to 4 hints, a lab's 1 or 2 (the idea, no recipe); a stub cell fits the notebook's width."""
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


def test_the_measure_counts_what_the_student_sees():
    """On a made-up exercise: a recipe in the markdown is counted; the same text in <details> is not, nor
    a folded spoiler."""
    body = "offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    tl.store(out_ptr + offsets, x, mask=offsets < n)"
    solution = f"@triton.jit\ndef k(out_ptr, n, BLOCK: tl.constexpr):\n    ### BEGIN SOLUTION\n    {body}\n    ### END SOLUTION"

    def measured(*cells, tmp_path):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Write"), *cells])
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

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        code = nbformat.v4.new_code_cell(solution)
        assert measured(code, tmp_path=tmp) == 0
        assert measured(nbformat.v4.new_markdown_cell(f"Write:\n```\n{body}\n```"), code, tmp_path=tmp) == 1
        assert measured(nbformat.v4.new_markdown_cell(f"<details>{body}</details>"), code, tmp_path=tmp) == 0
        spoiler = nbformat.v4.new_code_cell(body.replace("    ", ""))
        spoiler.metadata["tags"] = ["spoiler"]
        assert measured(code, spoiler, tmp_path=tmp) == 0


@pytest.mark.parametrize("src", SOLUTIONS, ids=lambda p: p.name)
def test_at_most_15_percent_of_the_solution_is_visible(src):
    over = [f"{ex.name}: {ex.share:.0%} ({ex.visible} of {ex.trigrams} trigrams)"
            for ex in share.exercises(src) if ex.share > share.LIMIT]
    assert not over, (
        f"{src.name}: over {share.LIMIT:.0%} of the solution visible in the student notebook: {'; '.join(over)}. "
        "Move the how into the hints cell, or tag a later cell that shows a variant of the answer `spoiler`. "
        "`python tools/stub_share.py` shows every exercise.")


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
