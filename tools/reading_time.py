#!/usr/bin/env python3
"""How long a student spends reading each lesson and lab, and how much code each exercise asks for.

    python3 tools/reading_time.py          a table: per student notebook, its words, the reading time,
                                           and the lines of solution code its exercises hold
    python3 tools/reading_time.py --write  the table of minutes and solution lines into docs/instructor.md
                                           (between its markers)
    python3 tools/reading_time.py --check  exit 1 if docs/instructor.md holds another table

Reading time is the words of the student notebook's markdown cells (notebooks/, labs/: what a student
opens) at WORDS_PER_MINUTE. A word is a run of non-space characters once HTML comments, HTML tags and
markdown's table rules are taken out; `<details>` answers count, as a student reads them after trying.
Code cells, their outputs and the hints (buttons in the student version) are not in it.

WORDS_PER_MINUTE is half of the 238 words a minute that Brysbaert (2019, "How many words do we read per
minute?", Journal of Memory and Language 109) found for adults reading non-fiction silently: this text
is dense with figures, formulas and code, and asks to be read with the notebook running beside it.

Solution lines are the non-blank, non-comment lines between `### BEGIN SOLUTION` and `### END SOLUTION`
in solutions/ (the code a student writes), a measure of an exercise's size, not of its difficulty.
docs/instructor.md quotes the minutes and the solution lines (not the words, which every edit moves);
tests/test_instructor_guide.py holds that table to this script.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "instructor.md"
BEGIN = "<!-- reading-time: written by tools/reading_time.py --write; edit the tool, not this table -->"
END = "<!-- end reading-time -->"
WORDS_PER_MINUTE = 119          # half of Brysbaert's 238 for non-fiction
COMMENT = re.compile(r"<!--.*?-->", re.S)
TAG = re.compile(r"</?[A-Za-z][^>]*>")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}.*$", re.M)
SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION.*?$(.*?)^[ \t]*### END SOLUTION", re.S | re.M)


@dataclass(frozen=True)
class Reading:
    name: str            # the notebook's file name without .ipynb
    words: int
    solution_lines: int

    @property
    def minutes(self) -> int:
        return max(1, round(self.words / WORDS_PER_MINUTE))


def words(markdown: str) -> int:
    text = TABLE_RULE.sub(" ", TAG.sub(" ", COMMENT.sub(" ", markdown)))
    return sum(1 for w in text.split() if any(ch.isalnum() for ch in w))


def solution_lines(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    n = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for body in SOLUTION.findall(cell.source):
            n += sum(1 for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#"))
    return n


def reading(student: Path) -> Reading:
    nb = nbformat.read(student, as_version=4)
    count = sum(words(c.source) for c in nb.cells if c.cell_type == "markdown")
    solution = ROOT / "solutions" / ("labs" if student.parent.name == "labs" else "") / student.name
    return Reading(student.stem, count, solution_lines(solution))


def notebooks(root: Path = ROOT) -> list[Path]:
    return sorted((root / "notebooks").glob("*.ipynb")) + sorted((root / "labs").glob("*.ipynb"))


def table() -> list[Reading]:
    return [reading(p) for p in notebooks()]


def markdown(rows: list[Reading]) -> str:
    lines = [BEGIN, f"| notebook | reading at {WORDS_PER_MINUTE} words a minute | lines of solution code |",
             "|---|---|---|"]
    lines += [f"| {r.name} | {r.minutes} min | {r.solution_lines} |" for r in rows]
    return "\n".join(lines + [END])


def write(text: str, path: Path = GUIDE) -> bool:
    """Put the table between the markers in path; True if that changed the file."""
    old = path.read_text(encoding="utf-8")
    if BEGIN not in old or END not in old:
        sys.exit(f"reading_time: {path} has no markers for the table ({BEGIN} ... {END})")
    new = old[:old.index(BEGIN)] + text + old[old.index(END) + len(END):]
    if new != old:
        path.write_text(new, encoding="utf-8")
    return new != old


def main(argv: list[str] | None = None) -> int:
    argv = list(argv or [])
    if argv not in ([], ["--write"], ["--check"]):
        sys.exit(f"reading_time: unknown arguments {argv}: it takes none, --write or --check (see its docstring)")
    rows = table()
    if argv == ["--write"]:
        print(f"reading_time: {'wrote' if write(markdown(rows)) else 'unchanged:'} {GUIDE.relative_to(ROOT)}")
        return 0
    if argv == ["--check"]:
        if markdown(rows) not in GUIDE.read_text(encoding="utf-8"):
            print(f"reading_time: {GUIDE.relative_to(ROOT)}'s reading-time table is out of date: "
                  "run python3 tools/reading_time.py --write", file=sys.stderr)
            return 1
        return 0
    print(f"notebook                          words  reading at {WORDS_PER_MINUTE} words/min  solution lines")
    for r in rows:
        print(f"{r.name:<32} {r.words:>6}  {r.minutes:>8} min               {r.solution_lines:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
