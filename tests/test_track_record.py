"""The track record — every pick followed in the market, from recorded prices (no network).

The recorded answers (include/radar_demo/data/market, tools/market_fixtures.py) have the shapes of akshare's
calls; their numbers are made up, with stated situations: the Spring Festival closure (2026-02-16..23), 600999
suspended 02-04..02-11, 000018 without trades after 02-13, 300750 opening at its limit on 02-05, 5-minute bars
for 600519 and the CSI 300 on 02-04.

Rooms: market/, outcomes.py, track_record.py, steps/track_record.py, store/track.py, ranking.py (the outcome
part), web/routes/record.py, web/views/record.py.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from include.radar import store
from include.radar.core import db
from include.radar.core.clock import FixedClock
from include.radar.core.slots import SHANGHAI
from include.radar.market import SourceError, outcomes
from include.radar.market.akshare_source import LibrarySource
from include.radar.market.instruments import CN, CSI300, Instrument, name_index, parse_code, resolve
from include.radar.market.recorded import RecordedCaller, recorded_source
from include.radar.report import track_record
from include.radar.steps.runtime import Runtime
from include.radar_demo import run as demo_run
from tests.conftest import REPO, connect
from tests.slotrun import article, run_slot, shanghai

DATA = REPO / "include" / "radar_demo" / "data" / "market"
SOURCE = recorded_source(DATA)
CAL = SOURCE.calendar()
END = date(2026, 4, 30)


def _bars(inst: Instrument) -> dict:
    return {b.day: b for b in SOURCE.daily(inst, date(2026, 1, 1), END)}


MOUTAI, PINGAN_SUSPENDED, DELISTED, CATL = (Instrument("SH", "600519", "stock"), Instrument("SH", "600999", "stock"),
                                            Instrument("SZ", "000018", "stock"), Instrument("SZ", "300750", "stock"))
BENCH = _bars(CSI300)


def _ref(inst: Instrument, at: datetime, **kw):
    return outcomes.reference(at, CN, CAL, _bars(inst), BENCH, END, **kw)


# ------------------------------------------------------------------------------------------- the reference


def test_a_push_at_22_00_is_measured_from_the_next_open_and_one_at_10_30_from_the_next_5_minute_bar() -> None:
    evening = _ref(MOUTAI, shanghai(2026, 2, 4, 22), limit=0.1)
    assert (evening.status, evening.day, evening.kind) == ("ok", date(2026, 2, 5), "open")
    assert evening.price == _bars(MOUTAI)[date(2026, 2, 5)].open and evening.bench == BENCH[date(2026, 2, 5)].open
    minutes = SOURCE.intraday(MOUTAI, date(2026, 2, 4))
    bench_minutes = SOURCE.intraday(CSI300, date(2026, 2, 4))
    morning = _ref(MOUTAI, shanghai(2026, 2, 4, 10, 30), intraday=(minutes, bench_minutes))
    first_after = next(m for m in minutes if m.start >= shanghai(2026, 2, 4, 10, 30))
    assert (morning.day, morning.kind, morning.price) == (date(2026, 2, 4), "intraday", first_after.open)
    assert first_after.start == shanghai(2026, 2, 4, 10, 30)  # the bar 10:30–10:35 (akshare labels it 10:35)
    assert morning.bench == next(m.open for m in bench_minutes if m.start == first_after.start)
    # before the open: that day's open; without 5-minute bars: the day's close, said so (never a price before)
    assert _ref(MOUTAI, shanghai(2026, 2, 4, 7, 5)).kind == "open"
    fallback = _ref(MOUTAI, shanghai(2026, 2, 4, 10, 30))
    assert fallback.kind == "close" and fallback.price == _bars(MOUTAI)[date(2026, 2, 4)].close
    assert "收盘价" in fallback.note


def test_a_holiday_between_the_push_and_t_plus_1_moves_the_reference_to_the_next_trading_day() -> None:
    ref = _ref(MOUTAI, shanghai(2026, 2, 13, 22))  # the Friday before the Spring Festival closure
    assert ref.day == date(2026, 2, 24)
    t1 = outcomes.outcome(ref, 1, CAL, _bars(MOUTAI), BENCH, END, "bullish")
    assert (t1.status, t1.end_day) == ("measured", date(2026, 2, 25))
    # the calendar is the library's (recorded tool_trade_date_hist_sina), not a list written here
    assert date(2026, 2, 17) not in CAL and date(2026, 2, 24) in CAL


def test_a_suspended_stock_is_measured_from_its_reopening_and_a_suspended_horizon_is_stated() -> None:
    bars = _bars(PINGAN_SUSPENDED)
    ref = _ref(PINGAN_SUSPENDED, shanghai(2026, 2, 3, 22))
    assert (ref.day, ref.kind) == (date(2026, 2, 12), "open") and "停牌" in ref.note and "复牌" in ref.note
    early = _ref(PINGAN_SUSPENDED, shanghai(2026, 1, 30, 22))
    t1, t5 = (outcomes.outcome(early, h, CAL, bars, BENCH, END, "bullish") for h in (1, 5))
    assert t1.status == "measured"
    assert (t5.status, t5.end_day) == ("suspended", date(2026, 2, 9)) and "停牌" in t5.note
    gone = _ref(DELISTED, shanghai(2026, 2, 2, 22))
    t20 = outcomes.outcome(gone, 20, CAL, _bars(DELISTED), BENCH, END, "bullish")
    assert t20.status == "suspended" and "退市" in t20.note and "2月13日" in t20.note


def test_a_suspended_or_delisted_horizon_is_marked_at_its_last_close_and_stays_in_the_sample() -> None:
    """No survivorship: a call on a stock that stopped trading is judged at the last price a holder had (the last
    close on or before the horizon's day) against the benchmark's close of that day, and counts."""
    bars = _bars(PINGAN_SUSPENDED)  # suspended 02-04..02-11
    early = _ref(PINGAN_SUSPENDED, shanghai(2026, 1, 30, 22))
    t5 = outcomes.outcome(early, 5, CAL, bars, BENCH, END, "bullish")
    last = bars[date(2026, 2, 3)].close
    assert t5.status == "suspended" and t5.end_price == last and "2月3日" in t5.note and "最后收盘价" in t5.note
    assert t5.ret == pytest.approx(last / early.price - 1)
    assert t5.bench_ret == pytest.approx(BENCH[date(2026, 2, 9)].close / early.bench - 1)
    assert t5.excess == pytest.approx(t5.ret - t5.bench_ret) and t5.hit == (t5.ret > 0)
    delisted = _bars(DELISTED)
    gone = _ref(DELISTED, shanghai(2026, 2, 2, 22))
    for direction, sign in (("bullish", 1), ("bearish", -1)):
        t20 = outcomes.outcome(gone, 20, CAL, delisted, BENCH, END, direction)
        assert t20.end_price == delisted[date(2026, 2, 13)].close and t20.hit == (sign * t20.ret > 0)
        assert t20.signed_excess == pytest.approx(sign * t20.excess)
    never = outcomes.Reference("suspended", date(2026, 2, 4), note="推送后 20 个交易日内没有成交（停牌）")
    unpriced = outcomes.outcome(never, 5, CAL, bars, BENCH, END, "bullish")
    assert (unpriced.status, unpriced.ret, unpriced.hit) == ("suspended", None, None)  # no price a reader had


def test_every_directional_call_is_in_a_denominator_and_the_bound_counts_the_unpriced_as_misses() -> None:
    row = {"pick_status": "measurable", "direction": "bullish"}
    rows = [{**row, "status": "measured", "hit": i < 10, "excess": 0.01, "signed_excess": 0.01} for i in range(30)]
    rows += [{**row, "status": "suspended", "hit": True, "excess": 0.02, "signed_excess": 0.02},  # marked
             {**row, "status": "suspended", "hit": False, "excess": -0.2, "signed_excess": -0.2},
             {**row, "status": "suspended", "hit": None, "excess": None, "signed_excess": None},  # never traded
             {**row, "status": "no_data", "hit": None, "excess": None, "signed_excess": None},
             {**row, "direction": "watch", "status": "no_data", "hit": None, "excess": None, "signed_excess": None}]
    group = outcomes.overall(rows)
    assert (group.directional, group.hits, group.marked, group.marked_hits) == (32, 11, 2, 1)
    assert (group.unpriced, group.unpriced_calls, group.suspended, group.no_data) == (3, 2, 3, 2)
    assert group.hit_rate == pytest.approx(11 / 32)
    assert group.mean_excess[0] == pytest.approx((30 * 0.01 + 0.02 - 0.2) / 32)
    assert group.hit_floor == pytest.approx(10 / 34)  # the marked hit and the two unpriced calls as misses


def test_chinext_and_star_etfs_have_the_20_percent_limit_and_an_unnamed_shenzhen_etf_none() -> None:
    from include.radar.market.instruments import a_share, price_limit

    star = a_share("588000", None)
    assert (star.key, star.kind, price_limit(star)) == ("SH:588000", "etf", 0.20)  # 588xxx: STAR-market ETFs
    chinext = a_share("159915", None)
    assert price_limit(chinext, "创业板ETF（159915）") == 0.20
    assert price_limit(Instrument("SZ", "159915", "etf", "创业板ETF易方达")) == 0.20
    assert price_limit(Instrument("SZ", "159781", "etf"), "双创50ETF") == 0.20
    assert price_limit(Instrument("SZ", "159919", "etf"), "沪深300ETF（159919）") == 0.10  # 159xxx is not ChiNext
    assert price_limit(chinext, "159915") is None  # a bare Shenzhen ETF code does not tell its limit
    assert price_limit(a_share("510300", None)) == 0.10 and price_limit(Instrument("SZ", "300750", "stock")) == 0.20


def test_an_open_at_the_upper_limit_is_noted_as_not_buyable() -> None:
    ref = _ref(CATL, shanghai(2026, 2, 4, 22), limit=0.2)
    assert ref.day == date(2026, 2, 5) and ref.limit_open == "up" and "涨停开盘" in ref.note
    assert _ref(CATL, shanghai(2026, 2, 5, 22), limit=0.2).limit_open is None


def test_a_bearish_call_is_right_when_the_price_falls() -> None:
    ref = _ref(MOUTAI, shanghai(2026, 2, 4, 22))
    bars = _bars(MOUTAI)
    bull, bear, watch = (outcomes.outcome(ref, 5, CAL, bars, BENCH, END, d) for d in ("bullish", "bearish", "watch"))
    assert bull.ret == bear.ret and bull.ret < 0  # the price fell over these five days
    assert (bull.hit, bear.hit, watch.hit) == (False, True, None)
    assert bear.signed_excess == pytest.approx(-bear.excess) and bull.signed_excess == pytest.approx(bull.excess)
    assert bull.excess == pytest.approx(bull.ret - bull.bench_ret) and watch.signed_excess is None


def test_a_horizon_not_yet_published_waits_and_a_bar_is_read_only_after_the_close() -> None:
    ref = outcomes.reference(shanghai(2026, 2, 4, 22), CN, CAL, _bars(MOUTAI), BENCH, date(2026, 2, 9))
    assert outcomes.outcome(ref, 1, CAL, _bars(MOUTAI), BENCH, date(2026, 2, 9), "bullish").status == "measured"
    later = outcomes.outcome(ref, 5, CAL, _bars(MOUTAI), BENCH, date(2026, 2, 9), "bullish")
    assert (later.status, later.end_day) == ("waiting", date(2026, 2, 12))
    assert outcomes.published_through(shanghai(2026, 2, 9, 15, 0), CN) == date(2026, 2, 8)
    assert outcomes.published_through(shanghai(2026, 2, 9, 22, 0), CN) == date(2026, 2, 9)


@settings(max_examples=150, deadline=None)
@given(st.datetimes(min_value=datetime(2026, 1, 20), max_value=datetime(2026, 3, 31)), st.sampled_from([
    "bullish", "bearish", "watch"]))
def test_no_look_ahead_the_reference_is_never_before_the_push_nor_an_outcome_after_what_is_known(at, direction) -> None:
    picked = at.replace(tzinfo=SHANGHAI)
    bars = _bars(MOUTAI)
    minutes = SOURCE.intraday(MOUTAI, date(2026, 2, 4))
    through = date(2026, 3, 10)
    ref = outcomes.reference(picked, CN, CAL, bars, BENCH, through,
                             intraday=(minutes, SOURCE.intraday(CSI300, date(2026, 2, 4))))
    if ref.status == "ok":
        assert ref.day >= picked.date() and ref.day <= through
        if ref.kind == "open":
            assert ref.day > picked.date() or picked.time() < outcomes.OPEN_FIXED[CN]  # before the auction
        if ref.kind == "intraday":
            assert ref.day == picked.date() and any(m.start >= picked and m.open == ref.price for m in minutes)
            assert ref.price != minutes[0].open or minutes[0].open == minutes[1].open  # never the auction's
    for h in outcomes.HORIZONS:
        result = outcomes.outcome(ref, h, CAL, bars, BENCH, through, direction)
        assert result.status in ("waiting", "measured", "suspended", "no_data")
        if result.status == "measured":
            assert ref.day < result.end_day <= through


# ------------------------------------------------------------------------------------------- the statistics


def test_the_wilson_interval_has_its_known_values() -> None:
    assert outcomes.wilson(7, 30) == pytest.approx((0.1179, 0.4093), abs=1e-4)
    assert outcomes.wilson(0, 30) == pytest.approx((0.0, 0.1135), abs=1e-4)
    assert outcomes.wilson(30, 30) == pytest.approx((1 - 0.1135, 1.0), abs=1e-4)
    assert outcomes.wilson(15, 30) == pytest.approx((0.3315, 0.6685), abs=1e-4)


@given(st.integers(0, 500), st.integers(1, 500))
def test_the_wilson_interval_holds_the_rate_and_stays_in_0_1(hits, n) -> None:
    hits = min(hits, n)
    low, high = outcomes.wilson(hits, n)
    assert 0 <= low <= hits / n <= high <= 1


@given(st.lists(st.floats(-0.5, 0.5), min_size=2, max_size=60))
def test_the_mean_interval_holds_the_mean(values) -> None:
    mean, low, high = outcomes.mean_interval_of(len(values), sum(values), sum(v * v for v in values))
    assert low <= mean + 1e-12 and mean <= high + 1e-12


@given(st.integers(0, 400), st.floats(-0.3, 0.3), st.integers(1, 100))
def test_the_outcome_part_is_capped_shrunk_and_silent_below_the_minimum(n, mean, minimum) -> None:
    points = outcomes.outcome_points(n, mean, minimum, 6)
    assert -6 <= points <= 6
    if n < minimum:
        assert points == 0
    else:  # shrunk toward zero: never more than the unshrunk mean in points, and of its sign
        assert abs(points) <= abs(mean * 100) + 0.5 and points * mean >= 0


def test_a_group_below_30_measured_picks_draws_no_conclusion_and_every_pick_is_counted() -> None:
    rows = [{"pick_status": "measurable", "status": "measured", "hit": i % 3 == 0, "excess": 0.01,
             "signed_excess": 0.01 if i % 3 == 0 else -0.01} for i in range(29)]
    rows += [{"pick_status": "unmeasurable", "status": None}, {"pick_status": "measurable", "status": "waiting"},
             {"pick_status": "measurable", "status": "suspended"}]
    group = outcomes.overall(rows)
    assert (group.picks, group.directional, group.unmeasurable, group.waiting, group.suspended) == (32, 29, 1, 1, 1)
    assert not group.conclusive
    group.add({"pick_status": "measurable", "status": "measured", "hit": True, "excess": 0.02, "signed_excess": 0.02})
    assert group.conclusive and group.hit_rate == pytest.approx(11 / 30)


# ------------------------------------------------------------------------------------------- resolution


NAMES = name_index(SOURCE.listings())


def test_codes_in_every_spelling_name_one_instrument() -> None:
    keys = {parse_code(t).key for t in ("600519", "600519.SH", "SH600519", "贵州茅台（600519）", "sh600519")}
    assert keys == {"SH:600519"}
    assert parse_code("0700.HK").key == parse_code("HK00700").key == parse_code("00700").key == "HK:00700"
    assert parse_code("SH000300").kind == "index" and parse_code("000300").kind == "stock"  # bare: the SZ stock
    assert parse_code("510300").kind == "etf" and parse_code("399006").kind == "index"
    assert parse_code("600519.SZ") is None and parse_code("某龙头(688xxx)") is None


def test_a_company_name_that_maps_to_two_codes_is_not_measured_and_the_reason_names_both() -> None:
    found = resolve([{"type": "stock", "targets": ["中国平安"], "direction": "bullish"}], NAMES)
    assert found.instrument is None and "SH:601318" in found.reason and "HK:02318" in found.reason
    unique = resolve([{"type": "stock", "targets": ["宁德时代", "动力电池"], "direction": "bullish"}], NAMES)
    assert unique.instrument.key == "SZ:300750" and unique.benchmark.key == "SW:801737"  # the sector's index


def test_a_sector_without_an_index_is_not_measurable_with_the_reason() -> None:
    found = resolve([{"type": "sector", "targets": ["人形机器人"], "direction": "bullish"}], NAMES)
    assert found.instrument is None and found.reason == "「人形机器人」没有对应的行业指数"
    mapped = resolve([{"type": "sector", "targets": ["半导体设备"], "direction": "bullish"}], NAMES)
    assert mapped.instrument.key == "SW:801081" and mapped.benchmark == CSI300
    copper = resolve([{"type": "commodity", "targets": ["沪铜"]}], NAMES)
    assert copper.instrument is None and "商品" in copper.reason


def test_recorded_answers_have_the_columns_of_the_library_calls() -> None:
    daily = json.loads((DATA / "stock_zh_a_hist" / "600519.json").read_text(encoding="utf-8"))[0]
    assert list(daily) == ["日期", "股票代码", "开盘", "收盘", "最高", "最低", "成交量", "成交额", "振幅", "涨跌幅", "涨跌额",
                           "换手率"]
    sw = json.loads((DATA / "index_hist_sw" / "801081.json").read_text(encoding="utf-8"))[0]
    assert list(sw) == ["代码", "日期", "收盘", "开盘", "最高", "最低", "成交量", "成交额"]
    caller = RecordedCaller(DATA)
    LibrarySource(caller).daily(MOUTAI, date(2026, 2, 2), date(2026, 2, 6))
    assert caller.calls == [("stock_zh_a_hist", {"symbol": "600519", "period": "daily", "adjust": "hfq",
                                                 "start_date": "20260202", "end_date": "20260206"})]


# ------------------------------------------------------------------------------- on real pipeline data


def _answer(score: int, opportunity: dict, summary: str = "龙头订单回暖。") -> str:
    return json.dumps({"score": score, "has_opportunity": score >= 60, "top_type": opportunity["type"],
                       "summary": summary, "opportunities": [{
                           "name": "机会", "horizon": "1-3个月", "catalyst": "订单", "risks": ["波动"],
                           "evidence": ["订单同比增长"], "confidence": 0.7, **opportunity}]}, ensure_ascii=False)


ANSWERS = {
    "茅台提价": _answer(82, {"type": "stock", "targets": ["贵州茅台（600519）", "白酒"], "direction": "bullish"}),
    "平安看空": _answer(75, {"type": "stock", "targets": ["中国平安"], "direction": "bearish"}),
    "机器人": _answer(70, {"type": "sector", "targets": ["人形机器人"], "direction": "bullish"}),
    "茅台提价了": _answer(82, {"type": "stock", "targets": ["贵州茅台（600519）", "白酒"], "direction": "bullish"}),
    "茅台再提": _answer(64, {"type": "stock", "targets": ["600519.SH"], "direction": "bearish"}),
}


def _day_of_picks(fakes, *, fresh_record: bool = True) -> None:
    """Four articles of 2026-02-04 through the real slots: the 07:00 push, the 18:00 push and the 22:00 report.
    ``fresh_record``: the record the slots' own track-record steps wrote (with the wall clock's send times) is
    cleared, as if the step first ran after the day."""
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}, {"id": "MP_WXS_2", "mp_name": "策略部"}]
    moutai = "贵州茅台宣布出厂价上调，经销商订单同比增长两成，白酒旺季备货提前。"
    fakes.werss.articles = [
        article(1, shanghai(2026, 2, 4, 6), title="茅台提价", body=moutai),
        # the same story from a second account: one event, one pick
        article(5, shanghai(2026, 2, 4, 6, 30), title="茅台提价了", mp="MP_WXS_2", body=moutai),
        article(2, shanghai(2026, 2, 4, 16), title="平安看空", mp="MP_WXS_2",
                body="保险新单保费承压，中国平安寿险订单同比增长放缓，利差损风险上升。"),
        article(3, shanghai(2026, 2, 4, 20), title="机器人", body="人形机器人量产在即，零部件订单同比增长明显，丝杠需求旺盛。"),
        article(4, shanghai(2026, 2, 4, 21), title="茅台再提", body="高端白酒批价回落，茅台渠道订单同比增长不及预期，调整压力大。"),
    ]

    def respond(body):
        user = body["messages"][1]["content"]
        if "<<<DATA_START>>>" in user:
            data = json.loads(user.split("<<<DATA_START>>>")[1].split("<<<DATA_END>>>")[0])
            ids = {a["title"]: a["analysis_id"] for a in data["analyses"]}
            tops = [{"analysis_id": ids[t], "title": t, "reason": "催化"} for t in ("机器人", "茅台再提") if t in ids]
            return json.dumps({"has_opportunity": True, "top_opportunities": tops, "digest_md": "## 要点",
                               "watchlist": [], "stats": {}}, ensure_ascii=False)
        title = next(t for t in sorted(ANSWERS, key=len, reverse=True) if f"标题：{t}" in user)
        return ANSWERS[title]

    fakes.deepseek.responder = respond
    for hour in (7, 18, 22):
        when = shanghai(2026, 2, 4, hour)
        fakes.at(when)
        run_slot(when, now=when + timedelta(minutes=1))
        # the push went out at its slot's time (the sink's clock is the wall clock), as `make run` stamps it
        assert demo_run.date_pushes_at_slot(db.database_url(), when.date(), f"{hour:02d}:00",
                                            when + timedelta(minutes=1)) >= 1
        with connect() as conn:
            if fresh_record:
                conn.execute("TRUNCATE track_pick, track_outcome, market_fetch, market_bar, market_calendar")


def _record() -> list[dict]:
    with connect() as conn:
        return conn.execute(
            """
            SELECT p.title, p.origin, p.picked_at, p.status, p.reason, p.instrument, p.benchmark, p.direction,
                   p.ref_day, p.ref_kind, p.ref_price, p.bench_ref, o.horizon, o.status AS outcome, o.end_day,
                   o.ret, o.bench_ret, o.excess, o.signed_excess, o.hit, o.note
            FROM track_pick p LEFT JOIN track_outcome o ON o.pick_id = p.id ORDER BY p.picked_at, p.id, o.horizon
            """
        ).fetchall()


class CountingSource:
    """The recorded source, counting its calls; ``fail`` makes every call fail (a source that is down)."""

    def __init__(self, fail: bool = False) -> None:
        self.caller = RecordedCaller(DATA)
        self.fail = fail
        self.source = LibrarySource(self._call, name="recorded")

    def _call(self, function, **kwargs):
        if self.fail:
            self.caller.calls.append((function, kwargs))
            raise SourceError("Connection refused (recorded failure)")
        return self.caller(function, **kwargs)

    @property
    def calls(self) -> list:
        return self.caller.calls


def test_the_demo_dates_a_replayed_slot_s_pushes_at_the_slot_so_a_07_00_pick_is_read_at_that_day_s_open(fakes) -> None:
    """`make run` replays its day's slots whenever it is started: a 07:00 push stamped with the wall clock (say
    18:54) was referenced at the next day's open. The demo stamps each slot's pushes at the slot's time."""
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(1, shanghai(2026, 2, 4, 6), title="茅台提价",
                                    body="贵州茅台宣布出厂价上调，经销商订单同比增长两成，白酒旺季备货提前。")]
    fakes.deepseek.responder = lambda body: ANSWERS["茅台提价"]
    seven = shanghai(2026, 2, 4, 7)
    fakes.at(seven)
    run_slot(seven, now=seven + timedelta(minutes=1))
    with connect() as conn:  # the sink's clock is the wall clock, as in the demo
        assert conn.execute("SELECT sent_at FROM notification_log WHERE slot = '07:00' AND sent_at IS NOT NULL"
                            ).fetchone()["sent_at"] > shanghai(2026, 3, 1, 0)
    assert demo_run.date_pushes_at_slot(db.database_url(), date(2026, 2, 4), "07:00", seven + timedelta(seconds=40)) >= 1
    track_record.update(connect, lambda: CountingSource().source, now=shanghai(2026, 3, 20, 22))
    [pick] = [r for r in _record() if r["horizon"] == 1]
    assert pick["picked_at"] == seven + timedelta(seconds=40) and (pick["ref_day"], pick["ref_kind"]) == (
        date(2026, 2, 4), "open")


def test_the_demo_s_record_dates_the_day_s_report_pick_at_the_22_00_push_not_at_the_replay(fakes) -> None:
    """The 22:00 slot's own track-record step records the report's picks before the demo stamps that slot's
    push: the demo's record is taken up again from the stamped pushes."""
    _day_of_picks(fakes, fresh_record=False)
    with connect() as conn:
        wall = conn.execute("SELECT picked_at FROM track_pick WHERE title = '茅台再提'").fetchone()["picked_at"]
    assert wall > shanghai(2026, 3, 1, 0)  # stamped by the replay's wall clock
    demo_run.record_later(date(2026, 2, 4), db.database_url())
    picks = {r["title"]: r for r in _record() if r["horizon"] == 1}
    assert picks["茅台再提"]["picked_at"] == shanghai(2026, 2, 4, 22, 1) and picks["茅台再提"]["ref_day"] == date(2026, 2, 5)
    assert picks["茅台提价"]["picked_at"] == shanghai(2026, 2, 4, 7, 1) and picks["茅台提价"]["ref_day"] == date(2026, 2, 4)


def test_every_pick_of_a_real_day_is_followed_one_per_event_with_its_reason_or_its_returns(fakes) -> None:
    _day_of_picks(fakes)
    source = CountingSource()
    later = shanghai(2026, 3, 20, 22)
    run = track_record.update(connect, lambda: source.source, now=later)
    rows = _record()
    picks = {r["title"]: r for r in rows if r["horizon"] in (None, 1)}
    assert set(picks) == {"茅台提价", "平安看空", "机器人", "茅台再提"} and run.new_picks == 4
    moutai = picks["茅台提价"]  # pushed at 07:01: the same day's open, against the sector's index (白酒)
    assert (moutai["origin"], moutai["instrument"], moutai["benchmark"]) == ("push", "SH:600519", "SW:801125")
    assert (moutai["ref_day"], moutai["ref_kind"]) == (date(2026, 2, 4), "open")
    assert picks["平安看空"]["status"] == "unmeasurable" and "SH:601318" in picks["平安看空"]["reason"]
    assert picks["机器人"]["status"] == "unmeasurable" and "没有对应的行业指数" in picks["机器人"]["reason"]
    daily = picks["茅台再提"]  # a top pick of the report, pushed at 22:01: the next open
    assert (daily["origin"], daily["ref_day"], daily["direction"]) == ("daily", date(2026, 2, 5), "bearish")
    measured = [r for r in rows if r["outcome"] == "measured"]
    assert {(r["title"], r["horizon"]) for r in measured} == {(t, h) for t in ("茅台提价", "茅台再提") for h in (1, 5, 20)}
    for r in measured:
        assert r["excess"] == pytest.approx(r["ret"] - r["bench_ret"]) and r["bench_ret"] is not None
        assert r["hit"] == ((r["ret"] < 0) if r["direction"] == "bearish" else (r["ret"] > 0))
    # one fetch per instrument and day, whatever the number of picks (two picks of 600519): the calendar, the
    # listings' two calls, and 600519, the CSI 300 and the 白酒 index once each
    daily_calls = [c for c in source.calls if c[0] in ("stock_zh_a_hist", "index_zh_a_hist", "index_hist_sw")]
    assert sorted(c[1]["symbol"] for c in daily_calls) == ["000300", "600519", "801125"]
    again = CountingSource()
    track_record.update(connect, lambda: again.source, now=later + timedelta(minutes=5))
    assert again.calls == []  # the same day: everything from the cache


def test_a_rerun_computes_the_same_rows(fakes) -> None:
    _day_of_picks(fakes)
    later = shanghai(2026, 3, 20, 22)
    track_record.update(connect, lambda: CountingSource().source, now=later)
    first = _record()
    with connect() as conn:  # a rerun from scratch on the cached prices (a backfill, a cleared task)
        conn.execute("DELETE FROM track_outcome")
        conn.execute("UPDATE track_pick SET ref_day = NULL, ref_kind = NULL, ref_price = NULL, bench_ref = NULL")
    track_record.update(connect, lambda: CountingSource().source, now=later + timedelta(minutes=1))
    assert _record() == first
    track_record.update(connect, lambda: CountingSource().source, now=later + timedelta(minutes=2))
    assert _record() == first


class Lagging:
    """A source whose daily bars leave out ``missing`` (that day's bars not yet published at 22:00)."""

    name = "lagging"

    def __init__(self, missing: date) -> None:
        self.source, self.missing = CountingSource().source, missing

    def daily(self, instrument, start, end):
        return [b for b in self.source.daily(instrument, start, end) if b.day != self.missing]

    def __getattr__(self, name):
        return getattr(self.source, name)


def test_a_lagging_source_s_missing_bar_waits_and_is_never_a_suspension(fakes) -> None:
    _day_of_picks(fakes)  # 茅台提价's T+20 is 03-12, 茅台再提's 03-13
    track_record.update(connect, lambda: CountingSource().source, now=shanghai(2026, 3, 11, 22))
    track_record.update(connect, lambda: Lagging(date(2026, 3, 12)), now=shanghai(2026, 3, 12, 22))
    [lagged] = [r for r in _record() if r["title"] == "茅台提价" and r["horizon"] == 20]
    assert (lagged["outcome"], lagged["ret"]) == ("waiting", None) and "停牌" not in lagged["note"]
    with connect() as conn:  # still open: the next day's run computes it again
        assert {p["title"] for p in store.track.open_picks(conn)} == {"茅台提价", "茅台再提"}
    track_record.update(connect, lambda: CountingSource().source, now=shanghai(2026, 3, 13, 22))
    settled = {r["title"]: r for r in _record() if r["horizon"] == 20 and r["outcome"] is not None}
    assert settled["茅台提价"]["outcome"] == settled["茅台再提"]["outcome"] == "measured"
    assert settled["茅台提价"]["end_day"] == date(2026, 3, 12)
    first = _record()
    with connect() as conn:  # a rerun from scratch on the same cache computes the same rows
        conn.execute("DELETE FROM track_outcome")
    track_record.update(connect, lambda: CountingSource().source, now=shanghai(2026, 3, 13, 22, 5))
    assert _record() == first


def test_a_missing_bar_is_a_suspension_only_once_the_market_traded_days_without_the_instrument() -> None:
    bars = _bars(DELISTED)  # no trade after 02-13
    ref = _ref(DELISTED, shanghai(2026, 2, 2, 22))
    end = CAL[CAL.index(ref.day) + 20]
    grace = outcomes.SUSPENDED_GRACE
    for seen in range(1, grace):  # the benchmark traded ``seen`` days from the end day on, the stock on none
        through = CAL[CAL.index(end) + seen - 1]
        early = outcomes.outcome(ref, 20, CAL, bars, BENCH, through, "bullish")
        assert (early.status, early.end_day) == ("waiting", end) and "停牌" not in early.note
    lagging = {d: b for d, b in BENCH.items() if d < end}  # the benchmark lags too: nothing says the stock stopped
    assert outcomes.outcome(ref, 20, CAL, bars, lagging, END, "bullish").status == "waiting"
    settled = outcomes.outcome(ref, 20, CAL, bars, BENCH, CAL[CAL.index(end) + grace - 1], "bullish")
    assert settled.status == "suspended" and "2月13日" in settled.note


def test_a_suspension_written_without_its_mark_is_computed_again(fakes) -> None:
    """Rows settled as suspended before marks (a lagging source's missing bar among them) heal on the next run."""
    _day_of_picks(fakes)
    later = shanghai(2026, 3, 20, 22)
    track_record.update(connect, lambda: CountingSource().source, now=later)
    first = _record()
    with connect() as conn:
        conn.execute("UPDATE track_outcome SET status = 'suspended', ret = NULL, bench_ret = NULL, excess = NULL, "
                     "signed_excess = NULL, hit = NULL, note = '自 3月11日 后没有成交（停牌或退市）' WHERE horizon = 20")
        assert len(store.track.open_picks(conn)) == 2
    track_record.update(connect, lambda: CountingSource().source, now=later + timedelta(minutes=1))
    assert _record() == first


def test_the_listings_and_the_5_minute_fetches_stop_at_the_step_s_deadline(fakes) -> None:
    import time as clock

    _day_of_picks(fakes)
    with connect() as conn:  # the listed names are to be fetched (平安看空 names a company)
        conn.execute("TRUNCATE market_listing")
    evening = shanghai(2026, 2, 20, 22)  # within the month the source keeps 5-minute bars
    late = CountingSource()
    run = track_record.update(connect, lambda: late.source, now=evening, deadline=clock.monotonic() - 1)
    assert late.calls == [] and run.stopped and run.left  # not the listings, not the calendar, no bars
    assert {r["title"]: r["status"] for r in _record()}["平安看空"] == "unresolved"  # its name waits for tomorrow
    track_record.update(connect, lambda: CountingSource().source, now=evening)
    with connect() as conn:  # 茅台提价 pushed in the session: its reference needs the day's 5-minute bars
        conn.execute("UPDATE track_pick SET picked_at = %s WHERE title = '茅台提价'", (shanghai(2026, 2, 4, 10, 30),))
        conn.execute("DELETE FROM track_outcome WHERE pick_id = (SELECT id FROM track_pick WHERE title = '茅台提价')")
    late = CountingSource()
    run = track_record.update(connect, lambda: late.source, now=evening + timedelta(minutes=5),
                              deadline=clock.monotonic() - 1)
    assert late.calls == [] and run.stopped
    assert [r["outcome"] for r in _record() if r["title"] == "茅台提价"] == [None]  # it waits, open
    in_time = CountingSource()
    track_record.update(connect, lambda: in_time.source, now=evening + timedelta(minutes=10))
    assert [c[0] for c in in_time.calls] == ["stock_zh_a_hist_min_em"]  # the next day's run in time fetches them
    [moutai] = [r for r in _record() if r["title"] == "茅台提价" and r["horizon"] == 1]
    assert (moutai["ref_day"], moutai["ref_kind"]) == (date(2026, 2, 4), "close")  # 申万白酒 has no 5-minute bars


def test_a_failing_source_alerts_once_and_the_next_day_retries(fakes, monkeypatch) -> None:
    _day_of_picks(fakes)
    down = CountingSource(fail=True)
    monkeypatch.setattr(track_record, "source_from", lambda settings: lambda: down.source)
    rt = Runtime.load()
    slot = {"slot_run_id": None, "is_daily": True, "run_date": "2026-03-20", "dag_run_id": "x"}
    with connect() as conn:
        slot["slot_run_id"] = conn.execute("SELECT max(id) AS id FROM slot_run").fetchone()["id"]
    day = shanghai(2026, 3, 20, 22)
    first = track_record.daily(rt.connect, rt.settings, slot, lambda d: rt.alert("market_data", d, slot),
                               clock=FixedClock(day))
    second = track_record.daily(rt.connect, rt.settings, slot, lambda d: rt.alert("market_data", d, slot),
                                clock=FixedClock(day))
    assert first["failed"] and second["failed"]
    assert len(down.calls) == track_record.STOP_AFTER_FAILURES * 2  # it stops after three failures in a row
    alerts = [m for m in fakes.ops.received if "行情数据源" in json.dumps(m, ensure_ascii=False)]
    assert len(alerts) == 1  # once per cause and day
    assert all(r["outcome"] in (None, "waiting") for r in _record())
    up = CountingSource()
    monkeypatch.setattr(track_record, "source_from", lambda settings: lambda: up.source)
    third = track_record.daily(rt.connect, rt.settings, slot, lambda d: rt.alert("market_data", d, slot),
                               clock=FixedClock(day + timedelta(days=1)))
    assert not third["failed"] and third["measured"] == 6
    assert up.calls  # retried the next day


# ------------------------------------------------------------------------------------------------ the pages


def test_the_record_page_shows_every_pick_with_its_benchmark_and_no_conclusion_below_30(fakes) -> None:
    from tests.slotrun import read_page

    _day_of_picks(fakes)
    track_record.update(connect, lambda: CountingSource().source, now=shanghai(2026, 3, 20, 22))
    html = read_page("/record", shanghai(2026, 3, 21, 9))
    for text in ("茅台提价", "平安看空", "机器人", "茅台再提", "申万白酒", "沪深300", "不是投资建议",
                 "无法测量：「人形机器人」没有对应的行业指数", "SH:601318", "样本 2，不足 30", "<svg", "命中率"):
        assert text in html, text
    assert html.count('class="item pick"') == 4  # one per event: the repost of 茅台提价 is not a second pick
    filtered = read_page("/record?type=sector&h=20", shanghai(2026, 3, 21, 9))
    assert "机器人" in filtered and "茅台提价" not in filtered
    with connect() as conn:
        repost = conn.execute("SELECT a.id FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id "
                              "WHERE c.title = '茅台提价了'").fetchone()["id"]
        lead = conn.execute("SELECT analysis_id FROM track_pick WHERE title = '茅台提价'").fetchone()["analysis_id"]
    analysis = read_page(f"/analysis/{lead}", shanghai(2026, 3, 21, 9))
    assert "战绩" in analysis and "T+20" in analysis and "申万白酒" in analysis
    assert "另一条分析" in read_page(f"/analysis/{repost}", shanghai(2026, 3, 21, 9))
    week = read_page("/weekly/2026-02-02", shanghai(2026, 3, 21, 9))
    assert "本周战绩" in week and "本周选出 4 条" in week
    assert "/record" in read_page("/", shanghai(2026, 3, 21, 9))


def test_a_record_page_past_the_end_says_so_and_links_the_last_page(fakes) -> None:
    from tests.slotrun import read_page

    with connect() as conn:
        _a_year_of_measured_picks(conn, 60)  # three pages of 25
    html = read_page("/record?page=50&h=20", shanghai(2026, 3, 21, 9))
    assert "还没有记录" not in html and "第 50 / 3 页" not in html
    assert "没有第 50 页" in html and 'href="/record?h=20&amp;page=3"' in html
    assert html.count('class="item pick"') == 0
    last = read_page("/record?page=3&h=20", shanghai(2026, 3, 21, 9))
    assert "第 3 / 3 页" in last and last.count('class="item pick"') == 10
    # filters that match nothing say so (the page said 还没有记录, as on a radar with no record at all)
    none = read_page("/record?account=无此公众号", shanghai(2026, 3, 21, 9))
    assert "这些筛选条件下没有记录" in none and "还没有记录" not in none


@pytest.mark.parametrize("query", ["band=7", "h=3", "page=0", "page=x", "from=2026-13-01", "from=2026-03-02&to=2026-03-01",
                                   "account=" + "x" * 200, "h=5&h=1", "page=" + "9" * 30, "account=%00", "type=%00",
                                   "account=a%00b", "from=2026-03-01%00", "page=" + "9" * 4301, "page=" + "1" * 5000])
def test_a_malformed_filter_is_a_400_that_says_why_never_a_500(fakes, query) -> None:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from include.radar.core.settings import load_settings
    from include.radar.web.app import create_app
    from include.radar.web.auth import may_read_radar

    app = create_app(lambda: load_settings(use_airflow=False), db.database_url(), clock=FixedClock(shanghai(2026, 3, 1, 9)))
    app.dependency_overrides[get_user] = lambda: object()
    app.dependency_overrides[may_read_radar] = lambda user: True
    response = TestClient(app).get(f"/record?{query}")
    assert response.status_code == 400 and "筛选条件无效" in response.text


def test_article_text_on_the_record_page_is_escaped(fakes) -> None:
    from tests.slotrun import read_page

    with connect() as conn:
        conn.execute("INSERT INTO wechat_account (mp_id, name) VALUES ('x', '<b>号</b>')")
        item = conn.execute("INSERT INTO content_item (external_id, title, published_at) VALUES "
                            "('e', '<script>alert(1)</script>', now()) RETURNING id").fetchone()["id"]
        analysis = conn.execute(
            "INSERT INTO analysis_result (content_item_id, score, has_opportunity, top_type, summary, result_json, "
            "model, prompt_version) VALUES (%s, 70, true, 'sector', 's', '{}', 'm', 'v') RETURNING id",
            (item,)).fetchone()["id"]
        conn.execute(
            "INSERT INTO track_pick (event_id, analysis_id, origin, picked_at, pick_day, score, direction, opp_type, "
            "account, title, status, reason) VALUES (%s, %s, 'push', now(), current_date, 70, 'bullish', 'sector', "
            "'<b>号</b>', '<script>alert(1)</script>', 'unmeasurable', '「<img src=x>」没有对应的行业指数')",
            (analysis, analysis))
    html = read_page("/record", datetime.now(SHANGHAI))
    assert "<script>alert(1)" not in html and "&lt;script&gt;" in html and "<img src=x>" not in html


# ------------------------------------------------------------------------------------------------- the rank


def test_the_rank_gains_an_outcome_part_per_account_and_type_only_past_the_minimum() -> None:
    from include.radar.pushes import ranking

    analysis = {"id": 1, "score": 70, "mp_name": "研究所", "top_type": "stock", "result_json": {}}
    means = [{"kind": "account", "key": "研究所", "n": 60, "mean": 0.04},
             {"kind": "type", "key": "stock", "n": 45, "mean": -0.5}]
    r = ranking.rank(analysis, ranking.learn([], means, 30))
    # 4 % shrunk by 60/90 = 2.7 -> 3 points; a type losing 50 % a pick is capped at -6
    assert ("公众号「研究所」的战绩：60 条已测，T+5 平均超额 +4.0%", 3) in r.parts
    assert any(why.startswith("个股类机会的战绩") and pts == -6 for why, pts in r.parts)
    assert r.outcome == -3 and r.total == 67
    assert ranking.rank(analysis, ranking.learn([], means, 46)).outcome == 3  # the type is below 46 picks
    assert ranking.rank(analysis, ranking.learn([], means, 100)).outcome == 0 and ranking.learn([], means, 100).outcome_account == {}


def test_the_analysis_page_writes_the_outcome_part_beside_the_feedback_part(fakes, monkeypatch) -> None:
    from tests.slotrun import read_page

    _day_of_picks(fakes)
    track_record.update(connect, lambda: CountingSource().source, now=shanghai(2026, 3, 20, 22))
    with connect() as conn:  # 40 earlier measured picks of the account, each 3 % better than its benchmark
        lead = conn.execute("SELECT analysis_id FROM track_pick WHERE title = '茅台提价'").fetchone()["analysis_id"]
        earlier = conn.execute(
            """
            WITH items AS (
                INSERT INTO content_item (external_id, title, published_at)
                SELECT 'old-' || g, '旧文' || g, now() - interval '60 days' FROM generate_series(1, 40) g RETURNING id
            )
            INSERT INTO analysis_result (content_item_id, score, has_opportunity, top_type, summary, result_json,
                                         model, prompt_version)
            SELECT id, 70, true, 'sector', 's', '{}', 'm', 'v' FROM items RETURNING id
            """).fetchall()
        for row in earlier:
            pick = conn.execute(
                "INSERT INTO track_pick (event_id, analysis_id, origin, picked_at, pick_day, score, direction, "
                "opp_type, account, status) VALUES (%s, %s, 'push', now(), current_date, 70, 'bullish', 'sector', "
                "'研究所', 'measurable') RETURNING id", (row["id"], row["id"])).fetchone()["id"]
            conn.execute("INSERT INTO track_outcome (pick_id, horizon, status, ret, excess, signed_excess, hit) "
                         "VALUES (%s, 5, 'measured', 0.04, 0.03, 0.03, true)", (pick,))
    page = read_page(f"/analysis/{lead}", shanghai(2026, 3, 21, 9))
    assert "公众号「研究所」的战绩：42 条已测" in page  # the 40 and this day's two measured picks of the account
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_OUTCOME_MIN_PICKS", "100")
    assert "的战绩：" not in read_page(f"/analysis/{lead}", shanghai(2026, 3, 21, 9))


def test_the_summaries_aggregated_in_sql_equal_the_ones_counted_pick_by_pick(fakes) -> None:
    _day_of_picks(fakes)
    track_record.update(connect, lambda: CountingSource().source, now=shanghai(2026, 3, 20, 22))
    with connect() as conn:
        _suspended_picks(conn)
        for horizon in outcomes.HORIZONS:
            rows = conn.execute(
                "SELECT p.status AS pick_status, p.direction, o.status, o.hit, o.excess, o.signed_excess "
                "FROM track_pick p LEFT JOIN track_outcome o ON o.pick_id = p.id AND o.horizon = %s",
                (horizon,)).fetchall()
            [total] = [r for r in store.track.summary_groups(conn, store.track.RecordFilters(), horizon)
                       if r["dim"] == "all"]
            counted, summed = outcomes.overall(rows), outcomes.Group.from_sums("all", "全部", total)
            fields = ("picks", "directional", "hits", "unmeasurable", "waiting", "suspended", "no_data", "marked",
                      "marked_hits", "unpriced", "unpriced_calls", "undirected", "plain_n")
            assert {f: getattr(counted, f) for f in fields} == {f: getattr(summed, f) for f in fields}
            assert counted.mean_excess == pytest.approx(summed.mean_excess)
            assert counted.hit_floor == pytest.approx(summed.hit_floor)
            assert summed.picks == 8 and summed.unmeasurable == 2 and summed.marked == 2 and summed.unpriced == 2


def _suspended_picks(conn, n: int = 4) -> None:
    """Four picks whose every horizon stopped trading: marked at the last close (a hit, a miss), never traded
    (no price: unpriced), and a source with nothing for the code (no data)."""
    cases = [("suspended", 0.05, True), ("suspended", -0.3, False), ("suspended", None, None), ("no_data", None, None)]
    for i, (status, ret, hit) in enumerate(cases[:n]):
        item = conn.execute("INSERT INTO content_item (external_id, title, published_at) VALUES (%s, %s, now()) "
                            "RETURNING id", (f"stop-{i}", f"停牌股 {i}")).fetchone()["id"]
        analysis = conn.execute(
            "INSERT INTO analysis_result (content_item_id, score, has_opportunity, top_type, summary, result_json, "
            "model, prompt_version) VALUES (%s, 80, true, 'stock', 's', '{}', 'm', 'v') RETURNING id",
            (item,)).fetchone()["id"]
        pick = conn.execute(
            "INSERT INTO track_pick (event_id, analysis_id, origin, picked_at, pick_day, score, direction, opp_type, "
            "account, title, status, instrument, instrument_name, benchmark, benchmark_name) VALUES (%s, %s, 'push', "
            "now() - interval '90 days', current_date - 90, 80, 'bullish', 'stock', '研究所', %s, 'measurable', "
            "'SH:600999', '停牌股', 'SH:000300', '沪深300') RETURNING id", (analysis, analysis, f"停牌股 {i}")
        ).fetchone()["id"]
        for h in outcomes.HORIZONS:
            conn.execute(
                "INSERT INTO track_outcome (pick_id, horizon, status, end_day, ret, bench_ret, excess, signed_excess, "
                "hit, note) VALUES (%s, %s, %s, current_date - 80, %s, %s, %s, %s, %s, %s)",
                (pick, h, status, ret, 0.01 if ret is not None else None, ret - 0.01 if ret is not None else None,
                 ret - 0.01 if ret is not None else None, hit,
                 "自 1月5日 后没有成交（停牌或退市）：按 1月5日 的最后收盘价计" if ret is not None else "没有成交"))


@given(st.lists(st.floats(-0.5, 0.5), min_size=2, max_size=40))
def test_the_interval_from_sums_is_the_normal_interval_of_the_values(values) -> None:
    import statistics

    mean, half = statistics.fmean(values), outcomes.Z95 * statistics.stdev(values) / len(values) ** 0.5
    summed = outcomes.mean_interval_of(len(values), sum(values), sum(v * v for v in values))
    assert summed == pytest.approx((mean, mean - half, mean + half), abs=1e-7)


def _a_year_of_measured_picks(conn, n: int = 160) -> None:
    """``n`` earlier picks over three accounts and five score bands, measured at every horizon (higher scores
    doing a little better): enough for the summaries to draw conclusions."""
    import random

    rng = random.Random(25)
    items = conn.execute(
        """
        WITH items AS (
            INSERT INTO content_item (external_id, title, published_at)
            SELECT 'year-' || g, '往期机会 ' || g, now() - g * interval '2 days' FROM generate_series(1, %s) g RETURNING id
        )
        INSERT INTO analysis_result (content_item_id, score, has_opportunity, top_type, summary, result_json, model,
                                     prompt_version)
        SELECT id, 55 + (id * 7) %% 45, true, 'stock', 's', '{}', 'm', 'v' FROM items RETURNING id, score
        """, (n,)).fetchall()
    for i, item in enumerate(items):
        direction = "bearish" if i % 5 == 0 else "bullish"
        pick = conn.execute(
            "INSERT INTO track_pick (event_id, analysis_id, origin, picked_at, pick_day, score, direction, opp_type, "
            "account, title, status, instrument, instrument_name, benchmark, benchmark_name) VALUES (%s, %s, 'push', "
            "now() - %s * interval '2 days', current_date - %s * 2, %s, %s, %s, %s, %s, 'measurable', 'SH:600519', "
            "'贵州茅台', 'SH:000300', '沪深300') RETURNING id",
            (item["id"], item["id"], i + 30, i + 30, item["score"], direction, ("stock", "sector", "fund")[i % 3],
             ("研究所", "策略部", "产业观察")[i % 3], f"往期机会 {i}")).fetchone()["id"]
        for h in outcomes.HORIZONS:
            ret = rng.gauss((item["score"] - 70) / 1000 * h ** 0.5, 0.03 * h ** 0.5)
            bench = rng.gauss(0.0, 0.02 * h ** 0.5)
            sign = -1 if direction == "bearish" else 1
            conn.execute(
                "INSERT INTO track_outcome (pick_id, horizon, status, end_day, ret, bench_ret, excess, signed_excess, "
                "hit) VALUES (%s, %s, 'measured', current_date - %s * 2 + %s, %s, %s, %s, %s, %s)",
                (pick, h, i + 30, h * 7 // 5, ret, bench, ret - bench, sign * (ret - bench), sign * ret > 0))


def test_the_page_counts_suspended_calls_at_their_last_close_and_states_the_bound(fakes) -> None:
    from tests.slotrun import read_page

    with connect() as conn:
        _a_year_of_measured_picks(conn)
        _suspended_picks(conn)
        hits = conn.execute("SELECT count(*) FILTER (WHERE hit) AS h, count(*) AS n FROM track_outcome o "
                            "JOIN track_pick p ON p.id = o.pick_id WHERE o.horizon = 5 AND o.hit IS NOT NULL "
                            "AND p.direction IN ('bullish', 'bearish')").fetchone()
    html = read_page("/record", shanghai(2026, 3, 21, 9))
    assert hits["n"] == 162  # the 160 measured and the two marked at their last close
    floor = (hits["h"] - 1) / (hits["n"] + 2)  # the marked hit and the two unpriced calls counted as misses
    assert f"停牌与缺数据的都算错时 {floor * 100:.0f}%" in html
    assert "停牌 2 条按最后收盘价计入" in html and "按停牌前最后收盘价" in html
    card = html[html.index("停牌股 0"):html.index("停牌股 0") + 3000]
    assert "+5.0%" in card and "最后收盘价计" in card  # the marked figures are shown beside the note


@pytest.mark.browser
def test_the_record_page_and_an_analysis_outcome_on_a_phone(fakes, db_url: str) -> None:
    from include.radar.web.app import create_app
    from tests.browser import PHONE, chromium, screenshot, serve
    from tests.pages import FakeUser, airflow_get_user, allow_reading, make_settings

    _day_of_picks(fakes)
    track_record.update(connect, lambda: CountingSource().source, now=shanghai(2026, 3, 20, 22))
    with connect() as conn:
        _a_year_of_measured_picks(conn)
        lead = conn.execute("SELECT analysis_id FROM track_pick WHERE title = '茅台提价'").fetchone()["analysis_id"]
    app = create_app(lambda: make_settings(demo_mode=True), db_url, clock=FixedClock(shanghai(2026, 3, 21, 9)))
    app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
    allow_reading(app)
    with serve(app) as base, chromium() as browser:
        page = browser.new_page(viewport=PHONE, is_mobile=True)
        assert page.goto(base + "/record").status == 200
        charts = page.locator("svg.chart")
        assert charts.count() == 2 and charts.first.is_visible()
        assert page.locator("svg.chart circle").count() >= 4  # bands with 30+ picks have a point and a whisker
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        screenshot(page, "record.png")
        from tests.browser import SCREENSHOTS

        page.screenshot(path=str(SCREENSHOTS / "record-summary.png"))  # the phone's first screens, for the README
        page.locator("h2", has_text="评分越高").evaluate(
            "e => window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 90)")  # below the top bar
        page.screenshot(path=str(SCREENSHOTS / "record-calibration.png"))
        page.locator("li.item.pick").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / "record-picks.png"))
        page.locator("details.filters summary").click()  # the filters are folded below the figures
        page.select_option("select[name=band]", "80")
        page.click("button[type=submit]")
        assert "band=80" in page.url and page.locator("li.item.pick").count() > 0
        assert page.goto(base + f"/analysis/{lead}").status == 200
        assert page.locator("text=战绩").first.is_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        screenshot(page, "analysis-record.png")
        page.locator("table.horizons").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / "analysis-outcome.png"))


# ------------------------------------------------------------------------------------------- the library


def test_the_dag_file_the_pages_and_the_steps_never_import_the_market_library() -> None:
    import subprocess
    import sys

    dag_file = REPO / "dags" / "opportunity_radar.py"
    code = (
        f"import runpy, sys; sys.path.insert(0, {str(REPO)!r}); runpy.run_path({str(dag_file)!r});"
        "from include.radar.web.app import create_app; create_app(db_url='postgresql://x@127.0.0.1:1/x');"
        "import include.radar.steps.track_record, include.radar.report.track_record, include.radar.market.akshare_source;"
        "loaded = [m for m in ('akshare', 'pandas', 'curl_cffi', 'py_mini_racer') if m in sys.modules];"
        "assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_library_call_that_hangs_or_fails_is_a_source_error_and_a_good_one_is_parsed(monkeypatch) -> None:
    import sys
    import time as clock
    import types

    from include.radar.market.akshare_source import LibraryCaller

    class Frame:
        def to_dict(self, orient):
            assert orient == "records"
            return [{"日期": date(2026, 2, 4), "开盘": 10.0, "收盘": 10.5, "最高": 10.6, "最低": 9.9},
                    {"日期": "2026-02-05", "开盘": float("nan"), "收盘": float("nan")}]

    fake = types.ModuleType("akshare")
    fake.stock_zh_a_hist = lambda **kw: Frame()
    fake.index_zh_a_hist = lambda **kw: clock.sleep(5)
    fake.index_hist_sw = lambda **kw: (_ for _ in ()).throw(KeyError("data"))  # a page that changed shape
    monkeypatch.setitem(sys.modules, "akshare", fake)
    source = LibrarySource(LibraryCaller(timeout=0.3, min_interval=0))
    bars = source.daily(MOUTAI, date(2026, 2, 1), date(2026, 2, 10))
    assert [(b.day, b.open, b.close) for b in bars] == [(date(2026, 2, 4), 10.0, 10.5)]  # the NaN row is dropped
    started = clock.monotonic()
    with pytest.raises(SourceError, match="no answer within"):
        source.daily(CSI300, date(2026, 2, 1), date(2026, 2, 10))
    assert clock.monotonic() - started < 2
    with pytest.raises(SourceError, match="index_hist_sw failed: KeyError"):
        source.daily(Instrument("SW", "801081", "index"), date(2026, 2, 1), date(2026, 2, 10))


def test_the_weekly_push_gains_the_weeks_record(fakes) -> None:
    _day_of_picks(fakes)  # Wednesday 2026-02-04
    track_record.update(connect, lambda: CountingSource().source, now=shanghai(2026, 2, 6, 22))
    sunday = shanghai(2026, 2, 8, 22)
    fakes.at(sunday)
    run_slot(sunday, now=sunday + timedelta(minutes=1))
    [weekly] = [m for m in fakes.sink.received if "【周报】" in json.dumps(m, ensure_ascii=False)]
    # four picks (two measurable, both measured at T+1 by Friday's close): the sample, no hits below 30
    text = json.dumps(weekly, ensure_ascii=False)
    assert "本周战绩：选出 4 条，T+1 已测 2 条（不足 30 条，不计命中率）" in text and "方向正确" not in text


def test_the_weekly_push_gives_a_rate_only_from_30_measured_calls_as_the_page_does() -> None:
    from include.radar.report import weekly

    def line(measured: int, hits: int) -> str:
        row = {"stats": {"record": {"picks": 45, "measured": measured, "hits": hits}}, "digest_json": {}}
        return next(x for x in weekly.lines(row) if x.startswith("本周战绩"))

    assert line(29, 29) == "本周战绩：选出 45 条，T+1 已测 29 条（不足 30 条，不计命中率）（过往判断的记录，不是投资建议）"
    low, high = outcomes.wilson(18, 30)
    assert line(30, 18) == (f"本周战绩：选出 45 条，T+1 已测 30 条，命中率 60%（95% 区间 {low * 100:.0f}%–{high * 100:.0f}%）"
                            "（过往判断的记录，不是投资建议）")


def test_a_code_the_source_knows_nothing_of_is_no_data_said_so(fakes) -> None:
    _day_of_picks(fakes)
    with connect() as conn:
        conn.execute("UPDATE analysis_result SET result_json = jsonb_set(result_json, '{opportunities,0,targets}', "
                     "'[\"688981\"]') WHERE id IN (SELECT a.id FROM analysis_result a JOIN content_item c "
                     "ON c.id = a.content_item_id WHERE c.title = '茅台再提')")
    track_record.update(connect, lambda: CountingSource().source, now=shanghai(2026, 3, 20, 22))
    [row] = [r for r in _record() if r["title"] == "茅台再提" and r["horizon"] == 20]
    assert row["instrument"] == "SH:688981" and row["outcome"] == "no_data" and "行情源没有 SH:688981" in row["note"]


def test_what_a_fetch_could_see_is_dated_by_the_steps_clock_not_the_databases(db_url) -> None:
    later = shanghai(2027, 6, 1, 22, 30)  # a replay (the demo) runs with a clock ahead of the database's
    with connect() as conn:
        store.track.record_fetch(conn, "daily:SH:600519", later.date(), later, ok=True, rows=1)
        assert track_record._coverage(conn, ["SH:600519"], later) == {"SH:600519": date(2027, 6, 1)}


# ------------------------------------------------------------------------------------------- the benchmark


def test_the_track_record_benchmark_runs_and_prints_its_figures(db_url, monkeypatch, capsys) -> None:
    import re

    from bench import track_record as benchmark
    from include.radar_demo import year
    from tests import conftest

    monkeypatch.setattr(year, "bench_server_url", conftest._server_url)  # the tests' server, a scratch database
    assert benchmark.main(["--days", "7", "--instruments", "5"]) == 0
    out = capsys.readouterr().out
    figures = {m[0]: [int(n) for n in m[2:]] for m in re.findall(
        r"^(cold|warm|recompute|next day) +([\d.]+) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+)$", out, re.M)}
    assert list(figures) == ["cold", "warm", "recompute", "next day"], out
    measurable = int(re.search(r"^\d+ picks \((\d+) measurable\)", out, re.M).group(1))
    calls, fetched, _, computed, _ = figures["cold"]
    assert calls >= fetched > 0 and computed == measurable > 0  # the listings: two calls, one fetch
    assert figures["warm"][:2] == [0, 0]  # the same day: nothing fetched
    assert figures["recompute"][:2] == [0, 0] and figures["recompute"][3] == measurable  # every pick, no fetch
    assert figures["next day"][0] > 0


def test_no_benchmark_script_imports_another() -> None:
    from tools import import_graph

    scripts = {f"bench.{p.stem}": p for p in (REPO / "bench").glob("*.py") if not p.stem.startswith("memory_")}
    assert "bench.pages" in scripts and "bench.track_record" in scripts
    for name, path in scripts.items():
        assert import_graph.imports_of(path, set(scripts)) == set(), name
