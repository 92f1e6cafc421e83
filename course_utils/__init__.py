"""Helpers for the Feed the Beast course. `import course_utils` first, before any kernel is defined."""
import os as _os
import sys as _sys


def _loading_line():
    """Importing torch, Triton and the course takes seconds (on the H100 machine, 2026-11-24: 4.5 s, 6.6 s
    on a fresh start, torch alone 4.5 s warm). Someone watching a notebook sees a line at once instead of a
    frozen cell; it is blanked once done. What only later cells use (pyplot, ipywidgets, Dynamo and
    Inductor) is imported there, not here: tests/test_import_cost.py holds the package to that."""
    if "ipykernel" not in _sys.modules or _os.environ.get("COURSE_HEADLESS", "0") not in ("", "0"):
        return None
    from IPython import get_ipython
    if not hasattr(get_ipython(), "kernel"):   # ipykernel imported, but no kernel running (pytest, say)
        return None
    from IPython.display import display
    return display({"text/plain": "loading torch, Triton and the course: a few seconds, longer on a first start"},
                   raw=True, display_id=True)


_loading = _loading_line()
from . import environment as env  # noqa: E402,F401  (must come first: it decides TRITON_INTERPRET)
from .environment import DEVICE, INTERPRET, ON_GPU, pick  # noqa: E402,F401
from . import _interp  # noqa: E402,F401  (bounds-checks every interpreted load and store)
from . import hints, trips  # noqa: E402,F401
from . import capability  # noqa: E402,F401  (what this GPU gets: dtypes, matmul tiles, a one-line note)
from . import targets, tune  # noqa: E402,F401  (how a target is measured; launch parameters searched per GPU)

hints.install()  # in Jupyter, a known Triton error ends with a one-line hint

# The modules a lesson imports by name (`from course_utils import check`) load on first use, so that
# `import course_utils as cu; cu.check.online_softmax(fn)` works as well without `import course_utils`
# paying for them up front (PEP 562; tests/test_import_cost.py holds both to that). `cu.glossary("HBM")`
# calls the glossary module itself (course_utils/glossary.py makes it callable).
_ON_FIRST_USE = ("bench", "check", "classroom", "glossary", "grade", "plot", "predict", "progress",
                 "timeline")


def __getattr__(name):
    if name in _ON_FIRST_USE:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")   # also sets it here: the next lookup is direct
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_ON_FIRST_USE))

if _loading is not None:
    _loading.update({"text/plain": ""}, raw=True)
