"""Every check and grader shows its verdict exactly once, wherever it runs: a script and pytest show nothing
of a returned value, so there the check prints it; Jupyter, IPython and the plain REPL show the returned
value's repr (and a failure's traceback) themselves, so there it prints nothing.

One subprocess, `python -i script.py` fed from stdin, covers two contexts: the script runs first, as
`python script.py` would run it (no prompt yet), then the REPL reads the lines on stdin."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from course_utils import check, grade
from course_utils.grade import _card
import kernels as k

ROOT = Path(__file__).resolve().parent.parent
PASSED = "✓ vector_add: 10 cases passed"
FAILED = "✗ vector_add: failed"
MASK = "is the tail masked (mask=offsets < n)?"     # vector_add_no_mask's diagnosis

SCRIPT = """\
from course_utils import check, grade
import kernels as k

check.vector_add(k.vector_add)
card = grade.Scorecard("Lab 0 · passes", performance=False)
with card.criterion("right"):
    pass
card.finish()
card = grade.Scorecard("Lab 0 · fails", performance=False)
with card.criterion("wrong"):
    raise check.CheckFailed("the last 3 elements were never written")
try:
    card.finish()
except grade.GradeFailed:
    pass
check.vector_add(k.vector_add_no_mask)     # the script ends here, with a traceback
"""
REPL = """\
print("=== the REPL ===")
check.vector_add(k.vector_add)
check.vector_add(k.vector_add_no_mask)
"""


@pytest.fixture(scope="module")
def script_then_repl(tmp_path_factory):
    script = tmp_path_factory.mktemp("verdict") / "student.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    done = subprocess.run([sys.executable, "-i", str(script)], input=REPL, capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert "=== the REPL ===" in done.stdout, done.stdout + done.stderr
    script_out, repl_out = done.stdout.split("=== the REPL ===")
    return script_out, repl_out, done.stderr


def lines_starting(text: str, start: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(start)]


def test_a_script_prints_each_check_verdict_once(script_then_repl):
    out, _, err = script_then_repl
    assert len(lines_starting(out, PASSED)) == 1, out
    assert len(lines_starting(out, FAILED)) == 1, out
    verdict = out[out.index(FAILED):].splitlines()       # the diagnosis under it, and the hint it names
    assert MASK in verdict[1] and verdict[1].startswith("    ")
    assert verdict[2].startswith("    See hint 2 (the grid and the mask)"), out
    assert "CheckFailed: `vector_add` with n = 1000" in err     # and the script stops with its traceback


def test_a_script_prints_each_grader_verdict_once_after_its_card(script_then_repl):
    out, _, _ = script_then_repl
    assert len(lines_starting(out, "✓ Lab 0 · passes: 1 of 1 passed")) == 1, out
    assert len(lines_starting(out, "✗ Lab 0 · fails: 0 of 1 passed")) == 1, out
    assert out.index("✓ right: passed") < out.index("✓ Lab 0 · passes")     # the card, then the verdict
    assert out.count("the last 3 elements were never written") == 1, out   # the diagnosis: on the card


def test_the_plain_repl_echoes_the_verdict_and_nothing_prints_it_again(script_then_repl):
    _, out, err = script_then_repl
    assert len(lines_starting(out, PASSED)) == 1, out     # the REPL's echo of the returned report
    assert FAILED not in out and MASK not in out, out    # a failure: the traceback, on stderr
    assert err.count("CheckFailed: `vector_add` with n = 1000") == 2, err


# --- IPython and Jupyter show the returned value: nothing is printed besides -------------------------
@pytest.fixture
def shell():
    from IPython.testing.globalipapp import get_ipython
    ip = get_ipython()
    ip.user_ns.update(check=check, grade=grade, k=k)
    return ip


def test_ipython_shows_a_check_verdict_once(shell, capsys):
    assert shell.run_cell("check.vector_add(k.vector_add)").success
    out = capsys.readouterr().out
    assert out.count("✓ vector_add:") == 1, out
    assert not shell.run_cell("check.vector_add(k.vector_add_no_mask)").success
    out = capsys.readouterr().out
    assert FAILED not in out and out.count(MASK) == 1, out        # once: in the traceback


def test_a_notebook_shows_the_card_once_and_the_verdict_once(shell, capsys, monkeypatch):
    shown = []
    monkeypatch.setattr(_card, "in_notebook", lambda: True)
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: shown.extend(objs))
    shell.run_cell("card = grade.Scorecard('Lab 0 · cell', performance=False)\n"
                   "with card.criterion('right'):\n    pass\n"
                   "card.finish()")
    out = capsys.readouterr().out
    assert [type(o).__name__ for o in shown] == ["Scorecard"]     # the card, as HTML
    assert out.count("✓ Lab 0 · cell: 1 of 1 passed") == 1, out   # the returned Graded, echoed


def test_a_failed_check_or_grader_shows_no_frames_of_the_course_code():
    """A new user's trial: a failed check printed some 40 lines of the checker's source above its message."""
    import traceback
    with pytest.raises(check.CheckFailed) as e:
        check.vector_add(k.vector_add_no_mask)
    frames = traceback.extract_tb(e.value.__traceback__)
    assert [f.filename for f in frames if "course_utils" in f.filename] == [
        str(ROOT / "course_utils" / "check" / "__init__.py")], frames
    with pytest.raises(grade.GradeFailed) as e:
        grade.swiglu(k.vector_add_no_mask)
    frames = traceback.extract_tb(e.value.__traceback__)
    assert len([f for f in frames if "course_utils" in f.filename]) == 1, frames
