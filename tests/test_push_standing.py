"""Through real slots on the recorded prices: the opportunity push says each coded target's move since its
article, its account's record beside the account's name (no rate below the minimum; the record page's own
figures above it) and, once per push, how calls of the top item's score band fared; a source that is down or
slow costs the push its prices only (「行情未知」), and a rerun sends nothing again.

Rooms: pushes/context.py, pushes/standing.py, steps/push_opportunity.py.
"""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest

from include.radar import store
from include.radar.market import outcomes
from tests.conftest import REPO, connect
from tests.slotrun import answer, article, read_page, run_slot, shanghai

NOON = shanghai(2026, 2, 4, 12)  # 600519's 5-minute bars are recorded for 02-04
MARKET = REPO / "include" / "radar_demo" / "data" / "market"
BODY = "<p>贵州茅台宣布核心产品出厂价上调约20%，渠道利润修复。</p>"


def _answer(body: dict) -> str:
    if "标题：白酒提价\n" not in body["messages"][1]["content"]:
        return "not a digest"
    opportunity = {"name": "提价", "type": "stock", "targets": ["贵州茅台（600519.SH）"], "direction": "bullish",
                   "horizon": "1-3个月", "catalyst": "", "risks": [], "evidence": ["出厂价上调约20%"], "confidence": 0.7}
    return answer(85, "贵州茅台提价约20%，渠道利润修复。", opportunities=[opportunity])


def _picks(n: int, hits: int, account: str = "研究所", score: int = 85) -> None:
    """``n`` earlier bullish picks of ``account`` measured at T+5, ``hits`` right, their excess 1 % apart."""
    with connect() as conn:
        for i in range(n):
            item = conn.execute("INSERT INTO content_item (external_id, title, published_at) VALUES (%s, %s, now()) "
                                "RETURNING id", (f"old-{account}-{i}", f"往期 {i}")).fetchone()["id"]
            analysis = conn.execute(
                "INSERT INTO analysis_result (content_item_id, score, has_opportunity, top_type, summary, result_json, "
                "model, prompt_version) VALUES (%s, %s, true, 'stock', 's', '{}', 'm', 'v') RETURNING id",
                (item, score)).fetchone()["id"]
            pick = conn.execute(
                "INSERT INTO track_pick (event_id, analysis_id, origin, picked_at, pick_day, score, direction, opp_type, "
                "account, title, status, instrument, instrument_name, benchmark, benchmark_name) VALUES (%s, %s, 'push', "
                "'2025-12-01', '2025-12-01', %s, 'bullish', 'stock', %s, 't', 'measurable', 'SH:600519', '贵州茅台', "
                "'CSI:H00300', '沪深300全收益') RETURNING id", (analysis, analysis, score, account)).fetchone()["id"]
            excess = (0.01 * (i % 5) + 0.005) if i < hits else -0.01 * (i % 3)
            conn.execute(
                "INSERT INTO track_outcome (pick_id, horizon, status, end_day, ret, bench_ret, excess, signed_excess, "
                "hit) VALUES (%s, 5, 'measured', '2025-12-08', %s, 0, %s, %s, %s)",
                (pick, excess, excess, excess, i < hits))


def _push(fakes, monkeypatch, when=NOON, published=None) -> dict:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_PUSH_MARKET_CONTEXT", "true")
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles.append(article(1, published or shanghai(2026, 2, 4, 9), title="白酒提价", body=BODY))
    fakes.at(when)
    fakes.deepseek.responder = _answer
    run_slot(when)
    return fakes.sink.received[-1]


def test_the_noon_push_says_the_move_since_the_article_on_the_recorded_bars(fakes, monkeypatch):
    # published 09:00, before the open: from 02-04's open (9191.42; the CSI 300 3945.44) to the bar starting
    # 11:25, the last before lunch (9241.93; 3911.00)
    message = _push(fakes, monkeypatch)["message"]
    assert "贵州茅台 600519：发布后 +0.5%（基准 -0.9%，11:25）" in message.splitlines()
    assert "战绩" not in message  # the record has no pick of this account yet, no band has a sample
    with connect() as conn:
        [analysis] = conn.execute("SELECT a.id FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id "
                                  "WHERE c.title = '白酒提价'").fetchall()
    page = html.unescape(read_page(f"/analysis/{analysis['id']}", NOON + timedelta(hours=3)))
    assert "推送时的行情" in page and "2026-02-04 12:01 推送时取得" in page  # the same figures, later, as pushed
    assert "<li>贵州茅台 600519：发布后 +0.5%（基准 -0.9%，11:25）</li>" in page


@pytest.mark.parametrize(("measured", "rate"), [(outcomes.MIN_SAMPLE - 1, False), (outcomes.MIN_SAMPLE, True)])
def test_the_accounts_record_and_the_bands_are_the_record_pages_own_figures(fakes, monkeypatch, measured, rate):
    _picks(measured, 18)
    message = _push(fakes, monkeypatch)["message"]
    page = html.unescape(read_page("/record", NOON))
    [account] = [line for line in message.splitlines() if line.startswith("研究所 · ")]
    band = [line for line in message.splitlines() if "分的机会" in line]
    if not rate:
        assert account == f"研究所 · 09:00 发布｜该号战绩不足（已测 {measured} 条）" and band == []
        assert f"样本 {measured}，不足 {outcomes.MIN_SAMPLE}" in page
        return
    found = re.fullmatch(r"研究所 · 09:00 发布｜该号战绩 18/30，T\+5 超额 (\S+%（\S+%～\S+%）)", account)
    assert found is not None, account
    assert found[1] in page  # the page's account row (and the band's) writes the same mean and interval
    low, high = outcomes.wilson(18, 30)
    hit = f"60%（{low * 100:.0f}%–{high * 100:.0f}%）"
    assert hit in page
    assert band == [f"80–89 分的机会：已测 30 条，T+5 命中率 {hit}"]


def test_below_the_minimum_setting_an_account_shows_no_rate(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_OUTCOME_MIN_PICKS", "40")
    _picks(35, 20)
    message = _push(fakes, monkeypatch)["message"]
    assert "研究所 · 09:00 发布｜该号战绩不足（已测 35 条）" in message.splitlines()


def test_a_source_configured_wrong_costs_the_push_its_prices_only(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR", "")  # recorded, and no directory
    message = _push(fakes, monkeypatch)["message"]
    assert "贵州茅台 600519：行情未知" in message.splitlines()


def test_turned_off_the_push_asks_no_source_and_says_no_price(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE", "akshare")  # would reach the network if asked
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_PUSH_MARKET_CONTEXT", "false")
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles.append(article(1, shanghai(2026, 2, 4, 9), title="白酒提价", body=BODY))
    fakes.at(NOON)
    fakes.deepseek.responder = _answer
    run_slot(NOON)
    assert "发布后" not in fakes.sink.received[-1]["message"] and "行情未知" not in fakes.sink.received[-1]["message"]


def test_with_the_source_down_the_push_goes_out_saying_the_price_is_unknown_and_a_rerun_sends_nothing(
        fakes, monkeypatch, tmp_path):
    (tmp_path / "stock_zh_a_hist").mkdir()
    (tmp_path / "stock_zh_a_hist" / "600519.json").write_text("not json")  # every daily answer unreadable
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR", str(tmp_path))
    message = _push(fakes, monkeypatch)["message"]
    assert "贵州茅台 600519：行情未知" in message.splitlines()
    with connect() as conn:
        [run] = conn.execute("SELECT warnings FROM slot_run WHERE slot = '12:00'").fetchall()
    assert any("行情未知" in w["message"] for w in run["warnings"])
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR", str(MARKET))
    sent = len(fakes.sink.received)
    run_slot(NOON, now=NOON + timedelta(minutes=5))  # the slot again: its prices would read otherwise now
    assert len(fakes.sink.received) == sent  # one alert per slot: the prices are no part of its identity


def test_a_slow_source_holds_the_push_no_longer_than_its_deadline(fakes, monkeypatch):
    """A source taking 60 s (it waits on an event the test sets when done: nothing sleeps); the deadline
    itself on a FixedClock: test_push_context."""
    import threading
    import time

    from include.radar.steps import push_opportunity

    go = threading.Event()

    class Slow:
        name = "slow"

        def calendar(self):
            go.wait(60)
            return []

    monkeypatch.setattr(push_opportunity, "source_from", lambda settings, timeout=None: lambda: Slow())
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_PUSH_MARKET_SECONDS", "0.5")
    started = time.monotonic()
    try:
        message = _push(fakes, monkeypatch)["message"]
    finally:
        go.set()
    assert "贵州茅台 600519：行情未知" in message.splitlines()
    assert time.monotonic() - started < 30  # the slot's own work and half a second, not the source's 60


def _bars(function: str, code: str) -> dict[str, dict]:
    import json

    rows = json.loads((MARKET / function / f"{code}.json").read_text())
    return {str(r.get("日期", r.get("date")))[:10]: r for r in rows}


def test_the_demo_days_0700_push_says_the_move_the_accounts_record_and_the_bands(fakes, monkeypatch):
    """The demo day (02-04 on the recorded prices, unshifted) after history.py's earlier calls: the top item
    (中微公司, published 02-02 08:30) moved from 02-02's open to 02-03's close; its account and its band (82)
    have 36 measured calls at T+5."""
    from include.radar.core import db
    from include.radar.market.recorded import recorded_source
    from include.radar_demo import history
    from include.radar_demo import run as demo_run

    monkeypatch.setenv("AIRFLOW_VAR_RADAR_PUSH_MARKET_CONTEXT", "true")
    day = shanghai(2026, 2, 4, 0).date()
    werss = demo_run.build_werss(day, fakes.clock)
    fakes.werss.accounts, fakes.werss.articles = werss.accounts, werss.articles
    fakes.deepseek.responder = demo_run.build_deepseek().responder
    with connect() as conn:
        store.focus.save_profile(conn, demo_run.DEMO_PROFILE, "demo")
    earlier = history.seed(db.database_url(), shanghai(2026, 1, 19, 0).date(), day, "http://radar",
                           lambda: recorded_source(MARKET))
    assert earlier.new_picks == history.CALLS and earlier.measurable == history.CALLS
    fakes.at(shanghai(2026, 2, 4, 7))
    run_slot(shanghai(2026, 2, 4, 7))
    message = fakes.sink.received[-1]["message"]
    amec, tr, csi = _bars("stock_zh_a_hist", "688012"), _bars("stock_zh_index_hist_csindex", "H00300"), _bars(
        "index_zh_a_hist", "000300")
    ret = amec["2026-02-03"]["收盘"] / amec["2026-02-02"]["开盘"] - 1
    # the total-return index's open is the price index's scaled by that day's ratio of the closes
    bench_open = csi["2026-02-02"]["开盘"] * tr["2026-02-02"]["收盘"] / csi["2026-02-02"]["收盘"]
    bench = tr["2026-02-03"]["收盘"] / bench_open - 1
    assert f"中微公司 688012：发布后 {ret * 100:+.1f}%（基准 {bench * 100:+.1f}%，02-03 收盘）" in message.splitlines()
    assert re.search(r"^澄观产业研究 · 02-02 08:30 发布｜该号战绩 \d+/36，T\+5 超额 \S+%（\S+%～\S+%）$", message, re.M)
    assert re.search(r"^80–89 分的机会：已测 36 条，T\+5 命中率 \d+%（\d+%–\d+%）$", message, re.M)
    assert "百济神州 688235：尚未开盘" in message.splitlines()  # published 23:30 last night: 02-04's open is to come
