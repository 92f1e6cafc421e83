"""Timing, the machine's two ceilings, and a labelled model of GPU time for when there is no GPU.

On a GPU every time here is measured with ``triton.testing.do_bench``. Under the Triton interpreter
nothing about GPU speed can be measured, so ``compare`` counts launches and bytes instead and shows
what a simple model predicts for a reference GPU, next to a wall-clock it labels meaningless.
"""
from __future__ import annotations

import datetime
import html
import json
import math
import os
import re
import statistics
import time as _clock
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from . import capability, gpus, progress
from . import environment as env
from .numbers import readable


@dataclass(frozen=True)
class Ceilings:
    """The two speeds that bound every kernel: memory bandwidth and matmul arithmetic rate."""
    device: str
    copy_gbps: float          # GB/s (1e9 bytes/s), counting bytes read plus bytes written
    matmul_tflops: float      # TFLOP/s (1e12 FLOP/s)
    measured: bool
    source: str
    launch_us: float = 5.0
    launch_source: str = ("assumption: about 5 µs per kernel launch (\"a few microseconds\"); "
                          "the real figure depends on driver, CPU and framework")

    @property
    def ridge(self) -> float:
        """FLOPs per byte at which the two ceilings meet: below it a kernel waits on memory."""
        return self.matmul_tflops * 1e3 / self.copy_gbps


def datasheet_ceilings(name: str, *, tensor_cores: bool | None = None) -> Ceilings:
    """The ceilings of a card the course knows (course_utils/gpus.py), from its datasheet, not measured: what
    model_ms(..., gpu=...) prices a design with for a GPU nobody here has ("Tesla T4", "NVIDIA H200").
    The matmul ceiling is the dense fp16 tensor-core rate, or the fp32 rate where Triton's tl.dot runs without
    tensor cores (a T4; capability.plan decides); tensor_cores=True/False picks one."""
    card = gpus.lookup(name)
    if card is None:
        known = ", ".join(g.short for g in gpus.KNOWN)
        raise ValueError(f"no datasheet for a GPU named {name!r} in course_utils/gpus.py; known: {known}. "
                         "Measure the card at hand with bench.ceilings() instead.")
    if tensor_cores is None:
        tensor_cores = capability.plan(card.cc).tensor_cores
    rate = (f"{card.tensor_tflops:g} TFLOP/s fp16 matrix math on the tensor cores" if tensor_cores else
            f"{card.fp32_tflops:g} TFLOP/s fp32 math (Triton's matrix products run without tensor cores here)")
    return Ceilings(device=card.name, copy_gbps=float(card.bandwidth_gbps),
                    matmul_tflops=float(card.tensor_tflops if tensor_cores else card.fp32_tflops), measured=False,
                    source=f"datasheet figures, not measured: {card.name}, {card.bandwidth_gbps:g} GB/s, {rate} "
                           f"(source: {card.source})")


# The GPU the interpreter's model prices every design on: the H100 SXM the course was measured on.
REFERENCE = datasheet_ceilings("H100 SXM")


def goal(target: str, met: bool, *, device: str | None = None) -> str:
    """One goal line, naming the GPU it ran on: "goal: >= 1.3x sdpa-flash: met (measured on
    NVIDIA H200)". While COURSE_PLAN rehearses another GPU's plan the times are this GPU's, not that one's, so
    the line says "not measured: rehearsing the T4's plan" instead of met or NOT met."""
    device = device or (ceilings().device if on_gpu() else "")
    rehearsing = capability.rehearsal()
    if rehearsing:
        return (f"goal: {target}: not measured: rehearsing {rehearsing} "
                f"(the times are {device or 'this GPU'}'s)")
    if not on_gpu():
        return f"goal: {target}: not measured: no GPU here"
    return f"goal: {target}: {'met' if met else 'NOT met'} (measured on {device})"


def on_gpu() -> bool:
    """True when kernels really run on a GPU (not in the interpreter)."""
    return env.DEVICE == "cuda"


def free_bytes() -> float:
    """GPU memory free now, in bytes (inf without a GPU): what a size that only a large card holds asks before it
    allocates, so that a T4's 15 GB skips it and says so instead of stopping on an out-of-memory error."""
    return torch.cuda.mem_get_info()[0] if on_gpu() else float("inf")


def time(fn, *, warmup: int = 25, rep: int = 100, calls: int = 1) -> float:
    """Median milliseconds per call of fn().

    On a GPU: triton.testing.do_bench, which flushes L2 between calls so each one meets cold memory.
    Under the interpreter: the median wall-clock of the Python process. That number says nothing
    about GPU speed; whatever shows it must say so.

    calls > 1 times that many calls back to back as one run and divides: for tiny kernels, where the
    cache flush before a lone call gives the CPU a head start that hides its launch cost."""
    if calls > 1:
        one = fn

        def fn():
            for _ in range(calls):
                one()
        return time(fn, warmup=warmup, rep=rep) / calls
    if on_gpu():
        import triton.testing
        try:
            return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
        except (AssertionError, TypeError):  # a Triton without return_mode="median"
            return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, quantiles=[0.5])[0])
    fn()  # the first call pays for caching and allocation, as on a GPU
    return _wall_ms(fn, warmup, rep)


def interleaved(fns: dict, rounds: int = 3, *, warmup: int = 25, rep: int = 100) -> dict:
    """{name: median ms} of `rounds` timings of each zero-argument callable, taken in turn: every round times
    each one once, every other round in reverse order. A GPU at its power limit slows down as a cell runs,
    and a kernel timed right after a power-hungry one pays for it: interleaving spreads both over every
    name alike. A name whose call raises maps to the exception instead, and is not timed again."""
    times: dict = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in names[::-1] if r % 2 else names:
            if isinstance(times[name], list):
                try:
                    times[name].append(time(fns[name], warmup=warmup, rep=rep))
                except Exception as e:   # a back-end this GPU lacks; the others still get timed
                    times[name] = e
    return {name: t if isinstance(t, Exception) else statistics.median(t) for name, t in times.items()}


def _wall_ms(fn, warmup: float, rep: float) -> float:
    start = _clock.perf_counter()
    while (_clock.perf_counter() - start) * 1e3 < warmup:
        fn()
    times: list[float] = []
    while not times or (sum(times) < rep and len(times) < 1000):
        t0 = _clock.perf_counter()
        fn()
        times.append((_clock.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def graph_time(calls, *, rounds: int = 2, reps: int = 20):
    """Median milliseconds per call of `calls` (callables), captured `rounds` times over in one CUDA graph
    and replayed: no host cost and no L2 flush between the calls, as in a decode step captured whole (lab 6).
    Give calls over several copies of the inputs, more bytes together than L2 holds, so that none is still
    cached when its turn comes again. Returns None if the calls cannot be captured (a sync or a host copy
    inside). Needs a GPU."""
    if not on_gpu():
        raise RuntimeError("bench.graph_time replays a CUDA graph: run it where a GPU is (check bench.on_gpu())")
    calls = list(calls) * rounds
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):      # compiles and allocates before the capture
            for c in calls:
                c()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for c in calls:
                c()
        torch.cuda.synchronize()
    except Exception:
        torch.cuda.synchronize()
        return None
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / len(calls))
    del graph
    return statistics.median(times)


_streams: dict = {}


def stream_ms(nbytes: float, *, rep: int = 100) -> float:
    """Milliseconds of a bare stream of the same bytes on this GPU, timed now: a device-to-device copy that reads
    nbytes / 2 and writes nbytes / 2, timed as `time` times (median, L2 flushed). The reference a kernel that
    reads and writes nbytes in all is held to (course_utils/targets.py). Timed once per size in a session."""
    if not on_gpu():
        raise RuntimeError("bench.stream_ms times a copy on the GPU: run it where a GPU is (check bench.on_gpu())")
    n = max(1, int(nbytes // 8))           # fp32 elements a side: read n·4, write n·4
    if n not in _streams:
        src = torch.randn(n, device="cuda")
        dst = torch.empty_like(src)
        _streams[n] = time(lambda: dst.copy_(src), rep=rep) * nbytes / (8 * n)
        del src, dst
    return _streams[n]


def peak_bytes(fn, *, beyond_output: bool = False) -> int:
    """GPU memory that fn() allocates at its peak, above what was allocated before the call. With
    beyond_output=True the tensors it returns are left out: its scratch alone. Needs a GPU (the caching
    allocator's counters); without one it raises rather than report a number that means nothing."""
    if not on_gpu():
        raise RuntimeError("bench.peak_bytes measures the GPU's allocator: run it where a GPU is (check bench.on_gpu())")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    if beyond_output:
        from .trips import _tensors
        peak -= sum(t.numel() * t.element_size() for t in {id(t): t for t in _tensors(out)}.values())
    del out
    return peak


def model_ms(bytes: float, launches: int = 1, flops: float = 0, gpu: Ceilings = REFERENCE) -> float:
    """A MODEL of GPU time in ms, not a measurement: the roofline bound plus a fixed cost per launch,

        max(bytes / bandwidth, flops / matmul rate) + launches * launch overhead.

    Real kernels land above it (no kernel reaches both ceilings, caches and tails cost extra),
    so use it to compare designs by their traffic, not to predict a stopwatch."""
    memory_ms = bytes / (gpu.copy_gbps * 1e6)
    compute_ms = flops / (gpu.matmul_tflops * 1e9)
    return max(memory_ms, compute_ms) + launches * gpu.launch_us / 1e3


def model_ms_at(counted, counted_n: int, model_n: int, flops: float = 0, gpu: Ceilings = REFERENCE) -> float:
    """MODEL time at model_n elements of work whose trips were counted at counted_n elements.

    Bytes grow with the elements, launches do not: counted at the interpreter's small size, the
    launch term would swamp a model of the GPU-sized problem the lesson is about."""
    return model_ms(counted.bytes * model_n / counted_n, counted.launches, flops, gpu)


def ms_or_model(fn, small, counted_n: int, model_n: int) -> float:
    """Milliseconds of fn(): measured on a GPU. Without one, a MODEL: the trips of small() (the same
    work on a small copy of counted_n elements, what the interpreter can run) scaled to model_n."""
    if on_gpu():
        return time(fn)
    from . import trips
    return model_ms_at(trips.count(small), counted_n, model_n)


# --- ceilings ------------------------------------------------------------------------------------
_measured: dict[str, Ceilings] = {}


def _cache_file(name: str) -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"
    return root / "feed-the-beast" / f"ceilings-{slug}.json"


def _measure(name: str) -> Ceilings:
    free, _ = torch.cuda.mem_get_info()
    n = 2**28 if free > 4 * 2**30 else 2**26  # 1 GiB of fp32 per buffer, less on a small card
    m = 8192
    dtype = torch.bfloat16 if capability.plan().bf16 else torch.float16   # a T4 has no bf16
    copy_runs, mm_runs = [], []
    # a ceiling is the best the card sustains: warm the clocks up, keep the best of three medians
    for step in progress.steps(["copy"] * 3 + ["matmul"] * 3, "measuring this GPU's ceilings (once, then cached)"):
        if step == "copy":
            if not copy_runs:
                src = torch.randn(n, device="cuda")
                dst = torch.empty_like(src)
            copy_runs.append(time(lambda: dst.copy_(src), warmup=100, rep=200))
        else:
            if not mm_runs:
                del src, dst
                a = torch.randn(m, m, device="cuda", dtype=dtype)
                b = torch.randn(m, m, device="cuda", dtype=dtype)
            mm_runs.append(time(lambda: a @ b, warmup=1000, rep=300))  # clocks ramp for ~1 s
    copy_gbps = 2 * n * 4 / min(copy_runs) / 1e6
    tflops = 2 * m**3 / min(mm_runs) / 1e9
    del a, b
    torch.cuda.empty_cache()
    day = datetime.date.today().isoformat()
    return Ceilings(
        device=name, copy_gbps=round(copy_gbps, 1), matmul_tflops=round(tflops, 1), measured=True,
        source=f"measured on {name} ({day}), best of three do_bench medians: a {n * 4 / 2**30:g} GiB fp32 "
               f"device-to-device copy (bytes read + written) and an {m}x{m}x{m} {str(dtype)[6:]} torch.matmul "
               f"(2*{m}^3 FLOPs)")


def ceilings(refresh: bool = False) -> Ceilings:
    """This machine's ceilings. On a GPU they are measured once and cached as JSON under
    ~/.cache/feed-the-beast/; without a GPU this is REFERENCE, datasheet figures (measured=False)."""
    if not on_gpu():
        return REFERENCE
    name = env.gpu_name()
    path = _cache_file(name)
    if not refresh:
        if name in _measured:
            return _measured[name]
        try:
            data = json.loads(path.read_text())
            known = {f.name for f in fields(Ceilings)}
            _measured[name] = Ceilings(**{k: v for k, v in data.items() if k in known})
            return _measured[name]
        except (OSError, ValueError, TypeError):
            pass
    c = _measured[name] = _measure(name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(c), indent=2))
    except OSError:  # a read-only home (some hosted notebooks): keep it for this session only
        pass
    return c


# --- compare -------------------------------------------------------------------------------------
def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return f"{v:,}"
    return readable(v) if abs(v) < 1e5 else f"{v:,.0f}"


class Report:
    """What compare() found: .rows (one dict per implementation), a table, .plot(), .speedup(a, b)."""

    def __init__(self, title, rows, columns, notes, measured, bytes=None, device: str = "", rehearsal: str = ""):
        self.title, self.rows, self.columns, self.notes, self.measured = title, rows, columns, notes, measured
        self.bytes = bytes            # the fewest bytes the job moves (compare's bytes=), for a bare copy of the same bytes
        self.device = device          # the GPU the times were measured on ("" for the model)
        self.rehearsal = rehearsal    # "the T4's plan" while COURSE_PLAN rehearses it: no goal is judged
        self.key = "ms" if measured else "model ms"   # the time that speedups and bars use

    def _ms(self, name: str) -> float:
        for r in self.rows:
            if r["impl"] == name:
                return r.get(self.key) or math.nan
        raise KeyError(f"no implementation named {name!r}; have {[r['impl'] for r in self.rows]}")

    def speedup(self, a: str, b: str) -> float:
        """How many times faster `a` runs than `b` (time of b / time of a); nan if one is not written.
        Without a GPU this is the speedup of the model, not a measurement."""
        return self._ms(b) / self._ms(a)

    def verdict(self, mine: str, *, eager: str, rival: str = "torch.compile", of_stream: float | None = None,
                vs_rival: float | None = None) -> str:
        """`mine` against a lesson's targets (course_utils/targets.py), each a ratio to a reference timed now on this
        GPU: a bare copy of the same bytes ("lesson.of_stream"; of_stream= overrides its ratio) and `rival`
        ("lesson.vs_rival", parity within its tolerance where the rival is at the copy ceiling). Without a GPU,
        the model's ratios and no verdict."""
        from dataclasses import replace as _with
        from .targets import TARGETS
        row = next((r for r in self.rows if r["impl"] == mine), None)
        if row is None:
            raise KeyError(f"no implementation named {mine!r}; have {[r['impl'] for r in self.rows]}")
        if row["status"] != "ok":
            return f"{mine} is not written yet"
        vs, ve = self.speedup(mine, rival), self.speedup(mine, eager)
        if not self.measured:
            return (f"{mine}: {ve:.2f}x {eager} and {vs:.2f}x {rival} (MODEL). The model prices bytes and launches "
                    "only, so every one-kernel version ties; how close yours comes to the copy ceiling needs a GPU.")
        share = row["of copy ceiling"]
        on = f" on {self.device}" if self.device else ""
        lines = [f"{mine}: {share:.1%} of the copy ceiling; {vs:.3f}x the speed of {rival}; {ve:.2f}x {eager} "
                 f"(measured{on})"]
        if self.rehearsal:   # another GPU's plan on this one: its times are not that GPU's, so nothing is judged
            lines.append(f"  not measured: rehearsing {self.rehearsal} (COURSE_PLAN); these times are{on or ' this GPU'}'s")
            return "\n".join(lines)
        t_stream, t_rival = TARGETS["lesson.of_stream"], _with(TARGETS["lesson.vs_rival"], reference=rival)
        if of_stream is not None:
            t_stream = _with(t_stream, ratio=of_stream)
        if vs_rival is not None:
            t_rival = _with(t_rival, ratio=vs_rival)
        if self.bytes:
            lines.append("  target: " + t_stream.judge(self._ms(mine), stream_ms(self.bytes)).text)
        theirs = next(r for r in self.rows if r["impl"] == rival)
        lines.append("  target: " + t_rival.judge(self._ms(mine), self._ms(rival),
                                                  ref_share=theirs.get("of copy ceiling")).text)
        return "\n".join(lines)

    def header(self, key: str) -> str:
        return dict(self.columns)[key]

    def _cells(self):
        for r in self.rows:
            if r["status"] != "ok":
                yield [r["impl"], r["status"]] + [""] * (len(self.columns) - 1)
            else:
                yield [r["impl"]] + [f"{r[k]:.0%}" if k.startswith("of ") and k in r else _fmt(r.get(k))
                                     for k, _ in self.columns]

    def __repr__(self) -> str:
        head = ["impl"] + [h for _, h in self.columns]
        body = list(self._cells())
        widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head))]
        lines = [self.title] if self.title else []
        for row in [head] + body:
            lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
        return "\n".join(lines + self.notes)

    def _repr_html_(self) -> str:
        e = html.escape
        head = "".join(f"<th>{e(h)}</th>" for h in ["impl"] + [h for _, h in self.columns])
        body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in self._cells())
        cap = f"<caption><b>{e(self.title)}</b></caption>" if self.title else ""
        notes = "".join(f"<p style='font-size:90%'>{e(n)}</p>" for n in self.notes)
        return f"<table>{cap}<tr>{head}</tr>{body}</table>{notes}"

    def plot(self, ax=None):
        from . import plot
        return plot.bars(self, ax=ax)


def _per(value, name):
    """bytes/flops may be one number for every implementation or a dict name -> number."""
    if isinstance(value, dict):
        return value.get(name)
    return value


def compare(impls: dict, *, bytes=None, flops=None, title: str = "", plot: bool = True,
            size: tuple | None = None, rounds: int = 1, rep: int = 100) -> Report:
    """Run each implementation (a zero-argument callable) and tabulate how fast it is.

    bytes / flops: what each implementation moves and computes, as one number (the minimum the job
    needs: shown as "useful GB/s") or a dict name -> number (what each really moves: "GB/s").
    On a GPU the times are measured. Under the interpreter they cannot be: launches and bytes are
    counted with trips.count and turned into a MODEL of the reference GPU (model_ms); the
    interpreter's own wall-clock is shown too, labelled as meaningless.
    size=(counted_n, model_n): the interpreter runs counted_n elements; model the GPU at model_n
    (bytes scale, launches do not). Without it the model is of the small size, launch-dominated.
    An implementation that raises NotImplementedError shows up as "not written yet".
    rounds > 1 (GPU only): time every implementation once per round, in turn (every other round in reverse
    order), and report the median over the rounds, so that a drift of the clocks while the cell runs
    reaches all rows alike; each row keeps its rounds' times under "ms runs". rep: do_bench's repeat time
    per timing, in ms."""
    from . import trips
    rows: list[dict] = []
    gpu = on_gpu()
    c = ceilings() if gpu else REFERENCE
    rounds = rounds if gpu else 1
    # in turn, every other round reversed, as interleaved() does (kept inline for the progress bar)
    items = list(impls.items())
    steps = [(r, name, fn) for r in range(rounds) for name, fn in (items[::-1] if r % 2 else items)]
    by_name: dict = {}
    for r, name, fn in progress.steps(steps, title or "timing",
                                      show=lambda s: s[1] + (f", round {s[0] + 1} of {rounds}" if rounds > 1 else "")):
        row = by_name.get(name)
        if row is None:
            row = by_name[name] = {"impl": name, "status": "ok"}
            rows.append(row)
        if row["status"] != "ok":
            continue
        try:
            if gpu:
                row.setdefault("ms runs", []).append(time(fn, rep=rep))
                row["ms"] = statistics.median(row["ms runs"])
            else:
                t = trips.count(fn)
                row["launches"], row["bytes"] = t.launches, t.bytes
                counted_n, model_n = size or (1, 1)
                row["model ms"] = model_ms_at(t, counted_n, model_n, _per(flops, name) or 0, REFERENCE)
                row["wall ms"] = _wall_ms(fn, 0, 20)  # trips.count already ran it once
        except NotImplementedError:
            row["status"] = "not written yet"
            continue
    for row in rows:
        if gpu and row["status"] == "ok":
            name, ms = row["impl"], row["ms"]
            if isinstance(bytes, dict) and bytes.get(name):
                row["GB/s"] = bytes[name] / ms / 1e6
                row["of copy ceiling"] = row["GB/s"] / c.copy_gbps
            useful = min(bytes.values()) if isinstance(bytes, dict) and bytes else bytes
            if useful:
                row["useful GB/s"] = useful / ms / 1e6
                row.setdefault("of copy ceiling", row["useful GB/s"] / c.copy_gbps)
            if _per(flops, name):
                row["TFLOP/s"] = _per(flops, name) / ms / 1e9
                row["of matmul ceiling"] = row["TFLOP/s"] / c.matmul_tflops
    key = "ms" if gpu else "model ms"
    done = [r for r in rows if r["status"] == "ok"]
    base = done[0]["impl"] if done else None
    for r in done:
        r["speedup"] = done[0][key] / r[key] if r[key] else math.nan
    if gpu:
        order = ["ms", "GB/s", "useful GB/s", "TFLOP/s", "of copy ceiling", "of matmul ceiling", "speedup"]
        heads = {"ms": "ms (measured)", "speedup": f"× vs {base}"}
        columns = [(k, heads.get(k, k)) for k in order if any(k in r for r in rows)]
        how = ("median of triton.testing.do_bench" if rounds == 1 else
               f"median of {rounds} rounds, each timing every row once in turn, every other round in reverse "
               "(a triton.testing.do_bench median)")
        notes = [f"Measured on {c.device}: {how}, L2 flushed before each call.",
                 f"Ceilings: {c.source}."]
        if capability.rehearsal():
            notes.append(f"Rehearsing {capability.rehearsal()} (COURSE_PLAN): its dtypes and tiles, run on "
                         f"{c.device}; these times are {c.device}'s, not measured on the GPU rehearsed.")
    else:
        columns = [("launches", "launches (counted)"), ("bytes", "bytes (counted)"),
                   ("model ms", f"MODEL ms, {REFERENCE.device}"), ("speedup", f"MODEL × vs {base}"),
                   ("wall ms", "interpreter wall ms (MEANINGLESS)")]
        notes = ["No GPU: Triton runs in its CPU interpreter, so nothing here is a GPU measurement.",
                 f"MODEL ms = max(bytes / {REFERENCE.copy_gbps:g} GB/s, FLOPs / {REFERENCE.matmul_tflops:g} TFLOP/s) "
                 f"+ launches x {REFERENCE.launch_us:g} µs, for an {REFERENCE.device} ({REFERENCE.source}; "
                 f"launch cost: {REFERENCE.launch_source}). " + (
                     f"Launches and bytes counted at {size[0]:,} elements; bytes scaled to {size[1]:,}."
                     if size else "Launches and bytes are counted at this run's small size."),
                 "interpreter wall ms: Python executing the kernel on the CPU; meaningless for GPU performance."]
    useful = min(bytes.values()) if isinstance(bytes, dict) and bytes else bytes
    report = Report(title, rows, columns, notes, measured=gpu, bytes=useful, device=c.device if gpu else "",
                    rehearsal=capability.rehearsal() if gpu else "")
    if plot and done and env.in_notebook():
        report.plot()
    return report


