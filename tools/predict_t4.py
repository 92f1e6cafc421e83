#!/usr/bin/env python3
"""Predict how long each notebook takes on a T4 (Colab's free GPU) from an H100 run's per-cell times.

    python3 tools/predict_t4.py              the table, on stdout
    python3 tools/predict_t4.py --cells 05   one notebook cell by cell: its class, its timings, the T4 time
    python3 tools/predict_t4.py --write      the table into docs/instructor.md (between its markers)
    python3 tools/predict_t4.py --check      exit 1 if docs/instructor.md holds another table

Nobody here has a T4: every T4 number this prints is a MODEL, built from these assumptions.

1. A cell's time on the H100 (nbclient's record in the executed notebook that tools/gpu_run.py kept) is
   host time, Python and compilers on the CPU, plus GPU time inside timings. The course's tensors are at
   most a few GiB, milliseconds at 3 TB/s, so outside timings the GPU's share is left out.
2. Host time on Colab is the H100 host's times CPU_FACTOR: a free Colab session has 2 vCPUs of an older
   Xeon. The factor is ASSUMED (not measured); --cpu-factor changes it. Compiling is host time: Triton
   and Inductor do as much work for sm_75 as for sm_90.
3. Every timing in the course is triton.testing.do_bench (course_utils.bench): it runs for a time budget
   (warmup and rep, in ms), so it costs about the same on any GPU until one call outgrows that budget;
   then it costs 5 estimating calls, at least one warm-up and at least one timed call. Each timing a
   cell printed (its per-call ms, or a TFLOP/s rate together with the notebook's own flops()) is moved
   to the T4 by what bounds it, at the same share of the peak as on the H100:
     bytes       x (H100 measured copy GB/s / T4 datasheet GB/s)
     tl.dot      x (H100 measured matmul TFLOP/s / T4 datasheet fp32 TFLOP/s): Triton gives sm_75 no
                 tensor cores, so a Triton kernel's tl.dot runs on the fp32 units
     vendor      x (H100 measured matmul TFLOP/s / T4 datasheet fp16 tensor TFLOP/s): cuBLAS, cuDNN, SDPA
                 and eager PyTorch use the T4's tensor cores
   and the cell gains the difference between the two do_bench costs (the L2 flush between calls left out).
   The fp32 units may serve tl.dot worse than the H100's tensor cores do: a second column halves that share.
   A timing that printed nothing (a check's or a sweep's) stays in host time.
The H100 figures come from the run itself (lesson 00's measured copy and matmul); the T4's from the NVIDIA T4
datasheet. Peak GPU memory is what tools/gpu_run.py recorded in the run's metadata, if it did.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "gpu-results" / "notebooks"
H100 = "nvidia-h100-80gb-hbm3"
INSTRUCTOR = ROOT / "docs" / "instructor.md"
BEGIN = "<!-- t4-prediction: written by tools/predict_t4.py --write; edit the tool, not this table -->"
END = "<!-- end t4-prediction -->"
BUDGET_S = 180          # every notebook under 3 minutes on a T4
CPU_FACTOR = 2.0        # ASSUMED: Colab's 2 vCPUs against the H100 host's, for Python, imports and compiling


@dataclass(frozen=True)
class Datasheet:
    name: str
    bandwidth_gbs: float
    fp16_tensor_tflops: float
    fp32_tflops: float
    memory_gb: float
    usable_gb: float
    sms: int
    source: str


T4 = Datasheet("NVIDIA T4", bandwidth_gbs=320, fp16_tensor_tflops=65, fp32_tflops=8.1, memory_gb=16,
               usable_gb=15, sms=40, source="NVIDIA T4 Tensor Core GPU datasheet (320 GB/s GDDR6, 65 TFLOP/s "
               "fp16 tensor, 8.1 TFLOP/s fp32, 16 GB of which about 15 GB usable, 40 SMs)")


@dataclass
class Timing:
    ms: float          # per call, on the H100
    bound: str         # "bytes", "tl.dot" or "vendor"
    what: str          # the line it came from, shortened


@dataclass
class Cell:
    index: int
    kind: str          # "imports", "compile", "timed", "host", or "compile+timed" / "host+timed"
    h100_s: float
    t4_s: float
    timings: list[Timing] = field(default_factory=list)


@dataclass
class Prediction:
    name: str
    h100_s: float      # the run's wall time (the cells and the kernel's start)
    t4_s: float
    cells: list[Cell]
    peak: dict | None | str   # "not measured", None (no GPU used) or {"allocated", "reserved"} in bytes


# --- reading an executed notebook ---------------------------------------------------------------------
def cell_seconds(cell) -> float | None:
    import datetime as dt
    ex = cell.metadata.get("execution", {})
    try:
        a, b = (dt.datetime.fromisoformat(ex[k].replace("Z", "+00:00"))
                for k in ("iopub.status.busy", "shell.execute_reply"))
    except (KeyError, ValueError):
        return None
    return (b - a).total_seconds()


def output_text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            parts.append(o.text if isinstance(o.text, str) else "".join(o.text))
        elif "text/plain" in o.get("data", {}):
            t = o.data["text/plain"]
            parts.append((t if isinstance(t, str) else "".join(t)) + "\n")
    return "".join(parts)


COMPILES = re.compile(r"torch\.compile|trips\.compile|count_compiled|\bcheck\.\w+\(|\bgrade\.\w+\(|autotune")
TIMES = re.compile(r"\bbench\.(compare|time|interleaved|graph_time|ceilings)|do_bench|\bms_of\(|progress\.steps")


def kind(source: str, first_code: bool) -> str:
    """What a cell's H100 time is mostly spent on, from what it calls."""
    if first_code:
        return "imports"
    if COMPILES.search(source):
        return "compile"
    if TIMES.search(source):
        return "timed"
    return "host"


VENDOR = re.compile(r"cuBLAS|cuDNN|sdpa|SDPA|torch|eager|naive|F\.|matmul \d|copy| @ ", re.I)
MS = re.compile(r"(\d[\d,]*\.\d+)\s*ms\b")   # a time has decimals; "N = 4,096 ms" is a header
NUMBER = re.compile(r"(?<![\w.])(\d[\d,]*\.\d+)(?![\d%x×])(?!\s*[%x×])")


def bound_of(name: str, flops: bool) -> str:
    return ("vendor" if VENDOR.search(name) else "tl.dot") if flops else "bytes"


def timings(text: str, namespace: dict) -> list[Timing]:
    """The per-call H100 times a cell printed: "12.66 ms" inline, bench.compare's tables (a header with
    "ms", rows of numbers), and rate tables (header "TFLOP/s", rows "N D full|causal", one rate per rival
    named in the column header) priced with the notebook's own flops(bench_shape(n, d), causal)."""
    found, table, rates = [], None, None
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped:
            table = rates = None
            continue
        if stripped.upper().startswith("MODEL") or "model" in stripped.lower() and "measured" not in stripped:
            continue
        if rates is not None:
            m = re.match(r"([\d,]+)\s+(\d+)\s+(full|causal)\s+(.*)$", stripped)
            if m and rates:
                n, d, causal = int(m[1].replace(",", "")), int(m[2]), m[3] == "causal"
                flops = namespace["flops"](namespace["bench_shape"](n, d), causal)
                cols = [c.strip() for c in re.split(r"\s{2,}", m[4].strip())]
                for rival, col in zip(rates, cols):
                    rate = re.match(r"([\d,.]+)\s*/", col)
                    if rate and float(rate[1].replace(",", "")) > 0:
                        found.append(Timing(flops / float(rate[1].replace(",", "")) / 1e9, bound_of(rival, True),
                                            f"{rival} N={n} D={d} {m[3]}"))
                continue
            if re.match(r"^N\s+D\b", stripped):
                rates = stripped.split()[2:]
                continue
        if "TFLOP/s" in stripped and "flops" in namespace and "bench_shape" in namespace and not MS.search(stripped):
            rates = []
            continue
        inline = MS.findall(stripped)
        if inline:
            flops = "TFLOP" in stripped
            name = stripped.split("  ")[0]
            for v in inline:
                found.append(Timing(float(v.replace(",", "")), bound_of(name, flops), stripped[:60]))
            table = None
            if re.search(r"\bms\b\s*\(|\bms\s{2,}", stripped) and not NUMBER.search(stripped.split("ms")[0]):
                table = (stripped.count("ms"), "TFLOP" in stripped)
            continue
        if re.search(r"\bms\b", stripped):
            table = (len(re.findall(r"\bms\b", stripped)), "TFLOP" in stripped)
            continue
        if table:
            count, flops = table
            name = re.split(r"\s{2,}", stripped)[0]
            for v in NUMBER.findall(stripped[len(name):])[:count]:
                found.append(Timing(float(v.replace(",", "")), bound_of(name, flops), name[:60]))
    return found


def notebook_functions(nb) -> dict:
    """flops() and bench_shape() where the notebook defines them (its rate tables need them), nothing else."""
    namespace = {"math": math}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for m in re.finditer(r"^def (flops|bench_shape)\(.*?(?=^\S|\Z)", cell.source, re.M | re.S):
            try:
                exec(m[0], namespace)  # noqa: S102  (two pure functions of our own notebooks)
            except Exception:  # noqa: BLE001  (then the rate table is not priced, and says so in --cells)
                pass
    return namespace


# --- the model ------------------------------------------------------------------------------------
def bench_ms(call_ms: float, warmup: float = 25, rep: float = 100) -> float:
    """What one triton.testing.do_bench costs when one call takes call_ms: 5 calls to estimate, then
    max(1, warmup / call) and max(1, rep / call) calls."""
    return call_ms * (5 + max(1, int(warmup / call_ms)) + max(1, int(rep / call_ms)))


def ratio(bound: str, ceilings: dict, gpu: Datasheet = T4) -> float:
    return {"bytes": ceilings["copy_gbs"] / gpu.bandwidth_gbs,
            "tl.dot": ceilings["matmul_tflops"] / gpu.fp32_tflops / ceilings.get("dot_share", 1.0),
            "vendor": ceilings["matmul_tflops"] / gpu.fp16_tensor_tflops}[bound]


def predict_cell(index: int, cell, first_code: bool, namespace: dict, ceilings: dict,
                 cpu_factor: float = CPU_FACTOR) -> Cell:
    h100 = cell_seconds(cell) or 0.0
    k = kind(cell.source, first_code)
    found = timings(output_text(cell), namespace) if k != "imports" else []
    rounds = re.search(r"median of (\d+)", output_text(cell)) or re.search(r"\brounds\s*=\s*(\d+)", cell.source) \
        or re.search(r"^ROUNDS\s*=\s*(\d+)", cell.source, re.M)
    budget = re.search(r"warmup\s*=\s*(\d+)\s*,\s*rep\s*=\s*(\d+)", cell.source)
    warmup, rep = (float(budget[1]), float(budget[2])) if budget else (25.0, 100.0)
    extra_ms = sum(bench_ms(t.ms * ratio(t.bound, ceilings), warmup, rep) - bench_ms(t.ms, warmup, rep)
                   for t in found if t.ms > 0)
    extra_ms *= int(rounds[1]) if rounds else 1
    if found and k != "timed":
        k += "+timed"
    return Cell(index, k, h100, h100 * cpu_factor + max(0.0, extra_ms) / 1e3, found)


def h100_ceilings(folder: Path) -> dict:
    """The copy bandwidth and matmul rate lesson 00 measured in that run."""
    nb = nbformat.read(folder / "00_setup.ipynb", as_version=4)
    text = "".join(output_text(c) for c in nb.cells if c.cell_type == "code")
    copy = re.search(r"copy\s+0 FLOP/byte\s+[\d.]+ ms\s+([\d,]+) GB/s", text) or re.search(r"copy: ([\d,]+) GB/s", text)
    mm = re.search(r"matmul \d+³.*?([\d,.]+) TFLOP/s\s+\(measured\)", text)
    if not (copy and mm):
        sys.exit(f"predict_t4: {folder}/00_setup.ipynb does not print its measured copy GB/s and matmul TFLOP/s")
    return {"copy_gbs": float(copy[1].replace(",", "")), "matmul_tflops": float(mm[1].replace(",", ""))}


def predict(path: Path, ceilings: dict, cpu_factor: float = CPU_FACTOR) -> Prediction:
    nb = nbformat.read(path, as_version=4)
    run = nb.metadata.get("gpu_run", {})
    namespace = notebook_functions(nb)
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.get("id") != "colab-install"]
    cells = [predict_cell(i, c, j == 0, namespace, ceilings, cpu_factor) for j, (i, c) in enumerate(code)]
    ran = sum(c.h100_s for c in cells)
    wall = float(run.get("wall_s", ran))
    # the kernel's start and the gaps between cells are host time too
    t4 = sum(c.t4_s for c in cells) + max(0.0, wall - ran) * cpu_factor
    return Prediction(artifact_name(path), wall, t4, cells, run.get("peak_gpu_memory", "not measured"))


def artifact_name(path: Path) -> str:
    return f"labs/{path.name}" if path.parent.name == "labs" else path.name


def runs(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.ipynb")) + sorted(folder.glob("labs/*.ipynb"))


# --- the table ------------------------------------------------------------------------------------
def memory(peak, gpu: Datasheet = T4) -> str:
    if peak == "not measured":
        return "not yet measured"
    if peak is None:
        return "none (no GPU used)"
    gb = peak["reserved"] / 1e9
    return f"{peak['allocated'] / 1e9:.1f} GB allocated, {gb:.1f} GB reserved ({gb / gpu.usable_gb:.0%} of {gpu.usable_gb:g} GB)"


def seconds(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def measured_elsewhere(folder: Path) -> dict[str, str]:
    """{notebook: wall time} of every other GPU's runs kept under docs/gpu-results/notebooks/ (an H200's)."""
    return {artifact_name(p): f"{nbformat.read(p, as_version=4).metadata.get('gpu_run', {}).get('wall_s', '?')} s"
            for p in runs(folder)}


def table(folder: Path = RESULTS / H100, others: dict[str, Path] | None = None, cpu_factor: float = CPU_FACTOR) -> str:
    if others is None:
        others = {"H200": next(iter(sorted(RESULTS.glob("nvidia-h200*"))), None)}
    ceilings = h100_ceilings(folder)
    preds = [predict(p, ceilings, cpu_factor) for p in runs(folder)]
    # Triton's tl.dot on the fp32 units may reach a smaller share of the T4's peak than its tensor-core
    # tl.dot reaches of the H100's: the same model with half that share shows which notebooks it moves
    halved = [predict(p, {**ceilings, "dot_share": 0.5}, cpu_factor) for p in runs(folder)]
    elsewhere = {label: measured_elsewhere(f) if f else {} for label, f in others.items()}
    dates = sorted({nbformat.read(p, as_version=4).metadata.get("gpu_run", {}).get("date", "?") for p in runs(folder)})
    rel = folder.relative_to(ROOT).as_posix() if folder.is_relative_to(ROOT) else folder.as_posix()
    lines = [BEGIN,
             f"T4 times are a **MODEL**, not a measurement: `tools/predict_t4.py` (its docstring states the model) "
             f"from the H100 runs in `{rel}/` ({dates[0]} to {dates[-1]}), lesson 00's measured "
             f"{ceilings['copy_gbs']:,.0f} GB/s and {ceilings['matmul_tflops']:,.0f} TFLOP/s there, the "
             f"{T4.source}, and host time (Python, imports, compiling) {cpu_factor:g}x the H100 machine's "
             f"(ASSUMED for Colab's 2 vCPUs). Budget: {BUDGET_S // 60} minutes a notebook. The install cell's pip on "
             "Colab is not in it.", "",
             "| notebook | H100 (measured) | " + " | ".join(f"{k} (measured)" for k in elsewhere) +
             " | T4 (MODEL) | T4, tl.dot at half the share of peak | where the T4's time goes "
             "| peak GPU memory (H100 run) against the T4's 15 GB |",
             "|---|---|" + "---|" * len(elsewhere) + "---|---|---|---|"]
    for p, slow in zip(preds, halved):
        top = sorted(p.cells, key=lambda c: -c.t4_s)[:2]
        goes = "; ".join(f"cell {c.index} {c.kind} {seconds(c.t4_s)}"
                         + (f" (H100 {c.h100_s:.1f} s, {len(c.timings)} timings)" if c.timings else "") for c in top)
        over = " **over budget**" if p.t4_s > BUDGET_S else ""
        lines.append(f"| {p.name} | {p.h100_s:.1f} s | " + " | ".join(
            e.get(p.name, "not yet run") for e in elsewhere.values()) + f" | {seconds(p.t4_s)}{over} | "
            f"{seconds(slow.t4_s)}{' **over budget**' if slow.t4_s > BUDGET_S else ''} | {goes} | "
            f"{memory(p.peak)} |")
    return "\n".join(lines + ["", END])


def write(text: str, path: Path = INSTRUCTOR) -> bool:
    """Put the table between the markers in path; True if that changed the file."""
    old = path.read_text(encoding="utf-8")
    if BEGIN not in old or END not in old:
        sys.exit(f"predict_t4: {path} has no markers for the table ({BEGIN} ... {END})")
    new = old[:old.index(BEGIN)] + text + old[old.index(END) + len(END):]
    if new != old:
        path.write_text(new, encoding="utf-8")
    return new != old


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=Path, default=RESULTS / H100, help="the H100's executed notebooks")
    ap.add_argument("--cpu-factor", type=float, default=CPU_FACTOR, help="Colab's host time / the H100 host's")
    ap.add_argument("--cells", metavar="NAME", help="one notebook (a file name or its start), cell by cell")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the table into docs/instructor.md")
    mode.add_argument("--check", action="store_true", help="exit 1 if docs/instructor.md's table is out of date")
    args = ap.parse_args(argv)
    if args.cells:
        [path] = [p for p in runs(args.runs) if p.name.startswith(args.cells)] or [None]
        if path is None:
            sys.exit(f"predict_t4: no run of {args.cells!r} in {args.runs}")
        p = predict(path, h100_ceilings(args.runs), args.cpu_factor)
        print(f"{p.name}: H100 {p.h100_s:.1f} s -> T4 {seconds(p.t4_s)} (MODEL)")
        for c in p.cells:
            print(f"  cell {c.index:>3} {c.kind:<8} H100 {c.h100_s:6.2f} s  T4 {c.t4_s:6.2f} s"
                  + "".join(f"\n      {t.bound:<7} {t.ms:9.3f} ms  {t.what}" for t in c.timings))
        return 0
    text = table(args.runs, cpu_factor=args.cpu_factor)
    if args.check:
        now = INSTRUCTOR.read_text(encoding="utf-8")
        if text not in now:
            print("predict_t4: docs/instructor.md's T4 table is out of date: run python3 tools/predict_t4.py --write",
                  file=sys.stderr)
            return 1
        return 0
    if args.write:
        print(f"predict_t4: {'wrote' if write(text) else 'unchanged:'} {INSTRUCTOR.relative_to(ROOT)}")
        return 0
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
