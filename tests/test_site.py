"""The browsable edition (`./course site`, tools/build_site.py), built from the committed executed notebooks
(docs/gpu-results/notebooks/), on a CPU: the default GPU's edition (the H100's) and the H200's, both in one
Sphinx process, once per session:

* every lesson and lab has a page, reachable from the index;
* the title, the index and the runs page name the edition's GPU, and the index says how complete its runs are
  (a partial edition, made up, names what failed and what was not run);
* each page names the run it shows (GPU, versions, date; a CPU stand-in says it is one) and carries
  that run's printed numbers and figures, each figure with an alt text that says what it shows;
* where the lesson has an exercise, the page shows the student's stub;
* no line of any solution's code that no student notebook shows is anywhere in the built site, as a line
  of any file (and the search for it finds such a line when one is put there);
* in headless Chromium, for four pages: the index's links lead to them, their figures load as images,
  the run's numbers are on them (skipped without Debian's chromium, as tests/test_browser.py is).
"""
import functools
import http.server
import importlib.util
import re
import shutil
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("myst_nb", reason="myst-nb is not installed (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("course_build_site", ROOT / "tools" / "build_site.py")
site = sys.modules["course_build_site"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(site)
gen = site.gen   # tools/generate.py, as the site uses it
import solution_search as search  # noqa: E402  (tools/, on the path since build_site put it there)

PAGES = site.pages()
H200 = "nvidia-h200"
EDITIONS = (site.REFERENCE, H200)     # the default edition and the one a --gpu names, built together
# the pages the browser walks to from the index (every page is checked without a browser)
WALK = ("lessons/00_setup", "lessons/06_fused_softmax", "lessons/09_flash_attention", "labs/lab1_swiglu")
# as in tests/test_browser.py: no sandbox (root in a container), no GPU, no traffic of chromium's own
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


# --- what the site may and may not show: the lines of the solutions no student notebook shows, searched for
# in every built file (tools/solution_search.py, which the student edition's search shares)
norm, solution_lines, file_lines, leaks = search.norm, search.solution_lines, search.file_lines, search.leaks


@functools.lru_cache(maxsize=None)
def secret_lines() -> frozenset[str]:
    """The solutions' lines of code that no student notebook shows, from the solutions as they are and as
    they were when each committed artifact ran. A line some student notebook shows (an import, a line of
    lesson 03's kernel that lesson 04 reuses) may be on the site."""
    notebooks = [(src.relative_to(ROOT).as_posix(), nbformat.read(src, as_version=4)) for src, _ in PAGES]
    notebooks += [(p.relative_to(ROOT).as_posix(), nbformat.read(p, as_version=4))
                  for p in sorted(site.ARTIFACTS.rglob("*.ipynb"))]
    return search.secret_lines(notebooks)


# --- the site, built once ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def editions(tmp_path_factory) -> dict[str, Path]:
    """Both editions, {gpu: site}, built by one Sphinx process: the default (`./course site`) and the H200's."""
    tmp = tmp_path_factory.mktemp("site")
    assert site.default_gpu() == site.REFERENCE, "the default edition is the H100's while it has runs"
    t0 = time.perf_counter()
    out = {None: tmp / "site", H200: tmp / f"site-{H200}"}
    assert site.build_editions(out, tmp / "site-src") == 0, "the site did not build (Sphinx's messages above)"
    print(f"two editions built in {time.perf_counter() - t0:.0f} s")
    return {site.REFERENCE: out[None], H200: out[H200]}


@pytest.fixture(scope="module")
def built(editions):
    return editions[site.REFERENCE]


def page_file(built: Path, page: str) -> Path:
    return built / f"{page}.html"


def runs(gpu: str | None = None) -> list[tuple[Path, str, Path]]:
    """(solution, page, artifact) for every page of `gpu`'s edition (default: the default's) that shows a run."""
    return [(src, page, run) for src, page in PAGES if (run := site.pick_run(src, gpu=gpu)) is not None]


def page_text(built: Path, page: str) -> str:
    return norm(" ".join(file_lines(page_file(built, page))))


def test_every_lesson_and_lab_is_a_page_linked_from_the_index(built):
    index = (built / "index.html").read_text(encoding="utf-8")
    assert len(PAGES) == 16  # lessons 00-09 and labs 1-6
    for _, page in PAGES:
        assert page_file(built, page).is_file(), f"no page for {page}"
        assert f'href="{page}.html"' in index, f"the index does not link to {page}"


def test_a_page_says_when_its_lesson_changed_after_the_run(tmp_path):
    """A run of the lesson as it is now gets no note; a run of an older version (one more line) does."""
    src = ROOT / "solutions" / "00_setup.ipynb"
    now = nbformat.read(src, as_version=4)
    now.metadata["gpu_run"] = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-24 12:00 UTC"}
    nbformat.write(now, tmp_path / "now.ipynb")
    cell = next(c for c in now.cells if c.cell_type == "code" and c.get("id") not in gen.COLAB_IDS)
    cell.source += "\nprint('a line the lesson has since lost')"
    nbformat.write(now, tmp_path / "older.ipynb")
    note = "The lesson has changed since this run"
    current = site.page_notebook(src, tmp_path / "now.ipynb", gen.release())
    older = site.page_notebook(src, tmp_path / "older.ipynb", gen.release())
    assert note not in current.cells[1].source
    assert note in older.cells[1].source and "a line the lesson has since lost" in nbformat.writes(older)


@pytest.mark.parametrize("gpu", EDITIONS)
def test_the_title_index_and_runs_page_name_the_editions_gpu(editions, gpu):
    ed = site.edition(gpu)
    assert ed.name == {site.REFERENCE: "H100 SXM", H200: "H200"}[gpu]
    index = (editions[gpu] / "index.html").read_text(encoding="utf-8")
    assert f"<title>{ed.title}" in index and f"the {ed.name} edition" in page_text(editions[gpu], "runs")
    text = page_text(editions[gpu], "index")
    assert f"as it ran on the {ed.device}" in text and "{{" not in text
    ok, ran, newest = site.standing(gpu)
    assert ok == ran == len(PAGES) and f"All {len(PAGES)} lessons and labs ran to the end on the {ed.name}" in text
    assert f"runs of {newest[:10]}" in text
    other = next(g for g in EDITIONS if g != gpu)
    assert f"--gpu {other}" in page_text(editions[gpu], "runs"), "the runs page points to the other edition"


@pytest.mark.parametrize("gpu", EDITIONS)
def test_each_page_names_the_run_it_shows(editions, gpu):
    shown = {page for _, page, _ in runs(gpu)}
    for src, page in PAGES:
        text = page_text(editions[gpu], page)
        if page not in shown:
            assert "Not run on the" in text, page
            continue
        run_path = site.pick_run(src, gpu=gpu)
        run = site.run_of(run_path)
        assert norm(site.run_line(run)) in text, f"{page}: the run's line is missing"
        for key in ("device", "torch", "triton", "date"):
            assert run[key] in text, f"{page}: the run's {key} ({run[key]}) is not on the page"
        assert run_path.relative_to(site.ARTIFACTS).parts[0] == gpu, f"{page}: another GPU's run in {gpu}'s edition"
        standin = run_path.relative_to(site.ARTIFACTS).parts[0] == site.STANDIN
        assert ("Stand-in: run on a CPU, not on a GPU" in text) == standin, page


@pytest.mark.parametrize("gpu", EDITIONS)
def test_a_page_carries_its_runs_numbers_and_figures(editions, gpu):
    built = editions[gpu]
    assert runs(gpu), "no executed notebook is committed in docs/gpu-results/notebooks/"
    for src, page, run_path in runs(gpu):
        executed = nbformat.read(run_path, as_version=4)
        # the generator's own cells (Colab's install, the log's keep) are left off a page: their output too
        student_ids = {c.get("id") for c in gen.student_notebook(executed, page).cells} - set(site.OWN_CELLS)
        text = page_text(built, page)
        printed, figures = 0, 0
        for cell in executed.cells:
            if cell.cell_type != "code" or cell.get("id") not in student_ids:
                continue
            for o in cell.get("outputs", []):
                if o.output_type == "stream" and o.name == "stdout":
                    for line in o.text.split("\n"):
                        if re.search(r"\d", line):
                            assert norm(line) in text, f"{page}: the run printed {line!r}; the page lacks it"
                            printed += 1
                figures += "image/png" in o.get("data", {})
        html_page = page_file(built, page).read_text(encoding="utf-8")
        images = re.findall(r'<img alt="([^"]*)"[^>]+src="(\.\./_images/[^"]+\.png)"', html_page)
        assert len(images) == figures, f"{page}: {figures} figures in the run, {len(images)} images on the page"
        for alt, img in images:
            assert (page_file(built, page).parent / img).is_file(), f"{page}: {img} is missing"
            assert ".png" not in alt and "From the section" in alt and len(alt) > 60, f"{page}: alt text {alt!r}"
        wide = sum(site.figure_width(c) > site.WIDE for c in executed.cells
                   if c.cell_type == "code" and c.get("id") in student_ids)
        assert html_page.count("tag_full-width") == wide, f"{page}: a figure of panels side by side keeps the column"
        assert printed > 0, f"{page}: its run printed no number"


def test_exercises_show_the_students_stub(built):
    stubs = 0
    for src, page in PAGES:
        run_path = site.pick_run(src)
        nb = nbformat.read(run_path or src, as_version=4)
        text = page_text(built, page)
        for cell in nb.cells:
            if cell.cell_type == "code":
                for r in gen.find_regions(cell.source):
                    for line in gen.stub_lines(r):
                        assert norm(line) in text, f"{page}: the stub line {line.strip()!r} is not on the page"
                        stubs += 1
    assert stubs >= len(PAGES)


@pytest.mark.parametrize("gpu", EDITIONS)
def test_no_line_of_a_solution_is_anywhere_in_the_site(editions, gpu):
    secrets = secret_lines()
    assert len(secrets) > 100, f"only {len(secrets)} secret lines: the search would prove little"
    found = leaks(editions[gpu], secrets)
    assert not found, f"solution code in the built site: {found}"


def test_the_search_finds_a_solution_line_put_into_a_page(built, tmp_path):
    """The check above can fail: a page whose stub is swapped for the solution, highlighted as Sphinx
    highlights code, is caught."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    src = next(s for s, page in PAGES if page == "lessons/04_fuse_bias_gelu")
    nb = nbformat.read(src, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and gen.find_regions(c.source))
    secret = sorted(solution_lines(nbformat.v4.new_notebook(cells=[cell])) & secret_lines())[0]
    copy = tmp_path / "site"
    shutil.copytree(built / "lessons", copy / "lessons")
    page = copy / "lessons" / "04_fuse_bias_gelu.html"
    leaked = highlight(cell.source, PythonLexer(), HtmlFormatter())
    page.write_text(page.read_text(encoding="utf-8").replace("</main>", leaked + "</main>"), encoding="utf-8")
    assert secret in leaks(copy, secret_lines()).get("lessons/04_fuse_bias_gelu.html", [])


# --- in a browser ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(built):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(built)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()


@pytest.mark.browser
def test_in_a_browser_the_index_leads_to_lessons_with_their_runs_numbers_and_figures(served):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    shots = ROOT / "build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)  # tests/test_browser.py's
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        failed = []
        page.on("requestfailed", lambda r: failed.append(r.url) if r.url.startswith(served) else None)
        page.goto(served + "index.html")
        page.screenshot(path=str(shots / "site-index.png"))
        assert "Feed the Beast" in page.title()
        visited, figures, numbers_seen = 0, 0, 0
        walk = [r for r in runs() if r[1] in WALK] or runs()[:4]
        for src, page_path, run_path in walk:
            page.goto(served + "index.html")
            title = site.title_of(nbformat.read(run_path, as_version=4))
            page.locator("main").get_by_role("link", name=title, exact=True).first.click()
            page.wait_for_load_state("load")
            assert page.url.split("#")[0] == served + page_path + ".html", f"the index's link to {title!r} went astray"
            sync_api.expect(page.locator("h1").first).to_contain_text(title)
            text = page.locator("main").inner_text()
            run = nbformat.read(run_path, as_version=4).metadata["gpu_run"]
            assert run["device"] in text and run["date"] in text, f"{page_path}: the run is not named on the page"
            executed = nbformat.read(run_path, as_version=4)
            numbers = [ln for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])
                       if o.output_type == "stream" and o.name == "stdout"
                       for ln in o.text.split("\n") if re.search(r"\d\.\d", ln)]
            assert numbers and all(norm(n) in norm(text) for n in numbers[:10]), f"{page_path}: numbers missing"
            numbers_seen += min(len(numbers), 10)
            images = page.locator("main img[src*='_images/']")
            for i in range(images.count()):
                images.nth(i).scroll_into_view_if_needed()
                ok = images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0")
                assert ok, f"{page_path}: figure {i} did not load as an image"
                figures += 1
            shown = {norm(ln) for ln in text.split("\n")}
            assert not secret_lines() & shown, f"{page_path}: solution code on the page"
            page.screenshot(path=str(shots / f"site-{Path(page_path).name}.png"))
            # the theme's "next" link leads on through the course
            nxt = page.locator("a.right-next")
            if nxt.count():
                nxt.first.click()
                page.wait_for_load_state("load")
                assert page.locator("h1").first.inner_text().strip(), "the next page has no title"
            visited += 1
        browser.close()
    assert visited == len(walk)
    assert not failed, f"requests within the site failed: {failed}"
    print(f"browser: {visited} pages reached from the index, {figures} figures loaded, "
          f"{numbers_seen} printed lines with numbers found")


def _artifact(folder: Path, gpu: str, name: str = "00_setup.ipynb", **run) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["gpu_run"] = {"device": gpu, "status": "ok", **run}
    path = folder / gpu / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_an_edition_shows_its_gpus_run_then_a_stand_in_never_another_gpus(tmp_path):
    src = ROOT / "solutions" / "00_setup.ipynb"
    assert site.pick_run(src, tmp_path, "nvidia-h200") is None
    standin = _artifact(tmp_path, site.STANDIN, date="2026-11-24 13:41 UTC")
    assert site.pick_run(src, tmp_path, "nvidia-h200") == standin
    h100 = _artifact(tmp_path, "nvidia-h100-80gb-hbm3", date="2026-11-22 17:42 UTC")
    assert site.pick_run(src, tmp_path, "nvidia-h200") == standin          # the H100's is not the H200's
    h200 = _artifact(tmp_path, "nvidia-h200", date="2026-11-25 09:00 UTC", status="error in cell 3")
    assert site.pick_run(src, tmp_path, "nvidia-h200") == h200             # its own, though it stopped
    assert site.pick_run(src, tmp_path) == h100                            # the default edition: the H100's


def test_the_default_edition_is_the_h100s_else_the_most_complete_then_the_newest(tmp_path):
    assert site.default_gpu(tmp_path) is None
    _artifact(tmp_path, site.STANDIN)
    assert site.default_gpu(tmp_path) is None                              # a stand-in makes no edition
    _artifact(tmp_path, "tesla-t4", date="2026-12-01 09:00 UTC")
    _artifact(tmp_path, "tesla-t4", "01_count_the_trips.ipynb", date="2026-12-01 09:00 UTC")
    _artifact(tmp_path, "nvidia-l4", date="2026-12-02 09:00 UTC")
    assert site.default_gpu(tmp_path) == "tesla-t4"                        # two ran to the end, against one
    _artifact(tmp_path, "nvidia-l4", "01_count_the_trips.ipynb", date="2026-12-02 09:00 UTC")
    assert site.default_gpu(tmp_path) == "nvidia-l4"                       # as complete, and newer
    _artifact(tmp_path, site.REFERENCE, date="2026-11-01 09:00 UTC")
    assert site.default_gpu(tmp_path) == site.REFERENCE


def test_a_gpu_is_named_by_its_folder_or_a_unique_part_of_it():
    assert site.resolve_gpu("nvidia-h200") == site.resolve_gpu("H200") == "nvidia-h200"
    assert site.resolve_gpu("h100") == site.REFERENCE
    with pytest.raises(ValueError, match="names several GPU .* give one of nvidia-h100-80gb-hbm3, nvidia-h200"):
        site.resolve_gpu("nvidia")
    with pytest.raises(ValueError, match="names no GPU"):
        site.resolve_gpu("t4")
    assert site.edition_name("Tesla T4") == "T4" and site.edition_name("NVIDIA Fictional X9") == "Fictional X9"


def test_a_partial_edition_names_what_failed_and_what_was_not_run(tmp_path):
    """A T4 whose run of lesson 00 went through, whose lesson 01 stopped, and which never ran the rest: the
    index names the one that stopped and every one not run, and each page says which it is."""
    artifacts = tmp_path / "notebooks"
    for name, status in [("00_setup.ipynb", "ok"), ("01_count_the_trips.ipynb", "error in cell 12")]:
        nb = nbformat.read(site.ARTIFACTS / H200 / name, as_version=4)
        nb.metadata["gpu_run"].update(device="Tesla T4", capability="7.5", status=status)
        (artifacts / "tesla-t4").mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, artifacts / "tesla-t4" / name)
    rows = site.write_source(tmp_path / "src", artifacts, "tesla-t4")
    index = (tmp_path / "src" / "index.md").read_text(encoding="utf-8")
    assert index.startswith("# Feed the Beast: the T4 edition") and "as it ran on the Tesla T4" in index
    assert f"**1 of {len(PAGES)} lessons and labs ran to the end on the T4**" in index
    assert "Stopped with an error" in index and "01_count_the_trips.ipynb) (error in cell 12)" in index
    missing = index.split("Not run on the T4")[1]
    assert all(f"({page}.ipynb)" in missing for _, page in PAGES[2:]) and "00_setup" not in missing
    def box(page):
        return nbformat.read(tmp_path / "src" / f"{page}.ipynb", as_version=4).cells[1].source
    assert "As it ran on the Tesla T4" in box("lessons/00_setup")
    assert "until it stopped" in box("lessons/01_count_the_trips") and "error in cell 12" in box("lessons/01_count_the_trips")
    assert "Not run on the T4" in box("labs/lab6_decode_step")
    assert [r[2] is not None for r in rows].count(True) == 2
    assert "not run on the T4" in (tmp_path / "src" / "runs.md").read_text(encoding="utf-8")


def test_a_figures_alt_text_says_what_it_shows():
    from nbformat.v4 import new_code_cell, new_output
    def cell(code, *texts, figures=1, axes=1):
        outs = [new_output("stream", name="stdout", text=t) for t in texts]
        outs += [new_output("display_data", data={"image/png": "iVBOR", "text/plain": f"<Figure size 9x4 with {axes} Axes>"})
                 for _ in range(figures)]
        return new_code_cell(code, outputs=outs)
    curves = cell('ax = plot.curves(n, {"eager": a, "fused": b}, "N (tokens)", "ms" + suffix, title=f"D = {d}")', axes=2)
    alt = site.figure_alt(curves, "The N² wall")
    assert alt == ("A line chart, in 2 panels side by side: ms against N (tokens); one line each for “eager”, "
                   "“fused”; titled “D = …”. From the section “The N² wall”.")
    compare = cell('bench.compare({"a": f, "b": g}, bytes=n)', "softmax, 4,096 x 32,768 fp16\nimpl   ms\na  1\n",
                   "rmsnorm, 8 x 8 fp32\nimpl   ms\n", figures=2)
    alt = site.figure_alt(compare)
    assert alt.startswith("A bar chart of each implementation's time") and "2 figures" in alt
    assert "“softmax, 4,096 x 32,768 fp16”; “rmsnorm, 8 x 8 fp32”" in alt
    assert site.figure_alt(cell("%matplotlib inline\nplot.roofline(c, pts)")).startswith("A roofline")
    assert site.figure_alt(cell("calibration.plot();")).startswith("A scatter plot of your predictions")
    assert site.figure_alt(cell("x = 1")) == "A figure."


def test_a_page_keeps_hints_spoilers_and_tracebacks_from_giving_the_answer_away(tmp_path):
    """On an executed notebook with each kind of cell the generator treats specially: the page shows the
    stub and the outputs, the hints only as the student's call for them, a spoiler's output without its
    code, nothing of a solution-only cell, and an error without its traceback (which quotes code)."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
    cells = [
        new_markdown_cell("# 99 · A test page"),
        new_code_cell("def f(x):\n    ### BEGIN SOLUTION: return twice x\n    return x + x  # the secret\n"
                      "    ### END SOLUTION", outputs=[]),
        new_markdown_cell("### Hints: `f_twice`\n\n#### 1 · the idea\nThe hint's own words.",
                          metadata={"tags": ["hints"]}),
        new_code_cell("print(f(21))", outputs=[new_output("stream", name="stdout", text="42\n")]),
        new_code_cell("def g(x):\n    return x * 2  # a variant\nprint(g(21))",
                      metadata={"tags": ["spoiler"]}, outputs=[new_output("stream", name="stdout", text="g: 42\n")]),
        new_code_cell("print('only the instructor')", metadata={"tags": ["solution-only"]},
                      outputs=[new_output("stream", name="stdout", text="instructor's eyes only\n")]),
        new_code_cell("f(None)", outputs=[new_output("error", ename="TypeError", evalue="unsupported operand",
                                                     traceback=["----> 3     return x + x  # the secret"])]),
    ]
    for i, c in enumerate(cells):
        c.id = f"cell{i}"
    executed = new_notebook(cells=cells)
    executed.metadata["gpu_run"] = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-22 17:42 UTC",
                                    "torch": "2.11.0", "triton": "3.6.0", "status": "ok", "wall_s": 1.0}
    path = tmp_path / "nvidia-h100-80gb-hbm3" / "99_test.ipynb"
    path.parent.mkdir()
    nbformat.write(executed, path)
    page = site.page_notebook(ROOT / "solutions" / "99_test.ipynb", path, gen.release())
    text = nbformat.writes(page)
    assert 'raise NotImplementedError(\\"return twice x\\")' in text
    assert "the secret" not in text and "return x + x" not in text
    assert "The hint's own words" not in text and 'cu.hints.offer(\\"f_twice\\")' in text
    spoiler = next(c for c in page.cells if c.get("id") == "cell4")
    assert "remove-input" in spoiler.metadata["tags"] and "x * 2" not in spoiler.source
    assert spoiler.outputs[0].text == "g: 42\n"
    assert "instructor" not in text
    assert "TypeError: unsupported operand" in text and "---->" not in text
    assert "As it ran on the NVIDIA H100 80GB HBM3" in page.cells[1].source
    assert next(c for c in page.cells if c.get("id") == "cell3").outputs[0].text == "42\n"
