"""Lab 6's grader: one decode step of course_utils.decoder's Llama-style model, with the student's kernels.

    logits = fn(model, cache, tokens, pos)
    model a decoder.Decoder; cache a decoder.Cache; tokens (B,) int64; pos (B,) int32, the position each
    new token takes. Writes the token's K and V into the cache at pos and returns logits (B, vocab) fp32,
    those of model.step(tokens, cache, pos), the eager step.

Each step is compared with the eager step from the same cache and tokens (the eager step's greedy token
feeds the next), over several steps and ragged contexts. At the first step that differs, the grader
computes the eager step with one realistic mistake at a time (the cache not written, RoPE's position off
by one, the GQA head mapping, RMSNorm's eps outside the root, the residual dropped) from the state before
that step, and names the one that matches.

On a GPU it then times the step at B = 1 and 16 (context 4,096, the 8B-class shape) against the eager step
compiled with torch.compile(mode="reduce-overhead"), timed in turn with it in the same call: the targets are
ratios to that rival's time (course_utils/targets.py), never a time or a share tuned on one card."""
from __future__ import annotations

import functools

import torch

from .. import bench, capability, decoder, timeline, trips
from ..check._core import compare, fail, listed, run
from ..environment import INTERPRET, ON_GPU
from ..targets import DECODE_RIVAL, TARGETS
from ._card import Scorecard

__all__ = ["decode_step"]

HINTS = "lab6.decode_step"
CONTEXTS = [0, 37, 70]          # tokens already in the cache per sequence: one sequence starts empty
STEPS = 3                        # compared step by step
GREEDY_STEPS = 5                 # free-running, each step fed its own argmax
# Targets: course_utils/targets.py ("lab6.b1", "lab6.b16"): ratios to the eager step compiled with
# torch.compile(mode="reduce-overhead") (its CUDA graphs), timed beside the student's step in the same call. A share
# of the ideal step was the bar before, and the compiled step alone met it (H100: 75 % at B = 1, 83 % at B = 16).
PERF = [(1, 4096, "lab6.b1"), (16, 4096, "lab6.b16")]
RIVAL = DECODE_RIVAL
TIMING_ROUNDS = 3                # each step timed this many times, in turn with the other; the median kept
KERNELS_PER_LAYER = 12           # one kernel per piece leaves room for two more a layer
_SLOW = ("Likely causes: projections that stream their weights below the copy ceiling at tiny M (the weights are "
         "nearly all the bytes: does one program own a slice of the output columns, and are there programs for "
         "every SM?), idle gaps between kernels (is the step captured in a CUDA graph?), or attention that leaves "
         "SMs idle at B = 1 (lab 5's split). torch.compile fuses the small pieces and replays a graph too, so what is "
         "left to win is how close each of your kernels streams its bytes to the copy ceiling: the notebook's Measure "
         "section times each kind of kernel.")


def _tol(dtype):
    if dtype == torch.float32:
        return dict(atol=1e-4, rtol=1e-4) if not ON_GPU or INTERPRET else dict(atol=2e-2, rtol=2e-2)  # tf32
    return dict(atol=6e-2, rtol=6e-2) if dtype == torch.float16 else dict(atol=2e-1, rtol=1e-1)


# --- the mistakes, as pieces of the eager step --------------------------------------------------------
def _norm_eps_outside(x, residual, weight, eps):
    r = x if residual is None else x + residual
    f = r.float()
    return (f / (f.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight.float()).to(x.dtype), r


def _norm_residual_dropped(x, residual, weight, eps):
    return decoder.add_rmsnorm(x, residual, weight, eps)[0], x


def _rope_shifted(shift):
    """The eager RoPE at the angles of position pos + shift (the cache slot stays pos[b])."""
    def rope(qkv, cos, sin, pos, k_cache, v_cache):
        at = (torch.arange(cos.shape[0], device=cos.device) + shift).clamp(0, cos.shape[0] - 1)
        return decoder.rope_cache(qkv, cos[at], sin[at], pos, k_cache, v_cache)
    return rope


def _rope_no_write(qkv, cos, sin, pos, k_cache, v_cache):
    return decoder.rope_cache(qkv, cos, sin, pos, k_cache.clone(), v_cache.clone())


def _attention_heads(how):
    def attention(q, k, v, seq_lens):
        h, h_kv = q.shape[1], k.shape[1]
        heads = torch.arange(h, device=q.device)
        idx = (heads % h_kv if how == "modulo" else (heads // h_kv).clamp(max=h_kv - 1))
        valid = torch.arange(k.shape[2], device=q.device)[None, :] < seq_lens.long()[:, None]
        return torch.nn.functional.scaled_dot_product_attention(q, k[:, idx], v[:, idx],
                                                                attn_mask=valid[:, None, None, :])
    return attention


LOW_CONTEXTS = [3, 50]           # the fp16 (bf16) batch
GREEDY_CONTEXTS = [5, 60]        # the greedy run's batch, and the one whose kernels are counted


# What the grader tries, named as the contract names it (tests/test_contracts.py): (name, what it is)
CASES = (
    (f"B = {len(CONTEXTS)}, contexts {listed(CONTEXTS)}", "fp32, the tiny model: one sequence starts empty"),
    (f"B = {len(LOW_CONTEXTS)}, contexts {listed(LOW_CONTEXTS)}", "fp16, bf16 on a GPU whose Triton has it"),
    (f"{STEPS} steps compared one by one", "the logits of each step, and K and V written at pos"),
    (f"{GREEDY_STEPS} greedy steps", f"B = {len(GREEDY_CONTEXTS)}, contexts {listed(GREEDY_CONTEXTS)}, each step "
                                     "fed its own argmax: the same tokens as the eager step"),
    ("kernels per step", f"B = {len(GREEDY_CONTEXTS)}, contexts {listed(GREEDY_CONTEXTS)}: at most "
                         f"{KERNELS_PER_LAYER} a layer + 4"),
)


MISTAKES = [
    (dict(rope_cache=_rope_no_write), "cache",
     "the new token's K and V never reach the cache: attention at position pos reads whatever the slot held "
     "before (zeros here). Write K (after RoPE) and V into the cache at pos[b] before attention reads it."),
    (dict(rope_cache=_rope_shifted(1)), "rope",
     "RoPE turns q and k by the angle of position pos + 1. The new token's position is pos[b] (the count of "
     "tokens before it): the first token of a sequence sits at position 0, unrotated."),
    (dict(rope_cache=_rope_shifted(-1)), "rope",
     "RoPE turns q and k by the angle of position pos − 1: the new token's position is pos[b] itself."),
    (dict(attention=_attention_heads("modulo")), "gqa",
     "query head h reads KV head h % H_kv: the heads are interleaved. The query heads that share a KV head are "
     "neighbours: h reads KV head h // (H / H_kv)."),
    (dict(attention=_attention_heads("divide")), "gqa",
     "query head h reads KV head h // H_kv; the group size is H / H_kv, so h reads KV head h // (H / H_kv)."),
    (dict(add_rmsnorm=_norm_eps_outside), "eps",
     "RMSNorm divides by √(mean(x²)) + eps: eps belongs inside the root, x / √(mean(x²) + eps)."),
    (dict(add_rmsnorm=_norm_residual_dropped), "residual",
     "the residual stream is dropped: add + RMSNorm hands on x, the branch's output, instead of x + residual, so "
     "each layer forgets everything before it. The second output is the sum, the new residual."),
]


def _wrong(model, before, tokens, pos):
    for pieces, key, message in MISTAKES:
        yield model.step(tokens, before.clone(), pos, ops=decoder.with_ops(**pieces)), message, key


def _call(card, fn, model, cache, tokens, pos, name):
    out = card.call(fn, model, cache, tokens, pos.clone(), name=name)
    if isinstance(out, torch.Tensor):
        out = out.clone()             # a graph's output buffer is overwritten by the next replay
    return out


def _steps(card, fn, name, model, contexts, steps):
    """Step fn and the eager step side by side, each from its own cache; fail at the first step that differs."""
    mine = model.new_cache(len(contexts), contexts)
    ref = mine.clone()
    tokens = model.tokens(len(contexts))
    for i in range(steps):
        before = ref.clone()
        want = model.step(tokens, ref, ref.pos)
        got = _call(card, fn, model, mine, tokens, mine.pos, name)
        what = f"{name}, step {i + 1} of {steps}, {str(model.dtype)[6:]}, contexts {mine.pos.tolist()}"
        compare(got, want, name=what, tol=_tol(model.dtype),
                wrong_answers=_wrong(model, before, tokens, before.pos) if isinstance(got, torch.Tensor)
                and got.shape == want.shape else ())
        rows = torch.arange(len(contexts), device=ref.pos.device)
        for layer, (k_ref, k_mine) in enumerate(zip(ref.k + ref.v, mine.k + mine.v)):
            slot_ref, slot_mine = k_ref[rows, :, ref.pos.long()], k_mine[rows, :, mine.pos.long()]
            if not torch.allclose(slot_mine.double(), slot_ref.double(), **_tol(model.dtype)):
                kv = "K" if layer < len(ref.k) else "V"
                fail(f"{what}: the logits are right, but layer {layer % len(ref.k)}'s {kv} of the new token is not in "
                     "the cache at pos[b] after the step" + (" (the slot is still zero)" if not bool(slot_mine.any())
                                                             else "") +
                     ". The next step's attention reads it from there: write K (after RoPE) and V at pos[b].", "cache")
        tokens = want.argmax(-1)
        ref.pos += 1
        mine.pos += 1


def _greedy(card, fn, name, model, steps):
    start = model.new_cache(len(GREEDY_CONTEXTS), GREEDY_CONTEXTS)
    tokens = model.tokens(len(GREEDY_CONTEXTS), seed=3)
    want_toks, want_logits = decoder.greedy(model, lambda m, c, t, p: m.step(t, c, p), start.clone(), tokens, steps)
    got_toks, _ = decoder.greedy(model, lambda m, c, t, p: _call(card, fn, m, c, t, p, name), start.clone(), tokens,
                                 steps)
    same = got_toks == want_toks
    if not bool(same.all()):
        i, b = (int(x) for x in torch.nonzero(~same)[0])
        top = want_logits[i, b].topk(2).values
        gap = float(top[0] - top[1])
        tol = _tol(model.dtype)["atol"] * 2
        if gap < tol:    # a tie within the tolerance: the eager step itself could have gone either way
            card.measured(f"{steps} steps; step {i + 1} of sequence {b}: a near tie (top two {gap:.2g} apart)")
            return
        fail(f"greedy decoding parts from the eager step at step {i + 1}, sequence {b}: yours picked token "
             f"{int(got_toks[i, b])}, the eager step {int(want_toks[i, b])} (its top two logits {gap:.3g} apart). "
             "Steps that match one at a time but not in a row: does each step leave the cache as the next expects?",
             "cache")
    card.measured(f"{steps} steps × 2 sequences, identical")


def _kernels(card, fn, name, model):
    cache = model.new_cache(len(GREEDY_CONTEXTS), GREEDY_CONTEXTS)
    tokens = model.tokens(len(GREEDY_CONTEXTS))
    budget = KERNELS_PER_LAYER * model.cfg.layers + 4
    with card.criterion("kernels per step", target=f"≤ {budget} ({KERNELS_PER_LAYER} a layer + 4)"):
        if ON_GPU and not INTERPRET:      # a CUDA graph's kernels are seen by the profiler, not by trips
            n = timeline.record(lambda: fn(model, cache, tokens, cache.pos)).count
            eager = timeline.record(lambda: model.step(tokens, cache, cache.pos)).count
        else:
            n = trips.count(run, fn, model, cache, tokens, cache.pos, name=name, poison=False).launches
            eager = trips.count(model.step, tokens, cache, cache.pos).launches
        card.measured(f"{n} kernels (eager: {eager}), {model.cfg.layers} layers")
        if n > budget:
            fail(f"{n} kernels per step for {model.cfg.layers} layers, the eager step {eager}: each piece should be one "
                 "kernel of yours (add + RMSNorm, a projection, RoPE with the cache write, attention, SwiGLU). Every "
                 "extra launch is a gap on the GPU at B = 1.", "launches")


def _low_precision(card, fn, name):
    low = capability.plan().low_dtype(bf16=True)
    with card.criterion(f"{str(low)[6:]}: matches the eager step, B = 2, {STEPS} steps",
                        target=f"logits rtol {_tol(low)['rtol']:g}"):
        _steps(card, fn, name, decoder.Decoder(decoder.TINY, dtype=low), LOW_CONTEXTS, STEPS)
        card.measured(f"{STEPS} steps")


def _greedy_row(card, fn, name, model):
    with card.criterion(f"greedy tokens identical to the eager step's, {GREEDY_STEPS} steps",
                        target="the same tokens"):
        _greedy(card, fn, name, model, GREEDY_STEPS)


@functools.lru_cache(maxsize=1)
def _big_model(dtype):
    return decoder.Decoder(decoder.LLAMA_8B_4_LAYERS, dtype=dtype)


@functools.lru_cache(maxsize=len(PERF))
def _big_cache(dtype, b, context):
    # kept: the same cache at the same address on every grade, so neither your graph nor the rival's is captured again
    return _big_model(dtype).new_cache(b, context)


@functools.lru_cache(maxsize=1)
def _rival(dtype):
    """The eager step compiled with mode="reduce-overhead", its weights marked as static addresses (each cache is
    marked where it is timed). Without the marks Inductor skips its CUDA graphs ("mutated inputs": the step writes
    the cache) or copies every weight into the graph's buffers before each replay. The same call as the notebook's
    Measure cell makes, so that where mark_static_address guards no address (torch 2.13's default, read in its
    source) the code compiled there serves here and only the graph is recorded again for the new addresses;
    elsewhere Dynamo compiles the step once more, which costs seconds, not a different verdict."""
    import torch._dynamo   # here, not at import: Dynamo takes seconds to import
    model = _big_model(dtype)
    for t in [t for p in model.layers for t in p.values()] + [model.embed, model.final_norm, model.head]:
        torch._dynamo.mark_static_address(t)
    return torch.compile(model.step, mode="reduce-overhead", dynamic=False)


class _NoRival(Exception):
    """torch.compile could not compile or run the eager step here: there is nothing to judge against."""


def _time_both(fn, b, context, dtype):
    """(your ms, the rival's ms, the ideal ms) a step at batch b: both launched from Python as a caller would, each
    called three times first (compiling, tuning, capturing), then timed TIMING_ROUNDS times in turn (medians)."""
    import torch._dynamo
    model, cache = _big_model(dtype), _big_cache(dtype, b, context)
    tokens = model.tokens(b)
    model.rope_tables(cache.k[0].shape[2])       # made before the compile, as the notebook makes them
    for t in cache.k + cache.v:
        torch._dynamo.mark_static_address(t)
    rival = _rival(dtype)

    def yours():
        return fn(model, cache, tokens, cache.pos)

    def compiled():
        return rival(tokens, cache, cache.pos)
    for _ in range(3):
        yours()                                   # a crash here is yours: the row says where
    try:
        for _ in range(3):
            compiled()
        torch.cuda.synchronize()
    except Exception as e:   # noqa: BLE001 (a compiler that fails on this machine is no verdict on the student)
        raise _NoRival(f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}") from e
    ms = bench.interleaved({"yours": yours, RIVAL: compiled}, rounds=TIMING_ROUNDS, rep=50)
    if isinstance(ms["yours"], Exception):
        raise ms["yours"]
    if isinstance(ms[RIVAL], Exception):
        raise _NoRival(f"{type(ms[RIVAL]).__name__}: {ms[RIVAL]}")
    return ms["yours"], ms[RIVAL], model.ideal_ms(b, context, bench.ceilings().copy_gbps)


def _performance(card, fn, name):
    dtype = capability.plan().low_dtype(bf16=True)
    for b, context, target in PERF:
        label = f"B = {b}, context {context:,}, 8B-class, 4 layers, {str(dtype)[6:]}: against {RIVAL}"
        if not ON_GPU or INTERPRET:
            card.against(label, TARGETS[target], None)
            continue

        def measure(b=b, context=context):
            try:
                mine, rival, ideal = _time_both(fn, b, context, dtype)
            except _NoRival as e:
                card.not_measured(f"{RIVAL} failed on this machine ({e}), so there is no rival to time yours against")
            return mine, rival, ideal / rival, (f"of the ideal step ({_us(ideal)}: weights and cache at the copy ceiling): "
                                                f"yours {ideal / mine:.0%}, torch.compile's {ideal / rival:.0%}")
        card.against(label, TARGETS[target], measure, diagnosis=_SLOW)
    if ON_GPU and not INTERPRET:
        torch.cuda.empty_cache()


def _us(ms):
    return f"{ms * 1e3:,.0f} µs"


def decode_step(fn):
    """Grade fn(model, cache, tokens, pos) -> logits, one decode step with your kernels."""
    name = getattr(fn, "__name__", "decode_step")
    card = Scorecard("Lab 6 · one decode step", note="the eager step's logits and tokens, fewer kernels, ahead "
                     "of torch.compile's CUDA graphs", hints=HINTS)
    with card.criterion(f"fp32: matches the eager step, B = 3, contexts {CONTEXTS}, {STEPS} steps",
                        target=f"logits rtol {_tol(torch.float32)['rtol']:g}; the cache written"):
        _steps(card, fn, name, decoder.Decoder(decoder.TINY, dtype=torch.float32), CONTEXTS, STEPS)
        card.measured(f"{STEPS} steps")
    _low_precision(card, fn, name)
    model = decoder.Decoder(decoder.TINY, dtype=torch.float32)
    _greedy_row(card, fn, name, model)
    _kernels(card, fn, name, model)
    _performance(card, fn, name)
    return card.finish()

