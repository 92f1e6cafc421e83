"""What SDPA runs at lab 5's shape (GQA 32/8, D = 128, N = 8,192, bf16) at B = 1 and 32: its kernels, grids and
blocks (torch.profiler, through course_utils.timeline.kernels), its time at B = 1 replayed from a CUDA graph, and
its DRAM bytes at B = 1 (Nsight Compute, through trips.hardware).

    python3 docs/gpu-results/sweeps/sdpa_decode_profile.py [--fixture tests/sdpa_decode_trace_sample.json]

--fixture writes the two SDPA traces, trimmed to what course_utils.timeline reads, as the fixture of
tests/test_timeline.py (a recorded one in place of the hand-built sample). Run from the repository root on a GPU.
"""
import json
import os
import sys
import tempfile
import warnings

import course_utils as cu  # noqa: F401  (first)
import torch
import torch.nn.functional as F

from course_utils import bench, timeline, trips

H, H_KV, D, N = 32, 8, 128, 8192
DTYPE = torch.bfloat16
KEEP_ARGS = ("grid", "block", "registers per thread", "shared memory", "device", "stream")


def make(b):
    q = torch.randn(b, H, 1, D, device="cuda", dtype=DTYPE)
    k = torch.randn(b, H_KV, N, D, device="cuda", dtype=DTYPE)
    return q, k, torch.randn_like(k)


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def kv_bytes(b):
    return 2 * b * H_KV * N * D * DTYPE.itemsize


def trimmed_trace(fn) -> dict:
    """One call recorded as timeline.record records it (warm-up, L2 flushed, the kept call marked), its trace
    cut to the events and arguments course_utils.timeline reads."""
    from torch.profiler import ProfilerActivity, profile, record_function
    for _ in range(3):
        fn()
    scratch = torch.empty(timeline.L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    with warnings.catch_warnings(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        warnings.simplefilter("ignore", UserWarning)
        for name in ("timeline: first call, not kept", timeline.MARK):
            if name == timeline.MARK:
                scratch.zero_()
                torch.cuda.synchronize()
            with record_function(name):
                fn()
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        events = json.load(open(path))["traceEvents"]
    kept = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in timeline.GPU_CATEGORIES + timeline.CPU_CATEGORIES + (
                "user_annotation", "gpu_user_annotation"):
            continue
        args = {k: v for k, v in (e.get("args") or {}).items() if k in KEEP_ARGS}   # before the event is cut
        e = {k: e[k] for k in ("ph", "cat", "name", "pid", "tid", "ts", "dur") if k in e}
        kept.append({**e, **({"args": args} if args else {})})
    return {"schemaVersion": 1, "traceEvents": kept}


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, copy ceiling "
          f"{bench.ceilings().copy_gbps:,.0f} GB/s")
    calls = {f"SDPA, B = {b}": (lambda t=make(b): sdpa(*t)) for b in (1, 32)}
    timeline.kernels(calls, bytes={f"SDPA, B = {b}": kv_bytes(b) for b in (1, 32)})
    copies = [make(1) for _ in range(4)]                       # 128 MiB: none still in L2 on its next turn
    ms = bench.graph_time([lambda c=c: sdpa(*c) for c in copies])
    print(f"SDPA, B = 1, replayed from a CUDA graph over 4 copies: {ms * 1e3:.1f} µs, "
          f"{kv_bytes(1) / ms / 1e6:,.0f} GB/s")
    one = make(1)
    print(trips.hardware({"SDPA, B = 1": lambda: sdpa(*one)}, counted={"SDPA, B = 1": trips.count(sdpa, *one)}))
    if "--fixture" in sys.argv:
        where = sys.argv[sys.argv.index("--fixture") + 1]
        out = {"note": (f"Recorded with docs/gpu-results/sweeps/sdpa_decode_profile.py on "
                        f"{torch.cuda.get_device_name()}, torch {torch.__version__}: SDPA at lab 5's shape (GQA 32/8, "
                        "D = 128, N = 8,192, bf16), one call each, trimmed to the events and arguments "
                        "course_utils.timeline reads.")}
        for label, fn in calls.items():
            out[label] = trimmed_trace(fn)
            got = timeline.from_chrome_trace(out[label], after=timeline.MARK)
            print(f"{label}, trimmed trace: {got.count} kernels\n{got.kernel_table()}")
        with open(where, "w") as f:
            json.dump(out, f, indent=1)
        print(f"wrote {where}")


if __name__ == "__main__":
    main()
