"""check.flash_attention passes right kernels written two ways and rejects the stub, realistic wrong kernels
(each with its diagnosis), plain PyTorch attention (right numbers, N×N bytes) and a causal kernel that loads
the tiles it masks away."""
import functools
from pathlib import Path

import nbformat
import pytest
import torch

from course_utils import capability, check
from course_utils.check import attention
import attention_kernels as k
from hinted import assert_names_hint


@functools.cache
def passed(right):
    """The check's verdict on a right kernel, run once for every test here that reads it (a run takes seconds)."""
    return check.flash_attention(right)


@pytest.mark.parametrize("right", [k.flash_attention, k.flash_attention_other_tiles])
def test_accepts_correct_kernels(right):
    r = passed(right)
    assert "✓" in repr(r) and r.traffic.launches == 1
    assert r.traffic.bytes == 4 * 1 * 2 * 96 * 32 * 2      # q, k, v read once and o written once, fp16


# (wrong kernel, what the message says, its diagnosis key, the hint of `flash_attention` that key points to)
@pytest.mark.parametrize("wrong, message, key, hint", [
    (k.flash_attention_stub, "still the stub", "stub", 1),
    (k.no_rescale_acc, r"accumulator is not rescaled \(this matches K/V tiles of 32\)", "no-rescale-acc", 2),
    (k.no_rescale_acc_16, r"accumulator is not rescaled \(this matches K/V tiles of 16\)", "no-rescale-acc", 2),
    (k.no_rescale_l, "normaliser l is not rescaled", "no-rescale-l", 2),
    (k.no_scale, "scores are never scaled", "scale", 3),
    (k.scale_by_d, "divided by D; the scale is 1/√D", "scale", 3),
    (k.no_divide, "never divided by the normaliser", "no-divide", 2),
    (k.causal_ignored, "causal mask is missing", "causal-missing", 3),
    (k.diagonal_masked, r"(?s)causal mask is off by one: it hides key i from query i.*NaN", "causal-off-by-one", 3),
    (k.sees_next, "causal mask is off by one: query i also sees key i \\+ 1", "causal-off-by-one", 3),
    (k.tail_unmasked, r"keys past the end \(N = 67 is not a multiple of your K/V tile of 32\) count in the softmax",
     "keys-past-n", 3),
    (k.no_max, r"(?s)scores near ±100.*NaN.*running max subtracted", "no-max", 2),
    (k.fp16_acc, r"(?s)v near 1000.*inf.*past fp16's largest number", "fp16-acc", 2),
    (k.naive_torch, r"(?s)right numbers but moved .* bytes.*tensors of N×N = 96×96", "bytes", 1),
    (k.sdpa, "with PyTorch .*not with a Triton kernel", "pytorch", 1),
    (k.exp2_no_log2e, "tl.math.exp2 but log2\\(e\\) is not folded into the scale", "exp-base", 3),
    (k.no_skip, r"with causal=True it requested .* bytes of loads, 100%", "no-skip", 3),
    (k.block_d_is_d, r"D = 48 here is not a power of two.*BLOCK_D = triton.next_power_of_2\(D\)", "block-d", 3),
    (lambda q, k_, v, causal=False: None, "returned None", "return", 1),
])
def test_rejects(wrong, message, key, hint):
    with pytest.raises(check.CheckFailed, match=message) as e:
        check.flash_attention(wrong)
    # the diagnosis, and the last line of the message: the hint that addresses it
    assert e.value.diagnosis == key
    assert_names_hint(e.value, "flash_attention", hint)


def test_rejects_a_function_passed_as_its_result():
    with pytest.raises(check.CheckFailed, match=r"takes your function itself"):
        check.flash_attention(None)


ROOT = Path(__file__).resolve().parent.parent


def _lesson():
    return nbformat.read(ROOT / "solutions" / "09_flash_attention.ipynb", as_version=4)


def _contract():
    text = next(c.source for c in _lesson().cells if "### Your kernel: the contract" in c.source)
    return " ".join(text.split())


def test_the_contract_names_every_case_tolerance_and_budget():
    """Every case the check tries (attention.CASES, which the checker itself uses), each
    tolerance (TF32 on a GPU included), and the budgets with their slack are in the lesson's contract."""
    contract = _contract()
    missing = [case for case in attention.CASES if case not in contract]
    assert not missing, f"the contract does not name the check's cases {missing}"
    fp32 = "5e-3" if attention.ON_GPU and not attention.INTERPRET else "1e-4"   # a GPU's fp32 gets fp16's, for TF32
    for dtype, written in ((torch.float16, "5e-3"), (torch.bfloat16, "3e-2"), (torch.float32, fp32)):
        tol = attention._tol(dtype)
        assert tol["atol"] == tol["rtol"] == float(written) and written in contract
    assert "1e-4" in contract and "TF32" in contract and "fp32 within 5e-3 there" in contract
    pct = lambda x: f"{round(100 * x)} %"  # noqa: E731  (the course writes "5 %")
    assert pct(attention.BYTES_SLACK - 1) in contract and pct(attention.SKIP_MAX) in contract
    assert "B = 1, H = 2, N = 96, D = 32" in contract and "N = 390, D = 16" in contract


def test_the_checks_cases_come_from_CASES():
    r = passed(k.flash_attention)
    shapes = attention.CASES[:len(attention._SHAPES)]
    for b_, h, n, d in (eval(s) for s in shapes):
        assert any(f"B={b_} H={h} N={n} D={d}" in case for case in r.cases)
    assert sum(any(name in case for case in r.cases) for name in attention.CASES[-3:-1]) == 2


@pytest.mark.parametrize("cc, smaller", [((9, 0), False), ((8, 0), False), ((8, 6), True), ((7, 5), True)])
def test_tiles_follow_the_capability_plan(cc, smaller):
    """The lesson's tiles() keep the H100's tuned choice where they fit and shrink on GPUs with
    less shared memory per block. (That each choice compiles within the limit is measured by compiling
    for each target; see the course's compile test, tools/compile_targets.py.)"""
    cell = next(c.source for c in _lesson().cells if "def tiles(" in c.source)
    src = cell[cell.index("def tiles("):cell.index("def flash_attention(q")]
    env = {"torch": torch, "PLAN": capability.plan(cc)}
    exec(compile(src, "09 tiles", "exec"), env)
    assert env["tiles"](64, torch.float16)[:3] == ((64, 64, 4) if cc == (7, 5) else (128, 64, 8))
    fp32_d128 = env["tiles"](128, torch.float32)
    assert (fp32_d128 != (64, 64, 4, 2)) == smaller
    env["PLAN"] = capability.plan(None)
    assert env["tiles"](128, torch.float32) == (64, 64, 4, 1)
