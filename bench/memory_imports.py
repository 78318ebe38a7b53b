"""What the radar's own code adds to each Airflow process, measured in isolation (`make bench-memory`, and
``--only imports``): one fresh interpreter per probe, which first loads what that Airflow process has loaded
anyway (its baseline), then does what the radar makes the process do, step by step, printing the USS the
process gained at each step (USS: the memory that is the process's alone) and the heavy libraries it loaded.

- **dag-processor**: parsing the bare one-task DAG is the baseline; then parsing ``dags/opportunity_radar.py``
  and loading the plugin (``plugins/radar_plugin.py``).
- **api-server**: Airflow's FastAPI app and security module are the baseline; then the plugin, the report app
  built on its first request, every page rendered once (a month of data from include/radar_demo/year.py, read
  through a signed link as a pushed one is; the profile as an Airflow user) and a search (the query cutter).
- **task process**, one probe per step module: the task runner and the DAG file parsed are the baseline (every
  task process has them); then the step module loaded by name (``steps.load``), and its lazy heavy part
  exercised: ingest cleans a WeChat page and cuts its lexemes (bs4, rjieba's dictionary), analyse makes its
  DeepSeek client (openai), summarise computes the TF-IDF of grouping (scipy), the push steps send once
  (apprise), track_record builds the configured market source (akshare only when it is the source).
- **triggerer**: the trigger runner's modules are the baseline; then the Deadline Alert's callback, imported
  by name as the triggerer does and run on a daily run's context.

    python -m bench.memory_imports            # every probe, a table
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

MB = 2**20
# what is worth naming when a step loads it
HEAVY = ("bs4", "lxml", "jieba", "rjieba", "openai", "apprise", "numpy", "scipy", "sklearn", "pandas", "akshare",
         "fastapi", "jinja2", "markdown", "re2", "httpx", "pydantic", "psycopg", "include.radar.web.app")
# step module -> the step function that loads it (include/radar/steps/__init__.py)
STEP_FUNCS = {"open_slot": "open_slot", "ingest": "ingest", "select_articles": "select_articles",
              "analyse": "analyse", "summarise": "summarise", "push_opportunity": "push_opportunity",
              "daily_report": "build_daily_report", "weekly_summary": "weekly_summary", "track_record": "track_record",
              "retention": "retention", "close_slot": "close_slot"}
BARE_DAG = '''
import time
from datetime import datetime
from airflow.sdk import dag, task

@dag(dag_id="bare", schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def bare():
    @task
    def hello() -> int:
        time.sleep(3)  # long enough for a sampler that looks once a second to see its process
        return 1

    hello()

bare()
'''


# --------------------------------------------------------------------------------------------- in the probe


class Steps:
    """USS before/after each step of a probe, printed as one JSON line each."""

    def __init__(self) -> None:
        import psutil

        self.proc = psutil.Process()
        self.modules = set(sys.modules)
        self.uss = self.proc.memory_full_info().uss

    def __call__(self, what: str, func: Any = None) -> Any:
        started = time.perf_counter()
        result = func() if func else None
        seconds = time.perf_counter() - started
        uss = self.proc.memory_full_info().uss
        new = set(sys.modules) - self.modules
        heavy = sorted(h for h in HEAVY if h in new)
        print(json.dumps({"step": what, "uss": uss - self.uss, "seconds": seconds, "loaded": heavy,
                          "modules": len(new)}, ensure_ascii=False), flush=True)
        self.uss, self.modules = uss, set(sys.modules)
        return result


def parse(path: Path) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"probe_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def bare_dag() -> Path:
    path = REPO / ".local" / "bench-memory" / "bare_dag.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(BARE_DAG)
    return path


def probe_dag_processor(_: dict[str, Any]) -> None:
    import airflow.dag_processing.processor
    import airflow.sdk  # noqa: F401

    parse(bare_dag())
    step = Steps()
    step("parse dags/opportunity_radar.py", lambda: parse(REPO / "dags" / "opportunity_radar.py"))
    step("import plugins/radar_plugin.py", lambda: parse(REPO / "plugins" / "radar_plugin.py"))


def probe_api_server(args: dict[str, Any]) -> None:
    import airflow.api_fastapi.app
    import airflow.api_fastapi.core_api.security  # noqa: F401
    from airflow.models import import_all_models
    from fastapi.testclient import TestClient

    from include.radar.core import signing

    import_all_models()  # what an api-server has done before it serves anything
    step = Steps()
    plugin = step("import plugins/radar_plugin.py", lambda: parse(REPO / "plugins" / "radar_plugin.py"))
    lazy = plugin.OpportunityRadarPlugin.fastapi_apps[0]["app"]
    app = step("build the report app (first request)", lambda: lazy.app)
    from airflow.api_fastapi.core_api.security import get_user

    from include.radar.web.auth import may_edit_radar, may_read_radar

    client = TestClient(lazy)
    step("GET /static/icon.svg (no database, no template)", lambda: client.get("/static/icon.svg"))
    secret = os.environ["AIRFLOW_VAR_RADAR_LINK_SECRET"]
    for path in args["pages"]:
        route, _, query = path.partition("?")
        if route == "/profile":  # personal: an Airflow user, never a link
            app.dependency_overrides[get_user] = lambda: {"username": "bench"}
            app.dependency_overrides[may_read_radar] = app.dependency_overrides[may_edit_radar] = lambda _u: True
            url = path
        else:
            app.dependency_overrides.clear()
            sig = signing.sign(route, secret, signing_now(), 1)
            url = f"{path}{'&' if query else '?'}exp={sig['exp']}&sig={sig['sig']}"

        def get(url: str = url) -> None:
            response = client.get(url)
            if response.status_code != 200:
                raise RuntimeError(f"{url}: {response.status_code} {response.text[:300]}")

        step(f"GET {path}", get)


def signing_now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def probe_task(args: dict[str, Any]) -> None:
    import airflow.sdk.execution_time.task_runner  # noqa: F401

    parse(REPO / "dags" / "opportunity_radar.py")  # every task process parses the DAG file
    from include.radar import steps

    module = args["step"]
    step = Steps()
    step(f"load steps.{module}", lambda: steps.load(STEP_FUNCS[module]))
    exercise = EXERCISES.get(module)
    if exercise:
        step(exercise[0], exercise[1])


def _ingest() -> None:
    from include.radar.collect import cleaning
    from include.radar.core import search
    from include.radar_demo import wechat_pages

    page = wechat_pages.page(1)
    cleaned = cleaning.clean_html(page.html)
    search.lexemes(page.title, cleaned.text)


def _analyse() -> None:
    from include.radar.analysis.llm import LLMClient

    LLMClient(base_url="http://127.0.0.1:9", api_key="sk-probe", model="deepseek-v4-pro")


def _summarise() -> None:
    from datetime import UTC, datetime

    from include.radar.pushes import events
    from include.radar_demo import wechat_pages

    pages = [wechat_pages.page(i) for i in range(20)]
    docs = [events.Doc(key=i, account=f"a{i % 3}", published_at=datetime.now(UTC), title=p.title,
                       text=" ".join(p.facts)) for i, p in enumerate(pages)]
    events.group(docs)


def _push() -> None:
    from include.radar.pushes import push

    push.send_one(push.channels_from(["json://127.0.0.1:9/push"])[0], "probe", "probe")


def _track_record() -> None:
    from include.radar.core.settings import load_settings
    from include.radar.report import track_record

    track_record.source_from(load_settings(use_airflow=False))()


EXERCISES = {
    "ingest": ("clean a WeChat page + its lexemes (rjieba)", _ingest),
    "analyse": ("make the DeepSeek client (openai)", _analyse),
    "summarise": ("group 20 articles (TF-IDF, scipy)", _summarise),
    "push_opportunity": ("send once (apprise)", _push),
    "daily_report": ("send once (apprise)", _push),
    "weekly_summary": ("send once (apprise)", _push),
    "track_record": ("build the market source (as configured)", _track_record),
}


def probe_triggerer(_: dict[str, Any]) -> None:
    import asyncio

    import airflow.jobs.triggerer_job_runner
    import airflow.triggers.callback  # noqa: F401
    from airflow.sdk._shared.module_loading import import_string

    step = Steps()
    callback = step("import the Deadline Alert callback", lambda: import_string(
        "include.radar.seam.callbacks.daily_deadline_missed"))
    from datetime import UTC, datetime, timedelta

    at = (datetime.now(UTC) - timedelta(days=1)).replace(hour=14, minute=0, second=0, microsecond=0)  # 22:00 in Shanghai
    context = {"dag_run": {"logical_date": at.isoformat(), "run_type": "scheduled", "dag_run_id": f"scheduled__{at}"}}
    step("run it on yesterday's daily run", lambda: asyncio.run(callback(context=context)))


PROBES = {"dag-processor": probe_dag_processor, "api-server": probe_api_server, "task": probe_task,
          "triggerer": probe_triggerer}


# ------------------------------------------------------------------------------------------- in the parent


def run_probe(name: str, args: dict[str, Any], env: dict[str, str]) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, __file__, "--probe", name, json.dumps(args)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0:
        raise RuntimeError(f"probe {name} {args} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return rows


def seed_pages(url: str) -> list[str]:
    """A month of data in ``url`` (year.py), indexed for search; the pages to request, one of each."""
    import random
    from datetime import UTC, datetime, timedelta

    from include.radar import store
    from include.radar.core import db
    from include.radar.core.slots import SHANGHAI
    from include.radar_demo import year

    today = datetime.now(UTC).astimezone(SHANGHAI).date()
    seeded = year.seed(url, today, 30, random.Random(42))
    with db.connect(url) as conn:
        store.searching.index_missing(conn, batch=1000)
    day = today - timedelta(days=1)
    return ["/", f"/daily/{day}", f"/analysis/{seeded['analysis_id']}", f"/weekly/{day - timedelta(days=day.weekday())}",
            "/entity/储能", "/trends", "/record", "/profile", "/search?q=储能"]


def measure(server_url: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Every probe, each in a fresh interpreter: (role, step row) in order."""
    from include.radar_demo import year

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_VAR_")}
    env.update({"AIRFLOW_VAR_RADAR_LINK_SECRET": "bench-memory-link-secret-0123456789",
                "AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE": "recorded",
                "AIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR": str(REPO / "include" / "radar_demo" / "data" / "market"),
                "PYTHONPATH": str(REPO)})
    rows: list[tuple[str, dict[str, Any]]] = []
    with year.scratch_database(server_url or year.bench_server_url()) as url:
        env["RADAR_DATABASE_URL"] = url
        pages = seed_pages(url)
        rows += [("dag-processor", r) for r in run_probe("dag-processor", {}, env)]
        rows += [("api-server", r) for r in run_probe("api-server", {"pages": pages}, env)]
        for module in STEP_FUNCS:
            rows += [(f"task: {module}", r) for r in run_probe("task", {"step": module}, env)]
        rows += [("triggerer", r) for r in run_probe("triggerer", {}, env)]
    return rows


def table(rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    lines = [f"{'process':<24} {'what the radar makes it do':<44} {'USS +MB':>7} {'s':>5}  heavy modules it loaded"]
    for role, r in rows:
        lines.append(f"{role:<24} {r['step'][:44]:<44} {r['uss'] / MB:>7.1f} {r['seconds']:>5.2f}  "
                     + (", ".join(r["loaded"]) or "-"))
    return lines


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--probe":
        PROBES[sys.argv[2]](json.loads(sys.argv[3]) if len(sys.argv) > 3 else {})
        return 0
    for line in table(measure()):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
