"""What the checkers of the one-program-per-row exercises (lessons 05 and 06) share: a run of the student's
function whose crash, where its cause can be read from it, is told in the words of those exercises."""
from __future__ import annotations

import re

from ._core import CheckFailed, run

# What the bounds-checked interpreter says of an access outside every tensor (course_utils/_interp.py)
_OUTSIDE = re.compile(r"\(program_id (\d+)\).*?Nearest argument: `(\w+)` \((\d+) elements\); those lanes would "
                      r"touch elements (\d+)\.\.(\d+)\.", re.S)
# Triton's words for a reduction along an axis the block lacks: the interpreter's, then the compiler's
_NO_SUCH_AXIS = ("out of bounds for shape", "invalid axis")
# Triton's words for tl.load(ptr + one_number, mask=block_mask)
_SCALAR_POINTER = "Mask argument cannot be block type if pointer argument is not a block"


def row_start(e: CheckFailed, m: int, n: int, who: str) -> CheckFailed | None:
    """The diagnosis of rows placed BLOCK apart (offsets row * BLOCK + cols) in an (m, n) case, or None.

    Program p of such a kernel reads elements p·B .. p·B + n − 1, B the block's power-of-two width, where row
    p is at p·n .. p·n + n − 1. The rows before it stay inside the tensor (reading the wrong elements); the
    last ones run past its end, where the interpreter stops the program: the lanes it names lie in row p
    placed B apart, past the tensor's last element."""
    if e.diagnosis != "out-of-bounds":
        return None
    found = _OUTSIDE.search(str(e))
    if not found:
        return None
    p, numel, lo, hi = int(found[1]), int(found[3]), int(found[4]), int(found[5])
    b = 1 << max(0, (n - 1).bit_length())       # the block's width: the power of two at or above n
    start = p * b                               # where program p reads its row when rows are b apart
    # the lanes named are those of that row past the tensor's end; the interpreter names only the ones that
    # fall outside every argument, so where the row runs on into another tensor they are fewer
    if p < 1 or b == n or numel != m * n or not (start <= lo and numel <= lo <= hi <= start + n - 1):
        return None
    hi = start + n - 1
    before = {1: "", 2: "Row 1 was", 3: "Rows 1 and 2 were"}.get(p, f"Rows 1 to {p - 1} were")
    earlier = f"{before} read from the wrong elements too, inside the tensor; row {p}" if before else f"Row {p}"
    return CheckFailed(
        f"`{who}`: program {p} read its row at elements {start}..{hi}, that is {p} × {b} onwards: the rows were "
        f"placed {b} elements apart, the block's width. The rows of a contiguous (M, N) tensor lie one after "
        f"another, N = {n} elements each, so row r starts at r · N: row {p} at {p * n}. The block is only "
        f"as wide as the power of two that holds a row; its padded lanes are masked, not stored in memory. "
        f"{earlier} ran past the end of `{found[2]}` ({numel} elements), which is where the interpreter "
        "stopped it.", "row-start")


def no_such_axis(e: CheckFailed) -> CheckFailed | None:
    """A reduction along axis 1 of a 1-D block: Triton's error, already explained (hints.explain), given the
    key of the hint that shows tl.max and tl.sum; None for any other failure."""
    if e.diagnosis is None and any(words in str(e) for words in _NO_SUCH_AXIS):
        return CheckFailed(str(e), "axis")
    return None


def run_rows(fn, *args, name: str, m: int, n: int, scalar_pointer: str = ""):
    """run(fn, *args) on an (m, n) case; a crash whose cause shows in it is re-raised with that cause.

    scalar_pointer: what the exercise says when a load got one address with a block's mask."""
    try:
        return run(fn, *args, name=name)
    except CheckFailed as e:
        told = row_start(e, m, n, name) or no_such_axis(e)
        if told is None and scalar_pointer and e.diagnosis is None and _SCALAR_POINTER in str(e):
            told = CheckFailed(f"{str(e).splitlines()[0]}\n{scalar_pointer}", "weight-index")
        if told is None:
            raise
        raise told from None
