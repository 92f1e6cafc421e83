"""Lesson 09: why D = 128, full, N = 16k missed 1.3x sdpa-flash inside the notebook's table.
Times sdpa-flash, sdpa-cudnn and the teaching kernel (the solution notebook's own cells 3 and 15) at D = 128
in the table's old order (each rival once, do_bench rep=25) and in interleaved rounds (rep=15, medians),
with the SM clock and the board power sampled every 20 ms during each timing (pynvml, else nvidia-smi)."""
import json, statistics, subprocess, sys, threading, time
from pathlib import Path

import importlib.util, tempfile
nb = json.load(open(Path(__file__).resolve().parents[3] / "solutions/09_flash_attention.ipynb"))
src = Path(tempfile.mkdtemp()) / "nb09.py"     # @triton.jit needs its source in a file
src.write_text("\n\n".join("".join(nb["cells"][i]["source"]) for i in (3, 15)))
spec = importlib.util.spec_from_file_location("nb09", src)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
ns = vars(mod)
torch, F = ns["torch"], ns["F"]
from torch.nn.attention import SDPBackend, sdpa_kernel
from course_utils import bench

try:
    import pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    def sample():
        return (pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                pynvml.nvmlDeviceGetPowerUsage(h) / 1000, pynvml.nvmlDeviceGetTemperature(h, 0))
    SRC = "pynvml"
except Exception:
    def sample():
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
        a, b, c = (float(x) for x in out.strip().split(","))
        return a, b, c
    SRC = "nvidia-smi"


class Sampler:
    def __enter__(self):
        self.rows, self.stop = [], False
        self.t = threading.Thread(target=self.run); self.t.start(); return self
    def run(self):
        while not self.stop:
            self.rows.append(sample()); time.sleep(0.02)
    def __exit__(self, *a):
        self.stop = True; self.t.join()
        if not self.rows:
            self.rows.append(sample())
        self.mhz = statistics.mean(r[0] for r in self.rows)
        self.watt = statistics.mean(r[1] for r in self.rows)
        self.temp = max(r[2] for r in self.rows)


def sdpa_on(backend):
    def f(q, k, v, causal=False):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return f


RIVALS = {"flash": sdpa_on(SDPBackend.FLASH_ATTENTION), "cudnn": sdpa_on(SDPBackend.CUDNN_ATTENTION),
          "yours": ns["flash_attention"]}


def timed(fn, q, k, v, c, rep):
    with Sampler() as s:
        ms = bench.time(lambda: fn(q, k, v, c), warmup=5, rep=rep)
    return ms, s


print(f"sampler: {SRC}; device {torch.cuda.get_device_name()}")
cases = [(n, c) for n in (4096, 16384) for c in (False, True)]
inputs = {}
for n, c in cases:
    shape = ns["bench_shape"](n, 128)
    inputs[n] = ns["make"](shape)
    for fn in RIVALS.values():
        fn(*inputs[n], c)
torch.cuda.synchronize()
ORDERS = {"O1 flash, cudnn, yours (the old table's)": ["flash", "cudnn", "yours"],
          "O2 cudnn, flash, yours": ["cudnn", "flash", "yours"]}
for rep_pass in range(2):
    for label, order in ORDERS.items():
        print(f"\n== {label}, pass {rep_pass + 1}: do_bench warmup=5, rep=25, once each")
        for n, c in cases:
            shape, (q, k, v) = ns["bench_shape"](n, 128), inputs[n]
            tf, line = {}, f"N={n:>5} {'causal' if c else 'full':6}"
            for name in order:
                ms, smp = timed(RIVALS[name], q, k, v, c, 25)
                tf[name] = ns["flops"](shape, c) / ms / 1e9
                line += f" | {name} {tf[name]:4.0f} TF/s @{smp.mhz:.0f} MHz {smp.watt:.0f} W"
            print(line + f" | yours/flash {tf['yours'] / tf['flash']:.2f}x")
print("\nmax SM clock", sample()[0], "idle sample", sample())
