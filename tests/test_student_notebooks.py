"""The strict run of the generated student notebooks: the stubs fail the way a student will see them.

Every student notebook (notebooks/*.ipynb, labs/*.ipynb) runs top to bottom in a fresh kernel with
errors allowed, then:
  * a cell whose stub `raise NotImplementedError(...)` runs at the cell's top level raised exactly that;
  * a `check` cell raised a check failure (CHECK_FAILURES): the checker rejects the unwritten exercise;
  * a cell without the tag `raises-exception` ran without error.
nbval (`./course test`) also runs these notebooks, but it does not verify that a `raises-exception`
cell really raises; this test does.

Each notebook gets its own test class so that `pytest -n 2 --dist loadscope` spreads them over workers.
"""
import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest

import nbrun

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("course_generate", ROOT / "tools" / "generate.py")
gen = sys.modules.setdefault("course_generate", importlib.util.module_from_spec(_spec))
if not hasattr(gen, "student_notebook"):
    _spec.loader.exec_module(gen)

# The exception names a `check` cell may end with: checkers raise course_utils.check.CheckFailed, lab
# graders course_utils.grade.GradeFailed, both subclasses of AssertionError.
# Add a name here only for another AssertionError subclass.
CHECK_FAILURES = {"AssertionError", "CheckFailed", "GradeFailed"}


def _notebooks(*folders):
    return [p for d in folders for p in sorted((ROOT / d).glob("*.ipynb"))]


STUDENT = _notebooks("notebooks", "labs")
SOLUTIONS = _notebooks("solutions", "solutions/labs")


def execute(path: Path):
    """Run the notebook headless, errors allowed; return the executed notebook."""
    nb = nbformat.read(path, as_version=4)
    nb.cells = nbrun.execute(path, headless=True)[0]
    return nb


def top_level_raise_stub(source: str) -> bool:
    """Does this student cell hold a `raise NotImplementedError` stub outside any function?"""
    lines = source.split("\n")
    stubs = [i + 1 for i in range(1, len(lines))
             if lines[i].strip().startswith("raise NotImplementedError(") and lines[i - 1].strip() == "# YOUR CODE HERE"]
    if not stubs:
        return False
    tree = gen.ast.parse(gen.mask_magics(lines))
    return any(not gen._enclosing_functions(tree, n) for n in stubs)


def error_of(cell):
    errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
    return errors[0] if errors else None


def problems_in(nb) -> list[str]:
    """What went wrong in an executed student notebook, one line per cell."""
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.get("tags", [])
        err = error_of(cell)
        got = f"{err.ename}: {err.evalue.strip().splitlines()[0][:200] if err.evalue.strip() else ''}" if err else "no error"
        first = next((ln for ln in cell.source.split("\n") if ln.strip()), "")[:70]
        where = f"cell {i} ({first!r})"
        if top_level_raise_stub(cell.source):
            if not err or err.ename != "NotImplementedError":
                out.append(f"{where}: its stub should raise NotImplementedError; got {got}")
        elif "check" in tags:
            if not err or err.ename not in CHECK_FAILURES:
                out.append(f"{where}: the check should fail on the stubs with one of {sorted(CHECK_FAILURES)}; "
                           f"got {got}" + (" (the checker accepts an unwritten exercise)" if not err else ""))
        elif "raises-exception" not in tags and err:
            out.append(f"{where}: raised {got}, but the cell is not tagged raises-exception")
    return out


class _StrictRun:
    notebook: Path

    def test_strict_run(self):
        nb = execute(self.notebook)
        problems = problems_in(nb)
        assert not problems, f"{self.notebook.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


for _p in STUDENT:
    _name = "TestStrict_" + re.sub(r"\W", "_", _p.relative_to(ROOT).with_suffix("").as_posix())
    globals()[_name] = type(_name, (_StrictRun,), {"notebook": _p})


def test_student_notebooks_exist():
    if not STUDENT:
        pytest.skip("no student notebooks yet (generate them with: python tools/generate.py)")


# --- static: every check has an exercise before it --------------------------------------------------
@pytest.mark.parametrize("path", SOLUTIONS or [pytest.param(None, marks=pytest.mark.skip("no solution notebooks yet"))],
                         ids=lambda p: p.relative_to(ROOT).as_posix() if p else "none")
def test_every_check_follows_an_exercise(path):
    """A `check` or `uses-exercise` cell needs a solution region at or before it: else the student has
    nothing to write, and the check cannot fail on the stubs."""
    nb = nbformat.read(path, as_version=4)
    regions, bad = 0, []
    for i, cell in enumerate(nb.cells):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or "solution-only" in tags:
            continue
        regions += len(gen.find_regions(cell.source, f"cell {i}"))
        if regions == 0 and {"check", "uses-exercise"} & set(tags):
            bad.append(f"cell {i} is tagged {sorted({'check', 'uses-exercise'} & set(tags))} but no "
                       "### BEGIN SOLUTION region comes at or before it")
    assert not bad, "\n".join(bad)


def test_the_rules_on_a_made_up_run():
    """problems_in, without a kernel: what each kind of cell must have done."""
    def ran(source, *tags, error=None):
        c = nbformat.v4.new_code_cell(source)
        c.metadata["tags"] = list(tags)
        if error:
            c.outputs = [nbformat.v4.new_output("error", ename=error, evalue="boom", traceback=[])]
        return c
    stub = '# YOUR CODE HERE\nraise NotImplementedError("x")'
    good = nbformat.v4.new_notebook(cells=[
        ran("x = 1"),
        ran(stub, "raises-exception", "stub", error="NotImplementedError"),
        ran("def f():\n    " + stub.replace("\n", "\n    "), "raises-exception", "stub"),
        ran("check.f(f)", "check", "raises-exception", error="CheckFailed"),
        ran("f()", "uses-exercise", "raises-exception", error="NameError"),
    ])
    assert problems_in(good) == []
    bad = nbformat.v4.new_notebook(cells=[
        ran("1/0", error="ZeroDivisionError"),
        ran(stub, "raises-exception", "stub", error="NameError"),
        ran("check.f(f)", "check", "raises-exception"),
        ran("check.f(f)", "check", "raises-exception", error="TypeError"),
    ])
    assert [p.split(":")[0] for p in problems_in(bad)] == ["cell 0 ('1/0')", "cell 1 ('# YOUR CODE HERE')",
                                                          "cell 2 ('check.f(f)')", "cell 3 ('check.f(f)')"]
