"""A real WeRSS for tests: we-mp-rss's own backend (``RADAR_WERSS_SOURCE``: its release tarball, as in
../shared/werss/, or an unpacked source tree), started on loopback in a venv of its own, built once per clone
under ``.local/werss-venv`` (its pins clash with Airflow's). Its state is made with its own code: the API for
accounts and tasks, and in its venv and folder :meth:`RealWeRSS.own` for what only a scan or a collection does
(``driver.token.set_token``, ``core.db.DB.add_article``). ``ENABLE_JOB=False`` keeps its scheduler off; no
browser is launched, and its requests to WeChat fail at once here (no network)."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".local" / "werss-venv"
PASSWORD = "real-werss-pass-4711"
START_SECONDS = 90


def source() -> Path:
    """The source named by RADAR_WERSS_SOURCE, or a skip that says why (a user's clone has no ../shared)."""
    named = os.environ.get("RADAR_WERSS_SOURCE", "")
    if not named:
        pytest.skip("RADAR_WERSS_SOURCE is not set: no real WeRSS to test against (.ci/run sets it)")
    path = Path(named)
    if not path.exists():
        pytest.skip(f"RADAR_WERSS_SOURCE={named} does not exist")
    return path


def unpack(src: Path, into: Path) -> Path:
    if src.is_dir():
        shutil.copytree(src, into / src.name)
        return into / src.name
    with tarfile.open(src) as tar:
        tar.extractall(into, filter="data")
    [tree] = [p for p in into.iterdir() if (p / "web.py").exists()]
    return tree


def venv(tree: Path) -> Path:
    """WeRSS's own venv from its requirements.txt, rebuilt only when they change."""
    wanted = hashlib.sha256((tree / "requirements.txt").read_bytes()).hexdigest()
    marker = VENV / ".requirements-sha256"
    python = VENV / "bin" / "python"
    if not python.exists() or not marker.exists() or marker.read_text() != wanted:
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run(["python3.11", "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", "-r",
                        str(tree / "requirements.txt")], check=True, timeout=1200)
        marker.write_text(wanted)
    return python


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RealWeRSS:
    tree: Path
    python: Path
    env: dict[str, str]
    base: str
    process: subprocess.Popen
    token: str = ""

    @property
    def connection(self) -> str:
        import json

        return json.dumps({"conn_type": "http", "host": self.base, "login": "admin", "password": PASSWORD})

    def own(self, code: str) -> str:
        """Python run in WeRSS's venv and folder (its own functions); what it prints."""
        done = subprocess.run([str(self.python), "-c", code], cwd=self.tree, env=self.env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call to WeRSS's API as its admin; the envelope's data (code 0 asserted)."""
        if not self.token:
            login = httpx.post(f"{self.base}/api/v1/wx/auth/login", data={"username": "admin", "password": PASSWORD})
            self.token = login.json()["data"]["access_token"]
        answer = httpx.request(method, f"{self.base}/api/v1/wx{path}", timeout=30,
                               headers={"Authorization": f"Bearer {self.token}"}, **kwargs)
        body = answer.json()
        assert answer.status_code in (200, 201) and body.get("code") == 0, (path, answer.status_code, body)
        return body.get("data")

    def subscribe(self, fakeid_digits: str, name: str) -> str:
        """An account added as WeRSS's 添加订阅 adds it (its first collection queued); its id."""
        import base64

        data = self.api("POST", "/mps", json={"mp_name": name, "mp_id": base64.b64encode(fakeid_digits.encode()).decode(),
                                              "mp_intro": "", "avatar": ""})
        return data["id"]

    def sync_time(self, mp_id: str) -> int:
        return int(self.api("GET", f"/mps/{mp_id}")["sync_time"] or 0)

    def wait_for_sync(self, mp_id: str, after: int = 0, seconds: float = 60) -> int:
        """WeRSS's collection start on ``mp_id`` (a queued collection sleeps up to 10 s before its request)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if (synced := self.sync_time(mp_id)) > after:
                return synced
            time.sleep(0.5)
        raise AssertionError(f"WeRSS did not start collecting {mp_id} within {seconds} s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start(workdir: Path) -> RealWeRSS:
    """A fresh WeRSS (its own data/ in ``workdir``), initialised by its init_sys and serving on loopback."""
    tree = unpack(source(), workdir)
    python = venv(tree)
    shutil.copy(tree / "config.example.yaml", tree / "config.yaml")
    (tree / "data").mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir), "USERNAME": "admin",
           "PASSWORD": PASSWORD, "DB": "sqlite:///data/db.db", "ENABLE_JOB": "False", "AUTO_RELOAD": "False",
           "SECRET_KEY": "real-werss-test-secret", "TZ": "Asia/Shanghai", "NO_PROXY": "*", "no_proxy": "*"}
    subprocess.run([str(python), "-c", "import init_sys; init_sys.init()"], cwd=tree, env=env, check=True,
                   capture_output=True, timeout=120)
    port = _free_port()
    log = (workdir / "werss.log").open("wb")
    process = subprocess.Popen([str(python), "-m", "uvicorn", "web:app", "--host", "127.0.0.1", "--port", str(port)],
                               cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"WeRSS exited: {(workdir / 'werss.log').read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{base}/api/openapi.json", timeout=2).status_code == 200:
                return RealWeRSS(tree, python, env, base, process)
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise AssertionError(f"WeRSS did not answer within {START_SECONDS} s")
