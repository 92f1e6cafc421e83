"""The GPUs the course knows by name: datasheet figures, each with the document it comes from.

A compute capability says what a GPU can compile (capability.plan decides the dtypes and tiles from it);
it says nothing of how fast the card is. An H100 and an H200 are both sm_90, yet the H200 streams 1.4x the
bytes per second. This table holds what the vendor's datasheet says of each product, keyed by the name
torch.cuda.get_device_name() returns:

    gpus.lookup("NVIDIA H200")          # GPU(name="NVIDIA H200", cc=(9, 0), bandwidth_gbps=4800.0, ...)
    gpus.lookup("Tesla T4").sms         # 40
    gpus.lookup("a card we never met")  # None

These are datasheet figures, not measurements: bench.ceilings() measures the card at hand, and
bench.datasheet_ceilings(name) turns an entry into the Ceilings that bench.model_ms prices a design with.
Figures the source does not state for that exact product (a cache size, a GeForce card's dense tensor rate)
say "approximate" in `source`. Layering: this module imports nothing of the course; capability reads it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

KIB = 1024
# Shared memory one block may opt in to, by compute capability (capability.py names the CUDA guide's tables).
_SMEM = {(7, 5): 64 * KIB, (8, 0): 163 * KIB, (8, 6): 99 * KIB, (8, 9): 99 * KIB, (9, 0): 227 * KIB}


@dataclass(frozen=True)
class GPU:
    name: str                   # the product, as NVIDIA names it
    short: str                  # what the course calls it in a sentence ("T4", "H100 SXM")
    cc: tuple[int, int]         # compute capability
    sms: int                    # streaming multiprocessors
    memory_gb: float            # on-board memory, GB as the datasheet counts them
    bandwidth_gbps: float       # memory bandwidth, GB/s (1e9 bytes/s)
    tensor_tflops: float        # dense fp16 tensor-core math with fp32 accumulation, TFLOP/s (no sparsity)
    fp32_tflops: float          # plain fp32 FMA math, TFLOP/s: what a T4's tl.dot runs at (no tensor cores)
    l2_mb: float                # L2 cache in MiB (2**20 bytes): the whitepapers' "MB" for an L2 is binary
                                # (an H100's 50 MB is the 50 MiB its driver reports), so every user scales by 2**20
    source: str                 # the datasheet (or whitepaper) these figures come from

    @property
    def smem_per_block(self) -> int:
        """Bytes of shared memory one block may use: set by the compute capability, not the product."""
        return _SMEM[self.cc]


# Dense tensor rates: the datasheets print the 2:4-sparse rate beside the dense one; this is the dense one,
# fp16 inputs with fp32 accumulation (bf16 runs at the same rate from sm_80 on; a T4 has no bf16).
_T = "NVIDIA {} datasheet"
KNOWN = (
    GPU("NVIDIA T4", "T4", (7, 5), 40, 16, 320, 65, 8.1, 4,
        _T.format("T4 Tensor Core GPU") + " (65 TFLOP/s mixed precision FP16/FP32, 8.1 TFLOP/s FP32, 320 GB/s "
        "GDDR6); 40 SMs and 4 MB L2 from the Turing architecture whitepaper (TU104)"),
    GPU("NVIDIA A10", "A10", (8, 6), 72, 24, 600, 125, 31.2, 6,
        _T.format("A10 Tensor Core GPU") + " (125 TFLOP/s FP16/BF16 tensor, 31.2 TFLOP/s FP32, 600 GB/s GDDR6); "
        "72 SMs and the 6 MB L2 from the Ampere GA102 whitepaper, approximate"),
    GPU("NVIDIA L4", "L4", (8, 9), 58, 24, 300, 121, 30.3, 48,
        _T.format("L4 Tensor Core GPU") + " (121 TFLOP/s fp16 on the tensor cores: the datasheet's 242 counts a sparse-matrix "
        "trick; 30.3 TFLOP/s fp32; 300 GB/s GDDR6); 58 SMs and 48 MB L2 from the Ada (AD104) whitepaper, approximate"),
    *(GPU(f"NVIDIA A100 {mem}GB {form}", f"A100 {mem}GB {form}", (8, 0), 108, mem, bw, 312, 19.5, 40,
          _T.format("A100 Tensor Core GPU") + f" ({mem}GB {form}: {bw:,} GB/s {hbm}, 312 TFLOP/s FP16 tensor, "
          "19.5 TFLOP/s FP32); 108 SMs and 40 MB L2 from the A100 architecture whitepaper")
      for mem, form, bw, hbm in ((40, "PCIe", 1555, "HBM2"), (40, "SXM", 1555, "HBM2"), (80, "PCIe", 1935, "HBM2e"),
                                 (80, "SXM", 2039, "HBM2e"))),
    GPU("NVIDIA H100 PCIe", "H100 PCIe", (9, 0), 114, 80, 2000, 756, 51, 50,
        _T.format("H100 Tensor Core GPU") + " (H100 PCIe: 2 TB/s of HBM; 756 TFLOP/s fp16 on the tensor "
        "cores: the datasheet's 1,513 counts a sparse-matrix trick; 51 TFLOP/s fp32); the processor count (114) and the cache size (50 MB, that is 50 MiB) "
        "from the Hopper architecture whitepaper"),
    GPU("NVIDIA H100 NVL", "H100 NVL", (9, 0), 132, 94, 3900, 835, 60, 50,
        _T.format("H100 Tensor Core GPU") + " (H100 NVL: 3.9 TB/s of HBM, 94 GB; 835 TFLOP/s fp16 on the "
        "tensor cores: the datasheet's 1,671 counts a sparse-matrix trick; 60 TFLOP/s fp32); SM count and L2 approximate"),
    GPU("NVIDIA H100 SXM", "H100 SXM", (9, 0), 132, 80, 3350, 989, 67, 50,
        _T.format("H100 Tensor Core GPU") + " (H100 SXM: 3.35 TB/s of HBM; 989 TFLOP/s fp16 on the tensor "
        "cores: the datasheet's 1,979 counts a sparse-matrix trick; 67 TFLOP/s fp32); the processor count (132) and the cache size (50 MB, that is 50 MiB) "
        "from the Hopper architecture whitepaper"),
    GPU("NVIDIA H200", "H200", (9, 0), 132, 141, 4800, 989, 67, 60,
        _T.format("H200 Tensor Core GPU") + " (H200 SXM: 4.8 TB/s of HBM, 141 GB; 989 TFLOP/s fp16 on the "
        "tensor cores: the datasheet's 1,979 counts a sparse-matrix trick; 67 TFLOP/s fp32); SMs as the H100 SXM's; L2 60 MiB as its driver reports it "
        "(torch's L2_cache_size), the datasheet states none"),
    GPU("NVIDIA GeForce RTX 3060", "RTX 3060", (8, 6), 28, 12, 360, 25.6, 12.7, 3,
        "NVIDIA GeForce RTX 3060 specifications (360 GB/s, 12 GB); SMs, FP32 and the FP16-with-FP32-accumulate "
        "tensor rate approximate, from the Ampere GA102/GA106 whitepaper's per-SM rates"),
    GPU("NVIDIA GeForce RTX 3070", "RTX 3070", (8, 6), 46, 8, 448, 40.6, 20.3, 4,
        "NVIDIA Ampere GA102 GPU architecture whitepaper, RTX 3070 column (448 GB/s, 20.3 TFLOP/s FP32, "
        "40.6 TFLOP/s FP16 tensor with FP32 accumulate, dense); L2 approximate"),
    GPU("NVIDIA GeForce RTX 3080", "RTX 3080", (8, 6), 68, 10, 760, 59.5, 29.8, 5,
        "NVIDIA Ampere GA102 GPU architecture whitepaper, RTX 3080 column (760 GB/s, 29.8 TFLOP/s FP32, "
        "59.5 TFLOP/s FP16 tensor with FP32 accumulate, dense); L2 approximate"),
    GPU("NVIDIA GeForce RTX 3090", "RTX 3090", (8, 6), 82, 24, 936, 71, 35.6, 6,
        "NVIDIA Ampere GA102 GPU architecture whitepaper, RTX 3090 column (936 GB/s, 35.6 TFLOP/s FP32, "
        "71 TFLOP/s FP16 tensor with FP32 accumulate, dense; GeForce cards run that at half the FP16-accumulate "
        "rate)"),
    GPU("NVIDIA GeForce RTX 4070", "RTX 4070", (8, 9), 46, 12, 504, 58.3, 29.1, 36,
        "NVIDIA GeForce RTX 4070 specifications (504 GB/s, 12 GB, 29.1 TFLOP/s FP32); the FP16-with-FP32-"
        "accumulate tensor rate and L2 approximate, from the Ada architecture whitepaper's per-SM rates"),
    GPU("NVIDIA GeForce RTX 4080", "RTX 4080", (8, 9), 76, 16, 716.8, 97.5, 48.7, 64,
        "NVIDIA Ada Lovelace GPU architecture whitepaper, RTX 4080 column (716.8 GB/s, 48.7 TFLOP/s FP32, "
        "97.5 TFLOP/s FP16 tensor with FP32 accumulate, dense, 64 MB L2); approximate"),
    GPU("NVIDIA GeForce RTX 4090", "RTX 4090", (8, 9), 128, 24, 1008, 165.2, 82.6, 72,
        "NVIDIA Ada Lovelace GPU architecture whitepaper, RTX 4090 column (1,008 GB/s GDDR6X, 82.6 TFLOP/s FP32, "
        "165.2 TFLOP/s FP16 tensor with FP32 accumulate, dense, 72 MB L2)"),
)

# Which entry a name torch reports means: the first pattern that matches the simplified name wins, so the
# specific ones come first. Names seen: "Tesla T4", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB",
# "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3" (the SXM), "NVIDIA H100 PCIe", "NVIDIA H100 NVL",
# "NVIDIA H200", "NVIDIA L4", "NVIDIA A10", "NVIDIA GeForce RTX 4090".
_PATTERNS = (
    (r"\bt4\b", "NVIDIA T4"),
    (r"\ba10g?\b", "NVIDIA A10"),          # AWS's A10G: the A10's chip, close enough for a model
    (r"\bl4\b", "NVIDIA L4"),
    (r"\ba100\b.*80\s*gb.*pcie|\ba100\b.*pcie.*80\s*gb", "NVIDIA A100 80GB PCIe"),
    (r"\ba100\b.*80\s*gb", "NVIDIA A100 80GB SXM"),
    (r"\ba100\b.*pcie", "NVIDIA A100 40GB PCIe"),
    (r"\ba100\b", "NVIDIA A100 40GB SXM"),
    (r"\bh100\b.*pcie", "NVIDIA H100 PCIe"),
    (r"\bh100\b.*nvl", "NVIDIA H100 NVL"),
    (r"\bh100\b", "NVIDIA H100 SXM"),
    (r"\bh200\b", "NVIDIA H200"),
    (r"\brtx 30(60|70|80|90)\b(?! ti)", None),   # the plain cards; a Ti is not in the table
    (r"\brtx 40(70|80|90)\b(?! (ti|super))", None),
)


def _simple(name: str) -> str:
    return re.sub(r"[\s_-]+", " ", name.lower()).strip()


def lookup(name: str) -> GPU | None:
    """The datasheet entry for a GPU named as torch.cuda.get_device_name() names it (case, dashes and the
    "NVIDIA", "Tesla", "GeForce" words do not matter), or for one of the course's short names ("T4",
    "H100 SXM"). None for a card not in the table: then nothing is claimed about it."""
    s = _simple(name)
    for g in KNOWN:
        if s in (_simple(g.name), _simple(g.short)):
            return g
    for pattern, entry in _PATTERNS:
        m = re.search(pattern, s)
        if m:
            wanted = entry or f"NVIDIA GeForce {m.group(0).upper()}"
            return next(g for g in KNOWN if g.name == wanted)
    return None


# The product the course names when it speaks of a compute capability (a plan rehearsed, a target compiled).
BY_CC = {(7, 5): "NVIDIA T4", (8, 0): "NVIDIA A100 80GB SXM", (8, 6): "NVIDIA A10", (8, 9): "NVIDIA L4",
         (9, 0): "NVIDIA H100 SXM"}


def for_cc(cc: tuple[int, int]) -> GPU | None:
    """The course's example product of a compute capability (the T4 for sm_75, the H100 SXM for sm_90)."""
    return lookup(BY_CC[tuple(cc)]) if tuple(cc) in BY_CC else None


def parse_plan(value: str, variable: str = "COURSE_PLAN") -> tuple[tuple[int, int], GPU | None]:
    """A plan to rehearse, as (compute capability, the card meant): "7.5", "sm_75", "75", or a card's name
    ("T4", "Tesla T4"). A value that names neither raises ValueError saying what to give."""
    v = value.strip()
    m = re.fullmatch(r"(?:sm_?)?(\d+)(?:\.(\d+))?", v.lower())
    if m:
        major, minor = (int(m[1]), int(m[2])) if m[2] is not None else divmod(int(m[1]), 10)
        return (major, minor), for_cc((major, minor))
    card = lookup(v) if v else None
    if card is None:
        known = ", ".join(sorted({g.short for g in KNOWN}))
        raise ValueError(f"{variable}={value!r} names no compute capability and no card the course knows. "
                         f"Give a capability (7.5, 8.0, 8.6, 8.9, 9.0, or sm_75) or one of: {known}; "
                         f"unset {variable} to plan for the GPU at hand.")
    return card.cc, card


def plan_label(cc: tuple[int, int], card: GPU | None) -> str:
    """"the T4's plan": how the course names a rehearsed plan."""
    return f"the {card.short}'s plan" if card else f"the sm_{cc[0]}{cc[1]} plan"
