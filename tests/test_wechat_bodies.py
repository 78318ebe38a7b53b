"""WeChat's own pages saved by WeRSS as an article's body (the verification page, a deleted or
blocked article's page) and cut bodies are recognised by their shape, never analysed or paid for, and
counted per account and on the slot; an article that only quotes such a page is analysed.

Rooms: body_check.py, cleaning.py, ingest.py and steps/ingest.py (counted per account and slot).
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from include.radar import store
from include.radar.collect import body_check
from include.radar.collect.body_check import GONE, INCOMPLETE, VERIFICATION
from include.radar.collect.cleaning import clean_html
from include.radar_demo.fakes import BLOCKED_HTML, DELETED_HTML, VERIFICATION_HTML, VERIFICATION_TEXT, FakeArticle
from tests.conftest import connect
from tests.slotrun import answer, article, read_page, run_slot, shanghai, slot_clock

SLOT = shanghai(2026, 1, 8, 12)
ACCOUNT = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
ARTICLE_TEXT = "<p>第1篇文章正文：某储能龙头订单同比增长10%，行业景气回升。</p>"
QUOTING = (
    '<div id="js_content"><p>最近不少读者反映，用脚本抓取公众号文章时只得到一句「当前环境异常，完成验证后即可继续访问」，'
    "页面上还有一个「去验证」按钮。这是微信的风控在起作用。</p><p>我们的看法是：内容平台收紧抓取，利好拥有独家数据的"
    "公司。某储能龙头订单同比增长10%，行业景气回升，数据服务商的议价能力也在提升。</p>"
    "<p>风险提示：以上不构成投资建议。</p></div>"
)


def verdict(html: str, description: str | None = None) -> body_check.Verdict | None:
    cleaned = clean_html(html)
    return body_check.check(html, cleaned.text, images=cleaned.images, description=description)


# ----------------------------------------------------------------------------------------- the shapes


@pytest.mark.parametrize("html", [VERIFICATION_TEXT, VERIFICATION_HTML, f"<p>{VERIFICATION_TEXT}</p>",
                                  "环境异常 当前环境异常，完成验证后即可继续访问。 去验证",
                                  "<p>当前环境异常，完成验证后即可继续访问。</p><p>微信扫一扫可打开此内容，使用完整服务</p>"])
def test_the_verification_page_is_recognised_in_every_shape_werss_stored(html):
    found = verdict(html)
    assert found is not None and found.kind == VERIFICATION and found.to_come


def test_an_article_quoting_the_verification_page_is_an_article():
    assert verdict(QUOTING) is None
    # a short note that only mentions the words is not the page either: the page has its notice or its button
    assert verdict("<p>今日市场环境异常波动，注意控制仓位。</p>") is None


@pytest.mark.parametrize(("html", "kind", "to_come"), [
    (DELETED_HTML, GONE, False),
    (BLOCKED_HTML, GONE, False),
    ("<p>The content has been deleted by the author.</p>", GONE, False),
    ("<p>Unable to view this content because it violates regulation</p><p>阅读原文</p>", GONE, False),
    ("<p>该内容暂时无法查看</p>", INCOMPLETE, True),
    ('<div id="js_content"><p>微信扫一扫关注该公众号</p><p>阅读原文</p><p>分享 在看 点赞</p></div>', INCOMPLETE, True),
    ('<div id="js_content"><section><p>宁德时代发布公告称，公司拟在匈牙利投资建设', INCOMPLETE, True),
    ('<div id="js_content"><p>宁德时代发布公告。</p><p style="color:rgb(1,2', INCOMPLETE, True),
])
def test_deleted_blocked_unavailable_shell_and_cut_bodies(html, kind, to_come):
    found = verdict(html)
    assert found is not None and (found.kind, found.to_come) == (kind, to_come), found


def test_a_body_far_shorter_than_its_digest_is_cut_unless_the_article_is_made_of_media():
    digest = "宁德时代发布公告称，公司拟在匈牙利投资建设一座产能为一百吉瓦时的电池工厂，总投资约七十三亿欧元，预计三年内投产。"
    found = verdict('<div id="js_content"><p>宁德时代发布公告称。</p></div>', digest)
    assert found is not None and found.kind == INCOMPLETE and "digest" in found.reason
    assert verdict('<div id="js_content"><p>宁德时代发布公告称。</p><img src="a.png" alt="图片"></div>', digest) is None
    assert verdict(f'<div id="js_content"><p>{digest}</p></div>', digest) is None
    assert verdict('<div id="js_content"><p>短讯。</p></div>', "短讯") is None  # a short digest says nothing


def test_well_formed_articles_images_and_closing_lines_are_not_flagged():
    assert verdict(f'<div id="js_content">{ARTICLE_TEXT}</div>') is None
    assert verdict('<div id="js_content"><p><img src="a.png"></p></div>') is None  # images only: not cut
    assert verdict('<div id="js_content"><iframe class="video_iframe" data-src="v"></iframe></div>') is None
    # a well-formed body that ends without punctuation (an editor's line) is whole
    assert verdict('<div id="js_content"><section><p>正文。</p><p>编辑：张三</p></section></div>') is None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["当前环境异常，完成验证后即可继续访问。", "环境异常 去验证", "该内容已被发布者删除",
                        "此内容因违规无法查看", "该内容暂时无法查看"]),
       st.text(alphabet="储能订单同比增长行业景气回升公司利润市场份额提升", min_size=body_check.PAGE_MAX, max_size=600))
def test_a_long_article_quoting_any_page_is_never_taken_for_that_page(phrase, text):
    html = f'<div id="js_content"><p>{text[:200]}</p><p>{phrase}</p><p>{text[200:]}。</p></div>'
    assert verdict(html) is None


# ------------------------------------------------------------------------------------- through a slot


def _slot(fakes, when):
    fakes.at(when)
    return run_slot(when, clock=slot_clock(when))


def _one(sql: str):
    with connect() as conn:
        return conn.execute(sql).fetchone()


@pytest.mark.parametrize("shape", ["text", "html"])
def test_a_verification_page_is_waited_out_never_analysed_then_the_real_body_is(fakes, shape):
    fakes.werss.accounts = ACCOUNT
    page = FakeArticle(id="1-1", mp_id="MP_WXS_1", title="储能订单点评", publish_time=int((SLOT - timedelta(hours=1)).timestamp()),
                       content_html=VERIFICATION_HTML if shape == "html" else "",
                       content=VERIFICATION_TEXT if shape == "text" else None)
    page.body_after = int((SLOT + timedelta(hours=1)).timestamp())
    page.late_content_html = f'<div id="js_content">{ARTICLE_TEXT}</div>'
    fakes.werss.articles = [page]
    fakes.deepseek.responder = lambda body: answer(72)
    first = _slot(fakes, SLOT)
    assert fakes.deepseek.requests == []  # never sent to the LLM, never paid for
    item = _one("SELECT body_status, clean_text, last_error FROM content_item")
    assert item["body_status"] == store.common.BODY_WAITING and item["clean_text"] == ""
    assert "verification page" in item["last_error"]
    account = _one("SELECT bodies_verification, bodies_missing, last_body_problem FROM wechat_account")
    assert account["bodies_verification"] == 1 and account["bodies_missing"] == 0
    assert "环境异常" in account["last_body_problem"]
    run = _one(f"SELECT body_problems, warnings FROM slot_run WHERE id = {first['slot']['slot_run_id']}")
    assert run["body_problems"] == 1 and any("verification page" in w["message"] for w in run["warnings"])
    # the next slot finds the real body: analysed once
    _slot(fakes, shanghai(2026, 1, 8, 14))
    assert len(fakes.deepseek.requests) == 1
    assert _one("SELECT count(*) AS n FROM analysis_result")["n"] == 1


def test_an_article_that_quotes_the_verification_page_is_analysed(fakes):
    fakes.werss.accounts = ACCOUNT
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1), body=QUOTING.removeprefix('<div id="js_content">')
                                    .removesuffix("</div>"))]
    fakes.deepseek.responder = lambda body: answer(72)
    _slot(fakes, SLOT)
    assert len(fakes.deepseek.requests) == 1
    assert _one("SELECT body_status FROM content_item")["body_status"] == store.common.BODY_READY
    assert _one("SELECT count(*) AS n FROM analysis_result")["n"] == 1
    assert _one("SELECT bodies_verification FROM wechat_account")["bodies_verification"] == 0


def test_a_deleted_articles_page_is_unusable_counted_and_not_fetched_again(fakes):
    fakes.werss.accounts = ACCOUNT
    gone = FakeArticle(id="1-1", mp_id="MP_WXS_1", title="已删除", publish_time=int((SLOT - timedelta(hours=1)).timestamp()),
                       content_html=DELETED_HTML)
    fakes.werss.articles = [gone]
    _slot(fakes, SLOT)
    _slot(fakes, shanghai(2026, 1, 8, 14))
    assert fakes.werss.detail_calls["1-1"] == 1 and fakes.deepseek.requests == []
    item = _one("SELECT body_status, last_error FROM content_item")
    assert item["body_status"] == store.common.BODY_UNUSABLE and "deleted" in item["last_error"]
    assert _one("SELECT bodies_gone FROM wechat_account")["bodies_gone"] == 1


def test_a_cut_body_waits_and_each_check_is_counted_on_the_account_and_shown(fakes):
    fakes.werss.accounts = ACCOUNT
    cut = article(1, SLOT - timedelta(hours=1), body="<section><p>宁德时代发布公告称，公司拟在匈牙利投资建设")
    cut.content_html = cut.content_html.removesuffix("</div>")  # the markup stops mid-way
    fakes.werss.articles = [cut]
    _slot(fakes, SLOT)
    _slot(fakes, shanghai(2026, 1, 8, 14))
    assert fakes.deepseek.requests == []
    assert _one("SELECT body_status FROM content_item")["body_status"] == store.common.BODY_WAITING
    assert _one("SELECT bodies_incomplete FROM wechat_account")["bodies_incomplete"] == 2
    page = read_page("/", shanghai(2026, 1, 8, 15))
    row = re.search(r"<tr>(?:(?!</tr>).)*研究所(?:(?!</tr>).)*</tr>", page, re.DOTALL)
    assert row is not None and "正文不全 2" in row.group(0) and "markup ends mid-way" in row.group(0)
    assert "正文异常 <b>1</b>" in page  # the 14:00 slot's card


def test_the_migration_puts_stored_verification_pages_back_to_waiting(db_url):
    sql = Path("include/radar/store/migrations/0011_wechat.sql").read_text()
    start = sql.index("UPDATE content_item\nSET body_status = 0")
    update = sql[start: sql.index(";\n", start) + 1]  # the statement, up to the ";" that ends its line
    with connect() as conn:
        conn.execute("INSERT INTO content_item (external_id, title, published_at, clean_text, body_status) VALUES "
                     "('v', 'v', now(), %s, 1), ('q', 'q', now(), %s, 1)",
                     (clean_html(VERIFICATION_TEXT).text, clean_html(QUOTING).text))
        conn.execute(update)
        rows = {r["external_id"]: r for r in conn.execute("SELECT external_id, body_status, clean_text FROM content_item")}
    assert rows["v"]["body_status"] == store.common.BODY_WAITING and rows["v"]["clean_text"] == ""
    assert rows["q"]["body_status"] == store.common.BODY_READY  # an article quoting the page keeps its text
