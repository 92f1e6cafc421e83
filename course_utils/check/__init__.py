"""Answer checks, one per exercise, named after it: `check.vector_add(fn)`, `check.bias_gelu(fn)`, ...

Each runs your function on random inputs (ragged sizes, large magnitudes, the dtypes that matter),
drawn the same way on every call so that one kernel always gets one verdict, and either returns a short
report or raises CheckFailed, an AssertionError whose message says what is wrong and the likely cause.
Outside a shell that shows the returned value (a script, pytest) the check prints that verdict too:
"✓ name: ..." or "✗ name: failed" and the diagnosis."""
import functools
import importlib
import pkgutil

from .. import hints, journal
from ..environment import same_draws
from ._core import CheckFailed, Passed, explain, ready, unwritten  # noqa: F401
from ._core import failed_verdict, say


def pointing_to_hints(exercise: str, checker):
    """`checker`, whose failures end by naming the hint of `exercise` that addresses their diagnosis."""
    @functools.wraps(checker)
    def check(*args, **kwargs):
        try:
            return checker(*args, **kwargs)
        except CheckFailed as e:
            more = hints.pointer(exercise, e.diagnosis)
            if more and e.args and more not in str(e.args[0]):
                e.args = (f"{e.args[0]}\n{more}",) + e.args[1:]
            raise
    return check


def showing_verdict(exercise: str, checker):
    """`checker`, which also prints its verdict where no shell shows it (a script, pytest): once, in any
    context, since a notebook, IPython and the plain REPL show the returned report or the traceback.
    Every verdict goes into the student's log, one line a call: the after-class page counts, per
    exercise, who finished and which diagnosis stopped each student first."""
    @functools.wraps(checker)
    def check(*args, **kwargs):
        try:
            result = checker(*args, **kwargs)
        except CheckFailed as e:
            journal.append({"check": exercise, "passed": False, "diagnosis": e.diagnosis})
            say(failed_verdict(exercise, e))
            # the message is the whole verdict: the frames of the checker's own code would only bury it
            raise e.with_traceback(None)
        except Exception:
            # not a verdict on the kernel (an argument the checker refuses, say): logged as not passed,
            # with no diagnosis, since nothing recognised a cause
            journal.append({"check": exercise, "passed": False, "diagnosis": None})
            raise
        journal.append({"check": exercise, "passed": True, "diagnosis": None})
        if result is not None:
            say(repr(result))
        return result
    return check


# Each topic module lists its checkers in __all__; they are all reachable as check.<exercise>.
for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        _m = importlib.import_module(f"{__name__}.{_mod.name}")
        globals().update({name: showing_verdict(name, pointing_to_hints(name, same_draws(getattr(_m, name), name)))
                          for name in _m.__all__})
