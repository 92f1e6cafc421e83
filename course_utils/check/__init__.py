"""Answer checks, one per exercise, named after it: `check.vector_add(fn)`, `check.bias_gelu(fn)`, ...

Each runs your function on fresh random inputs (ragged sizes, large magnitudes, the dtypes that
matter) and either returns a short report or raises CheckFailed, an AssertionError whose message
says what is wrong and the likely cause."""
import functools
import importlib
import pkgutil

from .. import hints
from ._core import CheckFailed, Passed, explain, ready, unwritten  # noqa: F401


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


# Each topic module lists its checkers in __all__; they are all reachable as check.<exercise>.
for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        _m = importlib.import_module(f"{__name__}.{_mod.name}")
        globals().update({name: pointing_to_hints(name, getattr(_m, name)) for name in _m.__all__})
