"""How many megabytes does a year of slots take, and where? And what does retention give back?

Runs ``--days`` days (default 7) of the real slots in-process (tests/slotrun.py: ingest, selection, analysis,
summary, pushes, the daily report, the track record), five slots a day, against stand-ins on loopback: a
WeRSS with ``--articles`` (200) new WeChat-like articles a day (include/radar_demo/wechat_pages.py: ~30 kB of
HTML each, over 20 accounts) and a DeepSeek answering with verifiable quotes (a fifth of the articles score
60 or more). Then it reads what PostgreSQL holds:

- per table: heap, TOAST and index bytes on disk (``pg_relation_size`` of each fork);
- per column of the big tables: the bytes of the values themselves (``pg_column_size``, after TOAST's
  compression), so that article text, search vectors and analyses are told apart;

and scales the growth to a year (what a day adds between the first day and the last, × 365: every row the
slots write is per article, per slot or per day). Last, it prunes the bodies of the first half of the days
with the retention step's own function (include/radar/operations/retention.py) and prints what a pruned body gave back,
on disk with its share of the search index, and what a year of slots holds at steady state under each
``retention_days``.

    make bench-growth                        # a week of 200 articles a day, scaled to a year
    make bench-growth ARGS="--days 30"       # more days measured, less scaling
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import re
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path

from include.radar.core import db
from include.radar.core.slots import SHANGHAI, slot_at
from include.radar_demo import wechat_pages, year
from include.radar_demo.fakes import FakeArticle, FakeDeepSeek, FakeWeRSS, PushSink, serve

REPO = Path(__file__).resolve().parents[1]

SLOTS = ("07:00", "12:00", "14:00", "18:00", "22:00")
ACCOUNTS = 20
MB = 2**20
# the columns whose values are told apart (the rest of each table is counted as "other columns")
COLUMNS = {
    "content_item": ("clean_text", "search_tsv", "title"),
    "analysis_result": ("result_json", "summary"),
    "notification_log": ("body",),
}


def articles_for(day: date, per_day: int, pages: dict[str, wechat_pages.Page]) -> list[FakeArticle]:
    """``per_day`` articles published over ``day`` (07:00 to 22:00), each before one of its slots."""
    start = datetime.combine(day, datetime.min.time(), tzinfo=SHANGHAI).replace(hour=6)
    out = []
    for i in range(per_day):
        key = f"{day.isoformat()}-{i}"
        page = pages[key] = wechat_pages.page(key)
        published = start + timedelta(minutes=int(i * 16 * 60 / per_day))
        out.append(FakeArticle(id=f"g{day:%Y%m%d}{i:04d}", mp_id=f"MP_WXS_{i % ACCOUNTS + 1}", title=page.title,
                               publish_time=int(published.timestamp()), content_html=page.html,
                               url=f"https://mp.weixin.qq.com/s/{key}"))
    return out


def sizes(url: str) -> dict[str, dict[str, int]]:
    """Table -> heap, TOAST and index bytes on disk and its rows; for the tables of COLUMNS also the bytes of
    the values of the named columns and of whole rows (``pg_column_size``: after TOAST's compression)."""
    vacuum(url)
    out: dict[str, dict[str, int]] = {}
    with db.connect(url) as conn:
        rows = conn.execute("""
            SELECT c.relname AS name, pg_relation_size(c.oid) AS heap,
                   coalesce(pg_total_relation_size(c.reltoastrelid), 0) AS toast, pg_indexes_size(c.oid) AS indexes
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY c.relname
        """).fetchall()
        for r in rows:
            out[r["name"]] = {k: int(r[k]) for k in ("heap", "toast", "indexes")} | {
                "rows": conn.execute(f'SELECT count(*) AS n FROM "{r["name"]}"').fetchone()["n"]}
        for table, columns in COLUMNS.items():
            row = conn.execute("SELECT " + ", ".join(f"coalesce(sum(pg_column_size({c})), 0) AS {c}" for c in columns)
                               + f", coalesce(sum(pg_column_size(t.*)), 0) AS whole FROM {table} t").fetchone()
            out[table]["columns"] = {c: int(row[c]) for c in columns}
            out[table]["values"] = int(row["whole"])
        out["_indexes"] = {r["name"]: int(r["bytes"]) for r in conn.execute(
            "SELECT indexrelname AS name, pg_relation_size(indexrelid) AS bytes FROM pg_stat_user_indexes "
            "WHERE relname = 'content_item'").fetchall()}
    return out


def lexeme_count(url: str, before: datetime) -> int:
    """Search lexemes of the articles published before ``before`` (what retention prunes)."""
    with db.connect(url) as conn:
        return conn.execute(
            "SELECT coalesce(sum(length(search_tsv)), 0) AS n FROM content_item WHERE published_at < %s", (before,)
        ).fetchone()["n"]


def vacuum(url: str) -> None:
    with db.connect(url) as conn:
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")


def on_disk(s: dict[str, int]) -> int:
    return s["heap"] + s["toast"] + s["indexes"]


def growth_report(first: dict, last: dict, days: int) -> float:
    """Per table, what a day added between the first day and the last (the fixed pages of an empty table
    are left out), scaled to a year; returns the year's total in MB."""
    print(f"\nOn disk, per year (what a day adds, measured between day 1 and day {days}, x 365):")
    print(f"{'table':<20} {'rows/yr':>9} {'heap MB':>8} {'toast MB':>8} {'index MB':>8} {'total MB':>9}")
    per_year = 365 / (days - 1)
    totals = [0.0, 0.0, 0.0]
    tables = [t for t in last if not t.startswith("_")]
    for name in sorted(tables, key=lambda t: -(on_disk(last[t]) - on_disk(first[t]))):
        a, b = first[name], last[name]
        parts = [(b[k] - a[k]) * per_year / MB for k in ("heap", "toast", "indexes")]
        if sum(parts) < 0.5:
            continue
        totals = [x + y for x, y in zip(totals, parts, strict=True)]
        print(f"{name:<20} {(b['rows'] - a['rows']) * per_year:>9.0f} {parts[0]:>8.1f} {parts[1]:>8.1f} "
              f"{parts[2]:>8.1f} {sum(parts):>9.1f}")
    print(f"{'all tables':<20} {'':>9} {totals[0]:>8.1f} {totals[1]:>8.1f} {totals[2]:>8.1f} {sum(totals):>9.1f}")
    print("content_item's indexes, MB per year: " + ", ".join(
        f"{name} {(last['_indexes'][name] - first['_indexes'].get(name, 0)) * per_year / MB:.0f}"
        for name in sorted(last["_indexes"], key=lambda n: -last["_indexes"][n])[:4]))
    return sum(totals)


def values_report(measured: dict[str, dict[str, int]], articles: int, per_day: int) -> None:
    print(f"\n{'where the values are (after compression)':<42} {'bytes/article':>14} {'MB/yr':>8}")
    for table in COLUMNS:
        for column, value in measured[table]["columns"].items():
            print(f"{table + '.' + column:<42} {value / articles:>14.0f} {value / articles * per_day * 365 / MB:>8.1f}")
        rest = measured[table]["values"] - sum(measured[table]["columns"].values())
        print(f"{table + ' (the other columns)':<42} {rest / articles:>14.0f} {rest / articles * per_day * 365 / MB:>8.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=7, help="days of slots run and measured (default 7)")
    parser.add_argument("--articles", type=int, default=200, help="new articles a day (default 200)")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()
    if args.days < 2:
        parser.error("--days must be at least 2 (growth is measured between the first day and the last)")
    logging.basicConfig(level=logging.WARNING)
    for name in ("werkzeug", "include", "httpx", "apprise"):
        logging.getLogger(name).setLevel(logging.ERROR)

    pages: dict[str, wechat_pages.Page] = {}
    clock = [0]
    werss = FakeWeRSS(accounts=[{"id": f"MP_WXS_{i}", "mp_name": f"研究所{i:02d}"} for i in range(1, ACCOUNTS + 1)],
                      username="bench", password="bench-password", now=lambda: clock[0])
    by_title: dict[str, wechat_pages.Page] = {}
    rng = random.Random(7)

    def respond(body: dict) -> str:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if "<<<DATA_START>>>" in user:  # the daily digest: its fallback is built from the database
            return "not json"
        match = re.search(r"^标题：(.*)$", user, re.MULTILINE)
        page = by_title.get(match.group(1).strip()) if match else None
        if page is None:
            return wechat_pages.answer(wechat_pages.page("unknown"), 20)
        return wechat_pages.answer(page, rng.choice([20, 35, 45, 50, 55, 40, 30, 62, 70, 82]))

    deepseek = FakeDeepSeek(responder=respond, api_key="sk-bench")
    sink = PushSink()
    werss_at, deepseek_at, sink_at = serve(werss.handle), serve(deepseek.handle), serve(sink.handle)
    first_day = datetime.now(SHANGHAI).date() - timedelta(days=args.days + 1)
    with year.scratch_database(year.bench_server_url(), keep=args.keep) as url:
        os.environ.update({
            **year.standins_environment(url, werss_at, deepseek_at, sink_at),
            "AIRFLOW_VAR_RADAR_MAX_ARTICLES_PER_SLOT": str(args.articles),
            "AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES": str(366 * 24 * 60),
            "AIRFLOW_VAR_RADAR_RETENTION_DAYS": "0",  # measured first with everything kept
        })
        from tests.slotrun import run_slot  # reads the environment set above

        started = time.perf_counter()
        for offset in range(args.days):
            day = first_day + timedelta(days=offset)
            werss.articles.extend(articles_for(day, args.articles, pages))
            by_title.update({p.title: p for p in pages.values()})
            for slot in SLOTS:
                key = slot_at(day, slot)
                clock[0] = int(key.scheduled_at.timestamp()) + 60
                result = run_slot(key.scheduled_at, now=key.scheduled_at + timedelta(minutes=1))
                if result["errors"]:
                    print(f"  {day} {slot}: step errors {result['errors']}")
            # a window of three days is all WeRSS lists: older articles leave the stand-in too
            horizon = int((datetime.combine(day, datetime.min.time(), tzinfo=SHANGHAI) - timedelta(days=3)).timestamp())
            werss.articles = [a for a in werss.articles if a.publish_time >= horizon]
            if offset == 0:
                first = sizes(url)
            print(f"  day {offset + 1}/{args.days} ({day}): {time.perf_counter() - started:.0f} s, "
                  f"{len(deepseek.requests)} LLM calls, {len(sink.received)} pushes so far", flush=True)
        last = sizes(url)
        articles = last["content_item"]["rows"]
        print(f"\n[bench-growth] {args.days} days x {args.articles} articles ({articles} stored, "
              f"{last['analysis_result']['rows']} analysed, {len(sink.received)} pushes) in "
              f"{time.perf_counter() - started:.0f} s; WeChat-like pages of "
              f"{sum(len(p.html.encode()) for p in pages.values()) / len(pages) / 1024:.1f} kB of HTML on average "
              f"(the HTML is not kept: its size and the cleaned text are)")
        year_mb = growth_report(first, last, args.days)
        values_report(last, articles, args.articles)
        print(f"\n[bench-growth] a year of slots at {args.articles} articles a day: {year_mb:.0f} MB on disk "
              f"({year_mb * MB / (args.articles * 365) / 1024:.1f} kB per article, every table and index)")

        from include.radar.core.settings import Settings
        from include.radar.operations import retention

        keep_days = max(1, args.days // 2)
        now = datetime.combine(first_day + timedelta(days=args.days), datetime.min.time(), tzinfo=SHANGHAI)
        lexemes_before = lexeme_count(url, retention.cutoff(now, keep_days))
        t0 = time.perf_counter()
        pruned = retention.prune(lambda: db.connect(url), keep_days=keep_days, now=now,
                                 max_attempts=Settings.model_fields["max_analysis_attempts"].default)
        spent = time.perf_counter() - t0
        after = sizes(url)
        lexemes_after = lexeme_count(url, retention.cutoff(now, keep_days))
        per_body = (last["content_item"]["values"] - after["content_item"]["values"]) / max(pruned.bodies, 1)
        # what a pruned body was on disk: its values as TOAST and the heap store them, and its share of the GIN
        a, b = first["content_item"], last["content_item"]
        stored = (b["heap"] + b["toast"] - a["heap"] - a["toast"]) / max(b["values"] - a["values"], 1)
        index_each = (b["indexes"] - a["indexes"]) / max(b["rows"] - a["rows"], 1)
        share = 1 - lexemes_after / max(lexemes_before, 1)
        body_disk = per_body * stored + index_each * share
        print(f"\n[bench-growth] retention: pruning the bodies older than {keep_days} days took {spent:.1f} s for "
              f"{pruned.bodies} articles ({pruned.batches} batches of up to {retention.BATCH}, "
              f"{spent / max(pruned.bodies, 1) * 1000:.1f} ms an article). Each gave back {per_body / 1024:.1f} kB of "
              f"values (its text and {share:.0%} of its search lexemes): {body_disk / 1024:.1f} kB on disk with its "
              f"share of the search index, reused by later rows after (auto)vacuum, the files not shrinking")
        total = year_mb * MB
        print(f"{'retention_days':>15} {'a year of slots at steady state, MB':>37}")
        for days_kept in (30, 90, 180, 365):
            steady = total - args.articles * (365 - days_kept) * body_disk
            print(f"{days_kept:>15} {steady / MB:>37.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
