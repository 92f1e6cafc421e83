"""Every kernel the course launches compiles for every GPU it supports, on this CPU (tools/compile_targets.py).

Each solution notebook runs as each GPU would run it (its plan, its sizes, its launch parameters) with the launches
recorded instead of run; the recorded launches are compiled for that GPU's target and judged: it compiles, its
shared memory fits what that GPU grants a block, it uses no dtype that GPU's plan forbids. Triton here is the
CPU wheel (3.9); the GPUs and Colab run 3.6.

Cost: running the notebooks in the stand-in and compiling takes minutes a target on two cores, so CI compiles the
selection of `compile_targets.child(ci=True)` (every launch of a kernel that multiplies tiles, for every target;
the 1-D kernels once each, for sm_75) and judges again only what changed: docs/gpu-results/compile-targets.json keeps
the verdicts per target and notebook under a fingerprint of the notebook's code cells, course_utils, the tool and the
Triton and torch versions. An entry whose fingerprint matches is trusted (and held to the same assertions below);
the others are run again, so a stale file costs time, never a verdict. `python3 tools/compile_targets.py --ci
--write` refreshes it and compile-targets.md (seconds right after this test ran: it reuses build/compile-targets.json).
`python3 tools/compile_targets.py --write` compiles every launch down to the cubin (registers and spills too, about 7
minutes on 2 cores) and writes docs/gpu-results/compile-targets-full.md.
"""
import importlib.util
import json
import shutil
import sys
import time
import warnings
from pathlib import Path

import pytest

import course_utils as cu

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("course_compile_targets", ROOT / "tools" / "compile_targets.py")
ct = sys.modules["course_compile_targets"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ct)

pytestmark = pytest.mark.skipif(cu.ON_GPU and not cu.INTERPRET, reason="a GPU compiles for itself: tools/gpu_run.py")

# Failures known on this branch, fixed elsewhere (tools/compile_targets.py's KNOWN_FAILURES, not compiled again in
# CI). Each is a strict xfail below, so the merge that fixes it turns that test red until the entry is removed.
KNOWN = ct.KNOWN_FAILURES
# Kernels the stand-in run does not reach yet (a cell before their launch needs real numbers and stops), so they are
# not judged: listed so that a new one is noticed. Each could be reached by faking what stops it.
NOT_REACHED = {
    ("04_fuse_bias_gelu.ipynb", "bias_add_kernel"): "cell 31 (spoiler) stops before its launches",
    ("04_fuse_bias_gelu.ipynb", "one_poly_gelu_kernel"): "cell 31 (spoiler) stops before its launches",
    ("lab5_flash_decoding.ipynb", "stream_kernel"): "cell 7's stream_speedup stops before it",
    **{("lab6_decode_step.ipynb", k): "the decode step's cells stop before their launches" for k in (
        "add_rmsnorm_kernel", "decode_merge_kernel", "decode_split_kernel", "rope_cache_kernel",
        "skinny_matmul_kernel", "swiglu_kernel")},
}


@pytest.fixture(scope="module")
def results():
    """Every target, two at a time (./course test's --dist loadscope keeps this module on one worker); only the
    notebooks whose fingerprint differs from the kept verdicts' run again."""
    t0 = time.perf_counter()
    got = ct.run(list(ct.TARGETS), jobs=2, ci=True)
    stale = sorted({Path(s).name for r in got for s in r.get("recomputed", [])})
    if stale:
        warnings.warn(f"{ct.COMMITTED.name} is stale for {', '.join(stale)}: judged again here, in "
                      f"{time.perf_counter() - t0:.0f} s; `{ct.REFRESH}` refreshes it (seconds after this run)")
    return {tuple(r["cc"]): r for r in got}


def matches(key, row) -> bool:
    target, notebook, kernel, dtypes, start, stages = key
    return (row["target"], row["site"].split(" cell ")[0].split("/")[-1], row["kernel"], row["dtypes"],
            row["num_stages"]) == (target, notebook, kernel, dtypes, stages) and row["constexprs"].startswith(start)


def line(row) -> str:
    return (f"{row['kernel']} ({row['site']}; {row['dtypes']}; {row['constexprs']}; {row['num_warps']} warps, "
            f"{row['num_stages']} stages): {row['why']}")


@pytest.mark.parametrize("cc", list(ct.TARGETS), ids=ct.cc_name)
def test_every_kernel_compiles_fits_and_keeps_to_the_plan(results, cc):
    r = results[cc]
    assert not r.get("error"), f"the stand-in {ct.cc_name(cc)} run failed:\n{r.get('error')}"
    rows = r["rows"]
    assert rows, "no launch was recorded: the stand-in ran no kernel"
    compiled = [x for x in rows if x["status"] == "ok"]
    print(f"{ct.cc_name(cc)}: {len(rows)} launches, {len(compiled)} compiled; {len(r['recomputed'])} source(s) run "
          f"again in {r['seconds']} s (notebooks run in {r['capture_seconds']} s), {len(r['reused'])} kept "
          f"from {ct.COMMITTED.name} or {ct.LOCAL.relative_to(ROOT)}")
    for x in compiled:   # registers and spills, in the log
        regs = "ptx only" if x["n_regs"] is None else f"{x['n_regs']:>3} regs, {x['n_spills'] or 0} B spilled"
        print(f"  {x['kernel']:28} {x['dtypes']:10} {x['num_warps']}w{x['num_stages']}s {regs:>24} "
              f"{x['shared'] // 1024:>4} KiB  {x['constexprs']}")
    bad = [x for x in rows if x["status"] == "failed" and not any(matches(k, x) for k in KNOWN)]
    assert not bad, f"{len(bad)} launch(es) fail on {ct.cc_name(cc)}:\n" + "\n".join(line(x) for x in bad)


def test_every_kernel_a_solution_defines_is_launched_on_the_h100(results):
    """A kernel the stand-in never launched would never be judged: the notebooks' own launches must reach them
    (a @triton.jit helper that kernels call is compiled inside them)."""
    import ast
    import nbformat
    defined, helpers = set(), set()
    for folder in ct.SOURCES:
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            jitted = {}
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type != "code" or "triton.jit" not in cell.source:
                    continue
                src = "\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
                for node in ast.walk(ast.parse(src)):
                    if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
                        jitted[node.name] = ast.unparse(node)
            for name in jitted:
                defined.add((path.name, name))
                if any(f"{name}(" in body for other, body in jitted.items() if other != name):
                    helpers.add((path.name, name))
    launched = {(x["site"].split(" cell ")[0].split("/")[-1], x["kernel"]) for x in results[(9, 0)]["rows"]}
    missing = sorted(defined - launched - helpers - set(NOT_REACHED))
    assert not missing, f"defined but never launched by the stand-in run: {missing}"


def _known(key):
    return pytest.param(key, marks=pytest.mark.xfail(strict=True, reason=KNOWN[key]),
                        id=f"{key[0]}-{key[1][:5]}-{key[2]}-{key[4].split(', BLOCK')[0]}-{key[3]}")


@pytest.mark.parametrize("key", [_known(k) for k in sorted(KNOWN)])
def test_a_known_failure(results, key):
    """Strict xfails: once the fix is merged the launch is gone (other tiles) or compiles, this passes, and strict
    turns the pass red until KNOWN_FAILURES loses the entry."""
    cc = next(cc for cc in ct.TARGETS if ct.cc_name(cc) == key[0])
    rows = [x for x in results[cc]["rows"] if matches(key, x)]
    assert not rows, "\n".join(line(x) for x in rows)


# --- the kept verdicts are trusted only while nothing that decides them has changed ---------------------------
NOTEBOOK = "solutions/03_first_triton_kernel.ipynb"
VERSIONS = ("3.9.0", "2.13.0+cpu")


@pytest.fixture
def copy(tmp_path):
    """A course with one solution notebook: what compile_targets.fingerprints reads."""
    shutil.copytree(ROOT / "course_utils", tmp_path / "course_utils", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "compile_targets.py", tmp_path / "tools")
    (tmp_path / "solutions" / "labs").mkdir(parents=True)
    shutil.copy(ROOT / NOTEBOOK, tmp_path / NOTEBOOK)
    return tmp_path


def edit(path: Path, change) -> None:
    nb = json.loads(path.read_text())
    change(nb["cells"])
    path.write_text(json.dumps(nb, indent=1))


def swap(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer has {old!r}: pick another line to change"
    path.write_text(text.replace(old, new, 1))


def kernel_cell(cells) -> dict:
    return next(c for c in cells if c["cell_type"] == "code" and "@triton.jit" in "".join(c["source"]))


def test_a_notebooks_fingerprint_follows_its_code_cells_not_its_prose(copy):
    before = ct.fingerprints(copy, VERSIONS)
    assert set(before) == {NOTEBOOK, ct.GRADER}

    def prose(cells):
        md = next(c for c in cells if c["cell_type"] == "markdown")
        md["source"] = "".join(md["source"]) + "\nA sentence an editor added."
        kernel_cell(cells).update(execution_count=7, outputs=[{"output_type": "stream", "name": "stdout",
                                                                "text": "a run's output\n"}])
    edit(copy / NOTEBOOK, prose)
    assert ct.fingerprints(copy, VERSIONS) == before, "markdown, outputs and counts decide no launch"

    def kernel(cells):   # one changed line in a kernel: its launches and their compilation may differ
        cell = kernel_cell(cells)
        cell["source"] = "".join(cell["source"]).replace("tl.program_id(0)", "tl.program_id(axis=0)", 1)
        assert "axis=0" in cell["source"]
    edit(copy / NOTEBOOK, kernel)
    after = ct.fingerprints(copy, VERSIONS)
    assert after[NOTEBOOK] != before[NOTEBOOK], "a changed kernel must be judged again"
    assert after[ct.GRADER] == before[ct.GRADER]


@pytest.mark.parametrize("change", ["course_utils", "tool", "triton"])
def test_what_every_source_depends_on_is_in_every_fingerprint(copy, change):
    before = ct.fingerprints(copy, VERSIONS)
    versions = VERSIONS
    if change == "course_utils":   # the plan decides tiles and dtypes of every notebook
        swap(copy / "course_utils" / "capability.py", "ROOM_MEDIUM = 160 * KIB, 96 * KIB",
             "ROOM_MEDIUM = 160 * KIB, 64 * KIB")
    elif change == "tool":
        swap(copy / "tools" / "compile_targets.py", "CI_COMPILE_SECONDS = 60", "CI_COMPILE_SECONDS = 61")
    else:
        versions = ("3.9.1", VERSIONS[1])
    after = ct.fingerprints(copy, versions)
    assert all(after[s] != before[s] for s in before), f"a change to the {change} must invalidate every entry"


def test_a_source_whose_fingerprint_changed_is_run_again_and_the_others_are_kept(tmp_path, monkeypatch):
    """run(ci=True) with a kept verdict per source: the one whose fingerprint no longer matches (its kernel changed)
    is run again for every target, and the verdict kept for it is not used, even though it passed."""
    prints = {s: f"print-of-{Path(s).stem}" for s in ct.sources()}
    changed = "solutions/labs/lab3_cross_entropy.ipynb"
    kept_row = {"kernel": "kept_kernel", "site": "", "sites": [], "dtypes": "fp32", "constexprs": "", "num_warps": 4,
                "num_stages": 1, "target": "", "dot": False, "status": "ok", "why": "", "shared": 0, "n_regs": None,
                "n_spills": None}
    entry = {s: {"fingerprint": p, "stopped": [], "rows": [{**kept_row, "site": f"{s} cell 1"}]}
             for s, p in prints.items()}
    kept = {"targets": {ct.cc_name(cc): entry for cc in ct.TARGETS}}
    monkeypatch.setattr(ct, "COMMITTED", tmp_path / "committed.json")
    monkeypatch.setattr(ct, "LOCAL", tmp_path / "local.json")
    ct.COMMITTED.write_text(json.dumps(kept))
    monkeypatch.setattr(ct, "fingerprints", lambda: {**prints, changed: "print-of-the-changed-kernel"})
    asked = []

    def judged_again(cc, cache, ci, only):
        asked.append((cc, only))
        row = {**kept_row, "kernel": "judged_again", "site": f"{changed} cell 1", "status": "failed", "why": "w"}
        return {"target": ct.cc_name(cc), "cc": list(cc), "triton": VERSIONS[0],
                "sources": {s: {"rows": [row], "stopped": []} for s in only}}
    monkeypatch.setattr(ct, "run_target", judged_again)
    got = ct.run(list(ct.TARGETS), ci=True, cache=tmp_path / "cache")
    assert sorted(asked) == [(cc, [changed]) for cc in ct.TARGETS]
    for r in got:
        assert r["recomputed"] == [changed] and changed not in r["reused"]
        by_source = {s: [x["kernel"] for x in e["rows"]] for s, e in r["entries"].items()}
        assert by_source[changed] == ["judged_again"], "the stale verdict was used"
        assert all(k == ["kept_kernel"] for s, k in by_source.items() if s != changed)
        assert [x["status"] for x in r["rows"]].count("failed") == 1
    local = ct.load_kept(ct.LOCAL)   # what the next run (or --ci --write) reuses: the new verdict, new fingerprint
    assert local["sm_75"][changed]["fingerprint"] == "print-of-the-changed-kernel"
    assert local["sm_75"][changed]["rows"][0]["kernel"] == "judged_again"
    assert ct.reusable("sm_90", ct.fingerprints(), [local]) == (local["sm_90"], [])
