"""An evaluation against the market: each set-up's calls measured by the track record's rules, as if each had been
made when the slot that analysed the article ran.

For every compared article a set-up that called an opportunity has a pick: the instrument its targets name, resolved
as the record resolves them (market/instruments.py), in the call's direction. Its reference price and its return at
the horizon follow outcomes.py (the first price a reader could trade at after the slot ran, the exchange calendar,
the benchmark over the same span, hits on the raw return in the call's direction), read from the record's cache
only — the prices the track record fetched, nothing fetched here, nothing past what was published by now. Picks both
set-ups made are tallied apart from those only one made. A pick whose horizon has not closed yet is *waiting*; one
without an instrument, or whose prices the cache does not hold, is *not measurable*, as in the record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from include.radar import store
from include.radar.core.slots import SHANGHAI
from include.radar.market import MinuteBar, outcomes
from include.radar.market.instruments import CN, HK, Instrument, price_limit, resolve

HORIZON = 5
LOOKBACK = timedelta(days=20)  # bars before the pick's day: the previous close (an open at the limit)


@dataclass
class Tally:
    """One group of picks: how many, how many measured or still waiting, their hits and mean signed excess."""

    picks: int = 0
    measured: int = 0
    waiting: int = 0
    directional: int = 0
    hits: int = 0
    signed_excess: float = 0.0
    returns: list[float] = field(default_factory=list)

    @property
    def not_measurable(self) -> int:
        return self.picks - self.measured - self.waiting

    @property
    def hit_rate(self) -> float | None:
        return self.hits / self.directional if self.directional else None

    @property
    def mean_signed_excess(self) -> float | None:
        return self.signed_excess / self.directional if self.directional else None

    def add(self, result: outcomes.Outcome | None) -> None:
        self.picks += 1
        if result is not None and result.status == "waiting":
            self.waiting += 1
        if result is None or result.status not in ("measured", "suspended") or result.ret is None:
            return
        self.measured += 1
        self.returns.append(result.ret)
        if result.hit is not None and result.signed_excess is not None:
            self.directional += 1
            self.hits += int(result.hit)
            self.signed_excess += result.signed_excess


@dataclass
class Market:
    horizon: int
    both_current: Tally = field(default_factory=Tally)
    both_candidate: Tally = field(default_factory=Tally)
    only_current: Tally = field(default_factory=Tally)
    only_candidate: Tally = field(default_factory=Tally)


@dataclass(frozen=True)
class Pick:
    instrument: Instrument | None
    benchmark: Instrument | None
    target: str
    direction: str
    at: datetime | None


def _pick(value: Any, at: datetime | None, names: Any) -> Pick:
    opps = [o for o in (value.get("opportunities") if isinstance(value, dict) else None) or [] if isinstance(o, dict)]
    found = resolve(opps, names if names is not None else {})
    return Pick(found.instrument, found.benchmark, found.target, found.direction, at)


def measure(conn: Any, rows: list[dict[str, Any]], names: Any, now: datetime, horizon: int = HORIZON) -> Market:
    """The market tallies of the compared articles (rows as store.evaluations.pairs gives them, answered)."""
    picks: list[tuple[str, Pick]] = []
    for r in rows:
        both = bool(r["b_opp"]) and bool(r["c_opp"])
        for side, key in (("current", "b"), ("candidate", "c")):
            if r[f"{key}_opp"]:
                picks.append((f"{'both' if both else 'only'}_{side}", _pick(r[f"{key}_json"], r["slot_at"], names)))
    prices = _Prices(conn, [p for _, p in picks], now)
    market = Market(horizon)
    for group, pick in picks:
        getattr(market, group).add(prices.outcome(pick, horizon))
    return market


class _Prices:
    """The record's cached bars and calendars for the picks' instruments and benchmarks."""

    def __init__(self, conn: Any, picks: list[Pick], now: datetime) -> None:
        self.conn, self.now = conn, now
        keys = {i.key for p in picks for i in (p.instrument, p.benchmark) if i is not None}
        days = [p.at.astimezone(SHANGHAI).date() for p in picks if p.at is not None]
        since = min(days, default=now.date()) - LOOKBACK
        self.bars = store.track.bars_of(conn, keys, since) if keys else {}
        self.calendars = {CN: store.track.calendar(conn, CN, since), HK: store.track.calendar(conn, HK, since)}

    def _minutes(self, inst: Instrument, day: date) -> list[MinuteBar] | None:
        cached = store.track.intraday_of(self.conn, inst.key, day)
        if not cached:
            return None
        return [MinuteBar(datetime.fromisoformat(s).replace(tzinfo=SHANGHAI), float(p)) for s, p in cached]

    def outcome(self, pick: Pick, horizon: int) -> outcomes.Outcome | None:
        inst, bench = pick.instrument, pick.benchmark
        if inst is None or bench is None or pick.at is None:
            return None
        own, theirs = self.bars.get(inst.key, {}), self.bars.get(bench.key, {})
        if not own or not theirs:
            return None  # the record never fetched it: not measurable here
        days = self.calendars[inst.calendar]
        # known through: what is published by now and what the cache holds of both
        through = min(outcomes.published_through(self.now, inst.calendar), max(own), max(theirs))
        intraday = None
        if outcomes.during_session(pick.at, inst.calendar, days):
            day = pick.at.astimezone(SHANGHAI).date()
            minutes, bench_minutes = self._minutes(inst, day), self._minutes(bench, day)
            if minutes is not None and bench_minutes is not None:  # else the day's close stands in, as in the record
                intraday = minutes, bench_minutes
        ref = outcomes.reference(pick.at, inst.calendar, days, own, theirs, through, intraday=intraday,
                                 limit=price_limit(inst, pick.target))
        return outcomes.outcome(ref, horizon, days, own, theirs, through, pick.direction)
