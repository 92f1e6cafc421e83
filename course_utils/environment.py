"""Where am I running? GPU or Triton's CPU interpreter, and what that means for a lesson.

Import this (``import course_utils``) before any Triton kernel is defined: on a machine without
a GPU it switches Triton to its interpreter, which must happen before ``@triton.jit`` runs.
"""
from __future__ import annotations

import functools
import os
import platform
import sys
import zlib

import torch

ON_GPU: bool = torch.cuda.is_available()

# triton.jit reads TRITON_INTERPRET when it wraps a kernel, so this must run before any kernel is
# defined. An explicit choice in the environment is respected.
if not ON_GPU and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
    os.environ["TRITON_INTERPRET"] = "1"

INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE: str = "cuda" if ON_GPU and not INTERPRET else "cpu"

# Without a GPU, torch.compile's graphs here are a lesson's few small ones, compiled to C++ for the CPU.
# Inductor would first start a pool of compile workers: on a 2-core laptop or CI machine that pool costs
# more than it saves (measured: the first compile of a bias + GELU took 25 s with it and 13 s without,
# the next graph 5.5 s against 0.3 s). Read when Inductor's config is first imported; a choice in the
# environment is respected.
if not ON_GPU:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
HEADLESS: bool = os.environ.get("COURSE_HEADLESS", "0") not in ("", "0")

import triton  # noqa: E402  (after TRITON_INTERPRET is settled)


def pick(gpu, cpu):
    """Choose a problem size for the mode we are in: the interpreter runs kernels in Python,
    so a lesson that moves 1 GiB on a GPU moves a few KiB on the CPU."""
    return cpu if INTERPRET or not ON_GPU else gpu


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where widgets and inline figures can show)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and hasattr(ip, "kernel")


def shows_results() -> bool:
    """True where the value of an expression typed at the prompt is shown: in Jupyter, in IPython, and in
    the plain Python REPL (`python`, or `python -i file.py` once the file has run). A script, pytest and
    `python -c` show nothing, so a check prints its verdict there itself (check._core.say)."""
    ipython = sys.modules.get("IPython")    # not imported: no IPython shell (and no import cost here)
    if ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None:
        return True
    return hasattr(sys, "ps1")              # the plain REPL sets it as it starts its prompt


def live() -> bool:
    """A person is at this notebook: a Jupyter kernel, ipywidgets installed, and not COURSE_HEADLESS
    (which tests and the GPU run set). Widgets that wait for a click are shown only then."""
    if os.environ.get("COURSE_HEADLESS", "0") not in ("", "0"):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return in_notebook()


def gpu_name() -> str:
    return torch.cuda.get_device_name() if ON_GPU else "none"


def compute_capability() -> tuple[int, int] | None:
    return torch.cuda.get_device_capability() if ON_GPU else None


def seed(s: int = 0) -> None:
    torch.manual_seed(s)


def same_draws(fn, name: str):
    """`fn`, which draws its random numbers from a generator seeded by `name` and leaves the caller's own
    state as it was: a check or a grader then gives the same verdict on the same kernel whatever ran
    before it (a notebook's earlier cells, other tests in the same pytest worker)."""
    @functools.wraps(fn)
    def drawn_the_same(*args, **kwargs):
        # the GPU's generator too, once CUDA is up (a check that starts it seeds it through manual_seed
        # anyway; and tools/compile_targets.py's stand-in GPU has no generator to save)
        devices = [torch.cuda.current_device()] if ON_GPU and torch.cuda.is_initialized() else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(zlib.crc32(name.encode()))
            return fn(*args, **kwargs)
    return drawn_the_same


def traps() -> list[str]:
    """Known ways this machine will surprise a student, in plain words."""
    notes = []
    if INTERPRET:
        notes.append("No GPU here: kernels run on this CPU, simulated one step at a time in Python "
                     "(TRITON_INTERPRET=1), so their times mean nothing. The course counts bytes and launches "
                     "instead, and shows GPU times from a model, labelled MODEL.")
        notes.append("The simulation covers what the lessons need: their checks use fp16 and fp32 (it rounds "
                     "bf16 matrix products unlike a GPU, and lacks a few math functions such as tanh).")
    # What a GPU other than the course's H100 changes (a T4: no bf16, no tensor cores in tl.dot, ...)
    # is decided in capability, which builds on this module: hence the import here, not at the top.
    from . import capability
    plan = capability.plan()
    if plan.cc is not None and plan.changes:
        notes.append(plan.note)
    if ON_GPU and INTERPRET:
        notes.append("A GPU is present but TRITON_INTERPRET is set: kernels run on the CPU interpreter.")
    return notes


def self_test(verbose: bool = True) -> dict:
    """Print (and return) what the course needs to know about this machine."""
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "device": DEVICE,
        "interpreter": INTERPRET,
        "gpu": gpu_name(),
        "compute_capability": compute_capability(),
    }
    if ON_GPU:
        p = torch.cuda.get_device_properties(0)
        info["sms"] = p.multi_processor_count
        info["gpu_memory_gib"] = round(p.total_memory / 2**30, 1)
    if verbose:
        for k, v in info.items():
            print(f"{k:>20}: {v}")
        for n in traps():
            print("  note:", n)
    return info
