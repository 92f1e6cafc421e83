# JupyterHub for a class on one GPU server, with Feed the Beast preinstalled (docs/classroom.md).
#
#   sudo <course venv>/bin/jupyterhub -f jupyter/hub/jupyterhub_config.py
#
# from a checkout set up with `./course setup` (its .venv has the course, JupyterHub and the proxy).
# Every student is a Unix account of the server (PAM login; list them in COURSE_HUB_STUDENTS, or admit a
# Unix group with COURSE_HUB_GROUP) and gets a server running as that account, so their files and
# processes are theirs alone. In their home, on first start: their own copy of the lessons and labs
# (~/feed-the-beast/notebooks, ~/feed-the-beast/labs; never overwritten later), their own prediction log
# (~/feed-the-beast/predictions.jsonl, the lessons' and labs' alike), and their own caches (the measured
# GPU ceilings in ~/.cache, Triton's kernels in ~/.triton, torch.compile's in ~/.cache/torchinductor).
# Shared: the installed course and its Python environment, read-only, and the GPUs.
#
# Settings from the environment (all optional):
#   COURSE_HUB_URL       where the hub listens (default http://:8000; put TLS in front of it)
#   COURSE_HUB_STUDENTS  comma-separated user names allowed to log in
#   COURSE_HUB_GROUP     a Unix group whose members may log in (one of these two is needed: since
#                        JupyterHub 5 no one may log in who is not allowed by name, group or admin)
#   COURSE_HUB_ADMINS    comma-separated admin user names (the instructors)
#   COURSE_HUB_GPUS      GPU indices to spread the students over, e.g. "0,1,2,3": each student gets one,
#                        always the same (by a hash of the name); unset, every student sees every GPU
# tests/test_hub.py starts this configuration on 127.0.0.1 with a dummy login and a local spawner.
import os
import shutil
import sys
import zlib
from pathlib import Path

COURSE = Path(__file__).resolve().parents[2]        # the checkout: notebooks/, labs/, jupyter/
BIN = Path(sys.executable).parent                   # the course's environment (the hub runs from it)
WORKDIR = "feed-the-beast"                          # a student's folder, in their home

c = get_config()  # noqa: F821

c.JupyterHub.bind_url = os.environ.get("COURSE_HUB_URL", "http://:8000")
c.ConfigurableHTTPProxy.command = [str(BIN / "configurable-http-proxy")]

# --- who logs in ----------------------------------------------------------------------------------
c.JupyterHub.authenticator_class = "pam"           # the server's Unix accounts
students = {u.strip() for u in os.environ.get("COURSE_HUB_STUDENTS", "").split(",") if u.strip()}
admins = {u.strip() for u in os.environ.get("COURSE_HUB_ADMINS", "").split(",") if u.strip()}
if students:
    c.Authenticator.allowed_users = students
if os.environ.get("COURSE_HUB_GROUP"):
    c.PAMAuthenticator.allowed_groups = {os.environ["COURSE_HUB_GROUP"]}
if admins:
    c.Authenticator.admin_users = admins


# --- each student's server ------------------------------------------------------------------------
c.JupyterHub.spawner_class = "localprocess"        # runs as the student's Unix account
c.Spawner.cmd = [str(BIN / "jupyterhub-singleuser")]
c.Spawner.notebook_dir = f"~/{WORKDIR}"
c.Spawner.default_url = "/lab/tree/notebooks/00_setup.ipynb"   # the first screen says what to do


def home_of(spawner) -> Path:
    """The student's home: the local spawner's (tests), else the Unix account's."""
    home = getattr(spawner, "home_dir", None)
    if home:
        return Path(home)
    import pwd
    return Path(pwd.getpwnam(spawner.user.name).pw_dir)


def in_home(*parts):
    return lambda spawner: str(home_of(spawner).joinpath(*parts))


def gpu_of(spawner) -> str:
    gpus = [g.strip() for g in os.environ["COURSE_HUB_GPUS"].split(",") if g.strip()]
    return gpus[zlib.crc32(spawner.user.name.encode()) % len(gpus)]


c.Spawner.environment = {
    # the course's JupyterLab settings (no news prompt, build clutter hidden), as `./course lab` gives them
    "JUPYTER_CONFIG_PATH": str(COURSE / "jupyter"),
    # one prediction log per student, for lessons and labs alike
    "COURSE_PREDICTIONS": in_home(WORKDIR, "predictions.jsonl"),
    # caches in the student's home (the ceilings already go to ~/.cache, Triton's to ~/.triton)
    "TORCHINDUCTOR_CACHE_DIR": in_home(".cache", "torchinductor"),
    "TRITON_CACHE_DIR": in_home(".triton", "cache"),
    "XDG_CACHE_HOME": in_home(".cache"),
}
if os.environ.get("COURSE_HUB_GPUS"):
    c.Spawner.environment["CUDA_VISIBLE_DEVICES"] = gpu_of


def copy_course(spawner):
    """On a student's first start, their own copy of the lessons and labs; what they have is kept."""
    home = home_of(spawner)
    work = home / WORKDIR
    for folder in ("notebooks", "labs"):
        if not (work / folder).exists():
            shutil.copytree(COURSE / folder, work / folder, ignore=shutil.ignore_patterns("predictions.jsonl"))
    if os.geteuid() == 0 and getattr(spawner, "home_dir", None) is None:   # a Unix account: theirs to own
        import pwd
        account = pwd.getpwnam(spawner.user.name)
        for path in [work, *work.rglob("*")]:
            os.chown(path, account.pw_uid, account.pw_gid)


c.Spawner.pre_spawn_hook = copy_course
# Students may leave a kernel holding GPU memory: stop servers idle for an hour (pip install
# jupyterhub-idle-culler, then uncomment).
# c.JupyterHub.services = [{"name": "idle-culler", "command": [sys.executable, "-m", "jupyterhub_idle_culler",
#                                                              "--timeout=3600"]}]
# c.JupyterHub.load_roles = [{"name": "idle-culler", "services": ["idle-culler"],
#                             "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}]
