"""The GPU's own count of the bytes: DRAM read and written per function, read from its hardware counters.

    hw = trips.hardware({"eager": lambda: x.cos().cos(), "fused": lambda: cos_chain(x, 2)},
                        counted={"eager": trips.count(...), "fused": trips.count(...)})
    hw                       # label | counted read | counted written | DRAM read (ncu) | DRAM written (ncu)
    hw["fused"].dram_read    # bytes, or None where nothing could be profiled
    hw.available, hw.why     # False and one line where profiling is not possible here
    hw.standby               # the child prepare_hardware() started ahead: what it saw, or why it went unused

Nsight Compute (`ncu`) profiles a process it starts; it cannot attach to a running Jupyter kernel. So the
functions are sent to a child Python started under ncu: pickled by value with cloudpickle (functions and
closures defined in a notebook, the tensors they hold, a @triton.jit kernel rebuilt from its source, a
torch.compile'd function compiled again from the original with the same options). The child runs every
function twice as a warm-up (compiling, outside the profiled part), then each once more inside an NVTX
range named after it, which ncu profiles kernel by kernel with its default --cache-control all: L2
flushed before each kernel, so a kernel's DRAM bytes are its own. Per function: the sum over its kernels
of `dram__bytes_read.sum` and `dram__bytes_write.sum`.

What it costs: one child for all the functions, and the notebook waits for it. The tensors the functions
hold are copied into the child through a file; the child starts Python and torch (and Dynamo and Inductor
when a function is compiled, the larger part); its kernels come from the on-disk Triton and Inductor
caches the notebook filled (same user, same environment), so nothing is compiled from scratch; and ncu
adds its start and a replay of each profiled kernel. Measured on the course's H100 (2026-11-27,
tools/hardware_bytes_probe.py): 19.6 s for four functions on a 256 MiB tensor, two of them compiled
(in the child: 8.3 s loading them, Dynamo included; 2.0 s warm-up; 1.5 s profiling), 7.3 s for one eager
function; a lesson's cell with three or four versions, 15 to 20 s.

Started ahead: `prepare_hardware()`, in a lesson's imports cell, starts that child early, in the
background (a standby): ncu starts, and the child imports torch, Triton, cloudpickle, Dynamo and Inductor,
then waits for a job without initialising CUDA (see _standby_child). The next hardware() call hands it the
functions, so the cell waits for their tensors to reach the GPU, the warm-up, the profiling, and the
child's exit with ncu's report, not for any start. One standby serves one call; hardware() runs a fresh
child as above whenever there is no standby, it has ended, the environment changed under it in a way it
cannot follow, or it failed for a reason of its own (not the functions' errors, which it reports).
Measured on a 2-core CPU with the stand-in ncu of tests/test_trips_hardware.py (2026-11-27): 4.4-4.9 s
fresh against 1.9-2.5 s with a standby for four eager functions, 12.5-16.4 s against 5.8-6.3 s with a
compiled one among them; with a standby most of what is left is the child's exit (about 2 s there).

It never raises for the machine's reasons: no GPU, no ncu, counters not open to this user (a hub, Colab),
a timeout, a crash in the child: `available` is False and `why` says which, in one line.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass

from .environment import INTERPRET, ON_GPU
from .numbers import byte_size

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
RANGE = "hardware-bytes"           # the NVTX range of function i is "hardware-bytes i"
DELIMITER = "spin_kernel"          # torch.cuda._sleep's kernel, launched after each function's range
DIFFERS = 0.10                     # counted and DRAM bytes further apart than this are marked
NOISE_BYTES = 1 << 20              # differences under 1 MiB are never marked (small tensors, stray lines)
NCU_PLACES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
_UNITS = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
          "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}


@dataclass
class HardwareRow:
    """One function: the bytes counted by the course, and the DRAM bytes the GPU's counters saw."""
    label: str
    counted: object = None           # the Trips of trips.count, or None
    dram_read: int | None = None
    dram_written: int | None = None
    kernels: int | None = None       # kernels ncu profiled for it
    l2_bytes: int = 0                # the L2 cache of the GPU profiled

    counted_read = property(lambda self: None if self.counted is None else self.counted.bytes_read)
    counted_written = property(lambda self: None if self.counted is None else self.counted.bytes_written)

    @property
    def differs(self) -> bool:
        """True where counted and DRAM bytes differ by more than 10%: reads either way, writes above the count,
        or below it by more than the L2 can hold at the end of each kernel (see write_shortfall)."""
        def apart(c, d, allowed=0):
            if c is None or d is None:
                return False
            return max(d - c, c - d - allowed) > max(DIFFERS * max(c, d), NOISE_BYTES)
        return apart(self.counted_read, self.dram_read) or \
            apart(self.counted_written, self.dram_written, self.l2_bytes * (self.kernels or 0))

    @property
    def write_shortfall(self) -> bool:
        """DRAM written more than 10% under the count. The L2 writes back to DRAM when it needs the room, so
        what a kernel wrote last can still be in the L2 when it ends, and reaches DRAM after its count."""
        c, d = self.counted_written, self.dram_written
        return c is not None and d is not None and c - d > max(DIFFERS * c, NOISE_BYTES)


class Hardware:
    """What trips.hardware returns: a row per label, shown as a table (text and HTML)."""

    def __init__(self, labels, counted, available=False, why="", seconds=0.0):
        self.rows = {label: HardwareRow(label, counted.get(label)) for label in labels}
        self.available, self.why, self.seconds = available, why, seconds
        self.child_seconds: dict = {}   # where the profiled process spent its time: import, load, warm-up, profiled
        # the standby prepare_hardware started: None where there was none; {"used": True, what it saw before
        # the job}; or {"used": False, "why": ...} where a fresh child ran instead
        self.standby: dict | None = None

    def __getitem__(self, label) -> HardwareRow:
        return self.rows[label]

    def __iter__(self):
        return iter(self.rows.values())

    def __len__(self):
        return len(self.rows)

    def _cells(self) -> list[tuple]:
        def size(n):
            return "-" if n is None else byte_size(n)
        head = ("", "counted read", "counted written") + (("DRAM read (ncu)", "DRAM written (ncu)")
                                                          if self.available else ())
        rows = [head]
        for r in self:
            cells = (r.label, size(r.counted_read), size(r.counted_written))
            if self.available:
                cells += (size(r.dram_read), size(r.dram_written))
            rows.append(cells + ("*" if self.available and r.differs else "",))
        return rows

    def notes(self) -> list[str]:
        if not self.available:
            return [f"DRAM bytes (ncu): not measured here: {self.why}"]
        notes = []
        if any(r.differs for r in self):
            notes.append(f"* counted and DRAM bytes differ by more than {DIFFERS:.0%} (writes: beyond what the L2 "
                         "may still hold when a kernel ends)")
        if any(r.write_shortfall for r in self):
            l2 = next(r.l2_bytes for r in self)
            notes.append("DRAM written can fall short of the count: what a kernel writes last can still be in the L2 "
                         "cache when it ends" + (f" (up to its {l2 / 2**20:.0f} MiB)" if l2 else "")
                         + ", and reaches DRAM after the kernel's count")
        if self.why:
            notes.append(self.why)
        if self.standby and not self.standby.get("used"):
            notes.append(f"the profiler's process started ahead could not be used ({self.standby['why']}): "
                         "a fresh one ran")
        notes.append(f"DRAM bytes: the GPU's counters (dram__bytes_read.sum, dram__bytes_write.sum), through "
                     f"Nsight Compute, L2 flushed before each kernel; profiled in {self.seconds:.0f} s")
        return notes

    def table(self) -> str:
        rows = self._cells()
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in
                           enumerate(zip(r[:-1], widths))) + (" " + r[-1] if r[-1] else "") for r in rows]
        return "\n".join([line.rstrip() for line in lines] + self.notes())

    __repr__ = table

    def _repr_html_(self) -> str:
        import html
        return "<pre>" + html.escape(self.table()) + "</pre>"


# --- the parent: check, send, run ncu, read back ---------------------------------------------------------
def hardware(fns, counted=None, *, timeout: float = 300) -> Hardware:
    """DRAM bytes read and written by each function, from the GPU's counters, beside the counted bytes.

    fns: {label: function of no arguments} (closures over tensors already on the GPU; a torch.compile'd
    function is fine). counted: {label: Trips} from trips.count for the same labels (optional), shown
    beside. Returns a Hardware table; rows where counted and DRAM bytes differ by more than 10% are
    marked. Runs each function in a child process under Nsight Compute, twice to warm up and once
    profiled (see the module's docstring for what it costs); where that is not possible here, says why
    in one line and shows the counted bytes alone. timeout: seconds before the child is stopped."""
    if not isinstance(fns, dict):
        raise TypeError("trips.hardware takes a dict {label: function of no arguments}, e.g. "
                        "{'eager': lambda: x.cos().cos()}, " + f"not {type(fns).__name__}")
    if not fns:
        raise ValueError("trips.hardware: fns is empty: give it {label: function of no arguments}")
    for label, fn in fns.items():
        if not isinstance(label, str):
            raise TypeError(f"trips.hardware: each label is a string, not {type(label).__name__} ({label!r})")
        if not callable(fn):
            raise TypeError(f"trips.hardware: fns[{label!r}] is a {type(fn).__name__}, not a function: "
                            "give a function of no arguments, e.g. lambda: f(x)")
    counted = {} if counted is None else counted
    if not isinstance(counted, dict):
        raise TypeError("trips.hardware: counted is a dict {label: Trips from trips.count}, "
                        f"not {type(counted).__name__}")
    for label, t in counted.items():
        if label not in fns:
            raise ValueError(f"trips.hardware: counted has {label!r}, which fns does not: "
                             f"the labels of fns are {list(fns)}")
        if not (hasattr(t, "bytes_read") and hasattr(t, "bytes_written")):
            raise TypeError(f"trips.hardware: counted[{label!r}] is a {type(t).__name__}, not what "
                            "trips.count returns")
    hw = Hardware(list(fns), counted)
    why = _why_not_here()
    if why is None:
        ncu = _find_ncu()
        why = "Nsight Compute (ncu) is not installed here, or not on the PATH" if ncu is None else None
    if why is not None:
        hw.why = why
        return hw
    t0 = time.perf_counter()
    standby = _take_standby(ncu)
    try:
        with tempfile.TemporaryDirectory(prefix="hardware-bytes-") as folder:
            why = _send(fns, folder)
            if why is None and isinstance(standby, _Standby):
                try:
                    why, unused = _profile_standby(hw, standby, folder, t0, timeout)
                except Exception as e:  # noqa: BLE001  (the standby's trouble, not the functions')
                    why, unused = None, f"{type(e).__name__}: {_first_line(e)}"
                if unused is not None:    # the standby's own trouble: a fresh child does it all again
                    standby.end()
                    standby = unused
                    _remove(os.path.join(folder, "status.json"))
                    why = _profile(hw, ncu, folder, timeout)
            elif why is None:
                why = _profile(hw, ncu, folder, timeout)
    except Exception as e:  # noqa: BLE001  (a lesson goes on without the hardware's count, saying why)
        why = f"could not profile: {type(e).__name__}: {_first_line(e)}"
    finally:
        if isinstance(standby, _Standby):
            standby.end()
    if isinstance(standby, str):
        hw.standby = {"used": False, "why": standby}
    hw.seconds = time.perf_counter() - t0
    hw.available = why is None or why.startswith("note:")
    hw.why = (why or "").removeprefix("note: ")
    return hw


def _why_not_here() -> str | None:
    """Why no GPU kernel can be profiled here, or None."""
    if not ON_GPU:
        return "Nsight Compute needs a GPU, and this machine has none"
    if INTERPRET:
        return "Triton's interpreter is on (TRITON_INTERPRET=1): the kernels run on the CPU, not the GPU"
    return None


def _find_ncu() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    for place in ([os.path.join(home, "bin", "ncu")] if home else []) + list(NCU_PLACES):
        if os.path.isfile(place) and os.access(place, os.X_OK):
            return place
    return None


def _send(fns, folder) -> str | None:
    """Write the functions (and the tensors they hold) for the child; None, or why it could not."""
    try:
        import cloudpickle
    except ImportError:
        return "cloudpickle is not installed (pip install cloudpickle): it sends the functions to the profiler"
    import torch

    class Pickler(cloudpickle.Pickler):
        def reducer_override(self, obj):
            reduced = _reduce_kernel_or_compiled(obj)
            return reduced if reduced is not NotImplemented else super().reducer_override(obj)

    # what torch.save needs of a pickle module: so tensors go in as torch stores them, without a second copy
    pickle_module = types.SimpleNamespace(__name__="pickle", Pickler=Pickler)
    with open(os.path.join(folder, "paths.json"), "w") as f:
        json.dump([p for p in sys.path if p], f)
    try:   # all in one file: a tensor that several functions hold is sent once
        torch.save(list(fns.items()), os.path.join(folder, "fns.pt"), pickle_module=pickle_module)
        return None
    except Exception as e:  # noqa: BLE001  (a function that cannot be sent: say which, go on without ncu)
        failed = e
    for label, fn in fns.items():   # which one: each alone
        try:
            Pickler(io.BytesIO()).dump(fn)
        except Exception as e:  # noqa: BLE001
            return f"could not send {label!r} to the profiler's process: {type(e).__name__}: {_first_line(e)}"
    return f"could not send the functions to the profiler's process: {type(failed).__name__}: {_first_line(failed)}"


def _ncu_command(ncu: str, log: str) -> list[str]:
    return [ncu, "--profile-from-start", "off", "--nvtx", "--print-nvtx-rename", "kernel",
            "--metrics", ",".join(METRICS), "--csv", "--page", "raw", "--print-units", "base",
            "--target-processes", "application-only", "--log-file", log]


def _child_env() -> dict:
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
               PYTHONUNBUFFERED="1")
    # what the child compiles comes from the caches: a pool of compile workers would only cost its start
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env


def _profile(hw: Hardware, ncu: str, folder: str, timeout: float) -> str | None:
    """Run a fresh child under ncu and fill hw's rows; None, or why not (or "note: ..." for a partial result)."""
    log = os.path.join(folder, "ncu.csv")
    command = _ncu_command(ncu, log) + [sys.executable, "-c",
                                        "from course_utils.hardware_bytes import _child; _child()", folder]
    try:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 env=_child_env(), start_new_session=True)
    except OSError as e:
        return f"could not start ncu: {e}"
    try:
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end(child)
        return f"Nsight Compute took longer than {timeout:.0f} s and was stopped"
    why, _ = _read_result(hw, out + (_read(log) or ""), _read(log) or "", folder, child.returncode)
    return why


def _read_result(hw: Hardware, text: str, log: str, folder: str, returncode) -> tuple[str | None, bool]:
    """Fill hw's rows from what ncu and the child left. (why or None, whether the child itself failed in a way
    a fresh one might not: it ended without a word, or before it ran any of the functions)."""
    if "ERR_NVGPUCTRPERM" in text:
        return ("this user may not read the GPU's performance counters (ERR_NVGPUCTRPERM): "
                "an administrator can allow it (NVreg_RestrictProfilingToAdminUsers=0)"), False
    status = _read_json(os.path.join(folder, "status.json"))
    if status is None or "error" in status:
        said = status["error"] if status else _last_error_line(text) or f"ncu exited with {returncode}"
        return f"the profiled process failed: {said}", status is None or not status.get("in_function")
    per_kernel = parse_ncu_csv(log)
    if not per_kernel:
        return "Nsight Compute profiled no kernel" + (f" ({_last_error_line(text)})" if _last_error_line(text)
                                                      else ""), True
    by_label = attribute(per_kernel, len(hw))
    if by_label is None:
        return "could not tell which profiled kernels belong to which function", True
    hw.child_seconds = status.get("seconds", {})
    if "standby" in status:
        hw.standby = dict(status["standby"], used=True)
    l2 = _l2_bytes()
    for i, row in enumerate(hw):
        row.l2_bytes = l2
        kernels = by_label.get(i, [])
        row.kernels = len(kernels)
        if kernels:
            row.dram_read = round(sum(k.get(METRICS[0], 0) for k in kernels))
            row.dram_written = round(sum(k.get(METRICS[1], 0) for k in kernels))
    empty = [row.label for row in hw if not row.kernels]
    return (f"note: no kernel was profiled for {', '.join(map(repr, empty))}" if empty else None), False


def _l2_bytes() -> int:
    try:
        import torch
        return int(torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size)
    except Exception:  # noqa: BLE001  (no GPU here: a stand-in ncu in a test)
        return 0


def _end(child):
    import signal
    try:
        os.killpg(child.pid, signal.SIGKILL)   # ncu and the Python it started: their own session
    except OSError:
        child.kill()
    child.communicate()


def _read(path) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _read_json(path):
    text = _read(path)
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _first_line(e) -> str:
    return (str(e).strip().splitlines() or [""])[0][:200]


def _last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "ERROR" in ln or "Error" in ln]
    return (errors or [""])[-1][:200]


# --- reading ncu's CSV ------------------------------------------------------------------------------------
def parse_ncu_csv(text: str) -> list[dict]:
    """ncu's CSV output as one dict per profiled kernel, in launch order: {"id", "name", "cells" (the
    row's text, where the NVTX range shows), and each metric of METRICS in bytes}. Reads the raw page (a
    column per metric, a row of units under the header) and the details page (a row per metric: "Metric
    Name", "Metric Unit", "Metric Value"); lines before the header (ncu's ==PROF== lines, the program's
    own output) are skipped, and values with thousands separators or scaled units are read as bytes."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    reader = csv.DictReader(io.StringIO("\n".join(ln for ln in lines[start:] if ln.startswith('"'))))
    kernels: dict = {}
    units: dict = {}
    long_form = "Metric Name" in (reader.fieldnames or [])
    for row in reader:
        kid = (row.get("ID") or "").strip()
        if not kid:                       # the raw page's units row
            units = {k: v for k, v in row.items() if v}
            continue
        k = kernels.setdefault(kid, {"id": kid, "name": row.get("Kernel Name", ""), "cells": ""})
        k["cells"] += " | " + " | ".join(str(v) for v in row.values() if v)
        if long_form:
            name = (row.get("Metric Name") or "").strip()
            if name in METRICS:
                value = _bytes(row.get("Metric Value"), row.get("Metric Unit"))
                if value is not None:
                    k[name] = value
        else:
            for name in METRICS:
                value = _bytes(row.get(name), units.get(name))
                if value is not None:
                    k[name] = value
    return list(kernels.values())


def _bytes(value, unit) -> float | None:
    if value is None:
        return None
    text = str(value).strip().replace(",", "").replace("\u202f", "").replace(" ", "")
    try:
        number = float(text)
    except ValueError:
        return None
    return number * _UNITS.get(str(unit or "byte").strip().lower(), 1)


def attribute(kernels: list[dict], n: int) -> dict | None:
    """{function index: its kernels}: by the NVTX range each kernel ran in ("hardware-bytes i", which ncu
    puts in the kernel's name with --print-nvtx-rename), else by the delimiter kernel the child launches
    after each function (function i's kernels come before the (i+1)-th delimiter). None if neither works."""
    tag = re.compile(rf"{re.escape(RANGE)} (\d+)\b")
    out: dict = {}
    tagged = False
    for k in kernels:
        found = tag.search(k["cells"])
        if found:
            tagged = True
            out.setdefault(int(found.group(1)), []).append(k)
    if tagged:
        return out
    delimiters = [i for i, k in enumerate(kernels) if DELIMITER in k["name"]]
    if len(delimiters) != n:
        return None
    out, begin = {}, 0
    for i, end in enumerate(delimiters):
        out[i] = kernels[begin:end]
        begin = end + 1
    return out


# --- sending kernels and compiled functions ---------------------------------------------------------------
def _reduce_kernel_or_compiled(obj):
    """How the child rebuilds a @triton.jit kernel or a torch.compile'd function (NotImplemented: as usual)."""
    if type(obj).__name__ in ("JITFunction", "InterpretedFunction") and callable(getattr(obj, "fn", None)):
        fn = obj.fn
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        if module is not None and module.__name__ != "__main__" and getattr(module, fn.__qualname__, None) is obj:
            return _import_attribute, (module.__name__, fn.__qualname__)   # importable there as well
        import inspect
        lines, start = inspect.getsourcelines(fn)
        options = getattr(obj, "kwargs", None) or {name: getattr(obj, name, None)
                                                   for name in ("do_not_specialize", "debug", "noinline")}
        return _rebuild_kernel, (fn, "".join(lines), start, {k: v for k, v in options.items() if v})
    if "torch._dynamo" in sys.modules and isinstance(obj, types.FunctionType) \
            and callable(getattr(obj, "_torchdynamo_orig_callable", None)):
        return _rebuild_compiled, (obj._torchdynamo_orig_callable, *_compile_options(obj))
    if type(obj).__name__ == "OptimizedModule" and hasattr(obj, "_orig_mod"):
        return _rebuild_compiled, (obj._orig_mod, *_compile_options(getattr(obj, "dynamo_ctx", None)))
    return NotImplemented


def _compile_options(compiled) -> tuple:
    """(Inductor options, dynamic) that torch.compile was given (mode="reduce-overhead" is an option
    among them), found in the compiled function's closure; ({}, None) where they cannot be found."""
    candidates = [c.cell_contents for c in (getattr(compiled, "__closure__", None) or ())
                  if _cell_has_value(c)]
    candidates.append(getattr(compiled, "callback", None))
    for value in candidates:
        for _ in range(8):
            if value is None:
                break
            if type(value).__name__ == "_TorchCompileInductorWrapper":
                return dict(getattr(value, "config", {}) or {}), getattr(value, "dynamic", None)
            value = getattr(value, "_torchdynamo_orig_backend", None) or getattr(value, "callback", None)
    return {}, None


def _cell_has_value(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _import_attribute(module: str, qualname: str):
    import importlib
    value = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


_sources: dict = {}   # in the child: file name -> its lines, as far as the kernels sent from it tell


def _rebuild_kernel(fn, source: str, start: int, options: dict):
    """triton.jit(fn) in the child. Triton reads a kernel's source with inspect (through linecache), and a
    notebook's cell is no file there: its text goes into linecache under the same name, at the same line."""
    import inspect
    import linecache
    import triton
    name = fn.__code__.co_filename
    lines = _sources.setdefault(name, [])
    new = source.splitlines(True)
    lines.extend(["\n"] * (start - 1 + len(new) - len(lines)))
    lines[start - 1:start - 1 + len(new)] = new
    linecache.cache[name] = (sum(map(len, lines)), None, lines, name)
    accepted = inspect.signature(triton.jit).parameters
    return triton.jit(fn, **{k: v for k, v in options.items() if k in accepted})


def _rebuild_compiled(fn, options: dict, dynamic):
    import torch
    return torch.compile(fn, options=options or None, dynamic=dynamic)


# --- started ahead: the standby --------------------------------------------------------------------------
STANDBY_POLL_S = 0.05           # how often the standby looks for its job, and the parent for the standby
STANDBY_GRACE_S = 10.0          # a standby that has imported everything and not taken its job by then is stuck
STANDBY_START_S = 180.0         # one still importing this long after its job came is given up
STANDBY_IDLE_S = 2 * 3600.0     # one nobody used ends itself (a notebook left open)
# variables read as the standby started (Python, torch's and the course's settings, which GPUs CUDA shows):
# changed since, the standby is no longer what a fresh child would be
STARTUP_VARIABLES = ("PYTHON", "LD_", "TORCH", "PYTORCH", "COURSE_", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES",
                     "CUDA_DEVICE_ORDER")
# ...except those torch sets itself while it compiles, and reads again each time; every other variable
# that changed is set in the standby when its job comes, before it imports the course or touches the GPU
RUNTIME_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TORCH_WARM_POOL", "_TORCHINDUCTOR")
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"   # torch.cuda.is_available() asks NVML, not CUDA

_standby = None   # the _Standby prepare_hardware started, until a hardware() call takes it


def prepare_hardware() -> None:
    """Start, in the background, the process the next trips.hardware call profiles, so that the call waits
    only for the profiling: ncu starts, and the process imports torch, Triton, Dynamo and Inductor, then
    waits without touching the GPU. A lesson calls it in its imports cell. Does nothing where hardware()
    could not profile (no GPU, no ncu, counters closed to this user) or where one is waiting already;
    one serves one hardware() call. Never raises."""
    global _standby
    try:
        if _standby is not None and _standby.owner == os.getpid():
            if _standby.alive():
                return
            _standby.end()
        _standby = None
        if _why_not_here() is not None or not _counters_open():
            return
        ncu = _find_ncu()
        if ncu is not None:
            _standby = _Standby.start(ncu)
    except Exception:  # noqa: BLE001  (then hardware() starts its own child, as without this call)
        _standby = None


def _counters_open() -> bool:
    """False where the driver keeps the GPU's counters to administrators and this user is not root."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return True
    found = re.search(r"^RmProfilingAdminOnly:\s*(\d+)", _read(PARAMS) or "", re.M)
    return not (found and found.group(1) != "0")


PARAMS = "/proc/driver/nvidia/params"


class _Standby:
    """A child waiting under ncu in its own folder: job.json in (written by the parent), ready.json and
    accepted.json out, ncu's CSV in ncu.csv and everything printed in output.txt."""

    def __init__(self, ncu: str, folder: str, process, environ: dict):
        self.ncu, self.folder, self.process, self.environ = ncu, folder, process, environ
        self.owner, self.executable = os.getpid(), sys.executable

    @classmethod
    def start(cls, ncu: str) -> "_Standby":
        folder = tempfile.mkdtemp(prefix="hardware-bytes-standby-")
        env = _child_env()
        nvml_added = NVML_CHECK not in env
        env[NVML_CHECK] = env.get(NVML_CHECK, "1")
        command = _ncu_command(ncu, os.path.join(folder, "ncu.csv")) + [
            sys.executable, "-c", "from course_utils.hardware_bytes import _standby_child; _standby_child()",
            folder, str(os.getpid()), "1" if nvml_added else "0"]
        try:
            with open(os.path.join(folder, "output.txt"), "w") as out:
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                           env=env, start_new_session=True)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        _end_at_exit()
        return cls(ncu, folder, process, dict(os.environ))

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def alive(self) -> bool:
        return self.process.poll() is None

    def end(self):
        if self.process.poll() is None:
            _end(self.process)
        shutil.rmtree(self.folder, ignore_errors=True)


def _end_at_exit():
    import atexit
    if not getattr(_end_at_exit, "registered", False):
        atexit.register(_end_standby)
        _end_at_exit.registered = True


def _end_standby():
    global _standby
    standby, _standby = _standby, None
    if standby is not None and standby.owner == os.getpid():
        standby.end()


def _take_standby(ncu: str):
    """The standby for this call: a _Standby to use, None where there is none, or one line saying why the one
    there cannot be used (it is ended then)."""
    global _standby
    standby, _standby = _standby, None
    if standby is None or standby.owner != os.getpid():   # none, or a forked copy's: not this process's to use
        return None
    if not standby.alive():
        code = standby.process.returncode
        standby.end()
        return f"it had ended, exit code {code}"
    if standby.ncu != ncu or standby.executable != sys.executable:
        standby.end()
        return "it runs another ncu or Python"
    change = environment_change(standby.environ, dict(os.environ))
    if isinstance(change, str):
        standby.end()
        return change
    standby.change = change
    return standby


def environment_change(before: dict, now: dict):
    """({variable: value} to set, [variables] to remove) in the standby: what changed in the environment since
    it started; or one line saying why a fresh child is needed instead."""
    changed = {k for k in before.keys() | now.keys() if before.get(k) != now.get(k)}
    fixed = sorted(k for k in changed if k.startswith(STARTUP_VARIABLES) and not k.startswith(RUNTIME_VARIABLES))
    if fixed:
        return f"{fixed[0]} changed after it started"
    return {k: now[k] for k in changed if k in now}, sorted(k for k in changed if k not in now)


def _profile_standby(hw: Hardware, standby: _Standby, folder: str, t0: float, timeout: float):
    """Hand the job to the standby and read its result: (why or None, None), or (None, one line) where the
    standby failed in a way of its own, and a fresh child should run the job (the standby is ended then)."""
    to_set, to_remove = standby.change
    _write_json(standby.path("job.json"), {"folder": folder, "cwd": os.getcwd(), "set": to_set,
                                           "unset": to_remove})
    sent, ready_at, accepted = time.perf_counter(), None, False
    try:
        while standby.process.poll() is None:
            now = time.perf_counter()
            accepted = accepted or os.path.exists(standby.path("accepted.json"))
            if not accepted:
                if ready_at is None and os.path.exists(standby.path("ready.json")):
                    ready_at = now
                if now > (ready_at + STANDBY_GRACE_S if ready_at is not None else sent + STANDBY_START_S):
                    standby.end()
                    return None, "it did not take its job" if ready_at is not None else \
                        f"it was still starting {STANDBY_START_S:.0f} s later"
            if now > t0 + timeout:
                standby.end()
                if accepted:
                    return f"Nsight Compute took longer than {timeout:.0f} s and was stopped", None
                return None, f"it had not taken its job after {timeout:.0f} s"
            time.sleep(STANDBY_POLL_S)
    except BaseException:
        standby.end()
        raise
    log = _read(standby.path("ncu.csv")) or ""
    why, its_own = _read_result(hw, (_read(standby.path("output.txt")) or "") + log, log, folder,
                                standby.process.returncode)
    if its_own:
        standby.end()
        return None, why
    return why, None


def _write_json(path: str, value):
    """Whole or not at all: the reader polls for the file."""
    with open(path + ".part", "w") as f:
        json.dump(value, f)
    os.replace(path + ".part", path)


def _remove(path: str):
    try:
        os.remove(path)
    except OSError:
        pass


# in the standby, under ncu
def _standby_child():
    """Import what a job needs, wait for the job without initialising CUDA, then run it as _child does.
    The course's import asks torch.cuda.is_available(), which NVML_CHECK has NVML answer, not the CUDA
    driver; importing Triton, Dynamo and Inductor called neither is_available nor torch's CUDA init in torch
    2.13's CPU build (tests/test_trips_hardware.py; a CUDA build may differ). What the
    standby saw goes back with the job's status: those calls, torch's CUDA state and the driver's own.
    argv: its folder, the notebook's process id, 1 if NVML_CHECK was set for it alone."""
    folder, parent, nvml_added = sys.argv[-3], int(sys.argv[-2]), sys.argv[-1] == "1"
    began = time.perf_counter()
    calls: list = []
    unwatch = _watch_cuda_calls(calls)
    try:
        import cloudpickle  # noqa: F401
        import triton.language  # noqa: F401
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
    except Exception:  # noqa: BLE001  (the job imports what it needs again, and says what failed)
        pass
    imported = time.perf_counter() - began
    _write_json(os.path.join(folder, "ready.json"), {"seconds": imported})
    job = _wait_for_job(os.path.join(folder, "job.json"), parent)
    if job is None:    # nobody is left to clear the folder away
        shutil.rmtree(folder, ignore_errors=True)
        sys.exit(0)
    _write_json(os.path.join(folder, "accepted.json"), {})
    import torch
    seen = {"import_s": round(imported, 2), "waited_s": round(time.perf_counter() - began - imported, 2),
            "cuda_calls": list(calls), "torch_cuda_initialized": torch.cuda.is_initialized(),
            "driver": _driver_state()}
    unwatch()
    if nvml_added:
        os.environ.pop(NVML_CHECK, None)
    os.environ.update(job["set"])
    for name in job["unset"]:
        os.environ.pop(name, None)
    try:
        os.chdir(job["cwd"])
    except OSError:
        pass
    _child(job["folder"], standby=seen)


def _wait_for_job(path: str, parent: int):
    """The job, or None once the notebook's process or ncu has gone, or after STANDBY_IDLE_S."""
    ncu, began = os.getppid(), time.perf_counter()
    while time.perf_counter() - began < STANDBY_IDLE_S:
        job = _read_json(path)
        if job is not None:
            return job
        if os.getppid() != ncu or not _alive(parent):
            return None
        time.sleep(STANDBY_POLL_S)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = _read(f"/proc/{pid}/stat")
    return not (stat and stat.rpartition(")")[2].split()[:1] == ["Z"])   # a zombie has ended


def _watch_cuda_calls(calls: list):
    """Note each call of torch.cuda.is_available and of torch's CUDA initialisation, and who made it, until
    the returned function is called."""
    import torch.cuda
    watching = [True]
    real = {name: getattr(torch.cuda, name) for name in ("is_available", "_lazy_init")}

    def watched(name):
        def call(*args, **kwargs):
            if watching:
                calls.append(f"{name} from {sys._getframe(1).f_globals.get('__name__')}")
            return real[name](*args, **kwargs)
        return call
    for name in real:
        setattr(torch.cuda, name, watched(name))

    def unwatch():
        watching.clear()
        for name, fn in real.items():
            setattr(torch.cuda, name, fn)
    return unwatch


def _driver_state() -> str | None:
    """What the CUDA driver says of this process, asked without initialising it; None without a driver."""
    import ctypes
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int()
        code = lib.cuDeviceGetCount(ctypes.byref(count))
        if code == 3:                      # CUDA_ERROR_NOT_INITIALIZED: nothing here called cuInit
            return "not initialised"
        if code != 0:
            return f"cuDeviceGetCount returned {code}"
        active = 0
        for i in range(count.value):
            device, flags, on = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
            if lib.cuDeviceGet(ctypes.byref(device), i) == 0 and \
                    lib.cuDevicePrimaryCtxGetState(device, ctypes.byref(flags), ctypes.byref(on)) == 0:
                active += on.value
        return f"initialised, {active} primary context(s) active"
    except OSError:
        return None
    except Exception as e:  # noqa: BLE001  (a report, not a reason to stop)
        return f"unknown: {type(e).__name__}"


# --- the child, under ncu ---------------------------------------------------------------------------------
def _child(folder: str | None = None, standby: dict | None = None):
    """Load the functions, run each twice (compiling, outside the profiled part), then each again inside its
    NVTX range with the profiler on; write status.json (with what the standby saw before the job, if it was
    one)."""
    folder = folder or sys.argv[-1]
    status_path = os.path.join(folder, "status.json")
    label, began, seconds = None, time.perf_counter(), {}
    try:
        with open(os.path.join(folder, "paths.json")) as f:
            sys.path.extend(p for p in json.load(f) if p not in sys.path)
        import torch
        seconds["import"] = time.perf_counter() - began
        fns = torch.load(os.path.join(folder, "fns.pt"), weights_only=False)
        seconds["load"] = time.perf_counter() - began - sum(seconds.values())
        on_gpu = torch.cuda.is_available() and not INTERPRET
        for _ in range(2):   # twice: a reduce-overhead function records its CUDA graph on its second call
            for label, fn in fns:
                fn()
        if on_gpu:
            torch.cuda.synchronize()
        seconds["warm-up"] = time.perf_counter() - began - sum(seconds.values())
        for i, (label, fn) in enumerate(fns):
            if on_gpu:
                torch.cuda.profiler.start()
                torch.cuda.nvtx.range_push(f"{RANGE} {i}")
            fn()
            if on_gpu:
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
                torch.cuda._sleep(1)          # the delimiter, should the ranges not show in ncu's output
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()
        seconds["profiled"] = time.perf_counter() - began - sum(seconds.values())
        status = {"labels": [label for label, _ in fns], "seconds": seconds}
    except BaseException as e:  # noqa: BLE001  (reported to the parent in one line)
        where = f"{label!r}: " if label is not None else ""
        status = {"error": f"{where}{type(e).__name__}: {_first_line(e)}", "in_function": label is not None}
    if standby is not None:
        status["standby"] = standby
    with open(status_path, "w") as f:
        json.dump(status, f)
    sys.exit(1 if "error" in status else 0)
