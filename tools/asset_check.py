"""The daily report as an Airflow Asset, for real: `airflow standalone` (LocalExecutor, metadata on PostgreSQL,
the `make ui` set-up) with the radar's DAG and a DAG of the reader's own scheduled on `radar://daily-report`
(include/radar_demo/report_consumer.py), against the stand-ins. Checked (the exit status is 0 only when all hold):

- the daily slot's push (the run that unpausing starts: the schedule's latest tick) is one event, and the
  consumer runs once for it, reading the day and the counts from it;
- a rerun of the same slot pushes nothing and emits nothing: no event, no consumer run;
- a forced re-push of the report is a new event, and the consumer's second run.

    make asset-check        # about three minutes

It waits on events (the DAGs stored, the runs' and tasks' states), not on a clock (tools/local_airflow.py's QUIET).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from include.radar import DAG_ID
from include.radar.core import db, loader
from include.radar_demo.fakes import FakeDeepSeek, FakeWeRSS, PushSink, serve
from include.radar_demo.waiting import run
from tools.local_airflow import (
    airflow,
    metadata,
    port_from,
    slots_now,
    standin_env,
    start,
    stop,
    wait_parsed,
    wait_runs,
)

REPO = Path(__file__).resolve().parents[1]
RADAR_DB = "radar_asset_check"
OUT = REPO / ".local" / "asset-check"
PORT = port_from("RADAR_ASSET_CHECK_PORT")
CONSUMER = "radar_report_consumer"
URI = "radar://daily-report/"  # as Airflow writes Asset("radar://daily-report")'s URI


def _dags_folder() -> Path:
    """The radar's DAG and the consumer, side by side (links: the files the repository holds)."""
    folder = OUT / "dags"
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in (("opportunity_radar.py", REPO / "dags" / "opportunity_radar.py"),
                         ("radar_report_consumer.py", REPO / "include" / "radar_demo" / "report_consumer.py")):
        link = folder / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(source)
    return folder


def _events(meta: Any, after: int = 0) -> list[dict[str, Any]]:
    """The Asset's events after the id ``after`` (an earlier check's stay: deleting a DAG keeps them)."""
    return meta.execute("SELECT e.id, e.extra, e.timestamp FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                        "WHERE a.uri = %s AND e.id > %s ORDER BY e.id", (URI, after)).fetchall()


def _consumer_runs(meta: Any) -> list[dict[str, Any]]:
    return meta.execute("SELECT run_id, run_type, state FROM dag_run WHERE dag_id = %s ORDER BY id",
                        (CONSUMER,)).fetchall()


def _trigger(meta: Any, env: dict[str, str], conf: dict[str, Any], procs: list, log: Path, what: str) -> dict:
    run_id = f"{conf['action']}_{int(time.time() * 1000)}"
    airflow("dags", "trigger", DAG_ID, "--run-id", run_id, "--conf", json.dumps(conf), env=env)
    return wait_runs(meta, DAG_ID, lambda: meta.execute(
        "SELECT run_id, state, end_date FROM dag_run WHERE run_id = %s AND state IN ('success', 'failed')",
        (run_id,)).fetchone(), what, procs, log)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    plan = slots_now()
    werss = FakeWeRSS(accounts=[{"id": "MP_WXS_1", "mp_name": "研究所"}], articles=[])
    deepseek = FakeDeepSeek(api_key="sk-asset")
    pushes: list[dict[str, Any]] = []  # the daily reports' pushes (the operator's alerts share the sink)
    werss_at, deepseek_at = serve(werss.handle), serve(deepseek.handle)
    sink_at = serve(PushSink(on_message=lambda m: pushes.append(m) if "【日报】" in str(m.get("title")) else None).handle)
    radar_url = db.fresh_database(loader.load(use_airflow=False).database_url, RADAR_DB)
    env = {**os.environ, **standin_env(PORT, werss_at, deepseek_at, sink_at, "sk-asset"),
           "RADAR_DATABASE_URL": radar_url, "AIRFLOW__CORE__DAGS_FOLDER": str(_dags_folder()),
           "AIRFLOW_VAR_RADAR_SCHEDULE_SLOTS": json.dumps([plan.daytime, plan.daily]),
           "AIRFLOW_VAR_RADAR_LINK_SECRET": "asset-check-link-secret-0123456789"}
    for dag_id in (DAG_ID, CONSUMER):
        run(["airflow", "dags", "delete", "-y", dag_id], env=env)  # earlier runs
    day = (plan.run_date + timedelta(days=1)).isoformat()  # the daily tick's: the day after the daytime slot's
    print(f"[asset] airflow standalone on {PORT}: {DAG_ID} (slots {plan.daytime}, {plan.daily}) and {CONSUMER} "
          f"scheduled on {URI}; logs in {OUT}", flush=True)
    log = OUT / "standalone.log"
    procs = [start(log, ["airflow", "standalone"], env)]
    try:
        with metadata() as meta:
            before = max((e["id"] for e in _events(meta)), default=0)
            wait_parsed(meta, CONSUMER, procs, log)
            wait_parsed(meta, DAG_ID, procs, log)
            airflow("dags", "unpause", CONSUMER, env=env)
            airflow("dags", "unpause", DAG_ID, env=env)  # the latest tick (the daily slot) runs and pushes
            tick = wait_runs(meta, DAG_ID, lambda: meta.execute(
                "SELECT run_id, state FROM dag_run WHERE dag_id = %s AND run_type = 'scheduled' "
                "AND state IN ('success', 'failed')", (DAG_ID,)).fetchone(), "the daily tick's run", procs, log)
            first = wait_runs(meta, CONSUMER, lambda: [r for r in _consumer_runs(meta) if r["state"] in (
                "success", "failed")] or None, "the consumer's run for the daily push", procs, log)
            pushed, events = len(pushes), len(_events(meta, before))
            conf = {"run_date": day, "slot": plan.daily}
            rerun = _trigger(meta, env, {**conf, "action": "run"}, procs, log, "the rerun of the daily slot")
            after_rerun = {"events": len(_events(meta, before)), "pushes": len(pushes)}
            forced = _trigger(meta, env, {**conf, "action": "force"}, procs, log, "the forced re-push")
            last = wait_runs(meta, CONSUMER, lambda: (lambda r: r if len(r) >= 2 and all(
                x["state"] in ("success", "failed") for x in r) else None)(_consumer_runs(meta)),
                "the consumer's run for the forced re-push", procs, log)
            extras = [e["extra"] for e in _events(meta, before)]
    finally:
        stop(procs)
    print(f"[asset] tick run {tick['state']}; events {extras}; consumer runs "
          + ", ".join(f"{r['run_id']} {r['run_type']} {r['state']}" for r in last)
          + f"; pushes: {pushed} after the tick, {after_rerun['pushes']} after the rerun, {len(pushes)} in all")
    checks = {
        "the daily push is one event, the consumer ran once": events == 1 and pushed == 1 and len(first) == 1
        and first[0]["state"] == "success" and first[0]["run_type"] == "asset_triggered",
        "the event says the day, the counts and the link": bool(extras) and extras[0].get("day") == day
        and "analysed" in extras[0] and str(extras[0].get("link", "")).endswith(f"/daily/{day}"),
        "a rerun that pushes nothing emits nothing": rerun["state"] == "success"
        and after_rerun == {"events": 1, "pushes": 1},
        "a forced re-push is the consumer's second run": forced["state"] == "success" and len(extras) == 2
        and len(last) == 2 and all(r["state"] == "success" for r in last),
    }
    for what, ok in checks.items():
        print(f"[asset] {'ok  ' if ok else 'FAIL'} {what}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
