#!/usr/bin/env python3
"""Compile every kernel the course launches for every GPU it supports, on a machine without one.

    python3 tools/compile_targets.py                 compile, print the kernel x GPU table, exit 1 on a failure
    python3 tools/compile_targets.py --write         ...and write it to docs/gpu-results/compile-targets.md
    python3 tools/compile_targets.py --targets 7.5   only some targets; --json FILE: the raw results
    python3 tools/compile_targets.py --ci            what CI compiles (the test's selection, see child())
    python3 tools/compile_targets.py --ci --write    ...and refresh compile-targets.md and compile-targets.json
    python3 tools/compile_targets.py --ci --fresh    run every notebook again, trusting no earlier verdict

Triton compiles for a target it does not have: triton.compile(src, target=GPUTarget("cuda", 75, 32)) runs
the whole pipeline down to a cubin (ptxas included) on a CPU. What is hard is knowing *what* a notebook
launches on a T4: its tiles and dtypes come from capability.plan() and its sizes from cu.pick(gpu=...).
So for each target a child process plays that GPU and runs the notebooks' own code:

- plan() is the target's plan (capability.current_cc), cu.pick() picks the GPU size, bench.on_gpu() is
  True, and tensors live on torch's "meta" device (shapes and dtypes, no memory), so a 1 GiB input costs
  nothing;
- Triton's driver is a stand-in that names the target, and the JIT's compile step records each launch --
  the signature, the constexprs, num_warps/num_stages, the pointer alignments, exactly as the JIT would
  compile them -- instead of compiling it; an autotuned kernel is recorded once per config;
- every code cell of every solution (solutions/, solutions/labs/) runs in order; a cell that needs real
  numbers (a check, a .item()) stops at that point, which is after its launches; graders' kernels of
  their own (course_utils/grade/flash_decoding.py's read_kv) are launched through their code path.

Then each distinct (kernel, signature, constexprs, options) is compiled for the target
(course_utils/gpu_compile.py's compile_launch, which the checks use too), with Triton's on-disk cache under
build/triton-cache, and judged: does it compile, does its shared memory fit what the
target grants a block, does it use a dtype the target's plan forbids (bf16 on a T4). Registers and spills
are read from the cubin (cuobjdump -res-usage). tests/test_compile_targets.py runs this in CI.

Each notebook runs in a process of its own (forked once the stand-in is set up), as in a fresh Jupyter kernel, so
what it launches does not depend on the notebooks before it, and one notebook can be judged again alone.

Running the notebooks and compiling what they launch takes minutes a target on two cores, so --ci keeps what it
judged: per target and per source, keyed by a fingerprint of everything that decides the launches and their
compilation (the notebook's code cells, not its markdown; every course_utils/**/*.py; this file; the Triton and
torch versions).
A later --ci run trusts an entry whose fingerprint matches and runs only the notebooks that changed.
`--ci --write` writes them beside the table (COMMITTED, to be committed with it); every --ci run also keeps its own
in LOCAL (build/, not committed), so `--ci --write` right after the test suite ran takes seconds.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import importlib.metadata
import importlib.util
import json
import linecache
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["solutions", "solutions/labs"]
CACHE = ROOT / "build" / "triton-cache"
TABLE = ROOT / "docs" / "gpu-results" / "compile-targets.md"             # --ci --write
TABLE_FULL = ROOT / "docs" / "gpu-results" / "compile-targets-full.md"   # --write: registers and spills too
COMMITTED = ROOT / "docs" / "gpu-results" / "compile-targets.json"        # --ci --write: the verdicts and their keys
LOCAL = ROOT / "build" / "compile-targets.json"                           # every --ci run: the same, not committed
GRADER = "course_utils/grade/flash_decoding.py"   # a source that is not a notebook: its _bare_read_ms launches read_kv
REFRESH = "python3 tools/compile_targets.py --ci --write"
# The supported GPUs: compute capability -> the cards it stands for
TARGETS = {(7, 5): "T4", (8, 0): "A100", (8, 6): "A10 / RTX 30xx", (8, 9): "L4 / RTX 40xx", (9, 0): "H100 / H200"}
# Launches not judged, and why: (notebook, kernel, a piece of its constexprs) -> the reason
NOT_JUDGED = {
    ("03_first_triton_kernel.ipynb", "whoami_kernel_runtime_block", ""):
        "defined to show an error: BLOCK lacks tl.constexpr, so it is meant not to compile",
    ("08_online_softmax.ipynb", "softmax_kernel", "BLOCK=2097152"):
        "the lesson's Hook: a row too long for one block, meant to be refused",
    ("03_first_triton_kernel.ipynb", "whoami_kernel", "BLOCK=250"):
        "the lesson's first deliberate mistake: a block of 250 lanes, not a power of two, meant to be refused",
    ("08_online_softmax.ipynb", "lanes_kernel", "BLOCK=2097152"):
        "the lesson's Hook: a block of 2**21 lanes, past Triton's 2**20, meant to be refused",
    ("07_fused_epilogue.ipynb", "probe_kernel", "BLOCK_M=256, BLOCK_N=256"):
        "the lesson's deliberately oversized tile (it spills, and only runs where it fits); minutes to compile",
}
# Launches known to fail, fixed (or to be fixed) elsewhere: (target, notebook, kernel, dtypes, the constexprs' start,
# num_stages) -> why. CI does not compile them again (on a T4 each takes up to a minute); tests/test_compile_targets.py holds a
# strict xfail for each, which turns red once the launch is gone or passes.
KNOWN_FAILURES = {}   # (lesson 09's fast_attention_kernel on sm_75 was one, until its switches took tiles() there)
COMPILE_SECONDS = 300  # one kernel's compilation, at most; --ci: CI_COMPILE_SECONDS
CI_COMPILE_SECONDS = 60
PTX_ONLY = False       # --ci: stop after Triton's LLVM IR (the shared memory is known there): LLVM's codegen and ptxas
                       # take minutes on a T4's attention kernels (tl.dot as FMAs); no registers then
CELL_SECONDS = 30   # a cell that runs longer than this in the stand-in is stopped (it launched what it had)


def cc_name(cc) -> str:
    return f"sm_{cc[0]}{cc[1]}"


# --- the child: one target ---------------------------------------------------------------------------
def _stand_in(cc):
    """Make this process a `cc` GPU for the course and for Triton's front end; return the launch log. (Before
    course_utils is imported: importing it would switch the interpreter on. Its gpu_compile compiles, later.)"""
    os.environ["TRITON_INTERPRET"] = "0"           # real @triton.jit, never the interpreter
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase
    from triton.runtime import autotuner, driver, jit

    target = GPUTarget("cuda", cc[0] * 10 + cc[1], 32)

    class Driver(DriverBase):   # the few questions the JIT asks before it would compile
        def __init__(self):
            pass

        @staticmethod
        def is_active():
            return True

        def get_current_target(self):
            return target

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_active_torch_device(self):
            return torch.device("meta")

        def get_device_interface(self):
            return torch.cuda

        def get_benchmarker(self):
            return lambda fn, **kw: (fn(), 1.0)[1]

        def map_python_to_cpp_type(self, ty):
            return ty

    driver.set_active(Driver())
    launches = []
    where = {"at": ""}

    def record(self, key, signature, device, constexprs, options, attrs, warmup):
        launches.append((where["at"], self, {"signature": signature, "constants": constexprs, "attrs": attrs,
                                             "options": options}))
        return None   # what the JIT does when a hook declines: no kernel, nothing launched

    jit.JITFunction._do_compile = record

    def every_config(self, *args, **kwargs):   # an autotuned kernel: each config is a launch to compile
        self.nargs = dict(zip(self.arg_names, args))
        for config in self.prune_configs(kwargs):
            full = {**self.nargs, **kwargs, **config.all_kwargs()}
            if config.pre_hook:
                config.pre_hook(full)
            self.fn.run(*args, **kwargs, **config.all_kwargs())
        self.best_config = self.configs[0]
        self.nargs = None

    autotuner.Autotuner.run = every_config
    torch.Tensor.is_cuda = property(lambda self: True)   # wrappers that ask pick the GPU's launch parameters
    return launches, where


def _course_as(cc):
    """Import the course and make it plan, size and time as a `cc` GPU would (nothing really timed)."""
    import torch
    import course_utils as cu
    from course_utils import bench, capability, environment, gpus, trips

    card = gpus.for_cc(cc)
    os.environ["TRITON_INTERPRET"] = "0"   # course_utils switched the interpreter on (no GPU here): off again,
    cu.INTERPRET = environment.INTERPRET = False   # before any notebook defines a kernel
    capability.current_cc = lambda: cc
    environment.gpu_name = lambda: card.name
    environment.compute_capability = lambda: cc
    for module in (cu, environment):
        module.pick = lambda gpu, cpu: gpu
        module.ON_GPU = True
        module.DEVICE = "meta"
    for module in list(sys.modules.values()):   # graders and checkers import ON_GPU / INTERPRET by name
        if getattr(module, "__name__", "").startswith("course_utils.") and hasattr(module, "ON_GPU"):
            module.ON_GPU, module.INTERPRET = True, False

    def once(fn, *a, **k):
        fn()
        return 1.0

    class Anything(float):
        """What trips.count returns here: its launches are recorded, its numbers are a stand-in (1.0, no kernels)
        so that the rest of the cell runs on to its own launches."""
        def __new__(cls):
            return super().__new__(cls, 1.0)

        def __getattr__(self, name):
            return Anything()

        def __call__(self, *args, **kwargs):
            return Anything()

        def __getitem__(self, key):
            return Anything()

        def __iter__(self):
            return iter(())

        def __len__(self):
            return 0

    def count(fn, *args, **kwargs):
        fn(*args)
        return Anything()
    bench.on_gpu = lambda: True
    bench.time = once
    bench.graph_time = lambda calls, **k: [c() for c in calls] and 1.0
    bench.peak_bytes = lambda fn, **k: (fn(), 0)[1]
    bench.ceilings = lambda refresh=False: bench.datasheet_ceilings(card.name)
    trips.count = count
    torch.compile = lambda fn=None, **k: fn if fn is not None else (lambda f: f)
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.empty_cache = lambda *a, **k: None
    torch.cuda.mem_get_info = lambda *a, **k: (80 * 2**30, 80 * 2**30)
    import types
    props = types.SimpleNamespace(name=card.name, major=cc[0], minor=cc[1], multi_processor_count=card.sms,
                                  total_memory=int(card.memory_gb * 1e9), L2_cache_size=int(card.l2_mb * 2**20),
                                  shared_memory_per_block_optin=card.smem_per_block)
    torch.cuda.get_device_properties = lambda *a, **k: props
    torch.cuda.get_device_name = lambda *a, **k: card.name
    torch.cuda.get_device_capability = lambda *a, **k: cc
    return cu


class _Slow(Exception):
    pass


def _run_notebook(path: Path, where: dict) -> list[str]:
    """Every code cell of the notebook, in order, in one namespace; returns the cells that stopped early."""
    import nbformat
    nb = nbformat.read(path, as_version=4)
    ns = {"__name__": "__main__"}
    stopped = []
    cwd = os.getcwd()
    os.chdir(path.parent)

    def too_slow(*_):
        raise _Slow()
    old = signal.signal(signal.SIGALRM, too_slow)
    try:
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            src = "\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
            where["at"] = f"{path.relative_to(ROOT).as_posix()} cell {i}"
            name = f"<{path.name} cell {i}>"
            linecache.cache[name] = (len(src), None, src.splitlines(True), name)   # @triton.jit reads its source
            signal.alarm(CELL_SECONDS)
            c0 = time.perf_counter()
            try:
                exec(compile(src, name, "exec"), ns)
            except BaseException as e:  # noqa: BLE001  (a cell that needs real numbers stops; its launches are in)
                if isinstance(e, KeyboardInterrupt):
                    raise
                stopped.append(f"cell {i}: {type(e).__name__}")
            finally:
                signal.alarm(0)
                if os.environ.get("COMPILE_TARGETS_VERBOSE"):
                    print(f"{time.perf_counter() - c0:6.1f} s  {name}", file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGALRM, old)
        os.chdir(cwd)
    return stopped


def _grader_kernels():
    """Kernels the graders launch of their own, through the code that launches them."""
    import torch
    import importlib
    from course_utils import capability
    flash_decoding = importlib.import_module("course_utils.grade.flash_decoding")
    dtype = capability.plan().low_dtype(bf16=True)
    k = torch.empty(1, 8, 65536, 128, device="meta", dtype=dtype)
    flash_decoding._graph_ms = lambda calls: [c() for c in calls] and 1.0
    flash_decoding._bare_read_ms([(None, k, k)])


def _resources(cubin: bytes) -> tuple[int | None, int | None]:
    """(registers, spilled bytes) of the cubin's kernel, from cuobjdump -res-usage."""
    import tempfile
    import triton
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([str(tool), "-res-usage", f.name], capture_output=True, text=True).stdout
    regs = re.search(r"REG:(\d+)", out)
    spill = re.findall(r"(?:spill|SPILL)\w*:?(\d+)", out)
    stack = re.search(r"STACK:(\d+)", out)
    spilled = sum(int(s) for s in spill) if spill else (int(stack[1]) if stack else None)
    return (int(regs[1]) if regs else None), spilled


def _compile_apart(fn, signature, constexprs, attrs, options, cc) -> dict:
    """course_utils.gpu_compile.compile_launch in a forked process, stopped after COMPILE_SECONDS: a kernel whose
    compilation runs for minutes (on a GPU the student would wait as long at its first launch) fails rather than
    stall CI."""
    import multiprocessing
    import triton
    from course_utils import gpu_compile
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def work():
        try:
            # PTX_ONLY: no PTX, no ptxas: the shared memory is known from the LLVM IR on; registers are not
            kernel = gpu_compile.compile_launch(fn, signature, constexprs, attrs, options, cc,
                                                until="llir" if PTX_ONLY else "cubin")
            regs, spills = _resources(kernel.asm["cubin"]) if not PTX_ONLY else (None, None)
            send.send({"shared": kernel.metadata.shared, "n_regs": regs, "n_spills": spills})
        except BaseException as e:  # noqa: BLE001
            send.send({"error": f"does not compile: {gpu_compile.describe(e)}"})
    proc = ctx.Process(target=work)
    proc.start()
    if recv.poll(COMPILE_SECONDS):
        got = recv.recv()
        proc.join()
        return got
    proc.kill()
    proc.join()
    return {"error": f"compilation did not finish in {COMPILE_SECONDS} s (Triton {triton.__version__}, on this CPU): "
                     "a GPU would stall as long at the first launch"}


def _describe(signature: dict, constexprs: dict) -> tuple[str, str]:
    pointers = sorted({t[1:] for t in signature.values() if isinstance(t, str) and t.startswith("*")})
    names = list(signature)
    consts = {names[path[0]]: value for path, value in constexprs.items() if len(path) == 1}
    shown = ", ".join(f"{k}={v}" for k, v in consts.items() if not callable(v) and v is not None)
    return "/".join(pointers) or "-", shown


def _uses_dot(fn) -> bool:
    """Whether the kernel (or a @triton.jit helper it calls) multiplies tiles: what depends on the target."""
    return "tl.dot" in fn.src or any("tl.dot" in getattr(g, "src", "") for g in fn.__globals__.values()
                                      if type(g).__name__ == "JITFunction" and g.__name__ in fn.src)


def sources(root: Path = ROOT) -> list[str]:
    """What the stand-in runs, in order: every solution notebook, then the grader that launches a kernel of its own."""
    return [p.relative_to(root).as_posix() for folder in SOURCES for p in sorted((root / folder).glob("*.ipynb"))] \
        + [GRADER]


def _judge(launches, cc, ci: bool) -> list[dict]:
    """Compile (CI: a selection of) the distinct launches of one source for `cc` and judge each; the rows."""
    from course_utils import capability
    plan = capability.plan(cc)
    forbidden = {"bf16"} if not plan.bf16 else set()
    rows, seen, compiled_once, compiled_shapes = [], {}, set(), set()
    for at, fn, kw in launches:
        signature, constexprs, attrs, options = kw["signature"], kw["constants"], kw["attrs"], kw["options"]
        dtypes, consts = _describe(signature, constexprs)
        key = hashlib.sha256(repr((fn.cache_key, sorted(signature.items()), sorted(constexprs.items(), key=str),
                                   options.num_warps, options.num_stages)   # alignments aside: one compile
                                  ).encode()).hexdigest()
        if key in seen:
            seen[key]["sites"].add(at)
            continue
        name = fn.__name__
        row = {"kernel": name, "site": at, "sites": {at}, "dtypes": dtypes, "constexprs": consts,
               "num_warps": options.num_warps, "num_stages": options.num_stages, "target": cc_name(cc),
               "dot": _uses_dot(fn)}
        seen[key] = row
        rows.append(row)
        nb = at.split(" cell ")[0].split("/")[-1]
        reason = next((why for (n, k, piece), why in NOT_JUDGED.items() if (n, k) == (nb, name) and piece in consts), "")
        if reason:
            row.update(status="skipped", why=reason)
            continue
        if forbidden & set(dtypes.split("/")):
            row.update(status="failed", why=f"uses {'/'.join(sorted(forbidden))}, which the {cc_name(cc)} plan "
                                            "forbids (plan().bf16 is False)")
            continue
        known = next((why for (t, n, k, d, start, stages), why in KNOWN_FAILURES.items()
                      if (t, n, k, d, stages) == (cc_name(cc), nb, name, dtypes, options.num_stages)
                      and consts.startswith(start)), "")
        if ci and known:
            row.update(status="known", why=f"known to fail, not compiled again in CI: {known}")
            continue
        if ci:   # one compile per kernel, dtypes, warps, stages and non-boolean constexprs: a flag (CAUSAL, EXP2)
            flags = re.sub(r"\w+=(True|False)(, )?", "", consts)   # changes the code, not the tiles it allocates
            shape = (nb, name, dtypes, options.num_warps, options.num_stages, flags)
            if shape in compiled_shapes:
                row.update(status="not compiled", why="CI: the same tiles were compiled with other flags")
                continue
            compiled_shapes.add(shape)
        if ci and not row["dot"]:
            once = (nb, name, dtypes)
            if cc != (7, 5) or once in compiled_once:
                row.update(status="not compiled", why="CI: a 1-D kernel is compiled once, for sm_75")
                continue
            compiled_once.add(once)
        c0 = time.perf_counter()
        got = _compile_apart(fn, signature, constexprs, attrs, options, cc)
        if "error" in got:
            row.update(status="failed", why=got["error"])
        else:
            row.update(shared=got["shared"], n_regs=got["n_regs"], n_spills=got["n_spills"], status="ok", why="")
            limit = plan.smem_per_block
            if got["shared"] > limit:
                row.update(status="failed", why=f"needs {got['shared'] // 1024} KiB of shared memory; {cc_name(cc)} "
                                                f"grants a block {limit // 1024} KiB")
        row["seconds"] = round(time.perf_counter() - c0, 2)
        if os.environ.get("COMPILE_TARGETS_VERBOSE"):
            print(f"{row['seconds']:6.1f} s  compile {name} {dtypes} {consts}", file=sys.stderr, flush=True)
    for row in rows:
        row["sites"] = sorted(row["sites"])
    return rows


def _one_source(source: str, launches: list, where: dict, cc, ci: bool) -> dict:
    """Run one source in the stand-in and judge what it launched (called in a forked process of its own)."""
    t0 = time.perf_counter()
    loaded = set(sys.modules)
    if source == GRADER:
        where["at"] = f"{GRADER} _bare_read_ms"
        try:
            _grader_kernels()
            stopped = []
        except Exception as e:  # noqa: BLE001
            stopped = [f"{type(e).__name__}: {e}"]
    else:
        stopped = _run_notebook(ROOT / source, where)
    captured = time.perf_counter() - t0
    imported = [m for m in sys.modules if m not in loaded]   # in the order they were imported
    rows = _judge(launches, cc, ci)
    return {"rows": rows, "stopped": stopped, "capture_seconds": round(captured, 1),
            "seconds": round(time.perf_counter() - t0, 1), "imported": imported}


def _import(names: list[str]) -> None:
    """Import what a source imported, so that the next fork starts with it: a module imported fresh is the same
    module whichever process imports it, and a notebook's first `trips.compile` or `bench` pulls in torch's
    compiler stack (seconds: 1,600 modules), which 17 sources x 5 targets would otherwise import again each."""
    import importlib
    for name in names:
        if name not in sys.modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001  (an alias or a module that cannot be imported alone: left to the source)
                pass


def _forked(work) -> dict:
    """work() in a forked process (a fresh namespace, like a new Jupyter kernel: nothing one notebook leaves in the
    course's modules or Triton's caches reaches the next); its JSON-able result, or {"error": ...}."""
    import multiprocessing
    import traceback
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def main():
        try:
            send.send(work())
        except BaseException:  # noqa: BLE001
            send.send({"error": traceback.format_exc()[-3000:]})
    proc = ctx.Process(target=main)
    proc.start()
    send.close()
    try:
        got = recv.recv()
    except EOFError:
        got = None
    proc.join()
    return got if got is not None else {"error": f"the process running it died (exit code {proc.exitcode})"}


def child(cc, ci: bool = False, only: list[str] | None = None) -> dict:
    """Play a `cc` GPU: run every solution (or the sources in `only`), compile what it launched. Returns the
    results per source, as JSON.

    ci: the selection CI can afford on two cores: kernels that multiply tiles (tl.dot: what the shared memory,
    the tensor cores and the tiles of each target decide) at every launch for every target, once per set of tiles
    (a launch that differs only in boolean flags is not compiled again), KNOWN_FAILURES not again; the others (1-D
    blocks, the same code on every target) once per kernel and dtype, for the smallest target (sm_75) only;
    the bf16 rule for every launch; and it stops at Triton's LLVM IR (the shared memory is known by then;
    registers and spills are not). `python3 tools/compile_targets.py` (no --ci) compiles every launch down to the cubin."""
    global COMPILE_SECONDS, PTX_ONLY
    if ci:
        COMPILE_SECONDS, PTX_ONLY = CI_COMPILE_SECONDS, True
    cc = tuple(cc)
    t0 = time.perf_counter()
    launches, where = _stand_in(cc)
    _course_as(cc)
    import triton
    done = {}
    for source in only if only is not None else sources():
        done[source] = _forked(lambda: _one_source(source, launches, where, cc, ci))
        _import(done[source].pop("imported", []))
    return {"target": cc_name(cc), "cc": list(cc), "sources": done, "seconds": round(time.perf_counter() - t0, 1),
            "triton": triton.__version__}


# --- what decides the launches: fingerprints, and the verdicts kept under them ------------------------
def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def code_cells(path: Path) -> list[str]:
    """What the stand-in runs of a notebook: its code cells' sources (markdown, outputs and metadata decide no
    launch, so prose can change all day without a notebook being run again)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells
            if c["cell_type"] == "code"]


def shared_fingerprint(root: Path = ROOT, versions: tuple | None = None) -> str:
    """What every source's launches and their compilation depend on: every course_utils/**/*.py (plan, pick,
    checkers and graders that call the kernels, the decoder...), this tool, and the Triton and torch versions.
    course_utils/exercise_hints.json is left out: hint texts, collected from the notebooks' markdown."""
    files = sorted((root / "course_utils").rglob("*.py")) + [root / "tools" / "compile_targets.py"]
    if versions is None:
        versions = tuple(importlib.metadata.version(p) for p in ("triton", "torch"))
    return _digest(*versions, *(f"{f.relative_to(root).as_posix()}\n{f.read_text()}" for f in files))


def fingerprints(root: Path = ROOT, versions: tuple | None = None) -> dict[str, str]:
    """{source: fingerprint}: a source's entry is trusted only while this is unchanged."""
    shared = shared_fingerprint(root, versions)
    return {s: _digest(shared, *([] if s == GRADER else code_cells(root / s))) for s in sources(root)}


def load_kept(path: Path) -> dict:
    """{target: {source: {"fingerprint", "rows", "stopped"}}} from a file --ci wrote; {} if none or unreadable."""
    try:
        return json.loads(path.read_text())["targets"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def reusable(target: str, prints: dict[str, str], kept: list[dict]) -> tuple[dict, list[str]]:
    """(the entries of `target` whose fingerprint matches, found in `kept` in order; the sources to run again)."""
    trusted, stale = {}, []
    for source, fingerprint in prints.items():
        entry = next((k[target][source] for k in kept if k.get(target, {}).get(source, {}).get("fingerprint")
                      == fingerprint), None)
        if entry is None:
            stale.append(source)
        else:
            trusted[source] = entry
    return trusted, stale


def write_kept(results: list[dict], path: Path) -> None:
    """The entries of `results` (one per target and source) with their fingerprints, one row a line; times left
    out, so that the same code writes the same file. A target the results lack keeps what the file held."""
    order = ("kernel", "site", "sites", "dtypes", "constexprs", "num_warps", "num_stages", "target", "dot", "status",
             "why", "shared", "n_regs", "n_spills")
    triton_version = next((r.get("triton") for r in results if r.get("triton")), "?")
    about = ("What CI compiled and judged (tools/compile_targets.py --ci), per target and source, under a "
             "fingerprint of what decides the launches (compile_targets.fingerprints). A --ci run trusts an entry "
             f"whose fingerprint matches and runs the others again. Refresh: {REFRESH}.")
    out = ["{", f' "about": {json.dumps(about)},', f' "triton": {json.dumps(triton_version)},', ' "targets": {']
    held = load_kept(path)
    ran = {r["target"] for r in results}
    targets = [r for r in results if r.get("entries")] + [
        {"target": t, "entries": held[t]} for cc in TARGETS if (t := cc_name(cc)) in held and t not in ran]
    for i, r in enumerate(targets):
        out.append(f'  {json.dumps(r["target"])}: {{')
        entries = [(s, e) for s, e in r["entries"].items() if "error" not in e]
        for j, (source, e) in enumerate(entries):
            rows = [json.dumps({k: row[k] for k in order if k in row}) for row in e["rows"]]
            out += [f'   {json.dumps(source)}: {{"fingerprint": {json.dumps(e["fingerprint"])}, '
                    f'"stopped": {json.dumps(e["stopped"])}, "rows": [']
            out += [f"    {row}," for row in rows[:-1]] + [f"    {row}" for row in rows[-1:]]
            out.append("   ]}" + ("," if j < len(entries) - 1 else ""))
        out.append("  }" + ("," if i < len(targets) - 1 else ""))
    out += [" }", "}"]
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}")   # whole or not at all: two runs may write LOCAL at once
    part.write_text("\n".join(out) + "\n")
    os.replace(part, path)


# --- the parent: every target ------------------------------------------------------------------------
def run_target(cc, cache: Path = CACHE, ci: bool = False, only: list[str] | None = None) -> dict:
    """The child for one target, in a process of its own (all sources, or those in `only`)."""
    import tempfile
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    with tempfile.TemporaryDirectory(prefix="compile-targets-home-") as home:
        env.update(TRITON_CACHE_DIR=str(cache / "ptx-only" if ci else cache),   # --ci's kernels lack their cubin
                   COURSE_HEADLESS="1", MPLBACKEND="Agg", PYTHONHASHSEED="0",
                   XDG_CACHE_HOME=home,   # no tuned choice or ceilings cached by an earlier run: tune launches all
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        cmd = [sys.executable, __file__, "--child", f"{cc[0]}.{cc[1]}"] + (["--ci"] if ci else []) \
            + (["--only", *only] if only is not None else [])
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("{"):
        return {"target": cc_name(cc), "cc": list(cc), "sources": {}, "error": (done.stderr or done.stdout)[-3000:]}
    return json.loads(lines[-1])


def _flatten(r: dict, entries: dict, order: list[str]) -> dict:
    """A target's result as the table and the test read it: every row and stopped cell, in the sources' order."""
    r["entries"] = {s: entries[s] for s in order if s in entries}
    r["rows"] = [row for e in r["entries"].values() for row in e.get("rows", [])]
    r["stopped"] = {s: e.get("stopped", []) for s, e in r["entries"].items()}
    failed = [f"{s}: {e['error']}" for s, e in r["entries"].items() if "error" in e]
    if failed:
        r["error"] = "\n".join(filter(None, [r.get("error"), *failed]))
    r["capture_seconds"] = round(sum(e.get("capture_seconds", 0) for e in r["entries"].values()), 1)
    return r


def run(targets=TARGETS, jobs: int = 2, cache: Path = CACHE, ci: bool = False, reuse: bool = True) -> list[dict]:
    """Every target in a pool of `jobs` processes; the results in TARGETS' order.

    ci: each source whose fingerprint matches an entry of COMMITTED or LOCAL is not run again (unless reuse is
    False): its rows are those kept ("reused" lists them, "recomputed" the rest); the results go to LOCAL."""
    cache.mkdir(parents=True, exist_ok=True)
    order = sources()
    prints = fingerprints() if ci else {}
    kept = [load_kept(COMMITTED), load_kept(LOCAL)] if ci and reuse else []

    def one(cc):
        trusted, stale = reusable(cc_name(cc), prints, kept) if ci else ({}, order)
        t0 = time.perf_counter()
        if stale:
            r = run_target(cc, cache, ci, None if stale == order else stale)
        else:
            r = {"target": cc_name(cc), "cc": list(cc), "sources": {}, "triton": importlib.metadata.version("triton")}
        r["seconds"] = round(time.perf_counter() - t0, 1)
        fresh = r.pop("sources")
        for source, e in fresh.items():
            if source in prints:
                e["fingerprint"] = prints[source]
        r["reused"], r["recomputed"] = sorted(trusted), [s for s in stale if s in fresh]
        return _flatten(r, {**trusted, **fresh}, order)

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(one, targets))
    if ci:
        write_kept(results, LOCAL)
    return results


def table(results: list[dict], ci: bool = False) -> str:
    """The kernel x GPU table, as markdown: one row per kernel launch, one column per target."""
    triton_version = next((r.get("triton") for r in results if r.get("triton")), "?")
    selection = ("CI's selection (`--ci`): the kernels that multiply tiles for every target, once per set of tiles, "
                 "compiled to Triton's LLVM IR (shared memory known, no registers: no ptxas); the 1-D kernels once "
                 "each, for sm_75; the known failures not again (\"known\"). The verdicts are kept in "
                 "compile-targets.json, per target and notebook, under a fingerprint of what decides the launches (the "
                 "notebook's code cells, course_utils, the tool, Triton's and torch's versions): CI runs again only "
                 "the notebooks whose fingerprint changed. " if ci else
                 "Every launch, down to the cubin. ")
    lines = ["# Every kernel, compiled for every supported GPU", "",
             f"Written by `python3 tools/compile_targets.py{' --ci' if ci else ''} --write` "
             "(tests/test_compile_targets.py runs the `--ci` selection in CI). Each solution notebook ran with the "
             "plan, sizes and launch parameters of each GPU, "
             "its launches recorded and compiled for that GPU's target on a machine without one "
             f"(Triton {triton_version}, CPU wheel; the GPUs and Colab run Triton 3.6, whose compiler may allocate "
             "differently). " + selection + "A cell: the launches compiled, the most registers per thread, spilled "
             "bytes and the most shared memory (KiB), or why it fails.", "",
             "| target | cards | shared memory a block |", "|---|---|---|"]
    from_cc = {tuple(r["cc"]): r for r in results}
    smem = {(7, 5): 64, (8, 0): 163, (8, 6): 99, (8, 9): 99, (9, 0): 227}
    for cc in from_cc:
        lines.append(f"| {cc_name(cc)} | {TARGETS.get(cc, '?')} | {smem.get(cc, '?')} KiB |")
    lines.append("")
    # a launch is (kernel, where, its parameters); its parameters differ by target, so key on kernel and site
    kernels: dict = {}
    for r in results:
        for row in r["rows"]:
            kernels.setdefault((row["site"].split(" cell ")[0], row["kernel"]), {}).setdefault(r["target"], []).append(row)
    head = [cc_name(cc) for cc in from_cc]
    lines += ["| notebook | kernel | " + " | ".join(head) + " |", "|---|---|" + "---|" * len(head)]
    for (nb, kernel), by_target in sorted(kernels.items()):
        cells = []
        for t in head:
            rows = by_target.get(t, [])
            if not rows:
                cells.append("not launched")
                continue
            bad = [x for x in rows if x["status"] in ("failed", "known")]
            if bad:
                cells.append("; ".join(f"**FAILS** ({x['dtypes']}, {x['constexprs']}): {x['why']}" for x in bad[:2]))
                continue
            ok = [x for x in rows if x["status"] == "ok"]
            if not ok:
                cells.append(f"{rows[0]['status']}: {rows[0]['why']}")
                continue
            most_shared = max(x["shared"] for x in ok) / 1024
            regs = [x["n_regs"] for x in ok if x["n_regs"] is not None]
            spills = max((x["n_spills"] or 0) for x in ok)
            got = (f"≤ {max(regs)} regs / {spills} B spilled / " if regs else "") + f"≤ {most_shared:.0f} KiB"
            cells.append(f"{len(ok)} compiled: {got}")
        lines.append(f"| {nb.split('/')[-1]} | `{kernel}` | " + " | ".join(cells) + " |")
    lines += ["", "The tightest fit on each target (the most shared memory for what a block gets)"
              + ("" if ci else " and the most bytes spilled") + ":"]
    for r in results:
        ok = [x for x in r["rows"] if x["status"] == "ok"]
        if not ok:
            continue
        limit = smem.get(tuple(r["cc"]), 0) * 1024
        tight = max(ok, key=lambda x: x["shared"])
        what = (f"- {r['target']}: `{tight['kernel']}` ({tight['site'].split('/')[-1]}, {tight['constexprs']}) "
                f"{tight['shared'] / 1024:.0f} of {limit // 1024} KiB")
        spilled = max(ok, key=lambda x: x["n_spills"] or 0)
        if not ci and (spilled["n_spills"] or 0):
            what += (f"; `{spilled['kernel']}` ({spilled['site'].split('/')[-1]}, {spilled['constexprs']}) spills "
                     f"{spilled['n_spills']:,} B with {spilled['n_regs']} registers a thread")
        lines.append(what)
    failures = [(r["target"], row) for r in results for row in r["rows"] if row["status"] in ("failed", "known")]
    counts: dict = {}
    for r in results:
        for row in r["rows"]:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
    meaning = {"skipped": "a launch a lesson makes to show an error, or one left out for its cost (NOT_JUDGED)",
               "known": "a failure listed in KNOWN_FAILURES, reported or fixed on another branch",
               "not compiled": "left to the full run"}
    lines += ["", f"{sum(counts.values())} distinct launches over {len(results)} targets: " +
              ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) + " (" +
              "; ".join(f"\"{status}\": {meaning[status]}" for status in sorted(counts) if status in meaning) + ")."]
    for t, row in failures:
        lines.append(f"- {t}: `{row['kernel']}` ({row['site']}; {row['dtypes']}; {row['constexprs']}; "
                     f"{row['num_warps']} warps, {row['num_stages']} stages): {row['why']}")
    errors = [r for r in results if r.get("error")]
    for r in errors:
        lines.append(f"- {r['target']}: the run failed: {r['error'].splitlines()[-1] if r['error'] else '?'}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", nargs="*", help="capabilities, e.g. 7.5 9.0 (default: all supported)")
    ap.add_argument("--write", action="store_true", help=f"write the table to {TABLE_FULL.relative_to(ROOT)} "
                    f"(with --ci: {TABLE.relative_to(ROOT)}, and the verdicts to {COMMITTED.relative_to(ROOT)})")
    ap.add_argument("--json", type=Path, help="write the raw results here")
    ap.add_argument("--results", type=Path, help="the table from results --json wrote, nothing compiled again")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ci", action="store_true", help="only what CI compiles (see child()); the table says so")
    ap.add_argument("--fresh", action="store_true", help="with --ci: run every source again, trusting no kept verdict")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--only", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if importlib.util.find_spec("triton") is None:   # `python3 tools/compile_targets.py` outside the course's venv
        venv = ROOT / ".venv" / "bin" / "python"
        if argv is None and venv.exists() and Path(sys.prefix).resolve() != venv.parent.parent.resolve():
            print(f"compile_targets: {sys.executable} has no Triton: running with {venv.relative_to(ROOT)}",
                  file=sys.stderr)
            os.execv(str(venv), [str(venv), __file__, *sys.argv[1:]])
        ap.error("this Python has no Triton: run it with the course's environment (./course setup makes .venv/), "
                 "e.g. .venv/bin/python tools/compile_targets.py --ci --write")
    if args.child:
        major, minor = args.child.split(".")
        result = child((int(major), int(minor)), ci=args.ci, only=args.only)
        print(json.dumps(result, default=str))
        return 0
    if args.ci and args.write and args.targets:
        ap.error(f"--ci --write keeps every target's verdicts in {COMMITTED.name}: leave out --targets")
    targets = [tuple(int(x) for x in t.split(".")) for t in args.targets] if args.targets else list(TARGETS)
    t0 = time.perf_counter()
    results = json.loads(args.results.read_text()) if args.results else \
        run(targets, args.jobs, ci=args.ci, reuse=not args.fresh)
    text = table(results, ci=args.ci)
    print(text)
    for r in results:
        if "reused" in r:
            print(f"compile_targets: {r['target']}: {len(r['recomputed'])} source(s) run again in {r['seconds']} s"
                  + (f" ({', '.join(Path(s).name for s in r['recomputed'])})" if r["recomputed"] else "")
                  + f", {len(r['reused'])} kept (fingerprint unchanged)")
    print(f"compile_targets: {time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    if args.write:
        out = TABLE if args.ci else TABLE_FULL
        out.write_text(text)
        print(f"compile_targets: wrote {out.relative_to(ROOT)}")
        if args.ci and not any(r.get("error") for r in results):
            write_kept(results, COMMITTED)
            print(f"compile_targets: wrote {COMMITTED.relative_to(ROOT)}")
    return 1 if any(row["status"] == "failed" for r in results for row in r["rows"]) or \
        any(r.get("error") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
