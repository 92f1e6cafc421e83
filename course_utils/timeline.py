"""See the gaps: record which kernels a function runs on the GPU, and when, and draw it as a Gantt chart.

    tl = timeline.record(lambda: chain(x))       # torch.profiler, GPU only
    tl.draw(); print(tl.summary())
    timeline.show({"eager": lambda: chain(x), "graph": g.replay})   # several rows, one time axis
    timeline.kernels({"SDPA": lambda: sdpa(q, k, v)})   # which kernels one call ran: grid, block, µs each

A row has two lanes: on top, the CPU calls that hand work to the GPU (cudaLaunchKernel,
cuLaunchKernelEx for Triton, cudaGraphLaunch, ...); below, the kernels as the GPU ran them. The white
space between kernels is time the GPU had nothing to do: it was waiting for the next launch.

Without a GPU there is nothing to record. `record` then raises NeedsGPU, and `show` says so in
plain words and can draw a SCHEMATIC of the launch sequence that trips.count counted: no times,
not to scale, labelled as such.

The profiler itself adds CPU work to every operator it watches, so the gaps in a recorded timeline
are somewhat wider than in an unprofiled run: use the picture to see the pattern, and a stopwatch
(bench.time) for the numbers.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import warnings
from dataclasses import dataclass, field

import torch

from . import environment as env

# Chrome-trace categories (torch.profiler's export) of work that runs on the GPU, and of the CPU
# calls that submit it.
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
CPU_CATEGORIES = ("cuda_runtime", "cuda_driver")
SUBMIT_WORDS = ("Launch", "Memcpy", "Memset")   # cudaLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch, ...

NEEDS_GPU = ("No GPU here, so there is no kernel timeline to draw: a timeline is a recording of when "
             "each kernel really ran on a GPU, and the Triton interpreter runs kernels as Python on the CPU. "
             "On a GPU this cell records one call with torch.profiler and draws every kernel as a bar on a "
             "time axis: many thin bars with idle gaps between them is the picture of a launch-bound "
             "program, a few wide bars with no gaps is a busy GPU.")


class NeedsGPU(RuntimeError):
    """A timeline can only be recorded where kernels run on a GPU."""


@dataclass
class Span:
    """One interval on a timeline, in microseconds from the timeline's origin."""
    name: str
    start_us: float
    dur_us: float
    grid: tuple | None = None     # a kernel's grid of thread blocks, when the trace records it
    block: tuple | None = None    # threads of one block, (x, y, z), when the trace records it
    registers: int | None = None  # registers per thread, when the trace records it
    shared_bytes: int | None = None   # shared memory per block, static and dynamic, when recorded

    @property
    def blocks(self) -> int | None:
        """Thread blocks the kernel launched (None if unknown)."""
        return _product(self.grid)

    @property
    def threads(self) -> int | None:
        """Threads in one of its blocks (None if unknown)."""
        return _product(self.block)

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


def _product(dims) -> int | None:
    if not dims:
        return None
    n = 1
    for d in dims:
        n *= int(d)
    return n


@dataclass
class KernelRow:
    """The calls of one kernel, with one grid and one block, in a recorded timeline: how many, and their time."""
    name: str
    grid: tuple | None
    block: tuple | None
    registers: int | None
    shared_bytes: int | None
    calls: int
    us: float                     # device time, summed over the calls

    blocks = property(lambda self: _product(self.grid))
    threads = property(lambda self: _product(self.block))


@dataclass
class Timeline:
    """The kernels of one recorded call (and the CPU calls that launched them), with summary stats.

    Times are microseconds from the first event. `measured` is False for anything not recorded on a
    GPU (a synthetic example); its drawing says so."""
    kernels: list = field(default_factory=list)     # Span, GPU lane
    launches: list = field(default_factory=list)    # Span, CPU lane
    label: str = ""
    source: str = ""
    measured: bool = True

    def __post_init__(self):
        self.kernels = sorted(self.kernels, key=lambda s: s.start_us)
        self.launches = sorted(self.launches, key=lambda s: s.start_us)

    # --- the numbers -----------------------------------------------------------------------------
    def _busy_intervals(self) -> list[tuple[float, float]]:
        """Kernel intervals merged where they overlap (two streams, or a copy under a kernel)."""
        merged: list[list[float]] = []
        for k in self.kernels:
            if merged and k.start_us <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], k.end_us)
            else:
                merged.append([k.start_us, k.end_us])
        return [(a, b) for a, b in merged]

    @property
    def count(self) -> int:
        """How many kernels ran."""
        return len(self.kernels)

    @property
    def span_us(self) -> float:
        """From the start of the first kernel to the end of the last."""
        if not self.kernels:
            return 0.0
        return max(k.end_us for k in self.kernels) - self.kernels[0].start_us

    @property
    def busy_us(self) -> float:
        """Time at least one kernel was running."""
        return sum(b - a for a, b in self._busy_intervals())

    @property
    def gaps(self) -> list[tuple[float, float]]:
        """The idle intervals between kernels, as (start, end) pairs."""
        iv = self._busy_intervals()
        return [(iv[i][1], iv[i + 1][0]) for i in range(len(iv) - 1) if iv[i + 1][0] > iv[i][1]]

    @property
    def gap_us(self) -> float:
        """Time between the first kernel's start and the last one's end when no kernel was running."""
        return self.span_us - self.busy_us

    @property
    def mean_gap_us(self) -> float:
        """Idle time per hand-over from one kernel to the next (0 with fewer than two kernels)."""
        n = len(self._busy_intervals())
        return self.gap_us / (n - 1) if n > 1 else 0.0

    @property
    def busy_fraction(self) -> float:
        return self.busy_us / self.span_us if self.span_us > 0 else 0.0

    def kernel_rows(self) -> list[KernelRow]:
        """One row per kernel launched with one grid and block, in the order each first ran: calls and µs."""
        rows: dict = {}
        for k in self.kernels:
            key = (k.name, k.grid, k.block)
            if key in rows:
                rows[key].calls += 1
                rows[key].us += k.dur_us
            else:
                rows[key] = KernelRow(k.name, k.grid, k.block, k.registers, k.shared_bytes, 1, k.dur_us)
        return list(rows.values())

    def kernel_table(self, width: int = 60) -> str:
        """The kernels as a text table: grid (blocks), threads a block, registers a thread, shared memory a
        block, calls, µs on the GPU, and the kernel's name (shortened to `width`), one row per kernel_rows()."""
        def dims(d):
            return "-" if not d else "(" + ", ".join(str(int(x)) for x in d) + ")"

        def num(v, f="{:,}"):
            return "-" if v is None else f.format(v)
        head = ["grid", "blocks", "threads", "regs", "smem KiB", "calls", "µs", "kernel"]
        body = [[dims(r.grid), num(r.blocks), num(r.threads), num(r.registers),
                 num(None if r.shared_bytes is None else r.shared_bytes / 1024, "{:.1f}"), str(r.calls),
                 f"{r.us:,.1f}", _short(kernel_label(r.name), width)] for r in self.kernel_rows()]
        widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head) - 1)]
        return "\n".join("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                                         enumerate(zip(row[:-1], widths))) + "  " + row[-1]
                         for row in [head] + body)

    def stats(self) -> dict:
        return {"kernels": self.count, "span_us": self.span_us, "busy_us": self.busy_us,
                "gap_us": self.gap_us, "mean_gap_us": self.mean_gap_us, "busy_fraction": self.busy_fraction,
                "launch_calls": len(self.launches)}

    def summary(self) -> str:
        if not self.kernels:
            return f"{self.label or 'timeline'}: no kernel ran"
        s = (f"{self.count} kernel{'s' if self.count != 1 else ''} in {self.span_us:.1f} µs: "
             f"busy {self.busy_us:.1f} µs ({100 * self.busy_fraction:.0f}%), idle gaps {self.gap_us:.1f} µs")
        if self.count > 1:
            s += f" (mean gap {self.mean_gap_us:.2f} µs)"
        s += f"; {len(self.launches)} CPU launch call{'s' if len(self.launches) != 1 else ''}"
        return (f"{self.label}: " if self.label else "") + s

    def __repr__(self) -> str:
        tag = "" if self.measured else " [NOT MEASURED]"
        return self.summary() + tag

    def draw(self, ax=None, title: str | None = None):
        return draw(self, ax=ax, title=title)


# --- recording on a GPU ----------------------------------------------------------------------------
MARK = "timeline: recorded call"   # the record_function label around the call that is kept


def from_chrome_trace(trace, label: str = "", source: str = "", measured: bool = True,
                      after: str | None = None) -> Timeline:
    """A Timeline from a Chrome trace as torch.profiler exports it (a dict, its event list, or a path).

    after: the name of a CPU annotation (torch.profiler.record_function); if given, only events that
    start at or after its last occurrence are kept."""
    if isinstance(trace, (str, os.PathLike)):
        with open(trace) as f:
            trace = json.load(f)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else list(trace)
    events = [e for e in events if e.get("ph") == "X" and "dur" in e and "ts" in e]
    cut = None
    if after is not None:
        marks = [float(e["ts"]) for e in events if e.get("name") == after and e.get("cat") != "gpu_user_annotation"]
        cut = max(marks) if marks else None
    kernels, launches = [], []
    for e in events:
        cat, name = e.get("cat", ""), str(e.get("name", ""))
        span = Span(name, float(e["ts"]), float(e["dur"]), *_launch_args(e.get("args") or {}))
        if cut is not None and span.start_us < cut:
            continue
        if cat in GPU_CATEGORIES:
            kernels.append(span)
        elif cat in CPU_CATEGORIES and any(w in name for w in SUBMIT_WORDS):
            launches.append(span)
    origin = min((s.start_us for s in kernels + launches), default=0.0)
    for s in kernels + launches:
        s.start_us -= origin
    return Timeline(kernels, launches, label=label, source=source, measured=measured)


def _launch_args(args: dict) -> tuple:
    """(grid, block, registers, shared bytes) from a kernel event's args, None where the trace has none."""
    def dims(v):
        return tuple(int(x) for x in v) if isinstance(v, (list, tuple)) and v else None

    def whole(v):
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    return dims(args.get("grid")), dims(args.get("block")), whole(args.get("registers per thread")), \
        whole(args.get("shared memory"))


L2_FLUSH_BYTES = 256 * 2**20   # written before the kept call when flush_l2: more than any GPU's L2 (an H200's: 60 MiB)


def record(fn, *, label: str = "", warmup: int = 3, flush_l2: bool = False) -> Timeline:
    """Run fn() `warmup` times, then twice under torch.profiler, and return the second call's timeline.

    GPU only: raises NeedsGPU elsewhere. The warm-up calls pay for compilation, autotuning and the
    caching allocator; the first profiled call pays the profiler's own first-time costs (it can make
    one launch call look a millisecond long); the second is the one drawn. flush_l2: write 256 MiB
    just before the kept call (outside the kept part), so that it finds none of its inputs in the L2
    cache, as triton's do_bench does before each timed call."""
    if env.DEVICE != "cuda":
        raise NeedsGPU(NEEDS_GPU)
    from torch.profiler import ProfilerActivity, profile, record_function
    for _ in range(warmup):
        fn()
    scratch = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda") if flush_l2 else None
    torch.cuda.synchronize()
    with warnings.catch_warnings():
        # the profiler warns that it "clears events at the end of each cycle": true, and no concern here
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for name in ("timeline: first call, not kept", MARK):
                if name == MARK and scratch is not None:
                    scratch.zero_()
                    torch.cuda.synchronize()
                with record_function(name):
                    fn()
                torch.cuda.synchronize()   # the kept call starts on an idle GPU
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            prof.export_chrome_trace(path)
            return from_chrome_trace(path, label=label, after=MARK,
                                     source=f"recorded with torch.profiler on {env.gpu_name()}")


def kernels(fns: dict, *, bytes: dict | None = None, flush_l2: bool = True, graph: bool = False) -> dict:
    """Which kernels one call of each function runs on the GPU, and how: printed, one table per function.

    fns: {label: function of no arguments}. For each, one call is recorded as `record` records it (warm-up
    calls first, the L2 flushed before the kept call unless flush_l2=False) and printed: a line with the
    kernels' count, their busy time and the span from the first one's start to the last one's end (the
    difference is time between kernels), then a row per kernel: its grid and block as the profiler saw
    them (blocks in all, threads a block), registers a thread, shared memory a block, calls, µs on the
    GPU, name. bytes: {label: bytes the call must move}, to add GB/s over the busy time. graph=True
    captures each call in a CUDA graph and records a replay of it, so that no kernel waits for Python to
    launch it: what is left between kernels is the GPU's own hand-over (a call that cannot be captured is
    recorded as it is, and its line says so). Returns {label: Timeline}. GPU only: raises NeedsGPU
    elsewhere. What a library runs (cuDNN, cuBLAS, Inductor's kernels) is read here from the GPU, not
    from its documentation."""
    if not isinstance(fns, dict) or not fns:
        raise TypeError("timeline.kernels takes a dict {label: function of no arguments}, e.g. "
                        "{'SDPA': lambda: F.scaled_dot_product_attention(q, k, v)}" +
                        ("" if isinstance(fns, dict) else f", not {type(fns).__name__}"))
    for label, fn in fns.items():
        if not callable(fn):
            raise TypeError(f"timeline.kernels: fns[{label!r}] is a {type(fn).__name__}, not a function: "
                            "give a function of no arguments, e.g. lambda: f(x)")
    bytes = bytes or {}
    unknown = [label for label in bytes if label not in fns]
    if unknown:
        raise ValueError(f"timeline.kernels: bytes has {unknown}, which fns does not; its labels are {list(fns)}")
    if env.DEVICE != "cuda":
        raise NeedsGPU(NEEDS_GPU)
    recorded = {}
    for label, fn in fns.items():
        replay = _replay_of(fn) if graph else None
        tl = recorded[label] = record(replay or fn, label=label, flush_l2=flush_l2)
        rate = (f" = {bytes[label] / tl.busy_us / 1e3:,.0f} GB/s" if label in bytes and tl.busy_us > 0 else "")
        print(f"{label}: {tl.count} kernel{'s' if tl.count != 1 else ''}, busy {tl.busy_us:,.1f} µs{rate} in a "
              f"span of {tl.span_us:,.1f} µs" + ("" if replay or not graph else " (could not be captured in a "
                                                  "CUDA graph: launched from Python)"))
        print(tl.kernel_table())
    print(f"torch.profiler on {env.gpu_name()}: one call each, after warm-up calls"
          + (", replayed from a CUDA graph" if graph else "") + (", the L2 flushed before it" if flush_l2 else "")
          + "; µs: each kernel's time on the GPU")
    return recorded


def _replay_of(fn):
    """fn captured in a CUDA graph: a function that replays it. None if fn cannot be captured (a sync inside)."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):      # compiles, tunes and allocates before the capture
            fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001  (not capturable: the caller records the call as it is)
        torch.cuda.synchronize()
        return None
    return g.replay


# --- drawing -----------------------------------------------------------------------------------------
_ROW = 1.9   # height of one row: GPU lane 0..0.8, CPU lane 0.9..1.25, stats text above
_PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"]


def _short(name: str, width: int = 38) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def kernel_label(name: str) -> str:
    """A readable name for a kernel: PyTorch's demangled C++ names are a screen long.

    'void at::native::vectorized_elementwise_kernel<4, ...MulFunctor<float>...>(int, ...)' becomes
    'vectorized_elementwise_kernel [MulFunctor]'; Triton kernel names are kept."""
    s = name.replace("(anonymous namespace)::", "").split("(", 1)[0]
    s = re.sub(r"^void\s+", "", s)
    base = s.split("<", 1)[0].split("::")[-1] or name
    ops = [f for f in re.findall(r"\b(\w*Functor\w*)", s)
           if not re.match(r"(A|B)?(Unary|Binary|Ternary)\w*Functor$", f)]
    return f"{base} [{ops[-1]}]" if ops else base


def draw(timelines, ax=None, title: str | None = None):
    """Draw one Timeline, or a dict name -> Timeline (one row each, on a shared time axis), as a Gantt chart.

    Each row: a thin lane of CPU launch calls above the lane of GPU kernels; idle gaps between
    kernels are shaded. Returns the Axes."""
    from matplotlib.patches import Patch

    from .plot import pyplot
    plt = pyplot()   # the course's style, as every figure of the course

    if isinstance(timelines, Timeline):
        timelines = {timelines.label or "GPU": timelines}
    rows = list(timelines.items())
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 1.4 + 1.1 * len(rows)), layout="constrained")
    colors: dict[str, str] = {}
    yticks, ylabels = [], []
    for i, (name, tl) in enumerate(rows):
        y = (len(rows) - 1 - i) * _ROW          # first row on top
        gpu = [(k.start_us, max(k.dur_us, 1e-3)) for k in tl.kernels]
        face = [colors.setdefault(kernel_label(k.name), _PALETTE[len(colors) % len(_PALETTE)])
                for k in tl.kernels]
        ax.broken_barh([(a, b - a) for a, b in tl.gaps], (y, 0.8), facecolors="#f4cccc", edgecolors="none")
        ax.broken_barh(gpu, (y, 0.8), facecolors=face, edgecolors=face, linewidth=0.6)
        cpu = [(s.start_us, max(s.dur_us, 1e-3)) for s in tl.launches]
        ax.broken_barh(cpu, (y + 0.9, 0.35), facecolors="#999999", edgecolors="#666666", linewidth=0.4)
        yticks += [y + 0.4, y + 1.07]
        ylabels += [f"{_short(name, 24)}\nGPU kernels", "CPU launches"]
        note = (f"{tl.count} kernel{'s' if tl.count != 1 else ''} · busy {tl.busy_us:.1f} µs · idle {tl.gap_us:.1f} µs"
                + (f" · mean gap {tl.mean_gap_us:.2f} µs" if tl.count > 1 else ""))
        ax.text(1.0, y + 1.3, note, transform=ax.get_yaxis_transform(), ha="right", va="bottom", fontsize="small")
    ax.set_yticks(yticks)
    ax.set_yticklabels(ylabels, fontsize="small")
    ax.set_ylim(-0.3, _ROW * len(rows))
    ax.set_xlabel("time (µs) from the first event")
    ax.set_xlim(left=0)
    measured = all(tl.measured for _, tl in rows)
    source = next((tl.source for _, tl in rows if tl.source), "")
    if title is None:
        title = "Kernel timeline" + (f", {source}" if source else "")
    if not measured:
        title = "NOT MEASURED (synthetic events): " + title
    ax.set_title(title, fontsize="medium")
    handles = [Patch(facecolor=c, label=_short(n, 48)) for n, c in list(colors.items())[:6]]
    if len(colors) > 6:
        handles.append(Patch(facecolor="white", label=f"… {len(colors) - 6} more kernel names"))
    handles += [Patch(facecolor="#f4cccc", label="GPU idle between kernels"),
                Patch(facecolor="#999999", label="CPU call that submits work")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, fontsize="small", frameon=False)
    ax.grid(True, axis="x", alpha=0.3)
    return ax


def schematic(counts, ax=None):
    """Without a GPU: draw the launch sequence that trips.count counted, as a SCHEMATIC (no times).

    counts: a trips.Trips or a dict name -> Trips. Each launch is drawn as a CPU block followed by a
    short GPU block, one after another; the drawing is not to scale and its axis has no numbers,
    because nothing was timed."""
    from .plot import pyplot
    plt = pyplot()

    if not isinstance(counts, dict):
        counts = {"your function": counts}
    rows = list(counts.items())
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.6 + 1.1 * len(rows)), layout="constrained")
    yticks, ylabels = [], []
    for i, (name, t) in enumerate(rows):
        y = (len(rows) - 1 - i) * _ROW
        n = t.launches
        ax.broken_barh([(j, 0.85) for j in range(n)], (y + 0.9, 0.35), facecolors="#bbbbbb", edgecolors="#666666",
                       linewidth=0.4, hatch="//")
        ax.broken_barh([(j + 0.85, 0.25) for j in range(n)], (y, 0.8), facecolors="#bbbbbb", edgecolors="#666666",
                       linewidth=0.4, hatch="//")
        yticks += [y + 0.4, y + 1.07]
        ylabels += [f"{_short(name, 24)}\nGPU (schematic)", "CPU launches"]
        ax.text(1.0, y + 1.3, f"{n} launch{'es' if n != 1 else ''} counted by trips.count", ha="right",
                va="bottom", fontsize="small", transform=ax.get_yaxis_transform())
    ax.set_yticks(yticks)
    ax.set_yticklabels(ylabels, fontsize="small")
    ax.set_xticks([])
    ax.set_xlim(left=0)
    ax.set_ylim(-0.3, _ROW * len(rows))
    ax.set_xlabel("order of events →  (SCHEMATIC: not to scale, no times; nothing was timed without a GPU)")
    ax.set_title("SCHEMATIC, not a measurement: the launch sequence counted on the CPU interpreter", fontsize="medium")
    return ax


def table(timelines: dict) -> str:
    """A text table of the stats of several timelines."""
    head = ["", "kernels", "span µs", "busy µs", "idle µs", "mean gap µs", "busy %"]
    body = [[name, str(tl.count), f"{tl.span_us:.1f}", f"{tl.busy_us:.1f}", f"{tl.gap_us:.1f}",
             f"{tl.mean_gap_us:.2f}", f"{100 * tl.busy_fraction:.0f}"] for name, tl in timelines.items()]
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(r, widths)))
             for r in [head] + body]
    source = next((tl.source for tl in timelines.values() if tl.source), "")
    return "\n".join(lines + ([source] if source else []))


def show(impls: dict, *, schematic_on_cpu: bool = True):
    """Record and draw each implementation (name -> zero-argument callable) on one time axis.

    On a GPU: prints the stats table, draws the chart, returns {name: Timeline}. An implementation
    that raises NotImplementedError is left out and named. Without a GPU: prints why there is no
    timeline and, if schematic_on_cpu, draws the launch counts as a labelled schematic; returns None."""
    from . import trips
    skipped = []
    if env.DEVICE != "cuda":
        print(NEEDS_GPU)
        if not schematic_on_cpu:
            return None
        counted = {}
        for name, fn in impls.items():
            try:
                counted[name] = trips.count(fn)
            except NotImplementedError:
                skipped.append(name)
        if counted:
            print("Below: a SCHEMATIC of the launches trips.count counted here. It has no time axis: "
                  "nothing was timed.")
            schematic(counted)
        if skipped:
            print("not written yet:", ", ".join(skipped))
        return None
    recorded = {}
    for name, fn in impls.items():
        try:
            recorded[name] = record(fn, label=name)
        except NotImplementedError:
            skipped.append(name)
    if recorded:
        print(table(recorded))
        draw(recorded)
    if skipped:
        print("not written yet:", ", ".join(skipped))
    return recorded
