"""Launch parameters chosen on the GPU at hand: a small search, cached per GPU name.

A split count, a tile, warps and stages that were fastest on one GPU need not be on another (an H200 streams
1.4x the bytes of an H100 with the same SMs). So a kernel's wrapper asks here instead of hard-coding them:

    best = tune.fastest("lab5.flash_decoding", key, candidates, lambda c, *a: (lambda: launch(*a, c)), (q, k, v))

(make(candidate, *args) returns a call that does the work once; `fastest` passes it fresh copies of args.)

`fastest` times every candidate once per key on this GPU, as a CUDA graph of calls back to back (no host cost,
as in a decode step) over enough copies of the inputs that none is still in L2, keeps the fastest, and caches
the choice in memory and in ~/.cache/feed-the-beast/tuned-<gpu>.json, so the next call and the next session
reuse it. `tune.report(name)` says what was chosen and how each candidate timed. Without a GPU (the
interpreter) nothing is timed: the first candidate is returned.

`compile_ahead(calls)` compiles the Triton kernels a list of calls would launch, all at once in threads, without
running them: what a cell that times many versions of a kernel (or `fastest`, its candidates) does first, so that
a fresh machine waits for its compiles side by side instead of one after another.
"""
from __future__ import annotations

import json
import math
import os

import torch

from . import bench
from . import environment as env

_memory: dict = {}     # {gpu: {name: {key: {"best": candidate, "us": {label: µs}}}}}
_hot: dict = {}        # {(name, key): candidate}: this process's choices


def _label(c) -> str:
    return ", ".join(f"{k}={v}" for k, v in c.items()) if isinstance(c, dict) else str(c)


def _store() -> dict:
    gpu = env.gpu_name()
    if gpu not in _memory:
        try:
            _memory[gpu] = json.loads(_path(gpu).read_text())
        except (OSError, ValueError):
            _memory[gpu] = {}
    return _memory[gpu]


def _path(gpu: str):
    return bench._cache_file(gpu).with_name(bench._cache_file(gpu).name.replace("ceilings-", "tuned-"))


def _save() -> None:
    gpu = env.gpu_name()
    try:
        p = _path(gpu)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(_memory.get(gpu, {}), indent=1))
    except OSError:     # a read-only home: keep it for this session only
        pass


def _copies(args: tuple, l2: int) -> list[tuple]:
    """args and enough clones of its tensors that together they hold more than twice L2's bytes (at most 4 sets)."""
    size = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
    n = max(1, min(4, math.ceil(2 * l2 / max(size, 1))))
    return [args] + [tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args) for _ in range(n - 1)]


def fastest(name: str, key, candidates: list, make, args: tuple):
    """The candidate whose call runs fastest on this GPU for `key`, timed once and then cached.

    name: what is tuned ("lab5.flash_decoding"); key: what the choice depends on (shapes, dtype), made of
    strings and numbers; candidates: dicts of launch parameters (or a function returning them, called only
    for a new key); make(candidate, *args) -> a zero-argument callable that does the work once. A candidate
    that fails to compile or launch is skipped."""
    hot = (name, json.dumps(key))
    if hot in _hot:                        # the common case, kept cheap: a decode step calls this every layer
        return _hot[hot]
    candidates = candidates() if callable(candidates) else candidates
    if not bench.on_gpu():
        return candidates[0]
    seen = _store().setdefault(name, {}).get(hot[1])
    if seen is not None:
        _hot[hot] = seen["best"]
        return seen["best"]
    if torch.cuda.is_current_stream_capturing():   # nothing can be timed inside a capture: tune before it
        return candidates[0]
    compile_ahead([make(c, *args) for c in candidates])
    sets = _copies(tuple(args), torch.cuda.get_device_properties(0).L2_cache_size)
    us = {}
    for c in candidates:
        try:
            ms = bench.graph_time([make(c, *s) for s in sets], rounds=2, reps=10)
        except Exception:   # noqa: BLE001 (out of resources, an illegal tile: not a candidate here)
            torch.cuda.synchronize()
            ms = None
        if ms is not None:
            us[_label(c)] = round(ms * 1e3, 2)
    if not us:
        return candidates[0]
    best = next(c for c in candidates if _label(c) == min(us, key=us.get))
    _store()[name][hot[1]] = {"best": best, "us": us}
    _hot[hot] = best
    _save()
    return best


def report(name: str) -> str:
    """What `fastest` chose for `name` on this GPU, key by key, and every candidate's time."""
    if not bench.on_gpu():
        return f"{name}: nothing tuned (no GPU here: the interpreter takes the first candidate)."
    chosen = _store().get(name, {})
    if not chosen:
        return f"{name}: nothing tuned yet on {env.gpu_name()}."
    lines = [f"{name}, tuned on {env.gpu_name()} (CUDA-graph replay, µs a call; the fastest is chosen):"]
    for k, entry in chosen.items():
        times = sorted(entry["us"].items(), key=lambda e: e[1])
        lines.append(f"  {k}: chose {_label(entry['best'])}; " + ", ".join(f"[{lab}] {t:g}" for lab, t in times[:6])
                     + (f", … {len(times) - 6} more" if len(times) > 6 else ""))
    return "\n".join(lines)


def compile_ahead(calls, *, threads: int | None = None) -> int:
    """Compile the Triton kernels that the zero-argument `calls` launch, all at once in threads, and run none of them.

    Each call runs with every launch turned into a compile request (so what it returns, and whatever a kernel would
    have written, means nothing); a launch through @triton.autotune requests every config it would time, and the
    autotuner chooses nothing here. The requests are compiled side by side, and the calls that then run (and are
    timed) find their kernels ready. A compile takes about a second of CPU, most of it outside Python's lock (LLVM,
    then ptxas), so a dozen of them cost about what the slowest does instead of a dozen seconds in a row, on a
    machine with the cores for it.

    Returns how many kernels were requested. Does nothing (0) without a GPU, inside a CUDA-graph capture, or where
    this Triton has no asynchronous compilation (triton.runtime._async_compile): each kernel then compiles at its
    first launch, as always. A call that raises stops there (what it requested before still compiles), and a
    kernel that fails to compile fails again, with its message, when it is launched."""
    calls = list(calls)
    if not calls or not bench.on_gpu() or _capturing():
        return 0
    try:
        from concurrent.futures import ThreadPoolExecutor
        from triton.runtime._async_compile import AsyncCompileMode
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction
    except ImportError:
        return 0
    launch, autotuned = JITFunction.run, Autotuner.run
    requested: set = set()

    def request(self, *args, grid=None, warmup=False, **kwargs):
        kernel = launch(self, *args, grid=grid, warmup=True, **kwargs)
        if type(kernel).__name__ == "FutureKernel":   # not compiled yet (this process, or Triton's disk cache)
            requested.add(id(kernel))
        return kernel

    def request_every_config(self, *args, **kwargs):
        # as the autotuner's own run, less the timing: each config's pre_hook (a descriptor's block shape, which the
        # kernel's signature holds), then its compile
        self.nargs = dict(zip(self.arg_names, args))
        try:
            for config in self.prune_configs(kwargs):
                if config.pre_hook:
                    config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
                self.fn.run(*args, **kwargs, **config.all_kwargs())
        except Exception:  # noqa: BLE001  (this Triton's autotuner differs: its kernel compiles when launched)
            pass
        finally:
            self.nargs = None

    JITFunction.run, Autotuner.run = request, request_every_config
    try:
        with ThreadPoolExecutor(threads or min(32, os.cpu_count() or 1)) as pool:
            try:
                mode = AsyncCompileMode(pool, ignore_errors=True)
            except TypeError:     # a Triton whose mode has no ignore_errors: the first failure ends the wait
                mode = AsyncCompileMode(pool)
            with mode:
                for call in calls:
                    try:
                        call()
                    except Exception:  # noqa: BLE001  (a call that needs a kernel's result: see the docstring)
                        pass
    except Exception:  # noqa: BLE001  (a compile failed, or the mode could not start: those compile at launch)
        pass
    finally:
        JITFunction.run, Autotuner.run = launch, autotuned
    return len(requested)


def _capturing() -> bool:
    try:
        return torch.cuda.is_current_stream_capturing()
    except RuntimeError:    # a torch built without CUDA (tools/compile_targets.py plays a GPU on one)
        return False
