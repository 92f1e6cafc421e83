"""The words of the field, each defined where the course first uses it.

    cu.glossary("HBM")     one definition, and the notebook that teaches it (any form: "SMs", "SRAM")
    cu.glossary()          every term, in the order the course teaches them, under each notebook's name
    cu.glossary(upto="03") the terms of lessons 00 to 03 only

In the notebooks a term is defined once, at its first use in reading order (00 -> 09 -> lab 1 .. lab 6),
inside the sentence that explains it, marked <dfn>term</dfn>. `aliases` is a regular expression for the
forms of the term that count as a use (plural, spelling, a symbol); it is matched without regard to case,
except inside (?-i:...). tests/test_glossary.py walks the notebooks and fails where a term is used before
its <dfn>, and keeps TERMS in the order the notebooks teach them.
"""
from __future__ import annotations

import difflib
import re
import sys
import textwrap
import types
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    term: str          # as the <dfn> in the notebook spells it
    aliases: str       # regex: every form that counts as a use of the term
    definition: str    # plain words, for someone who writes PyTorch and has never written a GPU kernel
    taught: str        # the notebook (file name without .ipynb) that holds the <dfn>

    def pattern(self) -> re.Pattern:
        return re.compile(self.aliases, re.IGNORECASE)


TERMS = (
    # 00_setup
    Term("kernel", r"\bkernels?\b",
         "A function that runs on the GPU, over many elements at once. Every PyTorch operation on a GPU tensor "
         "(x.cos(), a @ b) runs one or more kernels; this course writes its own.", "00_setup"),
    Term("Triton", r"\bTriton\b",
         "A language and compiler for writing GPU kernels in Python: you write an ordinary-looking Python "
         "function, mark it @triton.jit, and Triton compiles it for the GPU the first time it is launched. "
         "torch.compile also generates Triton kernels.", "00_setup"),
    Term("CUDA", r"(?-i:\bCUDA\b)",
         "NVIDIA's software for programming its GPUs: the driver that talks to the GPU, a compiler, and "
         "libraries of ready-made kernels. Triton and PyTorch's device=\"cuda\" both sit on top of it.",
         "00_setup"),
    Term("interpreter", r"\binterpreter\b",
         "Triton's interpreter (TRITON_INTERPRET=1) runs a kernel on the CPU, element by element in Python, "
         "instead of compiling it for a GPU. Results are right; times are meaningless.", "00_setup"),
    Term("compute capability", r"\bcompute capabilit(y|ies)\b|(?-i:\bsm_\d+\b)",
         "The version number NVIDIA gives each generation of its GPUs, saying what the chip can do: 7.5 for the "
         "T4 (Turing), 8.0 for the A100 (Ampere), 9.0 for the H100 and H200 (Hopper). Compilers write it sm_75, "
         "sm_80, sm_90.", "00_setup"),
    Term("ceiling", r"\bceilings?\b",
         "One of the two speed limits of a GPU this course measures: the copy bandwidth (bytes per second) "
         "and the matmul rate (FLOPs per second). No kernel goes faster than either allows.", "00_setup"),
    Term("bandwidth", r"\bbandwidths?\b",
         "Bytes moved per second, here between HBM and the cores, counting bytes read plus bytes written. "
         "This course measures it with a large copy and states it in GB/s.", "00_setup"),
    Term("HBM", r"(?-i:\bHBM)",
         "High-bandwidth memory: the GPU's main memory, stacked memory chips next to the processor "
         "(80 GB on an H100). Every tensor you allocate lives there; a kernel reads its inputs from it and "
         "writes its outputs to it.", "00_setup"),
    Term("FLOP", r"\bT?FLOPs?\b",
         "A floating-point operation (an add, a multiply). FLOPs counts them; FLOP/s is a rate, and "
         "TFLOP/s is 10^12 of them per second.", "00_setup"),
    Term("tensor cores", r"\btensor[- ]cores?\b",
         "Units inside each SM that do small matrix multiplies in one step, many times faster than the "
         "ordinary arithmetic units. A large matmul in 16-bit floats runs on them; element-wise work "
         "cannot.", "00_setup"),
    Term("kernel fusion", r"\bfus(ion|e|ed|es|ing)\b",
         "Doing in one kernel what would otherwise take several, so that intermediate results stay on chip "
         "instead of being written to HBM by one kernel and read back by the next.", "00_setup"),
    Term("ridge point", r"\bridge\b",
         "The arithmetic intensity at which a kernel's FLOPs take as long as its bytes: the arithmetic rate "
         "divided by the bandwidth. Below it memory sets the time, above it arithmetic does.", "00_setup"),
    Term("launch", r"\blaunch(es|ed|ing)?\b",
         "Starting a kernel: the CPU sends the GPU a command naming the kernel, its arguments and how many "
         "copies of it to run. Each launch has a fixed cost of microseconds, however little the kernel "
         "does.", "00_setup"),
    Term("SM", r"(?-i:\bSMs?\b)|\bstreaming multiprocessors?\b",
         "Streaming multiprocessor: one of the GPU's processors (132 on an H100). Each has its own "
         "arithmetic units, tensor cores, registers and shared memory; the GPU spreads a kernel's work over "
         "all of them.", "00_setup"),
    Term("registers", r"\bregisters?\b",
         "The fastest storage on the GPU, inside each SM. Values a kernel computes between loading and "
         "storing live in registers and cost no memory traffic. Each thread (lesson 01) has its own.", "00_setup"),
    Term("shared memory", r"\bshared memory\b|(?-i:\bSRAM\b)",
         "A small, fast memory inside each SM (SRAM; about 227 KiB in each on an H100). Triton uses it "
         "behind the scenes, for example for the pieces of two matrices being multiplied. The threads of one "
         "program (lesson 01) share it.",
         "00_setup"),
    Term("L2 cache", r"(?-i:\bL2\b)",
         "A cache on the GPU chip between the SMs and HBM (50 MB on an H100), shared by all SMs. Data read "
         "recently may come from L2 instead of HBM, which is why benchmarks flush it.", "00_setup"),
    Term("on chip", r"\bon[- ]chip\b",
         "Inside the GPU's processor: registers, shared memory and the L2 cache. HBM is beside the chip, "
         "and every byte that crosses to it is a trip.", "00_setup"),
    Term("trip", r"\btrips?\b",
         "One pass of a whole tensor across the boundary between HBM and the chip: reading it once, or "
         "writing it once.", "00_setup"),
    Term("instruction", r"\binstructions?\b",
         "One elementary step a processor executes: a multiply, an add, a load. A cosine takes many; a copy, "
         "little more than a load and a store per element.", "00_setup"),
    Term("compute-bound", r"\bcompute[- ]bound\b",
         "Limited by arithmetic: the bytes arrive faster than the cores can use them, so fewer trips would "
         "not help.", "00_setup"),
    Term("memory-bound", r"\bmemory[- ]bound\b",
         "Limited by moving bytes: the arithmetic finishes while the kernel waits for memory, so only "
         "moving fewer bytes makes it faster.", "00_setup"),
    Term("roofline", r"\brooflines?\b",
         "A picture of the two ceilings: attainable FLOP/s against arithmetic intensity, a sloped line "
         "(bandwidth times intensity) that meets a flat one (the arithmetic rate) at the ridge point. A "
         "kernel's time can be no less than the larger of its bytes over the bandwidth and its FLOPs over "
         "the arithmetic rate.", "00_setup"),
    Term("arithmetic intensity", r"\bintensity\b",
         "FLOPs performed per byte moved to or from HBM. Fusion raises it by moving fewer bytes for the same "
         "arithmetic.", "00_setup"),
    # 01_count_the_trips
    Term("eager", r"\beager(ly)?\b",
         "PyTorch's ordinary way of running: each operation runs its own kernel as soon as Python reaches "
         "it, and its result is written to HBM before the next operation starts.", "01_count_the_trips"),
    Term("torch.compile", r"torch\.compile\b",
         "PyTorch's compiler: it traces a function and generates code for it, fusing element-wise "
         "operations into fewer kernels.", "01_count_the_trips"),
    Term("Inductor", r"\bInductor\b",
         "The part of torch.compile that writes the generated code: Triton kernels on a GPU, C++ on a CPU.",
         "01_count_the_trips"),
    Term("aten", r"\baten\b",
         "ATen, PyTorch's library of built-in operators, written in C++. An eager kernel is named after its "
         "operator there: aten.cos for x.cos(), aten.add for +, aten._to_copy for .float() and .half().",
         "01_count_the_trips"),
    Term("program", r"\bprograms?\b",
         "One running copy of a Triton kernel. A launch starts many programs at once, each handling its own "
         "block of the data; they run on the SMs in any order.", "01_count_the_trips"),
    Term("grid", r"\bgrids?\b",
         "How many programs a launch starts: kernel[(P,)](...) launches P programs, numbered 0 to P - 1.",
         "01_count_the_trips"),
    Term("program id", r"\bprogram[ _]ids?\b",
         "The number of one program within the grid, 0, 1, 2, ..., from tl.program_id(0): what tells each "
         "program which block is its own.", "01_count_the_trips"),
    Term("block", r"\bblocks?\b",
         "The elements one program handles, as one vector: BLOCK of them, BLOCK a power of two. "
         "tl.arange(0, BLOCK) gives the offsets inside it.", "01_count_the_trips"),
    Term("lane", r"\blanes?\b",
         "One position of a block's vector; a block of 1024 elements has 1024 lanes.",
         "01_count_the_trips"),
    Term("thread", r"\bthreads?\b",
         "The GPU's smallest unit of execution: one stream of instructions with its own registers. A GPU runs "
         "tens of thousands at once; Triton spreads each program's block over 128 of them (unless asked "
         "for another number) for you.", "01_count_the_trips"),
    Term("mask", r"\bmask(s|ed|ing)?\b",
         "A vector of booleans, one per lane, given to tl.load and tl.store: where it is False nothing is "
         "read or written. It switches off the lanes of the last block that lie past the end of the "
         "tensor.", "01_count_the_trips"),
    Term("pointer", r"\bpointers?\b",
         "A number that says where in memory some data starts. A tensor passed to a kernel arrives as a "
         "pointer to its first element; pointer + offsets addresses one element per lane, counted in "
         "elements of the pointer's dtype, not in bytes.", "01_count_the_trips"),
    Term("constexpr", r"\bconstexpr\b|\bcompile-time constants?\b",
         "A kernel argument declared tl.constexpr: its value is fixed when the kernel is compiled, so the "
         "compiler can use it for shapes (BLOCK) and unroll loops over it. Each new value compiles a new "
         "kernel.", "01_count_the_trips"),
    Term("unroll", r"\bunroll(s|ed|ing)?\b",
         "To copy a loop's body out once per pass when compiling, so the loop costs no counting at run "
         "time. A loop over tl.static_range(K), with K a constexpr, is unrolled.", "01_count_the_trips"),
    Term("DRAM", r"(?-i:\bDRAM\b)",
         "Dynamic memory: the dense, cheap memory chips that main memories are built from. HBM is DRAM; the "
         "profiler's counters of HBM traffic are named after it.", "01_count_the_trips"),
    Term("Nsight Compute", r"\bNsight Compute\b",
         "NVIDIA's kernel profiler (the ncu command): it reruns each kernel and reads the GPU's hardware "
         "counters, such as the bytes that really crossed to and from HBM.", "01_count_the_trips"),
    # 02_launch_tax
    Term("CUDA graph", r"\bCUDA graphs?\b",
         "A recording of a sequence of kernel launches that can be replayed with one call, which saves the "
         "CPU's work for each launch.", "02_launch_tax"),
    Term("stream", r"\bstreams?\b",
         "A queue of GPU work: kernels on one stream run in the order they were queued. PyTorch queues on "
         "a default stream; a side stream is a second queue.", "02_launch_tax"),
    Term("asynchronous", r"\basynchron(ous|ously|y)\b",
         "The CPU and the GPU working at the same time: a launch only queues the kernel and returns, and the "
         "CPU goes on while the GPU runs it. Python waits only when it needs a result, or at "
         "torch.cuda.synchronize().", "02_launch_tax"),
    Term("CUDA events", r"\bCUDA events?\b",
         "Markers put into a stream that the GPU stamps with its own clock when it reaches them: the difference "
         "of two stamps is the GPU time of the work queued between them, whatever the CPU did meanwhile. "
         "triton.testing.do_bench times with them.", "02_launch_tax"),
    Term("dispatch", r"\bdispatch(es|ed|ing)?\b",
         "The CPU's work of handing one operation from Python to the GPU: PyTorch checks the arguments, picks "
         "the kernel for their dtype and device, allocates the output and launches. Every eager operation pays "
         "it.", "02_launch_tax"),
    Term("caching allocator", r"\ballocator\b",
         "PyTorch's GPU memory manager: it keeps memory freed by tensors in pools and hands it out again, "
         "instead of asking the driver each time.", "02_launch_tax"),
    Term("guard", r"\bguard(s|ed|ing)?\b",
         "A check placed in front of some code, so that the code runs only where it is valid. torch.compile's "
         "guards check on every call that the inputs still match what its generated code was compiled for "
         "(shapes, dtypes, devices), and compile again if not; lesson 08's guard keeps -inf - (-inf) out of a "
         "running max.", "02_launch_tax"),
    Term("launch-bound", r"\blaunch[- ]bound\b",
         "Limited by the fixed cost of launching: the kernel's own work takes less time than starting it.",
         "02_launch_tax"),
    Term("decode", r"\bdecod(e|es|ing)\b",
         "Generating text one token at a time: each step runs the whole model on a single new token, so its "
         "tensors are tiny.", "02_launch_tax"),
    Term("Nsight Systems", r"\bNsight Systems\b",
         "NVIDIA's profiler that draws a program's CPU calls and GPU kernels on one time axis.",
         "02_launch_tax"),
    Term("NVML", r"\bNVML\b",
         "NVIDIA Management Library: the driver's interface for monitoring a GPU (what nvidia-smi reads).",
         "02_launch_tax"),
    Term("thread block", r"\bthread blocks?\b",
         "CUDA's name for a group of threads that runs together on one SM; a Triton program runs as one "
         "thread block.", "02_launch_tax"),
    Term("fused multiply-add", r"\bfused multiply-adds?\b|(?-i:\bFMAs?\b)",
         "One instruction that computes a * b + c and rounds once, where a separate multiply and add round "
         "twice; compilers merge the two when they can.", "02_launch_tax"),
    # 03_first_triton_kernel
    Term("warp", r"\bwarps?\b",
         "32 threads that execute the same instruction together. A Triton program runs on num_warps warps "
         "(4 by default: 128 threads).", "03_first_triton_kernel"),
    Term("CUDA context", r"\bCUDA context\b",
         "The GPU state a process holds: its memory, its loaded kernels. A fatal error such as an illegal "
         "memory access breaks it, and every tensor with it, until the process restarts.",
         "03_first_triton_kernel"),
    Term("host", r"\bhost\b",
         "The CPU side of a GPU program: the Python that allocates, chooses the grid and launches.",
         "03_first_triton_kernel"),
    Term("in flight", r"\bin flight\b",
         "Requested but not finished: a load waiting for its bytes to arrive from HBM. Keeping many loads in "
         "flight at once is how a kernel reaches the bandwidth.", "03_first_triton_kernel"),
    # 04_fuse_bias_gelu
    Term("issue", r"\bissu(e|es|ed|ing)\b",
         "To start one instruction on its way to the arithmetic units. Each clock, an SM issues at most a few "
         "warp instructions (4 on an H100 or an H200), each for the 32 threads of a warp: a kernel that needs "
         "more instructions per byte than that allows cannot keep up with the memory.", "04_fuse_bias_gelu"),
    Term("SASS", r"(?-i:\bSASS\b)",
         "The GPU's own machine instructions, the last form a kernel is compiled to. Counting a kernel's SASS "
         "instructions says how much work it gives the cores for each element.", "04_fuse_bias_gelu"),
    Term("libdevice", r"\blibdevice\b",
         "NVIDIA's library of math functions for GPU code (erff, expf, ...), compiled into a kernel that calls "
         "them: Triton's tl.erf is libdevice's erff.", "04_fuse_bias_gelu"),
    Term("tile", r"\btil(e|es|ed|ing)\b",
         "A 2-D block: the rows and columns of a matrix (or of an output) one program handles at once. A tiled "
         "matmul computes its output one tile per program.", "04_fuse_bias_gelu"),
    Term("persistent kernel", r"\bpersistent\b",
         "A kernel launched with about one program per SM, each looping over many blocks, instead of one "
         "program per block.", "04_fuse_bias_gelu"),
    # 05_fused_add_norm
    Term("reduction", r"\breductions?\b",
         "An operation that combines many values into one: a sum, a max, a mean. tl.sum and tl.max reduce a "
         "block inside a kernel.", "05_fused_add_norm"),
    Term("spill", r"\bspill(s|ed|ing)?\b",
         "When a thread needs more values than its registers hold, the compiler puts the rest in local memory, "
         "which lives in HBM: the kernel pays trips it was written to avoid.", "05_fused_add_norm"),
    Term("local memory", r"\blocal memory\b",
         "A thread's private overflow memory: it lives in HBM (reached through the caches), so what is "
         "spilled there costs trips.", "05_fused_add_norm"),
    Term("L1 cache", r"(?-i:\bL1\b)",
         "A small cache inside each SM, in front of L2; it shares its space with shared memory.",
         "05_fused_add_norm"),
    # 06_fused_softmax
    Term("latency", r"\blatenc(y|ies)\b",
         "The time one access takes from its issue to its answer; a load from HBM takes many times longer than "
         "an arithmetic instruction. A kernel that keeps too few loads in flight spends that time waiting, and "
         "reaches neither the bandwidth nor the arithmetic rate.", "06_fused_softmax"),
    Term("online softmax", r"\bonline softmax\b",
         "Softmax computed in one walk over a row, keeping a running max and a running sum, and rescaling the "
         "sum whenever the max grows.", "06_fused_softmax"),
    # 07_fused_epilogue
    Term("accumulator", r"\baccumulat(or|ors|e|es|ed|ing|ion)\b",
         "The running sums a matmul builds its output tile in, kept in registers (in fp32) while it walks "
         "the shared dimension.", "07_fused_epilogue"),
    Term("epilogue", r"\bepilogues?\b",
         "What a matmul kernel does to its finished output tile between the last sum and the store: a bias, "
         "an activation, a cast. Fused there, it costs no trip.", "07_fused_epilogue"),
    Term("cuBLAS", r"\bcuBLAS\b",
         "NVIDIA's library of matrix multiplies; a @ b on a GPU calls it.", "07_fused_epilogue"),
    Term("pipeline", r"\bpipelin\w*",
         "Loading the next tiles while the current ones are being multiplied; the depth (num_stages) says how "
         "many are in flight.", "07_fused_epilogue"),
    Term("warp specialization", r"\bwarp[- ]speciali[sz](ation|ed)\b",
         "Giving the warps of one program different jobs: some only load tiles, some only multiply them, some "
         "run the epilogue, each handing its work on to the next, so that loads, math and epilogue overlap "
         "instead of taking turns.", "07_fused_epilogue"),
    Term("FlashAttention", r"\bFlashAttention\b",
         "Attention in one fused kernel: scores and probabilities are computed tile by tile with an online "
         "softmax and never written to HBM. Lesson 09 builds its forward pass.", "07_fused_epilogue"),
    # 09_flash_attention
    Term("SDPA", r"(?-i:\bSDPA\b)",
         "torch.nn.functional.scaled_dot_product_attention: PyTorch's built-in attention, which picks a fused "
         "back-end (flash, cuDNN, memory-efficient) where it can.", "09_flash_attention"),
    Term("cuDNN", r"\bcuDNN\b",
         "NVIDIA's library of deep-learning kernels (convolutions, attention); one of SDPA's back-ends.",
         "09_flash_attention"),
    Term("causal", r"\bcausal\b",
         "Attention in which each token attends only to itself and earlier tokens, as a language model "
         "generating text must.", "09_flash_attention"),
    Term("TMA", r"(?-i:\bTMA\b)",
         "Tensor Memory Accelerator: a copy engine on Hopper GPUs (H100, H200) that moves a whole tile between "
         "HBM and shared memory from one descriptor, instead of every thread computing its own addresses.",
         "09_flash_attention"),
    Term("autotuning", r"\bautotun\w*",
         "Timing a handful of launch settings (tile sizes, warps, pipeline depth) on the real problem and "
         "keeping the fastest; @triton.autotune does it per input shape.", "09_flash_attention"),
    Term("occupancy", r"\boccupancy\b",
         "How many programs (warps) run on an SM at once. More of them hide more memory waits; big tiles and "
         "many registers per thread lower it.", "09_flash_attention"),
    # lab3_cross_entropy
    Term("log-sum-exp", r"\blog-sum-exp\b|(?-i:\bLSE\b)",
         "log Σ exp(x) over a row, computed stably as max + log Σ exp(x − max): the normaliser of a softmax, "
         "and what a backward pass needs saved.", "lab3_cross_entropy"),
    # lab4_flash_attention_backward
    Term("atomics", r"\batomics?\b",
         "Read-modify-write operations on memory (tl.atomic_add) that stay correct when many programs update "
         "the same place at once; slower than a plain store.", "lab4_flash_attention_backward"),
    # lab5_flash_decoding
    Term("KV cache", r"\bKV[- ]cache\b",
         "The keys and values of every token generated so far, kept in HBM so that each new token attends "
         "to them without recomputing them.", "lab5_flash_decoding"),
    Term("GQA", r"(?-i:\bGQA\b)|\bgrouped-query attention\b",
         "Grouped-query attention: several query heads share one key/value head, which shrinks the KV cache.",
         "lab5_flash_decoding"),
)


class UnknownTerm(KeyError):
    """A term the glossary does not hold. A KeyError, so `except KeyError` still catches it, whose message
    prints as a sentence (a plain KeyError would show it in quotes)."""

    def __str__(self) -> str:
        return self.args[0]


def _close(key: str) -> list[str]:
    """The terms a misspelt or partial name most likely meant: those that contain it, then those spelt alike."""
    names = [t.term for t in TERMS]
    containing = [n for n in names if key.lower() in n.lower() or n.lower() in key.lower()]
    alike = difflib.get_close_matches(key.lower(), [n.lower() for n in names], n=3, cutoff=0.65)
    near = containing + [n for n in names if n.lower() in alike and n not in containing]
    return near[:5]


def _find(name: str) -> Term:
    key = name.strip()
    for t in TERMS:
        if t.term.lower() == key.lower() or t.pattern().fullmatch(key):
            return t
    near = _close(key) if key else []
    what = (f"did you mean {', '.join(repr(n) for n in near)}? Ask for one of them, as in "
            f"cu.glossary({near[0]!r}); cu.glossary() lists every term" if near else
            "cu.glossary() lists every term, under the lesson that teaches it")
    raise UnknownTerm(f"{name!r} is not in the course's glossary: {what}.")


def where(t: Term) -> str:
    folder = "labs" if t.taught.startswith("lab") else "notebooks"
    return f"taught in {folder}/{t.taught}.ipynb"


def _order(taught: str) -> int:
    """A notebook's place in the reading order: 00 .. 09, then lab 1 .. lab 6."""
    return int(taught[3]) + 100 if taught.startswith("lab") else int(taught[:2])


def _entry(t: Term, with_where: bool = True) -> str:
    body = textwrap.fill(f"{t.term}: {t.definition}", 100, subsequent_indent="    ")
    return body + (f"\n    ({where(t)})" if with_where else "")


def text(term: str | None = None, upto: str | None = None) -> str:
    """One term's entry, or every entry in the order the course teaches them, under the notebook that
    teaches them; upto="03" (or "lab2") stops after that notebook's terms."""
    if term is not None:
        return _entry(_find(term))
    last = None
    if upto is not None:
        if not re.fullmatch(r"\d\d|lab\d", str(upto)):
            raise ValueError(f"upto={upto!r}: give a lesson's number (\"03\") or a lab (\"lab2\")")
        last = _order(str(upto))
    parts, heading = [], None
    for t in TERMS:
        if last is not None and _order(t.taught) > last:
            break
        if t.taught != heading:
            heading = t.taught
            parts.append(f"== {where(t)} ==")
        parts.append(_entry(t, with_where=False))
    return "\n\n".join(parts)


def glossary(term: str | None = None, upto: str | None = None) -> None:
    """Print the definition of `term` (any of its forms: "SMs", "SRAM"), or, with no term, all of them under
    the notebook that teaches them; upto="03" stops after lesson 03's."""
    if term is not None and not isinstance(term, str):
        raise TypeError(f"cu.glossary takes a term as a string, such as cu.glossary('HBM'); got {term!r}")
    try:
        found = text(term, upto)
    except (UnknownTerm, ValueError) as e:
        raise e.with_traceback(None) from None   # the sentence is what helps, not the glossary's own frames
    print(found)


class _CallableModule(types.ModuleType):
    """`cu.glossary("HBM")` prints, while `cu.glossary.TERMS` stays the data: the module is the function."""

    def __call__(self, term: str | None = None, upto: str | None = None) -> None:
        glossary(term, upto)


sys.modules[__name__].__class__ = _CallableModule
