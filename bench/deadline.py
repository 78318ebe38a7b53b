"""When does the 22:00 report go out while everything upstream is hostile?

Runs the daily slot through the real DAG under ``airflow dags test`` against stand-ins on loopback: a WeRSS
that answers one byte a second, a DeepSeek that holds every request open with keep-alive lines for ten
minutes before answering, and a push endpoint that records when the report's message arrived. A few articles
are already stored and waiting for an analysis (as if earlier slots had ingested them), so the analyses and
the digest have real work to cut short. Prints the timeline of the run relative to the slot's start (when
open_slot opened the run record), the report's status and what it lists, and whether the push beat the
deadline (``daily_push_deadline_minutes``, 10 by default).

    make bench-deadline                          # the real figures: about 10 minutes
    make bench-deadline ARGS="--minutes 2 --llm-seconds 120"   # scaled down: about 2 minutes

The market-data source is hostile too (``--market``): ``slow`` answers every recorded call after 60 s (each
answer a named pipe the benchmark fills a minute after it is opened), ``down`` answers none (every answer
unreadable), ``recorded`` is the demo's answers as they are. The report's push never waits for it (the track
record's step, asked for the prices of earlier calls (include/radar_demo/history.py), runs after it, within its
own deadline, track_record_minutes, set to half a minute here).

It uses its own AIRFLOW_HOME (``.local/airflow-bench``) and its own database (``radar_bench_deadline`` on the
radar's PostgreSQL server), both recreated on every run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from include.radar import DAG_ID, store
from include.radar.core import db, loader
from include.radar.core.slots import SHANGHAI, slot_at
from include.radar_demo import history
from include.radar_demo.fakes import FakeDeepSeek, FakeWeRSS, PushSink, serve
from tests.slotrun import answer

REPO = Path(__file__).resolve().parents[1]

BENCH_DB = "radar_bench_deadline"
OUT = REPO / ".local" / "bench-deadline"


def seed_pending(url: str, scheduled: datetime, count: int) -> None:
    """Articles an earlier slot of the day stored and did not get to analyse."""
    with db.connect(url) as conn:
        account = store.articles.upsert_account(conn, "MP_WXS_1", "研究所")
        for i in range(count):
            store.articles.insert_content_item(conn, {
                "external_id": f"bench-{i}", "account_id": account["id"], "mp_id": "MP_WXS_1",
                "title": f"待分析文章{i}", "url": f"https://mp.weixin.qq.com/s/bench{i}",
                "published_at": scheduled - timedelta(hours=i + 1), "raw_html_size": 1000,
                "clean_text": f"正文{i}：某储能龙头四季度订单同比增长，集采放量。", "content_hash": f"bench-{i}",
                "body_status": store.common.BODY_READY, "last_error": None, "slot_run_id": None,
            })


MARKET = REPO / "include" / "radar_demo" / "data" / "market"
MARKET_SECONDS = 60.0


def hostile_market(kind: str, stop: threading.Event) -> Path:
    """A recorded-answers directory with every file the demo's has: named pipes answered ``[]`` a minute after
    each is opened (``slow``), or files no answer can be read from (``down``); the demo's own (``recorded``)."""
    if kind == "recorded":
        return MARKET
    folder = OUT / f"market-{kind}"
    if folder.exists():
        for old in sorted(folder.rglob("*"), reverse=True):
            old.rmdir() if old.is_dir() else old.unlink()
    for source in MARKET.rglob("*.json"):
        target = folder / source.relative_to(MARKET)
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "down":
            target.write_text("not an answer")
            continue
        os.mkfifo(target)
        threading.Thread(target=_answer_slowly, args=(target, stop), daemon=True).start()
    return folder


def _answer_slowly(pipe: Path, stop: threading.Event) -> None:
    while not stop.is_set():
        with pipe.open("w") as answer:  # blocks until the radar opens it to read
            if stop.wait(MARKET_SECONDS):
                return
            answer.write("[]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10, help="daily_push_deadline_minutes (default 10)")
    parser.add_argument("--llm-seconds", type=float, default=600, help="how long DeepSeek holds each call")
    parser.add_argument("--trickle", type=float, default=1.0, help="seconds per byte of every WeRSS answer")
    parser.add_argument("--pending", type=int, default=3, help="articles waiting for an analysis")
    parser.add_argument("--market", choices=("slow", "down", "recorded"), default="slow",
                        help="the market-data source: 60 s per answer, none, or the recorded answers")
    args = parser.parse_args()

    OUT.mkdir(parents=True, exist_ok=True)
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)  # the stand-ins' own request lines
    werss = FakeWeRSS(accounts=[{"id": "MP_WXS_1", "mp_name": "研究所"}], trickle_seconds_per_byte=args.trickle)
    deepseek = FakeDeepSeek(responder=lambda body: answer(80), api_key="sk-bench", delay_seconds=args.llm_seconds)
    arrivals: list[tuple[float, dict[str, Any]]] = []
    lock = threading.Lock()

    def record(message: dict[str, Any]) -> None:
        with lock:
            arrivals.append((time.time(), message))

    stop = threading.Event()
    werss_at, deepseek_at, sink_at = serve(werss.handle), serve(deepseek.handle), serve(PushSink(on_message=record).handle)

    # the most recent 22:00 (Asia/Shanghai) before now, run now: the deadline counts from the run's start
    now = datetime.now(SHANGHAI)
    day = now.date() if now.hour >= 22 else now.date() - timedelta(days=1)
    key = slot_at(day, "22:00")
    url = db.fresh_database(loader.load(use_airflow=False).database_url, BENCH_DB)
    seed_pending(url, key.scheduled_at, args.pending)
    # earlier pushed calls naming listed stocks: the track record's step has prices to ask the source for
    history.insert_calls(url, key.run_date - timedelta(days=key.run_date.weekday() + 14), "http://localhost:8080/radar")
    env = {
        **os.environ,
        "RADAR_DATABASE_URL": url,
        "AIRFLOW_CONN_WERSS_DEFAULT": json.dumps({"conn_type": "http", "host": f"http://{werss_at}",
                                                  "login": "admin", "password": "secret"}),
        "AIRFLOW_CONN_DEEPSEEK_DEFAULT": json.dumps({"conn_type": "http", "host": f"http://{deepseek_at}",
                                                     "password": "sk-bench"}),
        "AIRFLOW_CONN_RADAR_PUSH": json.dumps({"conn_type": "generic", "extra": {"urls": [f"json://{sink_at}/bench"]}}),
        "AIRFLOW_VAR_RADAR_DAILY_PUSH_DEADLINE_MINUTES": str(args.minutes),
        "AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES": str(366 * 24 * 60),  # replayed now: not a late start
        "AIRFLOW_VAR_RADAR_REPORT_BASE_URL": "http://localhost:8080/radar",
        "AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE": "recorded",
        "AIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR": str(hostile_market(args.market, stop)),
        "AIRFLOW_VAR_RADAR_TRACK_RECORD_MINUTES": "0.5",
    }
    print(f"[bench] the {key.run_date} 22:00 slot under `airflow dags test`; WeRSS drips 1 byte per "
          f"{args.trickle:g} s, DeepSeek answers after {args.llm_seconds:g} s, {args.pending} articles pending, the "
          f"market source {args.market}; deadline {args.minutes:g} min", flush=True)
    subprocess.run(["airflow", "dags", "delete", "-y", DAG_ID], env=env, capture_output=True)  # this home only
    log_path = OUT / "dags-test.log"
    started = time.time()
    with log_path.open("w") as log:
        result = subprocess.run(["airflow", "dags", "test", DAG_ID, key.scheduled_at.isoformat()],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    finished = time.time()
    stop.set()

    with db.connect(url) as conn:
        run = conn.execute("SELECT * FROM slot_run WHERE run_date = %s AND slot = '22:00'", (key.run_date,)).fetchone()
        report = store.reports.get_daily_report(conn, key.run_date)
        attempts = conn.execute("SELECT outcome, count(*) AS n FROM analysis_attempt GROUP BY outcome").fetchall()
    if run is None:
        print(f"[bench] the slot never opened (exit {result.returncode}); see {log_path}")
        return 1
    start = run["started_at"].timestamp()
    deadline = run["deadline_at"].timestamp() if run["deadline_at"] else start + args.minutes * 60

    def at(moment: float) -> str:
        return f"{moment - start:+7.1f} s"

    print(f"[bench] slot opened            {at(start)}   (airflow dags test started {at(started)})")
    print(f"[bench] report due             {at(deadline)}")
    for when, message in arrivals:
        print(f"[bench] push arrived           {at(when)}   {message.get('title')}")
        for line in str(message.get("message", "")).splitlines()[:3]:
            print(f"                                          {line}")
    print(f"[bench] dags test finished     {at(finished)}   (exit {result.returncode}; log: {log_path})")
    if report:
        status = {1: "ok", 2: "failed", 3: "partial"}.get(report["status"], str(report["status"]))
        pending = len((report["digest_json"] or {}).get("pending") or [])
        print(f"[bench] report: {status}, digest {report['digest_json'].get('source')}, {pending} pending listed; "
              f"reasons: {' | '.join((report['error'] or '').splitlines())[:300]}")
    outcomes = ", ".join(f"{a['outcome']} {a['n']}" for a in attempts) or "none"
    print(f"[bench] analysis attempts: {outcomes}; "
          f"slot status {run['status']} ({run['error'] or 'no error'})".replace("\n", " | ")[:400])
    market = [w["message"] for w in run["warnings"] or [] if isinstance(w, dict) and w.get("step") == "track_record"]
    print(f"[bench] market source {args.market}: {'; '.join(market)[:300] or 'no warning from the track record'}")
    daily = [when for when, message in arrivals if "日报" in str(message.get("title"))]
    on_time = bool(daily) and daily[0] <= deadline
    print(f"[bench] verdict: the report push went out {daily[0] - start:.1f} s after the slot started, "
          f"{deadline - daily[0]:.1f} s before its deadline" if on_time else
          "[bench] verdict: the report push did NOT go out before its deadline")
    return 0 if on_time else 1


if __name__ == "__main__":
    sys.exit(main())
