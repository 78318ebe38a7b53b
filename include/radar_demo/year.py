"""A year of radar data, bulk-loaded, on the schema of today or of an earlier release.

What the page benchmark (``make bench``), the migration benchmark (``make bench-migrate``) and the migration
test start from: ``days`` days of five slots, ~10 articles a day from 20 accounts, their analyses (5 % failed),
opportunities, daily reports, notifications and, where the schema has them, the reader's verdicts on one
analysis in ten. Rows are written with COPY and explicit ids, as a year of slots would have left them.

``fingerprint`` says what a database holds, table by table (row count and a digest of every value), so that
a migration or a restore can be shown to have kept every row.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from include.radar.core import db
from include.radar.core.slots import slot_at

REPO = Path(__file__).resolve().parents[2]
# The last migration of the previous release (what this round of work started from): the migration test and
# `make bench-migrate` seed a year on its schema and migrate to whatever came after it.
PREVIOUS_RELEASE = "0009_weekly.sql"
# The oldest schema the seeder can write (analysis_result.cost is 0003's)
OLDEST_SEEDABLE = "0003_operations.sql"

SLOTS = ("07:00", "12:00", "14:00", "18:00", "22:00")
ACCOUNTS = 20
ARTICLES_PER_SLOT = 2  # ~10 a day
TYPES = ("stock", "sector", "fund", "commodity", "macro", "bond")
WORDS = "储能 电芯 集采 券商 并购 重组 光伏 硅料 半导体 设备 国产替代 消费 白酒 医药 创新药 出海 汽车 智驾 机器人 算力".split()


def bench_server_url() -> str:
    """The benchmarks' server: ``RADAR_TEST_DATABASE_URL``, else an embedded PostgreSQL of their own."""
    return os.environ.get("RADAR_TEST_DATABASE_URL") or db.embedded_url(REPO / ".local" / "pgdata-bench")


def standins_environment(url: str, werss_at: str, deepseek_at: str, sink_at: str) -> dict[str, str]:
    """What a benchmark's slots read to reach its database and its stand-ins on loopback (WeRSS as bench /
    bench-password, DeepSeek as sk-bench, one JSON push sink), with recorded market data."""
    return {
        "RADAR_DATABASE_URL": url,
        "AIRFLOW_CONN_WERSS_DEFAULT": json.dumps({"conn_type": "http", "host": f"http://{werss_at}",
                                                  "login": "bench", "password": "bench-password"}),
        "AIRFLOW_CONN_DEEPSEEK_DEFAULT": json.dumps({"conn_type": "http", "host": f"http://{deepseek_at}",
                                                     "password": "sk-bench", "extra": {"backoff_seconds": 0}}),
        "AIRFLOW_CONN_RADAR_PUSH": json.dumps({"conn_type": "generic", "extra": {"urls": [f"json://{sink_at}/b"]}}),
        "AIRFLOW_VAR_RADAR_LINK_SECRET": "bench-link-secret-0123456789abcdef",
        "AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE": "recorded",
        "AIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR": str(REPO / "include" / "radar_demo" / "data" / "market"),
    }


@contextmanager
def scratch_database(server: str, *, keep: bool = False, until: str | None = None) -> Iterator[str]:
    """A new database on ``server``, migrated (to ``until`` when given: an earlier release's schema);
    dropped afterwards unless ``keep``."""
    name = f"radar_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(server)
    info["dbname"] = name
    url = psycopg.conninfo.make_conninfo(**info)
    try:
        db.migrate(url, until=until)
        yield url
    finally:
        if keep:
            print(f"kept database {name}")
        else:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _text(rng: random.Random, words: int) -> str:
    return "".join(rng.choice(WORDS) for _ in range(words))


# the columns each table is loaded with, in the order of its rows' values
COLUMNS = {
    "wechat_account": "id, mp_id, name, last_article_at, last_checked_at, consecutive_failures, backoff_until, "
                      "last_error",
    "slot_run": "id, run_date, slot, status, scheduled_at, dag_id, dag_run_id, new_count, error, finished_at",
    "content_item": "id, external_id, account_id, mp_id, title, url, published_at, clean_text, content_hash, "
                    "analyzed_status, last_error, first_slot_run_id, last_slot_run_id, attempts",
    "analysis_result": "id, content_item_id, slot_run_id, score, has_opportunity, top_type, summary, result_json, "
                       "model, prompt_version, prompt_tokens, completion_tokens, reasoning_tokens, cache_hit_tokens, "
                       "cache_miss_tokens, cost, latency_ms, llm_calls",
    "opportunity": "id, analysis_result_id, position, name, type, targets, direction, horizon, catalyst, risks, "
                   "evidence, confidence",
    "daily_report": "report_date, status, digest_md, digest_json, slots_done, stats, error",
    "notification_log": "id, msg_uuid, report_date, slot, push_type, target_url, channel, status, error",
}


@dataclass
class Rows:
    """The rows of a year's slots, table by table, each table's ids 1, 2, 3... in the order they were made."""

    slot_run: list[tuple] = field(default_factory=list)
    content_item: list[tuple] = field(default_factory=list)
    analysis_result: list[tuple] = field(default_factory=list)
    opportunity: list[tuple] = field(default_factory=list)
    daily_report: list[tuple] = field(default_factory=list)
    notification_log: list[tuple] = field(default_factory=list)

    def tables(self) -> dict[str, list[tuple]]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def seed(url: str, today: date, days: int, rng: random.Random) -> dict[str, Any]:
    """Bulk-load ``days`` days ending ``today`` with explicit ids, then fix the sequences and ANALYZE."""
    rows = year_rows(today, days, rng)
    counts: dict[str, int] = dict.fromkeys(rows.tables(), 0)
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        _copy(cur, "wechat_account", accounts(datetime.now(UTC)))
        for table, table_rows in rows.tables().items():
            _copy(cur, table, table_rows)
        feedback = _as_the_slots_left_it(cur)
        if feedback is not None:
            counts["feedback"] = feedback
        conn.commit()
        conn.autocommit = True
        cur.execute("VACUUM ANALYZE")
    counts.update({table: len(table_rows) for table, table_rows in rows.tables().items()})
    busiest = max(rows.analysis_result, key=lambda a: (a[3], a[0]))  # a high-scoring analysis, with opportunities
    return {"counts": counts, "analysis_id": busiest[0]}


def _copy(cur: psycopg.Cursor, table: str, rows: Iterable[tuple]) -> None:
    with cur.copy(f"COPY {table} ({COLUMNS[table]}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def accounts(now: datetime) -> list[tuple]:
    """The WeRSS accounts; one in seven failing (backed off after a 429)."""
    return [
        (i, f"mp_{i}", f"公众号{i:02d}", now - timedelta(hours=i), now, 3 if i % 7 == 0 else 0,
         now + timedelta(hours=1) if i % 7 == 0 else None, "HTTP 429 from WeRSS" if i % 7 == 0 else None)
        for i in range(1, ACCOUNTS + 1)
    ]


def year_rows(today: date, days: int, rng: random.Random) -> Rows:
    """Every slot of ``days`` days ending ``today``: its run, articles and analyses, then the day's report and
    pushes (3 % of slots and reports failed, 5 % of analyses, 2 % of pushes)."""
    rows = Rows()
    first_day = today - timedelta(days=days - 1)
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        scores: list[tuple[int, int]] = []
        failed = sum(_slot_rows(rows, day, slot, rng, scores) for slot in SLOTS)
        scores.sort(reverse=True)
        hot = [a for s, a in scores if s >= 60]
        _report_row(rows, day, scores, hot, failed, rng)
        _notification_rows(rows, day, hot, rng)
    return rows


def _slot_rows(rows: Rows, day: date, slot: str, rng: random.Random, scores: list[tuple[int, int]]) -> int:
    """One slot's run and its articles, each analysed (its (score, analysis id) in ``scores``) or failed;
    returns how many failed."""
    key = slot_at(day, slot)
    run_id = len(rows.slot_run) + 1
    failed_slot = rng.random() < 0.03
    rows.slot_run.append((
        run_id, day, slot, 2 if failed_slot else 1, key.scheduled_at, "opportunity_radar",
        f"scheduled__{key.scheduled_at.isoformat()}", ARTICLES_PER_SLOT, "ingest: WeRSS 503" if failed_slot else None,
        key.scheduled_at + timedelta(minutes=4),
    ))
    failures = 0
    for _ in range(ARTICLES_PER_SLOT):
        item_id = len(rows.content_item) + 1
        published = key.scheduled_at - timedelta(minutes=rng.randint(5, 600))
        failed = rng.random() < 0.05
        rows.content_item.append((
            item_id, f"ext-{item_id}", rng.randint(1, ACCOUNTS), f"mp_{item_id % ACCOUNTS}",
            _text(rng, 6) + f"（{item_id}）", f"https://mp.weixin.qq.com/s/{item_id}", published, _text(rng, 800),
            f"h{item_id}", 3 if failed else 2, "DeepSeek JSON invalid" if failed else None, run_id, run_id,
            3 if failed else 1,
        ))
        if failed:
            failures += 1
        else:
            scores.append(_analysis_rows(rows, item_id, run_id, rng))
    return failures


def _analysis_rows(rows: Rows, item_id: int, run_id: int, rng: random.Random) -> tuple[int, int]:
    """An article's analysis and, from a score of 60 on, its one or two opportunities; its (score, id)."""
    analysis_id = len(rows.analysis_result) + 1
    score = min(100, max(0, int(rng.gauss(50, 18))))
    n_opps = 0 if score < 60 else rng.randint(1, 2)
    result = {"score": score, "summary": _text(rng, 20), "opportunities": []}
    rows.analysis_result.append((
        analysis_id, item_id, run_id, score, score >= 60, rng.choice(TYPES) if n_opps else "none", _text(rng, 25),
        Jsonb(result), "deepseek-v4-pro", "analysis/v1", 5000, 800, 2000, 4000, 1000, 0.0012, 21000, 1,
    ))
    for position in range(n_opps):
        rows.opportunity.append((
            len(rows.opportunity) + 1, analysis_id, position, _text(rng, 3), rng.choice(TYPES),
            Jsonb([_text(rng, 1), _text(rng, 1)]), "bullish", "1-3个月", _text(rng, 8), Jsonb([_text(rng, 6)]),
            Jsonb([_text(rng, 10), _text(rng, 10)]), 0.6,
        ))
    return score, analysis_id


def _report_row(
    rows: Rows, day: date, scores: list[tuple[int, int]], hot: list[int], failed: int, rng: random.Random
) -> None:
    """The day's report: its digest, its top three, its stats."""
    stats = {
        "analysed": len(scores),
        "opportunities": len(hot),
        "failed": failed,
        "max_score": scores[0][0] if scores else None,
    }
    failed_report = rng.random() < 0.03
    digest = "## 今日要点\n" + "\n".join(f"- {_text(rng, 12)}" for _ in range(10))
    top = [{"analysis_id": a, "title": "t", "reason": "r"} for a in hot[:3]]
    rows.daily_report.append((
        day, 2 if failed_report else 1, digest,
        Jsonb({"top_opportunities": top, "watchlist": [_text(rng, 2) for _ in range(4)]}),
        list(SLOTS), Jsonb(stats), "digest: LLM exhausted" if failed_report else None,
    ))


def _notification_rows(rows: Rows, day: date, hot: list[int], rng: random.Random) -> None:
    """The day's pushes: the report's link to two channels, and a day with an opportunity its 12:00 push."""
    for channel in ("bark://api.day.app", "wecom://qyapi.weixin.qq.com"):
        ok = rng.random() > 0.02
        rows.notification_log.append((
            len(rows.notification_log) + 1, f"daily-{day}-{channel}", day, "22:00", "daily", "https://x/daily",
            channel, 1 if ok else 2, None if ok else "HTTP 500",
        ))
    if hot:
        rows.notification_log.append((
            len(rows.notification_log) + 1, f"opp-{day}", day, "12:00", "opportunity", "https://x/analysis",
            "bark://api.day.app", 1, None,
        ))


def _as_the_slots_left_it(cur: psycopg.Cursor) -> int | None:
    """The slots' counts as close_slot_run would have set them, the sequences past the explicit ids, and (on a
    schema with the feedback table, 0006's) a reader's vote on one analysis in ten: how many, else None."""
    cur.execute("""
        UPDATE slot_run s SET
            analysed_count = (SELECT count(*) FROM analysis_result a WHERE a.slot_run_id = s.id),
            opportunity_count = (SELECT count(*) FROM analysis_result a WHERE a.slot_run_id = s.id AND a.score >= 60),
            failed_count = (SELECT count(*) FROM content_item c WHERE c.last_slot_run_id = s.id AND c.analyzed_status = 3)
    """)
    feedback = None
    if cur.execute("SELECT to_regclass('feedback') IS NOT NULL AS present").fetchone()[0]:
        cur.execute("INSERT INTO feedback (analysis_id, verdict, via, updated_at) "
                    "SELECT id, (ARRAY['up', 'down', 'knew'])[1 + id % 3], 'bench', created_at "
                    "FROM analysis_result WHERE id % 10 = 0")
        feedback = cur.rowcount
    for table in ("wechat_account", "slot_run", "content_item", "analysis_result", "opportunity", "daily_report",
                  "notification_log"):
        cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
    return feedback


def fingerprint(url: str, columns: dict[str, list[str]] | None = None) -> dict[str, tuple[int, str]]:
    """Table -> (row count, md5 of its rows) for every table of the public schema; with ``columns``, only
    those tables and only those columns of each (what an earlier schema had, to compare across a migration
    that adds columns). Rendered in UTC and ordered byte-wise, so two servers holding the same rows agree
    whatever their time zone or collation."""
    columns = columns if columns is not None else table_columns(url)
    digests: dict[str, tuple[int, str]] = {}
    with psycopg.connect(url) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute("SET DateStyle = 'ISO, YMD'")
        for table, names in sorted(columns.items()):
            row = sql.SQL("ROW({})::text").format(sql.SQL(", ").join(map(sql.Identifier, names)))
            count, digest = conn.execute(
                sql.SQL("SELECT count(*), md5(coalesce(string_agg({row}, E'\\n' ORDER BY {row} COLLATE \"C\"), '')) "
                        "FROM {table}").format(row=row, table=sql.Identifier(table))
            ).fetchone()
            digests[table] = (count, digest)
    return digests


def table_columns(url: str) -> dict[str, list[str]]:
    """Table -> its column names (in order) for every table of the public schema."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND table_name IN (SELECT tablename FROM pg_tables WHERE schemaname = 'public') "
            "ORDER BY table_name, ordinal_position"
        ).fetchall()
    columns: dict[str, list[str]] = {}
    for table, column in rows:
        columns.setdefault(table, []).append(column)
    return columns
