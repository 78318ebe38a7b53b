"""How a pick did in the market, and what the record says (pure: bars in, figures out; no source, no database).

The reference price is the first price a reader could have traded at after the push, never one fixed before
it (:func:`reference`); the outcome at T+h is the close of the h-th trading day after it against the benchmark
over the same span, a call judged on its raw return in its direction (:func:`outcome`). Nothing is filled in
or dropped: a suspended horizon is marked at the last close (no survivorship), a price limit is noted beside
the figures. A summary gives a rate only from ``MIN_SAMPLE`` picks with a price, with its interval and a bound
that counts every unpriced call a miss (:class:`Group`). The rules, with examples: docs/track-record.md.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from include.radar.core.slots import SHANGHAI
from include.radar.market import Bar, MinuteBar
from include.radar.market.instruments import CN, HK

HORIZONS = (1, 5, 20)
# the week's record, on the weekly page and in its push alike: the horizon a week's picks have reached by Sunday
WEEK_HORIZON = 1
MIN_SAMPLE = 30  # no conclusion below this many measured picks
Z95 = 1.959964
SESSIONS = {CN: ((time(9, 30), time(11, 30)), (time(13, 0), time(15, 0))),
            HK: ((time(9, 30), time(12, 0)), (time(13, 0), time(16, 0)))}
OPEN_FIXED = {CN: time(9, 25), HK: time(9, 20)}  # the opening auction sets the day's open then
PUBLISHED_AT = {CN: time(15, 30), HK: time(16, 30)}  # a day's bar is read only after this
MAX_SUSPENDED_DAYS = 20
SUSPENDED_GRACE = 3  # trading days of the benchmark without the instrument before its missing bar is a suspension
LIMIT_TOLERANCE = 0.003  # an open within 0.3 points of the limit is at the limit (adjusted prices round)
SIGNS = {"bullish": 1, "bearish": -1}
DIRECTIONS = {"bullish": "看多", "bearish": "看空", "neutral": "中性", "watch": "关注"}
BANDS = (("90", "90–100", 90, 100), ("80", "80–89", 80, 89), ("70", "70–79", 70, 79), ("60", "60–69", 60, 69),
         ("0", "60 以下", 0, 59))


@dataclass(frozen=True)
class Reference:
    status: str  # ok | waiting | suspended | no_data
    day: date | None = None
    kind: str | None = None  # open | intraday | close
    price: float | None = None
    bench: float | None = None
    note: str = ""
    limit_open: str | None = None  # up | down


@dataclass(frozen=True)
class Outcome:
    horizon: int
    status: str  # waiting | measured | suspended | no_data
    end_day: date | None = None
    end_price: float | None = None
    bench_end: float | None = None
    ret: float | None = None
    bench_ret: float | None = None
    excess: float | None = None
    signed_excess: float | None = None
    hit: bool | None = None
    note: str = ""


def published_through(as_of: datetime, market: str) -> date:
    """The last day whose daily bar is published at ``as_of`` (a fetch made then holds it)."""
    local = as_of.astimezone(SHANGHAI)
    return local.date() if local.time() >= PUBLISHED_AT[market] else local.date() - timedelta(days=1)


def first_moment(picked_at: datetime, market: str, days: Sequence[date]) -> tuple[date | None, str]:
    """(the day, ``open`` or ``intraday``) of the first price a reader could have had after ``picked_at``.

    The open is fixed by the opening auction (09:25 in Shanghai and Shenzhen, 09:20 in Hong Kong): a push from
    then on is during the session, its reference a later price of that day. Hong Kong has no 5-minute bars and
    its half days (24 and 31 December, Lunar New Year's Eve) close at 12:00, when the day's close is set: a
    Hong Kong push during or after a session is measured from the next session's open. None: the calendar
    does not reach the next trading day yet."""
    local = picked_at.astimezone(SHANGHAI)
    day = local.date()
    at = bisect_left(days, day)
    if at < len(days) and days[at] == day:
        if local.time() < OPEN_FIXED[market]:
            return day, "open"
        if market == CN and local.time() < SESSIONS[market][1][1]:
            return day, "intraday"
    return _next_day(days, day), "open"


def during_session(picked_at: datetime, market: str, days: Sequence[date]) -> bool:
    """Whether ``picked_at``'s reference is a later price of the push day (first_moment): the 5-minute bars of
    that day are then needed."""
    return first_moment(picked_at, market, days)[1] == "intraday"


def _md(day: date) -> str:
    return f"{day.month}月{day.day}日"


def _next_day(days: Sequence[date], after: date) -> date | None:
    i = bisect_right(days, after)
    return days[i] if i < len(days) else None


def _at_limit(price: float, previous_close: float | None, limit: float | None) -> str | None:
    """'up' when ``price`` is at the day's upper price limit, 'down' at its lower one (within LIMIT_TOLERANCE:
    adjusted prices round), else None."""
    if limit is None or not previous_close or previous_close <= 0:
        return None
    change = price / previous_close - 1
    if change >= limit - LIMIT_TOLERANCE:
        return "up"
    if change <= -limit + LIMIT_TOLERANCE:
        return "down"
    return None


def _same(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def not_tradable(bar: Bar, price: float, kind: str, previous_close: float | None, limit: float | None) -> str | None:
    """'up' when a buyer could not have had ``price`` (the reference taken from ``bar``, of kind ``kind``)
    because the stock stayed at its upper limit, 'down' when a seller could not at the lower one, else None.

    A price near the limit is tradable when the bar traded beyond it: an open at the upper limit counts only
    when it is also the day's high (open = high = limit: sealed from the auction on); an intraday price or the
    close only when the day closed at the limit and that was its high (sealed to the close)."""
    side = _at_limit(price, previous_close, limit)
    if side is None:
        return None
    extreme = bar.high if side == "up" else bar.low
    if not _same(price, extreme):
        return None
    if kind == "open":
        return side
    return side if _same(bar.close, extreme) and _at_limit(bar.close, previous_close, limit) == side else None


LIMIT_NOTES = {("open", "up"): "涨停开盘：开盘即封涨停，读者可能买不进",
               ("open", "down"): "跌停开盘：开盘即封跌停，读者可能卖不出",
               ("later", "up"): "参考价在涨停价且封板至收盘，读者可能买不进",
               ("later", "down"): "参考价在跌停价且封板至收盘，读者可能卖不出"}


def _previous_close(bars: Mapping[date, Bar], day: date) -> float | None:
    previous = max((d for d in bars if d < day), default=None)
    return bars[previous].close if previous else None


def reference(
    picked_at: datetime, market: str, days: Sequence[date], bars: Mapping[date, Bar], bench: Mapping[date, Bar],
    through: date, *, intraday: tuple[Sequence[MinuteBar], Sequence[MinuteBar]] | None = None,
    limit: float | None = None,
) -> Reference:
    """The first price a reader could have traded at after ``picked_at`` (see the module's docstring).

    ``days``: the market's trading days, sorted; ``bars``/``bench``: daily bars by day; ``through``: the last day
    whose bars are known (published and fetched: published_through); ``intraday``: the 5-minute bars of the push
    day, the instrument's and the benchmark's (None: not both to be had); ``limit``: the instrument's price limit
    that day."""
    first, kind = first_moment(picked_at, market, days)
    if first is None:
        return Reference("waiting", note="等待下一个交易日开盘（交易日历尚未公布）")
    if first > through:
        return Reference("waiting", day=first, note=f"等待 {_md(first)} 开盘")
    if kind == "intraday" and first in bars:
        return _intraday_reference(picked_at, market, first, bars, bench, intraday, limit)
    return _open_reference(first, kind, days, bars, bench, through, limit)


def _intraday_reference(picked_at: datetime, market: str, day: date, bars: Mapping[date, Bar],
                        bench: Mapping[date, Bar], intraday: tuple[Sequence[MinuteBar], Sequence[MinuteBar]] | None,
                        limit: float | None) -> Reference:
    """A push during the session: the first 5-minute bar that starts at or after it, never the one starting at
    the session's open (its open is the auction's price, fixed before a push after 09:25); else the close."""
    local = picked_at.astimezone(SHANGHAI)
    session_open = datetime.combine(day, SESSIONS[market][0][0], SHANGHAI)
    own, theirs = intraday or ((), ())
    minute = next((m for m in own if m.start >= local and m.start > session_open
                   and m.start.astimezone(SHANGHAI).date() == day), None)
    bench_minute = next((m for m in theirs if minute and m.start == minute.start), None)
    previous = _previous_close(bars, day)
    if minute is not None and bench_minute is not None:
        side = not_tradable(bars[day], minute.open, "intraday", previous, limit)
        notes = [f"盘中推送：{minute.start:%H:%M} 起第一根 5 分钟线的开盘价"] + ([LIMIT_NOTES["later", side]] if side else [])
        return Reference("ok", day, "intraday", minute.open, bench_minute.open, "；".join(notes), side)
    if day not in bench:
        return Reference("no_data", day, note=f"基准指数缺少 {_md(day)} 的行情")
    side = not_tradable(bars[day], bars[day].close, "close", previous, limit)
    notes = ["盘中推送，没有推送当日的 5 分钟行情：参考价取当日收盘价"] + ([LIMIT_NOTES["later", side]] if side else [])
    return Reference("ok", day, "close", bars[day].close, bench[day].close, "；".join(notes), side)


def _open_reference(first: date, kind: str, days: Sequence[date], bars: Mapping[date, Bar],
                    bench: Mapping[date, Bar], through: date, limit: float | None) -> Reference:
    """The open of the first day the instrument trades, from ``first`` on (a suspension moves it)."""
    start = bisect_left(days, first)
    for offset, candidate in enumerate(days[start:start + MAX_SUSPENDED_DAYS + 1]):
        if candidate > through:
            if not market_traded_without(first, days, bench, through):  # the source may not have the day yet
                return Reference("waiting", day=first, note=f"等待 {_md(first)} 的行情")
            return Reference("waiting", day=first, note=f"{_md(first)} 起停牌，等待复牌")
        bar = bars.get(candidate)
        if bar is None or bar.open is None:
            continue
        if candidate not in bench or bench[candidate].open is None:
            return Reference("no_data", candidate, note=f"基准指数缺少 {_md(candidate)} 的行情")
        side = not_tradable(bar, bar.open, "open", _previous_close(bars, candidate), limit)
        notes = []
        if offset:
            notes.append(f"{_md(first)} 起停牌，参考价取复牌日 {_md(candidate)} 的开盘价")
        if kind == "intraday" and not offset:
            notes.append("盘中推送")
        if side:
            notes.append(LIMIT_NOTES["open", side])
        return Reference("ok", candidate, "open", bar.open, bench[candidate].open, "；".join(notes), side)
    return Reference("suspended", first, note=f"推送后 {MAX_SUSPENDED_DAYS} 个交易日内没有成交（停牌）")


def market_traded_without(day: date, days: Sequence[date], bench: Mapping[date, Bar], through: date) -> bool:
    """Whether the benchmark traded on SUSPENDED_GRACE trading days from ``day`` on (known by ``through``): only
    then is an instrument without a bar on ``day`` and none later suspended or delisted, not a source that has
    not published that day yet (a fetch at 22:00 may not hold the day's bar)."""
    seen = 0
    for d in days[bisect_left(days, day):]:
        if d > through:
            break
        seen += d in bench
        if seen >= SUSPENDED_GRACE:
            return True
    return False


def outcome(
    ref: Reference, horizon: int, days: Sequence[date], bars: Mapping[date, Bar], bench: Mapping[date, Bar],
    through: date, direction: str,
) -> Outcome:
    """The pick's outcome ``horizon`` trading days after its reference day (see the module's docstring)."""
    if ref.status != "ok" or ref.day is None or ref.price is None or ref.bench is None:
        status = "waiting" if ref.status == "waiting" else ref.status
        return Outcome(horizon, status, note=ref.note)
    i = bisect_left(days, ref.day) + horizon
    if i >= len(days):
        return Outcome(horizon, "waiting", note=f"等待 T+{horizon}（交易日历尚未公布）")
    end = days[i]
    if end > through:
        return Outcome(horizon, "waiting", end, note=f"等待 {_md(end)} 收盘")
    bar = bars.get(end)
    if bar is None:
        if any(end < d <= through for d in bars):
            why = f"{_md(end)} 停牌，当日没有成交"
        elif not market_traded_without(end, days, bench, through):  # the source may simply not have it yet
            return Outcome(horizon, "waiting", end, note=f"等待 {_md(end)} 的行情（行情源尚未提供）")
        else:
            last = max((d for d in bars if d <= through), default=None)
            why = f"自 {_md(last) if last else '?'} 后没有成交（停牌或退市）"
        last = max((d for d in bars if ref.day <= d < end), default=None)
        if last is None:
            return Outcome(horizon, "suspended", end, note=why)
        if end not in bench:
            return Outcome(horizon, "no_data", end, note=f"基准指数缺少 {_md(end)} 的行情")
        return _figures(ref, horizon, "suspended", end, bars[last].close, bench[end].close, direction,
                        f"{why}：按 {_md(last)} 的最后收盘价计")
    if end not in bench:
        return Outcome(horizon, "no_data", end, note=f"基准指数缺少 {_md(end)} 的行情")
    return _figures(ref, horizon, "measured", end, bar.close, bench[end].close, direction)


def _figures(ref: Reference, horizon: int, status: str, end: date, price: float, bench_price: float, direction: str,
             note: str = "") -> Outcome:
    assert ref.price is not None and ref.bench is not None
    ret = price / ref.price - 1
    bench_ret = bench_price / ref.bench - 1
    excess = ret - bench_ret
    sign = SIGNS.get(direction)
    return Outcome(horizon, status, end, price, bench_price, ret, bench_ret, excess,
                   sign * excess if sign else None, (sign * ret > 0) if sign else None, note)


# ------------------------------------------------------------------------------------------- the record


def wilson(hits: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95 % by default); (0, 1) for no sample."""
    if n <= 0:
        return 0.0, 1.0
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    return (0.0 if hits == 0 else min(low, p)), (1.0 if hits == n else max(high, p))  # exact at the ends


def mean_interval_of(n: int, total: float, squares: float, z: float = Z95) -> tuple[float, float, float]:
    """mean_interval from a sample's size, sum and sum of squares (what SQL aggregates hand over)."""
    if n <= 0:
        return 0.0, 0.0, 0.0
    mean = total / n
    if n == 1:
        return mean, mean, mean
    variance = max(0.0, (squares - n * mean * mean) / (n - 1))
    half = z * math.sqrt(variance / n)
    return mean, mean - half, mean + half


@dataclass
class Group:
    """The record of one group of picks at one horizon. Every pick of the group is counted somewhere: in the
    sample (a price and a direction), among the directionless, the unpriced, the waiting or the unmeasurable."""

    key: str
    label: str
    picks: int = 0  # every pick made in the group
    measured: int = 0  # measured at the horizon (with or without a direction)
    directional: int = 0  # priced (measured, or suspended and marked), bullish or bearish: the hit rate's sample
    hits: int = 0
    waiting: int = 0
    unmeasurable: int = 0
    suspended: int = 0  # every suspended horizon, marked at its last close or not
    no_data: int = 0
    undirected: int = 0  # priced, but neutral or watch
    marked: int = 0  # directional and suspended: marked at the last close, in the sample
    marked_hits: int = 0
    biased: int = 0  # in the sample, against a price-index benchmark (market/basis.py: excess biased upward)
    unpriced: int = 0  # suspended or no data without a price (never traded after the push, no data)
    unpriced_calls: int = 0  # of them, bullish or bearish: misses in the bound (hit_floor)
    excess_sum: float = 0.0  # of the directional picks' signed excess returns
    excess_squares: float = 0.0
    plain_n: int = 0  # directionless priced picks with an excess return (shown in the direction table)
    plain_sum: float = 0.0
    plain_squares: float = 0.0

    @property
    def conclusive(self) -> bool:
        return self.directional >= MIN_SAMPLE

    @property
    def hit_rate(self) -> float | None:
        return self.hits / self.directional if self.directional else None

    @property
    def hit_interval(self) -> tuple[float, float]:
        return wilson(self.hits, self.directional)

    @property
    def hit_floor(self) -> float | None:
        """The survivorship bound: the hit rate with every suspended call (even one up at its last close) and
        every directional call without a price counted as a miss."""
        n = self.directional + self.unpriced_calls
        return (self.hits - self.marked_hits) / n if n else None

    @property
    def mean_excess(self) -> tuple[float, float, float] | None:
        return mean_interval_of(self.directional, self.excess_sum, self.excess_squares) if self.directional else None

    def add(self, row: Mapping[str, Any]) -> None:
        """One pick's row: ``pick_status``, ``direction`` and its outcome's ``status``, ``hit``, ``excess``,
        ``signed_excess`` (None: not computed yet)."""
        self.picks += 1
        status = row.get("status")
        if row.get("pick_status") != "measurable":
            self.unmeasurable += 1
            return
        self.measured += status == "measured"
        self.suspended += status == "suspended"
        self.no_data += status == "no_data"
        priced = status in ("measured", "suspended") and row.get("excess") is not None
        if priced and row.get("hit") is not None:
            value = float(row["signed_excess"])
            self.directional += 1
            self.hits += bool(row["hit"])
            self.excess_sum += value
            self.excess_squares += value * value
            self.biased += bool(row.get("biased"))
            if status == "suspended":
                self.marked += 1
                self.marked_hits += bool(row["hit"])
        elif priced:
            value = float(row["excess"])
            self.undirected += 1
            self.plain_n, self.plain_sum, self.plain_squares = (
                self.plain_n + 1, self.plain_sum + value, self.plain_squares + value * value)
        elif status in ("suspended", "no_data"):
            self.unpriced += 1
            self.unpriced_calls += row.get("direction") in SIGNS
        elif status == "measured":  # a measured row always has its figures; counted, never dropped
            self.undirected += 1
        else:
            self.waiting += 1

    @classmethod
    def from_sums(cls, key: str, label: str, row: Mapping[str, Any]) -> Group:
        """A group from SQL aggregates (store.track.summary_groups) instead of one row per pick."""
        fields = ("picks", "measured", "directional", "hits", "waiting", "unmeasurable", "suspended", "no_data",
                  "undirected", "plain_n", "marked", "marked_hits", "biased", "unpriced", "unpriced_calls")
        sums = ("excess_sum", "excess_squares", "plain_sum", "plain_squares")
        return cls(key, label, **{f: int(row.get(f) or 0) for f in fields}, **{f: float(row.get(f) or 0) for f in sums})


def percent(value: float | None, signed: bool = True) -> str:
    """A figure of the record as every page and push writes it: a return signed to 0.1 point (+1.8%), a rate
    (signed=False) to the point (62%); — for none."""
    if value is None:
        return "—"
    return f"{value * 100:+.1f}%" if signed else f"{value * 100:.0f}%"


def band_of(score: int) -> tuple[str, str]:
    for key, label, low, high in BANDS:
        if low <= score <= high:
            return key, label
    return BANDS[-1][0], BANDS[-1][1]


def overall(rows: Iterable[Mapping[str, Any]]) -> Group:
    """One group counted pick by pick (Group.add): the definition the SQL aggregates (store.track) are tested
    against."""
    group = Group("all", "全部")
    for row in rows:
        group.add(row)
    return group


# ------------------------------------------------------------------------------------------- the rank

OUTCOME_PRIOR = 30  # picks: the mean is shrunk by n / (n + OUTCOME_PRIOR) toward zero
POINTS_PER_PERCENT = 1.0  # rank points per percentage point of shrunk mean signed excess return (T+5)
RANK_HORIZON = 5


def outcome_points(n: int, mean_signed_excess: float, min_picks: int, cap: int) -> int:
    """Rank points a key (an account, a type) earns from its measured picks: the mean signed excess return at
    T+5 in percent, shrunk toward zero by n / (n + OUTCOME_PRIOR), one point per percent, capped at ±cap;
    nothing below ``min_picks`` measured picks."""
    if n < max(1, min_picks) or not math.isfinite(mean_signed_excess):
        return 0
    shrunk = mean_signed_excess * 100 * n / (n + OUTCOME_PRIOR) * POINTS_PER_PERCENT
    return int(max(-cap, min(cap, round(shrunk))))
