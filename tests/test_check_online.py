"""check.online_softmax passes right kernels (other block sizes, per-lane running statistics) and rejects
the stub, the usual mistakes of the online recurrence (each with its diagnosis and the hint that
addresses it, also where a large default block holds every row in one block), a one-block kernel that
cannot hold a long row, right numbers that read x three times, and PyTorch's own softmax. Its messages
say what was seen and the likely cause, never the line that fixes it (that is the hints' last tier)."""
import functools
import re
from pathlib import Path

import nbformat
import pytest
import torch

import course_utils as cu
from course_utils import check
from course_utils.check import online
import online_kernels as k
from hinted import assert_names_hint


@functools.cache
def passed(right):
    """The check's verdict on a right kernel, run once for every test here that reads it (a run takes seconds)."""
    return check.online_softmax(right)


@functools.cache
def failure(wrong):
    """The check's failure on a wrong kernel, run once for every test here that reads it."""
    with pytest.raises(check.CheckFailed) as e:
        check.online_softmax(wrong)
    return e.value


@pytest.mark.parametrize("right", [k.online_softmax, k.online_softmax_2048, k.online_softmax_4096,
                                   k.online_softmax_lanes])
def test_online_softmax_accepts_correct_kernels(right):
    r = passed(right)
    assert "✓" in repr(r) and r.traffic.launches == 1
    x_bytes = 4 * 4 * 3000
    assert r.traffic.requested_read == 2 * x_bytes and r.traffic.requested_written == x_bytes
    assert r.traffic.bytes == 2 * x_bytes       # distinct bytes: x once, y once


NOT_RESCALED = (r"float32 ordinary rows 4x3000, in blocks of 1,024`: y comes out too small.*not rescaled "
                r"when the max changes.*Your rows sum to 0\.\d+")
UNGUARDED = (r"float32 rows starting with −inf \(16,400 and 5,000 of them\), in blocks of 8,192`: the rows that "
             r"start with a whole block of −inf come out NaN.*nothing guards")
# what a failure must not quote: the recipe's lines, which only the last hint gives
RECIPE = ("tl.where", "other=float", "s = s *", "s * exp", "exp(m_old − m_new)", "exp(m − m_new)", "m_safe",
          "y = exp(x − m) / s")


# Each wrong kernel runs through the checker once: the row gives the message and, where the failure points to a
# hint, its diagnosis key and the hint that addresses it (None: not asserted); each failure ends by naming its hint.
@pytest.mark.parametrize("wrong, message, key, hint", [
    (k.online_softmax_stub, "still the stub", "stub", 1),
    (k.not_rescaled, NOT_RESCALED, "no-rescale", 2),
    (k.not_rescaled_big_default, NOT_RESCALED, "no-rescale", 2),
    (k.inverted, r"every element is NaN, on every row.*rescale factor is upside down", "inverted-rescale", 2),
    (k.lanes_unguarded, r"float32 ordinary rows 7x37, at your default block`: every element is NaN.*yet one row of "
                        r"65,536 ordinary values.*padding past the end", "lane-inf", 3),
    (k.nan_chunk, UNGUARDED, "inf-guard", 3),
    (k.nan_chunk_big_default, UNGUARDED, "inf-guard", 3),
    (k.pad_zero, r"as if the padded lanes past the end of the row loaded 0.*here 72 per row", "pad-zero", 3),
    (k.last_max, r"as if walk 2 subtracted the max of the last block", "last-max", 2),
    (k.m_from_zero, r"(?s)rows of equal values.*the whole of row 0 is NaN where the answer is finite.*running max "
                    r"starts at 0", "m-from-zero", 3),
    (k.no_max, r"(?s)float32 huge values.*NaN.*where the answer is finite.*no running max subtracted", "no-max", 2),
    (k.one_block, r"(?s)longer than any block\), in blocks of 16,384.*One block per row cannot hold this row",
     "one-block", 1),
    (k.one_block_capped, r"float32 ordinary rows 3x5000, in blocks of 2,048`: only the first 4,096 columns of "
                         r"each row were written.*needs a loop", None, None),
    (k.short_walk, r"float32 ordinary rows 4x3000, in blocks of 1,024`: y comes out exactly as if walk 1 never "
                   r"reached the last block.*columns 2,048 to 2,999.*one block short.*Your rows sum to 1\.\d+",
     "last-block", 3),
    # the interpreter's text (a GPU's compiler words it otherwise): Triton's error, then its cause in plain words
    pytest.param(k.torch_max, r"axis \[.*\] out of bounds for shape \[\].*\nHint: tl.max .*tl\.maximum\(m, v\)", None,
                 None, marks=pytest.mark.skipif(not cu.INTERPRET, reason="the interpreter's message")),
    (k.three_pass, r"read x 3.00 times.*in blocks of 1,024.*budget is 2 reads \+ 1 write.*Three walks", "bytes", 2),
    (k.eager, r"with PyTorch \(aten._softmax\)", "pytorch", 1),
    (k.without_block, r"cannot be called as online_softmax\(x, block\).*keep the signature", None, None),
    (lambda x, block=8192: None, "returned None", None, None),
    (lambda x, block=8192: x.clone(), r"are wrong.*each should sum to 1", None, None),
])
def test_online_softmax_rejects(wrong, message, key, hint):
    """Also checks the failure's diagnosis key and the hint it names, where the row gives them."""
    e = failure(wrong)
    assert re.search(message, str(e)), str(e)
    assert not [line for line in RECIPE if line in str(e)], str(e)
    if key is not None:
        assert e.diagnosis == key
    if hint is not None:
        assert_names_hint(e, "online_softmax", hint)


def test_the_check_passes_blocks_that_cut_every_ordinary_row_into_several():
    """The contract: each case runs in blocks of split_block(N), which cuts a row of 3 or more into 3 or 4
    blocks, and then at the function's default block, ordinary rows first."""
    calls = []

    def spy(x, block=2**20):
        calls.append((x.shape[1], block))
        return k.online_softmax(x, min(block, online.SPLIT_CAP))   # what it was passed is recorded; a GPU compiles less

    check.online_softmax(spy)
    for n in (3000, 37, 5000, 6151, 9000, 4000, 20_000):
        b = online.split_block(n)
        assert (n, b) in calls and (n, 2**20) in calls and -(-n // b) in (3, 4), n
    assert calls.index((37, 16)) < calls.index((4000, 1024))    # the ordinary rows come first
    assert online.split_block(1) == 1 and online.split_block(3000) == 1024
    assert online.split_block(online.LONG) == online.SPLIT_CAP == 2**14    # the long row: 65 blocks, no monster block


def test_nan_causes_are_told_apart_by_probes():
    """Both kernels give all-NaN rows on short ragged rows; only the inverted rescale is NaN on a row that
    fills every lane of every block, so each gets its own diagnosis, not the first guess that fits."""
    lanes, inverted = failure(k.lanes_unguarded), failure(k.inverted)   # the rejects test's runs, shared
    assert "inverted" not in str(lanes) and lanes.diagnosis == "lane-inf"
    assert "padding past the end" not in str(inverted) and inverted.diagnosis == "inverted-rescale"


def test_every_case_the_check_tries_is_a_kind_the_contract_names():
    """The check's cases come from online.CASES, and lesson 08's stub names each kind, its tolerances and its
    budget with the slack (the contract must say what the check tries)."""
    r = passed(k.online_softmax)   # the accept test's run, shared
    kinds = {next(kind for kind in online.CASES if case.split(" ", 1)[1].startswith(kind)) for case in r.cases}
    assert kinds == set(online.CASES)
    contract = _contract()
    for kind in online.CASES:
        assert f"*{kind}*" in contract, f"the contract does not name the check's case {kind!r}"
    for number in ("1e-4", "2e-3", f"{online.MAX_READS:.2f}", f"{online.MAX_WRITES:.2f}", "4 × 3,000"):
        assert number in contract, number


ROOT = Path(__file__).resolve().parent.parent


def _lesson():
    return nbformat.read(ROOT / "solutions" / "08_online_softmax.ipynb", as_version=4)


def _contract():
    return next(c.source for c in _lesson().cells if "**What the check tries**" in c.source)


def test_the_lessons_launcher_takes_a_power_of_two_block_and_refuses_others():
    """online_softmax(x, 1000) once failed deep inside Triton. The launcher, given in the stub, takes
    any power of two up to 2**20 and refuses others with a ValueError that says what to do."""
    import triton
    import triton.language as tl
    cell = next(c.source for c in _lesson().cells if "def online_softmax_kernel" in c.source)
    env = {"triton": triton, "tl": tl, "torch": torch, "warps_for": lambda b: 4}
    exec(compile(cell, "08_online_softmax stub cell", "exec"), env)
    x = torch.randn(3, 700)
    for block in (1000, 0, 2**21, 96):
        with pytest.raises(ValueError, match=r"power of two from 1 to 2\*\*20"):
            env["online_softmax"](x, block)
    with pytest.raises(ValueError, match="contiguous 2-D"):
        env["online_softmax"](x.t(), 256)
    for block in (256, 1024):          # a ragged row in blocks of 256, and in one block of 1024
        assert torch.allclose(env["online_softmax"](x, block), torch.softmax(x, -1), atol=1e-6)


def test_a_verdict_does_not_depend_on_what_drew_random_numbers_before():
    """Every check draws from a generator seeded by its name and gives the caller's state back: once, under
    pytest-xdist, a draw that put each row's max in its first block let a never-rescaled sum pass 4 x 3,000."""
    messages = set()
    for seed in (0, 1, 12345):
        torch.manual_seed(seed)
        before = torch.get_rng_state()
        with pytest.raises(check.CheckFailed) as e:
            check.online_softmax(k.not_rescaled_big_default)
        assert torch.equal(torch.get_rng_state(), before), "the check changed the caller's random state"
        messages.add(str(e.value))
    assert len(messages) == 1, messages
