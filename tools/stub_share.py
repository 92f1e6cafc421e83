#!/usr/bin/env python3
"""How much of each exercise's solution a student can read without asking for a hint.

    python tools/stub_share.py          a table: per exercise, the share of its solution's token
                                        trigrams visible in the student notebook, its ceiling, and its hints

The solution of an exercise is the code between its ### BEGIN/END SOLUTION markers (comments left
out), cut into token trigrams ("tl . load", "offsets < n", ...); trigrams that its signature (the
`def` lines of that cell) already shows do not count. Visible is the whole student notebook, from its
first cell to its last: markdown and code, leaving out the stub cells themselves (the contract), the
hints cells, collapsed <details> blocks and folded `spoiler` cells, which a student opens on purpose.
A worked example earlier in the notebook counts as much as a recipe next to the stub.

CONTRIBUTING's rule, kept by tests/test_stub_share.py: at most CEILING of each exercise's trigrams
visible, or the ceiling CEILINGS names for that exercise, with its reason.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
# The default ceiling: the stub states the contract, the hints hold the how. What still shows is the
# idiom every Triton kernel of the course shares (a masked load, a store, a program id).
CEILING = 0.20
# The exercises allowed more, each with its reason (CONTRIBUTING, "Exercises", says why these may).
CEILINGS = {
    "cos_chain": (0.60, "Part I: lesson 01 works its example in full before the student's turn"),
    "tiny_chain": (0.60, "Part I: lesson 02 works its example in full before the student's turn"),
    "vector_add": (0.55, "Part I: lesson 03 reads a first kernel line by line before the student writes one"),
    "scaled_add": (0.55, "Part I: lesson 03's second exercise is the first one's kernel with a scale"),
    "online_softmax": (0.32, "lesson 08 gives the recurrence, one value at a time in its Hook and as a merge of "
                             "blocks in PyTorch, and shows tl.max beside tl.maximum on one block before the "
                             "exercise; the Triton walks (three-pass, two-pass, lesson 06's) are folded after it"),
    "rmsnorm_fwd_kernel": (0.40, "lab 2 gives the backward's second launch (sum_rows_kernel), whose masked "
                                 "2-D loads and stores are the idiom of the forward's too"),
    "rmsnorm_bwd_kernel": (0.40, "lab 2 gives the backward's second launch (sum_rows_kernel), the same idiom"),
    "bwd_dq_kernel": (0.65, "lab 4 is the backward: it gives lesson 09's forward kernel, which the student "
                            "wrote there, and the Δ kernel, so that the lab is the backward alone"),
}
_spec = importlib.util.spec_from_file_location("course_generate", ROOT / "tools" / "generate.py")
gen = sys.modules.setdefault("course_generate", importlib.util.module_from_spec(_spec))
if not hasattr(gen, "student_notebook"):
    _spec.loader.exec_module(gen)

TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?(?:e[+-]?\d+)?|==|!=|<=|>=|\*\*|//|<<|>>|[^\w\s]")
DETAILS = re.compile(r"<details>.*?</details>", re.S)


def trigrams(text: str) -> set[tuple[str, str, str]]:
    t = TOKEN.findall(text)
    return {tuple(t[i:i + 3]) for i in range(len(t) - 2)}


def _code_only(lines: list[str]) -> str:
    return "\n".join(re.sub(r"(^|\s)#.*$", "", ln) for ln in lines)


@dataclass
class Exercise:
    notebook: str
    name: str            # the last function the stub cell defines
    trigrams: int        # of its solution, the signature's left out
    visible: int         # of those, visible without a hint
    hints: int

    @property
    def share(self) -> float:
        return self.visible / self.trigrams if self.trigrams else 0.0

    @property
    def ceiling(self) -> float:
        return CEILINGS.get(self.name, (CEILING, ""))[0]

    @property
    def reason(self) -> str:
        return CEILINGS.get(self.name, (CEILING, "the contract in the stub, the how in the hints"))[1]


def _defs(source: str) -> list[str]:
    return re.findall(r"^\s*def (\w+)", source, re.M)


def exercises(solution: Path, hints: dict | None = None) -> list[Exercise]:
    """One Exercise per code cell of `solution` with solution regions."""
    name = solution.relative_to(ROOT).as_posix()
    nb = nbformat.read(solution, as_version=4)
    student = gen.student_notebook(nb, name)
    if hints is None:
        hints = gen.hints_of(nb, name)
    visible = set()        # the whole student notebook, but for what a student opens on purpose
    for c in student.cells:
        tags = c.metadata.get("tags", [])
        if c.metadata.get("jupyter", {}).get("source_hidden") or "stub" in tags or "hints" in tags:
            continue   # a folded spoiler, the stub (the contract), the hints' buttons
        visible |= trigrams(DETAILS.sub(" ", c.source))
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code" or "solution-only" in cell.metadata.get("tags", []):
            continue
        regions = gen.find_regions(cell.source)
        if not regions:
            continue
        lines = cell.source.split("\n")
        solved = set()
        for r in regions:
            solved |= trigrams(_code_only(lines[r.begin + 1:r.end]))
        signature = set()
        for ln in lines:
            if re.match(r"\s*def ", ln):
                signature |= trigrams(ln)
        solved -= signature
        checks = re.findall(r"\b(?:check|grade)\.(\w+)\(", "\n".join(c.source for c in nb.cells if c.cell_type == "code"))
        ex_name = next((d for d in reversed(_defs(cell.source)) if d in checks), (_defs(cell.source) or ["?"])[-1])
        n_hints = len(hints.get(ex_name, {}).get("hints", [])) if ex_name in hints else \
            sum(len(h["hints"]) for h in hints.values()) if len(hints) == 1 else 0
        out.append(Exercise(name, ex_name, len(solved), len(solved & visible), n_hints))
    return out


def all_exercises() -> list[Exercise]:
    return [e for src, _ in gen.targets() for e in exercises(src)]


def main() -> int:
    print(f"{'notebook':45s} {'exercise':22s} {'trigrams':>8s} {'visible':>8s} {'ceiling':>8s} {'hints':>5s}")
    over = 0
    for src, _ in gen.targets():
        try:
            rows = exercises(src)
        except gen.SourceError as e:  # one notebook breaking a rule does not hide the others' numbers
            print(f"{src.relative_to(ROOT).as_posix():45s} cannot be measured: {e}")
            over += 1
            continue
        for e in rows:
            flag = "" if e.share <= e.ceiling else "  OVER"
            over += bool(flag)
            print(f"{e.notebook:45s} {e.name:22s} {e.trigrams:8d} {e.share:8.0%} {e.ceiling:8.0%} {e.hints:5d}{flag}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
