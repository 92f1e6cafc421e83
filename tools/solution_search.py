"""Where a solution's code could show: the lines of the solution notebooks that no student notebook
shows, and a search for them in every file of a folder. What leaves the instructor's repository is
searched with it: the browsable edition (tests/test_site.py) and the student edition
(tools/student_edition.py, which searches what it writes before committing it; `--check DEST` searches a
copy again).

A line is compared whole, whitespace collapsed: a line of code shown as code (in a notebook's cell, a
page's highlighted block, a module, a traceback once its prompt is gone) is found; an inline mention in
prose is not (the student notebooks show those too; tools/stub_share.py measures them).
"""
from __future__ import annotations

import html
import json
import re
import sys
from collections.abc import Iterable
from html.parser import HTMLParser
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import generate as gen  # noqa: E402  (tools/generate.py: the solution regions, the student version)

# a traceback's arrow or line number, a prompt: what stands before a line of code quoted in an output
PROMPT = re.compile(r"^(?:(?:-*>|\d+|In \[\d*\]:|>>>|\.\.\.)\s+)+")


def norm(text: str) -> str:
    return " ".join(text.split())


# --- what may not show ------------------------------------------------------------------------------
def solution_lines(nb, spoilers: bool = True) -> set[str]:
    """Lines of a solution notebook a student does not see unfolded: the solution regions, and the whole of
    `solution-only` and `spoiler` code cells. spoilers=False: not the spoilers, which a student notebook
    holds folded (a variant of a kernel, measured after its exercise)."""
    hidden, kept_out = set(), {"solution-only", "spoiler"} if spoilers else {"solution-only"}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines = cell.source.split("\n")
        if kept_out & set(cell.metadata.get("tags", [])):
            hidden |= {norm(ln) for ln in lines}
        for r in gen.find_regions(cell.source):
            hidden |= {norm(ln) for ln in lines[r.begin + 1:r.end]}
    return hidden


def student_lines(nb, name: str) -> set[str]:
    """Every line a student sees unfolded in the student version of solution notebook `nb`."""
    return {norm(ln) for cell in gen.student_notebook(nb, name).cells
            if "spoiler" not in cell.metadata.get("tags", []) for ln in cell.source.split("\n")}


def solution_notebooks() -> list[tuple[str, nbformat.NotebookNode]]:
    """(name, notebook) for every solution notebook of this checkout, lessons and labs."""
    return [(src.relative_to(gen.ROOT).as_posix(), nbformat.read(src, as_version=4)) for src, _ in gen.targets()]


def secret_lines(notebooks: Iterable[tuple[str, nbformat.NotebookNode]], *, min_chars: int = 1,
                 comments: bool = False, spoilers: bool = True) -> frozenset[str]:
    """The lines of these solution notebooks that no student version of them shows. A line some student
    notebook shows (an import, a line of lesson 03's kernel that lesson 04 reuses) is no secret.
    min_chars: shorter lines are left out (`return out` is everywhere). comments: keep a comment line
    that no stub shows (it may say how the solution works); left out, a `#` line is never a secret."""
    hidden, visible = set(), set()
    for name, nb in notebooks:
        hidden |= solution_lines(nb, spoilers)
        visible |= student_lines(nb, name)
    return frozenset(ln for ln in hidden - visible
                     if len(ln) >= min_chars and (comments or not ln.startswith("#")))


# --- the search ---------------------------------------------------------------------------------------
class _Text(HTMLParser):
    """The text of an HTML file, script and style included, with its line breaks."""
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts = []

    def handle_data(self, data):
        self.parts.append(data)


def _notebook_text(raw: str, spoilers: bool = True) -> str | None:
    """A notebook's cells and text outputs, line by line, as Jupyter shows them (the JSON holds each line
    quoted); None when `raw` is not a notebook. spoilers=False: without its `spoiler` cells."""
    try:
        cells = json.loads(raw)["cells"]
    except (ValueError, KeyError, TypeError):
        return None
    join = lambda v: "".join(v) if isinstance(v, list) else str(v)  # noqa: E731
    parts = []
    for cell in cells:
        if not spoilers and "spoiler" in cell.get("metadata", {}).get("tags", []):
            continue
        parts.append(join(cell.get("source", "")))
        for out in cell.get("outputs", []):
            parts.append(join(out.get("text", "")))
            parts.append("\n".join(out.get("traceback", [])))
            parts += [join(v) for kind, v in out.get("data", {}).items() if kind.startswith("text/")]
    return "\n".join(parts)


def file_lines(path: Path, spoilers: bool = True) -> list[str]:
    """A file's text as lines, whitespace collapsed: an HTML page's without its tags (the highlighter splits a
    line of code into many spans); a notebook's cells and outputs (spoilers=False: not its `spoiler` cells);
    other text files as they are; binaries: none."""
    try:
        raw = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, ValueError):
        return []
    if path.suffix == ".html":
        parser = _Text()
        parser.feed(raw)
        raw = "".join(parser.parts)
    elif path.suffix == ".ipynb":
        text = _notebook_text(raw, spoilers)
        raw = raw if text is None else text
    return [norm(html.unescape(ln)) for ln in raw.split("\n")]


def leaks(folder: Path, secrets: frozenset[str], spoilers: bool = True) -> dict[str, list[str]]:
    """{file: [secret lines found in it]}: a line of the file that is, whitespace aside, a secret line.
    A line of code shown as code (a cell, a traceback's source line once its prompt is gone) is a line of
    its own; an inline mention in prose or in a stub's contract is not counted: the student notebooks
    show those too, and tools/stub_share.py measures them. spoilers=False: a notebook's `spoiler` cells,
    which the student notebooks hold folded, are not searched. A `.git` folder is not searched."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and ".git" not in path.relative_to(folder).parts:
            lines = file_lines(path, spoilers)
            hits = sorted(secrets & ({PROMPT.sub("", ln) for ln in lines} | set(lines)))
            if hits:
                found[path.relative_to(folder).as_posix()] = hits
    return found
