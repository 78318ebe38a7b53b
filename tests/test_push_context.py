"""Whether a pushed opportunity is still worth acting on: each coded target's move since its article beside
its benchmark's, on the recorded bars (include/radar_demo/data/market: 600519's and the CSI 300's 5-minute
bars of 2026-02-04, 600999 suspended 02-04..02-11, 300750 sealed at its +20 % limit on 02-05, Hong Kong's
half day on Lunar New Year's Eve 02-16), every figure worked out by hand from the recorded numbers; hostile
data is unknown; a slow or down source costs the push its prices only, within the deadline, on the radar's
clock.

Rooms: pushes/context.py.
"""

from __future__ import annotations

import math
import threading
from datetime import date, datetime

import pytest

from include.radar.core.clock import FixedClock
from include.radar.core.slots import SHANGHAI
from include.radar.market import Bar, SourceError
from include.radar.market.instruments import CSI300, CSI300TR, Instrument
from include.radar.market.recorded import recorded_source
from include.radar.pushes import context
from tests.conftest import REPO
from tests.track_fixtures import HandSource, weekdays

MARKET = REPO / "include" / "radar_demo" / "data" / "market"
MAOTAI, SUSPENDED, CATL = Instrument("SH", "600519", "stock"), Instrument("SH", "600999", "stock"), Instrument(
    "SZ", "300750", "stock")
TENCENT, HSI = Instrument("HK", "00700", "stock"), Instrument("HKI", "HSI", "index", "恒生指数")


def at(day: int, hour: int, minute: int = 0, month: int = 2) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=SHANGHAI)


def said(inst: Instrument, published: datetime, now: datetime, bench: Instrument = CSI300TR) -> str:
    market = context.Market(recorded_source(MARKET))
    move = context.price_move(market, context.Ask(inst, bench, published, now))
    return context.move_text(move, now.date())


def pct(value: float) -> str:
    return f"{value * 100:+.1f}%"


# 600519 on 02-04 (the article the evening before: its reference is 02-04's open, 9191.42, the auction's price
# and the open of the 5-minute bar starting 09:30; the CSI 300's 3945.44). A recorded bar's 时间 is its end.
@pytest.mark.parametrize(("hour", "minute", "price", "bench", "when"), [
    (10, 30, 9196.79, 3931.47, "10:30"),  # trading: the bar starting 10:30 (its row says 10:35)
    (12, 0, 9241.93, 3911.00, "11:25"),  # lunch: the morning's last bar, starting 11:25
    (14, 0, 9284.20, 3885.77, "14:00"),
])
def test_during_the_session_the_move_runs_from_the_open_to_the_latest_5_minute_bar(hour, minute, price, bench, when):
    expected = f"发布后 {pct(price / 9191.42 - 1)}（基准 {pct(bench / 3945.44 - 1)}，{when}）"
    assert said(MAOTAI, at(3, 20), at(4, hour, minute)) == expected
    assert expected in ("发布后 +0.1%（基准 -0.4%，10:30）", "发布后 +0.5%（基准 -0.9%，11:25）",
                        "发布后 +1.0%（基准 -1.5%，14:00）")


def test_the_source_holding_todays_daily_bar_during_the_session_is_not_read_as_its_close():
    """The recorded answers hold 02-04's whole bar (close 9257.45) at 10:30 already; the move is the 5-minute
    bar's, not the close's."""
    assert "+0.7%" not in said(MAOTAI, at(3, 20), at(4, 10, 30))


def test_after_the_close_and_before_the_next_open_the_move_runs_to_the_published_close():
    # the total-return benchmark's open is the price index's scaled by the day's ratio of closes: its move from
    # the open to the close is the price index's, 3917.78 / 3945.44
    expected = f"{pct(9257.45 / 9191.42 - 1)}（基准 {pct(3917.78 / 3945.44 - 1)}"
    assert said(MAOTAI, at(3, 20), at(4, 18)) == f"发布后 {expected}，收盘）" == "发布后 +0.7%（基准 -0.7%，收盘）"
    assert said(MAOTAI, at(3, 20), at(5, 7)) == f"发布后 {expected}，02-04 收盘）"


def test_a_push_late_at_night_and_after_midnight_reads_the_last_close_by_its_date():
    """A manual push at 23:30 reads the day's close as today's; at 00:05 the same close is yesterday's, dated;
    an article of 23:30 pushed at 00:05 waits for the coming open."""
    expected = f"发布后 {pct(9257.45 / 9191.42 - 1)}（基准 {pct(3917.78 / 3945.44 - 1)}"
    assert said(MAOTAI, at(3, 20), at(4, 23, 30)) == f"{expected}，收盘）"
    assert said(MAOTAI, at(3, 20), at(5, 0, 5)) == f"{expected}，02-04 收盘）"
    assert said(MAOTAI, at(4, 23, 30), at(5, 0, 5)) == "尚未开盘"


def test_an_article_whose_reference_is_still_to_come_says_not_open_yet():
    assert said(MAOTAI, at(4, 20), at(5, 7)) == "尚未开盘"  # 07:00: the reference is 02-05's open
    assert said(MAOTAI, at(5, 8), at(5, 9, 27)) == "尚未开盘"  # the auction is over, the session not begun


def test_an_article_during_the_session_is_measured_from_the_first_bar_after_it():
    # published 10:02: the bar starting 10:05 (its row says 10:10) is the first after it: 9200.73, 3945.30
    expected = f"发布后 {pct(9284.20 / 9200.73 - 1)}（基准 {pct(3885.77 / 3945.30 - 1)}，14:00）"
    assert said(MAOTAI, at(4, 10, 2), at(4, 14)) == expected == "发布后 +0.9%（基准 -1.5%，14:00）"


def test_a_suspended_target_says_so_during_and_after_the_session():
    assert said(SUSPENDED, at(3, 20), at(5, 10, 30)) == "停牌"
    assert said(SUSPENDED, at(3, 20), at(6, 18)) == "停牌"
    assert said(SUSPENDED, at(11, 20), at(12, 18)) != "停牌"  # traded again on 02-12


def test_a_target_sealed_at_its_upper_limit_says_a_reader_could_not_buy():
    # 300750 opened, traded and closed at 802.00 on 02-05, +20 % on 668.33: the reference a reader never had
    text = said(CATL, at(4, 20), at(5, 18))
    assert text == f"涨停，买不进（发布后 +0.0%，基准 {pct(3868.95 / 3929.32 - 1)}，收盘）"
    assert text.startswith("涨停，买不进") and "-1.5%" in text


def test_on_hong_kongs_half_day_the_close_is_the_latest_price_and_an_article_during_it_waits():
    # Lunar New Year's Eve (02-16): Hong Kong trades the morning only; the next session is after the holiday
    expected = f"发布后 {pct(519.64 / 524.72 - 1)}（基准 {pct(23621.72 / 23595.55 - 1)}，收盘）"
    assert said(TENCENT, at(13, 20), at(16, 18), HSI) == expected == "发布后 -1.0%（基准 +0.1%，收盘）"
    assert said(TENCENT, at(16, 10), at(16, 18), HSI) == "尚未开盘"
    # at 14:00 the half day's bar is not published yet (16:30): the last close is 02-13's
    earlier = f"发布后 {pct(522.65 / 514.87 - 1)}（基准 {pct(23558.03 / 23937.31 - 1)}，02-13 收盘）"
    assert said(TENCENT, at(12, 20), at(16, 14), HSI) == earlier


# ------------------------------------------------------------------------------------------- hostile data

DAYS = weekdays(date(2026, 3, 2), date(2026, 3, 13))


def hand(own: dict[date, Bar], bench: dict[date, Bar] | None = None) -> str:
    index = bench if bench is not None else {d: Bar(d, 4000.0, 4000.0, 4000.0, 4000.0) for d in DAYS}
    source = HandSource(DAYS, {MAOTAI.key: own, CSI300.key: index})
    move = context.price_move(context.Market(source), context.Ask(MAOTAI, CSI300, at(2, 20, month=3), at(4, 18, month=3)))
    return context.move_text(move, date(2026, 3, 4))


def bars(close_on_the_4th: float) -> dict[date, Bar]:
    out = {d: Bar(d, 100.0, 100.0, 100.0, 100.0) for d in DAYS[:2]}
    out[DAYS[2]] = Bar(DAYS[2], 100.0, None, None, close_on_the_4th)
    return out


def test_hand_bars_give_the_hand_computed_move():
    assert hand(bars(105.0)) == "发布后 +5.0%（基准 +0.0%，收盘）"


@pytest.mark.parametrize("close", [math.nan, -5.0, 1100.0, math.inf])
def test_a_price_no_market_could_print_is_unknown_never_a_figure(close):
    assert hand(bars(close)) == "行情未知"


def test_a_missing_benchmark_is_unknown():
    assert hand(bars(105.0), bench={}) == "行情未知"


# ------------------------------------------------------------------------------------------- the deadline


class SlowSource(HandSource):
    """Holds every daily request until the test lets it go (a source taking 60 s), the radar's clock running on."""

    def __init__(self) -> None:
        super().__init__(DAYS, {})
        self.go = threading.Event()

    daily_calls = 0

    def daily(self, instrument, start, end):
        self.daily_calls += 1
        self.go.wait(60)
        return []


class DownSource(HandSource):
    def daily(self, instrument, start, end):
        raise SourceError("connection refused")


def test_a_slow_source_costs_the_push_its_prices_only_within_the_deadline_on_the_radars_clock():
    clock = FixedClock(at(4, 10, 30, month=3), step=0.5)  # each look at the clock: half a second on
    slow = SlowSource()
    asks = [context.Ask(MAOTAI, CSI300, at(3, 20, month=3), at(4, 10, 30, month=3))] * 2
    start = clock.counter
    try:
        moves = context.gather(lambda: slow, asks, clock, 4)
    finally:
        slow.go.set()
    assert [m.status for m in moves] == [context.UNKNOWN] * 2
    assert clock.counter - start <= 4 + 0.5 * 2  # the deadline, give or take the looks at the clock
    assert context.move_text(moves[0], date(2026, 3, 4)) == "行情未知"
    for worker in [t for t in threading.enumerate() if t.name == "push-market"]:
        worker.join(10)
    assert slow.daily_calls == 1  # the worker left behind asked nothing more once its answer came


def test_a_down_source_or_one_that_cannot_be_built_is_unknown_at_once():
    clock = FixedClock(at(4, 10, 30, month=3), step=0.5)
    ask = context.Ask(MAOTAI, CSI300, at(3, 20, month=3), at(4, 10, 30, month=3))
    assert context.gather(lambda: DownSource(DAYS, {}), [ask], clock, 4) == [context.Move(context.UNKNOWN)]

    def broken():
        raise SourceError("no library")

    assert context.gather(broken, [ask], clock, 4) == [context.Move(context.UNKNOWN)]


def test_the_targets_priced_are_those_with_a_code_once_each():
    analysis = {"published_at": at(3, 20), "result_json": {"opportunities": [
        {"targets": ["贵州茅台（600519.SH）", "白酒", "600519"]}, {"targets": ["腾讯控股(0700.HK)", "801120"]}]}}
    assert [(a.inst.key, a.bench.key) for a in context.ask_for(analysis, at(4, 10))] == [
        ("SH:600519", "CSI:H00300"), ("HK:00700", "HKI:HSI")]
    assert context.ask_for({**analysis, "published_at": None}, at(4, 10)) == []


# ------------------------------------------------------------------------------------------- every channel


@pytest.mark.parametrize("url", ["wecombot://key", "bark://host/key", "tgram://123456:abc/789", "json://host/x"])
def test_the_new_lines_fit_each_channels_size_cut_between_items_with_the_link_whole(url):
    from include.radar.pushes import push
    from include.radar.pushes.message import Block, Message

    moves = [f"某公司{i} 60051{i}：" + context.move_text(context.Move(context.MOVED, 0.062, 0.008, at(4, 10, 25)),
                                                            date(2026, 2, 4)) for i in range(2)]
    record = "研究所 · 09:00 发布｜该号战绩 18/30，T+5 超额 +1.8%（-0.3%～+3.9%）"
    blocks = tuple(Block("论点" * 40, ("85 分｜看多｜个股", "标的：" + "某公司 600519、" * 4, *moves, "证据：「" + "证" * 60 + "」",
                                     record)) for _ in range(40))
    link = "https://radar.example.com/radar/analysis/1?exp=1&sig=" + "f" * 64
    message = Message("【机会提醒】10:30 发现 40 条（最高分 85）", [], link, blocks,
                      notes=("80–89 分的机会：已测 34 条，T+5 命中率 62%（45%–76%）",))
    [channel] = push.channels_from([url])
    form = push.channel_form(channel)
    title, body = push.fit(message, channel)
    assert form.fits(title, body) and link.replace("&", "&amp;" if form.written.startswith("html") else "&") in body
    assert "完整内容见链接" in body and "80–89 分的机会" in body  # cut between items, the band's line kept
    assert "发布后 +6.2%（基准 +0.8%，10:25）" in body
