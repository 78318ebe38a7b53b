"""``make ui``: a local Airflow UI (``airflow standalone``) with this bundle and the report view, to try the
radar on this machine (not a deployment: SimpleAuthManager, one process for everything).

It listens on 127.0.0.1 only, port ``RADAR_UI_PORT`` (8080). When no real WeRSS / DeepSeek / push connection is
configured in the environment, the demo stand-ins are started too (on fixed local ports, with the wall clock), so
slots can be triggered and backfilled offline; the pages then show the demo database that ``make run`` filled.
Prints the URL and the login. It waits for the api-server as long as the start moves (:class:`StandaloneStart`):
when Airflow does not come up, it says which process stopped or stood still, and the log's last lines say why.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from include.radar.core import db
from include.radar.core.clock import SYSTEM, Clock
from include.radar_demo import run as demo
from include.radar_demo.fakes import PushSink, serve
from include.radar_demo.waiting import GaveUp, NewLines, Proc, Started, family, subtree, tail, wait_for

PORT = int(os.environ.get("RADAR_UI_PORT", "8080"))
HOST = "127.0.0.1"  # make ui is for this machine: SimpleAuthManager's generated login is not a deployment's
# seconds in which nothing of the start moved (no new kind of line in the log, no CPU spent by the api-server or,
# before it runs, by standalone's own set-up, no change in what the port answers): a loaded machine starts slowly
# but steadily; one that stands still this long is stuck
QUIET = 300


def start_standins() -> list[str]:
    """Start the stand-ins for each connection that is not configured; return what was started."""
    started = []
    clock = [0]

    def tick() -> int:
        return int(time.time())

    if "AIRFLOW_CONN_WERSS_DEFAULT" not in os.environ:
        werss = demo.build_werss(demo.demo_day(), clock)
        werss.now = tick
        at = serve(werss.handle)
        os.environ["AIRFLOW_CONN_WERSS_DEFAULT"] = json.dumps(
            {"conn_type": "http", "host": f"http://{at}", "login": "demo", "password": "demo-password"})
        started.append(f"WeRSS stand-in on http://{at}")
    if "AIRFLOW_CONN_DEEPSEEK_DEFAULT" not in os.environ:
        at = serve(demo.build_deepseek().handle)
        os.environ["AIRFLOW_CONN_DEEPSEEK_DEFAULT"] = json.dumps(
            {"conn_type": "http", "host": f"http://{at}", "password": "sk-demo", "extra": {"backoff_seconds": 0}})
        started.append(f"DeepSeek stand-in on http://{at}")
    if "AIRFLOW_CONN_RADAR_PUSH" not in os.environ:
        pushes = demo.OUT / "pushes.jsonl"

        def record(message: dict) -> None:
            with pushes.open("a", encoding="utf-8") as f:
                f.write(json.dumps(message, ensure_ascii=False) + "\n")

        at = serve(PushSink(on_message=record).handle, demo.PUSH_PORT)
        os.environ["AIRFLOW_CONN_RADAR_PUSH"] = json.dumps({"conn_type": "generic", "extra": {"urls": demo.push_urls(at)[:1]}})
        started.append(f"push sink on http://{at} → {pushes}")
    return started


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((HOST, port)) == 0


def health() -> int | str:
    """What the api-server's health endpoint answers: its status, or why nothing answered."""
    try:
        with urllib.request.urlopen(f"http://localhost:{PORT}/api/v2/monitor/health", timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError as exc:
        return type(getattr(exc, "reason", exc)).__name__


class StandaloneStart:
    """The start of ``airflow standalone`` as ``make ui`` watches it: up when the api-server answers its health
    check; given up when standalone exits, when its api-server exits (standalone runs on without it), or when
    nothing moved for :data:`QUIET` seconds: no new kind of log line, no change in what the port answers, no CPU
    spent on the start. The process table, the health probe and the clock are injected."""

    def __init__(self, proc: Started, *, table: Callable[[int], list[Proc]] = family,
                 probe: Callable[[], int | str] = health, clock: Clock = SYSTEM) -> None:
        self.proc, self.table, self.probe, self.clock = proc, table, probe, clock
        self.lines, self.api, self.answer, self.cpu = NewLines(proc.log), set(), None, 0

    def up(self) -> bool:
        procs, known = self.table(self.proc.pid), self.api
        # known by its pid once seen: it retitles itself ("airflow api_server -- host:…")
        self.api = {p.pid for p in procs if p.pid in known or "api-server" in p.argv}
        if known and not self.api:
            raise GaveUp(f"its api-server exited (airflow standalone runs on without it){tail(self.proc.log, 25)}")
        self.answer = self.probe()
        # CPU is the start's work only while the port answers nothing (an idle server spends some too); before
        # the api-server runs, standalone's own set-up (the metadata database) is that work
        starting = not isinstance(self.answer, int)
        self.cpu = sum(p.cpu for p in (subtree(procs, self.api) if self.api else procs)) if starting else 0
        return self.answer == 200

    def progress(self) -> tuple:
        return self.lines(), self.cpu, self.answer

    def wait(self) -> None:
        what = f"the api-server to answer on port {PORT} (new log lines, CPU ticks, its answer)"
        wait_for(self.up, what, QUIET, [self.proc], self.progress, clock=self.clock, every=2)


def main() -> int:
    if _port_taken(PORT):
        print(f"error: port {PORT} on {HOST} is in use (another make ui, or an Airflow already running?): stop it, "
              f"or choose another port with RADAR_UI_PORT=8081 make ui", file=sys.stderr)
        return 1
    demo.OUT.mkdir(parents=True, exist_ok=True)
    standins = start_standins()
    if standins:
        os.environ.setdefault("AIRFLOW_VAR_RADAR_DEMO_MODE", "true")
        demo_db = demo.OUT / "database_url"
        if demo_db.exists() and not os.environ.get("RADAR_DATABASE_URL_FROM_USER"):
            os.environ["RADAR_DATABASE_URL"] = demo_db.read_text().strip()
    os.environ.setdefault("AIRFLOW_VAR_RADAR_LINK_SECRET", demo.link_secret())
    os.environ.setdefault("AIRFLOW_VAR_RADAR_REPORT_BASE_URL", f"http://localhost:{PORT}/radar")
    os.environ.setdefault("AIRFLOW__API__PORT", str(PORT))
    os.environ.setdefault("AIRFLOW__API__HOST", HOST)
    os.environ.setdefault("AIRFLOW__API__BASE_URL", f"http://localhost:{PORT}")
    home = Path(os.environ["AIRFLOW_HOME"])
    log_file = demo.OUT / "standalone.log"
    # its own process group, so that stopping it also stops the scheduler, api-server and workers it forks
    proc = Started(log_file, ["airflow", "standalone"])
    signal.signal(signal.SIGTERM, lambda *_: (_stop(proc), sys.exit(0)))
    print(f"starting airflow standalone (logs: {log_file}) …", flush=True)
    try:
        StandaloneStart(proc).wait()
    except GaveUp as exc:
        print(f"error: airflow standalone did not come up: {exc}", file=sys.stderr)
        _stop(proc)
        return 1
    passwords = home / "simple_auth_manager_passwords.json.generated"
    login = json.loads(passwords.read_text()) if passwords.exists() else {}
    print(f"\nAirflow UI:   http://localhost:{PORT}/   login: " + ", ".join(f"{u} / {p}" for u, p in login.items()))
    print(f"Report view:  http://localhost:{PORT}/radar/  (also under 机会雷达 in the Airflow menu)")
    print(f"DAG:          http://localhost:{PORT}/dags/opportunity_radar_slots  (paused until you unpause it)")
    print(f"Radar data:   {db.redact(os.environ.get('RADAR_DATABASE_URL', ''))}")
    for line in standins:
        print(f"Offline:      {line}")
    print("Ctrl-C stops everything.", flush=True)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        return 0


def _stop(proc: subprocess.Popen) -> None:
    """Stop airflow standalone and everything it started: TERM the group, KILL what is left after 20 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers that outlived the standalone process
        except ProcessLookupError:
            pass


if __name__ == "__main__":
    sys.exit(main())
