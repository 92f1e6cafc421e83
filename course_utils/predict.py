"""Predict, then reveal: commit a guess before the machine answers.

    p = predict.number("00.copy", "How many ms to copy 1 GiB?", measure_copy, unit="ms", default=1.0)

In a live notebook this shows an input, a Commit button (which locks the guess) and a Reveal button
(which runs `measure()`). Anywhere else (COURSE_HEADLESS=1, a plain Python process, no ipywidgets,
or a `guess=` written in the code) it never waits for input: it takes `guess` (or `default`),
measures at once and prints the comparison. Every committed guess and every reveal is appended to the
student's log (course_utils.journal: one file for every lesson and lab, and on the course's JupyterHub a
copy in the class folder, where the instructor sees the guesses arrive before anything is revealed).
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

from . import environment as env
from . import journal
from .numbers import readable, typed

_asked: list[str] = []     # keys asked in this process: what scoreboard() shows by default


def modelled(label) -> bool:
    """Was the value revealed a model's (a label such as "MODEL (H100 datasheet)"), not a measurement or a
    count? A guess against a model is shown, but not scored: on a CPU several reveals are the very model
    the question quotes, and a headless default equal to it would count as a hit."""
    return str(label or "").upper().startswith("MODEL")


def counted(label) -> bool:
    """Was the value revealed a count (a label starting "counted")? A count has one right answer, so a
    guess is close only within COUNT_TOLERANCE of it, where a measurement's is within 2x."""
    return str(label or "").lower().startswith("counted")


# How far a guess may be from a count and still be close. A lesson counts bytes per element on the interpreter's
# small copy, where the small tensors (a weight, a bias, one value per row) add a share that vanishes at a
# GPU's sizes: the by-hand count of the full-size tensors, 20 bytes per element in lesson 05, is 20.33 there
# (1.7%: weight, bias and the saved statistics at 32 x 96), 32 is 32.17 in lesson 06. 3% takes those in, and
# still tells an off-by-one count of lanes or programs below 34 from the right one.
COUNT_TOLERANCE = 0.03
RULE = f"counts: within {COUNT_TOLERANCE:.0%}; other numbers: within 2x; choices: right"


def _close(ratio: float, label) -> bool:
    return ratio <= (1 + COUNT_TOLERANCE if counted(label) else 2.0)


@dataclass
class Prediction:
    key: str
    question: str
    kind: str                      # "number" or "choice"
    unit: str = ""
    label: str = "measured"
    fmt: str = ""                  # a format for revealed numbers; "" shows 3 significant digits
    guess: object = None
    measured: object = None        # None until revealed
    options: list = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """How far off the guess was, as a factor >= 1 (nan if it cannot be said)."""
        return _ratio(self.guess, self.measured)

    def line(self) -> str:
        if self.measured is None:
            return f"{self.key}: guess {self._show(self.guess)}, not revealed yet"
        got = f"{self.label} {self._show(self.measured)}"
        if self.guess is None:
            return f"no guess recorded · {got}"
        if self.kind == "choice":
            verdict = "right" if self.guess == self.measured else "not this time"
            return f"your guess {self._show(self.guess)} · {got} · {verdict}"
        r = self.ratio
        off = f"off by ×{readable(r)}" if math.isfinite(r) else "off by: n/a (needs two positive numbers)"
        return f"your guess {self._show(self.guess, as_typed=True)} · {got} · {off}"

    def yours(self) -> str:
        """The guess in words, for a later cell: "your guess: 5 %", or a sentence saying there is none
        (in a live notebook nothing is committed until someone presses Commit; Run All goes past)."""
        if self.guess is None:
            return "no guess committed (type one above, press Commit, then Reveal)"
        return f"your guess: {self._show(self.guess, as_typed=True)}"

    def _show(self, v, as_typed: bool = False) -> str:
        if v is None:
            return "—"
        if self.kind == "choice":
            return str(v)
        text = typed(v) if as_typed else (self.fmt.format(v) if self.fmt else readable(v))
        return text + (f" {self.unit}" if self.unit else "")

    __repr__ = line

    def _ipython_display_(self):
        """The reveal already printed (or shows its widget): as a cell's last value, show nothing more."""


def _ratio(guess, measured) -> float:
    try:
        g, m = float(guess), float(measured)
    except (TypeError, ValueError):
        return math.nan
    if g <= 0 or m <= 0 or not (math.isfinite(g) and math.isfinite(m)):
        return math.nan
    return max(g, m) / min(g, m)


def _log(p: Prediction) -> None:
    """A reveal, or (measured still None) a guess committed and not yet revealed."""
    journal.append({"key": p.key, "question": p.question, "guess": p.guess, "measured": p.measured,
                    "unit": p.unit, "label": p.label, "kind": p.kind})


def _interactive(guess) -> bool:
    return guess is None and env.live()


def _reveal(p: Prediction, measure) -> None:
    value = measure()
    p.measured = value if p.kind == "choice" else float(value)
    _log(p)


def _ask(p: Prediction, measure, guess, default, make_input, parse=lambda value: value):
    if p.key not in _asked:
        _asked.append(p.key)
    if not _interactive(guess):
        p.guess = guess if guess is not None else default
        print(p.question)
        _reveal(p, measure)
        print(p.line())
        return p
    journal.student()   # unnamed, it asks here once: a cell, not a button, is running
    import ipywidgets as w
    from IPython.display import display
    box, entry = make_input(w)
    commit = w.Button(description="Commit", button_style="primary")
    reveal = w.Button(description="Reveal", disabled=True)
    out = w.Output()

    def on_commit(_):
        guess = parse(entry.value)
        out.clear_output()
        if guess is None:
            with out:
                print("type a number first" if p.kind == "number" else "pick an answer first")
            return
        p.guess = guess
        entry.disabled = commit.disabled = True
        reveal.disabled = False
        _log(p)   # the class sees the guess now, before anyone reveals

    def on_reveal(_):
        reveal.disabled = True
        with out:  # an error in measure() shows up here instead of vanishing
            print("measuring…" if p.label == "measured" else "working it out…")
            _reveal(p, measure)
            out.clear_output()
            print(p.line())

    commit.on_click(on_commit)
    reveal.on_click(on_reveal)
    ui = w.VBox([w.HTML(f"<b>{html.escape(p.question)}</b>"), w.HBox([box, commit, reveal]), out])
    p._widgets = dict(entry=entry, commit=commit, reveal=reveal, out=out)  # for tests
    display(ui)
    return p


def number(key: str, question: str, measure, *, unit: str = "", guess=None, default=None,
           fmt: str = "", label: str = "measured") -> Prediction:
    """Ask for a number, then compare it with measure() (a zero-argument callable returning a number).

    label: the word shown before the revealed value. Keep "measured" for a measurement; say what it
    is otherwise (e.g. "MODEL (H100 datasheet)") so a modelled number is never passed off as measured."""
    p = Prediction(key, question, "number", unit=unit, label=label, fmt=fmt)

    def make_input(w):
        # empty, not the default: the default is for headless runs, and a number already there anchors a guess
        entry = w.Text(value="", placeholder="your guess", layout=w.Layout(width="9em"))
        return (w.HBox([entry, w.HTML(html.escape(unit))]) if unit else entry), entry
    return _ask(p, measure, guess, default, make_input, parse=_number_or_none)


def _number_or_none(text):
    try:
        v = float(str(text).replace(",", "").strip())
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def choice(key: str, question: str, options, measure, *, guess=None, default=None,
           label: str = "measured") -> Prediction:
    """Ask to pick one of `options`; measure() returns the right one."""
    options = list(options)
    p = Prediction(key, question, "choice", label=label, options=options)
    for g in (guess, default):
        if g is not None and g not in options:
            raise ValueError(f"{g!r} is not one of the options {options}")

    def make_input(w):
        entry = w.RadioButtons(options=options, value=None)
        return entry, entry
    return _ask(p, measure, guess, default, make_input)


class Scoreboard:
    def _cells(self):
        for r in self.rows:
            close = "model, not scored" if r.get("modelled") else {True: "yes", False: "no", None: "—"}[r["close"]]
            ratio = f"×{readable(r['ratio'])}" if r["ratio"] is not None else ""
            yield [r["key"], _val(r["guess"], r["unit"]), _val(r["measured"], r["unit"]), ratio, close]

    _head = ["key", "guess", "revealed", "off by", "close?"]

    def __init__(self, rows, unrevealed=(), hints_line: str = ""):
        self.rows, self.unrevealed, self.hints_line = rows, list(unrevealed), hints_line

    def _pending(self) -> str:
        n = len(self.unrevealed)
        return (f"{n} prediction{'s' if n > 1 else ''} asked here and not revealed yet "
                f"({', '.join(self.unrevealed)}): commit a guess and press Reveal under each") if n else ""

    def __repr__(self) -> str:
        body = list(self._cells())
        if not body:
            return "\n".join(filter(None, [self._pending() or "no predictions recorded yet", self.hints_line]))
        widths = [max(len(row[i]) for row in [self._head] + body) for i in range(len(self._head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [self._head] + body]
        hits = sum(r["close"] is True for r in self.rows)
        models = sum(bool(r.get("modelled")) for r in self.rows)
        tail = [f"{hits} of {len(self.rows) - models} close ({RULE})"
                + (f"; {models} revealed by a model, not scored" if models else "")]
        return "\n".join(lines + tail + ([self._pending()] if self.unrevealed else [])
                         + ([self.hints_line] if self.hints_line else []))

    def _repr_html_(self) -> str:
        e = html.escape
        if not self.rows:
            return f"<pre>{e(repr(self))}</pre>"
        head = "".join(f"<th>{h}</th>" for h in self._head)
        body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in self._cells())
        foot = repr(self).splitlines()[len(self.rows) + 1:]   # the lines under the table
        return f"<table><tr>{head}</tr>{body}</table><pre>{e(chr(10).join(foot))}</pre>"


def _val(v, unit) -> str:
    if v is None:
        return "—"
    if isinstance(v, (int, float)):
        return readable(v) + (f" {unit}" if unit else "")
    return str(v)


def _latest_logged() -> dict[str, dict]:
    """The log's latest reveal per key (a line that is not a prediction, or a guess committed and not
    revealed, is skipped)."""
    return {str(e["key"]): e for e in journal.entries()
            if e.get("key") is not None and e.get("measured") is not None}


def scoreboard(keys=None, prefix: str | None = None) -> Scoreboard:
    """This notebook's predictions, the latest reveal per key: by default the keys asked in this
    session, or those starting with `prefix`, or exactly `keys`."""
    latest = _latest_logged()
    asked_here = keys is None and prefix is None
    if asked_here:
        keys = list(_asked)
    chosen = [k for k in (keys if keys is not None else latest) if k in latest
              and (prefix is None or str(k).startswith(prefix))]
    rows = []
    for k in chosen:
        e = latest[k]
        g, m = e.get("guess"), e.get("measured")
        if e.get("kind") == "choice":
            ratio, close = None, (None if g is None else g == m)
        else:
            r = _ratio(g, m)
            ratio, close = (r, _close(r, e.get("label"))) if math.isfinite(r) else (None, None if g is None else False)
        model = modelled(e.get("label"))
        rows.append({"key": k, "question": e.get("question"), "guess": g, "measured": m,
                     "unit": e.get("unit", ""), "ratio": ratio, "close": None if model else close,
                     "modelled": model})
    from . import hints  # the hints opened for this notebook's exercises, from the same log
    board = Scoreboard(rows, [k for k in _asked if k not in latest] if asked_here else (),
                       hints.summary() if asked_here else "")
    if not env.in_notebook():  # a notebook displays the returned board; a script would show nothing
        print(board)
    return board


class Calibration:
    """Every numeric prediction in the log against what it was revealed to be: .rows, a summary, .plot()."""

    def __init__(self, rows):
        self.rows = rows

    def summary(self) -> str:
        if not self.rows:
            return "no numeric predictions with a positive guess and a positive revealed value yet"
        lessons = sorted({r["lesson"] for r in self.rows})
        scored = [r for r in self.rows if not r["modelled"]]
        models = len(self.rows) - len(scored)
        head = (f"{len(self.rows)} numeric predictions from lesson{'s' if len(lessons) > 1 else ''} "
                f"{', '.join(lessons)}")
        note = f"; {models} revealed by a model (hollow markers), not scored" if models else ""
        n = len(scored)
        if not n:
            return head + note
        close = sum(_close(r["ratio"], r["label"]) for r in scored)
        low = sum(r["guess"] < r["measured"] for r in scored)
        high = sum(r["guess"] > r["measured"] for r in scored)
        ratios = sorted(r["ratio"] for r in scored)
        median = ratios[n // 2] if n % 2 else (ratios[n // 2 - 1] * ratios[n // 2]) ** 0.5
        return (f"{head}: of {n} measured or counted, {close} close ({close / n:.0%}; a count within "
                f"{COUNT_TOLERANCE:.0%}, a measurement within 2x); median miss "
                f"×{readable(median)}; {low} guessed low, {high} guessed high{note}")

    def __repr__(self) -> str:
        return self.summary()

    def plot(self, ax=None):
        from . import plot
        return plot.calibration(self.rows, ax=ax)


def calibration(prefix: str | None = None) -> Calibration:
    """The latest reveal of every numeric prediction in the log (all lessons; or keys starting with `prefix`)
    whose guess and revealed value are both positive numbers: what a log-log picture of guessed against
    revealed can show. Each row: key, lesson (the key's part before the first dot), guess, measured, unit,
    label ("measured", "counted" or a MODEL label), modelled (predict.modelled(label)) and ratio (the miss as
    a factor >= 1)."""
    latest = _latest_logged()
    rows = []
    for key, e in latest.items():
        if e.get("kind", "number") != "number" or (prefix is not None and not key.startswith(prefix)):
            continue
        r = _ratio(e.get("guess"), e.get("measured"))
        if not math.isfinite(r):
            continue
        label = e.get("label", "measured")
        rows.append({"key": key, "lesson": key.split(".")[0], "guess": float(e["guess"]),
                     "measured": float(e["measured"]), "unit": e.get("unit", ""), "label": label,
                     "modelled": modelled(label), "ratio": r})
    rows.sort(key=lambda r: r["key"])
    return Calibration(rows)
