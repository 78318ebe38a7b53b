"""Time the report pages on a year of data: is every page under 50 ms (p95)?

Creates a throw-away database on the server named by ``RADAR_TEST_DATABASE_URL`` (or the embedded
PostgreSQL in ``.local/pgdata-bench``), migrates it, bulk-loads a year of radar data with COPY
(365 days x 5 slots, ~10 articles a day with analyses, opportunities, failures, daily reports and
notifications), then requests each page through FastAPI's TestClient with authentication overridden and
prints median / p95 / max in milliseconds. ``--explain`` also prints the plans of the pages' main queries.

    RADAR_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python scripts/bench_pages.py

Runs in well under two minutes; the database is dropped at the end unless ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from include.radar import db, store  # noqa: E402
from include.radar.settings import load_settings  # noqa: E402
from include.radar.slots import SHANGHAI, slot_at  # noqa: E402

SLOTS = ("07:00", "12:00", "14:00", "18:00", "22:00")
# a common word, a rare pair, two words, a word with filters, the second page of a common word
SEARCHES = ("q=储能", "q=国产替代", "q=创新药+出海", "q=半导体&band=60&from=2025-12-01", "q=算力&page=2")
ACCOUNTS = 20
ARTICLES_PER_SLOT = 2  # ~10 a day
TYPES = ("stock", "sector", "fund", "commodity", "macro", "bond")
WORDS = "储能 电芯 集采 券商 并购 重组 光伏 硅料 半导体 设备 国产替代 消费 白酒 医药 创新药 出海 汽车 智驾 机器人 算力".split()


# ------------------------------------------------------------------------------------------------ database


def server_url() -> str:
    return os.environ.get("RADAR_TEST_DATABASE_URL") or db.embedded_url(REPO / ".local" / "pgdata-bench")


@contextmanager
def scratch_database(keep: bool) -> Iterator[str]:
    """A new, migrated database on the server; dropped afterwards unless ``keep``."""
    server = server_url()
    name = f"radar_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(server)
    info["dbname"] = name
    url = psycopg.conninfo.make_conninfo(**info)
    try:
        db.migrate(url)
        yield url
    finally:
        if keep:
            print(f"kept database {name}")
        else:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _text(rng: random.Random, words: int) -> str:
    return "".join(rng.choice(WORDS) for _ in range(words))


def seed(url: str, today: date, days: int, rng: random.Random) -> dict[str, Any]:
    """Bulk-load ``days`` days ending ``today`` with explicit ids, then fix the sequences and ANALYZE."""
    counts = dict.fromkeys(
        ("slot_run", "content_item", "analysis_result", "opportunity", "daily_report", "notification_log"), 0
    )
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        with cur.copy(
            "COPY wechat_account (id, mp_id, name, last_article_at, last_checked_at, consecutive_failures, "
            "backoff_until, last_error) FROM STDIN"
        ) as copy:
            now = datetime.now(UTC)
            for i in range(1, ACCOUNTS + 1):
                failing = i % 7 == 0
                copy.write_row(
                    (
                        i,
                        f"mp_{i}",
                        f"公众号{i:02d}",
                        now - timedelta(hours=i),
                        now,
                        3 if failing else 0,
                        now + timedelta(hours=1) if failing else None,
                        "HTTP 429 from WeRSS" if failing else None,
                    )
                )

        slot_rows, items, analyses, opps, reports, notes = [], [], [], [], [], []
        item_id = analysis_id = opp_id = note_id = 0
        first_day = today - timedelta(days=days - 1)
        for offset in range(days):
            day = first_day + timedelta(days=offset)
            day_scores: list[tuple[int, int]] = []
            failed_today = 0
            for slot in SLOTS:
                key = slot_at(day, slot)
                run_id = len(slot_rows) + 1
                failed_slot = rng.random() < 0.03
                slot_rows.append(
                    (
                        run_id,
                        day,
                        slot,
                        2 if failed_slot else 1,
                        key.scheduled_at,
                        "opportunity_radar",
                        f"scheduled__{key.scheduled_at.isoformat()}",
                        ARTICLES_PER_SLOT,
                        "ingest: WeRSS 503" if failed_slot else None,
                        key.scheduled_at + timedelta(minutes=4),
                    )
                )
                for _ in range(ARTICLES_PER_SLOT):
                    item_id += 1
                    published = key.scheduled_at - timedelta(minutes=rng.randint(5, 600))
                    failed = rng.random() < 0.05
                    items.append(
                        (
                            item_id,
                            f"ext-{item_id}",
                            rng.randint(1, ACCOUNTS),
                            f"mp_{item_id % ACCOUNTS}",
                            _text(rng, 6) + f"（{item_id}）",
                            f"https://mp.weixin.qq.com/s/{item_id}",
                            published,
                            _text(rng, 800),
                            f"h{item_id}",
                            3 if failed else 2,
                            "DeepSeek JSON invalid" if failed else None,
                            run_id,
                            run_id,
                            3 if failed else 1,
                        )
                    )
                    if failed:
                        failed_today += 1
                        continue
                    analysis_id += 1
                    score = min(100, max(0, int(rng.gauss(50, 18))))
                    day_scores.append((score, analysis_id))
                    n_opps = 0 if score < 60 else rng.randint(1, 2)
                    result = {"score": score, "summary": _text(rng, 20), "opportunities": []}
                    analyses.append(
                        (
                            analysis_id,
                            item_id,
                            run_id,
                            score,
                            score >= 60,
                            rng.choice(TYPES) if n_opps else "none",
                            _text(rng, 25),
                            Jsonb(result),
                            "deepseek-v4-pro",
                            "analysis/v1",
                            5000,
                            800,
                            2000,
                            4000,
                            1000,
                            0.0012,
                            21000,
                            1,
                        )
                    )
                    for position in range(n_opps):
                        opp_id += 1
                        opps.append(
                            (
                                opp_id,
                                analysis_id,
                                position,
                                _text(rng, 3),
                                rng.choice(TYPES),
                                Jsonb([_text(rng, 1), _text(rng, 1)]),
                                "bullish",
                                "1-3个月",
                                _text(rng, 8),
                                Jsonb([_text(rng, 6)]),
                                Jsonb([_text(rng, 10), _text(rng, 10)]),
                                0.6,
                            )
                        )
            day_scores.sort(reverse=True)
            hot = [a for s, a in day_scores if s >= 60]
            stats = {
                "analysed": len(day_scores),
                "opportunities": len(hot),
                "failed": failed_today,
                "max_score": day_scores[0][0] if day_scores else None,
            }
            failed_report = rng.random() < 0.03
            digest = "## 今日要点\n" + "\n".join(f"- {_text(rng, 12)}" for _ in range(10))
            reports.append(
                (
                    day,
                    2 if failed_report else 1,
                    digest,
                    Jsonb(
                        {
                            "top_opportunities": [{"analysis_id": a, "title": "t", "reason": "r"} for a in hot[:3]],
                            "watchlist": [_text(rng, 2) for _ in range(4)],
                        }
                    ),
                    list(SLOTS),
                    Jsonb(stats),
                    "digest: LLM exhausted" if failed_report else None,
                )
            )
            for channel in ("bark://api.day.app", "wecom://qyapi.weixin.qq.com"):
                note_id += 1
                ok = rng.random() > 0.02
                notes.append(
                    (
                        note_id,
                        f"daily-{day}-{channel}",
                        day,
                        "22:00",
                        "daily",
                        "https://x/daily",
                        channel,
                        1 if ok else 2,
                        None if ok else "HTTP 500",
                    )
                )
            if hot:
                note_id += 1
                notes.append(
                    (
                        note_id,
                        f"opp-{day}",
                        day,
                        "12:00",
                        "opportunity",
                        "https://x/analysis",
                        "bark://api.day.app",
                        1,
                        None,
                    )
                )

        with cur.copy(
            "COPY slot_run (id, run_date, slot, status, scheduled_at, dag_id, dag_run_id, new_count, error, "
            "finished_at) FROM STDIN"
        ) as copy:
            for row in slot_rows:
                copy.write_row(row)
        with cur.copy(
            "COPY content_item (id, external_id, account_id, mp_id, title, url, published_at, clean_text, "
            "content_hash, analyzed_status, last_error, first_slot_run_id, last_slot_run_id, attempts) "
            "FROM STDIN"
        ) as copy:
            for row in items:
                copy.write_row(row)
        with cur.copy(
            "COPY analysis_result (id, content_item_id, slot_run_id, score, has_opportunity, top_type, summary, "
            "result_json, model, prompt_version, prompt_tokens, completion_tokens, reasoning_tokens, "
            "cache_hit_tokens, cache_miss_tokens, cost, latency_ms, llm_calls) FROM STDIN"
        ) as copy:
            for row in analyses:
                copy.write_row(row)
        with cur.copy(
            "COPY opportunity (id, analysis_result_id, position, name, type, targets, direction, horizon, "
            "catalyst, risks, evidence, confidence) FROM STDIN"
        ) as copy:
            for row in opps:
                copy.write_row(row)
        with cur.copy(
            "COPY daily_report (report_date, status, digest_md, digest_json, slots_done, stats, error) FROM STDIN"
        ) as copy:
            for row in reports:
                copy.write_row(row)
        with cur.copy(
            "COPY notification_log (id, msg_uuid, report_date, slot, push_type, target_url, channel, status, "
            "error) FROM STDIN"
        ) as copy:
            for row in notes:
                copy.write_row(row)
        # slot_run analysed/opportunity/failed counts, as close_slot_run would have set them
        cur.execute("""
            UPDATE slot_run s SET
                analysed_count = (SELECT count(*) FROM analysis_result a WHERE a.slot_run_id = s.id),
                opportunity_count = (SELECT count(*) FROM analysis_result a WHERE a.slot_run_id = s.id AND a.score >= 60),
                failed_count = (SELECT count(*) FROM content_item c WHERE c.last_slot_run_id = s.id AND c.analyzed_status = 3)
        """)
        for table in (
            "wechat_account",
            "slot_run",
            "content_item",
            "analysis_result",
            "opportunity",
            "daily_report",
            "notification_log",
        ):
            cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        conn.commit()
        conn.autocommit = True
        cur.execute("VACUUM ANALYZE")
        counts.update(
            slot_run=len(slot_rows),
            content_item=len(items),
            analysis_result=len(analyses),
            opportunity=len(opps),
            daily_report=len(reports),
            notification_log=len(notes),
        )
        busiest = max(analyses, key=lambda a: (a[3], a[0]))  # a high-scoring analysis, with opportunities
    return {"counts": counts, "analysis_id": busiest[0]}


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
        "recent_days (overview)": ("store.recent_days", (day, 14, 60)),
        "day_analyses (daily)": ("store.day_analyses", (day,)),
        "day_failures (daily)": ("store.day_failures", (day,)),
        "get_analysis (analysis)": ("store.get_analysis", (analysis_id,)),
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
    with scratch_database(args.keep) as url:
        t0 = time.perf_counter()
        seeded = seed(url, today, args.days, random.Random(42))
        print(
            f"seeded in {time.perf_counter() - t0:.1f} s: " + ", ".join(f"{k} {v}" for k, v in seeded["counts"].items())
        )
        t0 = time.perf_counter()
        with db.connect(url) as conn:  # the search lexemes, as `cli migrate` writes them for older rows
            indexed = store.index_missing(conn, batch=1000)
        print(f"search: {indexed} articles indexed in {time.perf_counter() - t0:.1f} s (jieba + character pairs)")
        with psycopg.connect(url, autocommit=True) as conn:  # a reader who votes on one analysis in ten
            conn.execute("INSERT INTO feedback (analysis_id, verdict, via, updated_at) "
                         "SELECT id, (ARRAY['up', 'down', 'knew'])[1 + id % 3], 'bench', created_at "
                         "FROM analysis_result WHERE id % 10 = 0")
        day = today - timedelta(days=1)
        pages = {
            "overview /": "/",
            f"daily /daily/{day}": f"/daily/{day}",
            f"analysis /analysis/{seeded['analysis_id']}": f"/analysis/{seeded['analysis_id']}",
            "profile /profile": "/profile",
            "entity /entity/储能": "/entity/储能",  # one of 20 targets: ~150 analyses name it
            "trends /trends": "/trends",
            "weekly /weekly/<monday>": f"/weekly/{day - timedelta(days=day.weekday())}",
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
