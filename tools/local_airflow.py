"""What the scripts that run a real Airflow on this machine share (`make bench-slot`, `make celery`,
`make backfill-check`): the CLI, the metadata database, starting and stopping process groups, waiting on
events with a stall bound instead of a deadline (include/radar_demo/waiting.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from include.radar.core.clock import SYSTEM, Clock
from include.radar.core.slots import SHANGHAI
from include.radar_demo.waiting import GaveUp, NewLines, Started, run, wait_for

# seconds in which a wait saw nothing move (no task changing state, no new kind of log line) before it gives up
QUIET = 600


def free_port() -> int:
    """A TCP port nothing listens on now: two of these scripts (or two checkouts) running at once must not
    reach each other's api-server or log servers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_from(variable: str) -> int:
    """The port named by ``variable`` in the environment, else a free one."""
    return int(os.environ.get(variable) or 0) or free_port()


def standin_env(port: int, werss_at: str, deepseek_at: str, sink_at: str, api_key: str) -> dict[str, str]:
    """The environment of an Airflow on ``port`` whose connections point at the stand-ins (include/radar_demo/fakes.py),
    its log servers on free ports too (Airflow's defaults, 8793 and 8794, are shared by every Airflow here)."""
    return {
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://localhost:{port}",
        "AIRFLOW_VAR_RADAR_REPORT_BASE_URL": f"http://localhost:{port}/radar",
        "AIRFLOW_CONN_WERSS_DEFAULT": json.dumps({"conn_type": "http", "host": f"http://{werss_at}",
                                                  "login": "admin", "password": "secret"}),
        "AIRFLOW_CONN_DEEPSEEK_DEFAULT": json.dumps({"conn_type": "http", "host": f"http://{deepseek_at}",
                                                     "password": api_key, "extra": {"backoff_seconds": 0}}),
        "AIRFLOW_CONN_RADAR_PUSH": json.dumps({"conn_type": "generic", "extra": {"urls": [f"json://{sink_at}/push"]}}),
    }


def airflow(*args: str, env: dict[str, str]) -> str:
    """``airflow *args``' output; it waits while the command works (spends CPU or writes), whatever the load."""
    done = run(["airflow", *args], env=env)
    if done.returncode != 0:
        raise RuntimeError(f"airflow {' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def metadata(url: str | None = None) -> psycopg.Connection:
    """Airflow's metadata database: ``url``, else the environment's (scripts/bootstrap.sh put it on the radar's
    PostgreSQL server)."""
    url = (url or os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).replace("postgresql+psycopg2://", "postgresql://", 1)
    return psycopg.connect(url, autocommit=True, row_factory=dict_row)


def states(meta: psycopg.Connection, dag_id: str) -> str:
    """How many of the DAG's runs and task instances are in each state: it changes whenever one does."""
    rows = meta.execute(
        "SELECT 'runs' AS kind, state, count(*) AS n FROM dag_run WHERE dag_id = %(d)s GROUP BY state UNION ALL "
        "SELECT 'tasks', coalesce(state, 'none'), count(*) FROM task_instance WHERE dag_id = %(d)s GROUP BY state "
        "ORDER BY 1, 2", {"d": dag_id}).fetchall()
    return "; ".join(f"{r['kind']} {r['state']} {r['n']}" for r in rows) or "no runs"


def wait_parsed(meta: psycopg.Connection, dag_id: str, procs: list[subprocess.Popen], *logs: Path) -> None:
    """Until the dag-processor has stored ``dag_id``; an import error of the bundle (recorded from now on: an
    earlier run's is cleared by the next parse) ends the wait at once."""
    since = meta.execute("SELECT now() AS t").fetchone()["t"]

    def parsed() -> bool:
        broken = meta.execute("SELECT filename, stacktrace FROM import_error WHERE timestamp >= %s",
                              (since,)).fetchone()
        if broken:
            raise GaveUp(f"the DAG bundle does not import: {broken['filename']}\n{broken['stacktrace'][-2000:]}")
        return bool(meta.execute("SELECT 1 FROM dag WHERE dag_id = %s", (dag_id,)).fetchone())

    wait_for(parsed, f"the dag-processor to store {dag_id} (new log lines)", QUIET, procs, NewLines(*logs))


def wait_runs(meta: psycopg.Connection, dag_id: str, done: Callable[[], Any], what: str,
              procs: list[subprocess.Popen], *logs: Path) -> Any:
    """Until ``done()`` returns something true, while the DAG's runs and tasks change state or the logs show new
    lines; :data:`QUIET` seconds of neither, or a process's exit, end it."""
    lines = NewLines(*logs)
    return wait_for(done, f"{what} (its runs' and tasks' states, new log lines)", QUIET, procs,
                    lambda: (states(meta, dag_id), lines()))


@dataclass(frozen=True)
class SlotPlan:
    """A schedule of two slots for a script that runs a real Airflow, the same at any hour: ``daily`` (HH:MM,
    Asia/Shanghai, the day's last slot) is the schedule's latest tick, three hours or more ago (four when that
    would be a midnight hour), and ``daytime`` an hour before it in the day; the next tick is about twenty
    hours away, so none fires while the script runs. Unpausing the DAG runs the daily tick at once (Airflow
    runs a DAG's latest tick when it is unpaused): the script lets that run end before it gives WeRSS its
    articles. It then triggers the daytime slot of the day before by name (:meth:`conf`; the day before, so
    that no report of its day was built before it, to be rebuilt with a digest call when it ends): a slot named
    by the operator pushes only when forced, so the script forces it, and a duplicate trigger without force
    pushes nothing. Nothing waits for a time of day (a plan that needed the daily tick still ahead waited for
    midnight at 23:30, when no daily slot fits before it)."""

    daytime: str
    daily: str
    run_date: date  # the daytime slot's day: the day before the daily tick's
    slot_epoch: int  # the daytime slot's moment

    def conf(self, *, force: bool = True) -> str:
        """The trigger's params naming the daytime slot (``airflow dags trigger --conf``)."""
        return json.dumps({"run_date": self.run_date.isoformat(), "slot": self.daytime,
                           "action": "force" if force else "run"})


def plan_slots(now: datetime) -> SlotPlan:
    """The slots for a script starting at ``now`` (aware), at any hour (pure: it never waits)."""
    daily = now.astimezone(SHANGHAI).replace(second=0, microsecond=0) - timedelta(hours=3)
    if daily.hour == 0:  # the daytime slot an hour before it would be the day before
        daily -= timedelta(hours=1)
    daytime = daily - timedelta(hours=1) - timedelta(days=1)
    return SlotPlan(f"{daytime:%H:%M}", f"{daily:%H:%M}", daytime.date(), int(daytime.timestamp()))


def slots_now(clock: Clock = SYSTEM) -> SlotPlan:
    """The slots of ``plan_slots`` for ``clock``'s now."""
    return plan_slots(clock.now())


def start(log: Path, args: list[str], env: dict[str, str]) -> Started:
    """A process in its own group (stopping it stops what it forks), its output in ``log``."""
    return Started(log, args, env)


def stop(procs: list[subprocess.Popen]) -> None:
    """TERM every group, KILL what is left after 30 s."""
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 30
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
