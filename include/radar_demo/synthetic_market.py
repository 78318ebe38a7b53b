"""A year of picks on synthetic prices: what the page benchmark (``make bench``) and the track record's
benchmark (``make bench-track``) follow through the real track-record step.

``SyntheticCaller`` answers akshare's calls in their shapes with deterministic prices for any symbol (every
weekday trades); ``make_picks`` turns every analysis scoring 60 or more of a seeded year (year.seed) into a sent
opportunity push naming one of ``instruments`` A-share codes; ``follow`` runs track_record.update on them.
"""

from __future__ import annotations

import random
import time
from datetime import date, datetime, timedelta
from typing import Any

from include.radar.core import db
from include.radar.market.akshare_source import LibrarySource
from include.radar.report import track_record

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
    """akshare's calls, answered with deterministic prices for any symbol (every weekday trades); each call
    waits ``latency`` seconds (a network round trip)."""

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
    article (the picks of a year); one in nine names a sector without an index (not measurable)."""
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


def follow(url: str, caller: SyntheticCaller, now: datetime) -> tuple[float, track_record.Update]:
    """One run of the track-record step at ``now`` on ``caller``'s prices: (seconds, what it did)."""
    started = time.perf_counter()
    run = track_record.update(lambda: db.connect(url), lambda: LibrarySource(caller, name="synthetic"), now=now)
    return time.perf_counter() - started, run


def forget_outcomes(url: str) -> None:
    """Every pick's reference and outcomes cleared (the cache kept): the next run recomputes every pick."""
    with db.connect(url) as conn:
        conn.execute("DELETE FROM track_outcome")
        conn.execute("UPDATE track_pick SET ref_day = NULL, ref_kind = NULL, ref_price = NULL, bench_ref = NULL, "
                     "ref_note = '', limit_open = NULL")
