"""The class's JupyterHub (jupyter/hub/jupyterhub_config.py), started here on 127.0.0.1 as it is, with
two changes a laptop needs: a dummy login instead of the server's Unix accounts, and a local spawner
that runs every student's server as this user, with a home of its own, instead of as their accounts.

Two students log in through the login form, each gets a server, and lesson 00 (the student version,
from the copy the hub made in their home) runs in a kernel of theirs, cell after cell: all of it for
alice, up to its first prediction for bob, who then commits a guess and does not reveal it; only the
cells a student's stub makes fail may fail. Then: each has their own notebooks, caches and prediction log,
and alice's run wrote nothing into bob's log; nbgrader's instructor pages are not in their servers; and
the instructor's view of the hub's class folder (journal.class_logs) holds each student's log as it stood
after each run, bob's unrevealed guess included.

As root (CI), the class folder's permissions are tried with Unix accounts made for the test (two students,
an instructor): each student's guess, written as that account, is in the instructor's view, read as the
instructor; neither student can list the folder, or read, add to or replace the other's file; a file
another student put there first is left out of the view and undone when its student's server starts; the
instructor's own guess stays out. (The servers themselves cannot run as those accounts here: this
checkout's Python sits under /root, which no other account may enter; an account's Python work runs in
a child of this process that becomes the account.) Skipped where JupyterHub or its proxy is missing.
"""
import asyncio
import contextlib
import importlib.util
import io
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("jupyterhub", reason="JupyterHub is not installed (pip install -e '.[test]')")
requests = pytest.importorskip("requests")
from tornado.httpclient import HTTPRequest  # noqa: E402
from tornado.websocket import websocket_connect  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HUB_CONFIG = ROOT / "jupyter" / "hub" / "jupyterhub_config.py"
if not (BIN / "configurable-http-proxy").exists() and shutil.which("configurable-http-proxy") is None:
    pytest.skip("no configurable-http-proxy (pip install -e '.[test]')", allow_module_level=True)

STUDENTS = ("alice", "bob")   # their roles; with accounts, their user names are the accounts'
JOURNAL = ROOT / "course_utils" / "journal.py"
START = 120   # s: the hub, or a student's server, answering
CELL = 300    # s: one cell of lesson 00 in Triton's interpreter

TEST_CONFIG = """\
c = get_config()
load_subconfig({hub_config!r})
# a laptop instead of the class's server: 127.0.0.1, a dummy login, servers run as this user
c.JupyterHub.bind_url = "http://127.0.0.1:{public}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {password!r}
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {homes!r} + "/{{username}}"
c.Spawner.environment["COURSE_HEADLESS"] = "1"   # the predictions take their defaults: no one clicks
c.Spawner.args = {args!r}                         # as root (a container), servers need --allow-root
c.Spawner.start_timeout = c.Spawner.http_timeout = {start}
c.JupyterHub.db_url = "sqlite:///{tmp}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{tmp}/cookie_secret"
c.ConfigurableHTTPProxy.pid_file = "{tmp}/proxy.pid"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Hub:
    def __init__(self, url: str, password: str, tmp: Path):
        self.url, self.password, self.log = url, password, tmp / "jupyterhub.log"

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-n:])


_spec = importlib.util.spec_from_file_location("course_journal", JOURNAL)
journal = importlib.util.module_from_spec(_spec)   # the module alone: the course's package would import torch
_spec.loader.exec_module(journal)


def run(*cmd, user: str | None = None) -> subprocess.CompletedProcess:
    """`cmd` as this user, or as the account `user` (its groups too)."""
    prefix = ["runuser", "-u", user, "--"] if user else []
    return subprocess.run(prefix + [str(c) for c in cmd], capture_output=True, text=True, timeout=60)


def as_account(name: str, fn, *args, env: dict | None = None):
    """fn(*args) in a child of this process that becomes the account `name` (its groups too), with `env`
    added to its environment: (its result, what it wrote on stderr), or AssertionError with its error."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: nothing here may return into pytest, or outlive a minute
        try:
            signal.alarm(60)
            os.close(read)
            account = pwd.getpwnam(name)
            os.setgroups(os.getgrouplist(name, account.pw_gid))
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)
            os.environ.update(env or {})
            said = io.StringIO()
            with contextlib.redirect_stderr(said):
                out = {"result": fn(*args), "stderr": said.getvalue()}
        except BaseException as err:   # noqa: BLE001  (whatever it was goes back to the test)
            out = {"error": f"{type(err).__name__}: {err}"}
        try:
            with os.fdopen(write, "w") as f:
                json.dump(out, f, default=str)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        out = json.loads(f.read() or '{"error": "the child said nothing"}')
    os.waitpid(pid, 0)
    assert "error" not in out, f"as {name}: {out['error']}"
    return out["result"], out["stderr"]


class Accounts:
    """Unix accounts for two students and an instructor, and the instructors' group, made for this test;
    `why` says why there are none."""

    def __init__(self):
        tag = secrets.token_hex(3)
        self.group, self.names, self.made, self.why = f"ftb{tag}i", {}, [], ""
        if os.geteuid() != 0:
            self.why = "not root: no Unix accounts for two students and an instructor (CI runs as root)"
            return
        if not (shutil.which("useradd") and shutil.which("groupadd") and shutil.which("runuser")):
            self.why = "no useradd, groupadd or runuser here: no accounts for two students and an instructor"
            return
        made = run("groupadd", self.group)
        for role in ("alice", "bob", "teacher"):
            if made.returncode == 0:
                name = f"ftb{tag}{role[0]}"
                made = run("useradd", "--create-home", "--shell", "/bin/sh",
                           *(["--groups", self.group] if role == "teacher" else []), name)
                if made.returncode == 0:
                    self.made.append(name)
                    self.names[role] = name
        if made.returncode:
            self.why = f"useradd or groupadd failed: {made.stderr.strip()[:200]}"

    @property
    def ready(self) -> bool:
        return not self.why

    def remove(self):
        for name in self.made:
            run("userdel", "--remove", "--force", name)
        run("groupdel", self.group)


@pytest.fixture(scope="module")
def hub(tmp_path_factory, request):
    tmp = tmp_path_factory.mktemp("hub")
    homes = tmp / "home"
    homes.mkdir()
    accounts = Accounts()
    request.addfinalizer(accounts.remove)               # after the hub has stopped (finalizers run last first)
    shared = Path(tempfile.mkdtemp(prefix="ftb-hub-"))   # the class folder's parent: every account may enter it
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    shared.chmod(0o755)
    public, password = free_port(), secrets.token_hex(8)
    (tmp / "jupyterhub_config.py").write_text(TEST_CONFIG.format(
        hub_config=str(HUB_CONFIG), public=public, hub=free_port(), proxy_api=free_port(), password=password,
        homes=str(homes), start=START, tmp=tmp, args=["--allow-root"] if os.geteuid() == 0 else []),
        encoding="utf-8")
    hub_env = {"COURSE_HUB_CLASS_DIR": str(shared / "class"), "COURSE_HUB_INSTRUCTORS": accounts.group}
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), **hub_env)
    for var in ("COURSE_PREDICTIONS", "COURSE_CLASS_DIR", "COURSE_STUDENT"):
        env.pop(var, None)
    log = open(tmp / "jupyterhub.log", "w")
    proc = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(tmp / "jupyterhub_config.py")], cwd=tmp, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    h = Hub(f"http://127.0.0.1:{public}", password, tmp)
    h.homes, h.accounts, h.class_dir, h.env = homes, accounts, shared / "class", hub_env
    deadline = time.monotonic() + START
    try:
        while True:
            try:
                if requests.get(f"{h.url}/hub/api", timeout=5).ok:
                    break
            except requests.ConnectionError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"JupyterHub did not start:\n{h.tail()}")
            time.sleep(0.5)
        yield h
    finally:
        # stop the hub (it stops the students' servers and its proxy), then whatever is left of its group
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        log.close()


def instructor_view(hub: Hub) -> dict:
    """journal.class_logs of the class folder, read as the instructor's account (as this user without one)."""
    if not hub.accounts.ready:
        return journal.class_logs(hub.class_dir)
    view, _ = as_account(hub.accounts.names["teacher"], journal.class_logs, str(hub.class_dir))
    return view


class Student:
    """One student's browser session: the login form, then their own API token for the rest."""

    def __init__(self, hub: Hub, name: str):
        self.hub, self.name = hub, name
        self.web = requests.Session()
        self.token = ""

    def log_in(self):
        self.web.get(f"{self.hub.url}/hub/login", timeout=30)
        xsrf = self.web.cookies.get("_xsrf", path="/hub/")
        r = self.web.post(f"{self.hub.url}/hub/login?next=", timeout=30, allow_redirects=False,
                          data={"username": self.name, "password": self.hub.password, "_xsrf": xsrf})
        assert r.status_code == 302, f"{self.name}: login answered {r.status_code}\n{self.hub.tail()}"
        xsrf = self.web.cookies.get("_xsrf", path="/hub/")   # a new one comes with the login
        me = self.web.get(f"{self.hub.url}/hub/api/user", timeout=30, headers={"X-XSRFToken": xsrf})
        assert me.ok and me.json()["name"] == self.name, f"{self.name}: not logged in: {me.status_code} {me.text}"
        # a token of their own, as the hub's Token page makes one
        r = self.web.post(f"{self.hub.url}/hub/api/users/{self.name}/tokens", timeout=30,
                          headers={"X-XSRFToken": xsrf}, json={"note": "test_hub", "expires_in": 3600})
        assert r.status_code == 201, f"{self.name}: no token: {r.status_code} {r.text}"
        self.token = r.json()["token"]

    def api(self, method: str, path: str, **kw):
        return requests.request(method, f"{self.hub.url}{path}", timeout=60,
                                headers={"Authorization": f"token {self.token}"}, **kw)

    def start_server(self):
        r = self.api("POST", f"/hub/api/users/{self.name}/server")
        assert r.status_code in (201, 202), f"{self.name}: spawn answered {r.status_code} {r.text}\n{self.hub.tail()}"
        deadline = time.monotonic() + START
        while time.monotonic() < deadline:   # the hub says when the server is ready (a request to the
            user = self.api("GET", f"/hub/api/users/{self.name}").json()   # server before then gets a
            if user.get("servers", {}).get("", {}).get("ready"):             # "pending" page, status 200)
                status = self.api("GET", f"/user/{self.name}/api/status", allow_redirects=False)
                assert status.ok and "started" in status.json(), f"{self.name}: {status.status_code} {status.text}"
                return
            time.sleep(1)
        pytest.fail(f"{self.name}'s server did not start:\n{self.hub.tail()}")

    def run_notebook(self, path: str, then: tuple[str, ...] = (), upto: int | None = None
                     ) -> list[tuple[str | None, str]]:
        """Run the notebook at `path` (in the student's folder) in a new kernel of theirs, in that
        notebook's folder, cell after cell (its first `upto` code cells, or all), then the code in `then`;
        for each, (its error or None, what it printed)."""
        nb = nbformat.from_dict(self.api("GET", f"/user/{self.name}/api/contents/{path}").json()["content"])
        r = self.api("POST", f"/user/{self.name}/api/sessions",
                     json={"path": path, "type": "notebook", "name": "", "kernel": {"name": "python3"}})
        assert r.status_code == 201, f"{self.name}: no kernel: {r.status_code} {r.text}"
        session = r.json()
        try:
            code = [c.source for c in nb.cells if c.cell_type == "code"][:upto] + list(then)
            return asyncio.run(self._execute(session["kernel"]["id"], code))
        finally:
            self.api("DELETE", f"/user/{self.name}/api/sessions/{session['id']}")

    async def _execute(self, kernel_id: str, sources: list[str]) -> list[tuple[str | None, str]]:
        """Jupyter's messaging protocol over the kernel's websocket, as JupyterLab speaks it."""
        ws_url = self.hub.url.replace("http", "ws", 1) + f"/user/{self.name}/api/kernels/{kernel_id}/channels"
        ws = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {self.token}"}),
                                     max_message_size=64 * 2**20)
        results, session = [], uuid.uuid4().hex
        try:
            for i, source in enumerate(sources):
                msg_id, error, printed, replied, idle = uuid.uuid4().hex, None, "", False, False
                await ws.write_message(json.dumps({
                    "header": {"msg_id": msg_id, "msg_type": "execute_request", "session": session,
                               "username": self.name, "version": "5.3"},
                    "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                    "content": {"code": source, "silent": False, "store_history": True,
                                "user_expressions": {}, "allow_stdin": False, "stop_on_error": False}}))
                while not (replied and idle):   # the reply (shell) may come before the outputs (iopub);
                    raw = await asyncio.wait_for(ws.read_message(), CELL)   # "idle" comes after them
                    assert raw is not None, f"{self.name}: the kernel's websocket closed in code cell {i}"
                    msg = json.loads(raw)
                    if msg.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                        printed += msg["content"]["text"]
                    if msg["msg_type"] == "error":
                        error = f"{msg['content']['ename']}: {msg['content']['evalue']}"[:300]
                    replied = replied or msg["msg_type"] == "execute_reply"
                    idle = idle or (msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle")
                results.append((error, printed))
        finally:
            ws.close()
        return results


def unexpected_errors(results) -> list[tuple[int, str]]:
    """The errors of lesson 00's code cells that no stub explains (a stub's cells are tagged
    raises-exception in the student version)."""
    nb = nbformat.read(ROOT / "notebooks" / "00_setup.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(results) <= len(code), "the student's copy is not the course's lesson 00"
    return [(i, err) for i, ((err, _), c) in enumerate(zip(results, code))
            if err and "raises-exception" not in c.metadata.get("tags", [])]


def log_lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()] if path.exists() else []


COMMIT = """\
from course_utils import predict
predict._interactive = lambda guess: True       # as in a live notebook: a box, Commit, then Reveal
p = predict.number("00.live", "How many ms?", lambda: 1.0, unit="ms", default=1.0)
p._widgets["entry"].value = "3"
p._widgets["commit"].click()                     # committed, not revealed
print(p.guess, p.measured)
"""


def test_two_students_run_lesson_00_each_with_their_own_files(hub):
    students = {name: Student(hub, name) for name in STUDENTS}
    for s in students.values():
        s.log_in()
        s.start_server()
    work = {name: hub.homes / name / "feed-the-beast" for name in STUDENTS}
    for name, folder in work.items():
        assert (folder / "notebooks" / "00_setup.ipynb").is_file(), f"{name} has no copy of the lessons"
        assert (folder / "labs").is_dir(), f"{name} has no copy of the labs"
    logs = {name: folder / "predictions.jsonl" for name, folder in work.items()}
    assert "solutions" in hub.tail(400) and "student edition" in hub.tail(400), "no warning that solutions/ is served"

    # after the lesson, in the same kernel: its own view of its home, caches and log
    probe = ("import os, json\n"
             "print(json.dumps({k: os.environ.get(k) for k in ('HOME', 'COURSE_PREDICTIONS', "
             "'TORCHINDUCTOR_CACHE_DIR', 'TRITON_CACHE_DIR', 'XDG_CACHE_HOME', 'JUPYTER_CONFIG_PATH', "
             "'COURSE_CLASS_DIR')}))")
    t0, seen = time.perf_counter(), {}
    *results, seen["alice"] = students["alice"].run_notebook("notebooks/00_setup.ipynb", then=(probe,))
    assert not unexpected_errors(results), f"alice's lesson 00 failed where no stub is: {unexpected_errors(results)}"
    assert any(err for err, _ in results), "no stub failed: was this the student's lesson 00?"
    alice = log_lines(logs["alice"])
    assert alice, "alice's predictions were not logged in her folder"
    assert {e["student"] for e in alice} == {"alice"}, "alice's log does not name her"
    assert not log_lines(logs["bob"]), "alice's predictions went into bob's log"
    # the instructor sees alice's whole log in the class folder as it stands after her run, and no bob
    assert instructor_view(hub) == {"alice": alice}, "the instructor's view is not alice's log"

    # bob, in his own server, runs lesson 00 up to its first prediction, then commits a guess and does not
    # reveal it: his own log, alice's untouched (all of lesson 00 once is alice's run; a second would test
    # nothing new); the instructor sees his guess before any reveal
    code = [c.source for c in nbformat.read(ROOT / "notebooks" / "00_setup.ipynb", as_version=4).cells
            if c.cell_type == "code"]
    upto = next(i for i, source in enumerate(code) if "predict.number(" in source) + 1
    *results, committed, seen["bob"] = students["bob"].run_notebook("notebooks/00_setup.ipynb",
                                                                   then=(COMMIT, probe), upto=upto)
    assert not unexpected_errors(results), f"bob's lesson 00 failed where no stub is: {unexpected_errors(results)}"
    assert committed == (None, "3.0 None\n"), committed
    bob = log_lines(logs["bob"])
    assert len(bob) == 2 and bob[-1]["key"] == "00.live" and bob[-1]["measured"] is None, \
        f"bob's log is not his own run's reveal and then his committed guess: {bob}"
    assert log_lines(logs["alice"]) == alice, "bob's run changed alice's log"
    assert instructor_view(hub) == {"alice": alice, "bob": bob}, "the instructor's view is not the two logs"
    print(f"lesson 00 for two students in {time.perf_counter() - t0:.0f} s; {len(alice)} predictions for alice")

    for name, (error, printed) in seen.items():
        assert error is None, f"{name}: {error}"
        env, home = json.loads(printed.strip().splitlines()[-1]), str(hub.homes / name)
        assert env["HOME"] == home, env
        for key in ("COURSE_PREDICTIONS", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "XDG_CACHE_HOME"):
            assert env[key] and env[key].startswith(home + "/"), f"{name}: {key} = {env[key]} is not in {home}"
        assert env["JUPYTER_CONFIG_PATH"] == str(ROOT / "jupyter")
        assert env["COURSE_CLASS_DIR"] == str(hub.class_dir)
        # the course's Jupyter settings hold: no nbgrader instructor pages in a student's server
        assert students[name].api("GET", f"/user/{name}/formgrader").status_code == 404
        assert students[name].api("GET", f"/user/{name}/api/status").ok


class AccountSpawner:
    """What the config's pre-spawn hook reads of a spawner that runs the server as the user's account."""

    def __init__(self, name: str):
        self.user = type("User", (), {"name": name})()


def test_no_student_reads_anothers_guesses_and_the_instructors_read_every_one(hub, monkeypatch):
    """The class folder the hub made, tried with Unix accounts: a guess each, then what each may do."""
    if not hub.accounts.ready:
        pytest.skip(hub.accounts.why)
    import grp
    import runpy

    from traitlets.config import Config
    names, folder, group = hub.accounts.names, hub.class_dir, hub.accounts.group
    files = {role: folder / f"{names[role]}.jsonl" for role in ("alice", "bob")}
    st = folder.stat()
    assert (st.st_uid, grp.getgrgid(st.st_gid).gr_name, oct(st.st_mode & 0o7777)) == (0, group, "0o3753")

    # bob puts a file under alice's name before she ever starts: the view leaves it out, and the hub's
    # pre-spawn hook (the config's own, run here) gives her a file of her own before her server starts
    assert run("sh", "-c", f"echo '{{\"key\": \"00.live\", \"guess\": 666}}' > {files['alice']}",
               user=names["bob"]).returncode == 0
    with pytest.warns(UserWarning, match=f"not written by the account {names['alice']}"):
        assert names["alice"] not in journal.class_logs(folder)
    for var, value in hub.env.items():
        monkeypatch.setenv(var, value)
    config = runpy.run_path(str(HUB_CONFIG), init_globals={"get_config": Config})
    config["claim_class_file"](AccountSpawner(names["alice"]))
    assert files["alice"].read_text() == "" and pwd.getpwuid(files["alice"].stat().st_uid).pw_name == names["alice"]

    for role in ("alice", "bob"):   # a guess each, committed in the student's own process
        _, said = as_account(names[role], journal.append, {"key": "00.live", "guess": 7.0, "measured": None},
                             env={"COURSE_CLASS_DIR": str(folder), "JUPYTERHUB_USER": names[role],
                                  "COURSE_PREDICTIONS": str(Path(pwd.getpwnam(names[role]).pw_dir) / "p.jsonl")})
        assert said == "", said
        st = files[role].stat()
        assert (pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name, oct(st.st_mode & 0o777)) == \
            (names[role], group, "0o640"), f"{role}'s class file"
    view = instructor_view(hub)      # as the instructor: the servers' two logs and the accounts' guesses
    assert sorted(view) == sorted(["alice", "bob", names["alice"], names["bob"]])
    assert [(e["key"], e["guess"]) for role in ("alice", "bob") for e in view[names[role]]] == [("00.live", 7.0)] * 2

    for me, other in (("alice", "bob"), ("bob", "alice")):
        user, mine = names[me], folder / f".{me}.x"
        assert run("cat", files[me], user=user).stdout == files[me].read_text(), f"{me} cannot read their own file"
        for attempt in (["cat", files[other]], ["ls", folder],                              # read it, list them
                        ["sh", "-c", f"echo '{{}}' >> {files[other]}"],                      # add a line to it
                        ["sh", "-c", f"echo '{{}}' > {mine} && mv -f {mine} {files[other]}"]):   # replace it
            r = run(*attempt, user=user)
            assert r.returncode != 0 and ("Permission denied" in r.stderr or "not permitted" in r.stderr), \
                f"{me} could: {' '.join(map(str, attempt))} ({r.stderr.strip()})"

    # the instructor's own guess stays out of the class folder, and nothing is said about it
    teacher = names["teacher"]
    _, said = as_account(teacher, journal.append, {"key": "00.live", "guess": 100.0},
                         env={"COURSE_CLASS_DIR": str(folder), "JUPYTERHUB_USER": teacher,
                              "COURSE_PREDICTIONS": str(Path(pwd.getpwnam(teacher).pw_dir) / "p.jsonl")})
    assert said == "" and not (folder / f"{teacher}.jsonl").exists()
