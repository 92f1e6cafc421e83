#!/usr/bin/env python3
"""Write the student notebooks from the solution notebooks, the course's one source.

    python tools/generate.py           write notebooks/*.ipynb and labs/*.ipynb
    python tools/generate.py --check   exit 1 if a generated file is missing or out of date,
                                       or if a solution notebook was saved with outputs (CI runs this)
    python tools/generate.py --strip   clear outputs and execution counts from the solution notebooks
    python tools/generate.py --filled DIR
                                       write into DIR the student notebooks with every stub written
                                       (the solution's code): the student's path, which `./course test`
                                       runs with nbval (DIR/notebooks/*.ipynb, DIR/labs/*.ipynb)

Sources and targets:   solutions/NN_name.ipynb -> notebooks/NN_name.ipynb
                       solutions/labs/X.ipynb  -> labs/X.ipynb

Every notebook, solution and student version alike, opens with two cells the generator owns (cell ids
`colab-badge` and `colab-install`): an "Open in Colab" badge for that very notebook, and a cell that on
Colab, and only there, installs the course. Both pin the release tag v<project.version> of the GitHub
repository named in pyproject.toml ([project.urls] Repository). Generating inserts or refreshes them
in the solution notebooks too; --check fails where they are missing or stale.

The rules, in code cells of a solution notebook:
  * The solution sits between a line `### BEGIN SOLUTION` (or `### BEGIN SOLUTION: hint text`) and a
    line `### END SOLUTION`, both at the indentation of the code. The student gets a stub there:
        # YOUR CODE HERE
        raise NotImplementedError("hint text")
    or, inside a function decorated with @triton.jit (a raise does not compile for a GPU),
        pass  # YOUR CODE HERE: hint text
  * Tags: `check` (the cell calls a checker), `uses-exercise` (the cell uses the student's code),
    `solution-only` (the cell is dropped from the student version). The student version adds
    `raises-exception` to cells with a raise stub, to `check` and to `uses-exercise` cells, and `stub`
    to every cell the generator changed. A stub line may be at most CODE_WIDTH characters long.
  * Hints: a markdown cell tagged `hints` holds the tiered hints of one exercise (see HINTS_FORMAT).
    The student version has in its place a code cell, `cu.hints.offer("<exercise>")`, that shows a
    button per hint; the texts go to course_utils/exercise_hints.json, which --check keeps current.
  * `spoiler`, on a code cell after the first exercise, whose code gives that exercise's answer away (a
    variant of the kernel, for measuring): the student version folds its source (JupyterLab's
    source_hidden; Colab's form view, through a #@title line), to be opened once the check passes.
Outputs and execution counts are stripped and metadata is kept minimal, so the output is byte-stable.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest, in the test extra, brings tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
# (source folder, target folder), relative to the repository root
PAIRS = [("solutions", "notebooks"), ("solutions/labs", "labs")]

BEGIN = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION(?::[ \t]*(?P<hint>.*?))?[ \t]*$")
END = re.compile(r"^(?P<indent>[ \t]*)### END SOLUTION[ \t]*$")
DEFAULT_HINT = "write this part"
STUDENT_TAGS_ADDED = ("raises-exception", "stub")
CODE_WIDTH = 100   # characters: what a notebook shows of a code line without scrolling, on a laptop
HINTS_JSON = Path("course_utils") / "exercise_hints.json"   # under ROOT: where course_utils.hints reads them
HINTS_FORMAT = """\
### Hints: `exercise`            <- the checker's (or grader's) name: check.exercise / grade.exercise

#### 1 · the idea                <- one heading per hint, numbered from 1, in order
<!-- addresses: stub unwritten --> <- optional: the diagnosis keys of CheckFailed this hint helps with
A question or a pointer first ...

#### 2 · the structure
...
#### 3 · the recipe
... pseudo-code last"""
SPOILER_TITLE = "#@title Folded: this code gives the exercise's answer away. Open it once your check passes."
HINTS_TITLE = re.compile(r"^###[ \t]+Hints:[ \t]*`?(?P<exercise>\w+(?:\.\w+)?)`?[ \t]*$")
HINT_HEADING = re.compile(r"^####[ \t]+(?P<n>\d+)[ \t]*·[ \t]*(?P<title>\S.*?)[ \t]*$")
HINT_ADDRESSES = re.compile(r"^<!--[ \t]*addresses:(?P<keys>[^>]*)-->[ \t]*$")


class SourceError(ValueError):
    """A solution notebook breaks the authoring rules; the message says where."""


@dataclass
class Region:
    begin: int          # line index of `### BEGIN SOLUTION`
    end: int            # line index of `### END SOLUTION`
    indent: str
    hint: str
    in_jit: bool        # inside a @triton.jit function: the stub is `pass`
    in_function: bool   # inside any def: the cell defining it does not itself raise


# --- parsing a cell ------------------------------------------------------------------------------
def mask_magics(lines: list[str]) -> str:
    """The cell as Python's ast can parse: IPython lines (%magic, !shell) become comments, keeping
    every line number."""
    return "\n".join("#" + line if line.lstrip()[:1] in ("%", "!") else line for line in lines)


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return re.search(r"(^|\.)jit$", ast.unparse(target)) is not None


def _enclosing_functions(tree: ast.AST, lineno: int) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Function definitions whose body holds 1-based line `lineno`."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.lineno < lineno <= node.end_lineno]


def _first_code_line(lines: list[str], r: Region) -> int:
    """0-based index of the region's first line of code (the BEGIN line if it holds none)."""
    for i in range(r.begin + 1, r.end):
        s = lines[i].strip()
        if s and not s.startswith("#"):
            return i
    return r.begin


def find_regions(source: str, where: str = "cell") -> list[Region]:
    """The solution regions of one code cell, checked for balance and indentation."""
    lines = source.split("\n")
    regions, open_at = [], None
    for i, line in enumerate(lines):
        b, e = BEGIN.match(line), END.match(line)
        if b:
            if open_at is not None:
                raise SourceError(f"{where}, line {i + 1}: BEGIN SOLUTION inside another (opened line {open_at[0] + 1})")
            open_at = (i, b["indent"], (b["hint"] or "").strip() or DEFAULT_HINT)
        elif e:
            if open_at is None:
                raise SourceError(f"{where}, line {i + 1}: END SOLUTION without BEGIN SOLUTION")
            if e["indent"] != open_at[1]:
                raise SourceError(f"{where}, line {i + 1}: END SOLUTION is not at the indentation of its BEGIN "
                                  f"(line {open_at[0] + 1})")
            regions.append(Region(open_at[0], i, open_at[1], open_at[2], False, False))
            open_at = None
        elif "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
            raise SourceError(f"{where}, line {i + 1}: a solution marker must be alone on its line: {line.strip()!r}")
    if open_at is not None:
        raise SourceError(f"{where}, line {open_at[0] + 1}: BEGIN SOLUTION is never closed")
    if not regions:
        return regions
    try:
        tree = ast.parse(mask_magics(lines))
    except SyntaxError as err:
        raise SourceError(f"{where}: the solution does not parse ({err.msg}, line {err.lineno})") from None
    for r in regions:
        funcs = _enclosing_functions(tree, _first_code_line(lines, r) + 1)
        r.in_function = bool(funcs)
        r.in_jit = any(_is_jit(d) for f in funcs for d in f.decorator_list)
    return regions


def stub_lines(r: Region) -> list[str]:
    if r.in_jit:
        return [f"{r.indent}pass  # YOUR CODE HERE: {r.hint}"]
    return [f"{r.indent}# YOUR CODE HERE",
            f"{r.indent}raise NotImplementedError({json.dumps(r.hint, ensure_ascii=False)})"]


def stub_source(source: str, where: str = "cell",
                width: int | None = CODE_WIDTH) -> tuple[str, list[Region]]:
    """The student's version of one code cell's source, and the regions replaced. width=None: no limit on a
    stub line (for a notebook executed before the limit existed; the sources must keep it)."""
    regions = find_regions(source, where)
    if not regions:
        return source, regions
    for r in regions:
        for line in stub_lines(r):
            if width is not None and len(line) > width:
                raise SourceError(f"{where}, line {r.begin + 1}: the stub line is {len(line)} characters, over "
                                  f"{width}: shorten the hint after `### BEGIN SOLUTION:` (a stub states the "
                                  "contract; the help goes in the hints cell)")
    lines, out, pos = source.split("\n"), [], 0
    for r in regions:
        out += lines[pos:r.begin] + stub_lines(r)
        pos = r.end + 1
    out += lines[pos:]
    new = "\n".join(out)
    try:
        ast.parse(mask_magics(out))
    except SyntaxError as err:
        raise SourceError(f"{where}: the stubbed code does not parse ({err.msg}, line {err.lineno}); "
                          "put the markers around whole statements") from None
    return new, regions


# --- hints ---------------------------------------------------------------------------------------
def parse_hints(source: str, where: str = "hints cell") -> tuple[str, list[dict]]:
    """(exercise, [{title, text, addresses}]) from a markdown cell tagged `hints` (HINTS_FORMAT)."""
    lines = source.strip("\n").split("\n")
    m = HINTS_TITLE.match(lines[0]) if lines else None
    if not m:
        raise SourceError(f"{where}: a hints cell starts with a line `### Hints: `exercise``; the format is\n"
                          + HINTS_FORMAT)
    hints, current = [], None
    for i, line in enumerate(lines[1:], start=2):
        h = HINT_HEADING.match(line)
        if h:
            if int(h["n"]) != len(hints) + 1:
                raise SourceError(f"{where}, line {i}: hint {h['n']} where hint {len(hints) + 1} comes next")
            current = {"title": h["title"], "text": [], "addresses": []}
            hints.append(current)
        elif current is None:
            if line.strip():
                raise SourceError(f"{where}, line {i}: text before the first `#### 1 · title` heading")
        elif HINT_ADDRESSES.match(line):
            current["addresses"] += HINT_ADDRESSES.match(line)["keys"].split()
        else:
            current["text"].append(line)
    if not hints:
        raise SourceError(f"{where}: no hint in it; the format is\n" + HINTS_FORMAT)
    for h in hints:
        h["text"] = "\n".join(h["text"]).strip("\n")
        if not h["text"]:
            raise SourceError(f"{where}: hint {h['title']!r} has no text")
    return m["exercise"], hints


def hints_of(nb, name: str = "notebook") -> dict[str, dict]:
    """{exercise: {"notebook": name, "hints": [...]}} for every hints cell of solution notebook `nb`."""
    found = {}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and "hints" in _tags(cell):
            exercise, hints = parse_hints(cell.source, f"{name}, cell {i} (id {cell.get('id')})")
            if exercise in found:
                raise SourceError(f"{name}: two hints cells for {exercise}")
            found[exercise] = {"notebook": name, "hints": hints}
        elif cell.cell_type == "code" and "hints" in _tags(cell):
            raise SourceError(f"{name}, cell {i}: the tag `hints` belongs on a markdown cell")
    return found


def hints_cell(exercise: str):
    reach = "ideas, not a recipe" if "." in exercise else "from the idea to the recipe"  # labs: labN.x
    return nbformat.v4.new_code_cell(f'cu.hints.offer("{exercise}")  # stuck? a button per hint, {reach}')


def hints_json(all_hints: dict) -> str:
    return json.dumps(dict(sorted(all_hints.items())), indent=1, ensure_ascii=False, sort_keys=True) + "\n"


# --- notebooks ----------------------------------------------------------------------------------
def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _cell_id(cell, name: str, index: int) -> str:
    cid = cell.get("id")
    if isinstance(cid, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", cid):
        return cid
    return hashlib.sha1(f"{name}:{index}".encode()).hexdigest()[:8]


def student_notebook(nb, name: str = "notebook", filled: bool = False, width: int | None = CODE_WIDTH):
    """A new notebook: the student version of solution notebook `nb` (not modified). width: see stub_source.

    filled=True: the student's notebook as it is once every stub is written, with the solution's code in
    each stub (for the tests of the student's path: every cell after the stubs must then run)."""
    cells, seen_exercise = [], False
    for i, cell in enumerate(nb.cells):
        tags = _tags(cell)
        if cell.cell_type == "code" and find_regions(cell.source if isinstance(cell.source, str) else "".join(cell.source)):
            seen_exercise = True
        if "spoiler" in tags and (cell.cell_type != "code" or not seen_exercise):
            raise SourceError(f"{name}, cell {i}: `spoiler` folds a code cell that comes after an exercise; "
                              "this one is " + ("not code" if cell.cell_type != "code" else "before every exercise"))
        if "solution-only" in tags:
            continue
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        cid = _cell_id(cell, name, i)
        if cell.cell_type == "markdown" and "hints" in tags:
            new = hints_cell(parse_hints(source, f"{name}, cell {i} (id {cid})")[0])
        elif cell.cell_type == "code" and filled:
            find_regions(source, f"{name}, cell {i} (id {cid})")  # the same authoring rules
            new = nbformat.v4.new_code_cell("\n".join(ln for ln in source.split("\n")
                                                      if not (BEGIN.match(ln) or END.match(ln))))
        elif cell.cell_type == "code":
            new_source, regions = stub_source(source, f"{name}, cell {i} (id {cid})", width)
            add = []
            if any(not r.in_jit for r in regions) or "check" in tags or "uses-exercise" in tags:
                add.append("raises-exception")
            if new_source != source:
                add.append("stub")
            tags += [t for t in add if t not in tags]
            new = nbformat.v4.new_code_cell(new_source)
        elif cell.cell_type == "markdown":
            if any(BEGIN.match(line) or END.match(line) for line in source.split("\n")):
                raise SourceError(f"{name}, cell {i} (id {cid}): solution markers in a markdown cell; "
                                  "tag the cell `solution-only` instead")
            new = nbformat.v4.new_markdown_cell(source)
            if cell.get("attachments"):
                new.attachments = cell.attachments
        else:
            new = nbformat.v4.new_raw_cell(source)
        new.id = cid
        if tags:
            new.metadata["tags"] = tags
        if "spoiler" in tags:
            new.source = SPOILER_TITLE + "\n" + new.source
            new.metadata.update(json.loads(json.dumps(COLAB_INSTALL_METADATA)))
        cells.append(new)
    out = nbformat.v4.new_notebook(cells=cells)
    out.metadata = minimal_metadata(nb)
    return out


def minimal_metadata(nb) -> dict:
    ks = nb.metadata.get("kernelspec", {})
    return {"kernelspec": {"display_name": ks.get("display_name", "Python 3"), "language": "python",
                           "name": ks.get("name", "python3")},
            "language_info": {"name": "python"}}


def to_text(nb) -> str:
    nbformat.validate(nb)
    text = nbformat.writes(nb, version=4)  # indent=1, sorted keys
    return text if text.endswith("\n") else text + "\n"


def targets() -> list[tuple[Path, Path]]:
    """(solution, student) paths for every solution notebook."""
    pairs = []
    for src_dir, dst_dir in PAIRS:
        for src in sorted((ROOT / src_dir).glob("*.ipynb")):
            pairs.append((src, ROOT / dst_dir / src.name))
    return pairs


def has_outputs(nb) -> bool:
    return any(c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)
               for c in nb.cells)


def strip(nb) -> bool:
    """Clear outputs, execution counts and run-time metadata in place; True if anything changed."""
    changed = False
    for c in nb.cells:
        if c.cell_type == "code":
            if c.get("outputs") or c.get("execution_count") is not None:
                c.outputs, c.execution_count, changed = [], None, True
            for key in ("execution", "collapsed", "scrolled", "ExecuteTime"):
                if key in c.metadata:
                    del c.metadata[key]
                    changed = True
    if "widgets" in nb.metadata:
        del nb.metadata["widgets"]
        changed = True
    return changed


# --- Colab: the two cells every notebook opens with ------------------------------------------------
COLAB_IDS = ("colab-badge", "colab-install")
COLAB_BADGE = """\
[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/{repo}/blob/{ref}/{path})
On Colab only: pick a GPU (Runtime > Change runtime type > T4 GPU), then run the folded cell below, which
installs the course at release {ref}. Anywhere else it does nothing."""
COLAB_INSTALL = """\
#@title Colab only: install the course (anywhere else this cell does nothing)
import sys

if "google.colab" in sys.modules:
    import importlib.metadata
    import subprocess

    # --no-deps keeps Colab's own torch (built for its GPU), triton and ipywidgets 7 (which its widget manager expects):
    # Colab already has every package the lessons import, so pip would only upgrade or add.
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "feed-the-beast @ git+https://github.com/{repo}@{ref}"],
                         capture_output=True, text=True)
    if pip.returncode:
        raise RuntimeError("installing the course failed:\\n" + pip.stderr)
    importlib.invalidate_caches()  # so that the next cell's `import course_utils` finds it
    if int(importlib.metadata.version("ipywidgets").split(".")[0]) >= 8:
        from google.colab import output  # ipywidgets 8 needs Colab's custom widget manager
        output.enable_custom_widget_manager()"""
# Folded where it is shown: JupyterLab hides the source, Colab shows the #@title line as a form.
COLAB_INSTALL_METADATA = {"jupyter": {"source_hidden": True}, "cellView": "form"}


@dataclass(frozen=True)
class Release:
    repo: str  # owner/name on GitHub
    ref: str   # the tag every notebook pins: v<project.version>, never a moving branch


def release() -> Release:
    """The repository and tag the Colab cells point to, from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    url = project.get("urls", {}).get("Repository", "")
    m = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?", url)
    if not m:
        raise SourceError(f"pyproject.toml: [project.urls] Repository must be a GitHub repository, not {url!r}")
    return Release(m[1], f"v{project['version']}")


def colab_cells(pin: Release, path: str) -> list:
    """The badge and install cells of the notebook at `path` (relative to the repository root)."""
    badge = nbformat.v4.new_markdown_cell(COLAB_BADGE.format(repo=pin.repo, ref=pin.ref, path=path))
    install = nbformat.v4.new_code_cell(COLAB_INSTALL.format(repo=pin.repo, ref=pin.ref),
                                        metadata=json.loads(json.dumps(COLAB_INSTALL_METADATA)))
    badge.id, install.id = COLAB_IDS
    return [badge, install]


def with_colab_cells(nb, pin: Release, path: str):
    """`nb`, changed in place: its Colab cells first and current, any older copies dropped."""
    nb.cells = colab_cells(pin, path) + [c for c in nb.cells if c.get("id") not in COLAB_IDS]
    return nb


# --- the cell every notebook ends with: keep the student's log ----------------------------------------
KEEP_ID = "keep-log"
KEEP_LOG = """\
# Your log of guesses and hints (one file for every lesson and lab): where it is kept. On Colab without
# your Drive mounted, this downloads it: Colab loses the runtime's files when the runtime stops.
from course_utils import journal
journal.keep()"""


def with_keep_cell(nb):
    """`nb`, changed in place: the cell that keeps the student's log last, any older copy dropped."""
    keep = nbformat.v4.new_code_cell(KEEP_LOG)
    keep.id = KEEP_ID
    nb.cells = [c for c in nb.cells if c.get("id") != KEEP_ID] + [keep]
    return nb


def render(src: Path, dst: Path, pin: Release) -> tuple[str, str, dict]:
    """The text of the solution notebook `src` with current Colab cells and its last cell, of its student
    version, and the notebook's hints."""
    name = src.relative_to(ROOT).as_posix()
    solution = with_keep_cell(with_colab_cells(nbformat.read(src, as_version=4), pin, name))
    student = with_colab_cells(student_notebook(solution, name), pin, dst.relative_to(ROOT).as_posix())
    with_keep_cell(student)
    return to_text(solution), to_text(student), hints_of(solution, name)


def filled_student_notebook(src: Path):
    """The student version of solution notebook `src` with every stub written (the solution's code)."""
    name = src.relative_to(ROOT).as_posix()
    return student_notebook(nbformat.read(src, as_version=4), name, filled=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="report what is out of date; write nothing")
    mode.add_argument("--strip", action="store_true", help="clear outputs from the solution notebooks")
    mode.add_argument("--filled", metavar="DIR", type=Path,
                      help="write the student notebooks with every stub written into DIR")
    args = ap.parse_args(argv)
    rel = lambda p: p.relative_to(ROOT).as_posix()  # noqa: E731

    if args.filled:
        out = args.filled.resolve()
        try:
            for src, dst in targets():
                path = out / dst.relative_to(ROOT)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(to_text(filled_student_notebook(src)), encoding="utf-8")
        except SourceError as err:
            print(err, file=sys.stderr)
            return 1
        return 0

    if args.strip:
        for src, _ in targets():
            nb = nbformat.read(src, as_version=4)
            if strip(nb):
                src.write_text(to_text(nb), encoding="utf-8")
                print(f"stripped {rel(src)}")
        return 0

    try:
        pin = release()
    except SourceError as err:
        print(err, file=sys.stderr)
        return 1
    problems, expected, all_hints, failed = [], set(), {}, set()
    for src, dst in targets():
        expected.add(dst)
        try:
            solution, text, hints = render(src, dst, pin)
        except SourceError as err:
            problems.append(f"{rel(src)}: {err}")
            failed.add(rel(src))
            continue
        for exercise in hints:
            if exercise in all_hints:
                problems.append(f"{rel(src)}: hints for {exercise} are also in {all_hints[exercise]['notebook']}")
        all_hints.update(hints)
        if args.check:
            if has_outputs(nbformat.read(src, as_version=4)):
                problems.append(f"{rel(src)} was saved with outputs: run `python tools/generate.py --strip`")
            if src.read_text(encoding="utf-8") != solution:
                problems.append(f"{rel(src)}: its Colab cells are missing or out of date (release {pin.ref})")
            if not dst.exists():
                problems.append(f"{rel(dst)} is missing")
            elif dst.read_text(encoding="utf-8") != text:
                problems.append(f"{rel(dst)} is out of date")
            continue
        # The solution is read and written back at once: others may be editing its other cells.
        if src.read_text(encoding="utf-8") != solution:
            src.write_text(solution, encoding="utf-8")
            print(f"wrote the Colab cells of {rel(src)}")
        if not dst.exists() or dst.read_text(encoding="utf-8") != text:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(text, encoding="utf-8")
            print(f"wrote {rel(dst)}")
    if failed:  # a notebook that did not render keeps the hints it had in the file
        try:
            old = json.loads((ROOT / HINTS_JSON).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = {}
        all_hints.update({ex: h for ex, h in old.items() if h.get("notebook") in failed and ex not in all_hints})
    hints_text, hints_path = hints_json(all_hints), ROOT / HINTS_JSON
    if not hints_path.exists() or hints_path.read_text(encoding="utf-8") != hints_text:
        if args.check:
            problems.append(f"{rel(hints_path)} is out of date")
        else:
            hints_path.parent.mkdir(parents=True, exist_ok=True)
            hints_path.write_text(hints_text, encoding="utf-8")
            print(f"wrote {rel(hints_path)}")
    for _, dst_dir in PAIRS:
        for orphan in sorted(set((ROOT / dst_dir).glob("*.ipynb")) - expected):
            problems.append(f"{rel(orphan)} has no solution notebook: delete it, or add the source under solutions/")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        if args.check and any("out of date" in p or "missing" in p for p in problems):
            print("Regenerate with: python tools/generate.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
