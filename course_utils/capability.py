"""What this GPU gets: one place decides the dtypes, tensor cores, Hopper-only paths and matmul tiles.

The course was measured on an H100 (sm_90). Colab's free GPU is a T4 (sm_75), and other machines sit
in between, so a lesson asks here instead of assuming an H100:

    p = capability.plan()           # this machine (the interpreter plan when there is no GPU)
    p = capability.plan((7, 5))     # any compute capability, e.g. to see what a T4 gets
    p.low_dtype()                   # torch.float16 on every GPU; bf16 only if asked and supported
    p.matmul_tiles                  # Tile(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), biggest first
    p.note                          # one line: which GPU, and what changes compared with the H100
    p.gpu                           # its datasheet entry (gpus.GPU) when the card is one the course knows

The plan follows the compute capability; the note also names the card, since two cards of one capability
differ in speed (an H200 gets the H100's plan, with 1.4x the bandwidth).

Rehearsing another GPU's plan: with COURSE_PLAN set (to a capability, "7.5" or "sm_75", or a card the course
knows, "T4"), the whole course plans as that GPU would, dtypes and tiles, while the kernels still run on the
GPU at hand. Correctness is checked as usual; performance rows and goal lines say "not measured: rehearsing
the T4's plan", since the times are the real GPU's. For instructors who have one GPU and a class on another:

    COURSE_PLAN=7.5 jupyter lab            # or: python3 tools/gpu_run.py --plan 7.5

Layering: this module builds on `environment` and `gpus` (a table that imports nothing) alone, and
`environment` imports it only inside `traps()`, when both are loaded.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from . import environment as env
from . import gpus

KIB = 1024

# Shared memory one thread block may use (the opt-in maximum), by compute capability. Sources: the
# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" (maximum shared memory
# per thread block) and its per-architecture shared-memory sections, and NVIDIA's tuning guides:
# Turing 64 KB; A100 164 KB carve-out less 1 KB reserved for the system = 163 KB; GA10x (sm_86) and Ada
# (sm_89) 100 KB less 1 KB = 99 KB; Hopper 228 KB less 1 KB = 227 KB. On an H100, torch's
# shared_memory_per_block_optin and Triton's max_shared_mem both read 232448 B = 227 KiB.
SMEM_PER_BLOCK = {(7, 5): 64 * KIB, (8, 0): 163 * KIB, (8, 6): 99 * KIB, (8, 9): 99 * KIB, (9, 0): 227 * KIB}
# Any other GPU gets what every CUDA device grants a block without opting in (same guide): tiles
# that fit anywhere, rather than a guess.
PORTABLE_SMEM = 48 * KIB
REFERENCE_CC = (9, 0)   # the H100 every number in the course was measured on
SMALLEST_CC = (7, 5)    # the T4, the smallest GPU the course supports: the interpreter plans for it
# The attention kernels (lesson 09, labs 4 and 5) pick tiles by class of shared memory, not by card: their
# H100 tiles need up to 160 KiB a block (lesson 09's fp32 case), a class below keeps 2 stages and halves
# what does not fit in 99 KiB, and a T4's 64 KiB halves the tiles again. tools/compile_targets.py checks
# every choice against every target.
ROOM_LARGE, ROOM_MEDIUM = 160 * KIB, 96 * KIB
# The cards a capability means, in a sentence (examples; gpus.BY_CC names one product of each)
_NAMES = {(7, 5): "T4", (8, 0): "A100", (8, 6): "RTX 30xx / A10", (8, 9): "L4 / RTX 40xx", (9, 0): "H100 / H200"}
PLAN_VARIABLE = "COURSE_PLAN"   # the rehearsal switch: see the module's docstring


@dataclass(frozen=True)
class Tile:
    """One matmul configuration: the meta-parameters a Triton matmul kernel is launched with."""
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    num_warps: int
    num_stages: int

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Shared memory the software pipeline holds: num_stages copies of an A tile (BLOCK_M x BLOCK_K)
        and a B tile (BLOCK_K x BLOCK_N). On an H100 with Triton 3.6 this was exactly what Triton
        allocated for every candidate below (less for the 2-stage one), and tiles needing 240 and
        256 KiB failed to launch. Other GPUs were not run: their tiles keep >= 16 KiB of headroom."""
        return self.num_stages * (self.BLOCK_M * self.BLOCK_K + self.BLOCK_K * self.BLOCK_N) * elem_bytes

    def config(self):
        """As a triton.Config, for @triton.autotune(configs=[...])."""
        import triton
        return triton.Config({"BLOCK_M": self.BLOCK_M, "BLOCK_N": self.BLOCK_N, "BLOCK_K": self.BLOCK_K},
                             num_warps=self.num_warps, num_stages=self.num_stages)


# Candidates, biggest first; the fp16 footprint of each is in the comment (KiB). A GPU gets those that
# fit its shared memory: an H100 all of them, a T4 the last five.
CANDIDATES = (
    Tile(128, 256, 64, 8, 4),  # 192
    Tile(128, 256, 64, 8, 3),  # 144
    Tile(128, 128, 64, 8, 4),  # 128
    Tile(64, 256, 32, 4, 4),   # 80
    Tile(128, 128, 32, 4, 3),  # 48
    Tile(128, 64, 32, 4, 4),   # 48
    Tile(64, 128, 32, 4, 3),   # 36
    Tile(64, 64, 32, 4, 3),    # 24
    Tile(32, 64, 32, 2, 2),    # 12
)


def tiles_that_fit(smem: int, elem_bytes: int = 2) -> tuple[Tile, ...]:
    return tuple(t for t in CANDIDATES if t.smem_bytes(elem_bytes) <= smem)


@dataclass(frozen=True)
class Plan:
    cc: tuple[int, int] | None       # None: no GPU, Triton's CPU interpreter
    dtypes: tuple[torch.dtype, ...]  # what lessons may use here
    bf16: bool                       # Triton compiles bf16 from sm_80 on
    tensor_cores: bool               # tl.dot on tensor cores: sm_80 on (Triton >= 3.3 dropped them before)
    hopper_paths: bool               # TMA copies and warp-group MMA (wgmma): sm_90 on
    smem_per_block: int | None       # bytes; None on the interpreter, which has no limit
    matmul_tiles: tuple[Tile, ...]   # fit smem_per_block with fp16 operands, biggest first
    changes: tuple[str, ...]         # what differs from the H100, in plain words
    note: str                        # one line: which GPU this is, and those changes
    gpu: gpus.GPU | None = None      # the card's datasheet entry, when the course knows the card
    rehearsal: str = ""              # set while COURSE_PLAN rehearses this plan on another GPU: "the T4's plan"

    def low_dtype(self, bf16: bool = False) -> torch.dtype:
        """The low-precision dtype a lesson should use: fp16, which every GPU and Colab's T4 compile.
        bf16=True asks for bf16, granted only where Triton can compile it."""
        return torch.bfloat16 if bf16 and self.bf16 else torch.float16

    @property
    def room(self) -> str | None:
        """The class of shared memory a block gets: "large" (>= 160 KiB: A100, H100, H200), "medium"
        (>= 96 KiB: A10, RTX 30 and 40, L4), "small" (a T4's 64 KiB, or a GPU not in the table); None on
        the interpreter, which has no limit."""
        if self.smem_per_block is None:
            return None
        return ("large" if self.smem_per_block >= ROOM_LARGE else
                "medium" if self.smem_per_block >= ROOM_MEDIUM else "small")

    def tiles(self, dtype: torch.dtype = torch.float16) -> tuple[Tile, ...]:
        """The matmul tiles that fit this GPU for operands of `dtype` (fp32 ones take twice the room)."""
        elem = torch.finfo(dtype).bits // 8
        return tiles_that_fit(self.smem_per_block or SMEM_PER_BLOCK[SMALLEST_CC], elem)


def rehearsed() -> tuple[tuple[int, int], gpus.GPU | None] | None:
    """(capability, card) of the plan COURSE_PLAN rehearses on this GPU, or None: not set, or no GPU here
    (the interpreter has its own plan, and nothing it times is a measurement anyway)."""
    value = os.environ.get(PLAN_VARIABLE, "").strip()
    if not value or env.DEVICE != "cuda":
        return None
    return gpus.parse_plan(value, PLAN_VARIABLE)


def rehearsal() -> str:
    """"the T4's plan" while this GPU rehearses another's plan (COURSE_PLAN), else "". Whatever reports a
    speed says "not measured: rehearsing <this>" instead, since the times are the real GPU's."""
    r = rehearsed()
    if r is None:
        return ""
    return gpus.plan_label(*r)


def current_cc() -> tuple[int, int] | None:
    """The compute capability this machine plans for: its own, or the one COURSE_PLAN rehearses; None when
    kernels run in the interpreter (no GPU, or TRITON_INTERPRET set on a GPU machine)."""
    r = rehearsed()
    if r is not None:
        return r[0]
    return env.compute_capability() if env.DEVICE == "cuda" else None


def _vs_h100(card: gpus.GPU) -> str:
    """How a card of the H100's plan differs from the course's H100 SXM in speed and size (datasheets)."""
    ref = gpus.lookup("H100 SXM")
    if card == ref:
        return ""
    parts = [f"{card.bandwidth_gbps / ref.bandwidth_gbps:.2g}x its memory bandwidth "
             f"({card.bandwidth_gbps / 1000:g} vs {ref.bandwidth_gbps / 1000:g} TB/s)"]
    if card.tensor_tflops != ref.tensor_tflops:
        parts.append(f"{card.tensor_tflops / ref.tensor_tflops:.2g}x its fp16 tensor rate "
                     f"({card.tensor_tflops:g} vs {ref.tensor_tflops:g} TFLOP/s)")
    if card.sms != ref.sms:
        parts.append(f"{card.sms} SMs vs {ref.sms}")
    if card.memory_gb != ref.memory_gb:
        parts.append(f"{card.memory_gb:g} GB vs {ref.memory_gb:g}")
    return "; ".join(parts) + " (NVIDIA datasheets)"


def plan(cc: tuple[int, int] | None | str = "current", name: str | None = None) -> Plan:
    """What a GPU of compute capability `cc` gets. The default is this machine (named by torch, or the card
    COURSE_PLAN rehearses); None is the interpreter. name: the card, for the note ("NVIDIA H200")."""
    rehearsing = ""
    if cc == "current":
        cc = current_cc()
        r = rehearsed()
        if r is not None:
            rehearsing = rehearsal()
            name = r[1].name if r[1] else None
        elif name is None and cc is not None:
            name = env.gpu_name()
    gpu = cc is not None
    cc = tuple(cc) if gpu else None
    bf16 = gpu and cc >= (8, 0)  # the interpreter's bf16 tl.dot is not faithful either
    tensor_cores = gpu and cc >= (8, 0)
    hopper = gpu and cc >= REFERENCE_CC
    smem = SMEM_PER_BLOCK.get(cc, PORTABLE_SMEM) if gpu else None
    tiles = tiles_that_fit(smem or SMEM_PER_BLOCK[SMALLEST_CC])
    card = gpus.lookup(name) if gpu and name else None
    if card is not None and card.cc != cc:
        card = None      # a name that contradicts the capability (a faked GPU in a test): trust the capability

    changes = []
    if not bf16:
        changes.append("fp16 and fp32 only, no bf16")
    if not tensor_cores:
        changes.append("matrix products on the plain fp32 arithmetic, without tensor cores (none that Triton can use "
                       + ("on this GPU)" if gpu else "without a GPU)"))
    if not gpu:
        changes.append("matrices multiplied in smaller pieces, sized for a T4's shared memory")
    elif cc not in SMEM_PER_BLOCK:
        changes.append(f"matrices multiplied in smaller pieces, sized for the {PORTABLE_SMEM // KIB} KiB of shared "
                       "memory every GPU grants one program (this GPU is not in the course's table)")
    elif smem < SMEM_PER_BLOCK[REFERENCE_CC]:
        changes.append(f"matrices multiplied in smaller pieces (about {smem // KIB} KiB of shared memory in each "
                       "SM, against the H100's 227)")
    if not hopper:
        changes.append("none of the features only the H100's generation of GPUs (Hopper) has, which no "
                       "exercise needs")
    if not gpu:
        who = "Triton's CPU interpreter (no GPU)"
    else:
        who = f"{card.short if card else _NAMES.get(cc, 'this GPU')} (sm_{cc[0]}{cc[1]})"
    if rehearsing:
        who = f"{rehearsing} rehearsed on {env.gpu_name()} ({PLAN_VARIABLE}; times are this GPU's): {who}"
    if changes:
        note = f"{who}, unlike the course's H100: " + "; ".join(changes)
        if card is not None:
            note += f" ({card.bandwidth_gbps:g} GB/s, {card.sms} SMs, {card.memory_gb:g} GB: {card.short} datasheet)"
    elif card is not None and _vs_h100(card):
        note = f"{who}: the H100's plan (same sm_90 dtypes, tiles and paths); {_vs_h100(card)}"
    else:
        note = f"{who}: nothing changes from the H100 the course was measured on"
    return Plan(cc=cc, dtypes=(torch.float32, torch.float16) + ((torch.bfloat16,) if bf16 else ()),
                bf16=bf16, tensor_cores=tensor_cores, hopper_paths=hopper, smem_per_block=smem,
                matmul_tiles=tiles, changes=tuple(changes), note=note, gpu=card, rehearsal=rehearsing)
