"""Decode kernels swept on the GPU (lab 6's skinny matmul, lab 5/6 attention, lab 5's B = 1 under graph replay)."""
import json, math, statistics, sys, time as _t, itertools
import torch, torch.nn.functional as F, triton, triton.language as tl
import course_utils as cu
from course_utils import bench, decoder
SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 132
T0 = _t.time()
def cells(path, ids):
    nb = json.load(open(path)); return ["".join(c["source"]) for c in nb["cells"] if c.get("id") in ids]
def ns_of(path, ids):
    import importlib.util, os, tempfile
    d = tempfile.mkdtemp(); name = os.path.basename(path).split(".")[0]
    f = os.path.join(d, name + ".py")
    head = ("import math\nimport torch\nimport torch.nn.functional as F\nimport triton\nimport triton.language as tl\n"
            "from course_utils import decoder\nSMS = %d\nON_GPU = True\n" % SMS)
    open(f, "w").write(head + "\n\n".join(cells(path, ids)))
    spec = importlib.util.spec_from_file_location(name, f); mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.__dict__
L6 = ns_of("solutions/labs/lab6_decode_step.ipynb", {"lab6-c11", "lab6-c12"})
L5 = ns_of("solutions/labs/lab5_flash_decoding.ipynb", {"lab5-kernels", "lab5-function"})
COPY = bench.ceilings().copy_gbps
print(f"copy ceiling {COPY:.0f} GB/s", flush=True)

def graph_ms(fns, reps=15):
    side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for f in fns: f()
    torch.cuda.current_stream().wait_stream(side); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in fns: f()
    for _ in range(3): g.replay()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    del g
    return statistics.median(ts)

@triton.jit
def gemv_kernel(x_ptr, w_ptr, y_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        x = tl.load(x_ptr + kk, mask=kk < K, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + rn[:, None].to(tl.int64) * K + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
        acc += w.to(tl.float32) * x[None, :]
    tl.store(y_ptr + rn, tl.sum(acc, axis=1).to(y_ptr.dtype.element_ty), mask=rn < N)

def launch(cfg, x, w, y):
    kind, bn, bk, nw, ns = cfg
    m, k = x.shape; n = w.shape[0]
    if kind == "dot":
        L6["skinny_matmul_kernel"][(triton.cdiv(n, bn),)](x, w, y, m, n, k, BLOCK_M=max(16, triton.next_power_of_2(m)),
                                                          BLOCK_N=bn, BLOCK_K=bk, num_warps=nw, num_stages=ns)
    else:
        gemv_kernel[(triton.cdiv(n, bn),)](x, w, y, n, k, BLOCK_N=bn, BLOCK_K=bk, num_warps=nw, num_stages=ns)

def current_cfg(m, n, k):
    bn = next((c for c in (64, 32) if triton.cdiv(n, c) >= 2 * SMS), 16)
    return ("dot", bn, 256, 4, 3)

dt = torch.bfloat16
C = decoder.LLAMA_8B_4_LAYERS
SHAPES = {"qkv": (C.qkv, C.hidden), "o": (C.hidden, C.heads * C.head_dim), "gate_up": (2 * C.mlp, C.hidden),
          "down": (C.hidden, C.mlp), "head": (C.vocab, C.hidden)}
print(SHAPES, flush=True)
W = {s: [torch.randn(n, k, device="cuda", dtype=dt) for _ in range(4)] for s, (n, k) in SHAPES.items()}
DOT = [("dot", bn, bk, nw, ns) for bn in (16, 32, 64) for bk in (128, 256, 512) for nw, ns in ((4, 3), (4, 4), (8, 3), (8, 5))]
GEMV = [("gemv", bn, bk, nw, ns) for bn in (8, 16, 32) for bk in (256, 512, 1024) for nw, ns in ((4, 1), (4, 3))]
best = {}
res = []
for M in (1, 16):
    for s, (n, k) in SHAPES.items():
        x = torch.randn(M, k, device="cuda", dtype=dt)
        ys = [torch.empty(M, n, device="cuda", dtype=dt) for _ in range(4)]
        ref = F.linear(x, W[s][0]).float()
        rows = []
        for cfg in [current_cfg(M, n, k)] + DOT + (GEMV if M == 1 else []):
            try:
                launch(cfg, x, W[s][0], ys[0]); torch.cuda.synchronize()
                err = ((ys[0].float() - ref).norm() / ref.norm()).item()
                if not err < 1e-2: print("WRONG", cfg, err); continue
                ms = graph_ms([lambda l=l: launch(cfg, x, W[s][l], ys[l]) for l in range(4)]) / 4
            except Exception as e:
                continue
            us = ms * 1e3; pct = 100 * n * k * 2 / (ms * 1e-3) / 1e9 / COPY
            rows.append((us, cfg, pct))
        cur = rows[0]; rows.sort(key=lambda r: r[0])
        cub = graph_ms([lambda l=l: torch.mm(x, W[s][l].t(), out=ys[l]) for l in range(4)]) / 4 * 1e3
        best[(M, s)] = rows[0][1]
        print(f"M={M:2d} {s:8s} N={n:6d} K={k:6d}: current {cur[1]} {cur[0]:.1f} us ({cur[2]:.0f}%), cuBLAS {cub:.1f} us; "
              f"best: " + "; ".join(f"{r[1]} {r[0]:.1f} ({r[2]:.0f}%)" for r in rows[:4]), flush=True)
        res.append(dict(M=M, s=s, rows=[(r[0], r[1]) for r in rows], cublas=cub))
json.dump(res, open(sys.argv[1] + "/sweep.json", "w"))
print("BEST", {f"{k[0]},{k[1]}": v for k, v in best.items()}, f"t={_t.time()-T0:.0f}s", flush=True)
del W; torch.cuda.empty_cache()

# ---- attention: lab 6's current vs lab 5's design, 4 layers' caches rotated ----
def att_cases(B, ctx=4096):
    L = ctx + 16
    qs = [torch.randn(B, 32, 1, 128, device="cuda", dtype=dt) for _ in range(4)]
    ks = [torch.randn(B, 8, L, 128, device="cuda", dtype=dt) for _ in range(4)]
    vs = [torch.randn_like(k) for k in ks]
    lens = torch.full((B,), ctx + 1, dtype=torch.int32, device="cuda")
    return qs, ks, vs, lens
for B in (1, 16):
    qs, ks, vs, lens = att_cases(B)
    kv = 2 * B * 8 * 4097 * 128 * 2
    out = []
    out.append(("lab6 current", graph_ms([lambda l=l: L6["attention"](qs[l], ks[l], vs[l], lens) for l in range(4)]) / 4))
    for sp in ((None, 8, 16, 32) if B == 1 else (None, 1, 2, 3)):
        out.append((f"lab5 splits={sp}", graph_ms([lambda l=l: L5["flash_decoding"](qs[l], ks[l], vs[l], lens, splits=sp) for l in range(4)]) / 4))
    out.append(("sdpa(no mask)", graph_ms([lambda l=l: F.scaled_dot_product_attention(qs[l], ks[l], vs[l], enable_gqa=True) for l in range(4)]) / 4))
    print(f"attention B={B} ctx 4096 (K/V {kv/1e6:.1f} MB, ideal {kv/COPY/1e3:.1f} us): " +
          "; ".join(f"{n} {ms*1e3:.1f} us" for n, ms in out), flush=True)
    del qs, ks, vs
torch.cuda.empty_cache()

# ---- lab 5, B = 1, N = 8192: graph replay over 4 rotated input sets; the bare read the same way ----
@triton.jit
def read_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0); acc = tl.zeros([BLOCK], tl.float32)
    for i in range(ITERS):
        o = (pid * ITERS + i).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(a_ptr + o, mask=o < n, other=0.0).to(tl.float32) + tl.load(b_ptr + o, mask=o < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))
sets = []
for _ in range(4):
    q = torch.randn(1, 32, 1, 128, device="cuda", dtype=dt); k = torch.randn(1, 8, 8192, 128, device="cuda", dtype=dt)
    sets.append((q, k, torch.randn_like(k)))
kvb = 2 * 8 * 8192 * 128 * 2
outb = torch.empty(8192, device="cuda")
def pct(ms): return 100 * kvb / (ms * 1e-3) / 1e9 / COPY
r = []
r.append(("lab5 solution", graph_ms([lambda s=s: L5["flash_decoding"](*s) for s in sets * 2]) / 8))
for sp in (8, 16, 32, 64):
    r.append((f"lab5 splits={sp}", graph_ms([lambda s=s: L5["flash_decoding"](*s, splits=sp) for s in sets * 2]) / 8))
r.append(("SDPA", graph_ms([lambda s=s: F.scaled_dot_product_attention(*s, enable_gqa=True) for s in sets * 2]) / 8))
n = sets[0][1].numel()
for progs, block in ((264, 4096), (528, 2048), (1056, 1024), (132, 8192), (2048, 1024)):
    iters = triton.cdiv(n, progs * block)
    r.append((f"bare read {progs}x{block}", graph_ms([lambda s=s: read_kernel[(triton.cdiv(n, iters * block),)](s[1], s[2], outb, n, BLOCK=block, ITERS=iters) for s in sets * 2]) / 8))
r.append(("do_bench lab5 (grader now)", bench.time(lambda: L5["flash_decoding"](*sets[0]))))
r.append(("do_bench SDPA", bench.time(lambda: F.scaled_dot_product_attention(*sets[0], enable_gqa=True))))
for name, ms in r:
    print(f"lab5 B=1 N=8192 {name:28s} {ms*1e3:7.1f} us  {pct(ms):5.1f} % of copy", flush=True)
print(f"done t={_t.time()-T0:.0f}s")
