"""Lesson 06: what holds torch.softmax's and torch.compile's kernels below the copy ceiling, under Nsight Compute.

Profiles one call each of torch.softmax, torch.compile's softmax and the lesson's one-row-per-program kernel
on fp16 x of 16,384 x 8,192 (the lesson's first shape), L2 flushed before each kernel (ncu's default), and
prints a markdown table: time, DRAM bytes and throughput, SM throughput, occupancy (achieved and the most the
launch allows), L2 hit rate, instructions executed per element, thread block size and registers. The lesson
cites the dated report made from it (docs/gpu-results/softmax-profiles-*.md).
Run on a GPU, from the repository root: PYTHONPATH=. python3 docs/gpu-results/sweeps/softmax_ncu_profile.py
Without a GPU or ncu it says so and exits 0.
"""
import csv
import io
import os
import shutil
import subprocess
import sys

SHAPE = (16384, 8192)
METRICS = {
    "gpu__time_duration.sum": "time",
    "dram__bytes_read.sum": "DRAM read",
    "dram__bytes_write.sum": "DRAM written",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM throughput",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical occupancy",
    "lts__t_sector_hit_rate.pct": "L2 hit rate",
    "smsp__inst_executed.sum": "warp instructions",
    "smsp__thread_inst_executed.sum": "thread instructions",
    "launch__block_size": "threads a block",
    "launch__registers_per_thread": "registers a thread",
}


def child():
    """Under ncu: compile and warm everything up, then profile one call of each between cudaProfilerStart/Stop."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
        # the lesson's kernel: one row per program, one load of x, one store of y
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * N + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)

    def lesson(x):
        m, n = x.shape
        y = torch.empty_like(x)
        block = triton.next_power_of_2(n)
        softmax_kernel[(m,)](x, y, n, BLOCK=block, num_warps=min(32, max(4, block // 512)))
        return y

    x = torch.randn(*SHAPE, device="cuda", dtype=torch.float16)
    compiled = torch.compile(lambda v: torch.softmax(v, -1), dynamic=False)
    versions = [lambda: torch.softmax(x, -1), lambda: compiled(x), lambda: lesson(x)]
    for fn in versions * 2:
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for fn in versions:
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def _number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def main():
    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
                                       if os.access(p, os.X_OK)), None)
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if not gpu or ncu is None:
        print("needs a GPU and Nsight Compute (ncu); " + ("no GPU here" if not gpu else "no ncu found"))
        return 0
    command = [ncu, "--profile-from-start", "off", "--metrics", ",".join(METRICS), "--csv", "--page", "raw",
               "--print-units", "base", "--target-processes", "application-only",
               sys.executable, os.path.abspath(__file__), "--child"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith('"')]
    if not lines:
        print(done.stdout[-3000:] + done.stderr[-3000:])
        return 1
    rows = [r for r in csv.DictReader(io.StringIO("\n".join(lines))) if (r.get("ID") or "").strip()]
    n = SHAPE[0] * SHAPE[1]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: fp16 x of {SHAPE[0]:,} x {SHAPE[1]:,}, "
          "one call each, L2 flushed before each kernel\n")
    print("| kernel | µs | DRAM read, MB | DRAM written, MB | DRAM throughput | SM throughput | occupancy "
          "(achieved / most) | L2 hit rate | thread instructions per element | threads a block | registers |")
    print("|---|" + "---|" * 10)
    for r in rows:
        v = {name: _number(r.get(metric)) for metric, name in METRICS.items()}

        def cell(key, scale=1.0, spec=",.1f", unit=""):   # a metric ncu did not report shows as —
            return "—" if v[key] is None else f"{v[key] / scale:{spec}}{unit}"
        name = r.get("Kernel Name", "?").split("(")[0].split("<")[0].split("::")[-1]
        print(f"| `{name}` | {cell('time', 1e3)} | {cell('DRAM read', 1e6)} | {cell('DRAM written', 1e6)} | "
              f"{cell('DRAM throughput', spec='.0f', unit='%')} | {cell('SM throughput', spec='.0f', unit='%')} | "
              f"{cell('achieved occupancy', spec='.0f', unit='%')} / {cell('theoretical occupancy', spec='.0f', unit='%')}"
              f" | {cell('L2 hit rate', spec='.0f', unit='%')} | {cell('thread instructions', n)} | "
              f"{cell('threads a block', spec='.0f')} | {cell('registers a thread', spec='.0f')} |")
    return 0


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        sys.exit(main())
