"""Lesson 07: matmul + bias + exact GELU at 8192^3 fp16 against cuBLAS alone, robustly.

Compiles lesson 07's kernel (the same code, with an EPI switch: 0 no epilogue, 1 the solution's bias +
GELU, 2 the same epilogue on the two halves of the tile's columns) for several tiles, checks each
against fp32 PyTorch, and times them interleaved with cuBLAS `a @ w`: ROUNDS rounds, each timing every
version once (do_bench median, L2 flushed, as the notebook's bench.time). Prints per version the median
ms over rounds, the ratio cuBLAS / version per round (min, median, max), registers, spills and compile s.
    PYTHONPATH=$PWD python3 docs/gpu-results/sweeps/matmul_epilogue_vs_cublas.py
"""
import math
import statistics
import subprocess
import sys
import time as _t

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from course_utils import bench

T0 = _t.time()
ROUNDS = 5


@triton.jit
def finish(acc, rm, rn, b_ptr, c_ptr, M, N, EPI: tl.constexpr):
    if EPI == 3:   # GELU = v * Phi(v), Phi from erfc(|u|) = 2^(-|u| p(|u|)): one polynomial, one exp2
        v = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
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
        half = 0.5 * tl.exp2(-a * p)
        acc = v * tl.where(u < 0, half, 1.0 - half)
    elif EPI > 0:
        acc = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
        acc = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def mm_kernel(a_ptr, w_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EPI: tl.constexpr):
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * num_n)
    rows_in_group = min(tl.cdiv(M, BLOCK_M) - group * GROUP_M, GROUP_M)
    pid_m = group * GROUP_M + (pid % (GROUP_M * num_n)) % rows_in_group
    pid_n = (pid % (GROUP_M * num_n)) // rows_in_group
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    w_ptrs = w_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptrs, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * N
    if EPI == 2:
        left, right = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
        half = pid_n * BLOCK_N + tl.arange(0, BLOCK_N // 2)
        finish(left, rm, half, b_ptr, c_ptr, M, N, EPI)
        finish(right, rm, half + BLOCK_N // 2, b_ptr, c_ptr, M, N, EPI)
    else:
        finish(acc, rm, rn, b_ptr, c_ptr, M, N, EPI)


def run(a, w, b, c, cfg):
    bm, bn, bk, nw, ns, g, epi = cfg
    M, K = a.shape
    N = w.shape[1]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    return mm_kernel[grid](a, w, b, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g, EPI=epi,
                           num_warps=nw, num_stages=ns)


def nvsmi():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return str(e)


def main():
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}  "
          f"nvidia-smi (sm MHz, max, W, C): {nvsmi()}", flush=True)
    torch.manual_seed(0)
    S = 8192
    a = torch.randn(S, S, device="cuda").half()
    w = (torch.randn(S, S, device="cuda") / math.sqrt(S)).half()
    b = torch.randn(S, device="cuda").half()
    ref = F.gelu((a @ w).float() + b.float())
    c = torch.empty(S, S, device="cuda", dtype=torch.float16)
    EPI = {0: "none", 1: "bias+GELU", 2: "bias+GELU halves", 3: "bias+GELU erfc poly8"}
    cfgs = [(128, 256, 32, 8, 4, 8, 1), (128, 256, 32, 8, 4, 8, 0), (128, 256, 32, 8, 4, 8, 2),
            (128, 256, 64, 8, 3, 8, 1), (128, 256, 64, 8, 3, 8, 2), (128, 256, 64, 8, 4, 8, 1),
            (128, 256, 64, 8, 4, 8, 2), (256, 128, 64, 8, 3, 8, 1), (256, 128, 64, 8, 3, 8, 2),
            (128, 128, 64, 4, 4, 8, 1), (128, 128, 64, 8, 4, 8, 1), (128, 256, 64, 8, 3, 16, 1),
            (128, 256, 32, 8, 4, 16, 2), (128, 256, 32, 8, 5, 8, 2)]
    if "--v2" in sys.argv:
        cfgs = [(128, 256, 32, 8, 4, 8, 1), (128, 256, 32, 8, 4, 8, 0), (128, 256, 32, 8, 4, 8, 3),
                (128, 256, 64, 8, 4, 8, 2), (128, 128, 32, 8, 4, 8, 1), (128, 128, 64, 8, 3, 8, 1),
                (128, 256, 64, 8, 3, 8, 3)]
    rows = []
    for cfg in cfgs:
        t = _t.time()
        try:
            c.fill_(float("nan"))
            k = run(a, w, b, c, cfg)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            print(f"{cfg}: {type(e).__name__}: {str(e).splitlines()[0][:100]}", flush=True)
            continue
        comp = _t.time() - t
        if cfg[6]:
            err = ((c.float() - ref).norm() / ref.norm()).item()
        else:
            err = ((c.float() - (a @ w).float()).norm() / (a @ w).float().norm()).item()
        rows.append(dict(cfg=cfg, regs=k.n_regs, spills=k.n_spills, comp=comp, err=err, ms=[]))
        print(f"compiled {cfg} in {comp:.1f} s: regs {k.n_regs} spills {k.n_spills} rel err {err:.1e}", flush=True)
    cublas = []
    for rnd in range(ROUNDS):
        cublas.append(bench.time(lambda: a @ w))
        for r in rows:
            r["ms"].append(bench.time(lambda: run(a, w, b, c, r["cfg"])))
        print(f"round {rnd + 1}: cuBLAS {cublas[-1]:.3f} ms  ({_t.time() - T0:.0f} s)  nvidia-smi: {nvsmi()}", flush=True)
    cb = statistics.median(cublas)
    print(f"\ncuBLAS a @ w: per round {', '.join(f'{t:.3f}' for t in cublas)} ms; median {cb:.3f} ms = "
          f"{2 * S**3 / cb / 1e9:.0f} TFLOP/s")
    print(f"{'BM x BN x BK, warps, stages, GROUP_M, epilogue':50}{'med ms':>8}{'TFLOP/s':>8}{'ratio med':>10}"
          f"{'min':>7}{'max':>7}{'regs':>6}{'spill':>6}{'comp s':>7}{'rel err':>9}")
    for r in rows:
        bm, bn, bk, nw, ns, g, epi = r["cfg"]
        ratios = [x / y for x, y in zip(cublas, r["ms"])]
        med = statistics.median(r["ms"])
        print(f"{f'{bm}x{bn}x{bk}, {nw}w, {ns}s, G{g}, {EPI[epi]}':50}{med:>8.3f}{2 * S**3 / med / 1e9:>8.0f}"
              f"{statistics.median(ratios):>10.3f}{min(ratios):>7.3f}{max(ratios):>7.3f}{r['regs']:>6}{r['spills']:>6}"
              f"{r['comp']:>7.1f}{r['err']:>9.1e}")
    print(f"\ntotal {_t.time() - T0:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
