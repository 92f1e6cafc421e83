"""The student-notebook generator (tools/generate.py): its stub rules, and that the committed student
notebooks are up to date with their solutions (the CI check)."""
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("course_generate", ROOT / "tools" / "generate.py")
gen = sys.modules["course_generate"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

KERNEL = '''\
import triton
import triton.language as tl

@triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    ### BEGIN SOLUTION: load a block, scale it, store it
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
    ### END SOLUTION
'''

WRAPPER = '''\
def scale(x):
    out = torch.empty_like(x)
    ### BEGIN SOLUTION
    grid = (triton.cdiv(x.numel(), 128),)
    scale_kernel[grid](x, out, x.numel())
    ### END SOLUTION
    return out
'''


def cell(source, *tags):
    c = new_code_cell(source)
    if tags:
        c.metadata["tags"] = list(tags)
    return c


def student(*cells):
    return gen.student_notebook(new_notebook(cells=list(cells)), "test.ipynb")


def compiles(source):
    compile(gen.mask_magics(source.split("\n")), "<stub>", "exec")


# --- the stubs ----------------------------------------------------------------------------------------
def test_raise_stub_with_default_hint_at_the_code_indentation():
    new, regions = gen.stub_source(WRAPPER)
    assert new == ('def scale(x):\n    out = torch.empty_like(x)\n    # YOUR CODE HERE\n'
                   '    raise NotImplementedError("write this part")\n    return out\n')
    assert len(regions) == 1 and regions[0].in_function and not regions[0].in_jit
    compiles(new)


def test_triton_jit_gets_a_pass_stub_with_the_hint():
    new, regions = gen.stub_source(KERNEL)
    assert "    pass  # YOUR CODE HERE: load a block, scale it, store it\n" in new
    assert "raise" not in new and "tl.store" not in new and "BEGIN SOLUTION" not in new
    assert regions[0].in_jit
    compiles(new)


@pytest.mark.parametrize("decorator", ["@triton.jit", "@triton.jit(debug=True)", "@jit", "@tl.core.jit"])
def test_any_spelling_of_jit_counts(decorator):
    new, _ = gen.stub_source(f"{decorator}\ndef k(x):\n    ### BEGIN SOLUTION\n    y = x\n    ### END SOLUTION\n")
    assert new.endswith("def k(x):\n    pass  # YOUR CODE HERE: write this part\n")


def test_other_decorators_get_a_raise():
    new, _ = gen.stub_source("@torch.no_grad()\ndef f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n")
    assert 'raise NotImplementedError("write this part")' in new


def test_a_whole_kernel_in_a_region_is_module_level():
    src = "### BEGIN SOLUTION: write the kernel\n@triton.jit\ndef k(x):\n    pass\n### END SOLUTION\n"
    new, regions = gen.stub_source(src)
    assert new == '# YOUR CODE HERE\nraise NotImplementedError("write the kernel")\n'
    assert not regions[0].in_function and not regions[0].in_jit


def test_hint_text_is_a_safe_python_string():
    new, _ = gen.stub_source('### BEGIN SOLUTION:  use "tl.where" \\ or not  \nx = 1\n### END SOLUTION')
    assert new.endswith('raise NotImplementedError("use \\"tl.where\\" \\\\ or not")')
    ns = {}
    with pytest.raises(NotImplementedError, match=r'use "tl.where" \\ or not'):
        exec(new, ns)


def test_several_regions_and_nested_indentation_stay_parseable():
    src = ("def f(xs):\n    total = 0\n    for x in xs:\n        ### BEGIN SOLUTION: add x\n"
           "        total += x\n        ### END SOLUTION\n    return total\n"
           "### BEGIN SOLUTION\ny = f([1])\n### END SOLUTION\nprint(y)\n")
    new, regions = gen.stub_source(src)
    assert len(regions) == 2
    assert '        # YOUR CODE HERE\n        raise NotImplementedError("add x")\n    return total' in new
    compiles(new)


def test_region_that_was_a_whole_function_body_still_parses():
    new, _ = gen.stub_source("def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\nprint(1)")
    compiles(new)
    assert new.startswith("def f(x):\n    # YOUR CODE HERE\n    raise")


def test_magics_are_allowed_around_regions():
    new, _ = gen.stub_source("%matplotlib inline\n!nvidia-smi\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION")
    assert new.startswith("%matplotlib inline\n!nvidia-smi\n# YOUR CODE HERE\n")
    compiles(new)


def test_cells_without_regions_are_untouched():
    src = "x = 1  # no markers here\n"
    assert gen.stub_source(src) == (src, [])


@pytest.mark.parametrize("src, message", [
    ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
    ("x = 1\n### END SOLUTION\n", "without BEGIN"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "inside another"),
    ("if x:\n    ### BEGIN SOLUTION\n    y = 1\n### END SOLUTION\n", "indentation"),
    ("x = 1  ### END SOLUTION\n", "alone on its line"),
    ("x = (\n### BEGIN SOLUTION\n1\n### END SOLUTION\n)\n", "does not parse"),
])
def test_malformed_sources_are_refused_with_a_location(src, message):
    with pytest.raises(gen.SourceError, match=message):
        gen.stub_source(src, "nb.ipynb, cell 3")


# --- the notebook: tags, dropped cells, stripped outputs ---------------------------------------------
def test_tags_added_to_the_student_version():
    nb = student(cell("import torch"), cell(KERNEL), cell(WRAPPER), cell("check.scale(scale)", "check"),
                 cell("plot(scale(x))", "uses-exercise"))
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert tags == [[], ["stub"], ["raises-exception", "stub"], ["check", "raises-exception"],
                    ["uses-exercise", "raises-exception"]]


def test_solution_only_cells_are_dropped_and_markdown_kept():
    nb = student(new_markdown_cell("# Lesson"), cell("print('answer: 42')", "solution-only"), cell("x = 1"))
    assert [c.source for c in nb.cells] == ["# Lesson", "x = 1"]


def test_markers_in_markdown_are_refused():
    with pytest.raises(gen.SourceError, match="markdown"):
        student(new_markdown_cell("### BEGIN SOLUTION\nthe answer\n### END SOLUTION"))


def test_outputs_and_counts_stripped_metadata_minimal_and_bytes_stable():
    src = new_notebook(cells=[cell("print(1)")], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
        "language_info": {"name": "python", "version": "3.11.7"}, "widgets": {"state": {}}})
    src.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    src.cells[0].execution_count = 7
    src.cells[0].metadata["execution"] = {"iopub.status.busy": "2026-01-01"}
    text = gen.to_text(gen.student_notebook(src, "a.ipynb"))
    assert text == gen.to_text(gen.student_notebook(nbformat.reads(nbformat.writes(src), 4), "a.ipynb"))
    assert text.endswith("}\n") and '\n "cells": [\n  {\n' in text  # indent=1
    out = nbformat.reads(text, 4)
    assert out.cells[0].outputs == [] and out.cells[0].execution_count is None and out.cells[0].metadata == {}
    assert out.metadata == {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                           "name": "python3"}, "language_info": {"name": "python"}}
    assert out.cells[0].id == src.cells[0].id
    assert gen.has_outputs(src) and gen.strip(src) and not gen.has_outputs(src) and "widgets" not in src.metadata


def test_every_stubbed_cell_compiles():
    nb = student(cell(KERNEL), cell(WRAPPER), cell("### BEGIN SOLUTION\ny = scale(x)\n### END SOLUTION\nprint(y)"))
    for c in nb.cells:
        compiles(c.source)


# --- the real repository -----------------------------------------------------------------------------
def test_check_mode_on_a_scratch_copy(tmp_path, monkeypatch):
    """--check fails on a missing student file and on outputs in a solution; generating fixes the first."""
    (tmp_path / "solutions").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nversion = "0.1.0"\n'
                                             '[project.urls]\nRepository = "https://github.com/o/r"\n'
                                             'Student-edition = "https://github.com/o/r-student"\n')
    nb = new_notebook(cells=[cell(WRAPPER)])
    nbformat.write(nb, tmp_path / "solutions" / "01_x.ipynb")
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0 and (tmp_path / "notebooks" / "01_x.ipynb").exists()
    assert gen.main(["--check"]) == 0
    nb = nbformat.read(tmp_path / "solutions" / "01_x.ipynb", as_version=4)  # now with its Colab cells
    nb.cells[-1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi\n")]
    nbformat.write(nb, tmp_path / "solutions" / "01_x.ipynb")
    assert gen.main(["--check"]) == 1
    assert gen.main(["--strip"]) == 0 and gen.main(["--check"]) == 0
    (tmp_path / "notebooks" / "99_orphan.ipynb").write_text("{}")
    assert gen.main(["--check"]) == 1


def test_student_notebooks_are_up_to_date():
    """The CI check: fails if someone edited a solution without running `python tools/generate.py`."""
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "generate.py"), "--check"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


# --- hints, spoilers, the width of a stub, the student's path ----------------------------------------
HINTS = '''\
### Hints: `scale`

#### 1 · the idea
<!-- addresses: stub wrong -->
What does one program own?

#### 2 · the recipe
<!-- addresses: tail -->
```
offsets, mask, load, store
```'''


def hints_cell(source=HINTS):
    c = new_markdown_cell(source)
    c.metadata["tags"] = ["hints"]
    return c


def test_hints_are_parsed_in_order_with_what_they_address():
    exercise, hints = gen.parse_hints(HINTS)
    assert exercise == "scale"
    assert [h["title"] for h in hints] == ["the idea", "the recipe"]
    assert hints[0] == {"title": "the idea", "text": "What does one program own?", "addresses": ["stub", "wrong"]}
    assert hints[1]["addresses"] == ["tail"] and hints[1]["text"].startswith("```\noffsets")


@pytest.mark.parametrize("source, message", [
    ("#### 1 · the idea\ntext", "starts with a line `### Hints:"),
    ("### Hints: `x`\n\n#### 2 · the idea\ntext", "hint 2 where hint 1 comes next"),
    ("### Hints: `x`\nloose text\n#### 1 · a\ntext", "text before the first"),
    ("### Hints: `x`\n#### 1 · a\n<!-- addresses: stub -->\n", "has no text"),
    ("### Hints: `x`\n", "no hint in it"),
])
def test_malformed_hints_are_refused_with_the_format(source, message):
    with pytest.raises(gen.SourceError, match=re.escape(message)):
        gen.parse_hints(source)


def test_the_student_gets_a_button_cell_where_the_hints_were():
    nb = student(cell(WRAPPER), hints_cell(), cell("check.scale(scale)", "check"))
    hint = nb.cells[1]
    assert hint.cell_type == "code" and hint.source.startswith('cu.hints.offer("scale")')
    assert not any("What does one program own" in c.source for c in nb.cells)
    assert gen.hints_of(new_notebook(cells=[hints_cell()]), "x.ipynb") == {
        "scale": {"notebook": "x.ipynb", "hints": gen.parse_hints(HINTS)[1]}}


def test_a_stub_line_wider_than_the_notebook_is_refused():
    wide = WRAPPER.replace("### BEGIN SOLUTION", "### BEGIN SOLUTION: " + "a very long recipe " * 6)
    with pytest.raises(gen.SourceError, match="over 100"):
        student(cell(wide))


def test_a_spoiler_is_folded_in_the_student_version_and_only_after_an_exercise():
    nb = student(cell(WRAPPER), cell("def faster(x):\n    return x * 2", "spoiler"))
    folded = nb.cells[1]
    assert folded.source.startswith("#@title Folded") and folded.metadata["jupyter"] == {"source_hidden": True}
    compiles(folded.source)
    with pytest.raises(gen.SourceError, match="spoiler"):
        student(cell("x = 1", "spoiler"), cell(WRAPPER))


def test_filled_is_the_student_version_with_the_solution_code_in_place():
    nb = gen.student_notebook(new_notebook(cells=[cell(WRAPPER), hints_cell(), cell("check.scale(scale)", "check")]),
                              "x.ipynb", filled=True)
    assert nb.cells[0].source == WRAPPER.replace("    ### BEGIN SOLUTION\n", "").replace("    ### END SOLUTION\n", "")
    assert nb.cells[1].source.startswith("cu.hints.offer")
    assert nb.cells[2].metadata["tags"] == ["check"]     # nothing may raise on the student's path


def test_hints_file_follows_the_solutions(tmp_path, monkeypatch):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nversion = "0.1.0"\n'
                                             '[project.urls]\nRepository = "https://github.com/o/r"\n'
                                             'Student-edition = "https://github.com/o/r-student"\n')
    nbformat.write(new_notebook(cells=[cell(WRAPPER), hints_cell()]), tmp_path / "solutions" / "01_x.ipynb")
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main([]) == 0
    written = json.loads((tmp_path / gen.HINTS_JSON).read_text())
    assert list(written) == ["scale"] and written["scale"]["notebook"] == "solutions/01_x.ipynb"
    assert gen.main(["--check"]) == 0
    (tmp_path / gen.HINTS_JSON).write_text("{}\n")
    assert gen.main(["--check"]) == 1
    assert gen.main(["--filled", str(tmp_path / "filled")]) == 0
    filled = nbformat.read(tmp_path / "filled" / "notebooks" / "01_x.ipynb", as_version=4)
    assert any("scale_kernel[grid]" in c.source for c in filled.cells)


def test_the_committed_hints_file_has_every_exercise_with_hints():
    """Every check or grade call in a solution notebook has a hints cell for its exercise: check.X's hints
    are X; a lab's grade.X, labN.X (lab 2's add_rmsnorm is not lesson 05's)."""
    hints = json.loads((ROOT / gen.HINTS_JSON).read_text())
    missing = []
    for src, _ in gen.targets():
        nb = nbformat.read(src, as_version=4)
        lab = re.match(r"(lab\d+)_", src.name)
        for c in nb.cells:
            if "check" in c.metadata.get("tags", []):
                for kind, name in re.findall(r"\b(check|grade)\.(\w+)\(", c.source):
                    if kind == "grade" and lab:
                        name = f"{lab[1]}.{name}"
                    if name not in hints:
                        missing.append(f"{src.relative_to(ROOT)}: {name}")
    assert not missing, "exercises without hints: " + ", ".join(missing)


def test_width_none_lifts_only_the_stub_width_rule():
    """The site renders notebooks executed before the 100-column rule: width=None lifts that rule alone."""
    src = "def f(x):\n    ### BEGIN SOLUTION: " + "y" * 120 + "\n    return x\n    ### END SOLUTION\n"
    with pytest.raises(gen.SourceError, match="over 100"):
        gen.stub_source(src)
    stub, _ = gen.stub_source(src, width=None)
    assert "return x" not in stub and "y" * 120 in stub
