"""A lesson's imports cell pays for torch and Triton, not for what only later cells use.

`import course_utils` and the modules a lesson imports leave matplotlib's pyplot, ipywidgets, Dynamo,
Inductor and sympy unloaded, in a script and in a notebook's kernel alike, and counting trips does
not load Dynamo either: those come with the first figure, widget or compile."""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LATER = ("matplotlib.pyplot", "ipywidgets", "torch._dynamo", "torch._inductor", "sympy")
LESSON_IMPORTS = "from course_utils import bench, check, grade, plot, predict, progress, timeline, trips"
# a kernel as far as course_utils can tell: an IPython shell with a kernel attribute
FAKE_KERNEL = ("from IPython.core.interactiveshell import InteractiveShell\n"
               "InteractiveShell.instance().kernel = object()\n")


def _loaded_after(code: str) -> list[str]:
    probe = code + f"\nimport sys, json\nprint(json.dumps([m for m in {LATER!r} if m in sys.modules]))\n"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1", COURSE_HEADLESS="1")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("notebook", [False, True], ids=["script", "kernel"])
def test_imports_cell_leaves_the_heavy_modules_for_later(notebook):
    pytest.importorskip("IPython")
    code = (FAKE_KERNEL if notebook else "") + "import course_utils as cu\n" + LESSON_IMPORTS + "\n" + \
        "assert cu.env.in_notebook() == " + str(notebook)
    assert _loaded_after(code) == []


def test_counting_trips_does_not_load_dynamo():
    code = FAKE_KERNEL + "import torch\nimport course_utils as cu\nfrom course_utils import trips\n" + \
        "t = trips.count(lambda x: x * 2 + 1, torch.ones(1000))\nassert t.launches == 2, t.launches\n"
    assert "torch._dynamo" not in _loaded_after(code)


def test_plot_draws_after_a_lazy_import():
    code = ("import matplotlib\nmatplotlib.use('Agg')\nfrom course_utils import plot\n"
            "import sys\nassert 'matplotlib.pyplot' not in sys.modules\n"
            "ax = plot.bars({'a': 1.0})\nassert plot.plt.rcParams['font.size'] == plot.PROJECTOR['font.size']\n")
    assert "matplotlib.pyplot" in _loaded_after(code)


def test_layering_heavy_imports_only_inside_functions():
    """No module of the package imports pyplot, ipywidgets, Dynamo or Inductor at its top level."""
    heavy = ("matplotlib", "ipywidgets", "torch._dynamo", "torch._inductor", "sympy")
    for path in sorted((ROOT / "course_utils").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                assert not name.startswith(heavy), f"{path.name} imports {name} at its top level"


def test_check_and_grade_load_on_first_use_after_a_bare_import():
    """`import course_utils as cu; cu.check.online_softmax(fn)` works (a student tried it, lesson 08), and so
    does `cu.grade`, without the bare import loading either: they come on first use (PEP 562), and are the
    same modules `from course_utils import check, grade` gives."""
    code = ("import sys\nimport course_utils as cu\n"
            "assert 'course_utils.check' not in sys.modules and 'course_utils.grade' not in sys.modules\n"
            "assert callable(cu.check.online_softmax) and callable(cu.grade.swiglu)\n"
            "from course_utils import check, grade\n"
            "assert cu.check is check is sys.modules['course_utils.check'] and cu.grade is grade\n"
            "assert 'check' in dir(cu)\n"
            "try:\n    cu.chek\nexcept AttributeError as e:\n    assert 'chek' in str(e)\n"
            "else:\n    raise AssertionError('cu.chek did not raise')\n")
    assert _loaded_after(code) == []
