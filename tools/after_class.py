#!/usr/bin/env python3
"""After class: one page per lesson from the class's logs, for the instructor preparing the next one.

    python tools/after_class.py                       the class folder (COURSE_CLASS_DIR) into build/after-class/
    python tools/after_class.py LOGS --out DIR        a folder of collected logs (nbgrader's submitted/, files
                                                      named <student>.jsonl, ...: journal.class_logs reads them)

Each page says, for its lesson:
* where the class's model broke: the number questions ranked by the class's median miss (the median, on a
  log scale, of each student's guess divided by what their own reveal gave), then the choice questions by
  the share that got them wrong, with the most common wrong answer;
* the hints opened most (students per hint);
* the checks failed first: for each student and exercise, the diagnosis of their first failed check;
* the share that finished each exercise (a passed check), of the students whose log has anything of the
  lesson.
No student is named: the pages hold counts and shares only, and any text taken from a log (a question, an
answer typed into a choice) has every student id of the class blanked out before it is written.
"""
from __future__ import annotations

import argparse
import datetime
import html
import json
import math
import os
import re
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_utils import journal, predict  # noqa: E402
from course_utils.numbers import readable  # noqa: E402

OUT = ROOT / "build" / "after-class"
HINTS = ROOT / "course_utils" / "exercise_hints.json"
CSS = ROOT / "docs" / "site" / "_static" / "course.css"
UNNAMED = "a student"


# --- what belongs to which lesson ---------------------------------------------------------------------
def _lesson_of_notebook(path: str) -> str:
    """solutions/04_fuse_bias_gelu.ipynb -> "04"; solutions/labs/lab1_swiglu.ipynb -> "lab1"."""
    return Path(path).stem.split("_")[0]


def exercise_lessons(hints_file: Path = HINTS) -> dict[str, str]:
    try:
        table = json.loads(hints_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {ex: _lesson_of_notebook(h.get("notebook", "")) for ex, h in table.items()}


def lesson_of(entry: dict, exercises: dict[str, str]) -> str | None:
    """The lesson of a log entry: a prediction's key before its first dot ("04.speedup" -> "04"); a hint's or
    check's exercise through the hints table, or a lab's prefix ("lab1.swiglu" -> "lab1"); else None."""
    if entry.get("key"):
        return str(entry["key"]).split(".")[0]
    exercise = entry.get("hint") or entry.get("check")
    if not exercise:
        return None
    exercise = str(exercise)
    return exercises.get(exercise) or (exercise.split(".")[0] if "." in exercise else "other")


def lesson_titles() -> dict[str, str]:
    """Each lesson's title: the first heading of its student notebook (a checkout without solutions/, as
    the hub's, has those)."""
    titles = {}
    for nb in sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(ROOT.glob("labs/*.ipynb")):
        try:
            cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        except (OSError, ValueError, KeyError):
            continue
        heading = next((line.lstrip("# ").strip() for c in cells if c.get("cell_type") == "markdown"
                        for line in "".join(c["source"]).splitlines() if line.startswith("# ")), nb.stem)
        titles[_lesson_of_notebook(nb.name)] = heading
    return titles


# --- the facts ----------------------------------------------------------------------------------------
def _majority(values, default=""):
    values = [v for v in values if v not in (None, "")]
    return Counter(values).most_common(1)[0][0] if values else default


def _latest_reveals(entries: list[dict]) -> dict[str, dict]:
    return {str(e["key"]): e for e in entries if e.get("key") and e.get("measured") is not None
            and e.get("guess") is not None}


def model_broke(logs: dict[str, list[dict]], lesson: str, exercises: dict[str, str]):
    """(number rows ranked by how far the class's median guess was, choice rows ranked by share wrong,
    reveals against a model left out). A student's miss is their guess over what their own reveal gave."""
    pairs: dict[str, list[tuple[dict, str]]] = defaultdict(list)
    for sid, entries in logs.items():
        for key, e in _latest_reveals(entries).items():
            if lesson_of(e, exercises) == lesson:
                pairs[key].append((e, sid))
    numbers, choices, models = [], [], 0
    for key, found in sorted(pairs.items()):
        es = [e for e, _ in found]
        question = _majority(e.get("question") for e in es)
        if _majority(e.get("kind") for e in es) == "choice":
            answers = [(str(e["guess"]), str(e["measured"])) for e in es]
            right = sum(g == m for g, m in answers)
            wrong = Counter(g for g, m in answers if g != m).most_common()
            top = [a for a, c in wrong if c == wrong[0][1]] if wrong else []
            choices.append({"key": key, "question": question, "n": len(answers), "right": right,
                            "wrong": top, "wrong_n": wrong[0][1] if wrong else 0})
            continue
        logs_r, close, low, high = [], 0, 0, 0
        for e in es:
            if predict.modelled(e.get("label")):
                models += 1
                continue
            g, m = _number(e.get("guess")), _number(e.get("measured"))
            if g is None or m is None or g <= 0 or m <= 0:
                continue
            logs_r.append(math.log(g / m))
            close += predict._close(max(g, m) / min(g, m), e.get("label"))
            low, high = low + (g < m), high + (g > m)
        if not logs_r:
            continue
        med = math.exp(statistics.median(logs_r))   # an even count: the geometric mean of the middle two
        numbers.append({"key": key, "question": question, "unit": _majority(e.get("unit") for e in es),
                        "n": len(logs_r), "median_ratio": med, "close": close, "low": low, "high": high})
    numbers.sort(key=lambda r: (-abs(math.log(r["median_ratio"])), r["key"]))
    choices.sort(key=lambda r: (r["right"] / r["n"], r["key"]))
    return numbers, choices, models


def _number(v) -> float | None:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def hints_opened(logs, lesson, exercises, table: dict | None = None) -> list[dict]:
    """Each hint of the lesson opened by at least one student: how many students opened it, most first."""
    table = table if table is not None else _hints_table()
    who: dict[tuple[str, int], set[str]] = defaultdict(set)
    titles: dict[tuple[str, int], list[str]] = defaultdict(list)
    for sid, entries in logs.items():
        for e in entries:
            if e.get("hint") and lesson_of(e, exercises) == lesson:
                try:
                    tier = int(e.get("tier"))
                except (TypeError, ValueError):
                    continue
                who[(str(e["hint"]), tier)].add(sid)
                titles[(str(e["hint"]), tier)].append(e.get("title"))
    rows = []
    for (ex, tier), students in who.items():
        known = table.get(ex, {}).get("hints", [])
        title = known[tier - 1]["title"] if 0 < tier <= len(known) else _majority(titles[(ex, tier)])
        rows.append({"exercise": ex, "tier": tier, "title": title, "students": len(students)})
    return sorted(rows, key=lambda r: (-r["students"], r["exercise"], r["tier"]))


def _hints_table() -> dict:
    try:
        return json.loads(HINTS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _checks(entries: list[dict], lesson, exercises) -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = defaultdict(list)
    for e in entries:                 # class_logs gives each student's entries in time order
        if e.get("check") and lesson_of(e, exercises) == lesson:
            by[str(e["check"])].append(e)
    return by


def first_failures(logs, lesson, exercises, table: dict | None = None) -> list[dict]:
    """For each exercise, the diagnoses of each student's first failed check, counted over students."""
    table = table if table is not None else _hints_table()
    count: Counter = Counter()
    for entries in logs.values():
        for ex, checks in _checks(entries, lesson, exercises).items():
            first = next((e for e in checks if e.get("passed") is False), None)
            if first is not None:
                count[(ex, first.get("diagnosis") or None)] += 1
    rows = []
    for (ex, diagnosis), n in count.items():
        hint = next((f"hint {i}: {h['title']}" for i, h in enumerate(table.get(ex, {}).get("hints", []), 1)
                     if diagnosis and diagnosis in h.get("addresses", ())), "")
        rows.append({"exercise": ex, "diagnosis": diagnosis, "students": n, "hint": hint})
    return sorted(rows, key=lambda r: (-r["students"], r["exercise"], str(r["diagnosis"])))


def finished(logs, lesson, exercises) -> tuple[list[dict], int]:
    """(per exercise: students who ran its check, students with a passed check; the students active in the
    lesson: any entry of it in their log)."""
    active = {sid for sid, es in logs.items() if any(lesson_of(e, exercises) == lesson for e in es)}
    names = sorted({ex for ex, les in exercises.items() if les == lesson} |
                   {ex for es in logs.values() for ex in _checks(es, lesson, exercises)})
    rows = []
    for ex in names:
        tried = done = 0
        for es in logs.values():
            checks = _checks(es, lesson, exercises).get(ex, [])
            tried += bool(checks)
            done += any(e.get("passed") is True for e in checks)
        rows.append({"exercise": ex, "tried": tried, "finished": done})
    return rows, len(active)


def lessons_in(logs, exercises) -> list[str]:
    found = {lesson_of(e, exercises) for es in logs.values() for e in es} - {None}

    def order(lesson):   # lessons 00-09 first, then the labs in their order, then anything else
        m = re.fullmatch(r"(lab)?(\d+)", lesson)
        return (0 if m and not m[1] else 1 if m else 2, int(m[2]) if m else 0, lesson)
    return sorted(found, key=order)


# --- the page -----------------------------------------------------------------------------------------
class Page:
    """HTML in which every text taken from a log has the class's ids blanked out (whole words)."""

    def __init__(self, ids):
        ids = sorted({i for i in ids if i and len(i) >= 2}, key=len, reverse=True)
        self._ids = re.compile(r"(?<![\w])(?:" + "|".join(map(re.escape, ids)) + r")(?![\w])", re.I) if ids else None

    def text(self, value) -> str:
        s = str(value)
        if self._ids is not None:
            s = self._ids.sub(UNNAMED, s)
        return html.escape(s)


def _share(k: int, n: int) -> str:
    if not n:
        return "—"
    pct = 100 * k / n
    return (f'<span class="share"><span class="bar"><span style="width:{pct:.0f}%"></span></span> '
            f'{k} of {n} ({pct:.0f}%)</span>')


def _miss(r) -> str:
    m = r["median_ratio"]
    if 1 / 1.05 <= m <= 1.05:
        return "on the mark"
    return f"×{readable(m)} too high" if m > 1 else f"×{readable(1 / m)} too low"


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; margin: 0; }
main { max-width: 68rem; margin: 0 auto; padding: 1.5rem 2rem 3rem; }
h1 { font-size: 1.7rem; margin-bottom: .2rem; } h2 { font-size: 1.25rem; margin-top: 2rem; }
p.lead { color: #555; margin-top: 0; }
table { border-collapse: collapse; width: 100%; font-size: .92rem; }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #ddd; vertical-align: top; }
th { background: #f3f4f6; font-weight: 600; }
td.num { white-space: nowrap; }
code { background: #f3f4f6; padding: 0 .25rem; border-radius: 3px; font-size: .88em; }
.share { white-space: nowrap; }
.bar { display: inline-block; width: 6rem; height: .7rem; background: #e5e7eb; vertical-align: middle; }
.bar span { display: block; height: 100%; background: #2563eb; }
p.none { color: #666; font-style: italic; }
nav a { margin-right: 1rem; }
"""


def _table(head: list[str], rows: list[list[str]], none: str) -> str:
    if not rows:
        return f'<p class="none">{html.escape(none)}</p>'
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def _doc(title: str, body: str) -> str:
    try:
        site = CSS.read_text(encoding="utf-8")
    except OSError:
        site = ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}{site}</style></head>\n<body><main>\n{body}\n</main></body></html>\n")


def lesson_page(logs, lesson: str, exercises: dict[str, str], title: str = "", table: dict | None = None) -> str:
    table = table if table is not None else _hints_table()
    t = Page(logs).text
    numbers, choices, models = model_broke(logs, lesson, exercises)
    opened = hints_opened(logs, lesson, exercises, table)
    failures = first_failures(logs, lesson, exercises, table)
    done, active = finished(logs, lesson, exercises)
    times = sorted(str(e["time"]) for es in logs.values() for e in es
                   if e.get("time") and lesson_of(e, exercises) == lesson)
    days = sorted({t[:10] for t in times})
    span = f", {days[0]} to {days[-1]}" if len(days) > 1 else f", {days[0]}" if days else ""
    heading = t(title) if title.startswith(lesson) else t(lesson) + (" · " + t(title) if title else "")
    parts = ['<nav><a href="index.html">all lessons</a></nav>',
             f"<h1>After class: {heading}</h1>",
             f'<p class="lead">From the logs of {active} student{"s" if active != 1 else ""} with anything of '
             f"this lesson{span}. Counts and shares only: no student is named here.</p>",
             "<h2>Where the class's model broke</h2>",
             "<p>Each student's guess divided by what their own reveal gave; the questions ranked by how far "
             "the class's median of that ratio (on a log scale) is from 1.</p>",
             _table(["question", "students", "class's median guess",
                     f"within 2× (a count: within {predict.COUNT_TOLERANCE:.0%})", "guessed low / high"],
                    [[f"<code>{t(r['key'])}</code> {t(r['question'])}", str(r["n"]), _miss(r),
                      _share(r["close"], r["n"]), f"{r['low']} / {r['high']}"] for r in numbers],
                    "No number question of this lesson was revealed with a guess committed.")]
    if models:
        parts.append(f"<p>{models} reveal{'s' if models != 1 else ''} came from a model (no GPU), not a "
                     "measurement: left out of this table.</p>")
    if choices:
        parts.append(_table(["choice question", "students", "right", "most common wrong answer"],
                            [[f"<code>{t(r['key'])}</code> {t(r['question'])}", str(r["n"]),
                              _share(r["right"], r["n"]),
                              (" or ".join(f"“{t(a)}”" for a in r["wrong"]) + f" ({r['wrong_n']} each)"
                               if len(r["wrong"]) > 1 else f"“{t(r['wrong'][0])}” ({r['wrong_n']})")
                              if r["wrong"] else "—"] for r in choices], ""))
    parts += ["<h2>The hints opened most</h2>",
              _table(["exercise", "hint", "students who opened it"],
                     [[f"<code>{t(r['exercise'])}</code>", f"{r['tier']} · {t(r['title'])}",
                       _share(r["students"], active)] for r in opened], "No hint of this lesson was opened."),
              "<h2>The checks failed first</h2>",
              "<p>For each student and exercise, the diagnosis of their first failed check; the hint that "
              "addresses it, where one does.</p>",
              _table(["exercise", "first failure", "students", "the hint for it"],
                     [[f"<code>{t(r['exercise'])}</code>",
                       f"<code>{t(r['diagnosis'])}</code>" if r["diagnosis"] else
                       "an error no check recognised (no diagnosis)",
                       str(r["students"]), t(r["hint"]) or "—"] for r in failures],
                     "No check of this lesson failed."),
              "<h2>Who finished</h2>",
              _table(["exercise", "ran its check", "finished (a passed check)"],
                     [[f"<code>{t(r['exercise'])}</code>", _share(r["tried"], active),
                       _share(r["finished"], active)] for r in done], "This lesson has no checked exercise.")]
    return _doc(f"After class: {lesson}", "\n".join(parts))


def index_page(logs, lessons: list[str], exercises, titles: dict[str, str]) -> str:
    t = Page(logs).text
    rows = []
    for lesson in lessons:
        n = sum(any(lesson_of(e, exercises) == lesson for e in es) for es in logs.values())
        rows.append([f'<a href="{html.escape(_file(lesson))}">{t(lesson)}</a>', t(titles.get(lesson, "")), str(n)])
    when = datetime.datetime.now().isoformat(timespec="minutes")
    body = (f"<h1>After class</h1><p class=\"lead\">{len(logs)} students' logs, read {when}. "
            "No student is named on these pages.</p>" + _table(["lesson", "title", "students"], rows, "No logs."))
    return _doc("After class", body)


def _file(lesson: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", lesson) + ".html"


def build(logs: dict[str, list[dict]], out: Path = OUT) -> list[Path]:
    """Write index.html and one page per lesson found in the logs into `out`; return the pages written."""
    exercises, titles, table = exercise_lessons(), lesson_titles(), _hints_table()
    out.mkdir(parents=True, exist_ok=True)
    lessons = lessons_in(logs, exercises)
    written = []
    for lesson in lessons:
        page = out / _file(lesson)
        page.write_text(lesson_page(logs, lesson, exercises, titles.get(lesson, ""), table), encoding="utf-8")
        written.append(page)
    index = out / "index.html"
    index.write_text(index_page(logs, lessons, exercises, titles), encoding="utf-8")
    return [index] + written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="?", help="the class folder or a folder of collected logs "
                    "(default: COURSE_CLASS_DIR)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"where the pages go (default: {OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    try:
        logs = journal.class_logs(args.logs)
    except (ValueError, FileNotFoundError) as err:
        print(f"after_class: {err}", file=sys.stderr)
        return 2
    if not logs:
        print(f"after_class: no logs in {args.logs or os.environ.get('COURSE_CLASS_DIR')}", file=sys.stderr)
        return 1
    pages = build(logs, args.out)
    print(f"{len(pages) - 1} lesson page{'s' if len(pages) != 2 else ''} from {len(logs)} students' logs: "
          f"{pages[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
