"""Time the report pages on a year of data (a year of picks followed by the track record too): is every page
under 50 ms (p95)?

Creates a throw-away database on the server named by ``RADAR_TEST_DATABASE_URL`` (or the embedded
PostgreSQL in ``.local/pgdata-bench``), migrates it, bulk-loads a year of radar data with COPY
(365 days x 5 slots, ~10 articles a day with analyses, opportunities, failures, daily reports and
notifications), then requests each page through FastAPI's TestClient with authentication overridden and
prints median / p95 / max in milliseconds. ``--explain`` also prints the plans of the pages' main queries.

    RADAR_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python -m bench.pages

Runs in well under two minutes; the database is dropped at the end unless ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from include.radar import store
from include.radar.core import db
from include.radar.core.settings import load_settings
from include.radar.core.slots import SHANGHAI
from include.radar_demo import synthetic_market, year

REPO = Path(__file__).resolve().parents[1]

# a common word, a rare pair, two words, a word with filters, the second page of a common word
SEARCHES = ("q=储能", "q=国产替代", "q=创新药+出海", "q=半导体&band=60&from=2025-12-01", "q=算力&page=2")


# ---------------------------------------------------------------------------------------------------- timing


def time_pages(url: str, pages: dict[str, str], runs: int) -> dict[str, list[float]]:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from include.radar.web.app import create_app
    from include.radar.web.auth import may_edit_radar, may_read_radar

    settings = load_settings({}.get, use_airflow=False)
    app = create_app(lambda: settings, url)
    app.dependency_overrides[get_user] = lambda: {"username": "bench"}
    app.dependency_overrides[may_read_radar] = lambda _user: True  # Airflow's role check, as in the tests
    app.dependency_overrides[may_edit_radar] = lambda _user: True  # the owner, who may save the profile
    timings: dict[str, list[float]] = {}
    with TestClient(app) as client:
        for name, path in pages.items():
            for _ in range(5):  # warm-up: template compilation, first connection, imports
                assert client.get(path).status_code == 200, path
            samples = []
            for _ in range(runs):
                start = time.perf_counter()
                response = client.get(path)
                samples.append((time.perf_counter() - start) * 1000)
                assert response.status_code == 200, (path, response.status_code)
            timings[name] = samples
    return timings


def explain(url: str, day: date, analysis_id: int) -> None:
    queries = {
        "recent_days (overview)": ("store.reports.recent_days", (day, 14, 60)),
        "day_analyses (daily)": ("store.analyses.day_analyses", (day,)),
        "day_failures (daily)": ("store.analyses.day_failures", (day,)),
        "get_analysis (analysis)": ("store.analyses.get_analysis", (analysis_id,)),
    }
    from include.radar import store

    class Explaining:
        """A connection stand-in that runs EXPLAIN ANALYZE instead of the query."""

        def __init__(self, conn: psycopg.Connection) -> None:
            self.conn = conn

        def execute(self, sql: str, params: Any = None) -> Any:
            plan = self.conn.execute("EXPLAIN (ANALYZE, COSTS OFF, BUFFERS OFF) " + sql, params).fetchall()
            return type("Plan", (), {"fetchone": lambda _: plan, "fetchall": lambda _: plan})()

    with db.connect(url) as conn:
        for label, (func, args) in queries.items():
            plan = [r["QUERY PLAN"] for r in getattr(store, func.split(".")[1])(Explaining(conn), *args)]
            seq = [line.strip() for line in plan if "Seq Scan" in line]
            print(f"\n-- {label}: {plan[-1].strip()}")
            for line in plan:
                print("   " + line)
            if seq:
                print(f"   ({len(seq)} sequential scan(s))")


def main() -> int:
    for noisy in ("httpx", "httpx2"):  # one INFO line per request would bury the figures
        logging.getLogger(noisy).setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--explain", action="store_true", help="print the plans of the main queries")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()

    started = time.perf_counter()
    today = datetime.now(UTC).astimezone(SHANGHAI).date()
    with year.scratch_database(year.bench_server_url(), keep=args.keep) as url:
        t0 = time.perf_counter()
        seeded = year.seed(url, today, args.days, random.Random(42))
        print(
            f"seeded in {time.perf_counter() - t0:.1f} s: " + ", ".join(f"{k} {v}" for k, v in seeded["counts"].items())
        )
        t0 = time.perf_counter()
        with db.connect(url) as conn:  # the search lexemes, as `cli migrate` writes them for older rows
            indexed = store.searching.index_missing(conn, batch=1000)
        print(f"search: {indexed} articles indexed in {time.perf_counter() - t0:.1f} s (jieba + character pairs)")
        t0 = time.perf_counter()  # a year of picks through the real track-record step (synthetic prices)
        picks = synthetic_market.make_picks(url, 300)
        synthetic_market.follow(url, synthetic_market.SyntheticCaller(),
                                datetime.combine(today, datetime.min.time(), SHANGHAI).replace(hour=22))
        print(f"track record: {picks} picks followed in {time.perf_counter() - t0:.1f} s")
        day = today - timedelta(days=1)
        pages = {
            "overview /": "/",
            f"daily /daily/{day}": f"/daily/{day}",
            f"analysis /analysis/{seeded['analysis_id']}": f"/analysis/{seeded['analysis_id']}",
            "profile /profile": "/profile",
            "entity /entity/储能": "/entity/储能",  # one of 20 targets: ~150 analyses name it
            "trends /trends": "/trends",
            "weekly /weekly/<monday>": f"/weekly/{day - timedelta(days=day.weekday())}",
            "record /record": "/record",
            "record /record?band=80&h=20": "/record?band=80&h=20",
            "record /record?account=…&page=2": "/record?account=公众号03&page=2",
        }
        searches = {f"search {q}": f"/search?{q}" for q in SEARCHES}
        timings = time_pages(url, {**pages, **searches}, args.runs)
        print(f"\n{'page':<34} {'median':>8} {'p95':>8} {'max':>8}   ({args.runs} requests each, ms)")
        worst = worst_search = 0.0
        for name, samples in timings.items():
            ordered = sorted(samples)
            p95 = ordered[max(0, int(round(0.95 * len(ordered))) - 1)]
            if name.startswith("search "):
                worst_search = max(worst_search, p95)
            else:
                worst = max(worst, p95)
            print(f"{name:<34} {statistics.median(ordered):>8.1f} {p95:>8.1f} {ordered[-1]:>8.1f}")
        print(f"\nsearch over a year ({seeded['counts']['content_item']} articles): worst p95 {worst_search:.1f} ms "
              f"({'OK' if worst_search < 200 else 'TOO SLOW'}: goal 200 ms)")
        if args.explain:
            explain(url, day, seeded["analysis_id"])
    print(
        f"\ntotal {time.perf_counter() - started:.1f} s; worst p95 {worst:.1f} ms "
        f"({'OK' if worst < 50 else 'TOO SLOW'}: budget 50 ms)"
    )
    return 0 if worst < 50 and worst_search < 200 else 1


if __name__ == "__main__":
    raise SystemExit(main())
