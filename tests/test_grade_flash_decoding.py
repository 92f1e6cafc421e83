"""grade.flash_decoding passes a right kernel and rejects the stub and realistic wrong ones,
each with its own diagnosis on the scorecard, which names the lab's hint that addresses it.

The wrong answers run on a lean card (one ragged batch, the rows that can see the mistake) to keep the
interpreter's time in seconds; the right ones and the stub get the whole card."""
import importlib
import re
from pathlib import Path

import pytest
import torch

from course_utils import grade
from course_utils.grade._card import FAILED, PASSED
import lab_kernels_5 as k

fdg = importlib.import_module("course_utils.grade.flash_decoding")   # grade.flash_decoding is the grader itself

# two sequences (seq_lens 1 and N), GQA 4 with two KV heads, N = 201: odd, so that N // splits drops keys
LEAN = [(2, 8, 2, 201, 64, "ragged")]


@pytest.fixture
def lean(monkeypatch):
    monkeypatch.setattr(fdg, "_SHAPES", LEAN)
    monkeypatch.setattr(fdg, "_FP32_SHAPES", [])


@pytest.fixture
def no_counts(monkeypatch):
    monkeypatch.setattr(fdg, "_budget", lambda *a: None)
    monkeypatch.setattr(fdg, "_no_scores", lambda *a: None)


def _card_of(fn):
    with pytest.raises(grade.GradeFailed) as e:
        grade.flash_decoding(fn)
    return e.value.card


# fd_zeroed_partials: one more write of the partial results, inside the slack; fd_lens_values_refused: a
# refusal of seq_lens values outside 1 … N, which the contract leaves to the caller and the grader never tries
@pytest.mark.parametrize("right", [k.flash_decoding, k.fd_zeroed_partials, k.fd_lens_values_refused])
def test_accepts_correct_kernels(right, monkeypatch):
    # right, but not tuned for speed: the notebook's grade cell times the solution on a GPU (as for lab 6)
    monkeypatch.setattr(fdg, "_performance", lambda *a: None)
    g = grade.flash_decoding(right)
    assert all(r.status != FAILED for r in g.card.rows)
    assert sum(r.status == PASSED for r in g.card.rows) >= 6
    assert "✓" in repr(g)


def test_the_stub_fails_every_row_and_points_to_hint_1(capsys):
    card = _card_of(k.flash_decoding_stub)
    out = capsys.readouterr().out
    judged = [r for r in card.rows if r.status != "not measured"]
    assert judged and all(r.status == FAILED for r in judged)
    assert "still the stub" in out
    assert re.search(r"See hint 1 \(", card.rows[0].diagnosis), card.rows[0].diagnosis


@pytest.mark.parametrize("wrong, row, message, hint", [
    (k.fd_merge_no_rescale, "seq_lens ragged", r"merged without rescaling them to one common maximum", 1),
    (k.fd_lens_ignored, "seq_lens ragged", r"seq_lens is ignored: every key of the cache is attended to", 2),
    (k.fd_heads_interleaved, "seq_lens ragged", r"query head h reads KV head h % H_kv: the heads are interleaved", 2),
    (k.fd_remainder_dropped, "seq_lens ragged", r"the first 200 of its 201 keys\). The keys past the last whole split", 1),
    (k.fd_loop_no_rescale, "seq_lens ragged", r"inside a split, the running sum and output are not rescaled", 1),
    (k.fd_no_scale, "seq_lens ragged", r"the scores are not scaled: softmax\(q·kᵀ / √D\) divides them by √D = 8", 2),
    (k.fd_empty_split_nan, "seq_lens ragged", r"With seq_lens=None the same cache gives no NaN.*partial output 0 / 0", 2),
])
def test_rejects_with_its_diagnosis_and_hint(wrong, row, message, hint, lean, no_counts):
    card = _card_of(wrong)
    failed = [r for r in card.rows if r.status == FAILED]
    assert failed and all(row in r.name or r.name[:4] in ("fp16", "fp32", "bf16") for r in failed), card.text()
    diag = next(r.diagnosis for r in card.rows if row in r.name)
    assert re.search(message, diag, re.S), diag
    assert f"See hint {hint} (" in diag, diag


@pytest.mark.parametrize("wrong, row, message", [
    (k.fd_repeat_kv, "bytes", r"about another copy of K and V.*repeat_interleave"),
    # right numbers, each K and V tile loaded by each of the 4 query heads that share it: a new user's trial
    # passed this before the budget counted every load as issued
    (k.flash_decoding_per_head, "bytes", r"loaded more than once, about 4\.0 times K and V\. Here G = H / H_kv = 4"),
    (k.fd_scores_in_memory, "no N-sized", r"grows with N: the scores"),
    (k.fd_sdpa, "bytes", r"no Triton kernel ran"),
    (k.fd_unchecked, "bad input", r"accepted H = 6 query heads for H_kv = 4"),
])
def test_rejects_traffic_and_contract_mistakes(wrong, row, message, lean):
    card = _card_of(wrong)
    diag = next(r.diagnosis for r in card.rows if r.name.startswith(row) or row in r.name)
    assert re.search(message, diag, re.S), card.text()


def test_a_q_read_as_if_contiguous_is_named(monkeypatch, no_counts):
    monkeypatch.setattr(fdg, "_SHAPES", [(2, 8, 2, 70, 64, None)])
    monkeypatch.setattr(fdg, "_FP32_SHAPES", [])
    card = _card_of(k.fd_q_strides_ignored)
    row = next(r for r in card.rows if r.status == FAILED)
    assert row.name.startswith("fp16") and fdg.STRIDED_Q in row.name, card.text()
    assert "q not contiguous" in row.diagnosis and "Index q with its strides" in row.diagnosis, row.diagnosis


def test_the_slack_takes_one_more_write_of_the_partials_and_no_scores():
    b, h, h_kv, n, d = fdg.SCORES_SHAPE
    budget, limit = fdg.write_budget(b, h, h_kv, n, d)
    partial = fdg.max_splits(n) * b * h * (d + 2) * 4
    assert budget + partial <= limit < budget + partial + 0.05 * budget
    # one split, no partial results, but the scores in fp16: over the limit all the same
    assert b * h * d * 2 + 2 * b * h * n > limit
    full, limit = fdg.byte_budget(*fdg.BUDGET_SHAPE)[:2]
    assert full + fdg.max_splits(fdg.BUDGET_SHAPE[3]) * 8 * 66 * 4 <= limit


def test_bad_calls_and_a_crash_are_rows_not_exceptions(lean, no_counts):
    def crashes(q, k_, v, seq_lens=None):
        raise RuntimeError("boom")
    card = _card_of(crashes)
    first = next(r for r in card.rows if r.status == FAILED)
    assert "raised RuntimeError: boom" in first.diagnosis, card.text()
    assert "See hint" not in first.diagnosis        # an unrecognised crash: no hint was written for it
    # nor is it a refusal of bad input: only the ValueError the contract asks for is one. The bad-input row is
    # judged alone too, since on a GPU the card above ends before it (below)
    alone = grade.Scorecard("bad input alone", hints=fdg.HINTS, performance=False)
    with alone.criterion("bad input is refused with a ValueError that says why"):
        fdg._bad_inputs(alone, crashes, "crashes")
    for bad in alone.rows + [r for r in card.rows if r.name.startswith("bad input")]:
        assert bad.status == FAILED and re.search(r"given H = 6 query heads for H_kv = 4: crashed: RuntimeError: "
                                                   r"boom", bad.diagnosis), bad.diagnosis
        assert "See hint" not in bad.diagnosis and "edges of the contract" not in bad.diagnosis, bad.diagnosis
    if fdg.ON_GPU and not fdg.INTERPRET:
        # the crash failed the case replayed in the bounds-checked interpreter, and nothing of a kernel that was never
        # checked runs on the GPU (an access outside a tensor there breaks the CUDA context): the card ends there
        assert [r.name for r in card.rows] == ["loads and stores stay inside the tensors (one case replayed in the "
                                               "interpreter)"], card.text()
    else:
        assert any(r.name.startswith("bad input") for r in card.rows), card.text()
        assert any(r.status == "not measured" for r in card.rows)


def test_a_scorecard_with_hints_names_the_hint_of_a_diagnosis_key():
    from course_utils.check import CheckFailed
    from course_utils.grade import Scorecard
    card = Scorecard("t", hints="lab5.flash_decoding", performance=False)
    for key in ("gqa", "no-such-key", None):
        with card.criterion(f"row {key}"):
            raise CheckFailed("wrong", key)
    first, unknown, none = (r.diagnosis for r in card.rows)
    assert first.startswith("wrong\nSee hint 2 (") and "cu.hints.show('lab5.flash_decoding', 2)" in first
    assert unknown == "wrong" and none == "wrong"
    plain = Scorecard("t", performance=False)            # without hints=: the diagnosis as it was
    with plain.criterion("row"):
        raise CheckFailed("wrong", "gqa")
    assert plain.rows[0].diagnosis == "wrong"


def test_the_measure_text_says_what_the_cpu_model_charges():
    """On a CPU the Measure table is bench's model; its text names what the model charges at the hook's
    size (the bytes of K and V at the datasheet bandwidth, a fixed cost a launch) and where a two-launch split
    design lands against SDPA's one launch of the same bytes. Those figures come from the model, not from a run."""
    import json
    from course_utils import bench
    cells = json.loads((Path(__file__).resolve().parent.parent / "solutions" / "labs" /
                        "lab5_flash_decoding.ipynb").read_text())["cells"]
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").replace("\n", " ")
    said = re.search(r"the bytes take the model about (\d+) µs and each launch adds (\d+) µs, so a two-launch "
                     r"design lands near ([\d.]+)×", text)
    assert said, "lab 5's Measure text no longer says what the CPU model charges"
    kv = 2 * 1 * 8 * 8192 * 128 * 2              # B = 1, 8 KV heads, N = 8,192, D = 128, 2-byte K and V
    bytes_us = 1e3 * bench.model_ms(kv, launches=0)
    one, two = bench.model_ms(kv, launches=1), bench.model_ms(kv, launches=2)
    assert round(bytes_us) == int(said[1]) and bench.REFERENCE.launch_us == float(said[2])
    assert abs(one / two - float(said[3])) < 0.06, (one / two, said[3])
