"""The course's three pictures: a roofline, bars of times, and curves over a problem size.

matplotlib only. Each function draws into `ax` (or a new figure) and returns the Axes; a notebook's
inline backend shows the figure at the end of the cell, and with MPLBACKEND=Agg nothing opens.
matplotlib is imported at the first figure, not with the course: a lesson's first cell does not wait
for it (about a second on a fresh machine).
"""
from __future__ import annotations

import numpy as np


# Readable from the back of a classroom: text a size or two above matplotlib's defaults. Set for every
# figure drawn here (Jupyter's inline backend applies its own settings when pyplot is imported).
PROJECTOR = {"font.size": 13, "axes.titlesize": 14, "axes.labelsize": 13, "xtick.labelsize": 12,
             "ytick.labelsize": 12, "legend.fontsize": 11, "lines.linewidth": 2.0, "lines.markersize": 6}


def pyplot():
    """matplotlib.pyplot, in the course's style: for a figure drawn by hand, `plt = plot.pyplot()`."""
    import matplotlib.pyplot as plt
    plt.rcParams.update(PROJECTOR)
    return plt


def style() -> None:
    pyplot()


def __getattr__(name):
    if name == "plt":   # plot.plt, as when pyplot was imported with this module
        return pyplot()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _axes(ax, size=(6.4, 4.2)):
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def roofline(ceilings, points=(), ax=None):
    """Draw the roofline of `ceilings` (a bench.Ceilings) on log-log axes.

    points: (label, flops_per_byte, achieved_tflops) triples, drawn as dots. A point with no
    FLOPs (a copy) cannot sit on a log axis; it is listed under the plot instead."""
    ax = _axes(ax)
    slope = ceilings.copy_gbps / 1e3          # TFLOP/s gained per FLOP/byte while memory-bound
    roof, ridge = ceilings.matmul_tflops, ceilings.ridge
    placed = [p for p in points if p[1] > 0 and p[2] > 0]
    off = [p for p in points if not (p[1] > 0 and p[2] > 0)]
    lo = min([ridge / 3e3] + [p[1] / 4 for p in placed])
    hi = max([ridge * 30] + [p[1] * 4 for p in placed])
    x = np.geomspace(lo, hi, 256)
    ax.loglog(x, np.minimum(x * slope, roof), color="black", lw=2)
    ax.axvline(ridge, color="gray", ls=":", lw=1)
    bottom = lo * slope / 2
    ax.annotate(f"ridge: {ridge:.0f} FLOP/byte", xy=(ridge, bottom), xytext=(4, 6), textcoords="offset points",
                fontsize="small", color="dimgray")
    mid = (lo * ridge) ** 0.5
    ax.text(mid, mid * slope * 1.8, f"memory: {ceilings.copy_gbps:,.0f} GB/s", fontsize="small", ha="right")
    ax.text(ridge * 1.2, roof * 1.25, f"compute: {roof:,.0f} TFLOP/s", fontsize="small")
    style = dict(marker="o", ls="none", ms=8)
    if not ceilings.measured:  # hollow dots: modelled points, not measurements
        style.update(mfc="none", mew=2)
    for label, fpb, tf in placed:
        ax.plot([fpb], [tf], **style)
        ax.annotate(label, (fpb, tf), xytext=(6, -12), textcoords="offset points", fontsize="small")
    ax.set_ylim(bottom, roof * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved to or from HBM)")
    ax.set_ylabel("TFLOP/s")
    if ceilings.measured:
        ax.set_title(f"Roofline measured on {ceilings.device}")
    else:
        ax.set_title(f"MODEL: {ceilings.device} datasheet, not measured")
    if off:
        names = ", ".join(p[0] for p in off)
        ax.annotate(f"not drawn (no FLOPs, so no place on a log axis): {names}", xy=(0, 0),
                    xycoords="axes fraction", xytext=(0, -42), textcoords="offset points", fontsize="x-small")
    ax.grid(True, which="major", alpha=0.3)
    return ax


def bars(report_or_dict, *, ax=None, ylabel=None, title=None):
    """Bar chart of a bench.Report (its measured or modelled ms) or of a dict name -> value."""
    measured = True
    if hasattr(report_or_dict, "rows"):
        r = report_or_dict
        names = [row["impl"] for row in r.rows]
        values = [row.get(r.key) if row["status"] == "ok" else None for row in r.rows]
        ylabel = ylabel or r.header(r.key)
        title = title or r.title
        measured = r.measured
    else:
        names, values = list(report_or_dict), list(report_or_dict.values())
    ax = _axes(ax, size=(max(4.0, 1.3 * len(names) + 2), 3.6))
    heights = [v if v is not None else 0 for v in values]
    bars_ = ax.bar(names, heights, color=["#4c72b0" if measured else "#bbbbbb"] * len(names),
                   edgecolor="black", hatch=None if measured else "//")
    for b, v in zip(bars_, values):
        text = "not written yet" if v is None else f"{v:.3g}"
        ax.annotate(text, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                    xytext=(0, 2), textcoords="offset points", fontsize="small")
    ax.set_ylabel(ylabel or "")
    if not measured:
        title = (title + ": " if title else "") + "MODEL, not measured"
    ax.set_title(title or "")
    ax.margins(y=0.15)
    return ax


def curves(x, series: dict, xlabel: str, ylabel: str, logx: bool = True, logy: bool = True,
           title: str = "", ax=None):
    """One line per entry of `series` (name -> values over x)."""
    ax = _axes(ax)
    for name, ys in series.items():
        ax.plot(list(x), list(ys), marker="o", ms=4, label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if series:
        ax.legend()
    ax.grid(True, which="major", alpha=0.3)
    return ax


def calibration(rows, ax=None, title: str = "Your predictions: guessed against revealed"):
    """Guess (x) against the revealed value (y) for predictions in any units, log-log, with the diagonal
    where a perfect guess lands and a band of a factor of 2 around it. rows: dicts with guess, measured,
    lesson and modelled (predict.calibration().rows). Hollow markers: the revealed value was a MODEL."""
    ax = _axes(ax, size=(6.4, 6.0))
    if not rows:
        ax.text(0.5, 0.5, "no predictions recorded yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        return ax
    values = [r["guess"] for r in rows] + [r["measured"] for r in rows]
    lo, hi = min(values) / 3, max(values) * 3
    x = np.geomspace(lo, hi, 64)
    ax.loglog(x, x, color="black", lw=1.5, label="guess = revealed")
    ax.fill_between(x, x / 2, x * 2, color="gray", alpha=0.15, label="within 2x")
    lessons = sorted({r["lesson"] for r in rows})
    colors = pyplot().get_cmap("tab10")
    for i, lesson in enumerate(lessons):
        mine = [r for r in rows if r["lesson"] == lesson]
        for modelled in (False, True):
            pts = [r for r in mine if bool(r.get("modelled")) == modelled]
            if pts:
                ax.plot([r["guess"] for r in pts], [r["measured"] for r in pts], "o", ms=7, color=colors(i % 10),
                        mfc="none" if modelled else colors(i % 10), mew=2,
                        label=f"lesson {lesson}" if not modelled or len(pts) == len(mine) else None)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("your guess")
    ax.set_ylabel("revealed (measured, counted or modelled)")
    ax.set_title(title)
    ax.legend(fontsize="x-small", ncol=2, loc="upper left")
    ax.grid(True, which="major", alpha=0.3)
    return ax
