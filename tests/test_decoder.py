"""course_utils.decoder, the model lab 6 and its grader share: its eager pieces against plain formulas, the
cache it writes, and the byte arithmetic behind the lab's ideal."""
import math

import torch

from course_utils import decoder


def test_attention_is_grouped_query_attention_over_the_valid_positions():
    gen = torch.Generator().manual_seed(0)
    b, h, h_kv, n, d = 2, 6, 2, 9, 8
    q, k, v = torch.randn(b, h, 1, d, generator=gen), torch.randn(b, h_kv, n, d, generator=gen), \
        torch.randn(b, h_kv, n, d, generator=gen)
    lens = torch.tensor([3, 9], dtype=torch.int32)
    out = decoder.attention(q, k, v, lens)
    for bi in range(b):
        for hi in range(h):
            kk, vv = k[bi, hi // (h // h_kv), :lens[bi]].double(), v[bi, hi // (h // h_kv), :lens[bi]].double()
            want = torch.softmax(q[bi, hi, 0].double() @ kk.T / math.sqrt(d), -1) @ vv
            assert torch.allclose(out[bi, hi, 0].double(), want, atol=1e-5)


def test_rope_scores_depend_on_the_distance_only_and_the_cache_gets_k_and_v_at_pos():
    model = decoder.Decoder(decoder.TINY, device="cpu")     # the formulas on the CPU, on a GPU machine too
    cfg = model.cfg
    cos, sin = model.rope_tables(64)
    qkv = torch.randn(1, cfg.qkv, generator=torch.Generator().manual_seed(1))
    scores = []
    for p in ([5, 3], [20, 18]):
        kc = torch.zeros(1, cfg.kv_heads, 64, cfg.head_dim)
        vc = torch.zeros_like(kc)
        q = decoder.rope_cache(qkv, cos, sin, torch.tensor([p[0]], dtype=torch.int32), kc.clone(), vc.clone())
        decoder.rope_cache(qkv, cos, sin, torch.tensor([p[1]], dtype=torch.int32), kc, vc)
        assert kc[0, :, p[1]].abs().sum() > 0 and kc[0, :, :p[1]].abs().sum() == 0
        v = qkv.view(1, -1, cfg.head_dim)[:, cfg.heads + cfg.kv_heads:]
        assert torch.equal(vc[0, :, p[1]], v[0])
        scores.append(q[0, 0, 0] @ kc[0, 0, p[1]])
    assert torch.allclose(scores[0], scores[1], atol=1e-4)       # both two positions apart


def test_greedy_advances_pos_and_the_bytes_add_up():
    model = decoder.Decoder(decoder.TINY)
    cache = model.new_cache(2, [0, 7])
    toks, logits = decoder.greedy(model, lambda m, c, t, p: m.step(t, c, p), cache, model.tokens(2), 3)
    assert toks.shape == (3, 2) and logits.shape == (3, 2, model.cfg.vocab)
    assert cache.pos.tolist() == [3, 10]
    w, kv = decoder.step_bytes(model.cfg, 2, 7, torch.float32)
    assert w == model.weight_bytes() and kv == model.kv_bytes(2, 7)
    assert decoder.step_bytes(decoder.LLAMA_8B_4_LAYERS, 1, 4096)[0] == 1_753_292_800    # 1.75 GB in bf16
