import os
import shutil
import subprocess
import tempfile


def _one_gpu_per_worker() -> None:
    """On a machine of several GPUs, pytest-xdist's workers take one each, in turn (gw0 the first, gw1 the
    second, ...), so that notebooks timed side by side do not share a GPU; the notebooks' kernels inherit it.
    Set before torch starts (below); a CUDA_VISIBLE_DEVICES already set is left alone."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or "CUDA_VISIBLE_DEVICES" in os.environ or not shutil.which("nvidia-smi"):
        return
    try:
        gpus = [ln for ln in subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
                .stdout.splitlines() if ln.startswith("GPU ")]
    except (OSError, subprocess.SubprocessError):
        return
    if len(gpus) > 1:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(int(worker[2:]) % len(gpus))


_one_gpu_per_worker()
# The checks and predictions the tests make go to a log of this test process, not to the developer's own
# (the course folder's predictions.jsonl); a test that means a log of its own sets COURSE_PREDICTIONS itself.
os.environ.setdefault("COURSE_PREDICTIONS", os.path.join(tempfile.mkdtemp(prefix="course-tests-"), "predictions.jsonl"))
# The tests time nothing: the labs' speed rows say "not measured" here and in the notebooks the tests run
# (workers share a GPU; speed is measured where a notebook runs alone: tools/gpu_run.py, a student).
os.environ.setdefault("COURSE_TIMING", "off")
# Importing course_utils first puts Triton in interpreter mode on a machine without a GPU,
# before any test module defines a kernel.
import course_utils  # noqa: E402,F401


def pytest_configure(config):
    """On a GPU, the card's ceilings are measured here, once, before any worker starts: measured while
    workers share the GPU, they would come out low, and a notebook's kernel would then beat its "bound".
    The notebooks and tests read them from the cache (bench.ceilings)."""
    if not hasattr(config, "workerinput") and course_utils.ON_GPU and not course_utils.INTERPRET:
        course_utils.bench.ceilings()
