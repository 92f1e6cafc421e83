# JupyterHub for a class on one GPU server, with Feed the Beast preinstalled (docs/classroom.md).
#
#   sudo <course venv>/bin/jupyterhub -f jupyter/hub/jupyterhub_config.py
#
# from a checkout of the STUDENT EDITION set up with `./course setup` (its .venv has the course, JupyterHub
# and the proxy). The hub serves the lessons and labs of the checkout it runs in, and everything in that
# checkout is readable by every student: the instructor's repository holds solutions/, the student edition
# (written by tools/student_edition.py) does not. The hub warns at start when solutions/ is beside it.
# Every student is a Unix account of the server (PAM login; list them in COURSE_HUB_STUDENTS, or admit a
# Unix group with COURSE_HUB_GROUP) and gets a server running as that account, so their files and
# processes are theirs alone. In their home, on first start: their own copy of the lessons and labs
# (~/feed-the-beast/notebooks, ~/feed-the-beast/labs; never overwritten later), their own prediction log
# (~/feed-the-beast/predictions.jsonl, the lessons' and labs' alike), and their own caches (the measured
# GPU ceilings in ~/.cache, Triton's kernels in ~/.triton, torch.compile's in ~/.cache/torchinductor).
# Each guess a student commits also goes, as they commit it, to their file in the class folder, which
# the instructors read (course_utils.journal.class_logs) and no other student can.
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
#   COURSE_HUB_CLASS_DIR the class folder (default /srv/feed-the-beast/class): one file per student,
#                        <user>.jsonl, their log's copy; "" for none
#   COURSE_HUB_INSTRUCTORS  the Unix group that may read the class folder (default instructors; create
#                        it and add the instructors: groupadd instructors; usermod -aG instructors NAME)
# tests/test_hub.py starts this configuration on 127.0.0.1 with a dummy login and, as root, with student
# and instructor accounts of its own.
import os
import shutil
import stat
import sys
import zlib
from pathlib import Path

COURSE = Path(__file__).resolve().parents[2]        # the checkout: notebooks/, labs/, jupyter/
BIN = Path(sys.executable).parent                   # the course's environment (the hub runs from it)
WORKDIR = "feed-the-beast"                          # a student's folder, in their home

c = get_config()  # noqa: F821

if (COURSE / "solutions").exists():
    print(f"WARNING: {COURSE / 'solutions'} is in the checkout this hub serves, and every student can read it. "
          "Run the hub from the student edition (tools/student_edition.py writes it): docs/classroom.md, "
          "section 2.", file=sys.stderr)

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


# --- the class folder: every student's guesses, for the instructors alone ------------------------------
# Each student's server rewrites <folder>/<user>.jsonl whole at each guess (a temporary file renamed over
# it: course_utils.journal), with mode 0640. The folder is root's, in the instructors' group, mode 3753:
#   group r-x   the instructors list it and read every file; they do not write (their guesses stay out)
#   others -wx  a student's server creates its file there, but cannot list the folder
#   sticky      a file is renamed or removed by its owner only: no student replaces another's file
#   setgid      every file made there is in the instructors' group, so 0640 means: its student reads and
#               writes it, the instructors read it, no other student can
# A student who creates a file named after another first is undone at that student's next start (their
# file is made theirs), and class_logs leaves out a file that its account did not write.
CLASS_MODE = 0o3753


def class_folder() -> Path | None:
    folder = os.environ.get("COURSE_HUB_CLASS_DIR", "/srv/feed-the-beast/class")
    if not folder:
        return None
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            import grp
            group = os.environ.get("COURSE_HUB_INSTRUCTORS", "instructors")
            try:
                gid = grp.getgrnam(group).gr_gid
            except KeyError:
                print(f"WARNING: no Unix group {group!r}: only root reads the class folder {folder} until it "
                      f"exists (groupadd {group}; usermod -aG {group} <instructor>; restart the hub)", file=sys.stderr)
                gid = 0
            os.chown(folder, 0, gid)
        folder.chmod(CLASS_MODE)
    except OSError as err:
        print(f"WARNING: no class folder ({folder}: {err}): the guesses stay in each student's home", file=sys.stderr)
        return None
    return folder


CLASS = class_folder()


def as_account(spawner) -> bool:
    """Does this server run as the student's Unix account (the class's server), not as the hub's user?"""
    return os.geteuid() == 0 and getattr(spawner, "home_dir", None) is None


def claim_class_file(spawner):
    """The student's file in the class folder, theirs before their server starts: a file of that name
    that someone else left there is removed first."""
    if CLASS is None or not as_account(spawner):
        return
    import pwd
    account = pwd.getpwnam(spawner.user.name)
    mine = CLASS / f"{spawner.user.name}.jsonl"
    try:
        st = mine.lstat()
        if st.st_uid == account.pw_uid and stat.S_ISREG(st.st_mode):
            return
        mine.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(mine, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o640)
    try:
        os.fchown(fd, account.pw_uid, CLASS.stat().st_gid)
        os.fchmod(fd, 0o640)
    finally:
        os.close(fd)


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
if CLASS is not None:
    c.Spawner.environment["COURSE_CLASS_DIR"] = str(CLASS)   # the student's guesses go there too
if os.environ.get("COURSE_HUB_GPUS"):
    c.Spawner.environment["CUDA_VISIBLE_DEVICES"] = gpu_of


def copy_course(spawner):
    """On a student's first start, their own copy of the lessons and labs; what they have is kept."""
    home = home_of(spawner)
    work = home / WORKDIR
    for folder in ("notebooks", "labs"):
        if not (work / folder).exists():
            shutil.copytree(COURSE / folder, work / folder, ignore=shutil.ignore_patterns("predictions.jsonl"))
    if as_account(spawner):   # theirs to own
        import pwd
        account = pwd.getpwnam(spawner.user.name)
        for path in [work, *work.rglob("*")]:
            os.chown(path, account.pw_uid, account.pw_gid)


def prepare(spawner):
    copy_course(spawner)
    claim_class_file(spawner)


c.Spawner.pre_spawn_hook = prepare
# Students may leave a kernel holding GPU memory: stop servers idle for an hour (pip install
# jupyterhub-idle-culler, then uncomment).
# c.JupyterHub.services = [{"name": "idle-culler", "command": [sys.executable, "-m", "jupyterhub_idle_culler",
#                                                              "--timeout=3600"]}]
# c.JupyterHub.load_roles = [{"name": "idle-culler", "services": ["idle-culler"],
#                             "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}]
