"""What each lab is worth, and how a scorecard's rows become its score: one place, read by the scorecard
(grade/_card.py, its total line) and by the nbgrader course (tools/nbgrader_course.py, its test cells).

Correct before fast. A lab's points are two parts:
- correctness points, for its correctness and budget rows (every row that is not a timing): those points
  times the share of the judged rows that passed (a row not measured here, such as bf16 on a GPU without
  it, counts neither way);
- speed points, for its performance rows (measured on a GPU only), awarded only to a kernel whose
  correctness and budget rows all passed: those points times the share of the measured performance rows
  that met their target. Where none was measured (no GPU, a rehearsed plan) they are not awarded, and
  the score says so in one line (NOT_MEASURED_HERE).

So a kernel that fails any correctness or budget row scores less than its correctness points, and a
right kernel scores at least them: a wrong kernel never outranks a right one, however slow.

The weights are chosen by the work each lab is, not counted from rows, so they are the same whichever
machine prepares the course (a GPU's card has more rows than the CPU's)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LabPoints", "LABS", "BY_EXERCISE", "BY_LAB", "Score", "score", "NOT_MEASURED_HERE"]

NOT_MEASURED_HERE = "speed: not measured here, grade on the class's GPU"


@dataclass(frozen=True)
class LabPoints:
    lab: str            # the notebook and nbgrader assignment: labs/<lab>.ipynb
    exercise: str       # its grader's name in the hints and the student's log: Scorecard(hints=exercise)
    correctness: int    # for the correctness and budget rows
    speed: int          # for the performance rows, awarded once every correctness and budget row passed
    why: str            # the work that sets the weight

    @property
    def total(self) -> int:
        return self.correctness + self.speed


LABS = (
    LabPoints("lab1_swiglu", "lab1.swiglu", 8, 2,
              "one elementwise kernel and its launch: the smallest lab"),
    LabPoints("lab2_add_rmsnorm_backward", "lab2.add_rmsnorm", 15, 5,
              "a forward and a backward kernel, a reduction across rows, an autograd Function"),
    LabPoints("lab3_cross_entropy", "lab3.cross_entropy", 15, 5,
              "one kernel, two walks over a 128k-wide row, a mean across programs, the gradient in place"),
    LabPoints("lab4_flash_attention_backward", "lab4.flash_backward", 24, 6,
              "two tiled tl.dot kernels and the backward's algebra: the hardest derivation of the course"),
    LabPoints("lab5_flash_decoding", "lab5.flash_decoding", 20, 10,
              "every kernel the student's own design (split, merge, GQA, ragged): speed at B = 1 is the point"),
    LabPoints("lab6_decode_step", "lab6.decode_step", 20, 10,
              "a whole decode step's kernels in a CUDA graph, against torch.compile's: speed is the point"),
)
BY_EXERCISE = {p.exercise: p for p in LABS}
BY_LAB = {p.lab: p for p in LABS}


def _points(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class Score:
    correctness: float
    correctness_points: int
    speed: float
    speed_points: int
    speed_line: str     # one line: what the speed points are and why

    @property
    def total(self) -> float:
        return round(self.correctness + self.speed, 2)

    @property
    def points(self) -> int:
        return self.correctness_points + self.speed_points

    def text(self) -> str:
        return (f"score {_points(self.total)} of {self.points}: correctness {_points(self.correctness)} of "
                f"{self.correctness_points}; {self.speed_line}")


def score(points: LabPoints, *, gate_passed: int, gate_failed: int, speed_passed: int, speed_failed: int,
          speed_rows: int) -> Score:
    """The score of a card whose correctness and budget rows gave gate_passed / gate_failed (rows not
    measured left out) and whose speed_rows performance rows gave speed_passed / speed_failed."""
    for name, n in (("gate_passed", gate_passed), ("gate_failed", gate_failed), ("speed_passed", speed_passed),
                    ("speed_failed", speed_failed), ("speed_rows", speed_rows)):
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"score(): {name} is a count of rows, a whole number ≥ 0; got {n!r}")
    if speed_passed + speed_failed > speed_rows:
        raise ValueError(f"score(): {speed_passed} + {speed_failed} speed rows judged, more than the "
                         f"{speed_rows} the card has")
    judged = gate_passed + gate_failed
    correctness = round(points.correctness * gate_passed / judged, 2) if judged else 0.0
    correct = judged > 0 and gate_failed == 0
    measured = speed_passed + speed_failed
    speed = 0.0
    if not speed_rows:
        line = "speed: this card has no performance row"
    elif not correct:
        line = (f"speed: 0 of {points.speed}, awarded only to a kernel whose correctness and budget rows "
                "all pass")
    elif not measured:
        line = NOT_MEASURED_HERE
    else:
        speed = round(points.speed * speed_passed / measured, 2)
        line = (f"speed {_points(speed)} of {points.speed}: {speed_passed} of {measured} performance "
                f"row{'s' if measured > 1 else ''} met {'their' if measured > 1 else 'its'} target")
    return Score(correctness, points.correctness, speed, points.speed, line)
