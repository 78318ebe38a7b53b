"""What the scripts that run a real Airflow on this machine share (`make bench-slot`, `make celery`,
`make backfill-check`): the CLI, the metadata database, starting and stopping process groups, waiting."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from include.radar.core.slots import SHANGHAI


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
    done = subprocess.run(["airflow", *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"airflow {' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def metadata() -> psycopg.Connection:
    """Airflow's metadata database (scripts/bootstrap.sh put it on the radar's PostgreSQL server)."""
    url = os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].replace("postgresql+psycopg2://", "postgresql://", 1)
    return psycopg.connect(url, autocommit=True, row_factory=dict_row)


@dataclass(frozen=True)
class SlotPlan:
    """A schedule of two slots for a script that runs a real Airflow: ``daytime`` (HH:MM, Asia/Shanghai) is the
    schedule's latest tick at ``start_at``, and ``daily`` (the day's last slot) comes at least the script's
    room later, on the same day. Unpausing the DAG then runs the daytime slot, every run triggered by hand
    before the daily tick maps to it too (slots.slot_for), and no tick fires while the script runs."""

    daytime: str
    daily: str
    slot_epoch: int  # the daytime slot's moment
    start_at: datetime  # when the script may start: now, or the next midnight when no daily slot fits today


def plan_slots(now: datetime, *, room: timedelta = timedelta(minutes=30),
               fresh: timedelta = timedelta(minutes=20)) -> SlotPlan:
    """The slots for a script starting at ``now`` (aware), at any hour.

    The daytime slot is a few minutes ago (at most ``fresh``: a run started later than the slot's
    ``late_after_minutes`` would not push) and on today's date; the daily slot shares its minute (the cron
    needs it), an hour or more later, still today, and at least ``room`` after the start. Late in the evening
    no daily slot fits before midnight: the plan then starts at the next midnight.
    """
    local = now.astimezone(SHANGHAI)
    plan = _plan_at(local, room, fresh)
    if plan is not None:
        return plan
    midnight = datetime.combine(local.date() + timedelta(days=1), datetime.min.time(), SHANGHAI)
    plan = _plan_at(midnight, room, fresh)
    assert plan is not None, "a day's first minutes always fit"
    return plan


def _plan_at(start: datetime, room: timedelta, fresh: timedelta) -> SlotPlan | None:
    minute = start.replace(second=0, microsecond=0)
    backs = [3, 2, 1, 0, *range(4, int(fresh.total_seconds() // 60) + 1)]  # three minutes ago, else the freshest
    for back in backs:
        daytime = minute - timedelta(minutes=back)
        if daytime.date() != start.date() or start - daytime > fresh:
            continue
        for hours in range(1, 24 - daytime.hour):
            daily = daytime + timedelta(hours=hours)
            if daily - start >= room:
                return SlotPlan(f"{daytime:%H:%M}", f"{daily:%H:%M}", int(daytime.timestamp()), start)
    return None


def slots_now(room: timedelta = timedelta(minutes=30)) -> tuple[str, str, int]:
    """The slots of ``plan_slots`` for now; when the evening leaves no room for them, wait for midnight."""
    plan = plan_slots(datetime.now(SHANGHAI), room=room)
    wait = (plan.start_at - datetime.now(SHANGHAI)).total_seconds()
    if wait > 0:
        print(f"no daily slot fits before midnight (Asia/Shanghai): waiting {wait / 60:.0f} min for "
              f"{plan.start_at:%Y-%m-%d %H:%M}", flush=True)
        time.sleep(wait)
    return plan.daytime, plan.daily, plan.slot_epoch


def start(log: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen:
    """A process in its own group (stopping it stops what it forks), its output in ``log``."""
    with log.open("w") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


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


def wait_for(check: Any, what: str, seconds: float, procs: list[subprocess.Popen]) -> Any:
    """Poll ``check`` until it returns something true; fail when a process exits or time runs out."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        dead = [p.args for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{dead} exited while waiting for {what}")
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise RuntimeError(f"timed out waiting for {what}")
