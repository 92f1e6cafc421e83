"""Graders for the labs, one per lab, named after its exercise: `grade.swiglu(fn)`, `grade.add_rmsnorm(...)`.

Each runs the correctness cases (random inputs drawn the same way on every call, ragged sizes, dtypes,
gradients), counts the launch
and byte budget with trips (on the CPU too) and, on a GPU, measures the performance target; it shows a
scorecard (each criterion, pass or fail, what was measured, the target, a diagnosis for each failure, a
total) and raises GradeFailed, an AssertionError, if any row failed. The scorecard itself is
course_utils/grade/_card.py: a new lab's grader is built on it."""
import functools
import importlib
import pkgutil

from ..environment import same_draws
from ._card import GradeFailed, Graded, Scorecard  # noqa: F401

def _short(grader):
    """`grader`, whose GradeFailed comes without the frames of the grader's own code: the card above it and its
    message say everything, and a student should not have to scroll through the course's source."""
    @functools.wraps(grader)
    def grade(*args, **kwargs):
        try:
            return grader(*args, **kwargs)
        except GradeFailed as e:
            raise e.with_traceback(None)
    return grade


# Each lab's module lists its grader in __all__; they are all reachable as grade.<exercise>.
for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        _m = importlib.import_module(f"{__name__}.{_mod.name}")
        globals().update({name: _short(same_draws(getattr(_m, name), name)) for name in _m.__all__})
