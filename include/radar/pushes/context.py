"""Whether a pushed opportunity is still worth acting on: each coded target's move since the article, beside its
benchmark's over the same span, as the track record's rules price them (market/outcomes.py).

The move runs from the reference price the record would use at the article's publication (first_moment: the
next open before 09:25, a later 5-minute price during the session) to the latest price the source has at the
push: today's latest 5-minute bar during an A-share session, else the last published close. A target without a
trade on a day its benchmark traded is 「停牌」; one at its upper limit (at the reference, or now) 「涨停，买不进」;
one whose reference is still to come 「尚未开盘」. Market data is best effort: the source is asked in a worker
thread and waited for on the radar's clock until the push's deadline (``push_market_seconds``); whatever has no
answer by then, or an answer no price could be (NaN, not positive, a move beyond MAX_MOVE, no benchmark), says
「行情未知」. The lines are the message's text only: a message's identity is its slot (push.Occasion).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from include.radar.core.clock import Clock
from include.radar.core.slots import SHANGHAI
from include.radar.market import Bar, MinuteBar, Source, SourceError, basis, outcomes
from include.radar.market.instruments import CN, HK, HSI, Instrument, benchmark_for, parse_code, price_limit

log = logging.getLogger(__name__)

LOOKBACK = timedelta(days=20)  # daily bars asked before the article's day: the previous close, a suspension
MAX_MOVE = 1.0  # a move beyond ±100 % since an article in the push's window is a data error, not a figure
MAX_TARGETS = 2  # coded targets priced per item (the push's room)
POLL = 0.05  # real seconds between looks at the worker while the radar's clock runs to the deadline
UNKNOWN, MOVED, SUSPENDED, LIMIT_UP, NOT_OPEN = "unknown", "moved", "suspended", "limit_up", "not_open"
SESSION_OPEN = {CN: time(9, 30), HK: time(9, 30)}


@dataclass(frozen=True)
class Move:
    """One target's move since the article: ``ret`` the target's, ``bench_ret`` its benchmark's over the same
    span; the latest price is the 5-minute bar starting ``at`` or the close of ``closed``."""

    status: str  # moved | suspended | limit_up | not_open | unknown
    ret: float | None = None
    bench_ret: float | None = None
    at: datetime | None = None
    closed: date | None = None


def price_time(move: Move, today: date) -> str:
    """When the latest price was: 「10:25」 (a 5-minute bar's start today), 「收盘」 (today's close), 「02-04 收盘」."""
    if move.at is not None:
        local = move.at.astimezone(SHANGHAI)
        return f"{local:%H:%M}" if local.date() == today else f"{local:%m-%d %H:%M}"
    if move.closed is not None:
        return "收盘" if move.closed == today else f"{move.closed:%m-%d} 收盘"
    return ""


def move_text(move: Move, today: date) -> str:
    """「发布后 +6.2%（基准 +0.8%，10:25）」, 「停牌」, 「涨停，买不进（发布后 +10.0%，基准 +0.4%，10:25）」,
    「尚未开盘」 or 「行情未知」."""
    if move.status in (SUSPENDED, NOT_OPEN):
        return {SUSPENDED: "停牌", NOT_OPEN: "尚未开盘"}[move.status]
    if move.status not in (MOVED, LIMIT_UP) or move.ret is None or move.bench_ret is None:
        return "行情未知"
    when = price_time(move, today)
    figures = f"发布后 {outcomes.percent(move.ret)}（基准 {outcomes.percent(move.bench_ret)}{'，' + when if when else ''}）"
    return f"涨停，买不进（{figures.removesuffix('）').replace('（', '，', 1)}）" if move.status == LIMIT_UP else figures


def coded_targets(analysis: Mapping[str, Any]) -> list[tuple[str, Instrument]]:
    """(the target as the model wrote it, its instrument) of each target with a security code, every
    opportunity's in order, once each, up to MAX_TARGETS."""
    result = analysis.get("result_json")
    opps = result.get("opportunities") if isinstance(result, dict) else None
    found: dict[str, tuple[str, Instrument]] = {}
    for opp in opps if isinstance(opps, list) else []:
        targets = opp.get("targets") if isinstance(opp, dict) else None
        for target in targets if isinstance(targets, list) else []:
            inst = parse_code(target) if isinstance(target, str) else None
            if inst is not None and inst.key not in found and inst.market != "SW":
                found[inst.key] = (target, inst)
    return list(found.values())[:MAX_TARGETS]


# ------------------------------------------------------------------------------------------ the market


class Market:
    """One push's view of the source: each answer asked once (the benchmark is shared by the targets)."""

    def __init__(self, source: Source, late: threading.Event | None = None) -> None:
        self.source = source
        self.late = late  # set past the push's deadline: nothing more is asked
        self._cache: dict[tuple[Any, ...], Any] = {}

    def _once(self, key: tuple[Any, ...], call: Callable[[], Any]) -> Any:
        if key not in self._cache:
            if self.late is not None and self.late.is_set():
                raise SourceError("past the push's deadline")
            self._cache[key] = call()
        return self._cache[key]

    def daily(self, inst: Instrument, start: date, end: date) -> dict[date, Bar]:
        bars = self._once(("daily", inst.key, start, end), lambda: self.source.daily(inst, start, end))
        return {b.day: b for b in bars}

    def minutes(self, inst: Instrument, day: date) -> list[MinuteBar]:
        return self._once(("minutes", inst.key, day), lambda: self.source.intraday(inst, day)) or []

    def calendar(self, market: str, start: date, end: date) -> list[date]:
        """The market's trading days: the exchange calendar for A-shares; for Hong Kong the Hang Seng's days
        (track_record.py's rule), then the weekdays after them (the next session, not yet traded)."""
        if market == CN:
            return self._once(("calendar",), self.source.calendar)
        days = sorted(self.daily(HSI, start, end))
        day = max(days, default=start)
        while len(days) < 400 and day < end + timedelta(days=14):
            day += timedelta(days=1)
            if day.weekday() < 5 and day > max(days, default=date.min):
                days.append(day)
        return days


def _benchmark(market: Market, bench: Instrument, start: date, end: date) -> dict[date, Bar]:
    twin = basis.price_twin(bench)
    own = market.daily(bench, start, end)
    return basis.total_return_bars(own, market.daily(twin, start, end)) if twin else own


def _bench_minutes(market: Market, bench: Instrument, day: date, daily: Mapping[date, Bar],
                   twin_daily: Mapping[date, Bar]) -> list[MinuteBar]:
    """The benchmark's 5-minute bars of ``day``: a total-return index's are its price twin's scaled by the
    ratio of the closes of ``day``, or, during ``day``'s session, of the last day both closes are known (the
    ratio moves by a day's dividends only)."""
    twin = basis.price_twin(bench)
    if twin is None:
        return market.minutes(bench, day)
    both = [d for d in daily if d <= day and d in twin_daily and twin_daily[d].close]
    if not both:
        return []
    ratio = daily[max(both)].close / twin_daily[max(both)].close
    return [MinuteBar(m.start, m.open * ratio) for m in market.minutes(twin, day)]


def _sane(*prices: float | None) -> bool:
    return all(p is not None and isinstance(p, int | float) and math.isfinite(p) and p > 0 for p in prices)


def _at_upper_limit(price: float, previous_close: float | None, limit: float | None) -> bool:
    return bool(limit and previous_close and previous_close > 0
                and price / previous_close - 1 >= limit - outcomes.LIMIT_TOLERANCE)


@dataclass(frozen=True)
class Ask:
    """What one target's move is asked for: the target, its benchmark, the article's moment and the push's."""

    inst: Instrument
    bench: Instrument
    published_at: datetime
    now: datetime
    target: str = ""


@dataclass(frozen=True)
class _Known:
    """The bars known at the push: daily ones through the last published day only (a source may hold today's
    bar while it is still forming), the benchmark's total-return ones with their twin's opens."""

    days: list[date]
    through: date
    own: dict[date, Bar]
    theirs: dict[date, Bar]
    twin: dict[date, Bar]
    limit: float | None
    live: bool  # an A-share session day whose bar is not published yet: today's 5-minute bars are the latest


def _known(market: Market, ask: Ask) -> _Known:
    local = ask.now.astimezone(SHANGHAI)
    today, cal = local.date(), ask.inst.calendar
    start = ask.published_at.astimezone(SHANGHAI).date() - LOOKBACK
    days = market.calendar(cal, start, today)
    through = outcomes.published_through(ask.now, cal)
    twin = basis.price_twin(ask.bench)
    return _Known(
        days, through, {d: b for d, b in market.daily(ask.inst, start, today).items() if d <= through},
        {d: b for d, b in _benchmark(market, ask.bench, start, today).items() if d <= through},
        {d: b for d, b in market.daily(twin, start, today).items() if d <= through} if twin else {},
        price_limit(ask.inst, ask.target, today),
        cal == CN and today in days and today > through and local.time() >= SESSION_OPEN[CN])


def _today_bars(market: Market, ask: Ask, known: _Known) -> tuple[list[MinuteBar], list[MinuteBar]]:
    """Today's 5-minute bars of the target and its benchmark that have started by the push."""
    today = ask.now.astimezone(SHANGHAI).date()
    own = [m for m in market.minutes(ask.inst, today) if m.start <= ask.now]
    theirs = [m for m in _bench_minutes(market, ask.bench, today, known.theirs, known.twin) if m.start <= ask.now]
    return own, theirs


def _previous_close(bars: Mapping[date, Bar], before: date) -> float | None:
    earlier = [d for d in bars if d < before]
    return bars[max(earlier)].close if earlier else None


def _past_reference(market: Market, ask: Ask, known: _Known, first: date, kind: str
                    ) -> tuple[float, float, bool] | Move:
    """The record's own reference (outcomes.reference) when its day's bars are published: (price, the
    benchmark's, whether it was at the upper limit), or the move's status when there is none."""
    cal = ask.inst.calendar
    intraday = None
    if kind == "intraday":
        own = market.minutes(ask.inst, first)
        theirs = _bench_minutes(market, ask.bench, first, known.theirs, known.twin)
        intraday = (own, theirs) if own and theirs else None
    ref = outcomes.reference(ask.published_at, cal, known.days, known.own, known.theirs, known.through,
                             intraday=intraday, limit=price_limit(ask.inst, ask.target, first))
    if ref.status == "ok" and ref.price is not None and ref.bench is not None:
        return ref.price, ref.bench, ref.limit_open == "up"
    traded = [d for d in known.days if first <= d <= known.through]
    if ref.status in ("suspended", "waiting") and any(d in known.theirs for d in traded) and not any(
            d in known.own for d in traded):
        return Move(SUSPENDED)  # the benchmark traded since, the target never did
    return Move(UNKNOWN)


def _live_reference(market: Market, ask: Ask, known: _Known, kind: str) -> tuple[float, float, bool] | Move:
    """Today's reference while today's bar is not published: the first 5-minute bar's open (the auction's
    price) for an article before the open, else the first bar starting at or after the article, never the
    session's first (outcomes.reference's rule)."""
    own, theirs = _today_bars(market, ask, known)
    if not theirs:
        return Move(UNKNOWN)
    if not own:
        return Move(SUSPENDED)
    today = ask.now.astimezone(SHANGHAI).date()
    session_open = datetime.combine(today, SESSION_OPEN[CN], SHANGHAI)
    bar = own[0] if kind == "open" else next(
        (m for m in own if m.start >= ask.published_at and m.start > session_open), None)
    bench = next((m for m in theirs if bar is not None and m.start == bar.start), None)
    if bar is None or bench is None:
        return Move(UNKNOWN)
    return bar.open, bench.open, _at_upper_limit(bar.open, _previous_close(known.own, today), known.limit)


def _latest(market: Market, ask: Ask, known: _Known) -> tuple[float, float, Move, bool] | Move:
    """The latest price the source has and the benchmark's at the same moment, when that was (a Move's ``at``
    or ``closed``), and whether the target is at its upper limit then."""
    if known.live:
        own, theirs = _today_bars(market, ask, known)
        if not own and theirs:
            return Move(SUSPENDED)
        common = sorted({m.start for m in own} & {m.start for m in theirs})
        if not common:
            return Move(UNKNOWN)
        at = common[-1]
        price = next(m.open for m in own if m.start == at)
        today = ask.now.astimezone(SHANGHAI).date()
        return (price, next(m.open for m in theirs if m.start == at), Move(MOVED, at=at),
                _at_upper_limit(price, _previous_close(known.own, today), known.limit))
    if not known.own or not known.theirs:
        return Move(UNKNOWN)
    day, bench_day = max(known.own), max(known.theirs)
    if day < bench_day:
        return Move(SUSPENDED)  # no trade on the last day the benchmark traded
    price = known.own[day].close
    return (price, known.theirs[day].close, Move(MOVED, closed=day),
            _at_upper_limit(price, _previous_close(known.own, day), known.limit))


def price_move(market: Market, ask: Ask) -> Move:
    """``ask``'s target's move since its article, beside its benchmark's (see the module's docstring)."""
    local = ask.now.astimezone(SHANGHAI)
    today, cal = local.date(), ask.inst.calendar
    known = _known(market, ask)
    first, kind = outcomes.first_moment(ask.published_at, cal, known.days)
    if first is None or first > today or (first == today and local.time() < SESSION_OPEN[cal]):
        return Move(NOT_OPEN)
    if first <= known.through:
        ref = _past_reference(market, ask, known, first, kind)
    elif first == today and known.live:
        ref = _live_reference(market, ask, known, kind)
    else:
        return Move(UNKNOWN)  # today's price without 5-minute bars (Hong Kong) is not published yet
    if isinstance(ref, Move):
        return ref
    latest = _latest(market, ask, known)
    if isinstance(latest, Move):
        return latest
    (price, bench_price, limited), (last, bench_last, when, limit_now) = ref, latest
    if not _sane(price, bench_price, last, bench_last):
        return Move(UNKNOWN)
    ret, bench_ret = last / price - 1, bench_last / bench_price - 1
    if abs(ret) > MAX_MOVE or abs(bench_ret) > MAX_MOVE:
        return Move(UNKNOWN)
    return Move(LIMIT_UP if limited or limit_now else MOVED, ret, bench_ret, when.at, when.closed)


# ------------------------------------------------------------------------------------- under a deadline


def ask_for(analysis: Mapping[str, Any], now: datetime) -> list[Ask]:
    """What an analysis's push asks: each coded target (coded_targets) against the record's benchmark for it,
    from the article's publication; none without a publication time."""
    published = analysis.get("published_at")
    if not isinstance(published, datetime) or published.tzinfo is None:
        return []
    return [Ask(inst, benchmark_for(inst, None), published, now, target) for target, inst in coded_targets(analysis)]


def gather(factory: Callable[[], Source], asks: Sequence[Ask], clock: Clock, seconds: float) -> list[Move]:
    """The move of each of ``asks``, asked in a worker thread and waited for on ``clock`` for ``seconds`` at
    most; an ask without an answer by then, or whose answer failed, is 「行情未知」. A worker still waiting
    on a slow source is left behind (a daemon: it holds nothing the push needs) and asks nothing after that
    answer."""
    found: dict[int, Move] = {}
    late = threading.Event()  # past the deadline: a worker left behind asks nothing more

    def work() -> None:
        try:
            market = Market(factory(), late)
        except Exception:  # a source that cannot even be built costs the push its prices only
            log.exception("push: the market-data source could not be built; prices unknown")
            return
        for i, ask in enumerate(asks):
            try:
                found[i] = price_move(market, ask)
            except SourceError as exc:
                log.warning("push: no price for %s: %s", ask.inst.key, exc)
            except Exception:  # hostile data is the price's problem, never the push's
                log.exception("push: the price of %s could not be worked out", ask.inst.key)

    if not asks:
        return []
    deadline = clock.monotonic() + seconds
    worker = threading.Thread(target=work, name="push-market", daemon=True)
    worker.start()
    while worker.is_alive():
        left = deadline - clock.monotonic()
        if left <= 0:
            late.set()
            log.warning("push: the market-data source gave no answer within %.1f s; prices unknown", seconds)
            break
        worker.join(min(POLL, left))
    return [found.get(i, Move(UNKNOWN)) for i in range(len(asks))]
