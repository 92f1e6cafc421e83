"""Show that a long measurement is moving, so a room never stares at a frozen cell.

    for k in progress.steps([1, 2, 4, 8], "timing k cosines"):
        ...

Live in JupyterLab: a progress bar under the cell, naming the step it is on and the seconds so far.
Anywhere else (COURSE_HEADLESS=1, a script, a log): nothing for quick loops, and a line on stderr each
time another 3 s have passed, so a long run in a log shows where it is."""
from __future__ import annotations

import sys
import time

from . import environment as env

LOG_EVERY_S = 3.0


def steps(items, label: str, *, show=str):
    """Yield the items of `items` one by one while showing progress; show(item) names a step."""
    items = list(items)
    if not items:
        return
    bar = _bar(label, len(items)) if env.live() else None
    start = last_log = time.perf_counter()
    for i, item in enumerate(items):
        if bar is not None:
            bar.value = i
            bar.description = f"{label}: {show(item)}"
        yield item
        now = time.perf_counter()
        if bar is None and now - last_log >= LOG_EVERY_S and i + 1 < len(items):
            print(f"[{label}: {i + 1}/{len(items)} done, {now - start:.0f} s]", file=sys.stderr, flush=True)
            last_log = now
    if bar is not None:
        bar.value = len(items)
        bar.description = f"{label}: done in {time.perf_counter() - start:.1f} s"
        bar.bar_style = "success"


def _bar(label: str, total: int):
    import ipywidgets as w
    from IPython.display import display
    bar = w.IntProgress(value=0, min=0, max=total, description=label,
                        style={"description_width": "initial"}, layout=w.Layout(width="60%"))
    display(bar)
    return bar
