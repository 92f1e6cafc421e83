"""Lesson 04: what holds the fp16 bias + exact GELU kernel under 92% of the copy ceiling?

Times (do_bench median, L2 flushed, as the notebook's bench.time) variants of the kernel on lesson 04's
256 MiB tensors, two passes over all variants (the spread between passes is the noise), and reads each
compiled kernel's SASS: instructions per element (static count / elements per thread; the 1-D and 2-D
kernels have no loops) and the opcodes that matter. Run on the GPU from the repository root:
    PYTHONPATH=$PWD python3 docs/gpu-results/sweeps/bias_gelu_variants.py
"""
import collections
import re
import statistics
import subprocess
import sys
import time as _t

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from course_utils import bench

try:
    from triton.language.extra import libdevice
except ImportError:  # older Triton
    from triton.language.extra.cuda import libdevice

T0 = _t.time()
SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 4
RSQRT2 = 0.7071067811865476


@triton.jit
def act(v, MODE: tl.constexpr):
    if MODE == 0:      # identity: x + b only
        y = v
    elif MODE == 1:    # the lesson's exact GELU, tl.erf
        y = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    elif MODE == 2:    # the same through libdevice.erf, named explicitly
        y = 0.5 * v * (1.0 + libdevice.erf(v * 0.7071067811865476))
    elif MODE == 3:    # NOT GELU: erf replaced by a 2-term odd polynomial (what the FMAs alone cost)
        u = v * 0.7071067811865476
        y = 0.5 * v * (1.0 + u * (1.1283791670955126 - 0.37612638903183754 * u * u))
    elif MODE == 5:    # GELU = v * Phi(v), Phi from erfc(|u|) = 2^(-|u| p(|u|)), p of degree 8 fitted on [0, 4]
        u = v * 0.7071067811865476
        a = tl.minimum(tl.abs(u), 4.0)
        p = -1.62202537e-06 * a + 3.02825592e-05
        p = p * a - 2.14627478e-04
        p = p * a + 4.92557825e-04
        p = p * a + 2.86468584e-03
        p = p * a - 3.06093544e-02
        p = p * a + 1.49888694e-01
        p = p * a + 9.18019950e-01
        p = p * a + 1.62794614e+00
        half = 0.5 * tl.exp2(-a * p)                     # erfc(|u|) / 2, no cancellation
        y = v * tl.where(u < 0, half, 1.0 - half)
    else:              # erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): one exp, one fast division
        u = v * 0.7071067811865476
        a = tl.abs(u)
        t = tl.fdiv(1.0, 1.0 + 0.3275911 * a, ieee_rounding=False)
        p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        e = 1.0 - p * tl.exp(-a * a)
        y = 0.5 * v * (1.0 + tl.where(u < 0, -e, e))
    return y


@triton.jit
def k1d(x_ptr, b_ptr, out_ptr, n, N, BLOCK: tl.constexpr, MODE: tl.constexpr, BIAS: tl.constexpr):
    # the notebook's kernel: the flat x in blocks, the bias at offsets % N
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    if BIAS:
        v += tl.load(b_ptr + offs % N, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, act(v, MODE).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def k1d_nconst(x_ptr, b_ptr, out_ptr, n, N: tl.constexpr, BLOCK: tl.constexpr, MODE: tl.constexpr):
    # the same with N a compile-time constant: % N by a power of two is a mask
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(b_ptr + offs % N, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, act(v, MODE).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def k2d(x_ptr, b_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, MODE: tl.constexpr):
    # a BM x BN tile: the bias loaded once per program, for BN columns, and broadcast down BM rows
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    b = tl.load(b_ptr + cols, mask=cols < N).to(tl.float32)
    offs = rows[:, None] * N + cols[None, :]
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + b[None, :]
    tl.store(out_ptr + offs, act(v, MODE).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def k2d_persistent(x_ptr, b_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, MODE: tl.constexpr):
    # a fixed number of programs, each walking tiles down its column block (the bias stays in registers)
    n_col = tl.cdiv(N, BN)
    n_row = tl.cdiv(M, BM)
    col_blk = tl.program_id(0) % n_col
    cols = col_blk * BN + tl.arange(0, BN)
    b = tl.load(b_ptr + cols, mask=cols < N).to(tl.float32)
    for r in range(tl.program_id(0) // n_col, n_row, tl.num_programs(0) // n_col):
        rows = r * BM + tl.arange(0, BM)
        offs = rows[:, None] * N + cols[None, :]
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        v = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + b[None, :]
        tl.store(out_ptr + offs, act(v, MODE).to(out_ptr.dtype.element_ty), mask=mask)


MODES = {0: "x+b", 1: "gelu tl.erf", 2: "gelu libdevice.erf", 3: "NOT gelu: 2-term poly", 4: "gelu A&S erf",
         5: "gelu erfc poly8+exp2"}


def launcher(kind, cfg, dtype):
    def run(x, b, out):
        n, N = x.numel(), x.shape[1]
        M = x.shape[0]
        if kind == "1d":
            block, nw, mode, bias = cfg
            return k1d[(triton.cdiv(n, block),)](x, b, out, n, N, BLOCK=block, MODE=mode, BIAS=bias, num_warps=nw)
        if kind == "1d N const":
            block, nw, mode = cfg
            return k1d_nconst[(triton.cdiv(n, block),)](x, b, out, n, N, BLOCK=block, MODE=mode, num_warps=nw)
        if kind == "2d":
            bm, bn, nw, mode = cfg
            return k2d[(triton.cdiv(M, bm), triton.cdiv(N, bn))](x, b, out, M, N, BM=bm, BN=bn, MODE=mode, num_warps=nw)
        bm, bn, nw, mode, per_sm = cfg
        n_col = triton.cdiv(N, bn)
        progs = max(n_col, (SMS * per_sm // n_col) * n_col)
        return k2d_persistent[(progs,)](x, b, out, M, N, BM=bm, BN=bn, MODE=mode, num_warps=nw)
    return run


def sass_stats(compiled, ept):
    try:
        from triton.tools.disasm import get_sass
        sass = get_sass(compiled.asm["cubin"])
    except Exception as e:  # noqa: BLE001
        return f"(no SASS: {type(e).__name__})"
    ops = re.findall(r"^\S+\t(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)", sass, re.M)
    if not ops:   # the older listing: /*0000*/ OPCODE ...
        ops = re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)", sass)
    ops = [(o, s) for o, s in ops if o not in ("NOP", "EXIT", "BRA")]
    c = collections.Counter(o for o, _ in ops)
    ldg = [o + s for o, s in ops if o == "LDG"]
    widths = collections.Counter(s.split(".")[-1] if s else "32" for o, s in ops if o == "LDG")
    fp = sum(c[o] for o in ("FFMA", "FMUL", "FADD", "FSETP", "FSEL", "FMNMX"))
    integer = sum(v for o, v in c.items() if o.startswith("I") or o in ("LEA", "SHF", "LOP3", "SEL", "PRMT", "MOV"))
    conv = sum(c[o] for o in ("F2F", "F2FP", "HADD2", "I2F", "F2I"))
    return (f"{len(ops) / ept:6.1f} instr/elem  fp {fp / ept:5.1f}  int {integer / ept:5.1f}  conv {conv / ept:4.1f}  "
            f"MUFU {c['MUFU'] / ept:4.2f}  LDG {len(ldg)} {dict(widths)}  STG {c['STG']}  regs {compiled.n_regs}")


def nvsmi():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return str(e)


def main():
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}  "
          f"SMs {SMS}   nvidia-smi (sm MHz, max, mem MHz, W, C): {nvsmi()}", flush=True)
    ceil = bench.ceilings()
    print(f"copy ceiling {ceil.copy_gbps:,.0f} GB/s [{ceil.source}]  ({_t.time() - T0:.0f} s)", flush=True)
    torch.manual_seed(0)
    shapes = {torch.float16: (16384, 8192), torch.float32: (8192, 8192)}
    data = {}
    for dtype, (m, n) in shapes.items():
        x = torch.randn(m, n, device="cuda").to(dtype)
        b = torch.randn(n, device="cuda").to(dtype)
        ref = F.gelu(x.float() + b.float()).to(dtype)
        data[dtype] = (x, b, torch.empty_like(x), ref)

    variants = []   # (dtype, name, kind, cfg, elements per thread)
    h, f = torch.float16, torch.float32
    for mode, bias in [(0, False), (0, True), (1, False), (1, True), (2, True), (3, True), (4, True)]:
        variants.append((h, f"1d 1024/4w {'bias' if bias else 'no bias'} {MODES[mode]}", "1d", (1024, 4, mode, bias), 8))
    for block, nw in [(512, 4), (1024, 2), (1024, 8), (2048, 4), (2048, 8), (4096, 4), (4096, 8)]:
        variants.append((h, f"1d {block}/{nw}w bias gelu", "1d", (block, nw, 1, True), block // (32 * nw)))
    variants.append((h, "1d 1024/4w N constexpr gelu", "1d N const", (1024, 4, 1), 8))
    variants.append((h, "1d 2048/4w N constexpr gelu", "1d N const", (2048, 4, 1), 16))
    for bm, bn, nw in [(1, 1024, 4), (1, 2048, 4), (1, 2048, 8), (2, 1024, 4), (4, 1024, 4), (4, 1024, 8),
                       (8, 1024, 8), (8, 512, 4), (16, 512, 8), (4, 2048, 8), (8, 2048, 8), (16, 1024, 8)]:
        variants.append((h, f"2d {bm}x{bn}/{nw}w gelu", "2d", (bm, bn, nw, 1), bm * bn // (32 * nw)))
    for mode in (0, 3, 4):
        variants.append((h, f"2d 4x1024/4w {MODES[mode]}", "2d", (4, 1024, 4, mode), 32))
    for bm, bn, nw, per in [(4, 1024, 4, 4), (8, 1024, 8, 2), (4, 1024, 8, 8)]:
        variants.append((h, f"2d persistent {bm}x{bn}/{nw}w x{per}/SM gelu", "persistent", (bm, bn, nw, 1, per), bm * bn // (32 * nw)))
    for name, kind, cfg, ept in [("1d 1024/4w bias gelu", "1d", (1024, 4, 1, True), 8),
                                 ("1d 1024/4w bias x+b", "1d", (1024, 4, 0, True), 8),
                                 ("2d 1x1024/4w gelu", "2d", (1, 1024, 4, 1), 8),
                                 ("2d 4x1024/4w gelu", "2d", (4, 1024, 4, 1), 32),
                                 ("2d 4x1024/8w gelu", "2d", (4, 1024, 8, 1), 16),
                                 ("2d 8x1024/8w gelu", "2d", (8, 1024, 8, 1), 32)]:
        variants.append((f, name, kind, cfg, ept))

    if "--v2" in sys.argv:   # the second call: the erfc formulation against tl.erf, and the lesson's check on it
        variants = [(h, "1d 1024/4w bias gelu tl.erf", "1d", (1024, 4, 1, True), 8),
                    (h, "1d 1024/4w no bias gelu tl.erf", "1d", (1024, 4, 1, False), 8),
                    (h, "1d 1024/4w bias x+b", "1d", (1024, 4, 0, True), 8),
                    (h, "1d 1024/4w bias gelu erfc poly8+exp2", "1d", (1024, 4, 5, True), 8),
                    (h, "1d 2048/4w bias gelu erfc poly8+exp2", "1d", (2048, 4, 5, True), 16),
                    (h, "1d 1024/4w bias gelu A&S erf", "1d", (1024, 4, 4, True), 8),
                    (f, "1d 1024/4w bias gelu tl.erf", "1d", (1024, 4, 1, True), 8),
                    (f, "1d 1024/4w bias gelu erfc poly8+exp2", "1d", (1024, 4, 5, True), 8)]
        from course_utils import check
        for mode in (1, 5):
            def bg(x, b, mode=mode):
                out = torch.empty_like(x)
                k1d[(triton.cdiv(x.numel(), 1024),)](x, b, out, x.numel(), x.shape[1], BLOCK=1024, MODE=mode, BIAS=True)
                return out
            try:
                print(f"check.bias_gelu on MODE {MODES[mode]}: {check.bias_gelu(bg)}", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"check.bias_gelu on MODE {MODES[mode]} FAILED: {str(e)[:300]}", flush=True)
            # accuracy against float64 on a dense grid of v (x = v, b = 0), fp32 in and out
            v = torch.linspace(-12, 12, 2**24 + 1, device="cuda", dtype=torch.float64)
            got = bg(v.float().reshape(-1, 1), torch.zeros(1, device="cuda"))
            ref = F.gelu(v)
            err = (got.double().flatten() - ref).abs()
            big = ref.abs() > 1e-6
            print(f"   fp32 vs float64 on [-12, 12]: max abs {err.max().item():.2e}, max rel where |gelu| > 1e-6 "
                  f"{(err[big] / ref[big].abs()).max().item():.2e}; torch's fp32 F.gelu: max abs "
                  f"{(F.gelu(v.float()).double() - ref).abs().max().item():.2e}", flush=True)
    rows = []
    for dtype, name, kind, cfg, ept in variants:
        x, b, out, ref = data[dtype]
        fn = launcher(kind, cfg, dtype)
        try:
            out.fill_(float("nan"))
            compiled = fn(x, b, out)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            print(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:100]}", flush=True)
            continue
        mode = cfg[3] if kind in ("2d", "persistent") else cfg[2]
        if mode in (1, 2, 4, 5):
            err = (out.float() - ref.float()).abs().max().item()
            bad = not torch.isfinite(out).all().item()
        else:
            err, bad = float("nan"), False
        rows.append(dict(dtype=dtype, name=name, fn=fn, err=err, bad=bad, sass=sass_stats(compiled, ept), ms=[]))
    print(f"compiled {len(rows)} variants ({_t.time() - T0:.0f} s)", flush=True)

    extra = {}
    for dtype in (h, f):
        x, b, out, _ = data[dtype]
        extra[dtype, "x.clone()"] = lambda x=x: x.clone()
    compiled_tc = torch.compile(lambda x, b: F.gelu(x + b), dynamic=False)
    for dtype in (h, f):
        x, b, _, _ = data[dtype]
        compiled_tc(x, b)
        extra[dtype, "torch.compile gelu(x + b)"] = lambda x=x, b=b: compiled_tc(x, b)
    print(f"torch.compile ready ({_t.time() - T0:.0f} s)", flush=True)
    for r in rows:
        r["ms"] = []
    ex_ms = {k: [] for k in extra}
    for rnd in range(3 if "--v2" in sys.argv else 2):
        for k, fn in extra.items():
            ex_ms[k].append(bench.time(fn))
        for r in rows:
            x, b, out, _ = data[r["dtype"]]
            r["ms"].append(bench.time(lambda: r["fn"](x, b, out)))
        print(f"pass {rnd + 1} done ({_t.time() - T0:.0f} s)  nvidia-smi: {nvsmi()}", flush=True)

    for dtype in (h, f):
        x, b, _, _ = data[dtype]
        useful = 2 * x.nbytes + b.nbytes
        print(f"\n{str(dtype)[6:]}, x {tuple(x.shape)}, {x.nbytes / 2**20:.0f} MiB; % of copy ceiling = useful bytes "
              f"(2*|x| + |b|) / ms / {ceil.copy_gbps:,.0f} GB/s; two passes")
        print(f"{'variant':44}{'ms p1':>8}{'ms p2':>8}{'% p1':>6}{'% p2':>6}{'max err':>10}   SASS")
        for k, ms in ex_ms.items():
            if k[0] == dtype:
                pct = [useful / t / 1e6 / ceil.copy_gbps for t in ms]
                print(f"{k[1]:44}{ms[0]:>8.4f}{ms[1]:>8.4f}{pct[0]:>6.0%}{pct[1]:>6.0%}")
        for r in rows:
            if r["dtype"] != dtype:
                continue
            pct = [useful / t / 1e6 / ceil.copy_gbps for t in r["ms"]]
            err = "" if r["err"] != r["err"] else f"{r['err']:.1e}" + (" NONFINITE" if r["bad"] else "")
            print(f"{r['name']:44}{r['ms'][0]:>8.4f}{r['ms'][1]:>8.4f}{pct[0]:>6.0%}{pct[1]:>6.0%}{err:>10}   {r['sass']}")
    print(f"\ntotal {_t.time() - T0:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
