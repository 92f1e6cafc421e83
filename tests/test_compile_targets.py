"""Every kernel the course launches compiles for every GPU it supports, on this CPU (tools/compile_targets.py).

Each solution notebook runs as each GPU would run it (its plan, its sizes, its launch parameters) with the launches
recorded instead of run; the recorded launches are compiled for that GPU's target and judged: it compiles, its
shared memory fits what that GPU grants a block, it uses no dtype that GPU's plan forbids. Triton here is the
CPU wheel (3.9); the GPUs and Colab run 3.6.

Cost: CI's run is cold (no Triton cache). To fit the suite's budget, CI compiles the selection of
`compile_targets.child(ci=True)`: every launch of a kernel that multiplies tiles (tl.dot: what the targets differ
in), for every target; the 1-D kernels once each, for sm_75. All targets once per run, two processes at a time.
`python3 tools/compile_targets.py --write` compiles every launch down to the cubin (registers and spills too, about 7
minutes on 2 cores) and writes docs/gpu-results/compile-targets-full.md; `--ci --write` writes compile-targets.md.
"""
import importlib.util
import sys
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
    """Every target, once, two at a time (./course test's --dist loadscope keeps this module on one worker)."""
    return {tuple(r["cc"]): r for r in ct.run(list(ct.TARGETS), jobs=2, ci=True)}


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
    print(f"{ct.cc_name(cc)}: {len(rows)} launches, {len(compiled)} compiled in {r['seconds']} s "
          f"(notebooks run in {r['capture_seconds']} s)")
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
