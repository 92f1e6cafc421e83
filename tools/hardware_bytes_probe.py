#!/usr/bin/env python3
"""The GPU's DRAM bytes (Nsight Compute) beside the counted bytes for x.cos().cos() on 64M fp32 elements
(256 MiB), three ways: eager PyTorch (two kernels), one Triton kernel written here, torch.compile (and its
reduce-overhead mode). What cu.trips.hardware should show on an H100: eager about 2 reads and 2 writes of
256 MiB, the fused kernel and the compiled one 1 read and 1 write. The same call runs twice: in a fresh child,
then in a child started ahead by trips.prepare_hardware (as a lesson's imports cell does), with both times.

    python3 tools/hardware_bytes_probe.py [--out DIR]   (DIR also gets ncu's CSV as ncu-<n>.csv)
"""
import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import course_utils as cu  # noqa: E402
from course_utils import hardware_bytes, trips  # noqa: E402

N = cu.pick(gpu=64 * 2**20, cpu=64 * 2**10)
N_COUNT = 4096
BLOCK = 1024


@triton.jit
def cos_cos_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.cos(tl.cos(tl.load(x_ptr + offsets, mask=mask))), mask=mask)


def fused(t):
    out = torch.empty_like(t)
    cos_cos_kernel[(triton.cdiv(t.numel(), BLOCK),)](t, out, t.numel(), BLOCK=BLOCK)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", ""))
    out = parser.parse_args().out
    if out:   # keep every CSV ncu wrote, to read what it said
        read, kept = hardware_bytes._read, []

        def read_and_keep(path):
            text = read(path)
            if text and path.endswith("ncu.csv"):
                kept.append(path)
                Path(out, f"ncu-{len(kept)}.csv").write_text(text)
            return text
        hardware_bytes._read = read_and_keep

    x = torch.randn(N, device=cu.DEVICE)
    xs = x[:N_COUNT].clone()
    compiled = torch.compile(lambda t: t.cos().cos())
    graphed = torch.compile(lambda t: t.cos().cos(), mode="reduce-overhead")
    assert torch.allclose(fused(xs), xs.cos().cos(), atol=1e-5)
    for f in (compiled, graphed):
        f(x), f(x), f(x)   # compiled and warm in this process (the child reads the same caches)
    torch.cuda.synchronize() if cu.ON_GPU else None

    scale = N / N_COUNT
    counted = {"eager": trips.count(lambda: xs.cos().cos()).scaled(scale),
               "fused (Triton)": trips.count(fused, xs).scaled(scale),
               "torch.compile": trips.count_compiled(lambda t: t.cos().cos(), xs).scaled(scale)}
    fns = {"eager": lambda: x.cos().cos(), "fused (Triton)": lambda: fused(x),
           "torch.compile": lambda: compiled(x), "reduce-overhead": lambda: graphed(x)}
    print(f"device: {cu.env.gpu_name()}; x: {N:,} fp32 = {N * 4 / 2**20:.0f} MiB", flush=True)
    t0 = time.perf_counter()
    fresh = trips.hardware(fns, counted=counted)
    fresh_s = time.perf_counter() - t0
    print(f"a fresh child: trips.hardware took {fresh_s:.1f} s; in the profiled process: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in fresh.child_seconds.items()), flush=True)
    print(fresh)
    for row in fresh:
        if row.dram_read is not None:
            print(f"{row.label}: {row.kernels} kernels, DRAM read {row.dram_read / (N * 4):.2f} x 256 MiB, "
                  f"written {row.dram_written / (N * 4):.2f} x 256 MiB")

    # the same call again, with a child started ahead (what a lesson's imports cell does)
    t0 = time.perf_counter()
    trips.prepare_hardware()
    standby = hardware_bytes._standby
    if standby is None:
        print("prepare_hardware started no standby here")
    else:
        while standby.alive() and not os.path.exists(standby.path("ready.json")) and time.perf_counter() - t0 < 300:
            time.sleep(0.1)
        print(f"the standby was ready after {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    ahead = trips.hardware(fns, counted=counted)
    print(f"with the standby: trips.hardware took {time.perf_counter() - t0:.1f} s (fresh: {fresh_s:.1f} s); "
          "in the profiled process: " + ", ".join(f"{k} {v:.1f} s" for k, v in ahead.child_seconds.items()))
    print(f"what the standby saw before its job: {ahead.standby}")
    apart = [abs(a - f) / max(f, 1) for r, q in zip(ahead, fresh)
             for a, f in ((r.dram_read, q.dram_read), (r.dram_written, q.dram_written)) if a is not None and f is not None]
    print(f"DRAM bytes against the fresh child's: {max(apart):.1%} apart at most" if apart else
          f"no DRAM bytes to compare: {ahead.why or fresh.why}")
    print(ahead)

if __name__ == "__main__":
    main()
