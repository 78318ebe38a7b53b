"""What the pushes say, through real slots: the opportunity push lets a reader decide from the push alone (each
opportunity's thesis, score, direction, type, targets with their codes, a verified quote, account and time, how
many accounts), in each of the three forms a channel shows (golden messages); the 22:00 push gives the day in a
glance and the track record's hit rate only where the record page concludes one; exactly-once does not depend on
the rendering.

Rooms: briefs.py, message.py, push.py (channel_form), steps/push_opportunity.py, steps/daily_report.py.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from markdown_it import MarkdownIt

from include.radar import store
from include.radar.core import db
from include.radar.market import outcomes
from tests.conftest import connect
from tests.slotrun import answer, article, read_page, run_slot, shanghai

SLOT = shanghai(2026, 1, 8, 14)
DAILY = shanghai(2026, 1, 8, 22)
SIGNED = re.compile(r"exp=\d+&(amp;)?sig=[0-9a-f]{64}")

BODIES = {
    "白酒提价": "<p>贵州茅台宣布核心产品出厂价上调约20%，渠道利润修复。</p>",
    "版号收紧": "<p>游戏版号发放节奏放缓，腾讯控股新游上线推迟，收入增速承压。</p>",
    "储能集采放量": "<p>储能集采中标规模达80亿元，宁德时代储能订单同比增长80%，龙头份额提升。</p>",
    "储能订单高增": "<p>宁德时代储能订单同比增长80%，储能集采中标规模达80亿元，行业景气上行。</p>",
}


def _opportunity(kind: str, direction: str, targets: list[str], quote: str) -> dict:
    return {"name": "机会", "type": kind, "targets": targets, "direction": direction, "horizon": "1-3个月",
            "catalyst": "", "risks": [], "evidence": [quote], "confidence": 0.7}


ANSWERS = {  # one bullish stock, one bearish, one event two accounts wrote about that the watchlist names
    "白酒提价": (85, "贵州茅台（600519.SH）提价约20%，渠道利润修复。后续看批价。",
             _opportunity("stock", "bullish", ["贵州茅台（600519.SH）"], "出厂价上调约20%")),
    "版号收紧": (72, "版号节奏放缓，腾讯控股（0700.HK）新游推迟、收入承压。短期回避。",
             _opportunity("stock", "bearish", ["腾讯控股(0700.HK)"], "新游上线推迟")),
    "储能集采放量": (78, "储能集采放量，宁德时代订单高增。",
               _opportunity("sector", "bullish", ["储能", "宁德时代(300750.SZ)"], "储能订单同比增长80%")),
    "储能订单高增": (75, "宁德时代储能订单高增。",
               _opportunity("sector", "bullish", ["储能", "宁德时代(300750.SZ)"], "储能订单同比增长80%")),
}


def _respond(body: dict) -> str:
    user = body["messages"][1]["content"]
    title = next((t for t in ANSWERS if f"标题：{t}\n" in user), None)
    if title is None:
        return "not a digest"  # the daily digest: the database's stands in
    score, summary, opportunity = ANSWERS[title]
    return answer(score, summary, opportunities=[opportunity])


def _three_forms(fakes, monkeypatch) -> None:
    """The reader's channels: one of each form a channel shows, all on the test's sink (apprise's ``:format``
    puts the form into the JSON it posts)."""
    host = fakes.base.split("://", 1)[1]
    urls = [f"json://{host}/push/one"] + [f"json://{host}/push/one?format={f}&:format={f}" for f in ("markdown", "html")]
    monkeypatch.setenv("AIRFLOW_CONN_RADAR_PUSH", json.dumps({"conn_type": "generic", "extra": {"urls": urls}}))


def _slot_of_three(fakes, monkeypatch) -> dict[str, int]:
    _three_forms(fakes, monkeypatch)
    with connect() as conn:
        store.focus.save_profile(conn, {"companies": [], "tickers": [], "sectors": ["储能"], "interests": [], "rules": []}, "t")
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}, {"id": "MP_WXS_2", "mp_name": "前哨站"}]
    for n, (title, minute) in enumerate((("白酒提价", 0), ("版号收紧", 30), ("储能集采放量", 60), ("储能订单高增", 70)), 1):
        fakes.werss.articles.append(article(n, shanghai(2026, 1, 8, 12) + timedelta(minutes=minute), title=title,
                                            body=BODIES[title], mp="MP_WXS_2" if n == 4 else "MP_WXS_1"))
    fakes.at(SLOT)
    fakes.deepseek.responder = _respond
    result = run_slot(SLOT)
    assert result["errors"] == {}, result["errors"]
    with connect() as conn:
        rows = conn.execute("SELECT a.id, c.title FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id"
                            ).fetchall()
    return {r["title"]: r["id"] for r in rows}


def _by_form(messages: list[dict]) -> dict[str, dict]:
    return {m.get("format", "text"): m for m in messages}


def test_the_opportunity_push_in_each_form_is_the_golden_message(fakes, monkeypatch):
    ids = _slot_of_three(fakes, monkeypatch)
    sent = _by_form(fakes.sink.received)
    assert sorted(sent) == ["html", "markdown", "text"] and len(fakes.sink.received) == 3
    assert {m["title"] for m in sent.values()} == {"【机会提醒】14:00 发现 3 条（最高分 85）"}  # the seed's title
    top, maotai, tencent = ids["储能集采放量"], ids["白酒提价"], ids["版号收紧"]
    base = "https://radar.example.com/radar/analysis"
    assert SIGNED.sub("S", sent["text"]["message"]) == f"""储能集采放量，宁德时代订单高增。
78 分｜看多｜行业｜★ 关注命中：储能
标的：宁德时代 300750、储能
证据：「储能订单同比增长80%」
研究所 · 13:00 发布
2 个公众号报道：研究所、前哨站

贵州茅台（600519）提价约20%，渠道利润修复。
85 分｜看多｜个股
标的：贵州茅台 600519
证据：「出厂价上调约20%」
研究所 · 12:00 发布

版号节奏放缓，腾讯控股（00700）新游推迟、收入承压。
72 分｜看空｜个股
标的：腾讯控股 00700
证据：「新游上线推迟」
研究所 · 12:30 发布
{base}/{top}?S"""
    assert SIGNED.sub("S", sent["markdown"]["message"]) == f"""**储能集采放量，宁德时代订单高增。**  
78 分｜看多｜行业｜★ 关注命中：储能  
标的：宁德时代 300750、储能  
证据：「储能订单同比增长80%」  
研究所 · 13:00 发布  
2 个公众号报道：研究所、前哨站

**贵州茅台（600519）提价约20%，渠道利润修复。**  
85 分｜看多｜个股  
标的：贵州茅台 600519  
证据：「出厂价上调约20%」  
研究所 · 12:00 发布 · [详情](<{base}/{maotai}?S>)

**版号节奏放缓，腾讯控股（00700）新游推迟、收入承压。**  
72 分｜看空｜个股  
标的：腾讯控股 00700  
证据：「新游上线推迟」  
研究所 · 12:30 发布 · [详情](<{base}/{tencent}?S>)

[查看分析](<{base}/{top}?S>)"""  # noqa: W291 (Markdown's hard line breaks)
    assert SIGNED.sub("S", sent["html"]["message"]) == f"""<b>储能集采放量，宁德时代订单高增。</b><br>
78 分｜看多｜行业｜★ 关注命中：储能<br>
标的：宁德时代 300750、储能<br>
证据：「储能订单同比增长80%」<br>
研究所 · 13:00 发布<br>
2 个公众号报道：研究所、前哨站<br>
<br>
<b>贵州茅台（600519）提价约20%，渠道利润修复。</b><br>
85 分｜看多｜个股<br>
标的：贵州茅台 600519<br>
证据：「出厂价上调约20%」<br>
研究所 · 12:00 发布 · <a href="{base}/{maotai}?S">详情</a><br>
<br>
<b>版号节奏放缓，腾讯控股（00700）新游推迟、收入承压。</b><br>
72 分｜看空｜个股<br>
标的：腾讯控股 00700<br>
证据：「新游上线推迟」<br>
研究所 · 12:30 发布 · <a href="{base}/{tencent}?S">详情</a><br>
<br>
<a href="{base}/{top}?S">查看分析</a>"""


MORE = {"光伏订单": ("光伏组件排产环比提升，硅料价格企稳回升。", "硅料价格企稳回升"),
        "锂矿复产": ("澳洲锂矿复产计划推迟，碳酸锂库存持续去化。", "碳酸锂库存持续去化"),
        "风电招标": ("海上风电招标容量创新高，整机价格止跌。", "整机价格止跌")}


def test_past_three_opportunities_the_push_says_how_many_more_and_links_the_days_page(fakes, monkeypatch):
    for title, (text, quote) in MORE.items():
        BODIES[title] = f"<p>{text}</p>"
        ANSWERS[title] = (66, f"{title}回暖。", _opportunity("sector", "bullish", [title], quote))
    try:
        fakes.werss.articles += [article(n, shanghai(2026, 1, 8, 11, n), title=t, body=BODIES[t], mp="MP_WXS_2")
                                 for n, t in enumerate(MORE, 5)]
        _slot_of_three(fakes, monkeypatch)
    finally:
        for title in MORE:
            BODIES.pop(title), ANSWERS.pop(title)
    sent = _by_form(fakes.sink.received)
    assert sent["text"]["title"] == "【机会提醒】14:00 发现 6 条（最高分 85）"
    text = sent["text"]["message"]
    assert text.count(" 分｜") == 3 and "\n\n另有 3 条\nhttps://radar.example.com/radar/analysis/" in text
    assert "回暖" not in text  # the three best are shown, whole; the 66s are left to the day's page
    assert re.search(r"另有 3 条 · \[当日日报\]\(<https://radar\.example\.com/radar/daily/2026-01-08\?exp=\d+&sig=",
                     sent["markdown"]["message"])


def test_a_rerun_after_the_slots_text_changed_sends_nothing_to_any_form(fakes, monkeypatch):
    """The message's identity is the slot and the channel, never its rendering: the same slot run again with
    one more opportunity (another text in every form) is not sent again."""
    _slot_of_three(fakes, monkeypatch)
    fakes.werss.articles.append(article(9, shanghai(2026, 1, 8, 13, 30), title="白酒提价续", mp="MP_WXS_2",
                                        body="<p>另一家酒企跟进提价，出厂价上调约20%。</p>"))
    ANSWERS["白酒提价续"] = (70, "酒企跟进提价。", _opportunity("sector", "bullish", ["白酒"], "出厂价上调约20%"))
    try:
        run_slot(SLOT, dag_run_id="rerun")
    finally:
        ANSWERS.pop("白酒提价续")
    assert len(fakes.sink.received) == 3
    with connect() as conn:
        rows = conn.execute("SELECT msg_uuid, body FROM notification_log WHERE push_type = 'opportunity'").fetchall()
    assert len(rows) == 3 and len({r["msg_uuid"] for r in rows}) == 3
    assert {r["body"].split("\n", 1)[0] for r in rows} == {  # each channel's row keeps its own form's text
        "储能集采放量，宁德时代订单高增。", "**储能集采放量，宁德时代订单高增。**  ", "<b>储能集采放量，宁德时代订单高增。</b><br>"}


def test_the_daily_push_gives_the_day_in_a_glance_with_each_picks_call(fakes, monkeypatch):
    ids = _slot_of_three(fakes, monkeypatch)
    fakes.sink.received.clear()
    fakes.at(DAILY)
    run_slot(DAILY)
    text = _by_form(fakes.sink.received)["text"]
    assert text["title"] == "【日报】2026-01-08：3 条机会（最高分 85）"
    head, *parts = SIGNED.sub("S", text["message"]).split("\n\n")
    assert head.startswith("分析 4 篇，机会 3 条，失败 0 篇\n公众号覆盖 2/2（100%）")
    assert parts[:3] == [  # the report's picks, in its order, marked; each with its verified quote
        "· 【精选】储能集采放量（2 个公众号报道）\n78 分｜看多｜行业｜标的：宁德时代 300750、储能\n证据：「储能订单同比增长80%」",
        "· 【精选】白酒提价\n85 分｜看多｜个股｜标的：贵州茅台 600519\n证据：「出厂价上调约20%」",
        "· 【精选】版号收紧\n72 分｜看空｜个股｜标的：腾讯控股 00700\n证据：「新游上线推迟」",
    ]
    assert parts[3].endswith("\nhttps://radar.example.com/radar/daily/2026-01-08?S")
    markdown = _by_form(fakes.sink.received)["markdown"]["message"]
    for title in ("储能集采放量", "白酒提价", "版号收紧"):  # each pick links its own analysis where links are allowed
        assert f"/analysis/{ids[title]}?exp=" in markdown
    assert "战绩" not in text["message"]  # no record yet


def _measured_picks(n: int, hits: int) -> None:
    """``n`` earlier picks, bullish, measured at the record page's horizon, ``hits`` of them right."""
    with connect() as conn:
        for i in range(n):
            item = conn.execute("INSERT INTO content_item (external_id, title, published_at) VALUES (%s, %s, now()) "
                                "RETURNING id", (f"old-{i}", f"往期 {i}")).fetchone()["id"]
            analysis = conn.execute(
                "INSERT INTO analysis_result (content_item_id, score, has_opportunity, top_type, summary, result_json, "
                "model, prompt_version) VALUES (%s, 70, true, 'stock', 's', '{}', 'm', 'v') RETURNING id",
                (item,)).fetchone()["id"]
            pick = conn.execute(
                "INSERT INTO track_pick (event_id, analysis_id, origin, picked_at, pick_day, score, direction, opp_type, "
                "account, title, status, instrument, instrument_name, benchmark, benchmark_name) VALUES (%s, %s, 'push', "
                "now() - interval '40 days', current_date - 40, 70, 'bullish', 'stock', '研究所', 't', 'measurable', "
                "'SH:600519', '贵州茅台', 'SH:000300', '沪深300') RETURNING id", (analysis, analysis)).fetchone()["id"]
            conn.execute(
                "INSERT INTO track_outcome (pick_id, horizon, status, end_day, ret, bench_ret, excess, signed_excess, "
                "hit) VALUES (%s, %s, 'measured', current_date - 30, %s, 0, %s, %s, %s)",
                (pick, 5, 0.02 if i < hits else -0.02, 0.02 if i < hits else -0.02, 0.02 if i < hits else -0.02,
                 i < hits))


@pytest.mark.parametrize(("measured", "said"), [(outcomes.MIN_SAMPLE - 1, False), (outcomes.MIN_SAMPLE, True)])
def test_the_daily_push_gives_the_records_hit_rate_only_where_the_record_page_concludes_one(fakes, measured, said):
    _measured_picks(measured, 18)
    page = read_page("/record", DAILY)  # the page's default horizon, T+5, over all picks, as the push reads them
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.at(DAILY)
    run_slot(DAILY)
    [daily] = fakes.sink.received
    low, high = outcomes.wilson(18, measured)
    figures = f"{18 / measured * 100:.0f}%（{low * 100:.0f}%–{high * 100:.0f}%）"
    line = f"战绩：T+5 命中率 {figures}，样本 {measured} 条（过往判断的记录，不是投资建议）"
    assert (line in daily["message"].splitlines()) is said
    assert (figures in page) is said and (f"样本 {measured}，不足 {outcomes.MIN_SAMPLE}" in page) is not said


# ------------------------------------------------------------------------------------------- on a phone

PHONE_PAGE = """<!doctype html><html lang="zh-CN"><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ margin: 0; background: #ededed; font: 15px/1.55 -apple-system, "Noto Sans CJK SC", sans-serif; color: #191919; }}
.bar {{ background: #f7f7f7; padding: 12px; text-align: center; font-weight: 600; border-bottom: 1px solid #d9d9d9; }}
.bar small {{ display: block; font-weight: 400; color: #888; font-size: 12px; }}
.msg {{ margin: 14px 12px; background: #fff; border-radius: 8px; padding: 12px 14px; overflow-wrap: anywhere; }}
.msg p {{ margin: 0 0 10px; }} .msg p:last-child {{ margin: 0; }}
.title {{ font-weight: 700; margin-bottom: 8px; }}
.plain {{ white-space: pre-wrap; }}
a {{ color: #576b95; text-decoration: none; }}
</style>
<div class="bar">机会雷达<small>{channel}</small></div>
<div class="msg {kind}"><div class="title">{title}</div>{body}</div>
</html>"""


def _phone_page(message: dict) -> str:
    """A push as a chat app shows it: Markdown rendered by CommonMark (markdown-it), plain text as it is, the
    bare link made a link (as WeCom and Telegram do)."""
    import html

    if message.get("format") == "markdown":
        body = MarkdownIt("commonmark").render(message["message"])
        return PHONE_PAGE.format(channel="Markdown 频道（钉钉、Discord、Slack、Server酱）", kind="md",
                                 title=html.escape(message["title"]), body=body)
    *lines, link = message["message"].splitlines()
    text = html.escape("\n".join(lines)) + f'\n<a href="{html.escape(link)}">{html.escape(link)}</a>'
    return PHONE_PAGE.format(channel="纯文本频道（企业微信、飞书、Bark）", kind="plain", title=html.escape(message["title"]),
                             body=text)


@pytest.mark.browser
def test_the_demo_days_pushes_on_a_phone(fakes, monkeypatch):
    """The demo day's 07:00 and 22:00 pushes as a Markdown channel renders them and as a plain-text channel shows
    them, on a phone-width screen (screenshots for docs/screenshots): each opportunity's score, direction,
    targets with codes and quote, no line wider than the screen."""
    from include.radar_demo import run as demo_run
    from tests.browser import PHONE, chromium, screenshot

    _three_forms(fakes, monkeypatch)
    day = shanghai(2026, 2, 4, 0).date()
    werss = demo_run.build_werss(day, fakes.clock)
    fakes.werss.accounts, fakes.werss.articles = werss.accounts, werss.articles
    fakes.deepseek.responder = demo_run.build_deepseek().responder
    with connect() as conn:
        store.focus.save_profile(conn, demo_run.DEMO_PROFILE, "demo")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_PUSH_MARKET_CONTEXT", "true")  # as `make run`: prices and a record
    demo_run.seed_history(day, db.database_url())
    pushed = {}
    for hour in (7, 12, 14, 18, 22):
        before = len(fakes.sink.received)
        fakes.at(shanghai(2026, 2, 4, hour))
        run_slot(shanghai(2026, 2, 4, hour))
        pushed[hour] = _by_form(fakes.sink.received[before:])
    morning = pushed[7]["text"]["message"]
    for said in ("82 分｜看多｜行业｜★ 关注命中：半导体设备", "标的：中微公司 688012、拓荆科技 688072",
                 "证据：「近四周国内晶圆厂设备招标总量达到412台，环比增长37%」", "74 分｜看多｜商品", "江西铜业 00358",
                 "63 分｜看多｜行业", "恒瑞医药 600276", "中微公司 688012：发布后 ", "｜该号战绩 ", "80–89 分的机会："):
        assert said in morning, said
    with chromium() as browser:
        page = browser.new_page(viewport=PHONE, is_mobile=True)
        for hour in (7, 22):
            for form in ("markdown", "text"):
                page.set_content(_phone_page(pushed[hour][form]))
                assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
                assert page.locator(".msg a").count() == (
                    {7: 3, 22: 6}[hour] if form == "markdown" else 1)  # the items' own pages where links go
                screenshot(page, f"push-{hour:02d}00-{form}.png")
