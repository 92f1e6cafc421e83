"""A small Llama-style decoder in plain PyTorch, for lab 6 (one decode step) and its grader.

    model = decoder.Decoder(decoder.config(), dtype=torch.bfloat16)   # random weights, a fixed seed
    cache = model.new_cache(batch=1, context=4096)                    # K and V of 4,096 earlier tokens
    logits = model.step(tokens, cache, cache.pos)                     # one token per sequence
    logits = model.step(tokens, cache, cache.pos, ops=mine)           # the same step, your pieces in it

One step, per layer: add + RMSNorm, one fused QKV projection, RoPE on q and k with K and V written
into the cache, grouped-query attention over the cache, the output projection, add + RMSNorm, one fused
gate-and-up projection, SwiGLU, the down projection; then a last add + RMSNorm and a small vocabulary
head. Each piece is a field of `Ops`, so a kernel can replace one piece and leave the rest as it was.

The cache holds random K and V for the context (a decode step reads them like any others): the lab is
about the step, not about a prefill."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import torch
import torch.nn.functional as F

from .environment import DEVICE, pick

__all__ = ["Config", "LLAMA_8B_4_LAYERS", "TINY", "config", "Cache", "Ops", "EAGER", "Decoder", "step_bytes", "with_ops", "greedy"]


@dataclass(frozen=True)
class Config:
    layers: int
    hidden: int
    heads: int           # query heads
    kv_heads: int        # key/value heads: query head h reads KV head h // (heads // kv_heads)
    head_dim: int
    mlp: int             # SwiGLU's inner width
    vocab: int           # a small vocabulary head: enough to pick greedy tokens
    eps: float = 1e-5
    rope_base: float = 500000.0

    @property
    def qkv(self) -> int:
        return (self.heads + 2 * self.kv_heads) * self.head_dim


# An 8B-class Llama (Llama 3 8B's widths), four of its 32 layers, and a vocabulary head of 1,024 words.
LLAMA_8B_4_LAYERS = Config(layers=4, hidden=4096, heads=32, kv_heads=8, head_dim=128, mlp=14336, vocab=1024)
# What the interpreter runs. eps is larger than Llama's 1e-5, so that where it sits in RMSNorm shows.
TINY = Config(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, mlp=96, vocab=61, eps=1e-3)


def config() -> Config:
    """The 8B-class shape on a GPU, TINY on the interpreter."""
    return pick(gpu=LLAMA_8B_4_LAYERS, cpu=TINY)


@dataclass
class Cache:
    """Per layer K and V of shape (B, kv_heads, length, head_dim); pos (B,) int32: the position the next
    token of each sequence takes, which is also how many tokens of it the cache holds."""
    k: list
    v: list
    pos: torch.Tensor

    def clone(self) -> "Cache":
        return Cache([t.clone() for t in self.k], [t.clone() for t in self.v], self.pos.clone())


# --- the pieces, in plain PyTorch ------------------------------------------------------------------
def add_rmsnorm(x, residual, weight, eps):
    """(RMSNorm(x + residual) · weight, x + residual); residual None: nothing to add. x (M, hidden)."""
    r = x if residual is None else x + residual
    f = r.float()
    y = f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float()).to(x.dtype), r


def linear(x, w):
    """x (M, K) @ w (N, K)ᵀ -> (M, N), x's dtype."""
    return F.linear(x, w)


def rope_cache(qkv, cos, sin, pos, k_cache, v_cache):
    """Split the fused projection qkv (B, (H + 2·H_kv)·D) into q, k, v; rotate q and k by the angles of
    position pos[b] (cos, sin: (length, D/2) fp32 tables; the two halves of a head are the pair);
    write k and v into the caches at pos[b]; return q, rotated, as (B, H, 1, D)."""
    b, h_kv, _, d = k_cache.shape
    q, k, v = qkv.view(b, -1, d).split([qkv.shape[1] // d - 2 * h_kv, h_kv, h_kv], dim=1)
    c, s = cos[pos.long()][:, None, :], sin[pos.long()][:, None, :]     # (B, 1, D/2)

    def rotate(t):
        t1, t2 = t.float().chunk(2, dim=-1)
        return torch.cat([t1 * c - t2 * s, t2 * c + t1 * s], dim=-1).to(t.dtype)

    rows = torch.arange(b, device=qkv.device)
    k_cache[rows, :, pos.long()] = rotate(k)
    v_cache[rows, :, pos.long()] = v
    return rotate(q)[:, :, None, :]


def attention(q, k_cache, v_cache, seq_lens):
    """Grouped-query attention of q (B, H, 1, D) over the first seq_lens[b] positions of the caches."""
    valid = torch.arange(k_cache.shape[2], device=q.device)[None, :] < seq_lens.long()[:, None]
    return F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=valid[:, None, None, :], enable_gqa=True)


def swiglu(gate_up):
    """silu(gate) · up, gate and up the two halves of gate_up (M, 2·mlp) -> (M, mlp)."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


@dataclass(frozen=True)
class Ops:
    """The pieces of a step; replace any of them with `dataclasses.replace(EAGER, swiglu=mine)`."""
    add_rmsnorm: Callable = add_rmsnorm
    linear: Callable = linear
    rope_cache: Callable = rope_cache
    attention: Callable = attention
    swiglu: Callable = swiglu


EAGER = Ops()


class Decoder:
    """Random weights (seed 0), scaled as a trained model's are: 1/√fan_in for projections, small embeddings."""

    def __init__(self, cfg: Config | None = None, *, dtype=torch.float32, device=None, seed: int = 0):
        self.cfg = cfg = cfg or config()
        self.dtype, self.device = dtype, device or DEVICE
        gen = torch.Generator(device=self.device).manual_seed(seed)   # drawn where they live (GBs on a GPU)

        def w(*shape, scale=None):
            t = torch.randn(*shape, generator=gen, device=self.device, dtype=dtype)
            return t.mul_(scale if scale is not None else shape[-1] ** -0.5)

        def norm():
            return (1 + 0.1 * torch.randn(cfg.hidden, generator=gen, device=self.device)).to(dtype)

        self.embed = w(cfg.vocab, cfg.hidden, scale=0.02)
        self.layers = [dict(norm1=norm(), wqkv=w(cfg.qkv, cfg.hidden), wo=w(cfg.hidden, cfg.heads * cfg.head_dim),
                            norm2=norm(), w_gate_up=w(2 * cfg.mlp, cfg.hidden), w_down=w(cfg.hidden, cfg.mlp))
                       for _ in range(cfg.layers)]
        self.final_norm = norm()
        self.head = w(cfg.vocab, cfg.hidden, scale=2 * cfg.hidden ** -0.5)   # logits spread over a few units
        self._tables = {}

    def rope_tables(self, length: int):
        """cos and sin, (length, head_dim / 2) fp32: position p, frequency i turns by p · base^(-2i/D)."""
        if length not in self._tables:
            d = self.cfg.head_dim
            freq = self.cfg.rope_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
            angle = torch.arange(length, dtype=torch.float64)[:, None] * freq[None, :]
            self._tables[length] = (angle.cos().float().to(self.device), angle.sin().float().to(self.device))
        return self._tables[length]

    def new_cache(self, batch: int, context, *, room: int = 16, seed: int = 1) -> Cache:
        """A cache for `batch` sequences that already hold `context` tokens (an int, or a list per sequence),
        with `room` more positions; the held K and V are random (fixed seed), the rest zero."""
        cfg = self.cfg
        lens = [context] * batch if isinstance(context, int) else list(context)
        length = max(lens) + room
        gen = torch.Generator(device=self.device).manual_seed(seed)
        k, v = [], []
        for _ in range(cfg.layers):
            for out in (k, v):
                t = torch.zeros(batch, cfg.kv_heads, length, cfg.head_dim, dtype=self.dtype, device=self.device)
                for b, n in enumerate(lens):
                    t[b, :, :n] = torch.randn(cfg.kv_heads, n, cfg.head_dim, generator=gen, device=self.device)
                out.append(t)
        return Cache(k, v, torch.tensor(lens, dtype=torch.int32, device=self.device))

    def tokens(self, batch: int, seed: int = 2) -> torch.Tensor:
        gen = torch.Generator(device=self.device).manual_seed(seed)
        return torch.randint(0, self.cfg.vocab, (batch,), generator=gen, device=self.device)

    def step(self, tokens, cache: Cache, pos, ops: Ops = EAGER):
        """One decode step: tokens (B,) int64 at positions pos (B,) int32 -> logits (B, vocab) fp32. Writes
        the new K and V into the cache at pos; pos itself is left for the caller to advance."""
        cfg = self.cfg
        cos, sin = self.rope_tables(cache.k[0].shape[2])
        x, res = self.embed[tokens], None
        b, seq_lens = x.shape[0], pos + 1
        for i, p in enumerate(self.layers):
            h, res = ops.add_rmsnorm(x, res, p["norm1"], cfg.eps)
            q = ops.rope_cache(ops.linear(h, p["wqkv"]), cos, sin, pos, cache.k[i], cache.v[i])
            o = ops.attention(q, cache.k[i], cache.v[i], seq_lens)
            x = ops.linear(o.reshape(b, cfg.heads * cfg.head_dim), p["wo"])
            h, res = ops.add_rmsnorm(x, res, p["norm2"], cfg.eps)
            x = ops.linear(ops.swiglu(ops.linear(h, p["w_gate_up"])), p["w_down"])
        h, _ = ops.add_rmsnorm(x, res, self.final_norm, cfg.eps)
        return ops.linear(h, self.head).float()

    # --- what one step must move ----------------------------------------------------------------
    def weight_bytes(self) -> int:
        """Every weight a step reads: the projections, the norms and the head (the embedding: B rows)."""
        ts = [t for p in self.layers for t in p.values()] + [self.final_norm, self.head]
        return sum(t.numel() * t.element_size() for t in ts)

    def kv_bytes(self, batch: int, context: int) -> int:
        """K and V of `context` + 1 tokens per sequence (the new one too), read by every layer."""
        c = self.cfg
        return 2 * c.layers * batch * c.kv_heads * (context + 1) * c.head_dim * self.dtype.itemsize

    def ideal_ms(self, batch: int, context: int, copy_gbps: float) -> float:
        """(weight bytes + KV bytes) / the copy bandwidth: no step can be faster."""
        return (self.weight_bytes() + self.kv_bytes(batch, context)) / (copy_gbps * 1e6)


def step_bytes(cfg: Config, batch: int, context: int, dtype=torch.bfloat16) -> tuple[int, int]:
    """(weight bytes, KV bytes) of one step of cfg, by arithmetic alone (nothing allocated)."""
    s = dtype.itemsize
    per_layer = (cfg.qkv * cfg.hidden + cfg.hidden * cfg.heads * cfg.head_dim + 3 * cfg.mlp * cfg.hidden
                 + 2 * cfg.hidden)
    weights = (cfg.layers * per_layer + cfg.hidden + cfg.vocab * cfg.hidden) * s
    kv = 2 * cfg.layers * batch * cfg.kv_heads * (context + 1) * cfg.head_dim * s
    return weights, kv


def with_ops(**pieces) -> Ops:
    """EAGER with the given pieces replaced: with_ops(swiglu=mine)."""
    return replace(EAGER, **pieces)


def greedy(model: Decoder, step, cache: Cache, tokens, steps: int):
    """Run `steps` steps of step(model, cache, tokens, pos), each fed the argmax of the last: (tokens
    (steps, B), logits (steps, B, vocab)). Advances cache.pos."""
    toks, logits = [], []
    for _ in range(steps):
        out = step(model, cache, tokens, cache.pos).float().clone()
        logits.append(out)
        tokens = out.argmax(-1)
        toks.append(tokens)
        cache.pos += 1
    return torch.stack(toks), torch.stack(logits)

