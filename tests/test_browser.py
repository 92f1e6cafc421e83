"""The course in a real browser: JupyterLab as `./course lab` starts it, driven through headless Chromium.

* Lesson 00, student version, run as a student runs it: Shift+Enter cell after cell; in the first
  prediction a number typed, committed and revealed. Its widgets must show as widgets (not as the
  text "VBox(children=...)"), its figures as images, and no cell may crash unless it is tagged
  `raises-exception` (the exercise stubs).
* Run > Run All Cells with nothing clicked, on the fewest solutions that between them show every kind
  of live output the course has (RUN_ALL, worked out from the solutions' code: each predict, hints,
  progress, plot and timeline call, a grade card, a compare or trips table, a notebook's own display or
  figure). The predictions wait unanswered, as they do for anyone who runs a whole notebook; the cells
  after them must still run and every output must render. nbval cannot see this path: it runs
  headless, where a prediction takes its default at once.
* The class's guesses on the instructor's screen (`cu.classroom.reveal`, its own section at the end): 30
  simulated students' guesses, the measurement hidden, then shown by the button, then a 31st guess
  drawn as it lands; and the after-class page (tools/after_class.py) as Chromium draws it.

What this module no longer does, and what covers it (CONTRIBUTING: a notebook run twice for the same reason
is run once): it used to Run All every solution. A solution's code is its filled student notebook's
(they differ by the hints cell), and tests/test_live_path.py runs every filled student notebook live,
predictions waiting, in a kernel like JupyterLab's, and checks that every cell ran without error; that
is the same run for the same reason. What only a browser adds is the frontend drawing the outputs,
and that depends on the kind of output, not on the notebook: hence one Run All per kind.
Each notebook of RUN_ALL is a test class of its own, so that `--dist loadscope` shares them between the
workers (each worker starts its own JupyterLab and Chromium).

Screenshots go to build/screenshots/: look at them after a change to a lesson's layout.
Needs Debian's `chromium` and the `playwright` package (its own browser download is not used);
without either the module is skipped. `-m "not browser"` deselects it.
"""
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
CHROMIUM = shutil.which("chromium")
if CHROMIUM is None:
    pytest.skip("no chromium on PATH (Debian: apt-get install chromium)", allow_module_level=True)
expect = sync_api.expect

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "build" / "screenshots"
SOLUTIONS = sorted(ROOT.glob("solutions/*.ipynb")) + sorted(ROOT.glob("solutions/labs/*.ipynb"))
STUDENT_00 = ROOT / "notebooks" / "00_setup.ipynb"
STARTED = time.time()  # this worker's start: screenshots older than it are from an earlier run
HINTS = ROOT / "course_utils" / "exercise_hints.json"
# What a student's JupyterLab reads from the course (./course lab puts it on JUPYTER_CONFIG_PATH).
COURSE_JUPYTER_CONFIG = ROOT / "jupyter"

# Flags known to work for Debian's chromium here: no sandbox (root in a container), no GPU, and no
# traffic of its own (updates, sync, QUIC) on a machine that may have no network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
START_TIMEOUT = 90       # s: JupyterLab answering, a kernel becoming idle
CELL_TIMEOUT = 120_000   # ms: one cell run with Shift+Enter (Triton's interpreter is slow)
RUN_ALL_TIMEOUT = 240    # s: one whole notebook under Run All Cells


# --- JupyterLab ------------------------------------------------------------------------------------
class Lab:
    def __init__(self, url: str, token: str, tmp: Path):
        self.url, self.token = url, token
        self.log, self.predictions = tmp / "jupyterlab.log", tmp / "predictions.jsonl"

    def api(self, method: str, path: str):
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def open_url(self, notebook: Path) -> str:
        # ?reset: a fresh layout, not the notebooks an earlier test left open (each with a kernel)
        return f"{self.url}lab/tree/{notebook.relative_to(ROOT).as_posix()}?reset&token={self.token}"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a free port of 127.0.0.1, serving the repository, with a throw-away home."""
    tmp = tmp_path_factory.mktemp("jupyterlab")
    dirs = {d: tmp / d for d in ("home", "runtime", "config", "data", "settings", "workspaces")}
    for d in dirs.values():
        d.mkdir()
    # Never save a notebook: Lab autosaves every 2 minutes, and a run's outputs (and the kernel's
    # name, rewritten on connect) must not land in the committed notebooks.
    docmanager = dirs["settings"] / "@jupyterlab" / "docmanager-extension"
    docmanager.mkdir(parents=True)
    (docmanager / "plugin.jupyterlab-settings").write_text('{"autosave": false}')
    env = dict(os.environ)
    # `./course test` runs headless (every prediction takes its default, figures go nowhere); a student
    # is not headless, and that is the path this test is for.
    for var in ("COURSE_HEADLESS", "MPLBACKEND"):
        env.pop(var, None)
    env.update(HOME=str(dirs["home"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
               JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_DATA_DIR=str(dirs["data"]),
               JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]), JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
               JUPYTER_CONFIG_PATH=os.pathsep.join(filter(None, [str(COURSE_JUPYTER_CONFIG),
                                                                 os.environ.get("JUPYTER_CONFIG_PATH")])),
               COURSE_PREDICTIONS=str(tmp / "predictions.jsonl"))  # not the repository's predictions.jsonl
    token = secrets.token_hex(16)
    log = (tmp / "jupyterlab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         "--ServerApp.port=0",  # a free port, chosen by the server: no race with the other xdist worker
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}",
         "--ServerApp.allow_root=True",  # containers run as root; Jupyter refuses root without it
         # Opening a notebook copies it to a checkpoint, by default beside it: keep those out of the repository.
         f"--FileCheckpoints.checkpoint_dir={tmp / 'checkpoints'}"],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline, lab = time.monotonic() + START_TIMEOUT, None
        while lab is None:
            assert server.poll() is None, f"JupyterLab exited ({server.returncode}):\n{tail(tmp / 'jupyterlab.log')}"
            assert time.monotonic() < deadline, f"JupyterLab did not answer in {START_TIMEOUT} s:\n{tail(tmp / 'jupyterlab.log')}"
            time.sleep(0.5)
            for info in dirs["runtime"].glob("jpserver-*.json"):  # where the server writes its port
                try:
                    candidate = Lab(json.loads(info.read_text())["url"], token, tmp)
                    candidate.api("GET", "api/status")
                    lab = candidate
                except (ValueError, KeyError, OSError):
                    pass  # not written completely, or not answering yet
        yield lab
    finally:
        server.terminate()  # Jupyter shuts its kernels down on SIGTERM
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# --- the browser ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):  # no picture of an earlier run passes for one of this run
        if old.stat().st_mtime < STARTED:  # (the other xdist worker's pictures of this run stay)
            old.unlink(missing_ok=True)
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)  # a fresh temporary profile
        yield b
        b.close()


@pytest.fixture
def page(browser, lab):
    logged = lab.log.stat().st_size
    lab.predictions.unlink(missing_ok=True)  # no scoreboard shows another test's guesses
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    yield context.new_page()
    context.close()
    for session in lab.api("GET", "api/sessions"):  # one kernel at a time: this machine has 2 cores
        lab.api("DELETE", f"api/sessions/{session['id']}")
    with lab.log.open(errors="replace") as f:
        f.seek(logged)
        saved = [line for line in f if "Saving file at" in line]  # the server logs every save
    assert not saved, f"JupyterLab saved a notebook of the repository: {saved}"


def shot(target, name: str):
    """Save a screenshot of a page or an element as build/screenshots/<name>.png."""
    target.screenshot(path=str(SHOTS / f"{name}.png"))


def shot_name(notebook: Path) -> str:
    return notebook.relative_to(ROOT).with_suffix("").as_posix().replace("/", "-")


def open_notebook(page, lab, notebook: Path):
    """Open the notebook, wait for all its cells and an idle kernel; return the notebook and its cells."""
    nb = nbformat.read(notebook, as_version=4)
    page.goto(lab.open_url(notebook))
    cells = page.locator(".jp-Notebook .jp-Cell")
    expect(cells).to_have_count(len(nb.cells), timeout=START_TIMEOUT * 1000)
    indicator = page.locator(".jp-Notebook-ExecutionIndicator")
    try:
        expect(indicator).to_have_attribute("data-status", "idle", timeout=START_TIMEOUT * 1000)
    except AssertionError as e:
        # Once in CI (two test workers, the other running notebooks) a kernel never connected. A person
        # would reload the page; so does the test, once, and says so. Twice is a failure, with the
        # server's log, the only place that says why a kernel did not start.
        print(f"{notebook.name}: the kernel did not connect ({indicator.get_attribute('data-status')}); "
              f"reloading once. JupyterLab's log ends:\n{server_log_tail(lab)}")
        page.reload()
        expect(cells).to_have_count(len(nb.cells), timeout=START_TIMEOUT * 1000)
        try:
            expect(indicator).to_have_attribute("data-status", "idle", timeout=START_TIMEOUT * 1000)
        except AssertionError as again:
            raise AssertionError(f"{again}\n(after one reload; first: {e})\n"
                                 f"--- the end of JupyterLab's log:\n{server_log_tail(lab)}") from None
    # A cell counts as run once it shows a number: none may show one before this test runs it.
    assert not any(NUMBERED.search(p) for p in prompts(cells)), f"{notebook} was committed with execution counts"
    return nb, cells


def server_log_tail(lab, lines: int = 40) -> str:
    with lab.log.open(errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def no_widget_fallbacks(page):
    """Widgets render as widgets: not as their text fallback, nor stuck on a placeholder."""
    outputs = page.locator(".jp-Notebook .jp-OutputArea-output")
    for fallback in ("VBox(children=", "Loading widget", "Error displaying widget"):
        expect(outputs.filter(has_text=fallback)).to_have_count(0)


def traceback_cells(cells) -> dict[int, str]:
    """{cell index: its prompt and the error's last line} for every cell whose output shows a traceback.

    textContent, not innerText: JupyterLab skips rendering cells out of view, and innerText of those is ''."""
    found = cells.evaluate_all("""cells => cells.map(cell => Array.from(
        cell.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
        .map(o => o.textContent).filter(t => t.includes('Traceback')).join('\\n'))""")
    shown = prompts(cells)
    return {i: f"{shown[i].strip()} {text.strip().splitlines()[-1]}" for i, text in enumerate(found) if text}


def prompts(cells) -> list[str]:
    """The execution prompt of every cell ('[3]:', '[*]:', '[ ]:'); '' for markdown."""
    return cells.evaluate_all(
        "cells => cells.map(c => (c.querySelector('.jp-InputPrompt') || {}).textContent || '')")


NUMBERED = re.compile(r"\[\d+\]:")


def folded(cell) -> bool:
    """A cell shown folded (the Colab install cell): JupyterLab draws a placeholder with no prompt."""
    return bool(cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"))


# --- lesson 00 as a student meets it -----------------------------------------------------------------
def test_lesson_00_cell_by_cell_with_a_prediction(page, lab):
    name = shot_name(STUDENT_00)
    nb, cells = open_notebook(page, lab, STUDENT_00)
    shot(page, f"{name}-1-opened")
    first_prediction = next(i for i, c in enumerate(nb.cells) if "predict.number(" in c.source)
    # a later cell that reads the revealed value, and prints this instead while there is none
    uses_reveal = [i for i, c in enumerate(nb.cells) if i > first_prediction and "press Reveal above first" in c.source]
    assert uses_reveal, "lesson 00 no longer has a cell that uses the first prediction's value: update this test"

    cells.nth(0).locator(".jp-InputPrompt").click()  # the prompt column: no link or editor under the click
    page.keyboard.press("Escape")  # command mode: Shift+Enter runs the cell and selects the next
    revealed = None
    for i, cell in enumerate(nb.cells):
        expect(cells.nth(i)).to_have_class(re.compile(r"\bjp-mod-active\b"))
        page.keyboard.press("Shift+Enter")
        if cell.cell_type == "code" and folded(cell):
            expect(page.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute(
                "data-status", "idle", timeout=CELL_TIMEOUT)
        elif cell.cell_type == "code":
            expect(cells.nth(i).locator(".jp-InputPrompt")).to_have_text(NUMBERED, timeout=CELL_TIMEOUT)
        if i == first_prediction:
            revealed = answer_prediction(page, cells.nth(i), guess="2000", name=name)
            cells.nth(i + 1).locator(".jp-InputPrompt").click()  # back to the notebook, on the next cell
            page.keyboard.press("Escape")
    shot(page, f"{name}-4-end")

    expect(page.locator(".jp-Notebook .jupyter-widgets.widget-button").first).to_be_visible()
    no_widget_fallbacks(page)
    # A figure renders as an image that loaded.
    figure = page.locator(".jp-Notebook .jp-OutputArea-output img").first
    expect(figure).to_be_attached()
    figure.scroll_into_view_if_needed()
    assert figure.evaluate("img => img.complete && img.naturalWidth > 0"), "the figure's image did not load"
    shot(figure, f"{name}-3-figure")
    # The course's settings: JupyterLab's news prompt never showed (it stays until answered).
    expect(page.get_by_text("official Jupyter news")).to_have_count(0)

    # Only the exercise stubs may fail before the student writes them, and they do (which also shows
    # that this test sees a traceback when there is one).
    stubs = {i for i, c in enumerate(nb.cells) if "raises-exception" in c.metadata.get("tags", [])}
    tracebacks = traceback_cells(cells)
    crashed = {i: err for i, err in tracebacks.items() if i not in stubs}
    assert not crashed, f"cells crashed ({{cell index: prompt and error}}): {crashed}"
    assert stubs & set(tracebacks), f"no exercise stub raised where a student sees it: {stubs}"
    stub = cells.nth(min(stubs & set(tracebacks)))
    stub.scroll_into_view_if_needed()
    shot(stub, f"{name}-5-exercise-stub")
    # The committed guess and its reveal reached the kernel: a later cell uses the measured value.
    expect(cells.nth(uses_reveal[0]).locator(".jp-OutputArea")).to_contain_text("GB/s")

    assert "off by" in revealed, revealed
    assert re.search(r"your guess 2,?000\b", revealed), f"the guess is not shown as typed (2000): {revealed!r}"

    # Stuck on the exercise, the student opens the first hint: its text appears under the buttons, and
    # the log (the scoreboard's and the instructor's source) notes it.
    offer = next((i for i, c in enumerate(nb.cells) if "cu.hints.offer(" in c.source), None)
    assert offer is not None, "lesson 00 offers no hints under its exercise: update this test"
    exercise = re.search(r"cu\.hints\.offer\(\"([^\"]+)\"\)", nb.cells[offer].source).group(1)
    first = json.loads(HINTS.read_text())[exercise]["hints"][0]
    button = cells.nth(offer).get_by_role("button", name=re.compile(r"^Hint 1: "))
    button.scroll_into_view_if_needed()
    opened = cells.nth(offer).locator(".jupyter-widgets.widget-output")
    expect(opened).not_to_contain_text(first["title"])  # nothing is shown before the student asks
    button.click()
    expect(opened).to_contain_text(first["title"], timeout=CELL_TIMEOUT)
    shot(cells.nth(offer), f"{name}-6-hint-opened")
    logged = [json.loads(line) for line in lab.predictions.read_text().splitlines() if line.strip()]
    assert {"hint": exercise, "tier": 1} in [{k: e.get(k) for k in ("hint", "tier")} for e in logged], logged


def answer_prediction(page, cell, guess: str, name: str) -> str:
    """Type a guess into the prediction in `cell`, Commit, Reveal; return the revealed line."""
    entry = cell.locator(".widget-text input")
    commit = cell.get_by_role("button", name="Commit")
    reveal = cell.get_by_role("button", name="Reveal")
    expect(reveal).to_be_disabled()  # nothing to reveal before a guess is locked in
    entry.click()
    entry.fill(guess)
    shot(cell, f"{name}-2a-prediction-typed")
    commit.click()
    expect(entry).to_be_disabled()   # the guess is locked...
    expect(reveal).to_be_enabled()   # ...and only now can the answer come
    reveal.click()
    line = cell.locator(".jupyter-widgets.widget-output").filter(has_text="your guess")
    expect(line).to_be_visible(timeout=CELL_TIMEOUT)
    shot(cell, f"{name}-2b-prediction-revealed")
    return line.text_content()


# --- Run All Cells, no prediction answered: once per kind of live output ----------------------------
# A call that puts something on the page live: a widget, a figure, an HTML table. A notebook's own
# display() or matplotlib figure counts as a kind of its own (nothing else shows the same thing).
LIVE_OUTPUT = re.compile(r"\b(?:(?P<call>(?:predict|hints|progress|plot|timeline)\.\w+|bench\.compare"
                         r"|trips\.count(?:_compiled)?)|(?P<card>grade\.\w+)|(?P<own>display|plt\.\w+))\(")


def live_outputs(notebook: Path) -> set[str]:
    """The kinds of live output the notebook's code cells make (see LIVE_OUTPUT)."""
    nb = nbformat.read(notebook, as_version=4)
    kinds = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for m in LIVE_OUTPUT.finditer(cell.source):
            kinds.add(m["call"] or ("a grade card" if m["card"] else f"{notebook.name}'s own display"))
    return kinds


def run_all_cover(notebooks: list[Path], shown: set[str]) -> list[Path]:
    """The fewest notebooks (greedy; ties to the first) whose Run All shows every kind of live output
    that some notebook makes and that `shown` (lesson 00 cell by cell) does not already show."""
    kinds = {nb: live_outputs(nb) - shown for nb in notebooks}
    left, chosen = set().union(*kinds.values()), []
    while left:
        best = max(notebooks, key=lambda nb: len(kinds[nb] & left))
        chosen.append(best)
        left -= kinds[best]
    return sorted(chosen, key=notebooks.index)


RUN_ALL = run_all_cover(SOLUTIONS, live_outputs(STUDENT_00))


def test_the_run_all_set_shows_every_kind_of_live_output():
    """No kernel: the detector sees the course's live outputs, and RUN_ALL covers all of them."""
    assert {"predict.number", "predict.scoreboard", "progress.steps", "bench.compare"} <= \
        set().union(*map(live_outputs, SOLUTIONS)), "LIVE_OUTPUT no longer finds the course's outputs"
    every = set().union(*map(live_outputs, SOLUTIONS)) - live_outputs(STUDENT_00)
    assert every <= set().union(*map(live_outputs, RUN_ALL))
    print("Run All in the browser:", [nb.relative_to(ROOT).as_posix() for nb in RUN_ALL])


class _RunAll:
    notebook: Path

    def test_solution_runs_all_cells(self, page, lab):
        run_all_cells(page, lab, self.notebook)


for _nb in RUN_ALL:
    _name = "TestRunAll_" + re.sub(r"\W", "_", _nb.relative_to(ROOT).with_suffix("").as_posix())
    globals()[_name] = type(_name, (_RunAll,), {"notebook": _nb})


def run_all_cells(page, lab, notebook: Path):
    name = shot_name(notebook)
    nb, cells = open_notebook(page, lab, notebook)
    shot(page, f"{name}-1-opened")
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name=re.compile(r"^Run All Cells")).click()

    # a folded cell shows no prompt to read; it runs first, and every numbered cell comes after it
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and not folded(c)]
    indicator = page.locator(".jp-Notebook-ExecutionIndicator")
    start, settled_since = time.monotonic(), None
    while True:
        shown = prompts(cells)
        running = any("*" in shown[i] for i in code)
        ran = [i for i in code if NUMBERED.fullmatch(shown[i].strip())]
        idle = indicator.get_attribute("data-status") == "idle"
        if idle and len(ran) == len(code):
            break
        # An error stops Run All: the rest stay unnumbered. Settled: idle, nothing queued, for 3 s.
        settled = idle and not running and ran
        settled_since = (settled_since or time.monotonic()) if settled else None
        if settled_since and time.monotonic() - settled_since > 3:
            break
        assert time.monotonic() - start < RUN_ALL_TIMEOUT, \
            f"Run All still running after {RUN_ALL_TIMEOUT} s; ran {len(ran)} of {len(code)} code cells"
        time.sleep(0.5)
    print(f"{notebook.name}: Run All took {time.monotonic() - start:.0f} s")

    crashed = traceback_cells(cells)
    target = cells.nth(min(crashed)) if crashed else cells.last
    target.scroll_into_view_if_needed()
    shot(page, f"{name}-2-after-run-all")
    prediction = cells.filter(has=page.locator(".widget-button"))
    if prediction.count():
        prediction.first.scroll_into_view_if_needed()
        shot(prediction.first, f"{name}-3-prediction-left-open")
    assert not crashed, f"cells crashed ({{cell index: prompt and error}}): {crashed}"
    never_ran = [i for i in code if i not in ran]
    assert not never_ran, f"code cells that never ran: {never_ran}"
    no_widget_fallbacks(page)


# --- the class's guesses on the instructor's screen (course_utils.classroom) ---------------------------------
# A lecture's moment, in this module's JupyterLab: the instructor's kernel answers a prediction (as running
# the solution does), then cu.classroom.reveal shows 30 simulated students' guesses from a class folder,
# hides the measurement until the button is pressed, and redraws when a 31st student's guess lands. The
# notebook is written under build/ (served by this JupyterLab, never committed). Screenshots go to
# build/screenshots/; with COURSE_DOC_SHOTS=1 also to docs/classroom/, the pictures the documentation shows:
#   COURSE_DOC_SHOTS=1 .venv/bin/python -m pytest tests/test_browser.py -k "reveal or after_class"
CLASSROOM_NB = ROOT / "build" / "classroom-browser" / "reveal.ipynb"
DOC_SHOTS = ROOT / "docs" / "classroom"
REVEAL_KEY, REVEAL_MEASURED = "04.speedup", 2.9
REVEAL_QUESTION = ("fp32, 256 MiB of x: how many times faster than eager F.gelu(x + b) is one fused kernel?")


def doc_shot(target, name: str, **options):
    shot_path = SHOTS / f"{name}.png"
    target.screenshot(path=str(shot_path), **options)
    if os.environ.get("COURSE_DOC_SHOTS", "") not in ("", "0"):
        DOC_SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot_path, DOC_SHOTS / f"{name}.png")


def write_guess(folder: Path, student: str, guess: float, minute: int):
    """One student's log in the class folder, as course_utils.journal writes it: a committed guess."""
    line = {"key": REVEAL_KEY, "question": REVEAL_QUESTION, "guess": guess, "measured": None, "unit": "×",
            "label": "measured", "kind": "number", "student": student, "time": f"2026-11-28T10:{minute:02d}:00"}
    (folder / f"{student}.jsonl").write_text(json.dumps(line) + "\n")


def test_reveal_of_30_students_hidden_shown_then_a_31st(page, lab, tmp_path):
    import random
    draw = random.Random(4)   # a class that guessed from 0.7x to 30x: the picture is on a log scale
    guesses = [round(10 ** draw.uniform(-0.15, 1.5), 1) for _ in range(30)]
    folder = tmp_path / "class"
    folder.mkdir()
    for i, g in enumerate(guesses):
        write_guess(folder, f"student{i:02d}", g, i)
    CLASSROOM_NB.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(  # the instructor runs the solution: its prediction answered in this kernel
            "import course_utils as cu\nfrom course_utils import predict\n"
            f"p = predict.number({REVEAL_KEY!r}, {REVEAL_QUESTION!r}, lambda: {REVEAL_MEASURED}, unit='×', "
            "guess=3.0)"),
        nbformat.v4.new_code_cell(f"r = cu.classroom.reveal({REVEAL_KEY!r}, where={str(folder)!r}, every=1)"),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}),
        CLASSROOM_NB)   # a kernel named: JupyterLab asks for none
    nb, cells = open_notebook(page, lab, CLASSROOM_NB)
    cells.nth(0).locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    for i in range(len(nb.cells)):
        expect(cells.nth(i)).to_have_class(re.compile(r"\bjp-mod-active\b"))
        page.keyboard.press("Shift+Enter")
        expect(cells.nth(i).locator(".jp-InputPrompt")).to_have_text(NUMBERED, timeout=CELL_TIMEOUT)
    shown = cells.nth(1).locator(".jp-OutputArea")
    button = shown.get_by_role("button", name="Show the measurement")
    expect(button).to_be_enabled(timeout=CELL_TIMEOUT)
    expect(shown).to_contain_text("30 guesses from the class")
    expect(shown).to_contain_text("The measurement is behind the button")
    expect(shown).not_to_contain_text("within 2×")
    picture = shown.locator("img")
    expect(picture).to_have_count(1)
    assert picture.evaluate("img => img.complete && img.naturalWidth > 0"), "the class's picture did not load"
    hidden_src = picture.get_attribute("src")
    no_widget_fallbacks(page)
    doc_shot(shown, "reveal-hidden")

    button.click()
    close = sum(REVEAL_MEASURED / 2 <= g <= REVEAL_MEASURED * 2 for g in guesses)
    expect(shown).to_contain_text(f"Measured on this GPU: {REVEAL_MEASURED} ×", timeout=CELL_TIMEOUT)
    expect(shown).to_contain_text(f"{close} of 30 within 2×")
    expect(button).to_be_disabled()
    assert picture.get_attribute("src") != hidden_src, "the picture was not redrawn with the measurement"
    doc_shot(shown, "reveal-shown")

    write_guess(folder, "student30", REVEAL_MEASURED, 31)   # a late student commits, after the reveal
    expect(shown).to_contain_text("31 guesses from the class", timeout=15_000)
    expect(shown).to_contain_text(f"{close + 1} of 31 within 2×")
    assert not traceback_cells(cells), traceback_cells(cells)


def test_after_class_page_in_the_browser(browser, tmp_path):
    """The after-class page of lesson 04, from test_classroom's 30 simulated students, as Chromium draws it."""
    sys.path.insert(0, str(ROOT / "tools"))
    import after_class
    from test_classroom import PLANTED, simulated_class
    simulated_class(tmp_path / "class")
    logs = after_class.journal.class_logs(tmp_path / "class")
    after_class.build(logs, tmp_path / "pages")
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    try:
        page = context.new_page()
        page.goto((tmp_path / "pages" / "04.html").as_uri())
        expect(page.get_by_role("heading", name="Where the class's model broke")).to_be_visible()
        expect(page.locator("body")).not_to_contain_text(PLANTED)
        doc_shot(page, "after-class", full_page=True)
    finally:
        context.close()
