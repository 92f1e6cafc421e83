"""Contract and checker in step: every case an exercise's checker (lessons 03-09, check.<name>) or grader
(labs 1-6, grade.<lab>) tries is named in the exercise's contract, the text a student reads before writing.

The cases come from the checker itself: each declares them once, in a module-level CASES, (name, what it is)
pairs (a dict of such tuples by exercise where one module checks several), and labels what it tries with
those names; a checker that makes bad calls (each to be refused with a ValueError) lists them in BAD_CALLS,
named the same way. The contract is the stub cells of the exercise (its code cells with a solution region, after
the previous exercise's check cell) and the markdown cells right before each. The notebooks are parsed,
not run."""
import contextlib
import importlib
import re
from pathlib import Path

import nbformat
import pytest

from course_utils import environment
from course_utils.check import _core

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "solutions").glob("0[3-9]_*.ipynb")) + sorted((ROOT / "solutions" / "labs").glob("lab*.ipynb"))
CHECK_CALL = re.compile(r"\b(check|grade)\.(\w+)\(")


def _exercises():
    found = []
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        stubs = []
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and "### BEGIN SOLUTION" in cell.source:
                stubs.append(i)
            if "check" in cell.metadata.get("tags", []):
                kind, name = CHECK_CALL.search(cell.source).groups()
                found.append(pytest.param(path, kind, name, tuple(stubs), id=f"{path.stem}:{name}"))
                stubs = []
    return found


EXERCISES = _exercises()


def contract(path, stubs) -> str:
    """The stub cells and the markdown right before each, as one normalised text: lower case, markdown
    emphasis, code quotes and comment marks gone, every run of white space one space."""
    nb = nbformat.read(path, as_version=4)
    parts = []
    for i in stubs:
        j = i
        while j > 0 and nb.cells[j - 1].cell_type == "markdown":
            j -= 1
        parts += [nb.cells[k].source for k in range(j, i + 1)]
    text = "\n".join(parts)
    text = re.sub(r"^\s*#+ ?", " ", text, flags=re.M)
    text = text.replace("`", "").replace("*", "").replace("’", "'").replace("\u2009", " ")
    return re.sub(r"\s+", " ", text).lower()


def named(name: str, text: str) -> bool:
    phrase = re.sub(r"\s+", " ", name.replace("`", "")).lower()
    return re.search(r"(?<![\w])" + re.escape(phrase) + r"(?![\w])", text) is not None


@contextlib.contextmanager
def sizes_of(module, gpu: bool):
    """The checker's module as it reads on a GPU (gpu=True) or on the CPU: its sizes come from pick(), read when
    it is imported; afterwards, as it was."""
    if gpu == (environment.ON_GPU and not environment.INTERPRET):
        yield module
        return
    held = environment.ON_GPU, environment.INTERPRET
    environment.ON_GPU, environment.INTERPRET = gpu, not gpu
    try:
        yield importlib.reload(module)
    finally:
        environment.ON_GPU, environment.INTERPRET = held
        importlib.reload(module)


def cases_of(kind: str, name: str, gpu: bool | None = None):
    """(the checker's module, its cases): on this machine, or as a GPU (gpu=True) or the CPU would try them."""
    import course_utils.check as check
    import course_utils.grade as grade
    fn = getattr(check if kind == "check" else grade, name)
    module = importlib.import_module(getattr(fn, "__wrapped__", fn).__module__)
    if gpu is not None:
        with sizes_of(module, gpu):
            return module, cases_of(kind, name)[1]
    cases = getattr(module, "CASES", None)
    assert cases is not None, f"{module.__name__} declares no CASES: what does {kind}.{name} try?"
    if isinstance(cases, dict):
        cases = cases[name]
    cases = tuple(cases) + tuple(getattr(module, "BAD_CALLS", ()))     # the calls it must refuse, too
    cases = tuple((c, "") if isinstance(c, str) else c for c in cases)  # a bare name: the phrase is the case
    assert cases and all(isinstance(n, str) and isinstance(w, str) for n, w in cases), cases
    return module, cases


def test_every_exercise_is_found():
    names = {p.values[2] for p in EXERCISES}
    assert {"vector_add", "scaled_add", "bias_gelu", "add_layernorm", "add_rmsnorm", "softmax", "matmul_bias_gelu",
            "online_softmax", "flash_attention", "swiglu", "cross_entropy", "flash_backward", "flash_decoding",
            "decode_step"} <= names, names
    assert all(p.values[3] for p in EXERCISES), "an exercise without a stub cell"


def every_item_named(name: str, text: str) -> bool:
    """A list of sizes ("n = 1000, 1, 37 and 1048593") whose items are each named in the text: how a contract
    gives a GPU's sizes, beside the CPU's ("4095 (1048593 on a GPU)")."""
    head, _, items = name.rpartition("= ") if "= " in name else ("", "", name)
    parts = [p.strip() for p in re.split(r",| and ", items) if p.strip()]
    if parts and not named(parts[-1], text):           # "... and 100003 elements": the unit follows the last
        last, _, unit = parts[-1].partition(" ")
        parts[-1:] = [last] + ([unit] if unit else [])
    return all(named(p, text) for p in parts) and (not head or named(head.strip(), text))


@pytest.mark.parametrize("path, kind, name, stubs", EXERCISES)
def test_every_case_the_checker_tries_is_named_in_the_contract(path, kind, name, stubs):
    # the CPU's cases as the contract lists them; a GPU's, whose sizes differ, each named (on either machine)
    text = contract(path, stubs)
    module, cases = cases_of(kind, name, gpu=False)
    missing = [case for case, _ in cases if not named(case, text)]
    _, on_gpu = cases_of(kind, name, gpu=True)
    missing += [f"{case} (on a GPU)" for case, _ in on_gpu if not named(case, text) and not every_item_named(case, text)]
    assert not missing, (f"{kind}.{name} ({module.__name__}) tries what the contract of {path.name} does not "
                         f"name: {missing}")


@pytest.mark.parametrize("path, kind, name, stubs", [p for p in EXERCISES if p.values[1] == "check"])
def test_a_lesson_budget_gives_its_slack(path, kind, name, stubs):
    # check/_core.budget lets the bytes run over by its slack: the contract says by how much
    slack = f"{round(100 * _core.BYTES_SLACK)} %"
    assert slack in contract(path, stubs), f"the contract of {name} ({path.name}) does not give the slack {slack}"


def test_a_case_the_contract_leaves_out_is_caught():
    # the check can fail: lab 5's contract without the falling scores, and a size that is a prefix of another
    path, kind, name, stubs = next(p.values for p in EXERCISES if p.values[2] == "flash_decoding")
    module, _ = cases_of(kind, name)
    text = contract(path, stubs)
    assert named(module.FALLING, text)
    assert not named(module.FALLING, text.replace("scores that fall steadily", "scores that fall"))
    assert not named("n = 1", "n = 1000, 37") and named("n = 1", "sizes n = 1, 37")
    # a GPU's sizes, given beside the CPU's: each must be there
    gpu = "n = 1000, 1, 37, 1025 and 1048593"
    assert every_item_named(gpu, "tries n = 1000, 1, 37, 1025 and 4095 (1048593 on a gpu)")
    assert not every_item_named(gpu, "tries n = 1000, 1, 37, 1025 and 4095")
