"""trips.hardware: the DRAM bytes Nsight Compute reads from the GPU's counters, beside the counted bytes.

On the CPU there is no GPU and no ncu: it says so in one line and shows the counted bytes (on a GPU, tested as
if there were none). The whole path (the functions sent to a child Python, a @triton.jit kernel and a closure
over a tensor rebuilt there and run, ncu's CSV read back and split per function) runs on any machine under a
stand-in `ncu` that runs the command it is given and then prints a table in ncu's CSV format
(tests/ncu_dram_bytes_sample.csv); the kernel runs where the machine runs kernels (the GPU, or the interpreter)."""
import linecache
import os
import re
import stat
import sys
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
import torch

from course_utils import hardware_bytes, trips

SAMPLE = Path(__file__).with_name("ncu_dram_bytes_sample.csv")
MB256 = 256 * 2**20


def test_bad_arguments_get_a_clear_error():
    x = torch.ones(8)
    with pytest.raises(TypeError, match="takes a dict"):
        trips.hardware([lambda: x])
    with pytest.raises(ValueError, match="empty"):
        trips.hardware({})
    with pytest.raises(TypeError, match=r"fns\['eager'\] is a Tensor, not a function"):
        trips.hardware({"eager": x})
    with pytest.raises(TypeError, match="each label is a string"):
        trips.hardware({1: lambda: x})
    with pytest.raises(ValueError, match="counted has 'fused', which fns does not"):
        trips.hardware({"eager": lambda: x}, counted={"fused": trips.count(lambda: x * 2)})
    with pytest.raises(TypeError, match="not what trips.count returns"):
        trips.hardware({"eager": lambda: x}, counted={"eager": 64})


@pytest.fixture
def no_gpu(monkeypatch):
    """As on a machine without a GPU (a no-op on one): what hardware() and prepare_hardware() do there."""
    monkeypatch.setattr(hardware_bytes, "ON_GPU", False)


def test_on_the_cpu_it_says_why_in_one_line_and_shows_the_counted_bytes(no_gpu):
    x = torch.ones(1024)
    hw = trips.hardware({"eager": lambda: x.cos().cos(), "fused": lambda: x.cos()},
                        counted={"eager": trips.count(lambda: x.cos().cos())})
    assert not hw.available and hw.why == "Nsight Compute needs a GPU, and this machine has none"
    assert hw["eager"].dram_read is None and hw["eager"].dram_written is None
    assert hw["eager"].counted_read == 8192 and hw["fused"].counted_read is None
    text = repr(hw)
    assert text.splitlines()[0].split() == ["counted", "read", "counted", "written"]
    assert "eager" in text and "8.0 KiB" in text and "DRAM" not in text.splitlines()[0]
    assert text.splitlines()[-1] == "DRAM bytes (ncu): not measured here: " + hw.why
    assert "<pre>" in hw._repr_html_()


def test_ncu_csv_is_read_per_kernel_and_split_per_function():
    kernels = hardware_bytes.parse_ncu_csv(SAMPLE.read_text())
    assert [k["id"] for k in kernels] == [str(i) for i in range(13)]
    assert kernels[0]["dram__bytes_read.sum"] == 268_483_584 and kernels[0]["dram__bytes_write.sum"] == 247_196_416
    by_function = hardware_bytes.attribute(kernels, 4)
    assert [len(by_function[i]) for i in range(4)] == [2, 1, 1, 5]   # reduce-overhead copies x in, then 1 kernel
    assert by_function[1][0]["name"] == "hardware-bytes 1/cos_cos_kernel"


def test_without_the_ranges_the_delimiters_split_the_kernels():
    text = re.sub(r'"\d+  ""<default domain>:hardware-bytes \d+:[^"]*"" "', '""', SAMPLE.read_text())
    text = re.sub(r"hardware-bytes \d+/", "", text)
    assert "hardware-bytes" not in text
    by_function = hardware_bytes.attribute(hardware_bytes.parse_ncu_csv(text), 4)
    assert [len(by_function[i]) for i in range(4)] == [2, 1, 1, 5]
    assert by_function[2][0]["name"] == "triton_poi_fused_cos_0"
    assert hardware_bytes.attribute(hardware_bytes.parse_ncu_csv(text), 3) is None


def test_the_details_page_and_scaled_units_read_the_same():
    details = textwrap.dedent('''\
        ==PROF== Disconnected from process 1
        "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
        "0","1","python3","h","hardware-bytes 0","1","7","(128, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Mbyte","268.47"
        "0","1","python3","h","hardware-bytes 0","1","7","(128, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","Kbyte","1,024"
        ''')
    (k,) = hardware_bytes.parse_ncu_csv(details)
    assert k["dram__bytes_read.sum"] == pytest.approx(268.47e6) and k["dram__bytes_write.sum"] == 1.024e6
    assert hardware_bytes.parse_ncu_csv("==ERROR== nothing to see\n") == []


def test_rows_further_apart_than_ten_percent_are_marked():
    counted = trips.Trips([trips.Kernel("k", "torch", MB256, MB256, MB256, MB256)])
    row = hardware_bytes.HardwareRow("x", counted, dram_read=MB256, dram_written=int(MB256 * 0.95))
    assert not row.differs
    row.dram_read = MB256 // 2          # the L2 served half the reads
    assert row.differs
    row.dram_read, row.l2_bytes, row.kernels = MB256, 50 * 2**20, 1
    row.dram_written = MB256 - 40 * 2**20     # the last writes still in the L2 when the kernel ended
    assert not row.differs and row.write_shortfall
    row.dram_written = MB256 - 80 * 2**20     # more than the L2 holds
    assert row.differs
    small = trips.Trips([trips.Kernel("k", "torch", 4096, 4096, 4096, 4096)])
    assert not hardware_bytes.HardwareRow("x", small, dram_read=0, dram_written=8192).differs  # under 1 MiB


def test_counts_on_a_small_copy_scale_to_the_full_size():
    xs = torch.ones(4096)
    t = trips.count(lambda: xs.cos().cos()).scaled(2**16 / 4096)
    assert (t.launches, t.bytes_read, t.bytes_written) == (2, 2 * 4 * 2**16, 2 * 4 * 2**16)
    assert t.kernels[0].reads == {"f32[4096]": 4 * 2**16}


def test_a_compiled_function_is_sent_as_its_original_with_its_mode():
    def chain(t):
        return t.cos().cos()
    rebuild, (original, options, dynamic) = hardware_bytes._reduce_kernel_or_compiled(
        torch.compile(chain, mode="reduce-overhead"))
    assert rebuild is hardware_bytes._rebuild_compiled and original is chain
    assert options.get("triton.cudagraphs") is True
    _, (_, options, _) = hardware_bytes._reduce_kernel_or_compiled(torch.compile(chain))
    assert not options.get("triton.cudagraphs")


NOTEBOOK_CELL = '''
import torch
import triton
import triton.language as tl
from course_utils.environment import DEVICE

x = torch.arange(1000, dtype=torch.float32, device=DEVICE)


@triton.jit
def twice_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


def fused():
    out = torch.empty_like(x)
    twice_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    assert torch.equal(out, x * 2), "the rebuilt kernel computed something else"


def eager():
    assert float((x + x).sum()) == 999_000.0
'''


def _notebook_namespace(tmp_path) -> dict:
    """The cell run as IPython runs one: its text in linecache under a made-up file name, in a namespace
    that is no importable module (so functions and kernels must travel by value)."""
    name = str(tmp_path / "ipykernel_0" / "cell_7.py")
    linecache.cache[name] = (len(NOTEBOOK_CELL), None, NOTEBOOK_CELL.splitlines(True), name)
    namespace = {"__name__": "__notebook__"}
    exec(compile(NOTEBOOK_CELL, name, "exec"), namespace)
    return namespace


FAKE_NCU = '''#!{python}
"""A stand-in for ncu: runs the command it is given, then writes a canned table to --log-file. A standby (the
child prepare_hardware starts) it runs as any other command, unless FAKE_NCU says to lose it: "standby-gone"
ends at once, "standby-stuck" never runs it. Each start is noted in FAKE_NCU_CALLS, if set."""
import os, subprocess, sys, time
FLAGS = {{"--nvtx", "--csv"}}
args, options = sys.argv[1:], {{}}
while args[0].startswith("--"):
    if args[0] in FLAGS:
        args = args[1:]
    else:
        options[args[0]], args = args[1], args[2:]
mode = os.environ.get("FAKE_NCU", "ok")
standby = any("_standby_child" in a for a in args)
if os.environ.get("FAKE_NCU_CALLS"):
    with open(os.environ["FAKE_NCU_CALLS"], "a") as calls:
        calls.write(("standby" if standby else "fresh") + "\\n")
if mode == "not-permitted":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
if mode == "slow":
    time.sleep(30)
if standby and mode == "standby-gone":
    sys.exit(1)
if standby and mode == "standby-stuck":
    time.sleep(600)
done = subprocess.run(args)
if done.returncode == 0:
    with open(options["--log-file"], "w") as log, open({sample!r}) as sample:
        log.write(sample.read())
sys.exit(done.returncode)
'''


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    ncu = folder / "ncu"
    ncu.write_text(FAKE_NCU.format(python=sys.executable, sample=str(SAMPLE)))
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(hardware_bytes, "_why_not_here", lambda: None)   # as on a GPU
    monkeypatch.setenv("FAKE_NCU_CALLS", str(tmp_path / "ncu-calls"))
    yield monkeypatch
    hardware_bytes._end_standby()


def _ncu_calls(tmp_path) -> list[str]:
    calls = tmp_path / "ncu-calls"
    return calls.read_text().split() if calls.exists() else []


def _wait_for(condition, seconds=180):
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "waited too long"
        time.sleep(0.1)


def test_the_whole_path_through_a_stand_in_ncu(fake_ncu, tmp_path):
    cell = _notebook_namespace(tmp_path)
    counted = {"eager": trips.count(cell["eager"]), "fused": trips.count(cell["fused"])}
    hw = trips.hardware({"eager": cell["eager"], "fused": cell["fused"]}, counted=counted, timeout=240)
    assert hw.available, hw.why
    assert (hw["eager"].dram_read, hw["eager"].dram_written, hw["eager"].kernels) == (536_972_544, 492_556_032, 2)
    assert (hw["fused"].dram_read, hw["fused"].dram_written) == (268_471_040, 245_560_320)
    assert hw["eager"].differs and hw["fused"].differs   # the counted bytes are a 1,000-element tensor's
    lines = repr(hw).splitlines()
    assert "DRAM read (ncu)" in lines[0] and lines[1].endswith("*")
    assert any(line.startswith("* counted and DRAM bytes differ") for line in lines)


def test_a_crash_in_the_profiled_process_is_one_line(fake_ncu, tmp_path):
    cell = _notebook_namespace(tmp_path)

    def broken():
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")
    hw = trips.hardware({"fused": cell["fused"], "broken": broken}, timeout=240)
    assert not hw.available
    assert hw.why == "the profiled process failed: 'broken': RuntimeError: CUDA error: an illegal memory " \
                     "access was encountered"


def test_counters_not_permitted_and_a_timeout_are_one_line_each(fake_ncu):
    fake_ncu.setenv("FAKE_NCU", "not-permitted")
    hw = trips.hardware({"eager": lambda: None})
    assert not hw.available and "ERR_NVGPUCTRPERM" in hw.why and "\n" not in hw.why
    fake_ncu.setenv("FAKE_NCU", "slow")
    hw = trips.hardware({"eager": lambda: None}, timeout=2)
    assert not hw.available and hw.why == "Nsight Compute took longer than 2 s and was stopped"


def test_no_ncu_is_one_line(monkeypatch):
    monkeypatch.setattr(hardware_bytes, "_why_not_here", lambda: None)
    monkeypatch.setattr(hardware_bytes, "NCU_PLACES", ())
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    hw = trips.hardware({"eager": lambda: None})
    assert not hw.available and hw.why == "Nsight Compute (ncu) is not installed here, or not on the PATH"


# --- the standby: the child started ahead by prepare_hardware ---------------------------------------------
def test_a_standby_takes_the_call_and_follows_the_notebook(fake_ncu, tmp_path):
    cell = _notebook_namespace(tmp_path)
    hardware_bytes.prepare_hardware()
    standby = hardware_bytes._standby
    assert standby is not None and standby.alive()
    _wait_for(lambda: os.path.exists(standby.path("ready.json")))
    # after it started: a variable it can follow, a variable torch sets, another working folder
    fake_ncu.setenv("HARDWARE_BYTES_SEEN", "after")
    fake_ncu.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    fake_ncu.delenv("FAKE_NCU", raising=False)
    fake_ncu.chdir(tmp_path)

    def sees_the_notebook():
        assert os.environ.get("HARDWARE_BYTES_SEEN") == "after" and os.getcwd() == str(tmp_path)
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
        assert hardware_bytes.NVML_CHECK not in os.environ, "set for the standby's imports alone"
    hw = trips.hardware({"eager": cell["eager"], "fused": cell["fused"], "sees": sees_the_notebook}, timeout=240)
    assert hw.available, hw.why
    assert (hw["eager"].dram_read, hw["fused"].dram_written) == (536_972_544, 245_560_320)
    assert _ncu_calls(tmp_path) == ["standby"], "no fresh child ran"
    seen = hw.standby
    # asking whether CUDA is there (Inductor's import does) starts nothing; any other CUDA call would
    assert seen["used"] and seen["torch_cuda_initialized"] is False
    assert [c for c in seen["cuda_calls"] if not c.startswith("is_available ")] == [], seen["cuda_calls"]
    assert seen["driver"] in (None, "not initialised")   # None where there is no CUDA driver
    assert not standby.alive() and not os.path.exists(standby.folder) and hardware_bytes._standby is None
    assert not any("started ahead" in line for line in repr(hw).splitlines())


def test_a_failing_function_in_the_standby_is_reported_once(fake_ncu, tmp_path):
    cell = _notebook_namespace(tmp_path)

    def broken():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    hardware_bytes.prepare_hardware()
    hw = trips.hardware({"fused": cell["fused"], "broken": broken}, timeout=240)
    assert hw.why == "the profiled process failed: 'broken': RuntimeError: CUDA error: an illegal memory " \
                     "access was encountered"
    assert _ncu_calls(tmp_path) == ["standby"], "the functions failed, not the standby: nothing to run again"


@pytest.mark.parametrize("mode, why", [
    ("standby-gone", "it had ended, exit code 1"),
    ("killed", "it had ended, exit code -9"),
    ("standby-stuck", "it was still starting 1 s later"),
    ("changed", "TORCH_HARDWARE_BYTES_TEST changed after it started"),
])
def test_a_standby_that_cannot_serve_gives_way_to_a_fresh_child(fake_ncu, tmp_path, mode, why):
    fake_ncu.setenv("FAKE_NCU", mode if mode.startswith("standby") else "standby-stuck")
    fake_ncu.setattr(hardware_bytes, "STANDBY_START_S", 1.0)
    hardware_bytes.prepare_hardware()
    standby = hardware_bytes._standby
    _wait_for(lambda: _ncu_calls(tmp_path) == ["standby"], 60)
    if mode == "standby-gone":
        _wait_for(lambda: not standby.alive(), 60)
    if mode == "killed":
        os.killpg(standby.process.pid, signal.SIGKILL)
        _wait_for(lambda: not standby.alive(), 60)
    if mode == "changed":
        fake_ncu.setenv("TORCH_HARDWARE_BYTES_TEST", "1")   # read as torch starts: the standby cannot follow
    x = torch.ones(8)
    hw = trips.hardware({"eager": lambda: x + 1, "b": lambda: x, "c": lambda: x, "d": lambda: x}, timeout=240)
    assert hw.available, hw.why
    assert hw.standby == {"used": False, "why": why}
    assert _ncu_calls(tmp_path) == ["standby", "fresh"]
    assert f"the profiler's process started ahead could not be used ({why}): a fresh one ran" in repr(hw)
    assert not standby.alive() and not os.path.exists(standby.folder)


def test_only_variables_read_at_start_keep_a_standby_from_following():
    before = {"PATH": "/bin", "TRITON_CACHE_DIR": "/a", "HOME": "/h"}
    assert hardware_bytes.environment_change(before, dict(before, TRITON_CACHE_DIR="/b", NEW="1",
                                                          TORCHINDUCTOR_CACHE_DIR="/c")) == \
        ({"TRITON_CACHE_DIR": "/b", "NEW": "1", "TORCHINDUCTOR_CACHE_DIR": "/c"}, [])
    assert hardware_bytes.environment_change(before, {"PATH": "/bin"}) == ({}, ["HOME", "TRITON_CACHE_DIR"])
    for name in ("PYTHONPATH", "LD_LIBRARY_PATH", "TORCHINDUCTOR_MAX_AUTOTUNE", "TRITON_INTERPRET",
                 "CUDA_VISIBLE_DEVICES", "COURSE_PLAN"):
        assert hardware_bytes.environment_change(before, dict(before, **{name: "1"})) == \
            f"{name} changed after it started"


def test_the_standby_ends_when_the_notebook_does(fake_ncu, tmp_path):
    """The notebook's process dies without a word (a kernel killed): the standby sees it gone and ends."""
    script = textwrap.dedent(f"""
        import os, sys, time
        from course_utils import hardware_bytes
        hardware_bytes._why_not_here = lambda: None
        hardware_bytes.prepare_hardware()
        standby = hardware_bytes._standby
        print(standby.process.pid, standby.folder, flush=True)
        while not os.path.exists(standby.path("ready.json")):
            time.sleep(0.1)
        os._exit(0)   # no clean-up at exit
        """)
    notebook = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240,
                              env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    assert notebook.returncode == 0, notebook.stderr
    ncu, folder = notebook.stdout.split()
    _wait_for(lambda: not hardware_bytes._alive(int(ncu)), 30)   # ncu ends when the child under it does
    assert not os.path.exists(folder)


def test_no_standby_where_it_could_not_profile(fake_ncu, tmp_path):
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    fake_ncu.setattr(hardware_bytes, "PARAMS", str(params))
    fake_ncu.setattr(os, "geteuid", lambda: 1000)
    hardware_bytes.prepare_hardware()
    assert hardware_bytes._standby is None and _ncu_calls(tmp_path) == []
    fake_ncu.setattr(os, "geteuid", lambda: 0)          # root reads the counters all the same
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert hardware_bytes._counters_open()


def test_on_the_cpu_preparing_does_nothing(no_gpu):
    hardware_bytes.prepare_hardware()
    assert hardware_bytes._standby is None
