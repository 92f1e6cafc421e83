"""The scorecard every lab's grader fills in: one row per criterion, pass, fail or not measured, with
what was measured, the target, and for a failure a diagnosis (what was observed, and the likely cause).

    from course_utils.check._core import CheckFailed
    from course_utils.grade._card import Scorecard

    def my_lab(fn):
        card = Scorecard("Lab 9 · fused thing")
        with card.criterion("fp32, ragged sizes: matches PyTorch", target="rtol 1e-5"):
            out = card.call(fn, x)                         # the stub and crashes become the row's diagnosis
            if not torch.allclose(out, ref):
                raise CheckFailed("3 of 97 elements are wrong ...: is the tail masked?")
            card.measured("max error 2e-7")                # optional: what this row measured
        card.budget("one launch, each byte once", fn, (x,), launches=1, bytes=8 * x.numel())
        card.performance("fp16 at 256 MiB: % of copy bandwidth", lambda: 100 * copy_ms / bench.time(...),
                         target=90, unit=" %")
        return card.finish()     # shows the card; raises GradeFailed if a row failed

Rules a row follows:
- `criterion` is a block. CheckFailed inside it fails the row with its message as the diagnosis (with
  Scorecard(..., hints="labN.exercise"), followed by "See hint N" when a hint of that exercise lists the
  failure's diagnosis key in its `addresses`, as check.<exercise> does); the
  stub's NotImplementedError says "still the stub"; any other exception (a crashing kernel, an
  interpreter error, a bug in the student's wrapper) fails the row as "crashed: <type: first line>"
  with the hint the course has for that error and where in the student's code it came from. Nothing
  propagates except KeyboardInterrupt; the next criterion still runs. After a CUDA error the GPU
  context is broken, so the rows after it say "not run" instead of crashing in turn.
- `card.not_measured(why)` inside a block ends it as neither passed nor failed.
- `performance` measures only on a GPU; without one the row says "not measured: no GPU here" (a CPU
  time says nothing about a GPU kernel). While COURSE_PLAN rehearses another GPU's plan (capability.py),
  it says "not measured: rehearsing the T4's plan": the correctness rows still run. After a failed
  correctness or budget row it is not measured either (the speed of a wrong kernel means nothing); a
  performance row that missed its target does not stop the next one (each size is timed once the kernel
  is right). Nor is it measured on a card
  made with Scorecard(..., performance=False), or while COURSE_TIMING=off (the test suite sets it: its
  workers share the GPU, and a timed test would fail on another test's load).
- `budget` counts launches and bytes with trips (it works on the CPU interpreter too).
- `finish()` shows the card (HTML in a notebook, text elsewhere) with a total, "5 of 6 passed,
  1 not measured", and for a lab's card (Scorecard(..., hints="lab1.swiglu")) its score, the one nbgrader
  records: "score 8 of 10: correctness 8 of 8; speed: not measured here, grade on the class's GPU"
  (grade/_points.py: the weights and the rule, correct before fast). It notes the verdict in the student's
  log (journal: check, passed, the first failed row's name as diagnosis), then raises GradeFailed (an AssertionError; its .card is the card) if any row
  failed; otherwise it returns a Graded whose repr is that one-line total (the card is already on
  screen) and whose .rows are the rows (Row: name, target, status, measured, diagnosis, seconds).
  Where no shell shows a returned value (a script, pytest), the card is followed by that line printed,
  "✓ title: total" or "✗ title: total", as check.<exercise> prints its verdict there.
- `card.call(fn, *args)` runs the student's function as the lesson checkers do (poisoned allocations,
  the stub and crashes turned into CheckFailed). `budget(...)` returns the Trips, `performance(...)` the
  number, or None when the row did not pass / was not measured.
"""
from __future__ import annotations

import html
import os
import time as _clock
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field

from .. import _interp, capability, hints, journal, trips
from . import _points
from ..check._core import BYTES_SLACK, CheckFailed, say
from ..environment import INTERPRET, ON_GPU, in_notebook
from ..numbers import readable

__all__ = ["Scorecard", "GradeFailed", "Graded", "NOT_MEASURED", "PASSED", "FAILED"]

PASSED, FAILED, NOT_MEASURED = "passed", "failed", "not measured"
_MARK = {PASSED: "✓", FAILED: "✗", NOT_MEASURED: "–"}
_COLOUR = {PASSED: "#1a7f37", FAILED: "#cf222e", NOT_MEASURED: "#6e7781"}
NO_GPU = ("no GPU here: Triton runs in its CPU interpreter, and a CPU time says nothing about a GPU "
          "kernel's speed. Run this notebook on a GPU to measure it.")


class GradeFailed(AssertionError):
    """At least one row of a lab's scorecard failed; the scorecard above says which and why."""


class _NotMeasured(Exception):
    pass


@dataclass
class Row:
    name: str
    target: str = ""
    status: str = PASSED
    measured: str = ""
    diagnosis: str = ""
    seconds: float = 0.0
    timed: bool = False     # a performance row: its failure (too slow) never stops the next one's timing


@dataclass
class Graded:
    """What a passing grader returns: the card, and a one-line total as its repr."""
    card: "Scorecard"
    rows: list = field(default_factory=list)

    def __repr__(self) -> str:
        return f"✓ {self.card.title}: {self.card.total()}"


_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # course_utils/
_TRITON = os.path.dirname(os.path.abspath(__import__("triton").__file__))
_TORCH = os.path.dirname(os.path.abspath(__import__("torch").__file__))


def _where_in_student_code(exc: BaseException) -> str:
    """file:line of the innermost frame that belongs to neither the course, Triton nor torch: the
    student's own code, most likely (a notebook cell or their module)."""
    last = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        path = os.path.abspath(frame.f_code.co_filename)
        if not any(path.startswith(d) for d in (_HERE, _TRITON, _TORCH)):
            last = (frame.f_code.co_filename, line, frame.f_code.co_name)
    if last is None:
        return ""
    file, line, func = last
    if file.startswith("<ipython-input") or "ipykernel" in file:
        file = "a notebook cell"
    else:
        file = os.path.basename(file)
    return f"{func}, line {line} of {file}"


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "error_message", None) or exc).strip()
    first = text.splitlines()[0][:240] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _is_cuda_error(exc: BaseException) -> bool:
    text = " ".join(f"{type(e).__name__} {e}" for e in hints._chain(exc))
    return any(s in text for s in ("CUDA error", "illegal memory access", "AcceleratorError",
                                   "device-side assert", "unspecified launch failure"))


def diagnose_crash(exc: BaseException) -> str:
    """The diagnosis of an exception that is not a CheckFailed: the stub, a known Triton error with
    its hint, or the first line and where it came from."""
    if isinstance(exc, NotImplementedError):
        return (f"still the stub ({exc}). Write the code marked YOUR CODE HERE, run that cell, then run "
                "the grader again.")
    if isinstance(exc, _interp.OutOfBounds):
        return str(exc)
    where = _where_in_student_code(exc)
    hint = hints.explain(exc)
    msg = f"crashed: {_one_line(exc)}" + (f" (in {where})" if where else "") + "."
    if hint:
        return f"{msg} Likely cause: {hint}"
    return msg + (" Likely cause: a bug in the Python around the kernel (the launch, the arguments, the "
                  "output's allocation); call your function once on a small input to see the full trace.")


class Scorecard:
    """One lab's grade: rows added by criterion / budget / performance, shown by finish()."""

    def __init__(self, title: str, *, note: str = "", performance: bool = True, hints: str = ""):
        self.title = title
        self.note = note
        self.hints = hints          # the lab's exercise name in the hints ("lab5.flash_decoding"): a failed
                                    # row whose diagnosis key a hint addresses ends by naming that hint
        self.timing = performance   # False: performance rows are not measured (tests: no timed tests)
        self.rows: list[Row] = []
        self._row: Row | None = None
        self._broken: str = ""      # set after a CUDA error: the GPU context cannot run anything more
        self._start = _clock.perf_counter()

    # --- rows ------------------------------------------------------------------------------------
    @contextmanager
    def criterion(self, name: str, *, target: str = ""):
        """A block that is one row: it passes if the block ends normally."""
        row = Row(name, target)
        self.rows.append(row)
        self._row = row
        broken = self._broken
        t0 = _clock.perf_counter()
        try:
            yield row
        except _NotMeasured as e:
            row.status, row.diagnosis = NOT_MEASURED, str(e)
        except CheckFailed as e:
            row.status, row.diagnosis = FAILED, str(e).strip()
            more = hints.pointer(self.hints, e.diagnosis) if self.hints else ""
            if more and more not in row.diagnosis:
                row.diagnosis += "\n" + more
        except Exception as e:   # never let a student's crash take the grader down
            row.status, row.diagnosis = FAILED, diagnose_crash(e)
            if _is_cuda_error(e) and not broken:
                self._broken = ("the GPU context is broken by the CUDA error above; restart the Python kernel "
                                "(Kernel → Restart), fix that, and grade again.")
        finally:
            row.seconds = _clock.perf_counter() - t0
            self._row = None
        if broken:   # whatever the block did on a broken context says nothing about this criterion
            row.status, row.measured, row.diagnosis = NOT_MEASURED, "", f"not run: {broken}"

    def measured(self, value) -> None:
        """Record what the current row measured (a string, or a number shown to 3 digits)."""
        self._current("measured").measured = value if isinstance(value, str) else readable(value)

    def not_measured(self, why: str) -> None:
        """End the current block as neither passed nor failed, saying why."""
        self._current("not_measured")
        raise _NotMeasured(f"not measured: {why}")

    def call(self, fn, *args, name: str = ""):
        """fn(*args), with the checker's poisoned allocations (an element never written keeps a
        pattern compare() recognises) and its translation of the stub and of crashes."""
        from ..check._core import run
        return run(fn, *args, name=name or getattr(fn, "__name__", "your function"))

    def budget(self, name: str, fn, args, *, launches: int, bytes: int, slack: float = BYTES_SLACK,
               own_kernels: bool = True, target: str = ""):
        """A row that counts one call's launches and HBM bytes with trips and fails if it is over budget
        (more launches, or more than bytes·(1 + slack)). own_kernels: every launch must be a Triton
        kernel (not a PyTorch operator). Returns the Trips, or None if the row did not pass."""
        from ..check._core import budget as _budget
        target = target or (f"≤ {launches} launch{'es' if launches > 1 else ''}, ≤ {_bytes(bytes)} + {100 * slack:g} % "
                            f"= {_bytes(bytes * (1 + slack))}")
        with self.criterion(name, target=target) as row:
            t = _budget(fn, args, name=getattr(fn, "__name__", "your function"), launches=launches,
                        bytes=bytes, slack=slack)
            self.measured(f"{t.launches} launch{'es' if t.launches > 1 else ''}, {_bytes(t.bytes)}")
            foreign = [k.name for k in t.kernels if k.kind != "triton"]
            if own_kernels and foreign:
                raise CheckFailed(f"computed by PyTorch ({', '.join(foreign)}), not by a Triton kernel of yours: the "
                                  "lab asks for your own fused kernel.")
            row.trips = t
        return getattr(row, "trips", None) if row.status == PASSED else None

    def performance(self, name: str, measure, *, target: float, higher_is_better: bool = True, unit: str = "",
                    diagnosis: str = "", needs_correct: bool = True):
        """A row measured on a GPU only. measure() returns a number, or (number, detail text); the row
        passes if the number reaches target (≥ it, or ≤ it when higher_is_better=False). diagnosis: the
        likely cause when it does not. Returns the number, or None when not measured or crashed."""
        sign = "≥" if higher_is_better else "≤"
        result = {}
        with self.criterion(name, target=f"{sign} {readable(target)}{unit}") as row:
            self._may_time(row, needs_correct)
            value = measure()
            detail = ""
            if isinstance(value, tuple):
                value, detail = value
            result["value"] = value = float(value)
            self.measured(f"{readable(value)}{unit}" + (f" ({detail})" if detail else ""))
            ok = value >= target if higher_is_better else value <= target
            if not ok:
                raise CheckFailed(f"measured {readable(value)}{unit}, short of the target {sign} "
                                  f"{readable(target)}{unit}." + (f" {diagnosis}" if diagnosis else ""))
        return result.get("value")

    def _may_time(self, row: Row, needs_correct: bool) -> None:
        """Inside a performance row: end it as not measured where no GPU times it, timing is off, or an earlier
        correctness row failed."""
        row.timed = True
        if not ON_GPU or INTERPRET:
            self.not_measured(NO_GPU)
        if not self.timing:
            self.not_measured("timing switched off (performance=False).")
        if capability.rehearsal():   # COURSE_PLAN: another GPU's plan on this one; its times are not that GPU's
            self.not_measured(f"rehearsing {capability.rehearsal()} (COURSE_PLAN is set): the kernels ran with "
                              "its dtypes and tiles on this GPU, whose speed says nothing of that one's.")
        if needs_correct and any(r.status == FAILED and not r.timed for r in self.rows[:-1]):
            self.not_measured("an earlier row failed, and the speed of a wrong kernel means nothing.")
        if os.environ.get("COURSE_TIMING") == "off":   # the test suite: its runs share a GPU, and it times nothing
            self.not_measured("timing switched off (COURSE_TIMING=off, as the test suite sets it): speed is measured "
                              "where a notebook runs alone, by a student or tools/gpu_run.py.")

    def against(self, name: str, target, measure, *, diagnosis: str = "", needs_correct: bool = True):
        """A performance row judged by a targets.Target (course_utils/targets.py): measure() returns (your ms, the
        reference's ms, the reference's share of the copy ceiling or None, a detail text), both times taken now on
        this GPU. The row's target and its verdict name the GPU. Returns the Verdict, or None when not measured."""
        result = {}
        with self.criterion(name, target=target.text()) as row:
            self._may_time(row, needs_correct)
            mine, ref, share, detail = measure()
            v = result["verdict"] = target.judge(mine, ref, ref_share=share)
            self.measured(v.text.split("; target")[0] + (f"; {detail}" if detail else ""))
            if not v.ok:
                raise CheckFailed(f"{v.text}." + (f" {diagnosis}" if diagnosis else ""))
        return result.get("verdict")

    def _current(self, what: str) -> Row:
        if self._row is None:
            raise RuntimeError(f"card.{what}() belongs inside a `with card.criterion(...):` block")
        return self._row

    # --- the result ------------------------------------------------------------------------------
    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if r.status == FAILED]

    def score(self) -> "_points.Score | None":
        """This card's score by its lab's points (grade/_points.py), or None for a card of no lab."""
        points = _points.BY_EXERCISE.get(self.hints)
        if points is None:
            return None
        gate = [r for r in self.rows if not r.timed]
        speed = [r for r in self.rows if r.timed]
        return _points.score(points, gate_passed=sum(r.status == PASSED for r in gate),
                             gate_failed=sum(r.status == FAILED for r in gate),
                             speed_passed=sum(r.status == PASSED for r in speed),
                             speed_failed=sum(r.status == FAILED for r in speed), speed_rows=len(speed))

    def total(self) -> str:
        p, f, n = self.count(PASSED), self.count(FAILED), self.count(NOT_MEASURED)
        judged = p + f
        s = f"{p} of {judged} passed" if judged else "nothing judged"
        if n:
            s += f", {n} not measured"
        return s

    def _footer(self) -> str:
        s = f"{self.total()} · graded in {_clock.perf_counter() - self._start:.1f} s"
        if not ON_GPU or INTERPRET:
            s += " on the CPU interpreter (performance needs a GPU)"
        score = self.score()
        return s + (f"\n{score.text()}" if score else "")

    def text(self) -> str:
        lines = [self.title + (f" ({self.note})" if self.note else "")]
        for r in self.rows:
            lines.append(f"{_MARK[r.status]} {r.name}: {r.status}" +
                         (f"; measured {r.measured}" if r.measured else "") +
                         (f"; target {r.target}" if r.target else ""))
            if r.diagnosis:
                lines += ["    " + line for line in r.diagnosis.splitlines()]
        lines += self._footer().splitlines()
        return "\n".join(lines)

    __repr__ = text

    def _repr_html_(self) -> str:
        e = html.escape
        cells = []
        for r in self.rows:
            diag = f"<pre style='white-space:pre-wrap;margin:0;font-size:90%'>{e(r.diagnosis)}</pre>" \
                if "\n" in r.diagnosis else e(r.diagnosis)
            cells.append(
                f"<tr><td style='text-align:left'>{e(r.name)}</td>"
                f"<td style='color:{_COLOUR[r.status]};font-weight:bold;white-space:nowrap'>"
                f"{_MARK[r.status]} {r.status}</td><td style='text-align:left'>{e(r.measured)}</td>"
                f"<td style='text-align:left'>{e(r.target)}</td><td style='text-align:left'>{diag}</td></tr>")
        colour = _COLOUR[FAILED] if self.failed else _COLOUR[PASSED]
        return (f"<div><b>{e(self.title)}</b>{' · ' + e(self.note) if self.note else ''}"
                "<table><tr><th style='text-align:left'>criterion</th><th>result</th>"
                "<th style='text-align:left'>measured</th><th style='text-align:left'>target</th>"
                "<th style='text-align:left'>diagnosis</th></tr>" + "".join(cells) +
                f"</table><span style='color:{colour};font-weight:bold'>"
                f"{'<br>'.join(e(line) for line in self._footer().splitlines())}</span></div>")

    def show(self) -> None:
        if in_notebook():
            from IPython.display import display
            display(self)
        else:
            print(self.text())

    def finish(self, *, show: bool = True) -> Graded:
        """Show the card; raise GradeFailed if a row failed, else return a Graded (its repr: the total).
        Where no shell shows the returned value (a script, pytest) the card is followed by the verdict line,
        "✓ title: total" or "✗ title: total", as check.<exercise> prints its own."""
        if show:
            self.show()
        if self.hints:   # a lab's verdict, for the class's view of who is stuck where
            journal.append({"check": self.hints, "passed": not self.failed,
                            "diagnosis": self.failed[0].name if self.failed else None})
        if self.failed:
            first = self.failed[0]
            lines = first.diagnosis.splitlines() or ["(no diagnosis)"]
            pointer = next((ln for ln in lines[1:] if ln.startswith("See hint ")), "")  # from criterion()
            err = GradeFailed(f"{self.title}: {self.total()}. First failure, {first.name}: "
                              f"{lines[0][:200]}" + (f"\n{pointer}" if pointer else ""))
            err.card = self        # for tests and for anyone who wants the rows
            if show:
                say(f"✗ {self.title}: {self.total()}")   # the diagnoses are on the card just shown
            raise err
        graded = Graded(self, list(self.rows))
        if show:
            say(repr(graded))
        return graded


def _bytes(n: float) -> str:
    n = float(n)
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{readable(n / size)} {unit}"
    return f"{int(n):,} B"
