"""What it takes to run: memory per Airflow process, bare and with the radar.

1. ``airflow standalone`` twice (LocalExecutor, each with its own AIRFLOW_HOME under .local/bench-memory, its
   own metadata database on the server and free ports): **bare** (a dags folder with one one-task DAG, an
   empty plugins folder) and **with the radar** (this bundle's dags/ and plugins/, stand-ins for WeRSS,
   DeepSeek and the push channel with WeChat-like pages and answers, include/radar_demo/wechat_pages.py). Each
   runs its DAG once to the end (the radar: its daily slot, ~50 new articles from 10 accounts, so every task
   runs, the report is built and pushed, and the Deadline Alert's callback runs in the triggerer), then its
   api-server is asked for Airflow's pages and, with the radar, every report page through a signed link
   (as pushed; the profile as the admin), a search (``/search?q=储能``) among them.
2. Every process of Airflow's tree is sampled once a second (PSS, USS, RSS; bench/memory_roles.py) and
   sorted into roles by its title; per role: its processes, its peak PSS (summed over them), its largest
   process; per task id, the largest task process; and what the radar adds (radar minus bare). The PostgreSQL
   backends serving the run's databases are sampled too (the server's shared part is not counted).
3. The same slot under the CeleryExecutor: scheduler, dag-processor, api-server, triggerer and two Celery
   workers (concurrency 4), as tools/celery_two_workers.py runs them.
4. The radar's own imports per process in fresh interpreters (bench/memory_imports.py).

    make bench-memory                                   # everything, 4 to 7 minutes on 2 cores
    make bench-memory ARGS="--only standalone"          # or celery, imports; --articles 50 --latency 0.5
    make bench-memory ARGS="--processes --radar-var daily_deadline_alert=false"   # every process listed

The server is RADAR_TEST_DATABASE_URL's when set, else the radar's (scripts/bootstrap.sh). Figures are also
written to .local/bench-memory/results.txt.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import random
import re
import secrets
import shutil
import subprocess
import sys
import time
from contextlib import suppress
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import psycopg
from cryptography.fernet import Fernet
from psycopg.rows import dict_row

from bench import memory_imports, memory_roles
from include.radar import DAG_ID
from include.radar.core import db, loader, signing
from include.radar.core.slots import SHANGHAI
from include.radar_demo import wechat_pages
from include.radar_demo.fakes import FakeArticle, FakeDeepSeek, FakeWeRSS, PushSink, serve
from tools.local_airflow import airflow, free_port, standin_env, start, stop, wait_for

REPO = Path(__file__).resolve().parents[1]

OUT = REPO / ".local" / "bench-memory"
PRELOADING = "include.radar.seam.executor.PreloadingLocalExecutor"
PREFIX = "bench_memory"  # every database this script creates (and drops) starts with it
LINK_SECRET = "bench-memory-link-secret-0123456789"
ACCOUNTS = 10
WORKERS = ("worker-1", "worker-2")
COMPONENTS = tuple(r for r in memory_roles.ORDER if r not in (memory_roles.SUPERVISOR, memory_roles.RUNNER))


# --------------------------------------------------------------------------------------------- databases


def server_url() -> str:
    return os.environ.get("RADAR_TEST_DATABASE_URL") or loader.load(use_airflow=False).database_url


def metadata_database(server: str, name: str) -> str:
    """A migrated Airflow metadata database ``name``, copied from a template migrated once per lock file."""
    lock = hashlib.sha256((REPO / "requirements.lock").read_bytes()).hexdigest()[:10]
    template = f"{PREFIX}_airflow_{lock}"
    with psycopg.connect(server, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (template,)).fetchone()
    if not exists:
        print(f"[bench-memory] migrating a template metadata database {template} (once per requirements.lock)", flush=True)
        url = db.airflow_metadata_url(server, template)
        home = OUT / "template-home"
        home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url}
        try:
            airflow("db", "migrate", env=env)
            airflow("pools", "set", "radar_llm", "2", "Opportunity Radar: analysis tasks at once", env=env)
        except Exception:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
            raise
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return db.airflow_metadata_url(server, name)


class Backends:
    """The pids of the PostgreSQL backends connected to this script's databases (Airflow's metadata and the
    radar's), for the sampler: what the server spends on this deployment's connections (the server's own
    processes and shared buffers, shared with whatever else it serves, are not counted)."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.conn: psycopg.Connection | None = None

    def __call__(self) -> list[int]:
        try:
            if self.conn is None or self.conn.closed:
                self.conn = psycopg.connect(self.server, autocommit=True)
            return [r[0] for r in self.conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname LIKE %s AND pid <> pg_backend_pid()", (f"{PREFIX}%",))]
        except psycopg.Error:
            return []


def meta_connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url.replace("postgresql+psycopg2://", "postgresql://", 1), autocommit=True,
                           row_factory=dict_row)


# ------------------------------------------------------------------------------------------- the stand-ins


def daily_slot() -> datetime:
    """The radar's one slot (so it is the daily one): 35 minutes ago, so the scheduled run that unpausing starts
    is late (it gets its full deadline budget from its own start) and its Deadline Alert is already due."""
    return (datetime.now(SHANGHAI) - timedelta(minutes=35)).replace(second=0, microsecond=0)


def standins(n: int, latency: float, slot: datetime) -> dict[str, Any]:
    pages = {f"m{i}": wechat_pages.page(f"bench-memory-{i}") for i in range(n)}
    by_title = {p.title: p for p in pages.values()}
    werss = FakeWeRSS(accounts=[{"id": f"MP_WXS_{i}", "mp_name": f"研究所{i:02d}"} for i in range(1, ACCOUNTS + 1)],
                      articles=[FakeArticle(id=key, mp_id=f"MP_WXS_{i % ACCOUNTS + 1}", title=p.title,
                                            publish_time=int(slot.timestamp()) - 120 - 300 * i, content_html=p.html,
                                            url=f"https://mp.weixin.qq.com/s/{key}")
                                for i, (key, p) in enumerate(pages.items())])
    rng = random.Random(26)

    def respond(body: dict[str, Any]) -> str:
        time.sleep(latency)
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if "<<<DATA_START>>>" in user:  # the daily digest: its fallback is built from the database
            return "not json"
        match = re.search(r"^标题：(.*)$", user, re.MULTILINE)
        page = by_title.get(match.group(1).strip()) if match else None
        return wechat_pages.answer(page or wechat_pages.page("unknown"),
                                   rng.choice([20, 35, 45, 50, 55, 40, 30, 62, 70, 82]) if page else 20)

    deepseek = FakeDeepSeek(responder=respond, api_key="sk-bench")
    sink = PushSink()
    return {"werss": werss, "deepseek": deepseek, "sink": sink, "at": (serve(werss.handle), serve(deepseek.handle),
                                                                         serve(sink.handle))}


def radar_env(port: int, fakes: dict[str, Any], radar_url: str, slot: datetime, extra: list[str]) -> dict[str, str]:
    settings = dict(item.split("=", 1) for item in extra)
    return {
        **{f"AIRFLOW_VAR_RADAR_{k.upper()}": v for k, v in settings.items()},
        **standin_env(port, *fakes["at"], "sk-bench"),
        "RADAR_DATABASE_URL": radar_url,
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW_VAR_RADAR_SCHEDULE_SLOTS": json.dumps([f"{slot:%H:%M}"]),
        "AIRFLOW_VAR_RADAR_LINK_SECRET": LINK_SECRET,
        "AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE": "recorded",
        "AIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR": str(REPO / "include" / "radar_demo" / "data" / "market"),
    }


def base_env(home: Path, meta_url: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_VAR_", "AIRFLOW_CONN_"))}
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": meta_url,
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor", "AIRFLOW__CORE__LOAD_EXAMPLES": "False"})
    return env


# ---------------------------------------------------------------------------------------------- the pages


def token(base: str, home: Path) -> str | None:
    """A JWT of standalone's admin (simple auth manager), for Airflow's API and the personal page."""
    passwords = home / "simple_auth_manager_passwords.json.generated"
    if not passwords.exists():
        return None
    password = json.loads(passwords.read_text())["admin"]
    answer = httpx.post(f"{base}/auth/token", json={"username": "admin", "password": password}, timeout=60)
    return answer.json().get("access_token") if answer.status_code in (200, 201) else None


def airflow_pages(base: str, bearer: str | None) -> list[str]:
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    out = []
    for path in ("/", "/api/v2/monitor/health", "/api/v2/dags", "/api/v2/dags/~/dagRuns?limit=20"):
        out.append(f"{path} {httpx.get(base + path, headers=headers, timeout=120).status_code}")
    return out


def radar_pages(base: str, radar_url: str, bearer: str | None) -> list[str]:
    """Every report page once: through a signed link as a pushed one opens (the profile as the admin)."""
    with psycopg.connect(radar_url, row_factory=dict_row) as conn:
        day = conn.execute("SELECT max(run_date) AS d FROM slot_run").fetchone()["d"] or datetime.now(SHANGHAI).date()
        analysis = conn.execute("SELECT max(id) AS id FROM analysis_result").fetchone()["id"] or 1
        entity = conn.execute("SELECT targets->>0 AS name FROM opportunity WHERE jsonb_array_length(targets) > 0 LIMIT 1").fetchone()
    monday = day - timedelta(days=day.weekday())
    paths = ["/", f"/daily/{day}", f"/analysis/{analysis}", f"/weekly/{monday}",
             f"/entity/{entity['name'] if entity else '储能'}", "/trends", "/record", "/search?q=储能", "/profile"]
    out = []
    for path in paths:
        route, _, query = path.partition("?")
        headers = {}
        if route == "/profile":
            headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
            url = f"{base}/radar{path}"
        else:
            sig = signing.sign(route, LINK_SECRET, datetime.now(SHANGHAI), 1)
            url = f"{base}/radar{route}?{query + '&' if query else ''}{urlencode(sig)}"
        out.append(f"{path} {httpx.get(url, headers=headers, timeout=120).status_code}")
    return out


# ------------------------------------------------------------------------------------------------ the runs


def task_names(meta_url: str) -> dict[str, str]:
    """ti id -> task id (with its map index when mapped), every try included."""
    names: dict[str, str] = {}
    with meta_connect(meta_url) as meta:
        for table, key in (("task_instance", "id"), ("task_instance_history", "task_instance_id")):
            for r in meta.execute(f"SELECT {key} AS id, task_id, map_index FROM {table}"):
                names[str(r["id"])] = r["task_id"] + (f"[{r['map_index']}]" if r["map_index"] >= 0 else "")
    return names


def run_to_end(meta_url: str, dag_id: str, procs: list[subprocess.Popen], env: dict[str, str]) -> dict[str, Any]:
    """Unpause ``dag_id`` (the radar: its schedule's latest tick, the daily slot, runs) or trigger it (bare)."""
    with meta_connect(meta_url) as meta:
        wait_for(lambda: meta.execute("SELECT 1 FROM dag WHERE dag_id = %s", (dag_id,)).fetchone(),
                 f"{dag_id} to be parsed", 600, procs)
        airflow("dags", "unpause", dag_id, env=env)
        if dag_id != DAG_ID:
            airflow("dags", "trigger", dag_id, env=env)
        return wait_for(lambda: meta.execute(
            "SELECT run_id, state, start_date, end_date FROM dag_run WHERE dag_id = %s AND state IN ('success', 'failed')",
            (dag_id,)).fetchone(), f"a run of {dag_id}", 1800, procs)


def finish(label: str, sampler: memory_roles.Sampler, run: dict[str, Any], meta_url: str, pages: list[str],
           extra: str = "") -> dict[str, Any]:
    time.sleep(10)  # the processes after the run and the pages, idle
    sampler.stop()
    wall = (run["end_date"] - run["start_date"]).total_seconds()
    print(f"[bench-memory] {label}: run {run['state']} in {wall:.0f} s; {sampler.samples} samples; pages: "
          f"{', '.join(pages)}{extra}", flush=True)
    return {"sampler": sampler, "names": task_names(meta_url), "run": run}


def standalone(kind: str, server: str, args: argparse.Namespace) -> dict[str, Any]:
    home = OUT / kind
    shutil.rmtree(home, ignore_errors=True)
    meta_url = metadata_database(server, f"{PREFIX}_{kind}_airflow")
    env = base_env(home / "home", meta_url)
    port = free_port()
    base = f"http://localhost:{port}"
    fakes: dict[str, Any] = {}
    if kind == "bare":
        (home / "dags").mkdir(parents=True)
        (home / "plugins").mkdir()
        (home / "dags" / "bare.py").write_text(memory_imports.BARE_DAG)
        env.update({"AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
                    "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__BASE_URL": base,
                    "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                    "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port())})
        dag_id = "bare"
    else:
        slot = daily_slot()
        fakes = standins(args.articles, args.latency, slot)
        radar_url = db.fresh_database(server, f"{PREFIX}_radar")
        env.update(radar_env(port, fakes, radar_url, slot, args.radar_var))
        # the executor `make ui` runs (scripts/bootstrap.sh): its scheduler holds what the tasks preload
        env["AIRFLOW__CORE__EXECUTOR"] = os.environ.get("RADAR_EXECUTOR", PRELOADING)
        dag_id = DAG_ID
    print(f"[bench-memory] airflow standalone, {kind}: api-server on {port}, logs in {home / 'standalone.log'}", flush=True)
    proc = start(home / "standalone.log", ["airflow", "standalone"], env)
    sampler = memory_roles.Sampler([proc.pid], args.interval, Backends(server))
    try:
        sampler.start()
        run = run_to_end(meta_url, dag_id, [proc], env)
        wait_for(lambda: _answers(base), "the api-server", 300, [proc])
        bearer = token(base, home / "home")
        pages = airflow_pages(base, bearer)
        extra = ""
        if kind == "radar":
            pages += radar_pages(base, env["RADAR_DATABASE_URL"], bearer)
            extra = (f"; {len(fakes['deepseek'].requests)} DeepSeek calls, {len(fakes['sink'].received)} pushes; "
                     f"deadline callback in the triggerer: {callback_ran(home / 'standalone.log')}")
        return finish(f"standalone {kind}", sampler, run, meta_url, pages, extra)
    finally:
        sampler._running = False
        stop([proc])


def _answers(base: str) -> bool:
    with suppress(httpx.HTTPError):
        return httpx.get(f"{base}/api/v2/monitor/health", timeout=5).status_code == 200
    return False


def callback_ran(log: Path) -> str:
    """Whether the triggerer ran the Deadline Alert's callback (its log says the callback trigger succeeded)."""
    lines = [line for line in log.read_text(errors="replace").splitlines()
             if log.name != "standalone.log" or line.startswith("triggerer")]
    return "ran" if any("CallbackState.SUCCESS" in line for line in lines) else "not run"


def celery(server: str, args: argparse.Namespace) -> dict[str, Any]:
    redis = shutil.which("redis-server")
    if redis is None:
        raise RuntimeError("redis-server is not installed: apt-get install -y redis-server")
    home = OUT / "celery"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    meta_url = metadata_database(server, f"{PREFIX}_celery_airflow")
    port, redis_port = free_port(), free_port()
    base = f"http://localhost:{port}"
    slot = daily_slot()
    fakes = standins(args.articles, args.latency, slot)
    env = {**base_env(home / "home", meta_url),
           **radar_env(port, fakes, db.fresh_database(server, f"{PREFIX}_celery_radar"), slot, args.radar_var),
           "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
           "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
           "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + meta_url.replace("postgresql+psycopg2://", "postgresql://", 1),
           "AIRFLOW__CELERY__WORKER_CONCURRENCY": "4",
           "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
           # one key and one secret for every component (standalone writes them into airflow.cfg; separate
           # processes starting on a new AIRFLOW_HOME each made their own: the triggerer could not read the deadline
           # callback's arguments, the workers' task tokens were refused)
           "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
           "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),  # and one secret for the task tokens
           "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
           "AIRFLOW__CORE__HOSTNAME_CALLABLE": "include.radar_demo.hostname.worker_hostname"}
    print(f"[bench-memory] CeleryExecutor: api-server on {port}, workers {', '.join(WORKERS)}; logs in {home}", flush=True)
    procs = [start(home / "redis.log", [redis, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                                         "--appendonly", "no"], env)]
    sampler: memory_roles.Sampler | None = None
    try:
        procs += [start(home / f"{c}.log", ["airflow", c, *([] if c != "api-server" else ["--port", str(port)])], env)
                  for c in ("api-server", "scheduler", "dag-processor", "triggerer")]
        procs += [start(home / f"{w}.log", ["airflow", "celery", "worker", "--celery-hostname", f"{w}@%h",
                                            "--skip-serve-logs"], {**env, "RADAR_WORKER_NAME": w}) for w in WORKERS]
        sampler = memory_roles.Sampler([p.pid for p in procs[1:]], args.interval, Backends(server))
        sampler.start()
        run = run_to_end(meta_url, DAG_ID, procs, env)
        wait_for(lambda: _answers(base), "the api-server", 300, procs)
        pages = radar_pages(base, env["RADAR_DATABASE_URL"], token(base, home / "home"))
        return finish("celery", sampler, run, meta_url, pages,
                      f"; {len(fakes['deepseek'].requests)} DeepSeek calls, {len(fakes['sink'].received)} pushes; "
                      f"deadline callback in the triggerer: {callback_ran(home / 'triggerer.log')}")
    finally:
        if sampler is not None:
            sampler._running = False
        stop(procs)


# ------------------------------------------------------------------------------------------------- report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("standalone", "celery", "imports"), action="append",
                        help="run only these parts (repeatable); default all")
    parser.add_argument("--articles", type=int, default=50, help="new articles in the slot (default 50)")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds DeepSeek takes per call (default 0.5)")
    parser.add_argument("--radar-var", action="append", default=[], metavar="NAME=VALUE",
                        help="a radar setting for the radar's runs, e.g. daily_deadline_alert=false (repeatable)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1)")
    parser.add_argument("--processes", action="store_true", help="also list every process of each role but the tasks")
    args = parser.parse_args()
    parts = args.only or ["standalone", "celery", "imports"]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    OUT.mkdir(parents=True, exist_ok=True)
    server = server_url()
    lines: list[str] = []

    def show(title: str, rows: list[str]) -> None:
        block = ["", f"== {title}", *rows]
        lines.extend(block)
        print("\n".join(block), flush=True)

    states: list[str] = []
    if "standalone" in parts:
        bare, radar = standalone("bare", server, args), standalone("radar", server, args)
        states += [bare["run"]["state"], radar["run"]["state"]]
        show("airflow standalone (LocalExecutor): per role, bare Airflow | with the radar (MB)",
             memory_roles.role_table({"bare": bare["sampler"], "radar": radar["sampler"]}, diff=("bare", "radar")))
        show("task processes with the radar, largest instance of each task (MB; bare: its one task's runner)",
             memory_roles.task_table(radar["sampler"], radar["names"], memory_roles.bare_runner(bare["sampler"])))
        if args.processes:
            for label, run in (("bare", bare), ("with the radar", radar)):
                show(f"every process, standalone {label}", memory_roles.process_table(run["sampler"], COMPONENTS))
    if "celery" in parts:
        run = celery(server, args)
        states.append(run["run"]["state"])
        show("CeleryExecutor, 2 workers x concurrency 4, with the radar: per role (MB)",
             memory_roles.role_table({"celery": run["sampler"]}))
        show("task processes under Celery (MB)", memory_roles.task_table(run["sampler"], run["names"]))
        if args.processes:
            show("every process under Celery", memory_roles.process_table(run["sampler"], COMPONENTS))
    if "imports" in parts:
        show("the radar's own code per process, each probe in a fresh interpreter (USS gained at each step)",
             memory_imports.table(memory_imports.measure(os.environ.get("RADAR_TEST_DATABASE_URL"))))
    (OUT / "results.txt").write_text("\n".join(lines) + "\n")
    print(f"\n[bench-memory] PSS: a shared page counted 1/n in each of the n processes sharing it (a role's sum is "
          f"what it costs the machine); USS: the process's own; RSS: shared pages in full. Sampled once a second: "
          f"a process living under a second may be missed. Results in {OUT / 'results.txt'}")
    return 0 if all(state == "success" for state in states) else 1


if __name__ == "__main__":
    sys.exit(main())
