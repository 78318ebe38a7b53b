"""Like against like, and a pick with no data: a backward-adjusted stock is measured against the CSI 300's
total-return series (a price benchmark's excess is said to be biased, beside every excess figure); a pick
whose data never comes is fetched less and less often, then "no data" for good, still counted; the page a
reader opens on a phone puts the figures first.

Every expectation is hand-computed from the bars written here (tests/track_fixtures.py)."""

from __future__ import annotations

from datetime import date

import pytest

from include.radar.market import Bar, MinuteBar, outcomes
from include.radar.market.instruments import name_index, resolve
from include.radar.report import track_record
from tests.conftest import connect
from tests.slotrun import shanghai
from tests.track_fixtures import HandSource, flat, pushed_pick, weekdays

DAYS = weekdays(date(2026, 3, 2), date(2026, 5, 29))
PUSH_DAY, REF_DAY, T1 = date(2026, 3, 3), date(2026, 3, 4), date(2026, 3, 5)


def _one(target: str, opp_type: str = "stock"):
    names = name_index([("SH:600519", "贵州茅台"), ("HK:00700", "腾讯控股"), ("SH:510300", "沪深300ETF")])
    return resolve([{"type": opp_type, "targets": [target], "direction": "bullish"}], names)


# ---------------------------------------------------------------------------------------------- the basis


def test_a_stock_or_etf_is_measured_against_the_total_return_index_and_an_index_against_the_price_index() -> None:
    assert _one("贵州茅台（600519）").benchmark.key == "CSI:H00300"
    assert _one("510300").benchmark.key == "CSI:H00300"  # an ETF's price is adjusted too
    assert _one("沪深300").benchmark.key == "SH:000300"  # a price index against a price index
    assert _one("半导体", "sector").benchmark.key == "SH:000300"
    assert _one("腾讯控股（00700）").benchmark.key == "HKI:HSI"  # no total-return Hang Seng in the library


def _bars() -> dict[str, dict[date, Bar]]:
    """600519 opens at 100 on 4 March and closes at 102 on the 5th; the CSI 300 price index opens and closes at
    4000 on the 4th and closes at 4040 (+1 %) on the 5th; its total-return series (closes only, as CSI publishes
    it) is 1.3 times it on the 4th (5200) and reinvests a 0.5 % dividend on the 5th: 5200 × 1.01 × 1.005."""
    stock = flat([d for d in DAYS if d < REF_DAY], 99.0)
    stock[REF_DAY] = Bar(REF_DAY, 100.0, 101.5, 99.5, 100.0)
    stock.update({d: Bar(d, 101.0, 102.5, 100.5, 102.0) for d in DAYS if d >= T1})
    price = flat([d for d in DAYS if d <= REF_DAY], 4000.0)
    price.update(flat([d for d in DAYS if d >= T1], 4040.0))
    total = {d: Bar(d, None, None, None, 5200.0) for d in DAYS if d <= REF_DAY}
    total.update({d: Bar(d, None, None, None, 5278.26) for d in DAYS if d >= T1})
    return {"SH:600519": stock, "SH:000300": price, "CSI:H00300": total}


def _pick_and_measure(source: HandSource, at) -> dict:
    with connect() as conn:
        pushed_pick(conn, ["600519"], at)
    track_record.update(connect, lambda: source, now=shanghai(2026, 3, 20, 22))
    with connect() as conn:
        return conn.execute(
            "SELECT p.benchmark, p.benchmark_name, p.ref_kind, p.ref_price, p.bench_ref, o.ret, o.bench_ret, o.excess "
            "FROM track_pick p JOIN track_outcome o ON o.pick_id = p.id AND o.horizon = 1").fetchone()


def test_an_evening_pick_s_benchmark_return_counts_the_dividend_reinvested(db_url) -> None:
    source = HandSource(DAYS, _bars())
    row = _pick_and_measure(source, shanghai(2026, 3, 3, 22))
    # reference: 4 March's open; the total-return index then: the price index's open 4000 × 5200 / 4000 = 5200
    assert (row["benchmark"], row["benchmark_name"], row["ref_kind"]) == ("CSI:H00300", "沪深300全收益", "open")
    assert row["ref_price"] == 100.0 and row["bench_ref"] == pytest.approx(5200.0)
    # T+1: 102 / 100 − 1 = +2 %; the benchmark 5278.26 / 5200 − 1 = +1.505 % (the price index: +1 %)
    assert row["ret"] == pytest.approx(0.02) and row["bench_ret"] == pytest.approx(0.01505)
    assert row["excess"] == pytest.approx(0.00495)  # not +1 %: the dividend is no longer counted as skill


def test_a_pick_during_the_session_takes_the_total_return_index_at_the_same_minute(db_url) -> None:
    at = shanghai(2026, 3, 4, 10, 30)
    minutes = {("SH:600519", REF_DAY): [MinuteBar(shanghai(2026, 3, 4, 10, 25), 100.5),
                                        MinuteBar(shanghai(2026, 3, 4, 10, 30), 101.0)],
               ("SH:000300", REF_DAY): [MinuteBar(shanghai(2026, 3, 4, 10, 25), 4010.0),
                                        MinuteBar(shanghai(2026, 3, 4, 10, 30), 4020.0)]}
    source = HandSource(DAYS, _bars(), minutes=minutes)
    row = _pick_and_measure(source, at)
    # the 10:30 bar: 101; the benchmark 4020 × 5200 / 4000 = 5226, and at T+1 5278.26 / 5226 − 1 = +1 %
    assert (row["ref_kind"], row["ref_price"], row["bench_ref"]) == ("intraday", 101.0, pytest.approx(5226.0))
    assert row["ret"] == pytest.approx(102 / 101 - 1) and row["bench_ret"] == pytest.approx(0.01)
    assert ("intraday", "CSI:H00300") not in source.calls  # CSI publishes no 5-minute prices: the twin's, scaled
    assert ("daily", "CSI:H00300") in source.calls and ("intraday", "SH:000300") in source.calls


def test_a_price_benchmark_s_bias_is_said_beside_every_excess_figure_and_a_total_return_one_s_is_not(fakes) -> None:
    from tests.slotrun import read_page

    with connect() as conn:
        for i, (instrument, benchmark, name) in enumerate((("HK:00700", "HKI:HSI", "恒生指数"),
                                                            ("SH:600519", "CSI:H00300", "沪深300全收益"),
                                                            ("SH:000001", "SH:000300", "沪深300"))):
            analysis = conn.execute(
                "WITH c AS (INSERT INTO content_item (external_id, title, published_at) VALUES (%s, %s, now()) "
                "RETURNING id) INSERT INTO analysis_result (content_item_id, score, has_opportunity, top_type, "
                "summary, result_json, model, prompt_version) SELECT id, 80, true, 'stock', 's', '{}', 'm', 'v' "
                "FROM c RETURNING id", (f"b{i}", f"基准{i}")).fetchone()["id"]
            pick = conn.execute(
                "INSERT INTO track_pick (event_id, analysis_id, origin, picked_at, pick_day, score, direction, "
                "opp_type, title, status, instrument, instrument_name, benchmark, benchmark_name) VALUES (%s, %s, "
                "'push', %s, '2026-03-03', 80, 'bullish', 'stock', %s, 'measurable', %s, '', %s, %s) RETURNING id",
                (analysis, analysis, shanghai(2026, 3, 3, 22 - i), f"基准{i}", instrument, benchmark, name)
            ).fetchone()["id"]
            conn.execute("INSERT INTO track_outcome (pick_id, horizon, status, ret, bench_ret, excess, signed_excess, "
                         "hit) VALUES (%s, 5, 'measured', 0.03, 0.01, 0.02, 0.02, true)", (pick,))
    html = read_page("/record", shanghai(2026, 3, 21, 9))
    cards = {i: html[html.index(f"基准{i}</a>"):][:3000].split('class="item pick"')[0] for i in range(3)}
    assert "+2.0%</b><sup" in cards[0] and "基准恒生指数是价格指数（不含分红）" in cards[0] and "3–4%" in cards[0]
    assert "<sup" not in cards[1] and "价格指数" not in cards[1]  # against the total-return series
    assert "<sup" not in cards[2] and "价格指数" not in cards[2]  # an index against a price index
    with connect() as conn:
        from include.radar import store

        [total] = [r for r in store.track.summary_groups(conn, store.track.RecordFilters(), 5) if r["dim"] == "all"]
    assert (total["directional"], total["biased"]) == (3, 1)
    assert outcomes.Group.from_sums("all", "全部", total).biased == 1


# ------------------------------------------------------------------------------------------------ no data


class Unknown(HandSource):
    """The hand-made source; ``fails``: a code it does not know raises (akshare's KeyError) instead of answering
    an empty table."""

    def __init__(self, *args, fails: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fails = fails

    def daily(self, instrument, start, end):
        if self.fails and instrument.key == "SH:688981":
            self.calls.append(("daily", instrument.key))
            from include.radar.market import SourceError

            raise SourceError("akshare.stock_zh_a_hist failed: KeyError: '688981'")
        return super().daily(instrument, start, end)


@pytest.mark.parametrize("fails", [False, True])
def test_a_pick_without_data_is_asked_for_less_and_less_often_then_is_no_data_for_good(db_url, fails) -> None:
    """688981 is pushed on 3 March at 22:00 and the source never has a bar of it. The step runs every evening
    until 10 April: it asks on 3, 4, 6, 10, 18 and 26 March (after 1, 2, 4, 8, 8 days) — not 39 times — and on
    2 April, 30 days after the pick, the pick is "no data" for good and never asked for again; it stays in the
    record's denominators."""
    from datetime import timedelta

    from include.radar import store

    source = Unknown(DAYS, _bars(), fails=fails)
    with connect() as conn:
        pushed_pick(conn, ["688981"], shanghai(2026, 3, 3, 22))
    day = date(2026, 3, 3)
    while day <= date(2026, 4, 10):
        track_record.update(connect, lambda: source, now=shanghai(day.year, day.month, day.day, 22))
        day += timedelta(days=1)
    asked = [c for c in source.calls if c == ("daily", "SH:688981")]
    assert len(asked) == 6
    with connect() as conn:
        pick = conn.execute("SELECT id, no_data_final, ref_note FROM track_pick").fetchone()
        rows = conn.execute("SELECT status, note FROM track_outcome WHERE pick_id = %s ORDER BY horizon",
                            (pick["id"],)).fetchall()
        assert pick["no_data_final"] == date(2026, 4, 2) and store.track.open_picks(conn) == []
        assert [r["status"] for r in rows] == ["no_data"] * 3
        assert all("行情源没有 SH:688981" in r["note"] and "不再重试" in r["note"] for r in rows)
        [total] = [r for r in store.track.summary_groups(conn, store.track.RecordFilters(), 5) if r["dim"] == "all"]
    assert (total["picks"], total["no_data"], total["unpriced_calls"]) == (1, 1, 1)  # still in the denominator


# ------------------------------------------------------------------------------------------------ the page


def _measured_pick(conn, title: str, score: int, direction: str, ret: float, bench: float) -> None:
    analysis = conn.execute(
        "WITH c AS (INSERT INTO content_item (external_id, title, published_at) VALUES (%s, %s, now()) RETURNING id) "
        "INSERT INTO analysis_result (content_item_id, score, has_opportunity, top_type, summary, result_json, model, "
        "prompt_version) SELECT id, %s, true, 'stock', 's', '{}', 'm', 'v' FROM c RETURNING id",
        (title, title, score)).fetchone()["id"]
    pick = conn.execute(
        "INSERT INTO track_pick (event_id, analysis_id, origin, picked_at, pick_day, score, direction, opp_type, "
        "title, status, instrument, instrument_name, benchmark, benchmark_name) VALUES (%s, %s, 'push', %s, "
        "'2026-03-03', %s, %s, 'stock', %s, 'measurable', 'SH:600519', '贵州茅台', 'CSI:H00300', '沪深300全收益') "
        "RETURNING id", (analysis, analysis, shanghai(2026, 3, 3, 22), score, direction, title)).fetchone()["id"]
    sign = 1 if direction == "bullish" else -1
    conn.execute("INSERT INTO track_outcome (pick_id, horizon, status, ret, bench_ret, excess, signed_excess, hit) "
                 "VALUES (%s, 5, 'measured', %s, %s, %s, %s, %s)",
                 (pick, ret, bench, ret - bench, sign * (ret - bench), sign * ret > 0))


def test_the_page_opens_on_the_figures_with_the_method_folded_and_a_calibration_a_few_picks_can_fill(fakes) -> None:
    """Two measured calls at T+5: a bullish one scored 82 that rose 3 % (right), a bearish one scored 64 that
    rose 1 % (wrong). The page opens on the figures — 2 picks, 2 measured, 2 of the 30 a hit rate needs — the
    method is folded under 怎么算的, and the calibration counts each band's calls toward 30 (80–89: 1, right;
    60–69: 1, wrong; the others 0) instead of two charts with nothing drawn but n=1."""
    from tests.slotrun import read_page

    with connect() as conn:
        _measured_pick(conn, "看多茅台", 82, "bullish", 0.03, 0.01)
        _measured_pick(conn, "看空茅台", 64, "bearish", 0.01, 0.02)
    html = read_page("/record", shanghai(2026, 3, 21, 9))
    body = html[html.index("<h1>战绩"):]
    figures, method = body.index('class="tiles"'), body.index("<summary>怎么算的</summary>")
    assert figures < method < body.index("参考价是推送之后读者最早能成交的价格")  # the method follows, folded
    assert body.index("<details") < body.index("参考价是推送之后") < body.index("</details>")
    tiles = body[figures:method]
    assert ">2</div>" in tiles and "2 / 30" in tiles and "满 30 条才算命中率" in tiles
    assert body.index("2 / 30") < body.index('class="item pick"')
    chart = body[body.index('class="chart progress"'):]
    chart = chart[:chart.index("</svg>")]
    for band, said in (("90–100 分", "0 / 30 · 对 0 错 0"), ("80–89 分", "1 / 30 · 对 1 错 0"),
                       ("60–69 分", "1 / 30 · 对 0 错 1"), ("60 以下 分", "0 / 30 · 对 0 错 0")):
        assert band in chart and said in chart, band
    assert chart.index("80–89 分") < chart.index("1 / 30 · 对 1 错 0") < chart.index("60–69 分")
    assert 'class="chart"' not in body  # no interval chart with nothing to draw


def test_a_try_dated_after_today_does_not_hold_back_todays_fetch() -> None:
    """The backoff counts days since the last try; a last try after today (a clock set back, a day replayed,
    as the demo and the evaluation replay a past day after a run at the wall clock's time) leaves today due."""
    from include.radar.report.track_record import _due

    today = date(2026, 3, 18)
    assert _due((1, date(2026, 11, 27)), today) is True
    assert _due((3, date(2026, 3, 16)), today) is False  # the third try waits 4 days
    assert _due((3, date(2026, 3, 14)), today) is True
