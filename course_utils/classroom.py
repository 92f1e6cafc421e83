"""The class's guesses against the GPU's answer, on the instructor's screen: one call in a lecture.

    cu.classroom.reveal("04.speedup")

shows every student's committed guess for that question (the latest of each student, from the class
folder that the course's JupyterHub keeps, or from a folder of collected logs: `where=`), as dots on the
question's scale (a log scale where the guesses span a factor of 10 or more), with their count and
median. Behind a button, "Show the measurement", waits the value this kernel revealed for the same key
(the instructor runs the solution and presses Reveal in its prediction, before or after this call: the
button reads it when pressed), or `measured=`: drawn across the guesses, with the share of the class
within 2x of it (a count: within predict.COUNT_TOLERANCE; a choice: the share right) and, for a choice,
the class's most common wrong answer. While on screen, it reads the class folder again every few seconds and redraws when
a guess arrives.

Names are hidden (`names=True` writes them beside the dots). Where the caller's own id is among the
class's, their dot is marked "you". A student on the hub cannot list the class folder (only instructors
can), so there the call shows that student's own guess against their own measurement, and says so.

Without a person at the notebook (COURSE_HEADLESS=1, a script), it prints one paragraph, measurement
included, and in a notebook draws the picture once.
"""
from __future__ import annotations

import datetime
import html
import io
import math
import os
import textwrap
import threading
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import environment as env
from . import journal, predict
from .numbers import readable

EVERY = 3.0        # seconds between two reads of the class folder while a reveal is on screen
MINUTES = 45       # a reveal stops reading after this long (a lecture's question, not the whole day)
LOG_SPAN = 10.0    # guesses whose largest is this many times their smallest are drawn on a log scale
MAX_NAMES = 60     # names=True writes ids beside up to this many dots; beyond, and for a choice, under the text


# --- the numbers ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Guess:
    student: str
    value: object       # a float for a number question, the option's text for a choice
    time: str = ""


def class_guesses(key: str, logs: dict[str, list[dict]], kind: str = "number") -> tuple[list[Guess], int]:
    """Each student's latest committed guess for `key` (a guess committed again later replaces the first),
    and how many guesses were left out because they were not numbers (for a number question)."""
    found: dict[str, Guess] = {}
    bad: set[str] = set()
    for sid, entries in logs.items():
        for e in entries:
            if e.get("key") != key or e.get("guess") is None:
                continue
            value = e["guess"]
            if kind == "number":
                value = _number(value)
                if value is None:
                    bad.add(sid)
                    continue
            else:
                value = str(value)
            bad.discard(sid)
            found[sid] = Guess(sid, value, str(e.get("time", "")))
    return sorted(found.values(), key=lambda g: g.student), len(bad - set(found))


def _number(v) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def log_scale(values) -> bool:
    """Draw on a log scale: every value positive and the largest at least LOG_SPAN times the smallest."""
    values = [float(v) for v in values]
    return bool(values) and min(values) > 0 and max(values) >= LOG_SPAN * min(values)


def median(values, log: bool = False) -> float:
    """The median; on a log scale, an even count's middle two are averaged geometrically (the median of 1
    and 100 is 10 there, as the eye reads the picture), otherwise arithmetically."""
    values = sorted(float(v) for v in values)
    if not values:
        return math.nan
    n = len(values)
    if n % 2:
        return values[n // 2]
    a, b = values[n // 2 - 1], values[n // 2]
    return math.sqrt(a * b) if log and a > 0 and b > 0 else (a + b) / 2


def close_share(values, measured: float, label: str = "measured") -> float:
    """The share of guesses close to `measured` by predict's rule: within 2x for a measurement, within
    predict.COUNT_TOLERANCE for a count. A guess that is zero or negative is not close to a positive value."""
    values = list(values)
    if not values:
        return math.nan
    return sum(_is_close(v, measured, label) for v in values) / len(values)


def _is_close(v, measured, label) -> bool:
    r = predict._ratio(v, measured)
    return math.isfinite(r) and predict._close(r, label)


def right_share(answers, right) -> float:
    answers = list(answers)
    return sum(a == right for a in answers) / len(answers) if answers else math.nan


def wrong_choices(answers, right) -> list[tuple[str, int]]:
    """The most common wrong answers with their count: one, or all those tied for the most ([] if none)."""
    counts = Counter(a for a in answers if a != right)
    if not counts:
        return []
    top = max(counts.values())
    return sorted(((a, c) for a, c in counts.items() if c == top), key=lambda ac: str(ac[0]))


# --- what one reveal shows ----------------------------------------------------------------------------
@dataclass
class ClassView:
    """One question's guesses and, once known, its answer; every number the picture and the text show."""
    key: str
    question: str = ""
    kind: str = "number"                 # "number" or "choice"
    unit: str = ""
    label: str = "measured"              # of the measurement: "measured", "counted ...", "MODEL ..."
    guesses: list[Guess] = field(default_factory=list)
    measured: object = None
    me: str = ""                         # the viewer's id, when their own guess is among the guesses
    scope: str = "class"                 # "class", or "own": only the viewer's log could be read
    notes: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.guesses)

    @property
    def values(self) -> list:
        return [g.value for g in self.guesses]

    @property
    def mine(self) -> Guess | None:
        if self.scope == "own":          # only the viewer's log was read: its guess is theirs, named or not
            return self.guesses[0] if self.guesses else None
        return next((g for g in self.guesses if self.me and g.student == self.me), None)

    def log(self, shown: bool) -> bool:
        """The scale of the picture: decided on the guesses alone while the answer is hidden (a scale that
        changed with it would give it away), on the guesses and the answer once shown."""
        if self.kind != "number":
            return False
        values = self.values + ([self.measured] if shown and self.measured is not None else [])
        return log_scale(values)

    @property
    def median(self) -> float:
        return median(self.values, self.log(False)) if self.kind == "number" else math.nan

    @property
    def share(self) -> float:
        """Close (a number) or right (a choice); nan without a measurement or a guess."""
        if self.measured is None:
            return math.nan
        if self.kind == "choice":
            return right_share(self.values, self.measured)
        return close_share(self.values, self.measured, self.label)

    @property
    def wrong(self) -> list[tuple[str, int]]:
        return wrong_choices(self.values, self.measured) if self.kind == "choice" and self.measured is not None else []

    def sides(self) -> tuple[int, int]:
        """How many guessed below and above the measurement (numbers only)."""
        if self.kind != "number" or self.measured is None:
            return 0, 0
        m = float(self.measured)
        return sum(v < m for v in self.values), sum(v > m for v in self.values)

    def show(self, v) -> str:
        if v is None:
            return "—"
        if self.kind == "choice":
            return f"“{v}”"
        return readable(v) + (f" {self.unit}" if self.unit else "")

    def _rule(self) -> str:
        return f"within {predict.COUNT_TOLERANCE:.0%} (a count)" if predict.counted(self.label) else "within 2×"

    def paragraph(self, shown: bool = True) -> str:
        """The one-paragraph summary: what a headless run prints and the text above the picture."""
        return " ".join(filter(None, [self._guessed(), self._answered(shown)] + self.notes))

    def _guessed(self) -> str:
        if self.scope == "own":
            mine = self.mine
            return (f"{self.key}: your guess {self.show(mine.value)}." if mine else
                    f"{self.key}: no guess of yours committed yet (type one, press Commit).")
        if not self.n:
            return f"{self.key}: no guesses from the class yet."
        who = f"{self.n} guess{'es' if self.n != 1 else ''} from the class"
        if self.kind == "choice":
            counts = Counter(self.values).most_common()
            return f"{self.key}: {who}: " + ", ".join(f"{self.show(a)} {c}" for a, c in counts) + "."
        spread = f"from {self.show(min(self.values))} to {self.show(max(self.values))}" if self.n > 1 else ""
        return f"{self.key}: {who}, median {self.show(self.median)}" + (f" ({spread})." if spread else ".")

    def _answered(self, shown: bool) -> str:
        if not shown:
            return "The measurement is behind the button."
        if self.measured is None:
            return (f"No measurement of {self.key} in this kernel yet: run the cell that asks it and press "
                    "Reveal there, or pass measured=.")
        said = (f"{self.label} on this GPU" if self.label == "measured" else self.label)
        got = f"{said[0].upper()}{said[1:]}: {self.show(self.measured)}."
        if not self.n:
            return got
        if self.scope == "own":
            mine = self.mine.value
            if self.kind == "choice":
                return got + (" Right." if mine == self.measured else " Not this time.")
            r = predict._ratio(mine, self.measured)
            off = f" Off by ×{readable(r)}" if math.isfinite(r) else ""
            return got + off + (f", {self._rule()}." if _is_close(mine, self.measured, self.label) else ".")
        k = round(self.share * self.n)
        if self.kind == "choice":
            wrong = self.wrong
            most = ("; the most common wrong answer: " + " and ".join(f"{self.show(a)} ({c})" for a, c in wrong)
                    if wrong else "")
            return f"{got} {k} of {self.n} right ({self.share:.0%}){most}."
        low, high = self.sides()
        model = " (a model, not a measurement)" if predict.modelled(self.label) else ""
        return (f"{got} {k} of {self.n} {self._rule()}{model} ({self.share:.0%}); "
                f"{low} guessed lower, {high} higher.")

    # --- the picture ---
    def png(self, shown: bool, names: bool = False) -> bytes:
        """The picture as PNG bytes, drawn without pyplot (so a notebook's inline backend shows nothing
        twice, and a background thread may draw it)."""
        import matplotlib
        from matplotlib.figure import Figure

        from . import plot
        with matplotlib.rc_context(plot.PROJECTOR):
            fig = Figure(figsize=(8.0, 4.4), layout="constrained")
            ax = fig.add_subplot()
            if not self.n:
                ax.text(0.5, 0.5, "no guesses yet", ha="center", va="center", transform=ax.transAxes)
                ax.set_axis_off()
            elif self.kind == "choice":
                self._draw_choices(ax, shown, names)
            else:
                self._draw_numbers(ax, shown, names)
            ax.set_title("\n".join(textwrap.wrap(self.question or self.key, 70)), fontsize="medium")
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=90)
        return buf.getvalue()

    def _draw_numbers(self, ax, shown: bool, names: bool):
        log = self.log(shown)
        measured = float(self.measured) if shown and self.measured is not None else None
        values = self.values + ([measured] if measured is not None else [])
        lo, hi = min(values), max(values)
        to = (lambda v: math.log10(v)) if log else (lambda v: v)
        width = (to(hi) - to(lo)) / 30 or 1.0
        stacks: Counter = Counter()
        mine = self.mine
        for g in sorted(self.guesses, key=lambda g: g.value):   # dots stack in bins: a dot plot
            b = math.floor((to(g.value) - to(lo)) / width)
            y = stacks[b] + 0.5
            stacks[b] += 1
            own = mine is not None and g is mine
            ax.plot([g.value], [y], "o", ms=11 if own else 9, color="tab:orange" if own else "tab:blue",
                    mec="black" if own else "white", zorder=3, label="your guess" if own else None)
            if own:
                ax.annotate("you", (g.value, y), xytext=(0, 9), textcoords="offset points", ha="center",
                            fontsize="small", weight="bold")
            elif names and self.n <= MAX_NAMES:
                ax.annotate(g.student, (g.value, y), xytext=(5, 2), textcoords="offset points",
                            fontsize="x-small", rotation=30)
        top = max(max(stacks.values()) + 1, 4)
        med = self.median
        ax.axvline(med, color="dimgray", ls="--", lw=1.5, label=f"class median {self.show(med)}")
        if measured is not None:
            if not predict.counted(self.label):
                ax.axvspan(measured / 2, measured * 2, color="tab:green", alpha=0.13, label="within 2×")
            ax.axvline(measured, color="tab:red", lw=3, label=f"{self.label} {self.show(measured)}")
        if log:
            from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
            ax.set_xscale("log")
            ax.set_xlim(lo / 1.6, hi * 1.6)
            ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))      # 1, 2, 5, 10, 20: a scale to read
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: readable(x)))   # 10, not 10¹
            ax.xaxis.set_minor_formatter(NullFormatter())
        else:
            pad = (hi - lo) * 0.08 or abs(hi) * 0.1 or 1.0
            ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(0, top)
        ax.set_yticks([])
        ax.set_ylabel("students")
        ax.set_xlabel(f"guess ({self.unit})" if self.unit else "guess")
        ax.legend(loc="upper right", fontsize="small", framealpha=0.9)
        ax.grid(True, axis="x", which="major", alpha=0.3)

    def _draw_choices(self, ax, shown: bool, names: bool):
        counts = Counter(self.values)
        options = [a for a, _ in counts.most_common()]
        right = self.measured if shown else None
        if right is not None and right not in options:      # nobody picked it: its bar is empty
            options.append(right)
        wrong = {a for a, _ in self.wrong} if shown else set()
        colors = ["tab:green" if a == right else "tab:red" if a in wrong else
                  ("tab:gray" if right is not None else "tab:blue") for a in options]
        ys = list(range(len(options)))[::-1]
        ax.barh(ys, [counts[a] for a in options], color=colors)
        ax.set_yticks(ys, ["\n".join(textwrap.wrap(str(a), 24)) for a in options])
        mine = self.mine
        for y, a in zip(ys, options):
            tag = f"{counts[a]}" + (" ← yours" if mine is not None and mine.value == a else "")
            if a == right:
                tag += "  ✓ " + self.label
            ax.annotate(tag, (counts[a], y), xytext=(6, 0), textcoords="offset points", va="center",
                        fontsize="small")
        ax.set_xlim(0, max(counts.values()) * 1.6 + 1)
        ax.set_xlabel("students")


# --- reading the class ----------------------------------------------------------------------------------
def _kernel_started() -> datetime.datetime | None:
    """When this process started (Linux: /proc), in the journal's local time, to the second; else None."""
    try:
        after_name = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(after_name[19])          # field 22, starttime, counted from field 3 after the name
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime"))
        return datetime.datetime.fromtimestamp(boot + ticks / os.sysconf("SC_CLK_TCK")).replace(microsecond=0)
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _when(e: dict) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(str(e.get("time", "")))
    except ValueError:
        return None


def revealed_here(key: str) -> dict | None:
    """The latest reveal of `key` in this kernel, from this account's own log: the measurement the
    instructor just made by running the solution's prediction. None if there is none yet."""
    started = _kernel_started()
    found = None
    for e in journal.entries():
        if e.get("key") != key or e.get("measured") is None:
            continue
        if started is None:
            if key not in predict._asked:        # no start time to compare: asked in this process at least
                continue
        else:
            when = _when(e)
            if when is None or when < started - datetime.timedelta(seconds=1):
                continue
        found = e
    return found


def _class_folder(where) -> Path | None:
    if where is None:
        where = os.environ.get("COURSE_CLASS_DIR", "").strip() or None
    return None if where is None else Path(where).expanduser()


def read_class(where=None) -> tuple[dict[str, list[dict]], str, list[str]]:
    """(logs by student, scope, notes). scope "class": the class folder (or collected logs) was read;
    "own": there is none, or this account may not list it (a student on the hub), so only its own log."""
    folder = _class_folder(where)
    me = journal.student()
    if folder is None:
        return ({me: journal.entries()}, "own",
                ["No class folder here (COURSE_CLASS_DIR is not set and no where= was given): only your own "
                 "guess is shown. An instructor passes where= a folder of collected logs."])
    if not folder.exists():
        raise FileNotFoundError(f"{folder} does not exist: pass where= the class folder (the hub sets "
                                "COURSE_CLASS_DIR) or a folder of collected logs")
    if folder.is_dir() and not os.access(folder, os.R_OK | os.X_OK):
        return ({me: journal.entries()}, "own",
                ["The class's guesses are shown on your instructor's screen; here, yours against the answer."])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logs = journal.class_logs(folder)
    return logs, "class", [str(w.message) for w in caught]


def _majority(values, default=""):
    values = [v for v in values if v not in (None, "")]
    return Counter(values).most_common(1)[0][0] if values else default


def view(key: str, where=None, *, measured=None, label: str | None = None) -> ClassView:
    """Read the class and build the view of `key` (what reveal() shows, without a screen)."""
    logs, scope, notes = read_class(where)
    own = [e for e in journal.entries() if e.get("key") == key]
    theirs = [e for entries in logs.values() for e in entries if e.get("key") == key]
    about = own[-1:] or theirs      # the question as this kernel asked it, else as the class's logs say
    kind = _majority((e.get("kind") for e in about), "number")
    kind = "choice" if kind == "choice" else "number"
    answer = None if measured is not None else revealed_here(key)
    if scope == "own" and answer is None and measured is None:     # a student: their own latest reveal
        answer = next((e for e in reversed(own) if e.get("measured") is not None), None)
    value = measured if measured is not None else (answer or {}).get("measured")
    if value is not None and kind == "number":
        value = _number(value)
        if value is None and measured is not None:
            raise ValueError(f"measured={measured!r} is not a number: pass the value the GPU just gave")
    guesses, bad = class_guesses(key, logs, kind)
    if bad:
        notes.append(f"{bad} guess{'es' if bad > 1 else ''} that {'are' if bad > 1 else 'is'} not a number "
                     "left out.")
    if not own and not theirs and scope == "class":
        seen = sorted({str(e["key"]) for es in logs.values() for e in es if e.get("key")})
        near = [k for k in seen if k.split(".")[0] == key.split(".")[0]] or seen
        notes.append(f"No log mentions {key} yet: is the key right? Keys in the logs: "
                     f"{', '.join(near[:12]) or 'none yet'}.")
    me = journal.student()
    return ClassView(key=key, question=_majority(e.get("question") for e in about), kind=kind,
                     unit=_majority(e.get("unit") for e in about), guesses=guesses,
                     label=label or (answer or {}).get("label") or "measured", measured=value,
                     me=me if any(g.student == me for g in guesses) else "",
                     scope=scope, notes=notes)


# --- on the screen -----------------------------------------------------------------------------------
_live: dict[str, threading.Event] = {}     # key -> the stop signal of the reveal of it now on screen


class Reveal:
    """What reveal() returns: .view (the numbers), .refresh() (read again now), .stop() (stop reading)."""

    def __init__(self, key, where, measured, label, names):
        self.key, self.where, self.names = key, where, names
        self._measured, self._label = measured, label
        self.shown = False
        self.view = view(key, where, measured=measured, label=label)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._widgets: dict = {}
        self._drawn = None

    def __repr__(self) -> str:
        return self.view.paragraph(self.shown)

    def _ipython_display_(self):
        """Already on screen (the widget, or the printed paragraph): a cell's last value adds nothing."""

    def refresh(self) -> bool:
        """Read the class again; redraw if anything changed. True if it did."""
        with self._lock:
            try:
                v = view(self.key, self.where, measured=self._measured, label=self._label)
            except (OSError, ValueError) as err:     # the folder went away mid-lecture: say it, keep going
                self.view.notes = [f"could not read the class: {err}"]
                v = self.view
            self.view = v
            return self._draw()

    def show_measurement(self, _=None):
        with self._lock:
            self.shown = True
        self.refresh()

    def stop(self):
        self._stop.set()

    def _draw(self) -> bool:
        v = self.view
        state = (self.shown, v.measured, v.label, tuple(v.guesses), tuple(v.notes))
        if state == self._drawn or not self._widgets:
            return False
        self._drawn = state
        w = self._widgets
        w["text"].value = _html_paragraph(v, self.shown, self.names)
        w["picture"].value = v.png(self.shown, self.names)
        w["button"].disabled = self.shown and v.measured is not None
        return True

    def _poll(self, every: float, minutes: float):
        end = datetime.datetime.now() + datetime.timedelta(minutes=minutes)
        while not self._stop.wait(every):
            if datetime.datetime.now() > end:
                self._widgets["status"].value = (f"<i>stopped reading the class after {minutes:g} min: run the "
                                                 "cell again to read it again</i>")
                return
            try:
                self.refresh()
            except Exception as err:  # a thread's error would vanish: put it on the screen and stop
                self._widgets["status"].value = html.escape(f"stopped reading the class: {err!r}")
                return


def _html_paragraph(v: ClassView, shown: bool, names: bool) -> str:
    text = f"<b>{html.escape(v.paragraph(shown))}</b>"
    if names and v.guesses and (v.kind == "choice" or v.n > MAX_NAMES):   # the picture has no room for them
        text += "<br>" + html.escape("; ".join(f"{g.student}: {v.show(g.value)}" for g in v.guesses))
    return text


def reveal(key: str, *, measured=None, label: str | None = None, where=None, names: bool = False,
           every: float = EVERY, minutes: float = MINUTES) -> Reveal:
    """Show the class's guesses for `key`; the measurement behind a button (see the module's docstring).

    measured: the answer, if not this kernel's own reveal of `key` (label: its word, "measured" by default).
    where: the class folder or a folder of collected logs (default: COURSE_CLASS_DIR).
    names: write each student's id beside their guess. every, minutes: how often and how long to read the
    class again while shown (every=0: never)."""
    if not isinstance(key, str) or not key.strip():
        raise ValueError(f"reveal takes a prediction's key, e.g. reveal('04.speedup'), not {key!r}")
    for name, v in (("every", every), ("minutes", minutes)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise ValueError(f"{name}= takes a number of {'seconds' if name == 'every' else 'minutes'} "
                             f">= 0, not {v!r}")
    r = Reveal(key, where, measured, label, names)
    if not env.live():
        r.shown = True
        print(r.view.paragraph(True))
        if env.in_notebook():
            from IPython.display import Image, display
            display(Image(data=r.view.png(True, names)))
        return r
    import ipywidgets as w
    from IPython.display import display
    button = w.Button(description="Show the measurement", button_style="primary",
                      layout=w.Layout(width="auto"))
    r._widgets = dict(text=w.HTML(), picture=w.Image(format="png", layout=w.Layout(max_width="100%")),
                      button=button, status=w.HTML())
    button.on_click(r.show_measurement)
    r._draw()
    display(w.VBox([r._widgets["text"], r._widgets["picture"], w.HBox([button, r._widgets["status"]])]))
    if every > 0 and minutes > 0:
        old = _live.get(key)
        if old is not None:
            old.set()                     # the same question shown again: the older one stops reading
        _live[key] = r._stop
        threading.Thread(target=r._poll, args=(every, minutes), daemon=True, name=f"reveal {key}").start()
    return r
