"""Helpers for the Feed the Beast course. `import course_utils` first, before any kernel is defined."""
from . import environment as env  # noqa: F401  (must come first: it decides TRITON_INTERPRET)
from .environment import DEVICE, INTERPRET, ON_GPU, pick  # noqa: F401
from . import _interp  # noqa: F401  (bounds-checks every interpreted load and store)
from . import hints, trips  # noqa: F401
from . import capability  # noqa: F401  (what this GPU gets: dtypes, matmul tiles, a one-line note)

hints.install()  # in Jupyter, a known Triton error ends with a one-line hint
