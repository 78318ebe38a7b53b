"""The CeleryExecutor deployment, exercised on one machine: Redis, the radar's PostgreSQL, an Airflow scheduler,
dag-processor, api-server and **two Celery workers**, running one slot of 20 articles.

What it shows (and checks; the exit status is 0 only when all hold):

- the slot's mapped analyses (its batches) ran on both workers (each worker records its own name as the task
  instances' hostname);
- exactly-once results, as under LocalExecutor: 20 WeRSS detail calls, 20 DeepSeek calls, 20 analyses, one
  push per channel; then a manual run of the same slot (a duplicate trigger) calls nothing and pushes nothing.

The slot is the daytime slot of tools/local_airflow.py's plan, triggered by name after the run that unpausing
starts (the schedule's latest tick, hours ago, with no articles yet) has ended: the same at any hour, 23:30
included, and nothing waits for a time of day, nor gives up after one: each wait lasts while tasks change
state or the logs show new lines (tools/local_airflow.py's ``QUIET``).

Redis comes from Debian's ``redis-server`` (``apt-get install redis-server``); the Celery provider is in the
lock. Its own AIRFLOW_HOME (``.local/airflow-celery``), metadata database (``airflow_celery``) and radar
database (``radar_celery``) on the radar's PostgreSQL server. About two minutes.

    make celery
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from include.radar import DAG_ID
from include.radar.core import db, loader
from include.radar_demo.fakes import FakeArticle, FakeDeepSeek, FakeWeRSS, PushSink, serve
from include.radar_demo.waiting import run as watched
from tests.slotrun import answer
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

RADAR_DB = "radar_celery"
OUT = REPO / ".local" / "celery"
PORT = port_from("RADAR_CELERY_PORT")
ARTICLES = 20
WORKERS = ("worker-1", "worker-2")
# the settings docker-compose.yaml gives its workers (tests/test_deploy.py holds them equal)
WORKER_CONCURRENCY = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    redis = shutil.which("redis-server")
    if redis is None:
        print("redis-server is not installed: apt-get install -y redis-server", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    plan = slots_now()
    daytime, daily, slot_epoch = plan.daytime, plan.daily, plan.slot_epoch
    werss = FakeWeRSS(accounts=[{"id": "MP_WXS_1", "mp_name": "研究所"}], articles=[])  # given after the tick's run
    articles = [
        FakeArticle(id=f"c-{i}", mp_id="MP_WXS_1", title=f"第{i}篇", publish_time=slot_epoch - 60 - 60 * i,
                    content_html=f'<div id="js_content"><p>第{i}篇：某储能龙头订单同比增长{i}%，行业景气回升。</p></div>',
                    url=f"https://mp.weixin.qq.com/s/c{i}")
        for i in range(ARTICLES)]
    deepseek = FakeDeepSeek(api_key="sk-celery")

    def respond(body: dict[str, Any]) -> str:
        time.sleep(1.0)
        return answer(70)  # every article an opportunity: the slot pushes once

    deepseek.responder = respond
    pushes: list[dict[str, Any]] = []
    werss_at, deepseek_at = serve(werss.handle), serve(deepseek.handle)
    sink_at = serve(PushSink(on_message=pushes.append).handle)
    server_url = loader.load(use_airflow=False).database_url
    radar_url = db.fresh_database(server_url, RADAR_DB)
    meta_url = os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    redis_port = free_port()
    env = {
        **os.environ,
        **standin_env(PORT, werss_at, deepseek_at, sink_at, "sk-celery"),
        "RADAR_DATABASE_URL": radar_url,
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + meta_url.replace("postgresql+psycopg2://", "postgresql://", 1),
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(WORKER_CONCURRENCY),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://localhost:{PORT}/execution/",
        "AIRFLOW__CORE__HOSTNAME_CALLABLE": "include.radar_demo.hostname.worker_hostname",
        "AIRFLOW_VAR_RADAR_SCHEDULE_SLOTS": json.dumps([daytime, daily]),
        "AIRFLOW_VAR_RADAR_LINK_SECRET": "celery-check-link-secret-0123456789",
    }
    watched(["airflow", "dags", "delete", "-y", DAG_ID], env=env)  # earlier runs
    print(f"[celery] redis on {redis_port}; scheduler, dag-processor, api-server on {PORT}, workers "
          f"{', '.join(WORKERS)} (concurrency {WORKER_CONCURRENCY} each); slot {daytime} (Asia/Shanghai) with "
          f"{ARTICLES} articles, triggered by name after the run of the daily tick {daily}; logs in {OUT}", flush=True)
    procs = [start(OUT / "redis.log", [redis, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], env)]
    try:
        procs += [start(OUT / "api-server.log", ["airflow", "api-server", "--port", str(PORT)], env),
                  start(OUT / "scheduler.log", ["airflow", "scheduler"], env),
                  start(OUT / "dag-processor.log", ["airflow", "dag-processor"], env)]
        for name in WORKERS:
            procs.append(start(OUT / f"{name}.log", ["airflow", "celery", "worker", "--celery-hostname", f"{name}@%h",
                                      "--skip-serve-logs"], {**env, "RADAR_WORKER_NAME": name}))
        logs = [OUT / f"{name}.log" for name in ("api-server", "scheduler", "dag-processor", *WORKERS)]
        with metadata() as meta:
            wait_parsed(meta, DAG_ID, procs, *logs)
            airflow("dags", "unpause", DAG_ID, env=env)  # the schedule's latest tick (the daily slot) runs: let it end
            wait_runs(meta, DAG_ID, lambda: meta.execute(
                "SELECT run_id FROM dag_run WHERE dag_id = %s AND run_type = 'scheduled' "
                "AND state IN ('success', 'failed')", (DAG_ID,)).fetchone(), "the run of the daily tick", procs, *logs)
            werss.articles = articles
            before = {"llm": len(deepseek.requests), "pushes": len(pushes)}  # the tick's run: its report's push
            started = time.monotonic()
            run_id = f"slot_{int(time.time())}"
            airflow("dags", "trigger", DAG_ID, "--run-id", run_id, "--conf", plan.conf(), env=env)
            run = wait_runs(meta, DAG_ID, lambda: meta.execute(
                "SELECT run_id, state FROM dag_run WHERE run_id = %s AND state IN ('success', 'failed')",
                (run_id,)).fetchone(), "the slot's run", procs, *logs)
            took = time.monotonic() - started
            tis = meta.execute("SELECT task_id, map_index, state, hostname FROM task_instance WHERE run_id = %s "
                               "ORDER BY task_id, map_index", (run["run_id"],)).fetchall()
            first = {"llm": len(deepseek.requests) - before["llm"], "details": sum(werss.detail_calls.values()),
                     "pushes": len(pushes) - before["pushes"]}
            # a duplicate trigger of the same slot, not forced
            again_id = f"duplicate_{int(time.time())}"
            airflow("dags", "trigger", DAG_ID, "--run-id", again_id, "--conf", plan.conf(force=False), env=env)
            again = wait_runs(meta, DAG_ID, lambda: meta.execute(
                "SELECT state FROM dag_run WHERE run_id = %s AND state IN ('success', 'failed')",
                (again_id,)).fetchone(), "the duplicate run", procs, *logs)
    finally:
        stop(procs)
    with psycopg.connect(radar_url, row_factory=dict_row) as conn:
        analyses = conn.execute("SELECT count(*) AS n FROM analysis_result").fetchone()["n"]
        slots = conn.execute("SELECT run_date, slot, status, pushed_count FROM slot_run WHERE slot = %s",
                             (daytime,)).fetchall()
    print(f"[celery] the slot's run {run['run_id']}: {run['state']} in {took:.0f} s (from its trigger)")
    for ti in tis:
        print(f"         {ti['task_id']:24} {ti['map_index']:>3}  {ti['state']:<10} on {ti['hostname'] or '-'}")
    batches = [t for t in tis if t["task_id"] == "analyse"]
    hosts = {t["hostname"] for t in batches}
    print(f"[celery] analyse batches: {len(batches)} on {sorted(hosts)}; every task on "
          f"{sorted({t['hostname'] for t in tis if t['hostname']})}")
    print(f"[celery] first run: {first['details']} WeRSS detail calls, {first['llm']} DeepSeek calls, "
          f"{first['pushes']} push(es); duplicate run {again['state']}: "
          f"{len(deepseek.requests) - before['llm'] - first['llm']} more calls, "
          f"{len(pushes) - before['pushes'] - first['pushes']} more pushes; {analyses} analyses stored; slot records: "
          + ", ".join(f"{s['run_date']} {s['slot']} status {s['status']} pushed {s['pushed_count']}" for s in slots))
    checks = {
        "the batches ran on both workers": hosts == set(WORKERS),
        "the slot's run succeeded": run["state"] == "success" and again["state"] == "success",
        f"{ARTICLES} detail calls, {ARTICLES} LLM calls, {ARTICLES} analyses": (
            first["details"] == first["llm"] == analyses == ARTICLES),
        "one push; the duplicate run called and pushed nothing": (
            first["pushes"] == 1 and len(pushes) - before["pushes"] == 1
            and len(deepseek.requests) - before["llm"] == ARTICLES),
        "one record of the slot": len(slots) == 1,
    }
    for what, ok in checks.items():
        print(f"[celery] {'ok  ' if ok else 'FAIL'} {what}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
