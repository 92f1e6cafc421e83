#!/usr/bin/env python3
"""Numbers in a solution's prose, held to the recorded GPU run that produced them.

    python tools/prose_numbers.py       every marker of every solution: prose value, run value, verdict

The convention (CONTRIBUTING, "Numbers"): in a markdown cell, a number that a GPU run produces is
followed at once by an HTML comment, invisible when rendered,

    torch.softmax is **2.9×**<!-- run: /torch\\.softmax[^\\n]*?([\\d.]+)× slower/ ±10% --> slower

The regex is searched in the text outputs (printed text and text/plain results) of the same notebook's
recorded run, docs/gpu-results/notebooks/<gpu>/<name>.ipynb (labs/<name>.ipynb for a lab), cell by cell
in order; the first match wins and its group 1, commas removed, is the run value. `run:` means the H100's
run, `run h200:` the H200's. The prose value is the last number before the marker in the same cell, HTML
comments (this marker, earlier markers, hint addresses) left out; it may have thousands separators
(1,234), decimals, a sign, an exponent (7.4e-6). `±10%` is relative to the run value, `±0.05` absolute.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "docs" / "gpu-results" / "notebooks"
# The word after "run" in a marker, and the folder of that GPU's recorded runs.
GPUS = {"h100": "nvidia-h100-80gb-hbm3", "h200": "nvidia-h200"}

COMMENT = re.compile(r"<!--.*?-->", re.S)
MARKER = re.compile(r"<!--\s*run\b(?P<body>.*?)-->", re.S)
BODY = re.compile(r"^(?:\s+(?P<gpu>\w+))?\s*:\s*/(?P<regex>.+)/\s*±\s*(?P<tol>[0-9]*\.?[0-9]+)\s*(?P<pct>%?)\s*$", re.S)
# A number as prose writes it: 3, 0.35, 1,234, 1,395,833.5, -8, −8 (a typographic minus), 7.4e-6.
NUMBER = re.compile(r"(?<![\w.,])(?P<sign>[-−])?(?P<digits>[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?"
                    r"|\.[0-9]+)(?P<exp>[eE][-+−]?[0-9]+)?")
# The most characters that may stand between a number and its marker: a unit and emphasis, not words.
GAP = 12


@dataclass
class Finding:
    notebook: str        # the solution, relative to the repository where it lies inside it
    cell: int            # index of the markdown cell
    cell_id: str
    gpu: str             # "h100" or "h200"
    sentence: str        # the sentence around the number, comments left out
    marker: str
    prose: float | None = None
    run: float | None = None
    tolerance: str = ""
    run_notebook: str = ""
    problem: str = ""    # empty when the prose agrees with the run

    @property
    def ok(self) -> bool:
        return not self.problem

    def message(self) -> str:
        where = f"{self.notebook}, cell {self.cell} (id {self.cell_id})"
        if self.ok:
            return (f"{where}: prose {_show(self.prose)} agrees with the {self.gpu.upper()} run's "
                    f"{_show(self.run)} (±{self.tolerance}): \"{self.sentence}\"")
        return f"{where}, \"{self.sentence}\": {self.problem}"


def _show(value):
    return "none" if value is None else f"{value:,.6g}"


def parse_number(text: str) -> float:
    """'1,234.5' -> 1234.5; '−8' -> -8.0 (a typographic minus); raises ValueError if it is no number."""
    return float(text.strip().replace(",", "").replace("−", "-"))


def prose_value(before: str):
    """The last number in `before` (a cell's text up to a marker), HTML comments left out, and the text
    between that number and the marker; (None, text) when there is none."""
    text = COMMENT.sub(lambda m: " " * len(m.group()), before)  # same length: positions stay put
    last = None
    for last in NUMBER.finditer(text):
        pass
    if last is None:
        return None, text
    return parse_number(last.group()), text[last.end():]


def sentence_around(source: str, start: int, end: int) -> str:
    """The sentence of `source` around the marker at [start, end), HTML comments left out, on one line."""
    comments = [m.span() for m in COMMENT.finditer(source)]
    clean = COMMENT.sub("", source)
    at = start - sum(min(e, start) - s for s, e in comments if s < start)  # the marker's place in `clean`
    stop = re.compile(r"[.!?](?=\s)|\n\s*\n|\n\s*(?:[-*]|\d+\.)\s|<details>|</details>")
    begin = 0
    for m in stop.finditer(clean, 0, at):
        begin = m.end()
    after = stop.search(clean, at)
    finish = after.end() if after else len(clean)
    # a long sentence is shown from at most 200 characters before the marker to 100 after it
    text = clean[max(begin, at - 200):min(finish, at + 100)]
    text = ("..." if at - begin > 200 else "") + text + ("..." if finish - at > 100 else "")
    return re.sub(r"\s+", " ", text).strip()


def text_outputs(cell: dict) -> str:
    """What a code cell showed as text: its printed streams and its text/plain results."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(_joined(out.get("text", "")))
        elif "text/plain" in out.get("data", {}):
            parts.append("\n" + _joined(out["data"]["text/plain"]) + "\n")
    return "".join(parts)


def _joined(text):
    return "".join(text) if isinstance(text, list) else text


def recorded_run(notebook: Path, gpu_folder: str, runs: Path = RUNS) -> Path:
    """Where the recorded run of a solution lies: runs/<gpu>/<name>.ipynb, or runs/<gpu>/labs/<name>.ipynb."""
    lab = notebook.parent.name == "labs"
    return runs / gpu_folder / ("labs" if lab else "") / notebook.name


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def check_notebook(path, runs: Path = RUNS) -> list[Finding]:
    """Every run marker in the markdown of the solution at `path`, held to its recorded run.

    `runs` is the folder of recorded runs (one subfolder per GPU, as GPUS names them)."""
    path = Path(path)
    outputs = {}  # gpu -> [text of each code cell] of its recorded run, read once
    findings = []
    for index, cell in enumerate(_cells(path)):
        if cell.get("cell_type") != "markdown":
            continue
        source = _joined(cell.get("source", ""))
        for marker in MARKER.finditer(source):
            finding = Finding(notebook=_relative(path), cell=index, cell_id=cell.get("id", "?"), gpu="h100",
                              sentence=sentence_around(source, marker.start(), marker.end()),
                              marker=marker.group())
            findings.append(finding)
            body = BODY.match(marker.group("body"))
            if not body:
                finding.problem = (f"malformed marker {marker.group()!r}: write <!-- run: /REGEX/ ±10% --> "
                                   f"(or ±0.05 for an absolute tolerance; `run h200:` for the H200's run)")
                continue
            gpu = (body.group("gpu") or "h100").lower()
            finding.gpu = gpu
            finding.tolerance = body.group("tol") + body.group("pct")
            if gpu not in GPUS:
                finding.problem = f"malformed marker: unknown GPU {gpu!r} after 'run' (known: {', '.join(GPUS)})"
                continue
            try:
                regex = re.compile(body.group("regex"))
            except re.error as e:
                finding.problem = f"malformed marker: the regex /{body.group('regex')}/ does not compile ({e})"
                continue
            if regex.groups < 1:
                finding.problem = (f"malformed marker: the regex /{regex.pattern}/ has no group: put the number "
                                   f"it should read in parentheses, e.g. ([\\d.,]+)")
                continue
            finding.prose, gap = prose_value(source[:marker.start()])
            if finding.prose is None:
                finding.problem = "no number before the marker in this cell: the marker goes right after the number"
                continue
            if len(gap.strip()) > GAP:
                finding.problem = (f"the marker stands {len(gap.strip())} characters after the number "
                                   f"{_show(finding.prose)} ({gap.strip()!r}): put it right after the number")
                continue
            run_path = recorded_run(path, GPUS[gpu], runs)
            finding.run_notebook = _relative(run_path)
            if gpu not in outputs:
                outputs[gpu] = ([text_outputs(c) for c in _cells(run_path) if c.get("cell_type") == "code"]
                                if run_path.exists() else None)
            if outputs[gpu] is None:
                finding.problem = f"no recorded {gpu.upper()} run at {finding.run_notebook}"
                continue
            match = next((m for m in map(regex.search, outputs[gpu]) if m), None)
            if match is None:
                finding.problem = (f"the regex /{regex.pattern}/ matches nothing in the outputs of "
                                   f"{finding.run_notebook} (prose value {_show(finding.prose)})")
                continue
            try:
                finding.run = parse_number(match.group(1))
            except (TypeError, ValueError):
                finding.problem = (f"the regex's group 1 read {match.group(1)!r} from {finding.run_notebook}, "
                                   f"which is no number (the match: {match.group()!r})")
                continue
            limit = float(body.group("tol")) * (abs(finding.run) / 100 if body.group("pct") else 1)
            if abs(finding.prose - finding.run) > limit:
                finding.problem = (f"the prose says {_show(finding.prose)}, the {gpu.upper()} run "
                                   f"({finding.run_notebook}) printed {_show(finding.run)}: more than "
                                   f"±{finding.tolerance} apart")
    return findings


def solutions() -> list[Path]:
    return sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "solutions" / "labs").glob("*.ipynb"))


def main() -> int:
    findings = [(path, f) for path in solutions() for f in check_notebook(path)]
    rows = [("notebook", "cell", "gpu", "prose", "run", "±", "verdict")]
    rows += [(path.stem, str(f.cell), f.gpu, _show(f.prose), _show(f.run), f.tolerance, "ok" if f.ok else "FAIL")
             for path, f in findings]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    bad = [f for _, f in findings if not f.ok]
    for f in bad:
        print("\n" + f.message())
    print(f"\n{len(findings)} markers, {len(bad)} failing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
