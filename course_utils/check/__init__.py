"""Answer checks, one per exercise, named after it: `check.vector_add(fn)`, `check.bias_gelu(fn)`, ...

Each runs your function on fresh random inputs (ragged sizes, large magnitudes, the dtypes that
matter) and either returns a short report or raises CheckFailed, an AssertionError whose message
says what is wrong and the likely cause."""
import importlib
import pkgutil

from ._core import CheckFailed, Passed, explain, ready, unwritten  # noqa: F401

# Each topic module lists its checkers in __all__; they are all reachable as check.<exercise>.
for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        _m = importlib.import_module(f"{__name__}.{_mod.name}")
        globals().update({name: getattr(_m, name) for name in _m.__all__})
