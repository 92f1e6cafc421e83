"""The course's three pictures: a roofline, bars of times, and curves over a problem size.

matplotlib only. Each function draws into `ax` (or a new figure) and returns the Axes; a notebook's
inline backend shows the figure at the end of the cell, and with MPLBACKEND=Agg nothing opens.
matplotlib is imported at the first figure, not with the course: a lesson's first cell does not wait
for it (about a second on a fresh machine).

Colours come from the Okabe-Ito palette (OKABE_ITO), which readers with any common colour-vision deficiency
tell apart, and where a colour alone would carry a meaning a marker or a hatch carries it too.
"""
from __future__ import annotations

import textwrap

import numpy as np


# Readable from the back of a classroom: text a size or two above matplotlib's defaults. Set for every
# figure drawn here (Jupyter's inline backend applies its own settings when pyplot is imported).
PROJECTOR = {"font.size": 13, "axes.titlesize": 14, "axes.labelsize": 13, "xtick.labelsize": 12,
             "ytick.labelsize": 12, "legend.fontsize": 11, "lines.linewidth": 2.0, "lines.markersize": 6}

# The Okabe-Ito palette: eight colours that stay distinct with protanopia, deuteranopia and tritanopia
# (M. Okabe and K. Ito, "Color Universal Design", 2008, https://jfly.uni-koeln.de/color/).
OKABE_ITO = {"blue": "#0072B2", "orange": "#E69F00", "bluish green": "#009E73", "vermillion": "#D55E00",
             "reddish purple": "#CC79A7", "sky blue": "#56B4E9", "yellow": "#F0E442", "black": "#000000"}
# The order lines, bars and groups take them: black is kept for ceilings and diagonals, yellow (faint on white)
# comes last.
CYCLE = [OKABE_ITO[c] for c in ("blue", "orange", "bluish green", "vermillion", "reddish purple", "sky blue",
                                "yellow")]
# Where colours alone would have to tell more groups apart than CYCLE holds (the lessons of the calibration
# picture), each group also gets a marker of its own.
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "h"]


def pyplot():
    """matplotlib.pyplot, in the course's style: for a figure drawn by hand, `plt = plot.pyplot()`."""
    import matplotlib.pyplot as plt
    from cycler import cycler    # matplotlib's own dependency
    plt.rcParams.update(PROJECTOR)
    plt.rcParams["axes.prop_cycle"] = cycler(color=CYCLE)
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
    xlabel = "arithmetic intensity (FLOP per byte moved to or from HBM)"
    if off:  # a second line of the label, so the layout makes room for it and nothing overlaps
        xlabel += f"\nnot drawn (no FLOPs, so no place on a log axis): {', '.join(p[0] for p in off)}"
    ax.set_xlabel(xlabel)
    ax.set_ylabel("TFLOP/s")
    if ceilings.measured:
        ax.set_title(f"Roofline measured on {ceilings.device}")
    else:
        ax.set_title(f"MODEL: {ceilings.device} datasheet, not measured")
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
    width = max(4.0, 1.3 * len(names) + 2)
    ax = _axes(ax, size=(width, 3.6))
    heights = [v if v is not None else 0 for v in values]
    bars_ = ax.bar(range(len(names)), heights, color=[OKABE_ITO["blue"] if measured else "#bbbbbb"] * len(names),
                   edgecolor="black", hatch=None if measured else "//")
    # long names ("torch.add(y, x, alpha)") on two or three lines, so that neighbours do not overlap
    ax.set_xticks(range(len(names)), [textwrap.fill(str(n), 16) for n in names])
    for b, v in zip(bars_, values):
        text = "not written yet" if v is None else f"{v:.3g}"
        ax.annotate(text, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                    xytext=(0, 2), textcoords="offset points", fontsize="small")
    ax.set_ylabel(ylabel or "")
    if not measured:
        title = (title + ": " if title else "") + "MODEL, not measured"
    ax.set_title(textwrap.fill(title or "", int(7.5 * width)))    # about the characters the width holds
    ax.margins(y=0.15)
    return ax


def curves(x, series: dict, xlabel: str, ylabel: str, logx: bool = True, logy: bool = True,
           title: str = "", ax=None):
    """One line per entry of `series` (name -> values over x). On a figure of its own the legend goes under the
    plot (legend()); on an axes passed in, one of several panels, it stays inside, where matplotlib finds room."""
    own = ax is None
    ax = _axes(ax)
    for i, (name, ys) in enumerate(series.items()):   # a marker each too: told apart in grey on a projector
        ax.plot(list(x), list(ys), marker=MARKERS[i % len(MARKERS)], ms=5, label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if series:
        legend(ax) if own else ax.legend()
    ax.grid(True, which="major", alpha=0.3)
    return ax


def legend(ax):
    """The legend of ax under the plot, where it hides no data point (inside, "best" still covered the first
    points of a rising curve once a label was long); call it again after adding a line, to list that one too."""
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize="small", frameon=False)


def calibration(rows, ax=None, title: str = "Your predictions: guessed against revealed"):
    """Guess (x) against the revealed value (y) for predictions in any units, log-log, with the diagonal
    where a perfect guess lands and a band of a factor of 2 around it. rows: dicts with guess, measured,
    lesson and modelled (predict.calibration().rows). Each lesson has a colour and a marker of its own, named in
    a legend beside the plot (ten lessons are more than colours alone tell apart); hollow markers: the revealed
    value was a MODEL. Sized to be read at a page's or a projector's width."""
    ax = _axes(ax, size=(9.0, 6.8))
    if not rows:
        ax.text(0.5, 0.5, "no predictions recorded yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        return ax
    values = [r["guess"] for r in rows] + [r["measured"] for r in rows]
    lo, hi = min(values) / 3, max(values) * 3
    x = np.geomspace(lo, hi, 64)
    ax.loglog(x, x, color=OKABE_ITO["black"], lw=1.5, label="guess = revealed")
    ax.fill_between(x, x / 2, x * 2, color="gray", alpha=0.15, label="within 2x")
    lessons = sorted({r["lesson"] for r in rows})
    for i, lesson in enumerate(lessons):
        color, marker = CYCLE[i % len(CYCLE)], MARKERS[i % len(MARKERS)]
        mine = [r for r in rows if r["lesson"] == lesson]
        for modelled in (False, True):
            pts = [r for r in mine if bool(r.get("modelled")) == modelled]
            if pts:
                ax.plot([r["guess"] for r in pts], [r["measured"] for r in pts], marker, ls="none", ms=10,
                        color=color, mfc="none" if modelled else color, mec=color if modelled else "black",
                        mew=2 if modelled else 0.8,
                        label=f"lesson {lesson}" if not modelled or len(pts) == len(mine) else None)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel("your guess")
    ax.set_ylabel("revealed (measured, counted or modelled)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False)
    ax.grid(True, which="major", alpha=0.3)
    return ax


# Registers per SM: 64 K 32-bit registers for every compute capability the course plans for (7.5 to 9.0),
# from the CUDA C++ Programming Guide's table of technical specifications per compute capability.
REGISTER_BYTES_PER_SM = 64 * 1024 * 4
REGISTER_SOURCE = "CUDA C++ Programming Guide (64 K 32-bit registers per SM)"


def memory_hierarchy(ceilings, ax=None):
    """Where a kernel's bytes can live on the GPU of `ceilings` (a bench.Ceilings), fastest and smallest at
    the top: registers, shared memory, L2, HBM, drawn as a pyramid (widths not to scale: the sizes are in the
    labels), labelled with the datasheet figures (course_utils/gpus.py) and the copy ceiling (measured on a GPU). A GPU
    the course has no datasheet for is drawn with the H100 SXM's figures, and the title says so."""
    from . import gpus
    card = gpus.lookup(ceilings.device)
    stand_in = card is None
    card = card or gpus.lookup("H100 SXM")
    plt = pyplot()
    ax = _axes(ax, size=(8.0, 4.8))
    copy = (f"a copy measured {ceilings.copy_gbps:,.0f} GB/s" if ceilings.measured else "copy not measured here")
    levels = [  # (name, bytes on the whole GPU, what it is, on chip?)
        ("registers", REGISTER_BYTES_PER_SM * card.sms,
         f"{REGISTER_BYTES_PER_SM // 1024} KiB in each of {card.sms} SMs: the values in use", True),
        ("shared memory (SRAM)", card.smem_per_block * card.sms,
         f"about {card.smem_per_block // 1024} KiB inside each SM", True),
        ("L2 cache", card.l2_mb * 2**20, f"{card.l2_mb:g} MiB, shared by all {card.sms} SMs", True),
        ("HBM", card.memory_gb * 1e9,
         f"{card.memory_gb:g} GB; datasheet {card.bandwidth_gbps:,.0f} GB/s, {copy}", False),
    ]
    for row, (name, size, what, on_chip) in enumerate(levels):
        width = 13 + 2.5 * row      # a pyramid for the eye; the registers of all SMs together outweigh L2
        y = len(levels) - 1 - row
        # light tints of the palette's sky blue and orange, black text readable on both; the dashed line and its
        # two words say on chip and off chip without the colours
        ax.add_patch(plt.Rectangle((-width / 2, y + 0.08), width, 0.84, edgecolor="black",
                                   facecolor="#bfe3f6" if on_chip else "#f7dc9c"))
        ax.text(0, y + 0.62, name, ha="center", va="center", fontsize="medium", weight="bold")
        ax.text(0, y + 0.3, what, ha="center", va="center", fontsize="small")
    ax.axhline(1.0, color="black", ls="--", lw=1.2)
    ax.text(-12.9, 1.06, "on chip", fontsize="small", va="bottom")
    ax.text(-12.9, 0.94, "off chip", fontsize="small", va="top")
    ax.annotate("", xy=(11.6, 3.9), xytext=(11.6, 0.1), arrowprops=dict(arrowstyle="->", lw=1.5))
    ax.text(11.8, 2.0, "faster, and fewer bytes", rotation=90, va="center", fontsize="small")
    ax.set_xlim(-13, 12.5)
    ax.set_ylim(0, len(levels))
    ax.axis("off")
    who = (f"{card.short} figures, standing in for {ceilings.device}" if stand_in
           else ceilings.device if ceilings.measured else f"MODEL: {card.short} datasheet figures, no GPU here")
    ax.set_title(f"Where a kernel's bytes live: {who}", fontsize="medium")
    ax.figure.supxlabel(f"A byte that crosses the dashed line is a trip. Widths not to scale.\nSources: {card.source.split(';')[0].split(' (')[0]} "
                        f"(course_utils/gpus.py);\n{REGISTER_SOURCE}"
                        + ("; the copy: bench.ceilings(), this run" if ceilings.measured else ""), fontsize=8)
    return ax


def programs_on_sms(n: int, block: int, sms: int = 2, ax=None):
    """A picture of a launch: n elements split into blocks of `block`, one program per block, and the
    programs handed to `sms` SMs (a toy GPU, small enough to read; the order on a real GPU is up to it).
    Masked lanes, past the end of the tensor, are hatched."""
    if n < 1 or block < 1 or sms < 1:
        raise ValueError(f"programs_on_sms needs n, block and sms of at least 1 (got {n}, {block}, {sms})")
    programs = -(-n // block)
    if programs * block > 256:
        raise ValueError(f"{programs} programs of {block} lanes is too many to draw: keep programs x block <= 256")
    plt = pyplot()
    ax = _axes(ax, size=(max(6.0, programs * block * 0.32), 3.2))
    color = lambda pid: CYCLE[pid % len(CYCLE)]   # noqa: E731
    for lane in range(programs * block):
        pid = lane // block
        masked = lane >= n
        # a pale fill, so that the lane numbers read in black on every colour
        ax.add_patch(plt.Rectangle((lane, 2), 1, 1, facecolor="white" if masked else color(pid),
                                   edgecolor="black", hatch="//" if masked else None, alpha=1 if masked else 0.45))
        if not masked:
            ax.text(lane + 0.5, 2.5, str(lane), ha="center", va="center", fontsize=8)
    for pid in range(programs):   # the name in black under a bar of the program's colour: legible whatever the colour
        ax.add_patch(plt.Rectangle((pid * block + 0.1, 3.05), block - 0.2, 0.12, facecolor=color(pid), edgecolor="none"))
        ax.text(pid * block + block / 2, 3.25, f"program {pid}", ha="center", fontsize="small")
    width = programs * block / sms
    for s in range(sms):
        ax.add_patch(plt.Rectangle((s * width + 0.2, 0), width - 0.4, 1, facecolor="#eeeeee", edgecolor="black"))
        mine = [pid for pid in range(programs) if pid % sms == s]
        ax.text(s * width + width / 2, 0.5, f"SM {s}: " + ", then ".join(f"program {p}" for p in mine),
                ha="center", va="center", fontsize="small")
    ax.text(0, 1.35, f"grid = ({programs},): {programs} programs; lanes past n = {n} are masked off (hatched)",
            fontsize="small")
    ax.set_xlim(-0.5, programs * block + 0.5)
    ax.set_ylim(-0.2, 3.7)
    ax.axis("off")
    ax.set_title(f"{n} elements, BLOCK = {block}, {programs} programs, on a toy GPU of {sms} SMs", fontsize="medium")
    ax.figure.supxlabel("Which program runs on which SM, and when, is the GPU's choice. An H100 has 132 SMs.",
                        fontsize="small")
    return ax
