"""A price the reader could have had, never one from before the push: the opening auction, Hong Kong's half
days, a price at the limit only when the bar stayed there, and a re-pushed daily report's new picks dated at
the push that first showed them.

Every expectation is hand-computed from the bars written here (tests/track_fixtures.py)."""

from __future__ import annotations

import json
from datetime import date, datetime

from include.radar.core.slots import SHANGHAI
from include.radar.market import Bar, MinuteBar, outcomes
from include.radar.market.instruments import CN, HK
from tests.conftest import connect
from tests.slotrun import shanghai
from tests.track_fixtures import flat, weekdays

# ------------------------------------------------------------------------------------- Hong Kong's half days

# 2025-12-24 (Wednesday) is a half day in Hong Kong (morning only, closing at 12:00); 25 and 26 December closed
HK_DAYS = weekdays(date(2025, 12, 1), date(2026, 1, 30), closed=(date(2025, 12, 25), date(2025, 12, 26),
                                                                 date(2026, 1, 1)))
HALF_DAY, NEXT = date(2025, 12, 24), date(2025, 12, 29)
TENCENT = {**flat([d for d in HK_DAYS if d < HALF_DAY], 370.0),
           HALF_DAY: Bar(HALF_DAY, 372.0, 381.0, 371.0, 380.0),  # its close, 380, was set at 12:00
           **{d: Bar(d, 385.0, 390.0, 384.0, 388.0) for d in HK_DAYS if d >= NEXT}}
HSI_BARS = {**flat([d for d in HK_DAYS if d < NEXT], 25000.0), **flat([d for d in HK_DAYS if d >= NEXT], 25100.0)}


def test_a_hong_kong_push_on_a_half_day_afternoon_is_measured_from_the_next_session_s_open() -> None:
    for hour, minute in ((12, 0), (14, 0), (10, 30)):
        ref = outcomes.reference(shanghai(2025, 12, 24, hour, minute), HK, HK_DAYS, TENCENT, HSI_BARS,
                                 date(2026, 1, 30))
        # not 380 (the half day's close, fixed at 12:00): the open of Monday 29 December
        assert (ref.status, ref.day, ref.kind, ref.price, ref.bench) == ("ok", NEXT, "open", 385.0, 25100.0)


def test_a_hong_kong_push_before_the_auction_gets_that_day_s_open() -> None:
    ref = outcomes.reference(shanghai(2025, 12, 24, 9, 0), HK, HK_DAYS, TENCENT, HSI_BARS, date(2026, 1, 30))
    assert (ref.day, ref.kind, ref.price) == (HALF_DAY, "open", 372.0)


def test_a_hong_kong_push_during_the_auction_gets_the_next_session_s_open() -> None:
    # Hong Kong's opening auction runs 09:00-09:20 and fixes the open: a 09:25 push could not have had it
    ref = outcomes.reference(shanghai(2025, 12, 23, 9, 25), HK, HK_DAYS, TENCENT, HSI_BARS, date(2026, 1, 30))
    assert (ref.day, ref.kind) == (date(2025, 12, 24), "open")  # not 23 December's open


# ----------------------------------------------------------------------------------- the opening auction

CN_DAYS = weekdays(date(2026, 1, 19), date(2026, 3, 31), closed=tuple(date(2026, 2, d) for d in range(16, 24)))
DAY = date(2026, 2, 4)


def _minutes(*bars: tuple[int, int, float]) -> list[MinuteBar]:
    return [MinuteBar(datetime(2026, 2, 4, h, m, tzinfo=SHANGHAI), price) for h, m, price in bars]


STOCK = {**flat([d for d in CN_DAYS if d < DAY], 10.0), DAY: Bar(DAY, 10.2, 10.6, 10.1, 10.5),
         **flat([d for d in CN_DAYS if d > DAY], 10.5)}
CSI = flat(CN_DAYS, 4000.0)
# the bar starting 09:30 opens at the auction's price (10.20, set at 09:25); the next one at 10.30
STOCK_MINUTES = _minutes((9, 30, 10.2), (9, 35, 10.3), (9, 40, 10.4))
CSI_MINUTES = _minutes((9, 30, 4000.0), (9, 35, 4004.0), (9, 40, 4008.0))


def test_a_push_during_the_opening_auction_is_measured_after_it_never_at_the_open_fixed_before_it() -> None:
    ref = outcomes.reference(shanghai(2026, 2, 4, 9, 27), CN, CN_DAYS, STOCK, CSI, date(2026, 3, 31),
                             intraday=(STOCK_MINUTES, CSI_MINUTES), limit=0.1)
    assert (ref.day, ref.kind, ref.price, ref.bench) == (DAY, "intraday", 10.3, 4004.0)  # the 09:35 bar's open
    at_open = outcomes.reference(shanghai(2026, 2, 4, 9, 30), CN, CN_DAYS, STOCK, CSI, date(2026, 3, 31),
                                 intraday=(STOCK_MINUTES, CSI_MINUTES), limit=0.1)
    assert (at_open.kind, at_open.price) == ("intraday", 10.3)
    assert outcomes.during_session(shanghai(2026, 2, 4, 9, 26), CN, CN_DAYS)


def test_a_push_before_the_auction_gets_the_open_and_without_5_minute_bars_a_push_after_it_the_close() -> None:
    before = outcomes.reference(shanghai(2026, 2, 4, 9, 20), CN, CN_DAYS, STOCK, CSI, date(2026, 3, 31))
    assert (before.kind, before.price) == ("open", 10.2)
    after = outcomes.reference(shanghai(2026, 2, 4, 9, 27), CN, CN_DAYS, STOCK, CSI, date(2026, 3, 31))
    assert (after.kind, after.price, after.bench) == ("close", 10.5, 4000.0)


# ------------------------------------------------------------------------------------------------- limits


def _limit_case(day_bar: Bar, at: datetime, minutes: list[MinuteBar] | None = None) -> outcomes.Reference:
    """A stock that closed at 10.00 the day before: its ±10 % limit is 11.00 / 9.00 on 2026-02-04."""
    bars = {**flat([d for d in CN_DAYS if d < DAY], 10.0), DAY: day_bar}
    bench_minutes = _minutes(*((m.start.hour, m.start.minute, 4000.0) for m in minutes or ()))
    return outcomes.reference(at, CN, CN_DAYS, bars, CSI, date(2026, 3, 31),
                              intraday=(minutes, bench_minutes) if minutes else None, limit=0.1)


def test_an_open_near_the_limit_that_traded_above_it_is_tradable_and_one_sealed_at_it_is_not() -> None:
    evening = shanghai(2026, 2, 3, 22)
    near = _limit_case(Bar(DAY, 10.98, 11.0, 10.7, 10.8), evening)  # +9.8 %, then traded up to 11.00
    assert (near.price, near.limit_open) == (10.98, None) and "涨停" not in near.note
    sealed = _limit_case(Bar(DAY, 11.0, 11.0, 10.9, 11.0), evening)  # open = high = 11.00
    assert (sealed.price, sealed.limit_open) == (11.0, "up") and "涨停开盘" in sealed.note
    floor = _limit_case(Bar(DAY, 9.0, 9.3, 9.0, 9.2), evening)  # open = low = 9.00
    assert floor.limit_open == "down" and "跌停开盘" in floor.note


def test_an_intraday_or_closing_reference_at_a_sealed_limit_is_noted() -> None:
    sealed_day = Bar(DAY, 10.5, 11.0, 10.4, 11.0)  # reached 11.00 and closed there
    intraday = _limit_case(sealed_day, shanghai(2026, 2, 4, 10, 32), _minutes((10, 30, 10.9), (10, 35, 11.0)))
    assert (intraday.kind, intraday.price, intraday.limit_open) == ("intraday", 11.0, "up")
    assert "封板至收盘" in intraday.note
    closing = _limit_case(sealed_day, shanghai(2026, 2, 4, 10, 32))  # no 5-minute bars: the close, 11.00
    assert (closing.kind, closing.price, closing.limit_open) == ("close", 11.0, "up")
    reopened = _limit_case(Bar(DAY, 10.5, 11.0, 10.4, 10.8), shanghai(2026, 2, 4, 10, 32),
                           _minutes((10, 35, 11.0)))  # touched 11.00, closed at 10.80: it traded below
    assert reopened.limit_open is None


# ------------------------------------------------------------------------------------ a re-pushed report


def test_a_pick_first_shown_by_a_later_push_of_a_rebuilt_report_is_dated_at_that_push(fakes) -> None:
    """The 22:00 report listed 茅台提价 only; rebuilt and pushed again the next morning at 10:01 it also lists
    宁德订单: that pick is dated 10:01 on 5 February (a reader saw it then), not at the first push."""
    from datetime import timedelta

    from include.radar.market.recorded import recorded_source
    from include.radar.report import track_record
    from tests.conftest import REPO
    from tests.slotrun import article, run_slot
    from tests.test_track_record import ANSWERS, _answer

    answers = {**ANSWERS, "宁德订单": _answer(70, {"type": "stock", "targets": ["宁德时代（300750）"],
                                                   "direction": "bullish"})}

    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [
        article(1, shanghai(2026, 2, 4, 20, 30), title="茅台提价", body="贵州茅台宣布出厂价上调，经销商订单同比增长两成。"),
        article(4, shanghai(2026, 2, 4, 21), title="宁德订单", body="宁德时代储能电池海外大单落地，订单同比增长三成，排产饱满。"),
    ]

    def respond(body):
        user = body["messages"][1]["content"]
        if "<<<DATA_START>>>" in user:
            data = json.loads(user.split("<<<DATA_START>>>")[1].split("<<<DATA_END>>>")[0])
            ids = {a["title"]: a["analysis_id"] for a in data["analyses"]}
            return json.dumps({"has_opportunity": True, "digest_md": "## 要点", "watchlist": [], "stats": {},
                               "top_opportunities": [{"analysis_id": ids[t], "title": t, "reason": "催化"}
                                                     for t in tops]}, ensure_ascii=False)
        return answers[next(t for t in sorted(answers, key=len, reverse=True) if f"标题：{t}" in user)]

    tops = ["茅台提价"]
    fakes.deepseek.responder = respond
    first, second = shanghai(2026, 2, 4, 22, 1), shanghai(2026, 2, 5, 10, 1)

    def slot(when: datetime, at: datetime, **extra) -> None:
        fakes.at(when)
        run_slot(when, now=when + timedelta(minutes=1), **extra)
        with connect() as conn:  # the push went out at ``at`` (the sink's clock is the wall clock)
            conn.execute("UPDATE notification_log SET sent_at = %s WHERE push_type = 'daily' AND sent_at IS NOT NULL "
                         "AND sent_at NOT IN (%s, %s)", (at, first, second))
            conn.execute("TRUNCATE track_pick, track_outcome, market_fetch, market_bar, market_calendar")

    slot(shanghai(2026, 2, 4, 22), first)
    # a late article makes the rebuild write a new digest, which lists 宁德订单 too; pushed again, forced
    fakes.werss.articles.append(article(6, shanghai(2026, 2, 4, 21, 30), title="机器人",
                                        body="人形机器人量产在即，零部件订单同比增长明显，丝杠需求旺盛。"))
    tops.append("宁德订单")
    slot(shanghai(2026, 2, 5, 10), second, run_type="manual", dag_run_id="rebuild",
         params={"run_date": "2026-02-04", "push_mode": "force"})
    track_record.update(connect, lambda: recorded_source(REPO / "include" / "radar_demo" / "data" / "market"),
                        now=shanghai(2026, 2, 20, 22))
    with connect() as conn:
        picks = {r["title"]: r for r in conn.execute("SELECT title, origin, picked_at, ref_day, ref_kind FROM track_pick")}
    assert picks["茅台提价"]["picked_at"] == first and picks["茅台提价"]["ref_day"] == date(2026, 2, 5)
    assert picks["宁德订单"]["origin"] == "daily" and picks["宁德订单"]["picked_at"] == second
    assert (picks["宁德订单"]["ref_day"], picks["宁德订单"]["ref_kind"]) == (date(2026, 2, 5), "close")  # not the open


# ------------------------------------------------------------------------------------- the week's horizon


def test_the_weekly_page_and_the_weekly_push_state_the_week_s_record_at_one_named_horizon(fakes) -> None:
    """A pick of Monday 2026-02-02 measured at T+1 (a hit) and still waiting at T+5 by Sunday: the push and the
    page both count it at T+1, and both say T+1."""
    from include.radar.report import weekly
    from tests.slotrun import read_page

    with connect() as conn:
        analysis = conn.execute(
            "WITH c AS (INSERT INTO content_item (external_id, title, published_at) VALUES ('w', '周一机会', now()) "
            "RETURNING id) INSERT INTO analysis_result (content_item_id, score, has_opportunity, top_type, summary, "
            "result_json, model, prompt_version) SELECT id, 80, true, 'stock', 's', '{}', 'm', 'v' FROM c RETURNING id"
        ).fetchone()["id"]
        pick = conn.execute(
            "INSERT INTO track_pick (event_id, analysis_id, origin, picked_at, pick_day, score, direction, opp_type, "
            "title, status, instrument, instrument_name, benchmark, benchmark_name) VALUES (%s, %s, 'push', %s, "
            "'2026-02-02', 80, 'bullish', 'stock', '周一机会', 'measurable', 'SH:600519', '贵州茅台', 'SH:000300', "
            "'沪深300') RETURNING id", (analysis, analysis, shanghai(2026, 2, 2, 7))).fetchone()["id"]
        conn.execute("INSERT INTO track_outcome (pick_id, horizon, status, ret, bench_ret, excess, signed_excess, hit) "
                     "VALUES (%s, 1, 'measured', 0.02, 0.01, 0.01, 0.01, true), (%s, 5, 'waiting', NULL, NULL, NULL, "
                     "NULL, NULL)", (pick, pick))
        record = weekly.week_record(conn, date(2026, 2, 2), date(2026, 2, 8))
    assert record == {"picks": 1, "measured": 1, "hits": 1}
    said = next(x for x in weekly.lines({"stats": {"record": record}, "digest_json": {}}) if x.startswith("本周战绩"))
    assert said.startswith("本周战绩：选出 1 条，T+1 已测 1 条")
    page = read_page("/weekly/2026-02-02", shanghai(2026, 2, 8, 23))
    assert "T+1 已测（有方向）1 条" in page
