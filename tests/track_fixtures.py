"""Hand-made market data for the track record's rules: a ``market.Source`` over bars written in the test, and a
pick pushed the way the radar records one (an analysis, a sent opportunity push), so that every expectation is
computed by hand from the figures the test states."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from psycopg.types.json import Jsonb

from include.radar.market import Bar, MinuteBar
from include.radar.market.instruments import Instrument


def weekdays(first: date, last: date, closed: tuple[date, ...] = ()) -> list[date]:
    days, d = [], first
    while d <= last:
        if d.weekday() < 5 and d not in closed:
            days.append(d)
        d += timedelta(days=1)
    return days


def flat(days: list[date], price: float) -> dict[date, Bar]:
    """An instrument that does not move: open = high = low = close = ``price`` every day."""
    return {d: Bar(d, price, price, price, price) for d in days}


class HandSource:
    """Daily bars, 5-minute bars, the calendar and the listed names, as the test writes them."""

    name = "hand"

    def __init__(self, days: list[date], bars: dict[str, dict[date, Bar]], *,
                 minutes: dict[tuple[str, date], list[MinuteBar]] | None = None,
                 listings: list[tuple[str, str]] | None = None) -> None:
        self.days, self.bars, self.minutes, self._listings = days, bars, minutes or {}, listings or []
        self.calls: list[tuple[str, str]] = []

    def daily(self, instrument: Instrument, start: date, end: date) -> list[Bar]:
        self.calls.append(("daily", instrument.key))
        return [b for d, b in sorted(self.bars.get(instrument.key, {}).items()) if start <= d <= end]

    def intraday(self, instrument: Instrument, day: date) -> list[MinuteBar] | None:
        self.calls.append(("intraday", instrument.key))
        return self.minutes.get((instrument.key, day), [])

    def calendar(self) -> list[date]:
        return list(self.days)

    def listings(self) -> list[tuple[str, str]]:
        self.calls.append(("listings", ""))
        return list(self._listings)


def pushed_pick(conn, targets: list[str], at: datetime, *, direction: str = "bullish", opp_type: str = "stock",
                title: str = "机会", score: int = 80) -> int:
    """An analysis whose opportunity names ``targets``, pushed (sent) at ``at``: the analysis id."""
    result = {"score": score, "opportunities": [{"type": opp_type, "targets": targets, "direction": direction}]}
    item = conn.execute("INSERT INTO content_item (external_id, title, published_at) VALUES (%s, %s, %s) RETURNING id",
                        (f"hand-{title}-{at.isoformat()}", title, at)).fetchone()["id"]
    analysis = conn.execute(
        "INSERT INTO analysis_result (content_item_id, score, has_opportunity, top_type, summary, result_json, model, "
        "prompt_version) VALUES (%s, %s, true, %s, 's', %s, 'm', 'v') RETURNING id",
        (item, score, opp_type, Jsonb(result))).fetchone()["id"]
    conn.execute(
        "INSERT INTO notification_log (msg_uuid, report_date, slot, push_type, target_url, channel, title, status, "
        "sent_at) VALUES (%s, %s, '10:00', 'opportunity', %s, 'test', %s, 1, %s)",
        (f"hand-{analysis}", at.date(), f"http://radar/analysis/{analysis}", title, at))
    conn.commit()
    return analysis
