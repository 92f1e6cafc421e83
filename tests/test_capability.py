"""course_utils.capability: what each GPU gets, with the compute capability faked, so every plan is
tested on a CPU. None is the interpreter (no GPU)."""
import ast
from pathlib import Path

import pytest
import torch

from course_utils import capability, environment, gpus

KIB = 1024
T4, A100, SM86, SM89, H100 = (7, 5), (8, 0), (8, 6), (8, 9), (9, 0)
ALL = [T4, A100, SM86, SM89, H100, None]

# cc: (bf16, tensor cores, Hopper-only paths, shared memory per block in KiB)
EXPECTED = {
    T4: (False, False, False, 64),
    A100: (True, True, False, 163),
    SM86: (True, True, False, 99),
    SM89: (True, True, False, 99),
    H100: (True, True, True, 227),
    None: (False, False, False, None),
}


@pytest.mark.parametrize("cc", ALL, ids=str)
def test_what_each_gpu_gets(cc):
    p = capability.plan(cc)
    bf16, tensor_cores, hopper, smem_kib = EXPECTED[cc]
    assert (p.bf16, p.tensor_cores, p.hopper_paths) == (bf16, tensor_cores, hopper)
    assert p.smem_per_block == (smem_kib * KIB if smem_kib else None)
    assert p.dtypes == ((torch.float32, torch.float16, torch.bfloat16) if bf16 else (torch.float32, torch.float16))
    assert p.cc == cc


def test_the_room_class_each_gpu_gets():
    rooms = {cc: capability.plan(cc).room for cc in ALL}
    assert rooms == {T4: "small", A100: "large", SM86: "medium", SM89: "medium", H100: "large", None: None}
    assert capability.plan((12, 0)).room == "small"     # not in the table: 48 KiB, what every GPU grants


@pytest.mark.parametrize("cc", ALL, ids=str)
def test_every_tile_fits_the_shared_memory(cc):
    p = capability.plan(cc)
    limit = p.smem_per_block or 64 * KIB  # the interpreter plans for the smallest GPU, a T4
    assert p.matmul_tiles, "no matmul tile fits"
    for t in p.matmul_tiles:
        assert t.smem_bytes(2) <= limit, f"{t} needs {t.smem_bytes(2)} B of shared memory; {cc} has {limit}"
    for t in p.tiles(torch.float32):
        assert t.smem_bytes(4) <= limit
    assert len(p.tiles(torch.float32)) < len(p.matmul_tiles)  # fp32 operands take twice the room


def test_tile_footprint_is_stages_times_both_operand_tiles():
    t = capability.Tile(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=3)
    assert t.smem_bytes(2) == 3 * (128 * 64 + 64 * 256) * 2 == 144 * KIB


def test_a_t4_gets_smaller_tiles_than_an_h100():
    t4, h100 = capability.plan(T4).matmul_tiles, capability.plan(H100).matmul_tiles
    biggest = max(h100, key=lambda t: t.smem_bytes())
    assert t4 and biggest not in t4
    assert set(t4) < set(h100)
    assert max(t.smem_bytes() for t in t4) < biggest.smem_bytes()


def test_bigger_shared_memory_never_gets_fewer_tiles():
    counts = [len(capability.plan(cc).matmul_tiles) for cc in (T4, SM86, A100, H100)]
    assert counts == sorted(counts) and counts[0] < counts[-1]


@pytest.mark.parametrize("cc", ALL, ids=str)
def test_lessons_get_fp16_unless_they_ask_for_bf16(cc):
    p = capability.plan(cc)
    assert p.low_dtype() == torch.float16
    assert p.low_dtype(bf16=True) == (torch.bfloat16 if p.bf16 else torch.float16)


def test_a_t4_never_gets_bf16():
    p = capability.plan(T4)
    assert torch.bfloat16 not in p.dtypes
    assert p.low_dtype(bf16=True) == p.low_dtype() == torch.float16


def test_the_t4_note_says_what_changes_in_one_line():
    note = capability.plan(T4).note
    assert note.startswith("T4 (sm_75), unlike the course's H100: ") and "\n" not in note
    for words in ("no bf16", "plain fp32 arithmetic, without tensor cores (none that Triton can use on this GPU)",
                  "matrices multiplied in smaller pieces (about 64 KiB", "none of the features only the H100's generation"):
        assert words in note


@pytest.mark.parametrize("cc, words", [
    (A100, ["A100 (sm_80)", "163 KiB", "the H100's generation of GPUs (Hopper)"]),
    (SM86, ["(sm_86)", "99 KiB", "the H100's generation of GPUs (Hopper)"]),
    (SM89, ["(sm_89)", "99 KiB"]),
    (None, ["interpreter", "no bf16", "without tensor cores (none that Triton can use without a GPU)"]),
], ids=str)
def test_notes_of_the_other_gpus(cc, words):
    p = capability.plan(cc)
    assert all(w in p.note for w in words), p.note
    assert "bf16" not in p.note or not p.bf16


def test_an_h100_changes_nothing():
    p = capability.plan(H100)
    assert p.changes == () and "nothing changes" in p.note and "\n" not in p.note


def test_an_unknown_gpu_gets_tiles_that_fit_anywhere():
    p = capability.plan((12, 0))
    assert p.smem_per_block == 48 * KIB and "not in the course's table" in p.note
    assert all(t.smem_bytes() <= 48 * KIB for t in p.matmul_tiles)


# --- the cards by name: datasheet figures -------------------------------------------------------------
@pytest.mark.parametrize("torch_name, short", [
    ("Tesla T4", "T4"), ("NVIDIA A10", "A10"), ("NVIDIA A10G", "A10"), ("NVIDIA L4", "L4"),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"), ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"), ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200"), ("NVIDIA GeForce RTX 3090", "RTX 3090"), ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("nvidia geforce rtx 4080", "RTX 4080"), ("T4", "T4"),
])
def test_a_card_is_known_by_the_name_torch_gives_it(torch_name, short):
    assert gpus.lookup(torch_name).short == short


@pytest.mark.parametrize("name", ["NVIDIA GeForce RTX 3090 Ti", "NVIDIA L40S", "NVIDIA B200", "none", ""])
def test_a_card_not_in_the_table_is_not_guessed(name):
    assert gpus.lookup(name) is None


@pytest.mark.parametrize("card", gpus.KNOWN, ids=lambda g: g.short)
def test_every_card_has_its_figures_and_their_source(card):
    assert card.cc in capability.SMEM_PER_BLOCK and card.smem_per_block == capability.SMEM_PER_BLOCK[card.cc]
    assert card.sms > 0 and card.memory_gb > 0 and card.bandwidth_gbps > 0 and card.l2_mb > 0
    assert card.tensor_tflops > card.fp32_tflops > 0         # tensor cores beat plain fp32 on every one
    assert "datasheet" in card.source or "whitepaper" in card.source or "specifications" in card.source
    assert gpus.lookup(card.name) == card


def test_the_supported_capabilities_each_name_a_card():
    for cc in (T4, A100, SM86, SM89, H100):
        assert gpus.for_cc(cc).cc == cc
    assert gpus.for_cc((12, 0)) is None


def test_an_h200_is_not_nothing_changes():
    p = capability.plan(H100, "NVIDIA H200")
    assert p.changes == () and p.tiles() == capability.plan(H100).tiles()   # the same sm_90 plan...
    assert p.gpu.short == "H200" and "nothing changes" not in p.note       # ...on a faster card
    assert p.note.startswith("H200 (sm_90): the H100's plan") and "1.4x its memory bandwidth" in p.note
    assert "141 GB vs 80" in p.note and "\n" not in p.note


def test_the_h100_sxm_by_name_changes_nothing_and_the_pcie_one_is_slower():
    assert "nothing changes" in capability.plan(H100, "NVIDIA H100 80GB HBM3").note
    pcie = capability.plan(H100, "NVIDIA H100 PCIe").note
    assert "0.6x its memory bandwidth" in pcie and "114 SMs vs 132" in pcie


def test_a_t4_by_name_gives_its_datasheet_in_the_note():
    note = capability.plan(T4, "Tesla T4").note
    assert note.startswith("T4 (sm_75), unlike the course's H100") and "320 GB/s, 40 SMs, 16 GB" in note


def test_a_name_that_contradicts_the_capability_is_ignored():
    assert capability.plan(T4, "NVIDIA H200").gpu is None


def test_the_default_names_this_machines_card(monkeypatch):
    fake_gpu(monkeypatch, (9, 0), "NVIDIA H200")
    assert capability.plan().gpu.short == "H200" and capability.plan().rehearsal == ""


# --- rehearsing another GPU's plan: COURSE_PLAN ------------------------------------------------------
def fake_gpu(monkeypatch, cc, name):
    monkeypatch.setattr(environment, "DEVICE", "cuda")
    monkeypatch.setattr(environment, "compute_capability", lambda: cc)
    monkeypatch.setattr(environment, "gpu_name", lambda: name)


@pytest.mark.parametrize("value, cc, card", [("7.5", T4, "T4"), ("sm_75", T4, "T4"), ("75", T4, "T4"),
                                             ("T4", T4, "T4"), ("Tesla T4", T4, "T4"), ("8.6", SM86, "A10"),
                                             ("sm_89", SM89, "L4"), ("8.0", A100, "A100 80GB SXM")])
def test_course_plan_rehearses_another_gpus_plan(monkeypatch, value, cc, card):
    fake_gpu(monkeypatch, H100, "NVIDIA H100 80GB HBM3")
    monkeypatch.setenv("COURSE_PLAN", value)
    p = capability.plan()
    assert capability.current_cc() == cc and p.cc == cc
    assert p.tiles() == capability.plan(cc).tiles() and p.dtypes == capability.plan(cc).dtypes
    assert p.rehearsal == capability.rehearsal() == f"the {card}'s plan"
    assert p.gpu.short == card
    assert p.note.startswith(f"the {card}'s plan rehearsed on NVIDIA H100 80GB HBM3 (COURSE_PLAN")


def test_course_plan_names_a_capability_the_table_lacks(monkeypatch):
    fake_gpu(monkeypatch, H100, "NVIDIA H100 80GB HBM3")
    monkeypatch.setenv("COURSE_PLAN", "12.0")
    assert capability.plan().cc == (12, 0) and capability.rehearsal() == "the sm_120 plan"


def test_course_plan_that_names_nothing_says_what_to_give(monkeypatch):
    fake_gpu(monkeypatch, H100, "NVIDIA H100 80GB HBM3")
    monkeypatch.setenv("COURSE_PLAN", "a potato")
    with pytest.raises(ValueError, match=r"names no compute capability.*7\.5.*unset COURSE_PLAN"):
        capability.plan()


def test_course_plan_without_a_gpu_changes_nothing(monkeypatch):
    monkeypatch.setattr(environment, "DEVICE", "cpu")
    monkeypatch.setenv("COURSE_PLAN", "7.5")
    assert capability.plan() == capability.plan(None) and capability.rehearsal() == ""


def test_without_course_plan_the_gpu_plans_for_itself(monkeypatch):
    fake_gpu(monkeypatch, SM89, "NVIDIA L4")
    monkeypatch.delenv("COURSE_PLAN", raising=False)
    assert capability.plan().cc == SM89 and capability.rehearsal() == "" and "rehears" not in capability.plan().note


def test_the_default_is_this_machine(monkeypatch):
    monkeypatch.setattr(capability, "current_cc", lambda: T4)
    assert capability.plan() == capability.plan(T4)
    monkeypatch.setattr(capability, "current_cc", lambda: None)
    assert capability.plan() == capability.plan(None)


def test_traps_reuse_the_plan(monkeypatch):
    monkeypatch.setattr(capability, "current_cc", lambda: T4)
    assert capability.plan(T4).note in environment.traps()
    monkeypatch.setattr(capability, "current_cc", lambda: H100)
    assert not any("sm_90" in n for n in environment.traps())


def test_a_tile_becomes_a_triton_config():
    c = capability.Tile(64, 128, 32, 4, 3).config()
    assert c.kwargs == {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}
    assert (c.num_warps, c.num_stages) == (4, 3)


def test_layering_capability_builds_on_environment_alone():
    """capability may import environment; environment may reach capability only inside a function."""
    here = Path(capability.__file__).parent

    def course_imports(tree):
        return {a.name for n in tree if isinstance(n, ast.ImportFrom) and n.level == 1 for a in n.names} | \
               {n.module for n in tree if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module}
    assert course_imports(ast.walk(ast.parse((here / "capability.py").read_text()))) == {"environment", "gpus"}
    assert course_imports(ast.walk(ast.parse((here / "gpus.py").read_text()))) == set()
    top_level = ast.parse((here / "environment.py").read_text()).body
    assert "capability" not in course_imports(top_level)
