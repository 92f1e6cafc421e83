"""The class's JupyterHub (jupyter/hub/jupyterhub_config.py), started here on 127.0.0.1 as it is, with
two changes a laptop needs: a dummy login instead of the server's Unix accounts, and a local spawner
that runs every student's server as this user, with a home of its own, instead of as their accounts.

Two students log in through the login form, each gets a server, and lesson 00 (the student version,
from the copy the hub made in their home) runs in a kernel of theirs, cell after cell: all of it for
alice, up to its first prediction for bob; only the cells a student's stub makes fail may fail. Then: each has their own notebooks, caches and prediction log,
and alice's run wrote nothing into bob's log; nbgrader's instructor pages are not in their servers.
Skipped where JupyterHub or its proxy is missing.
"""
import asyncio
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
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

STUDENTS = ("alice", "bob")
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


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hub")
    homes = tmp / "home"
    homes.mkdir()
    public, password = free_port(), secrets.token_hex(8)
    (tmp / "jupyterhub_config.py").write_text(TEST_CONFIG.format(
        hub_config=str(HUB_CONFIG), public=public, hub=free_port(), proxy_api=free_port(), password=password,
        homes=str(homes), start=START, tmp=tmp, args=["--allow-root"] if os.geteuid() == 0 else []),
        encoding="utf-8")
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("COURSE_PREDICTIONS", None)
    log = open(tmp / "jupyterhub.log", "w")
    proc = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(tmp / "jupyterhub_config.py")], cwd=tmp, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    h = Hub(f"http://127.0.0.1:{public}", password, tmp)
    h.homes = homes
    deadline = time.monotonic() + START
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
    # stop the hub (it stops the students' servers and its proxy), then whatever is left of its group
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
    log.close()


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

    # after the lesson, in the same kernel: its own view of its home, caches and log
    probe = ("import os, json\n"
             "print(json.dumps({k: os.environ.get(k) for k in ('HOME', 'COURSE_PREDICTIONS', "
             "'TORCHINDUCTOR_CACHE_DIR', 'TRITON_CACHE_DIR', 'XDG_CACHE_HOME', 'JUPYTER_CONFIG_PATH')}))")
    t0, seen = time.perf_counter(), {}
    *results, seen["alice"] = students["alice"].run_notebook("notebooks/00_setup.ipynb", then=(probe,))
    assert not unexpected_errors(results), f"alice's lesson 00 failed where no stub is: {unexpected_errors(results)}"
    assert any(err for err, _ in results), "no stub failed: was this the student's lesson 00?"
    alice = log_lines(logs["alice"])
    assert alice, "alice's predictions were not logged in her folder"
    assert not log_lines(logs["bob"]), "alice's predictions went into bob's log"

    # bob, in his own server, runs lesson 00 up to its first prediction: his
    # own log, alice's untouched (all of lesson 00 once is alice's run; a second would test nothing new)
    code = [c.source for c in nbformat.read(ROOT / "notebooks" / "00_setup.ipynb", as_version=4).cells
            if c.cell_type == "code"]
    upto = next(i for i, source in enumerate(code) if "predict.number(" in source) + 1
    *results, seen["bob"] = students["bob"].run_notebook("notebooks/00_setup.ipynb", then=(probe,), upto=upto)
    assert not unexpected_errors(results), f"bob's lesson 00 failed where no stub is: {unexpected_errors(results)}"
    assert len(log_lines(logs["bob"])) == 1, "bob's log is not his own run's"
    assert log_lines(logs["alice"]) == alice, "bob's run changed alice's log"
    print(f"lesson 00 for two students in {time.perf_counter() - t0:.0f} s; {len(alice)} predictions for alice")

    for name, (error, printed) in seen.items():
        assert error is None, f"{name}: {error}"
        env, home = json.loads(printed.strip().splitlines()[-1]), str(hub.homes / name)
        assert env["HOME"] == home, env
        for key in ("COURSE_PREDICTIONS", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "XDG_CACHE_HOME"):
            assert env[key] and env[key].startswith(home + "/"), f"{name}: {key} = {env[key]} is not in {home}"
        assert env["JUPYTER_CONFIG_PATH"] == str(ROOT / "jupyter")
        # the course's Jupyter settings hold: no nbgrader instructor pages in a student's server
        assert students[name].api("GET", f"/user/{name}/formgrader").status_code == 404
        assert students[name].api("GET", f"/user/{name}/api/status").ok
