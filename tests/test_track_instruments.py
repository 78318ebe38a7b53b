"""The right instrument: a code next to a name must agree with the name, a bracketed Hong Kong code is one, and
the price limit is the exchanges' dated rule read from the pick's text and today's listed names.

Every expectation is hand-computed from the listings and bars written here (tests/track_fixtures.py)."""

from __future__ import annotations

from datetime import date

import pytest

from include.radar.market import Bar
from include.radar.market.akshare_source import LibrarySource
from include.radar.market.instruments import Instrument, name_index, parse_code, price_limit, resolve
from include.radar.report import track_record
from tests.conftest import connect
from tests.slotrun import shanghai
from tests.track_fixtures import HandSource, flat, pushed_pick, weekdays

# what stock_info_a_code_name lists under the codes the indices share
LISTED = [("SZ:000001", "平安银行"), ("SZ:000016", "深康佳A"), ("SZ:000905", "厦门港务"), ("SZ:000300", "大冶特钢"),
          ("SZ:000010", "美丽生态"), ("SH:600519", "贵州茅台"), ("SH:600360", "*ST华微"), ("HK:00700", "腾讯控股"),
          ("SZ:159915", "创业板ETF易方达"), ("SZ:159919", "沪深300ETF嘉实")]
NAMES = name_index(LISTED)


def _one(target: str, names=NAMES):
    return resolve([{"type": "stock", "targets": [target], "direction": "bullish"}], names)


@pytest.mark.parametrize(("target", "key"), [
    ("上证指数（000001）", "SH:000001"), ("上证50（000016）", "SH:000016"), ("中证500（000905）", "SH:000905"),
    ("科创50（000688）", "SH:000688"), ("沪深300（000300）", "SH:000300"), ("沪深300 (SH000300)", "SH:000300"),
])
def test_an_index_written_with_its_code_is_the_index_never_the_shenzhen_stock_of_that_number(target, key) -> None:
    found = _one(target)
    assert (found.instrument.key, found.instrument.kind) == (key, "index")
    assert found.benchmark.key == "SH:000300"


def test_a_name_that_contradicts_its_code_is_not_measurable_with_the_reason() -> None:
    other_index = _one("上证指数（000016）")  # 上证指数 is 000001
    assert other_index.instrument is None and "上证指数的代码是 000001" in other_index.reason
    company = _one("平安银行（600519）")  # 600519 is 贵州茅台
    assert company.instrument is None and "代码 600519 是「贵州茅台」" in company.reason
    unknown_index = _one("上证180（000010）")  # not an index the radar knows: 000010 is a Shenzhen company
    assert unknown_index.instrument is None and "美丽生态" in unknown_index.reason


def test_a_name_that_agrees_with_its_code_gives_the_company_and_waits_for_the_listings_when_unknown() -> None:
    assert _one("茅台（600519）").instrument.key == "SH:600519"  # a short form of the listed name
    assert _one("华微电子（600360）").instrument.key == "SH:600360"  # the ST mark set aside
    assert _one("600519.SH").instrument.key == "SH:600519"  # a code alone: nothing to contradict
    waiting = _one("贵州茅台（600519）", names=None)
    assert waiting.instrument is None and waiting.needs_names


def test_a_bracketed_hong_kong_code_after_a_name_is_the_hong_kong_stock() -> None:
    assert parse_code("腾讯控股（00700）").key == "HK:00700"
    assert parse_code("小米集团(01810)").key == "HK:01810"
    found = _one("腾讯控股（00700）")
    assert (found.instrument.key, found.benchmark.key) == ("HK:00700", "HKI:HSI")
    assert parse_code("贵州茅台（600519）").key == "SH:600519"  # six digits stay an A-share code


def test_the_price_limit_is_the_dated_rule_read_from_the_pick_s_text_too() -> None:
    plain = Instrument("SH", "600360", "stock")
    assert price_limit(plain, "*ST华微（600360）", date(2025, 3, 3)) == 0.05  # the ST mark in the target text
    assert price_limit(Instrument("SH", "600360", "stock", "*ST华微"), "600360", date(2025, 3, 3)) == 0.05
    # after the exchanges' 2025-06-27 proposal to make it ±10 %: not judged until its start is entered
    assert price_limit(plain, "*ST华微", date(2025, 9, 1)) is None
    chinext = Instrument("SZ", "300001", "stock", "ST特锐")
    assert price_limit(chinext, "", date(2020, 6, 1)) == 0.05 and price_limit(chinext, "", date(2020, 9, 1)) == 0.20
    assert price_limit(Instrument("SZ", "300750", "stock"), "", date(2020, 6, 1)) == 0.10
    assert price_limit(Instrument("SH", "600519", "stock", "贵州茅台"), "", date(2026, 2, 4)) == 0.10


def test_the_listings_name_the_etfs_so_a_159_etf_known_by_its_code_has_its_limit() -> None:
    answers = {"stock_info_a_code_name": [{"code": "600519", "name": "贵州茅台"}],
               "fund_etf_spot_em": [{"代码": "159915", "名称": "创业板ETF易方达"}, {"代码": "510300", "名称": "沪深300ETF"}],
               "stock_hk_spot_em": [{"代码": "00700", "名称": "腾讯控股"}]}
    listed = LibrarySource(lambda function, **_: answers[function]).listings()
    assert ("SZ:159915", "创业板ETF易方达") in listed and ("SH:510300", "沪深300ETF") in listed
    names = name_index(listed)
    assert names.by_key["SZ:159915"] == "创业板ETF易方达" and "创业板ETF易方达" not in names  # no company by that name
    assert price_limit(Instrument("SZ", "159915", "etf", names.by_key["SZ:159915"]), "159915") == 0.20


DAYS = weekdays(date(2025, 2, 17), date(2025, 4, 30))


def _limit_pick(db_url, target: str, key: str, previous: float, opened: float, limit_listed) -> dict:
    """A pick of ``target`` pushed on Monday 2025-03-03 at 22:00: its reference is Tuesday's open, ``opened``
    after a close of ``previous``, and the day's high is the open (it never traded above it)."""
    bars = {key: flat([d for d in DAYS if d <= date(2025, 3, 3)], previous), "SH:000300": flat(DAYS, 4000.0),
            "CSI:H00300": flat(DAYS, 5200.0)}  # the total-return benchmark of a stock
    bars[key][date(2025, 3, 4)] = Bar(date(2025, 3, 4), opened, opened, opened * 0.97, opened * 0.98)
    source = HandSource(DAYS, bars, listings=limit_listed)
    with connect() as conn:
        pushed_pick(conn, [target], shanghai(2025, 3, 3, 22))
    track_record.update(connect, lambda: source, now=shanghai(2025, 3, 10, 22))
    with connect() as conn:
        return conn.execute("SELECT instrument, ref_day, ref_price, limit_open, ref_note FROM track_pick").fetchone()


def test_a_code_only_st_pick_gets_the_st_limit_from_the_listings(db_url) -> None:
    # 10.00 → 10.50 is +5 %: the ST limit on 2025-03-04 (±5 %), not the main board's ±10 %
    pick = _limit_pick(db_url, "600360", "SH:600360", 10.0, 10.5, LISTED)
    assert (pick["instrument"], pick["ref_day"], pick["ref_price"]) == ("SH:600360", date(2025, 3, 4), 10.5)
    assert pick["limit_open"] == "up" and "涨停开盘" in pick["ref_note"]


def test_a_159_etf_known_only_by_its_code_gets_its_limit_from_its_listed_name(db_url) -> None:
    # 2.00 → 2.40 is +20 %: the limit of 创业板ETF易方达 (a ChiNext ETF)
    pick = _limit_pick(db_url, "159915", "SZ:159915", 2.0, 2.4, LISTED)
    assert (pick["instrument"], pick["ref_price"], pick["limit_open"]) == ("SZ:159915", 2.4, "up")


# ------------------------------------------------------------------------- the benchmark follows the pick


@pytest.mark.parametrize("target", ["平安银行（000001）", "东方电子（000682）", "中信证券（600030）", "长江电力（600900）"])
def test_a_company_s_own_name_never_picks_a_sector_benchmark(target: str) -> None:
    """The sector used to be read from every target, the company's own name included: 平安银行 was measured
    against the Shenwan bank index (a price index, which also inflated its excess)."""
    found = _one(target)
    assert found.instrument.kind == "stock" and found.benchmark.key == "CSI:H00300"


def test_a_sector_benchmark_comes_from_another_target_that_is_a_sector_and_nothing_else() -> None:
    def bench(*targets: str) -> str:
        return resolve([{"type": "stock", "targets": list(targets), "direction": "bullish"}], NAMES).benchmark.key

    assert bench("平安银行（000001）", "银行板块") == "SW:801780"
    assert bench("600519", "白酒") == "SW:801125" and bench("600519", "半导体设备") == "SW:801081"
    # another company whose name holds a sector word is still a company
    assert bench("中信证券（600030）", "华泰证券（601688）") == "CSI:H00300"
    assert bench("600519", "平安银行") == "CSI:H00300" and bench("600519", "高端白酒") == "CSI:H00300"


def test_a_name_that_contradicts_an_index_code_the_radar_knows_is_not_measurable_with_the_reason() -> None:
    """平安银行（SH000001） was measured as the 上证指数: SH000001 is an index code, and an index's name was never
    compared; the radar knows SH:000001 as 上证指数 from its own index names."""
    found = _one("平安银行（SH000001）")
    assert found.instrument is None
    assert found.reason == "「平安银行（SH000001）」：代码 000001 是「上证指数」，与所写名称不符，不作测量"
    assert "深证成指" in _one("平安银行（399001）").reason
    for agreeing in ("上证指数（SH000001）", "上证综指（SH000001）", "上证综合指数（SH000001）", "深证成指（399001）"):
        assert _one(agreeing).instrument.kind == "index", agreeing
    assert _one("上证180（SH000010）").instrument.key == "SH:000010"  # an index the radar has no name for


def test_a_bank_stock_is_measured_against_the_csi_300_total_return_series_by_hand(db_url) -> None:
    """平安银行（000001） pushed on Monday 2025-03-03 at 22:00: Tuesday's open is the reference (10.00). By
    Wednesday's close the stock is up 5 % (10.50), the total-return CSI 300 up 1 % (5200 → 5252) and the Shenwan
    bank index up 5 % (3000 → 3150): the excess at T+1 is 0.05 - 0.01 = +4 %, not the bank index's 0."""
    bars = {"SZ:000001": flat(DAYS, 10.0), "SH:000300": flat(DAYS, 4000.0), "CSI:H00300": flat(DAYS, 5200.0),
            "SW:801780": flat(DAYS, 3000.0)}
    wednesday = date(2025, 3, 5)
    bars["SZ:000001"][wednesday] = Bar(wednesday, 10.0, 10.5, 10.0, 10.5)
    bars["CSI:H00300"][wednesday] = Bar(wednesday, None, None, None, 5252.0)
    bars["SW:801780"][wednesday] = Bar(wednesday, 3000.0, 3150.0, 3000.0, 3150.0)
    with connect() as conn:
        pushed_pick(conn, ["平安银行（000001）"], shanghai(2025, 3, 3, 22))
    track_record.update(connect, lambda: HandSource(DAYS, bars, listings=LISTED), now=shanghai(2025, 3, 10, 22))
    with connect() as conn:
        pick = conn.execute("SELECT instrument, benchmark, ref_price, bench_ref FROM track_pick").fetchone()
        t1 = conn.execute("SELECT ret, bench_ret, excess FROM track_outcome WHERE horizon = 1").fetchone()
    assert (pick["instrument"], pick["benchmark"], pick["ref_price"]) == ("SZ:000001", "CSI:H00300", 10.0)
    assert pick["bench_ref"] == pytest.approx(5200.0)
    assert (t1["ret"], t1["bench_ret"], t1["excess"]) == pytest.approx((0.05, 0.01, 0.04))


def test_picks_recorded_under_the_older_rules_are_resolved_again_once(db_url) -> None:
    """Picks already on record keep what they were resolved to: one measured against its own name's sector, or
    an index a contradicting name stood beside, would stay wrong. The next run resolves those again once: the
    bank stock moves to the CSI 300 total-return series (computed again: +4 % at T+1, as by hand above), the
    index with a company's name becomes not measurable, a stock whose opportunity does name a sector keeps it."""
    bars = {"SZ:000001": flat(DAYS, 10.0), "SZ:300750": flat(DAYS, 200.0), "SH:000300": flat(DAYS, 4000.0),
            "CSI:H00300": flat(DAYS, 5200.0), "SW:801780": flat(DAYS, 3000.0), "SW:801737": flat(DAYS, 1000.0),
            "SH:000001": flat(DAYS, 3300.0)}
    wednesday = date(2025, 3, 5)
    bars["SZ:000001"][wednesday] = Bar(wednesday, 10.0, 10.5, 10.0, 10.5)
    bars["CSI:H00300"][wednesday] = Bar(wednesday, None, None, None, 5252.0)
    listed = [*LISTED, ("SZ:300750", "宁德时代")]
    source = HandSource(DAYS, bars, listings=listed)
    with connect() as conn:
        for targets in (["平安银行（000001）"], ["宁德时代（300750）", "动力电池"], ["平安银行（SH000001）"]):
            pushed_pick(conn, targets, shanghai(2025, 3, 3, 22), title=targets[0])
    track_record.update(connect, lambda: source, now=shanghai(2025, 3, 10, 22))
    with connect() as conn:  # as the older rules recorded them
        conn.execute("UPDATE track_pick SET benchmark = 'SW:801780', benchmark_name = '申万银行' "
                     "WHERE title = '平安银行（000001）'")
        conn.execute("UPDATE track_pick SET status = 'measurable', reason = '', instrument = 'SH:000001', "
                     "benchmark = 'SH:000300' WHERE title = '平安银行（SH000001）'")
        conn.execute("UPDATE track_outcome SET excess = 0.0")
        conn.execute("DELETE FROM service_state WHERE key = 'track:rules'")
    run = track_record.update(connect, lambda: source, now=shanghai(2025, 3, 11, 22))
    assert run.corrected == 2
    with connect() as conn:
        picks = {r["title"]: r for r in conn.execute(
            "SELECT p.title, p.status, p.reason, p.benchmark, o.excess FROM track_pick p "
            "LEFT JOIN track_outcome o ON o.pick_id = p.id AND o.horizon = 1")}
    bank = picks["平安银行（000001）"]
    assert (bank["status"], bank["benchmark"], bank["excess"]) == ("measurable", "CSI:H00300", pytest.approx(0.04))
    assert picks["宁德时代（300750）"]["benchmark"] == "SW:801737" and picks["宁德时代（300750）"]["excess"] == 0.0
    index = picks["平安银行（SH000001）"]
    assert index["status"] == "unmeasurable" and "代码 000001 是「上证指数」" in index["reason"]
    assert track_record.update(connect, lambda: source, now=shanghai(2025, 3, 12, 22)).corrected == 0
