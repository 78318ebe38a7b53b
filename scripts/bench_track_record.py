"""Time the track record's step over a year of picks, from a cold cache and from a warm one.

Creates a throw-away database (as scripts/bench_pages.py does), seeds a year of radar data with bench_pages'
seed, turns every analysis scoring 60 or more into a sent opportunity push naming one of ``--instruments``
A-share codes (so ~1,500 picks over ~300 instruments), then runs the real step (track_record.update) with a
synthetic market-data source: akshare's call shapes, deterministic prices for any symbol, each call waiting
``--latency`` seconds (a network round trip; 0 measures the radar alone).

- cold: an empty cache: every instrument's bars, the calendar and the listings are fetched once;
- warm: the same day again: nothing is fetched (one fetch per instrument and day), everything computed again;
- next day: one incremental fetch per instrument (the last week of bars), everything computed.

    RADAR_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python scripts/bench_track_record.py
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from include.radar import db, track_record  # noqa: E402
from include.radar.market.akshare_source import LibrarySource  # noqa: E402
from include.radar.slots import SHANGHAI  # noqa: E402

FIRST = date(2024, 1, 1)
LAST = date(2027, 12, 31)


def weekdays(first: date, last: date) -> list[date]:
    days, d = [], first
    while d <= last:
        if d.weekday() < 5:
            days.append(d)
        d += timedelta(days=1)
    return days


class SyntheticCaller:
    """akshare's calls, answered with deterministic prices for any symbol (every weekday trades)."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.calls = 0
        self._days = weekdays(FIRST, LAST)

    def __call__(self, function: str, **kwargs: Any) -> list[dict[str, Any]]:
        self.calls += 1
        if self.latency:
            time.sleep(self.latency)
        if function == "tool_trade_date_hist_sina":
            return [{"trade_date": d} for d in self._days]
        if function in ("stock_info_a_code_name", "stock_hk_spot_em") or function.endswith("_min_em"):
            return []  # no listings needed (codes), no 5-minute bars (a push in a session: the day's close)
        start = datetime.strptime(kwargs.get("start_date", "20240101")[:8], "%Y%m%d").date()
        end = datetime.strptime(kwargs.get("end_date", "20271231")[:8], "%Y%m%d").date()
        rng = random.Random(str(kwargs.get("symbol")))
        rows, close = [], 10.0 + rng.random() * 90
        for d in self._days:
            if d > end:
                break
            open_ = close * (1 + rng.gauss(0, 0.004))
            close = close * (1 + rng.gauss(0.0003, 0.015))
            if d >= start:
                rows.append({"日期": d, "开盘": round(open_, 2), "收盘": round(close, 2), "最高": round(max(open_, close), 2),
                             "最低": round(min(open_, close), 2)})
        return rows


def make_picks(url: str, instruments: int) -> int:
    """Every analysis scoring 60+ becomes a sent push naming one of ``instruments`` codes, an hour after its
    article (the picks of a year)."""
    with db.connect(url) as conn:
        conn.execute(
            """
            UPDATE analysis_result a SET result_json = jsonb_build_object('opportunities', jsonb_build_array(
                jsonb_build_object('name', '样例', 'type', 'stock',
                    'direction', (ARRAY['bullish', 'bullish', 'bearish', 'watch'])[1 + a.id %% 4],
                    'targets', jsonb_build_array(
                        CASE WHEN a.id %% 9 = 0 THEN '人形机器人'
                             ELSE '600' || lpad((a.id %% %(n)s)::text, 3, '0') END))))
            WHERE a.score >= 60
            """,
            {"n": instruments},
        )
        return conn.execute(
            """
            INSERT INTO notification_log (msg_uuid, report_date, slot, push_type, target_url, channel, status, sent_at)
            SELECT 'bench-pick-' || a.id, (c.published_at AT TIME ZONE 'Asia/Shanghai')::date, '12:00', 'opportunity',
                   'https://x/radar/analysis/' || a.id, 'bench', 1, c.published_at + interval '1 hour'
            FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id WHERE a.score >= 60
            """
        ).rowcount


def update(url: str, caller: SyntheticCaller, now: datetime) -> tuple[float, track_record.Update]:
    started = time.perf_counter()
    run = track_record.update(lambda: db.connect(url), lambda: LibrarySource(caller, name="synthetic"), now=now)
    return time.perf_counter() - started, run


def main() -> int:
    from scripts.bench_pages import scratch_database, seed  # noqa: PLC0415 - the pages' year of data

    logging.getLogger("include.radar.track_record").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--instruments", type=int, default=300)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each market-data call waits")
    args = parser.parse_args()
    today = datetime.now(UTC).astimezone(SHANGHAI).date()
    with scratch_database(False) as url:
        seed(url, today, args.days, random.Random(42))
        pushes = make_picks(url, args.instruments)
        evening = datetime.combine(today, datetime.min.time(), tzinfo=SHANGHAI).replace(hour=22, minute=30)
        print(f"a year of picks: {pushes} sent pushes naming {args.instruments} instruments; "
              f"market-data calls wait {args.latency:.2f} s each")
        print(f"\n{'run':<12} {'seconds':>8} {'calls':>6} {'fetched':>8} {'cached':>7} {'picks':>6} {'measured':>9}")
        for label, now in (("cold", evening), ("warm", evening + timedelta(minutes=5)),
                           ("next day", evening + timedelta(days=1))):
            caller = SyntheticCaller(args.latency)
            seconds, run = update(url, caller, now)
            print(f"{label:<12} {seconds:>8.2f} {caller.calls:>6} {run.fetched:>8} {run.from_cache:>7} "
                  f"{run.computed:>6} {run.measured:>9}")
        with db.connect(url) as conn:
            row = conn.execute("SELECT count(*) AS picks, count(*) FILTER (WHERE status = 'measurable') AS m, "
                               "(SELECT count(*) FROM market_bar) AS bars FROM track_pick").fetchone()
        print(f"\n{row['picks']} picks ({row['m']} measurable), {row['bars']} cached bars")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
