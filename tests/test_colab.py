"""The Colab badge and install cell that open every notebook (written by tools/generate.py): what the
committed notebooks hold, how the generator inserts and refreshes them, and what the install cell does
on Colab (faked) and anywhere else (nothing)."""
import importlib.util
import re
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("course_generate", ROOT / "tools" / "generate.py")
gen = sys.modules.setdefault("course_generate", importlib.util.module_from_spec(_spec))
if not hasattr(gen, "student_notebook"):
    _spec.loader.exec_module(gen)

PROJECT = gen.tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
REPO = re.fullmatch(r"https://github\.com/(.+?)/?", PROJECT["urls"]["Repository"])[1]
NOTEBOOKS = [p for d in ("notebooks", "labs", "solutions", "solutions/labs") for p in sorted((ROOT / d).glob("*.ipynb"))]
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"


def install_source(pin=gen.Release("owner/course", "v1.2.3")):
    return gen.colab_cells(pin, "notebooks/x.ipynb")[1].source


# --- the committed notebooks ------------------------------------------------------------------------
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_notebook_opens_with_its_badge_and_the_install_cell_at_this_release(path):
    nb = nbformat.read(path, as_version=4)
    badge, install = nb.cells[0], nb.cells[1]
    assert (badge.cell_type, badge.id, install.cell_type, install.id) == ("markdown", "colab-badge", "code", "colab-install")
    own = path.relative_to(ROOT).as_posix()
    link = re.search(r"\]\((https://colab\.research\.google\.com/github/[^)]+)\)", badge.source)
    assert BADGE_IMAGE in badge.source and link, badge.source
    m = re.fullmatch(rf"https://colab\.research\.google\.com/github/{REPO}/blob/([^/]+)/(.+)", link[1])
    assert m and m[2] == own, f"the badge of {own} opens {link[1]}"
    pinned = re.findall(rf"feed-the-beast @ git\+https://github\.com/{REPO}@([\w.\-]+)", install.source)
    assert pinned == [m[1]], "the badge and the install cell pin different refs"
    assert m[1] == "v" + PROJECT["version"] and m[1] not in {"main", "master", "HEAD"}
    assert sum(c.get("id") in gen.COLAB_IDS for c in nb.cells) == 2


def test_every_notebook_ends_with_the_cell_that_keeps_the_log():
    """On Colab the runtime's files go when it stops: the last cell downloads the log (journal.keep)."""
    for path in NOTEBOOKS:
        cells = nbformat.read(path, as_version=4).cells
        assert (cells[-1].id, cells[-1].source) == (gen.KEEP_ID, gen.KEEP_LOG), path.relative_to(ROOT).as_posix()
        assert sum(c.get("id") == gen.KEEP_ID for c in cells) == 1


def test_the_readme_links_to_this_release():
    links = re.findall(r"https://colab\.research\.google\.com/github/\S+?\.ipynb", (ROOT / "README.md").read_text())
    assert links, "README.md has no Open in Colab link"
    for link in links:
        assert f"/github/{REPO}/blob/v{PROJECT['version']}/" in link, f"README.md: {link} is not this release"


# --- the install cell ---------------------------------------------------------------------------------
def test_off_colab_the_install_cell_prints_nothing_and_does_nothing():
    src = install_source()
    r = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, cwd=ROOT)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    from IPython.core.inputtransformer2 import TransformerManager
    assert TransformerManager().transform_cell(src) == src + "\n"  # plain Python: no magics to rewrite


def test_off_colab_the_install_cell_is_silent_in_a_kernel():
    """As nbval and the student-notebook test run it: in a Jupyter kernel, no output at all."""
    from nbclient import NotebookClient
    nb = new_notebook(cells=[new_code_cell(install_source())])
    NotebookClient(nb, timeout=60, startup_timeout=60, kernel_name="python3").execute()
    assert nb.cells[0].outputs == []


class FakeColab:
    """google.colab in sys.modules, pip recorded instead of run, ipywidgets at a chosen version."""

    def __init__(self, monkeypatch, ipywidgets="7.7.1", pip_rc=0):
        self.pip_calls, self.widget_manager = [], 0
        output = types.ModuleType("google.colab.output")
        output.enable_custom_widget_manager = lambda: setattr(self, "widget_manager", self.widget_manager + 1)
        colab = types.ModuleType("google.colab")
        colab.output = output
        monkeypatch.setitem(sys.modules, "google.colab", colab)
        monkeypatch.setitem(sys.modules, "google.colab.output", output)

        def run(cmd, **kw):
            self.pip_calls.append(cmd)
            return subprocess.CompletedProcess(cmd, pip_rc, "", "ERROR: no such tag" if pip_rc else "")
        monkeypatch.setattr(subprocess, "run", run)
        monkeypatch.setattr("importlib.metadata.version", lambda name: ipywidgets)


def test_on_colab_it_installs_the_pinned_release_and_nothing_else(monkeypatch):
    colab = FakeColab(monkeypatch)
    exec(install_source(), {})
    [cmd] = colab.pip_calls
    assert cmd[:3] == [sys.executable, "-m", "pip"] and "--no-deps" in cmd
    assert cmd[-1] == "feed-the-beast @ git+https://github.com/owner/course@v1.2.3"
    assert not any(w in " ".join(cmd[3:]) for w in ("torch", "triton", "--upgrade", "-U "))  # [0]: the python
    assert colab.widget_manager == 0  # Colab's own ipywidgets 7: its built-in manager shows them


def test_on_colab_with_ipywidgets_8_it_enables_the_custom_widget_manager(monkeypatch):
    colab = FakeColab(monkeypatch, ipywidgets="8.1.5")
    exec(install_source(), {})
    assert colab.widget_manager == 1


def test_on_colab_a_failed_install_says_why(monkeypatch):
    FakeColab(monkeypatch, pip_rc=1)
    with pytest.raises(RuntimeError, match="installing the course failed:\nERROR: no such tag"):
        exec(install_source(), {})


# --- the generator ------------------------------------------------------------------------------------
def scratch(root, monkeypatch, version="0.1.0", url="https://github.com/owner/course"):
    (root / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "{version}"\n'
                                         f'[project.urls]\nRepository = "{url}"\n')
    monkeypatch.setattr(gen, "ROOT", root)


def write_solution(root, *cells, name="solutions/01_x.ipynb"):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(new_notebook(cells=list(cells)), path)
    return path


def test_generating_inserts_the_cells_into_solution_and_student(tmp_path, monkeypatch):
    scratch(tmp_path, monkeypatch)
    src = write_solution(tmp_path, new_markdown_cell("# Lesson"), new_code_cell("x = 1"))
    lab = write_solution(tmp_path, new_code_cell("y = 2"), name="solutions/labs/a.ipynb")
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0
    for path, own in [(src, "solutions/01_x.ipynb"), (tmp_path / "notebooks/01_x.ipynb", "notebooks/01_x.ipynb"),
                      (lab, "solutions/labs/a.ipynb"), (tmp_path / "labs/a.ipynb", "labs/a.ipynb")]:
        cells = nbformat.read(path, as_version=4).cells
        assert [c.id for c in cells[:2]] == list(gen.COLAB_IDS)
        assert f"/github/owner/course/blob/v0.1.0/{own})" in cells[0].source
        assert "git+https://github.com/owner/course@v0.1.0" in cells[1].source
    assert [c.source for c in nbformat.read(src, as_version=4).cells[2:]] == ["# Lesson", "x = 1", gen.KEEP_LOG]


def test_a_second_run_changes_nothing(tmp_path, monkeypatch, capsys):
    scratch(tmp_path, monkeypatch)
    src = write_solution(tmp_path, new_code_cell("x = 1"))
    gen.main([])
    before = src.read_bytes(), (tmp_path / "notebooks/01_x.ipynb").read_bytes()
    capsys.readouterr()
    assert gen.main([]) == 0 and capsys.readouterr().out == ""
    assert (src.read_bytes(), (tmp_path / "notebooks/01_x.ipynb").read_bytes()) == before
    assert gen.main(["--check"]) == 0


def test_a_new_version_is_stale_until_generated(tmp_path, monkeypatch, capsys):
    scratch(tmp_path, monkeypatch)
    src = write_solution(tmp_path, new_code_cell("x = 1"))
    gen.main([])
    scratch(tmp_path, monkeypatch, version="0.2.0")
    capsys.readouterr()
    assert gen.main(["--check"]) == 1
    assert "solutions/01_x.ipynb: its Colab cells are missing or out of date (release v0.2.0)" in capsys.readouterr().err
    assert gen.main([]) == 0 and gen.main(["--check"]) == 0
    for path in (src, tmp_path / "notebooks/01_x.ipynb"):
        text = path.read_text()
        assert "v0.2.0" in text and "v0.1.0" not in text
        assert sum(c.get("id") in gen.COLAB_IDS for c in nbformat.reads(text, 4).cells) == 2


def test_a_hand_edited_ref_is_caught_and_a_moved_cell_put_back(tmp_path, monkeypatch):
    scratch(tmp_path, monkeypatch)
    src = write_solution(tmp_path, new_code_cell("x = 1"))
    gen.main([])
    nb = nbformat.read(src, as_version=4)
    nb.cells[1].source = nb.cells[1].source.replace("@v0.1.0", "@main")
    nb.cells.append(nb.cells.pop(0))  # the badge dragged to the end
    nbformat.write(nb, src)
    assert gen.main(["--check"]) == 1
    gen.main([])
    cells = nbformat.read(src, as_version=4).cells
    assert [c.id for c in cells[:2]] == list(gen.COLAB_IDS) and len(cells) == 4 and "@v0.1.0" in cells[1].source


@pytest.mark.parametrize("url", ["", "https://gitlab.com/owner/course", "https://github.com/owner"])
def test_the_repository_must_be_on_github(tmp_path, monkeypatch, capsys, url):
    scratch(tmp_path, monkeypatch, url=url)
    write_solution(tmp_path, new_code_cell("x = 1"))
    assert gen.main([]) == 1
    assert "[project.urls] Repository" in capsys.readouterr().err
