"""How long each lesson's first real code cell (its imports cell) takes, and where the time goes.

For each solution notebook it starts a fresh Jupyter kernel (its start is not counted), runs the Colab
cell, then times the imports cell (the second code cell) by the wall clock, with the kernel under
`python -X importtime` (PYTHONPROFILEIMPORTTIME=1): the modules the cell imported, by group. A cold run
first drops the page cache (root only), so torch's files come from disk as on a fresh machine.
Run from the repository root: PYTHONPATH=$PWD:<jupyter wheels> python3 docs/gpu-results/sweeps/lesson_import_times.py
    [--lessons 00,01,...] [--cold 00,lab2] [--bare]   (--bare: also plain `import X` processes, cold and warm)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path.cwd()
GROUPS = [("torch._dynamo", "torch._dynamo"), ("inductor", "torch._inductor"), ("sympy", "sympy"),
          ("torch", "torch"), ("triton", "triton"), ("course_utils", "course_utils"),
          ("matplotlib", ("matplotlib", "matplotlib_inline", "PIL", "kiwisolver", "pyparsing", "cycler",
                          "contourpy", "fontTools", "dateutil")),
          ("ipywidgets", "ipywidgets"), ("numpy", "numpy"), ("IPython/jupyter", ("IPython", "ipykernel", "jupyter"))]
NAMES = [g for g, _ in GROUPS] + ["other"]


def group(mod):
    for g, prefixes in GROUPS:
        for p in (prefixes if isinstance(prefixes, tuple) else (prefixes,)):
            if mod == p or mod.startswith(p + "."):
                return g
    return "other"


def split(lines):
    """Seconds of import time by group (sum of each module's own time), from -X importtime lines."""
    out = dict.fromkeys(NAMES, 0.0)
    for line in lines:
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            out[group(m.group(4))] += int(m.group(1)) / 1e6
    return out


def drop_cache():
    try:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def cells(name):
    path = next(p for p in sorted((ROOT / "solutions").rglob("*.ipynb")) if p.name.startswith(name + "_")
                or p.name.startswith(name))
    code = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    return path.name, "".join(code[0]["source"]), "".join(code[1]["source"])


def run_cell(name, cold):
    from jupyter_client import KernelManager
    nb, colab, cell = cells(name)
    dropped = drop_cache() if cold else False
    err = tempfile.NamedTemporaryFile("w+", suffix=".err", delete=False)
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1", COURSE_HEADLESS="0")
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env, stderr=err, cwd=str(ROOT))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)

    said = []

    def execute(src):
        msg_id = kc.execute(src)
        error = None
        while True:
            m = kc.get_iopub_msg(timeout=300)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "error":
                error = m["content"]["ename"] + ": " + m["content"]["evalue"]
            if m["msg_type"] == "stream":
                said.append(m["content"]["text"])
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                return error

    execute(colab)
    time.sleep(0.3)
    err.flush()
    start_at = os.path.getsize(err.name)
    t0 = time.perf_counter()
    error = execute(cell)
    wall = time.perf_counter() - t0
    time.sleep(0.3)
    # what got imported in the cell, and where the later cells' compile-only modules stand
    probe = "import sys; print('loaded', ' '.join(m for m in ('torch._dynamo','torch._inductor','matplotlib.pyplot','ipywidgets','sympy') if m in sys.modules))"
    said.clear()
    execute(probe)
    kc.stop_channels()
    km.shutdown_kernel(now=True)
    text = Path(err.name).read_text(errors="replace")
    later = text[start_at:]
    loaded = re.findall(r"^loaded(.*)$", "".join(said), re.M)
    os.unlink(err.name)
    return nb, wall, split(later.splitlines()), (loaded[-1].split() if loaded else []), error, dropped


def bare(mod, cold):
    dropped = drop_cache() if cold else False
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {mod}"], capture_output=True, text=True,
                       env=dict(os.environ, TRITON_INTERPRET="0"))
    return time.perf_counter() - t0, split(p.stderr.splitlines()), dropped


def main():
    args = sys.argv[1:]
    lessons = (args[args.index("--lessons") + 1].split(",") if "--lessons" in args else
               ["00", "01", "02", "03", "04", "05", "06", "07", "08", "09"] + [f"lab{i}" for i in range(1, 7)])
    cold = args[args.index("--cold") + 1].split(",") if "--cold" in args else ["00"]
    print(f"python {sys.version.split()[0]}; tree {ROOT}; {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    cols = ["torch", "triton", "course_utils", "matplotlib", "ipywidgets", "torch._dynamo", "inductor", "sympy",
            "numpy", "IPython/jupyter", "other"]
    short = {"course_utils": "course", "matplotlib": "mpl", "ipywidgets": "widgets", "torch._dynamo": "dynamo",
             "IPython/jupyter": "ipy"}
    head = f"{'':28}{'cache':>6}{'wall s':>8}" + "".join(f"{short.get(c, c):>8}" for c in cols)
    if "--bare" in args:
        print("\nplain `python -X importtime -c 'import X'`, a fresh process each: wall s, then own import time by group")
        print(head)
        for mod, c in [("torch", True), ("torch", False), ("triton", False), ("course_utils", False),
                       ("matplotlib.pyplot", False), ("ipywidgets", False), ("torch._dynamo", False),
                       ("torch._inductor.compile_fx", False)]:
            if True:
                wall, g, dropped = bare(mod, c)
                print(f"{mod:28}{('cold' if dropped else 'warm?') if c else 'warm':>6}{wall:>8.2f}"
                      + "".join(f"{g[k]:>8.2f}" for k in cols))
    if "--bare" in args:
        print("\nplain `python -c 'import X'` (no -X importtime), wall s, a fresh process each")
        for mod, c in [("torch", True), ("torch", False), ("torch", False), ("torch, triton, course_utils", False)]:
            dropped = drop_cache() if c else False
            code = "import " + mod.replace(", ", "; import ")
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TRITON_INTERPRET="0"), check=True)
            print(f"{mod:28}{('cold' if dropped else 'warm?') if c else 'warm':>6}{time.perf_counter() - t0:>8.2f}")
    print("\nimports cell (second code cell) in a fresh Jupyter kernel: wall s of the cell, then own import time by"
          " group (-X importtime, which adds some overhead)")
    print(head + "   loaded after the cell")
    for name in lessons:
        for c in ([True, False] if name in cold else [False]):
            nb, wall, g, loaded, error, dropped = run_cell(name, c)
            print(f"{nb[:28]:28}{('cold' if dropped else 'warm?') if c else 'warm':>6}{wall:>8.2f}"
                  + "".join(f"{g[k]:>8.2f}" for k in cols) + "   " + " ".join(loaded)
                  + (f"   ERROR {error}" if error else ""), flush=True)


if __name__ == "__main__":
    main()
