"""docs/instructor.md, the guide an instructor reads before a term, holds to the recorded runs it quotes.

Its one table of runs is the only place that dates anything; the runs it calls current are the ones the
reports in docs/gpu-results/ hold; every run time it states (seconds) is a recorded wall or cell time of
the notebook it is about; every poll answer is what that run revealed; every diagnosis key it names is one
the exercise's hints address; and its reading times are, within a tenth, what tools/reading_time.py
computes. The two generated tables (reading time, and tools/predict_t4.py's run times, held by
tests/test_predict_t4.py) are left out of the checks on prose, except that the dates predict_t4 writes
must be dates of the runs table. Reads the guide, the reports and the notebooks: about a second."""
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "instructor.md"
RESULTS = ROOT / "docs" / "gpu-results"
HINTS = ROOT / "course_utils" / "exercise_hints.json"
GENERATED = re.compile(r"<!-- (reading-time|t4-prediction): written by .*?<!-- end \1 -->", re.S)
SECTION = re.compile(r"<!-- section: (\S+) \| [^|]+ \| ([\d.]+) \| ([^>]+?) -->(.*?)<!-- end section -->", re.S)
CELL_TIME = re.compile(r"\*\*cell \d+\*\* \(([\d.]+) s\)")
DATE = re.compile(r"\b20[23]\d-\d\d-\d\d\b|\b20[23]\d\b|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.? \d{1,2}\b"
                  r"|\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b")
SECONDS = re.compile(r"(\d+(?:\.\d+)?)(?:\s*–\s*(\d+(?:\.\d+)?))?\s+s\b")

_spec = importlib.util.spec_from_file_location("reading_time", ROOT / "tools" / "reading_time.py")
reading_time = sys.modules.setdefault("reading_time", importlib.util.module_from_spec(_spec))
if not hasattr(reading_time, "table"):
    _spec.loader.exec_module(reading_time)


def guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


def prose() -> str:
    """The guide without its two generated tables."""
    return GENERATED.sub("", guide())


def table_lines(heading: str, text: str) -> list[str]:
    """The lines of the first markdown table after `heading`."""
    lines = text[text.index(heading):].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def table_after(heading: str, text: str) -> list[list[str]]:
    """The rows (cells stripped) of the first markdown table after `heading`, header and rule left out."""
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in table_lines(heading, text)[2:]]


def runs() -> list[dict]:
    """The table of runs: {name, date, report (a path, for a run the repository holds, else None)}."""
    found = []
    for name, _gpu, when, where in table_after("## The runs this guide quotes", guide()):
        link = re.search(r"\]\((gpu-results/[^)]+\.md)\)", where)
        found.append({"name": name.strip("*"), "date": DATE.search(when)[0],
                      "report": GUIDE.parent / link[1] if link else None})
    return found


def sections(report: Path) -> dict[str, dict]:
    """{notebook path: {wall, date, text}} of a gpu_run report's solution notebooks."""
    text = report.read_text(encoding="utf-8")
    return {m[1]: {"wall": float(m[2]), "date": m[3], "text": m[4]}
            for m in SECTION.finditer(text) if m[1].startswith("solutions/")}


def current() -> dict[str, dict]:
    """{GPU (H100, H200): sections} of the runs the guide calls current, the ones with a report here."""
    return {r["name"].split()[0]: sections(r["report"]) for r in runs() if r["report"]}


def notebook_of(prefix: str, secs: dict) -> dict:
    """The section of lesson `00`...`09` or lab `lab1`...`lab6`."""
    name = f"solutions/{prefix}_" if not prefix.startswith("lab") else f"solutions/labs/{prefix}_"
    [found] = [s for path, s in secs.items() if path.startswith(name)]
    return found


def close(said: str, recorded: float) -> bool:
    """A figure said with d decimals matches a record that rounds to it."""
    decimals = len(said.split(".")[1]) if "." in said else 0
    return abs(float(said) - recorded) <= 0.5 * 10 ** -decimals + 1e-9


def test_the_runs_table_is_the_only_place_with_dates():
    text = guide()
    rows = set(table_lines("## The runs this guide quotes", text))
    stray = [ln for ln in prose().splitlines() if DATE.search(ln) and ln not in rows]
    assert not stray, "docs/instructor.md dates something outside its table of runs:\n" + "\n".join(stray)
    run_days = {r["date"] for r in runs()}
    for block in GENERATED.finditer(text):
        days = set(re.findall(r"\b20[23]\d-\d\d-\d\d\b", block[0]))
        assert days <= run_days, f"a generated table names {sorted(days - run_days)}, which the table of runs does not"


def test_the_runs_it_calls_current_are_the_ones_the_reports_hold():
    listed = [r for r in runs() if r["report"]]
    assert {r["name"].split()[0] for r in listed} == {"H100", "H200"}, "one current run per GPU, each with its report"
    for r in listed:
        secs = sections(r["report"])
        assert secs, f"{r['report']} holds no solution notebook"
        days = {s["date"][:10] for s in secs.values()}
        assert days == {r["date"]}, (
            f"{r['report'].relative_to(ROOT)} holds the run of {sorted(days)}, but docs/instructor.md quotes "
            f"{r['name']} of {r['date']}: merge that run, or move the guide's figures to the one recorded")


def test_every_run_time_is_a_recorded_wall_or_cell_time_of_its_notebook():
    gpus = current()
    context, checked = None, 0
    for line in prose().splitlines():
        heading = re.match(r"^#{2,3} (\d\d) · ", line)
        if heading or line.startswith("## "):
            context = heading[1] if heading else None
        lab = re.match(r"^\*\*Lab (\d) · ", line)
        if lab:
            context = f"lab{lab[1]}"
        for m in SECONDS.finditer(line):
            if context:
                secs = [notebook_of(context, s) for s in gpus.values()]
            else:
                secs = [s for g in gpus.values() for s in g.values()]
            recorded = [s["wall"] for s in secs] + [float(t) for s in secs for t in CELL_TIME.findall(s["text"])]
            for said in filter(None, m.groups()):
                assert any(close(said, t) for t in recorded), (
                    f"docs/instructor.md says {said} s ({context or 'any notebook'}), which no recorded wall or "
                    f"cell time of the current runs rounds to: {line.strip()}")
                checked += 1
    assert checked >= 10, "the guide should name each notebook's slow cells"


def same_answer(said: str, revealed: str) -> bool:
    """The guide's answer and the scoreboard's agree: the same words, or the same unit and the same number
    at the coarser of the two precisions (the scoreboard prints three significant figures)."""
    a, b = re.match(r"^([\d.]+)\s*(.*)$", said), re.match(r"^([\d.]+)\s*(.*)$", revealed)
    if not (a and b):
        return said == revealed
    decimals = min(len(x.split(".")[1]) if "." in x else 0 for x in (a[1], b[1]))
    return a[2] == b[2] and abs(round(float(a[1]), decimals) - float(b[1])) <= 0.5 * 10 ** -decimals + 1e-9


def test_every_poll_answer_is_what_the_run_revealed():
    gpus = current()
    rows = table_after("## The polls", guide())
    assert len(rows) >= 35
    for key, h100, h200, *_ in rows:
        key = key.strip("`")
        for gpu, said in (("H100", h100), ("H200", h200)):
            text = notebook_of(key.split(".")[0], gpus[gpu])["text"]
            board = [re.split(r"\s{2,}", ln.strip()) for ln in text.splitlines() if ln.startswith(key + " ")]
            assert board, f"{gpu}'s run has no scoreboard row for {key}"
            revealed = board[-1][2]
            assert same_answer(said, revealed), \
                f"docs/instructor.md says {key} revealed {said!r} on the {gpu}; the run's scoreboard says {revealed!r}"


def test_every_diagnosis_key_it_names_is_one_the_hints_address():
    hints = json.loads(HINTS.read_text(encoding="utf-8"))
    checked = 0
    for para in re.split(r"\n(?=- \*\*|\*\*Lab )", prose()):
        if "Stumbles" not in para:
            continue
        lab = re.match(r"\*\*Lab (\d) · ", para)
        names = [n for n in hints if n.startswith(f"lab{lab[1]}.")] if lab else \
            re.findall(r"`check\.(\w+)`", para)
        assert names, f"a Stumbles line names no checker: {para[:80]}"
        addressed = {k for n in names for h in hints[n]["hints"] for k in h["addresses"]}
        stumbles = para[para.index("Stumbles"):]
        for group in re.findall(r"\((`[a-z0-9-]+`(?:, `[a-z0-9-]+`)*)[);]", stumbles):
            for key in re.findall(r"`([a-z0-9-]+)`", group):
                assert key in addressed, f"`{key}` is not a diagnosis the hints of {names} address"
                checked += 1
    assert checked >= 60


def test_the_reading_times_are_the_scripts():
    """Within a tenth (at least a minute) of what tools/reading_time.py computes now: the lessons' prose moves
    with every edit, and a reading time is an estimate; past that, the table is rewritten."""
    said = {r[0]: (int(r[1].split()[0]), int(r[2])) for r in table_after(reading_time.BEGIN, guide())}
    now = {r.name: (r.minutes, r.solution_lines) for r in reading_time.table()}
    assert said.keys() == now.keys(), "run python3 tools/reading_time.py --write: the notebooks changed"
    for name, (minutes, lines) in said.items():
        assert abs(minutes - now[name][0]) <= max(1, 0.1 * now[name][0]) and \
            abs(lines - now[name][1]) <= max(2, 0.1 * now[name][1]), \
            f"{name}: the guide says {minutes} min and {lines} lines, the notebooks now {now[name]}: " \
            "run python3 tools/reading_time.py --write"


def test_the_guide_stays_short():
    assert len(guide().splitlines()) <= 330, "docs/instructor.md is read before a term: keep it near 300 lines"


@pytest.mark.parametrize("said, revealed, ok", [("20.33 B/elem", "20.3 B/elem", True), ("16.0 B/elem", "16 B/elem", True),
                                                 ("0.716 ms", "0.715 ms", False), ("20.39 B/elem", "20.3 B/elem", False),
                                                 ("1.3 x", "1.3 µs", False), ("x4", "x4", True), ("x4", "x8", False)])
def test_a_poll_answer_matches_at_the_coarser_precision(said, revealed, ok):
    assert same_answer(said, revealed) is ok


@pytest.mark.parametrize("said, recorded, ok", [("6.5", 6.52, True), ("9.4", 9.35, True), ("9.4", 9.3, False),
                                                ("27", 27.16, True), ("27.2", 27.1, False)])
def test_a_figure_matches_the_records_that_round_to_it(said, recorded, ok):
    assert close(said, recorded) is ok
