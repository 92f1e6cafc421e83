#!/usr/bin/env python3
"""The full attention sweep behind lesson 09 (the notebook runs a trimmed copy of it in under a minute).

    python3 tools/bench_attention.py [--quick] [--out DIR]

On a GPU: naive attention, torch SDPA (flash and cuDNN backends), torch.compile of the naive code, the
lesson's teaching kernel with several block configurations and the optimized kernel with each
optimization switched on by itself, over N = 1k-16k, D = 64 and 128, causal and not, in fp16. The
problem keeps 16k tokens (B = 16384 / N) and a model width of 2048 (H = 2048 / D), the shape the
FlashAttention papers report. Prints TFLOP/s (causal counts half the FLOPs) and peak extra memory,
and writes everything as JSON to --out.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


# --- the lesson's teaching kernel (same algorithm as solutions/09_flash_attention.ipynb) ------------
@triton.jit
def teach_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N, qk_scale, D: tl.constexpr, BLOCK_D: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M     # the longest causal blocks first
    base = tl.program_id(1).to(tl.int64) * N * D
    rows = start_m + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    dmask = dims[None, :] < D
    q = tl.load(q_ptr + base + rows[:, None] * D + dims[None, :], mask=(rows[:, None] < N) & dmask, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    end = tl.minimum(start_m + BLOCK_M, N) if CAUSAL else N
    split = (start_m if CAUSAL else N) // BLOCK_N * BLOCK_N         # the tiles before it need no mask
    for edge in tl.static_range(2):                                 # the loop compiled twice: unmasked, masked
        for start_n in range(split if edge else 0, end if edge else split, BLOCK_N):
            cols = start_n + tl.arange(0, BLOCK_N)
            kv_mask = (cols[:, None] < N) & dmask if edge else dmask
            k = tl.load(k_ptr + base + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
            s = tl.dot(q, tl.trans(k))
            if edge:
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


def teach(q, k, v, causal=False, block_m=128, block_n=64, num_warps=8, num_stages=3):
    B, H, N, D = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    grid = (triton.cdiv(N, block_m), B * H)
    teach_kernel[grid](q, k, v, o, N, D ** -0.5 * 1.4426950408889634, D=D, BLOCK_D=triton.next_power_of_2(D),
                       BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, num_warps=num_warps, num_stages=num_stages)
    return o


# --- the optimized kernel: each optimization a switch, so that each can be timed alone -------------
@triton.jit
def _opt_tiles(acc, l, m, q, K, V, base, bh, N, qk_scale, lo, hi, rows, dims, D: tl.constexpr,
               BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr, EXP2: tl.constexpr,
               TMA: tl.constexpr, WS: tl.constexpr = False):
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        cols = start_n + tl.arange(0, BLOCK_N)
        if TMA:
            k = K.load([bh, start_n, 0]).reshape(BLOCK_N, D)
        elif MASK:
            k = tl.load(K + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
        else:
            k = tl.load(K + base + cols[:, None] * D + dims[None, :])
        s = tl.dot(q, tl.trans(k))
        if MASK:
            keep = cols[None, :] < N
            if CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])
            s = tl.where(keep, s, float("-inf"))
        if EXP2:   # qk_scale holds log2(e) / sqrt(D): one FMA per score, then ex2
            m_new = tl.maximum(m, tl.max(s, axis=1) * qk_scale)
            p = tl.math.exp2(s * qk_scale - m_new[:, None])
            alpha = tl.math.exp2(m - m_new)
        else:
            s = s * qk_scale
            m_new = tl.maximum(m, tl.max(s, axis=1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m - m_new)
        l = l * alpha + tl.sum(p, axis=1)
        if TMA:
            v = V.load([bh, start_n, 0]).reshape(BLOCK_N, D)
        elif MASK:
            v = tl.load(V + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
        else:
            v = tl.load(V + base + cols[:, None] * D + dims[None, :])
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m = m_new
    return acc, l, m


@triton.jit
def opt_kernel(Q, K, V, O, N, qk_scale, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               CAUSAL: tl.constexpr, EXP2: tl.constexpr, TWO_STAGE: tl.constexpr, TMA: tl.constexpr,
               WS: tl.constexpr = False):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    base = bh.to(tl.int64) * N * D
    rows = start_m + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    if TMA:
        q = Q.load([bh, start_m, 0]).reshape(BLOCK_M, D)
    else:
        q = tl.load(Q + base + rows[:, None] * D + dims[None, :], mask=rows[:, None] < N, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    if CAUSAL:
        diag_end = tl.minimum(start_m + BLOCK_M, N)
        if TWO_STAGE:   # tiles left of the diagonal need no mask; only the diagonal band does
            acc, l, m = _opt_tiles(acc, l, m, q, K, V, base, bh, N, qk_scale, 0, start_m, rows, dims, D, BLOCK_N,
                                   False, CAUSAL, EXP2, TMA, WS)
            acc, l, m = _opt_tiles(acc, l, m, q, K, V, base, bh, N, qk_scale, start_m, diag_end, rows, dims, D,
                                   BLOCK_N, True, CAUSAL, EXP2, TMA, WS)
        else:
            acc, l, m = _opt_tiles(acc, l, m, q, K, V, base, bh, N, qk_scale, 0, diag_end, rows, dims, D, BLOCK_N,
                                   True, CAUSAL, EXP2, TMA, WS)
    else:
        if TWO_STAGE:   # full tiles unmasked, the ragged last one masked
            full = (N // BLOCK_N) * BLOCK_N
            acc, l, m = _opt_tiles(acc, l, m, q, K, V, base, bh, N, qk_scale, 0, full, rows, dims, D, BLOCK_N,
                                   False, CAUSAL, EXP2, TMA, WS)
            acc, l, m = _opt_tiles(acc, l, m, q, K, V, base, bh, N, qk_scale, full, N, rows, dims, D, BLOCK_N,
                                   True, CAUSAL, EXP2, TMA, WS)
        else:
            acc, l, m = _opt_tiles(acc, l, m, q, K, V, base, bh, N, qk_scale, 0, N, rows, dims, D, BLOCK_N,
                                   True, CAUSAL, EXP2, TMA, WS)
    o = (acc / l[:, None]).to(tl.float16)   # the sweep runs fp16 only
    if TMA:
        O.store([bh, start_m, 0], o.reshape(1, BLOCK_M, D))
    else:
        tl.store(O + base + rows[:, None] * D + dims[None, :], o, mask=rows[:, None] < N)


def opt(q, k, v, causal=False, *, block_m=128, block_n=64, num_warps=8, num_stages=3, exp2=True, two_stage=True,
        tma=False, ws=False):
    B, H, N, D = q.shape
    o = torch.empty_like(q)
    scale = D ** -0.5 * (1.4426950408889634 if exp2 else 1.0)
    args = (q, k, v, o)
    if tma:
        from triton.tools.tensor_descriptor import TensorDescriptor
        args = tuple(TensorDescriptor(t.view(B * H, N, D), [B * H, N, D], [N * D, D, 1], [1, bs, D])
                     for t, bs in ((q, block_m), (k, block_n), (v, block_n), (o, block_m)))
    grid = (triton.cdiv(N, block_m), B * H)
    opt_kernel[grid](*args, N, scale, D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, EXP2=exp2,
                     TWO_STAGE=two_stage, TMA=tma, WS=ws, num_warps=num_warps, num_stages=num_stages)
    return o


# --- the others ---------------------------------------------------------------------------------------
def naive(q, k, v, causal=False):
    s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def sdpa_with(backend):
    from torch.nn.attention import sdpa_kernel

    def f(q, k, v, causal=False):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "build/bench_attention"))
    ap.add_argument("--parts", default="base,teach,opt")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = set(a.parts.split(","))
    from torch.nn.attention import SDPBackend
    from triton.testing import do_bench
    t_start = time.time()
    dev = torch.cuda.get_device_name()
    print(f"{dev}  torch {torch.__version__}  triton {triton.__version__}", flush=True)
    results = []

    def bench(fn):
        return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))

    def peak_extra(fn):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        r = fn()
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - before - r.numel() * r.element_size()
        del r
        return extra

    Ns = [1024, 4096, 16384] if a.quick else [1024, 2048, 4096, 8192, 16384]
    Ds = [64, 128]
    compiled = torch.compile(naive, dynamic=False)
    impls = {}
    if "base" in parts:
        impls.update({"naive": naive, "sdpa-flash": sdpa_with(SDPBackend.FLASH_ATTENTION),
                      "sdpa-cudnn": sdpa_with(SDPBackend.CUDNN_ATTENTION), "compile": compiled})
    if "teach" in parts:
        for bm, bn, w, s in [(128, 64, 8, 3), (128, 64, 8, 4), (128, 128, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3)]:
            impls[f"teach {bm}x{bn} w{w} s{s}"] = (lambda bm, bn, w, s: lambda q, k, v, causal=False: teach(
                q, k, v, causal, bm, bn, w, s))(bm, bn, w, s)
    opt_variants = {}
    if "opt" in parts:
        # each optimization alone on top of the teaching kernel's best fixed config (128x64, 8 warps, 3 stages)
        base_cfg = dict(block_m=128, block_n=64, num_warps=8, num_stages=3)
        opt_variants = {
            "opt none": dict(exp2=False, two_stage=False, tma=False),
            "opt exp2": dict(exp2=True, two_stage=False, tma=False),
            "opt two-stage": dict(exp2=False, two_stage=True, tma=False),
            "opt tma": dict(exp2=False, two_stage=False, tma=True),
            "opt all": dict(exp2=True, two_stage=True, tma=True),
        }
        for name, kw in opt_variants.items():
            impls[name] = (lambda kw: lambda q, k, v, causal=False: opt(q, k, v, causal, **base_cfg, **kw))(kw)
    if "ws" in parts:   # does Triton's warp specialization (tl.range(..., warp_specialize=True)) help on this GPU?
        for causal in (False, True):
            torch.manual_seed(0)
            B, H, N, D = 4, 16, 4096, 128
            q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
            ref = sdpa_with(SDPBackend.FLASH_ATTENTION)(q, k, v, causal).float()
            flops = 4 * B * H * N * N * D / (2 if causal else 1)
            for bm, bn, w, s_ in [(128, 128, 8, 3), (128, 64, 8, 3), (128, 128, 4, 3), (128, 64, 4, 2)]:
                for ws in (False, True):
                    try:
                        f = lambda: opt(q, k, v, causal, block_m=bm, block_n=bn, num_warps=w, num_stages=s_, tma=True,
                                        ws=ws)
                        err = (f().float() - ref).abs().max().item()
                        ms = bench(f)
                        print(f"ws={ws!s:5} causal={causal!s:5} {bm}x{bn} w{w} s{s_}: {flops / ms / 1e9:.0f} TFLOP/s "
                              f"(err {err:.1e})", flush=True)
                    except Exception as e:  # noqa: BLE001
                        print(f"ws={ws} causal={causal} {bm}x{bn} w{w} s{s_}: {type(e).__name__}: {str(e)[:300]}",
                              flush=True)
        if parts == {"ws"}:
            return
    configs = [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3), (128, 128, 8, 2),
               (128, 64, 8, 4), (256, 64, 8, 3), (128, 32, 4, 4)]
    for D in Ds:
        H = 2048 // D
        for N in Ns:
            B = max(1, 16384 // N)
            torch.manual_seed(0)
            q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
            for causal in (False, True):
                flops = 4 * B * H * N * N * D / (2 if causal else 1)
                ref = sdpa_with(SDPBackend.FLASH_ATTENTION)(q, k, v, causal).float()
                row = {"N": N, "D": D, "B": B, "H": H, "causal": causal}
                for name, fn in impls.items():
                    if name == "naive" and B * H * N * N * 2 * 3 > 60 * 2**30:
                        row[name] = {"error": "skipped: > 60 GiB"}
                        continue
                    try:
                        o = fn(q, k, v, causal)
                        err = (o.float() - ref).abs().max().item()
                        del o
                        ms = bench(lambda: fn(q, k, v, causal))
                        mem = peak_extra(lambda: fn(q, k, v, causal))
                        row[name] = {"ms": ms, "tflops": flops / ms / 1e9, "mem": mem, "err": err}
                    except Exception as e:  # noqa: BLE001
                        row[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
                        torch.cuda.empty_cache()
                if "opt" in parts and D == 128 and N >= 4096:
                    best = None
                    for bm, bn, w, s in configs:
                        try:
                            f = lambda: opt(q, k, v, causal, block_m=bm, block_n=bn, num_warps=w, num_stages=s,
                                            exp2=True, two_stage=True, tma=True)
                            err = (f().float() - ref).abs().max().item()
                            ms = bench(f)
                            row.setdefault("tune", {})[f"{bm}x{bn} w{w} s{s}"] = {"ms": ms, "tflops": flops / ms / 1e9,
                                                                                   "err": err}
                            if best is None or ms < best[0]:
                                best = (ms, f"{bm}x{bn} w{w} s{s}")
                        except Exception as e:  # noqa: BLE001
                            row.setdefault("tune", {})[f"{bm}x{bn} w{w} s{s}"] = {"error": str(e)[:160]}
                    if best:
                        row["opt tuned"] = {"ms": best[0], "tflops": flops / best[0] / 1e9, "cfg": best[1]}
                results.append(row)
                cells = []
                for name in list(impls) + (["opt tuned"] if "opt tuned" in row else []):
                    r = row.get(name, {})
                    cells.append(f"{name}={r['tflops']:.0f}" if "tflops" in r else f"{name}=ERR")
                print(f"D={D} N={N} B={B} H={H} causal={causal}: " + "  ".join(cells) + f"   [{time.time() - t_start:.0f}s]",
                      flush=True)
                (out / "bench_attention.json").write_text(json.dumps(results, indent=1))
            del q, k, v
            torch.cuda.empty_cache()
    # the table
    print("\nTFLOP/s (fp16; causal counts half the FLOPs); peak extra memory in MiB at the end")
    names = list(impls) + ["opt tuned"]
    for row in results:
        print(f"D={row['D']:>3} N={row['N']:>5} {'causal' if row['causal'] else 'full  '} " + " ".join(
            f"{row[n]['tflops']:6.0f}" if n in row and "tflops" in row[n] else "     -" for n in names))
    print("columns: " + " | ".join(names))
    for row in results:
        errs = {n: row[n]["err"] for n in names if n in row and "err" in row[n] and row[n]["err"] > 2e-2}
        errors = {n: row[n]["error"] for n in names if n in row and "error" in row[n]}
        if errs or errors:
            print(f"D={row['D']} N={row['N']} causal={row['causal']}: large errors {errs} failures {errors}")
    print("peak extra MiB (non-causal): " + "; ".join(
        f"D={r['D']} N={r['N']}: " + ", ".join(f"{n} {r[n]['mem'] / 2**20:.0f}" for n in ("naive", "sdpa-flash", "compile",
                                                                                            "teach 128x64 w8 s3")
                                               if n in r and "mem" in r[n]) for r in results if not r["causal"]))
    print(f"total {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
