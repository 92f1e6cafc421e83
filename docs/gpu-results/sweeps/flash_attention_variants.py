#!/usr/bin/env python3
"""Lesson 09: teaching-kernel and optimised-kernel variants against SDPA (flash, cuDNN), fp16.

    python3 docs/gpu-results/sweeps/flash_attention_variants.py [--parts teach,opt] [--workers 12]

Compiles every variant first in worker processes (filling Triton's on-disk cache), then times them one
after the other in this process with triton.testing.do_bench (L2 flushed, median). Prints TFLOP/s
(causal counts half the FLOPs) per case: the 8 cases of the notebook's table for the teaching kernel,
D = 128, N = 4,096 for the optimised one.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


# --- T0: the teaching kernel as it is in the notebook now ---------------------------------------------
@triton.jit
def t0_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N, qk_scale, D: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    base = tl.program_id(1).to(tl.int64) * N * D
    rows = start_m + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    dmask = dims[None, :] < D
    q = tl.load(q_ptr + base + rows[:, None] * D + dims[None, :], mask=(rows[:, None] < N) & dmask, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    end = tl.minimum(start_m + BLOCK_M, N) if CAUSAL else N
    for start_n in range(0, end, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        kv_mask = (cols[:, None] < N) & dmask
        k = tl.load(k_ptr + base + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        keep = cols[None, :] < N
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m - m_new)
        l = l * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    tl.store(o_ptr + base + rows[:, None] * D + dims[None, :], (acc / l[:, None]).to(o_ptr.dtype.element_ty),
             mask=(rows[:, None] < N) & dmask)


# --- T1: one loop; the mask only on the tiles that reach past the first query row (causal) or past N,
#     a runtime branch; the scale folded into one FMA; the MMA accumulates into acc; causal blocks
#     scheduled longest first (REVERSE) --------------------------------------------------------------
@triton.jit
def t1_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N, qk_scale, D: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, REVERSE: tl.constexpr):
    if REVERSE:
        start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    else:
        start_m = tl.program_id(0) * BLOCK_M
    base = tl.program_id(1).to(tl.int64) * N * D
    rows = start_m + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    dmask = dims[None, :] < D
    q = tl.load(q_ptr + base + rows[:, None] * D + dims[None, :], mask=(rows[:, None] < N) & dmask, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    end = tl.minimum(start_m + BLOCK_M, N) if CAUSAL else N
    masked_from = start_m if CAUSAL else N
    for start_n in range(0, end, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        kv_mask = (cols[:, None] < N) & dmask
        k = tl.load(k_ptr + base + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k))
        if start_n + BLOCK_N > masked_from:
            keep = cols[None, :] < N
            if CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1) * qk_scale)
        p = tl.math.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m - m_new)
        l = l * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m = m_new
    tl.store(o_ptr + base + rows[:, None] * D + dims[None, :], (acc / l[:, None]).to(o_ptr.dtype.element_ty),
             mask=(rows[:, None] < N) & dmask)


# --- T2: two loops through a helper, the first with neither mask nor masked loads ------------------------
@triton.jit
def _t2_tiles(acc, l, m, q, k_ptr, v_ptr, base, rows, dims, N, qk_scale, lo, hi, D: tl.constexpr,
              BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr):
    dmask = dims[None, :] < D
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        kv_mask = ((cols[:, None] < N) & dmask) if MASK else dmask
        k = tl.load(k_ptr + base + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k))
        if MASK:
            keep = cols[None, :] < N
            if CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1) * qk_scale)
        p = tl.math.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m - m_new)
        l = l * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m = m_new
    return acc, l, m


@triton.jit
def t2_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N, qk_scale, D: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, REVERSE: tl.constexpr):
    if REVERSE:
        start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    else:
        start_m = tl.program_id(0) * BLOCK_M
    base = tl.program_id(1).to(tl.int64) * N * D
    rows = start_m + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    dmask = dims[None, :] < D
    q = tl.load(q_ptr + base + rows[:, None] * D + dims[None, :], mask=(rows[:, None] < N) & dmask, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    end = tl.minimum(start_m + BLOCK_M, N) if CAUSAL else N
    split = (start_m // BLOCK_N) * BLOCK_N if CAUSAL else (N // BLOCK_N) * BLOCK_N
    acc, l, m = _t2_tiles(acc, l, m, q, k_ptr, v_ptr, base, rows, dims, N, qk_scale, 0, split, D, BLOCK_N,
                          False, CAUSAL)
    acc, l, m = _t2_tiles(acc, l, m, q, k_ptr, v_ptr, base, rows, dims, N, qk_scale, split, end, D, BLOCK_N,
                          True, CAUSAL)
    tl.store(o_ptr + base + rows[:, None] * D + dims[None, :], (acc / l[:, None]).to(o_ptr.dtype.element_ty),
             mask=(rows[:, None] < N) & dmask)


# --- T3: T2's two loops written as one: tl.static_range(2) compiles the loop twice, the first time (the
#     tiles left of the diagonal, or before the ragged end) without any mask ------------------------------
@triton.jit
def t3_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N, qk_scale, D: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, REVERSE: tl.constexpr):
    if REVERSE:
        start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    else:
        start_m = tl.program_id(0) * BLOCK_M
    base = tl.program_id(1).to(tl.int64) * N * D
    rows = start_m + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    dmask = dims[None, :] < D
    q = tl.load(q_ptr + base + rows[:, None] * D + dims[None, :], mask=(rows[:, None] < N) & dmask, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    split = (start_m if CAUSAL else N) // BLOCK_N * BLOCK_N
    for edge in tl.static_range(2):
        lo = split if edge else 0
        hi = (tl.minimum(start_m + BLOCK_M, N) if CAUSAL else N) if edge else split
        for start_n in range(lo, hi, BLOCK_N):
            cols = start_n + tl.arange(0, BLOCK_N)
            kv_mask = ((cols[:, None] < N) & dmask) if edge else dmask
            k = tl.load(k_ptr + base + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
            s = tl.dot(q, tl.trans(k))
            if edge:
                keep = (cols[None, :] < N) & ((cols[None, :] <= rows[:, None]) | (not CAUSAL))
                s = tl.where(keep, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1) * qk_scale)
            p = tl.math.exp2(s * qk_scale - m_new[:, None])
            alpha = tl.math.exp2(m - m_new)
            l = l * alpha + tl.sum(p, axis=1)
            v = tl.load(v_ptr + base + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m = m_new
    tl.store(o_ptr + base + rows[:, None] * D + dims[None, :], (acc / l[:, None]).to(o_ptr.dtype.element_ty),
             mask=(rows[:, None] < N) & dmask)


def teach(kernel, q, k, v, causal, bm, bn, w, s, reverse=True, always_reverse=False):
    B, H, N, D = q.shape
    o = torch.empty_like(q)
    extra = {} if kernel is t0_kernel else dict(REVERSE=always_reverse or (reverse and causal))
    kernel[(triton.cdiv(N, bm), B * H)](q, k, v, o, N, D ** -0.5 * LOG2E, D=D, BLOCK_D=max(16, triton.next_power_of_2(D)),
                                        BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, num_warps=w, num_stages=s, **extra)
    return o


# --- the optimised kernel (the notebook's, TMA descriptors, diagonal split), plus REVERSE ----------------
@triton.jit
def _o_tiles(acc, l, m, q, K, V, bh, N, qk_scale, lo, hi, rows, D: tl.constexpr, BLOCK_N: tl.constexpr,
             MASK: tl.constexpr, CAUSAL: tl.constexpr, WS: tl.constexpr):
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        cols = start_n + tl.arange(0, BLOCK_N)
        k = K.load([bh, start_n, 0]).reshape(BLOCK_N, D)
        s = tl.dot(q, tl.trans(k))
        if MASK:
            keep = cols[None, :] < N
            if CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1) * qk_scale)
        p = tl.math.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m - m_new)
        l = l * alpha + tl.sum(p, axis=1)
        v = V.load([bh, start_n, 0]).reshape(BLOCK_N, D)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m = m_new
    return acc, l, m


@triton.jit
def o_kernel(Q, K, V, O, N, qk_scale, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             CAUSAL: tl.constexpr, REVERSE: tl.constexpr, WS: tl.constexpr):
    if REVERSE:
        start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    else:
        start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    rows = start_m + tl.arange(0, BLOCK_M)
    q = Q.load([bh, start_m, 0]).reshape(BLOCK_M, D)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    end = tl.minimum(start_m + BLOCK_M, N) if CAUSAL else N
    split = start_m if CAUSAL else (N // BLOCK_N) * BLOCK_N
    acc, l, m = _o_tiles(acc, l, m, q, K, V, bh, N, qk_scale, 0, split, rows, D, BLOCK_N, False, CAUSAL, WS)
    acc, l, m = _o_tiles(acc, l, m, q, K, V, bh, N, qk_scale, split, end, rows, D, BLOCK_N, True, CAUSAL, WS)
    O.store([bh, start_m, 0], (acc / l[:, None]).to(tl.float16).reshape(1, BLOCK_M, D))


def opt(q, k, v, causal, bm, bn, w, s, reverse=False, ws=False):
    from triton.tools.tensor_descriptor import TensorDescriptor
    B, H, N, D = q.shape
    o = torch.empty_like(q)
    args = tuple(TensorDescriptor(t.view(B * H, N, D), [B * H, N, D], [N * D, D, 1], [1, r, D])
                 for t, r in ((q, bm), (k, bn), (v, bn), (o, bm)))
    o_kernel[(triton.cdiv(N, bm), B * H)](*args, N, D ** -0.5 * LOG2E, D=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
                                          REVERSE=reverse and causal, WS=ws, num_warps=w, num_stages=s)
    return o


# --- what to run ---------------------------------------------------------------------------------------
T_CFG = {64: [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 4), (128, 128, 4, 3)],
         128: [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 2), (128, 64, 4, 3), (64, 64, 4, 3)]}
T0_CFG = {64: (128, 64, 8, 3), 128: (64, 64, 4, 3)}      # the notebook's tiles(d) now
O_CFG = [(128, 64, 4, 2), (128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3), (128, 128, 8, 4),
         (128, 128, 4, 2), (128, 32, 4, 3)]
CASES = [(n, d, c) for d in (64, 128) for n in (4096, 16384) for c in (False, True)]


T3_CFG = {64: [(128, 64, 8, 3), (128, 64, 4, 3), (128, 64, 8, 4), (128, 128, 8, 2)],
          128: [(128, 128, 8, 3), (128, 64, 8, 3), (128, 128, 8, 2), (128, 64, 8, 4), (128, 64, 4, 2)]}
O2_CFG = [(128, 64, 4, 2), (256, 64, 8, 2), (256, 64, 8, 3), (128, 128, 8, 3), (128, 64, 8, 2), (256, 128, 8, 2)]


def tiles(d, dtype):
    # the candidate for the notebook's tiles(): 16-bit inputs get the fastest measured, fp32 smaller ones
    if dtype == torch.float32:
        return (64, 64, 4, 2)
    return (128, 128, 8, 3) if d >= 128 else (128, 64, 8, 3)


def variants(parts):
    out = []
    if "t3" in parts:
        for d in (64, 128):
            for cfg in T3_CFG[d]:
                tag = f"{cfg[0]}x{cfg[1]} w{cfg[2]} s{cfg[3]}"
                out.append((f"T3 {tag}", d, None, lambda q, k, v, c, cfg=cfg: teach(t3_kernel, q, k, v, c, *cfg)))
                out.append((f"T3 again {tag}", d, None, lambda q, k, v, c, cfg=cfg: teach(t3_kernel, q, k, v, c, *cfg)))
            cfg = tiles(d, torch.float16)
            out.append((f"T2 {cfg[0]}x{cfg[1]} w{cfg[2]} s{cfg[3]}", d, None,
                        lambda q, k, v, c, cfg=cfg: teach(t2_kernel, q, k, v, c, *cfg)))
    if "t4" in parts:   # the notebook's kernel (longest first, full attention too) against T3, D = 128
        for cfg in [(128, 64, 8, 4), (128, 64, 8, 3), (128, 128, 8, 3)]:
            tag = f"{cfg[0]}x{cfg[1]} w{cfg[2]} s{cfg[3]}"
            for r in range(3):
                out.append((f"T3-rev-always {tag} #{r}", 128, None,
                            lambda q, k, v, c, cfg=cfg: teach(t3_kernel, q, k, v, c, *cfg, always_reverse=True)))
                out.append((f"T3 {tag} #{r}", 128, None, lambda q, k, v, c, cfg=cfg: teach(t3_kernel, q, k, v, c, *cfg)))
    if "opt2" in parts:
        for cfg in O2_CFG:
            tag = f"{cfg[0]}x{cfg[1]} w{cfg[2]} s{cfg[3]}"
            out.append((f"O {tag}", 128, None, lambda q, k, v, c, cfg=cfg: opt(q, k, v, c, *cfg)))
            out.append((f"O-rev {tag}", 128, True, lambda q, k, v, c, cfg=cfg: opt(q, k, v, c, *cfg, reverse=True)))
            if cfg[2] == 8:
                out.append((f"O-ws {tag}", 128, None, lambda q, k, v, c, cfg=cfg: opt(q, k, v, c, *cfg, ws=True)))   # (name, fn(q, k, v, causal, d) or None to skip, d filter)
    if "teach" in parts:
        for d in (64, 128):
            out.append((f"T0 {'x'.join(map(str, T0_CFG[d][:2]))} w{T0_CFG[d][2]} s{T0_CFG[d][3]}", d, None,
                        lambda q, k, v, c, cfg=T0_CFG[d]: teach(t0_kernel, q, k, v, c, *cfg)))
            for cfg in T_CFG[d]:
                tag = f"{cfg[0]}x{cfg[1]} w{cfg[2]} s{cfg[3]}"
                out.append((f"T1 {tag}", d, None, lambda q, k, v, c, cfg=cfg: teach(t1_kernel, q, k, v, c, *cfg)))
                out.append((f"T1-fwd {tag}", d, True,
                            lambda q, k, v, c, cfg=cfg: teach(t1_kernel, q, k, v, c, *cfg, reverse=False)))
                out.append((f"T2 {tag}", d, None, lambda q, k, v, c, cfg=cfg: teach(t2_kernel, q, k, v, c, *cfg)))
    if "opt" in parts:
        for cfg in O_CFG:
            tag = f"{cfg[0]}x{cfg[1]} w{cfg[2]} s{cfg[3]}"
            out.append((f"O {tag}", 128, None, lambda q, k, v, c, cfg=cfg: opt(q, k, v, c, *cfg)))
            out.append((f"O-rev {tag}", 128, True, lambda q, k, v, c, cfg=cfg: opt(q, k, v, c, *cfg, reverse=True)))
    return out


def _compile_task(args):
    parts, i, d, causal = args
    torch.cuda.set_device(0)
    if isinstance(i, str):   # a dtype for the T3 correctness run
        dtype = getattr(torch, i)
        q, k, v = (torch.randn(1, 2, 67, d, device="cuda", dtype=dtype) for _ in range(3))
        try:
            teach(t3_kernel, q, k, v, causal, *tiles(d, dtype))
            torch.cuda.synchronize()
            return "ok"
        except Exception as e:  # noqa: BLE001
            return f"T3 {i} D={d} causal={causal}: {type(e).__name__} {str(e)[:200]}"
    name, _, _, fn = variants(parts)[i]
    q, k, v = (torch.randn(1, 2, 256, d, device="cuda", dtype=torch.float16) for _ in range(3))
    t = time.time()
    try:
        fn(q, k, v, causal)
        torch.cuda.synchronize()
        return f"{name} D={d} causal={causal}: {time.time() - t:.1f} s"
    except Exception as e:  # noqa: BLE001
        return f"{name} D={d} causal={causal}: {type(e).__name__} {str(e)[:200]}"


def sdpa_with(backend):
    from torch.nn.attention import sdpa_kernel

    def f(q, k, v, causal=False):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="teach,opt")
    ap.add_argument("--workers", type=int, default=12)
    a = ap.parse_args()
    parts = a.parts
    t0 = time.time()
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}", flush=True)
    vs = variants(parts)
    tasks = []
    for i, (name, d, only_causal, _) in enumerate(vs):
        for c in (False, True):
            if only_causal and not c:
                continue
            tasks.append((parts, i, d, c))
    if "dtypes" in parts:
        tasks += [(parts, dt, d, c) for dt in ("float32", "float16", "bfloat16") for d in (16, 32, 64, 128)
                  for c in (False, True)]
    ctx = mp.get_context("spawn")
    with ctx.Pool(a.workers) as pool:
        for line in pool.imap_unordered(_compile_task, tasks):
            if "Error" in line or "Exception" in line:
                print("compile:", line, flush=True)
    print(f"compiled {len(tasks)} kernels in {time.time() - t0:.0f} s", flush=True)

    if "dtypes" in parts:   # T3 with tiles(d, dtype): right on every dtype and D the check uses?
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for d in (16, 32, 64, 128):
                for n in (67, 2049):
                    for c in (False, True):
                        q, k, v = (torch.randn(2, 3, n, d, device="cuda", dtype=dtype) for _ in range(3))
                        try:
                            o = teach(t3_kernel, q, k, v, c, *tiles(d, dtype))
                            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=c)
                            err = (o.double() - ref).abs().max().item()
                            if err > 2e-2:
                                print(f"dtypes: {dtype} D={d} N={n} causal={c}: error {err:.2e}", flush=True)
                        except Exception as e:  # noqa: BLE001
                            print(f"dtypes: {dtype} D={d} N={n} causal={c}: {type(e).__name__} {str(e)[:150]}",
                                  flush=True)
        print(f"dtypes checked [{time.time() - t0:.0f} s]", flush=True)
    from torch.nn.attention import SDPBackend
    from triton.testing import do_bench
    rivals = {"sdpa-flash": sdpa_with(SDPBackend.FLASH_ATTENTION), "cudnn": sdpa_with(SDPBackend.CUDNN_ATTENTION)}

    def bench(fn):
        return float(do_bench(fn, warmup=5 if "t4" in parts else 10, rep=25 if "t4" in parts else 40,
                              return_mode="median"))

    for n, d, c in CASES:
        b, h = max(1, 16384 // n), 2048 // d
        if "teach" not in parts and "t3" not in parts and not (d == 128 and (n == 4096 or "t4" in parts)):
            continue
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
        flops = 4 * b * h * n * n * d / (2 if c else 1)
        ref = rivals["sdpa-flash"](q, k, v, c).float()
        tf = {}
        for name, fn in rivals.items():
            tf[name] = flops / bench(lambda: fn(q, k, v, c)) / 1e9
        for name, dd, only_causal, fn in vs:
            if dd != d or (only_causal and not c) or (name.startswith("O") and n != 4096):
                continue
            try:
                err = (fn(q, k, v, c).float() - ref).abs().max().item()
                tf[name] = flops / bench(lambda: fn(q, k, v, c)) / 1e9
                if err > 1e-2:
                    tf[name + " ERR"] = err
            except Exception as e:  # noqa: BLE001
                print(f"  {name}: {type(e).__name__} {str(e)[:200]}", flush=True)
        fl, cu = tf["sdpa-flash"], tf["cudnn"]
        print(f"\nN={n} D={d} {'causal' if c else 'full'}: sdpa-flash {fl:.0f}  cudnn {cu:.0f}  (1.3x flash = {1.3 * fl:.0f})"
              f"   [{time.time() - t0:.0f} s]", flush=True)
        for name, x in sorted(tf.items(), key=lambda kv: -kv[1] if "ERR" not in kv[0] else 0):
            if name in rivals:
                continue
            if "ERR" in name:
                print(f"  {name}: {x:.2e}")
                continue
            print(f"  {name:24} {x:6.0f}  {x / fl:5.2f}x flash  {x / cu:5.2f}x cudnn", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
