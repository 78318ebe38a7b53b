"""Search over every article and analysis, Chinese segmented in Python (search.py).

Rooms: search.py, store/searching.py, web/routes/history.py, web/views/search.py.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from include.radar import store
from include.radar.core import search
from include.radar.core.clock import FixedClock
from include.radar.web.auth import PageError
from include.radar.web.views import query
from include.radar.web.views import record as record_views
from include.radar.web.views import search as search_views
from tests.pages import DAY, NOW, XSS, XSS_ESCAPED, Seeder, commit

LONG = "行业综述。" * 1500  # 7,500 characters before the word that matters


def test_a_query_is_cut_like_the_articles_and_quoted_safely() -> None:
    # words, or the whole run (the articles' own cut may hold it as one word)
    assert search.query("宁德时代储能")[0] == "('宁德时代储能' | '宁德' & '时代' & '储能')"
    assert search.query("宁德时代 储能")[0] == "('宁德时代' | '宁德' & '时代') & '储能'"
    assert search.query("比亚迪")[0] == "('比亚迪' | '比亚' & '亚迪')"  # whole, or through its pairs
    assert search.query("600519.SH")[0] == "'600519'"  # the exchange suffix is not part of the ticker
    assert search.query("！？")[0] == "" and search.query("一")[0] == ""


@pytest.mark.parametrize("name", ["信达生物", "国有大行", "优必选", "买断式逆回购"])
def test_no_character_of_a_query_is_dropped(name: str) -> None:
    """A name the dictionary cuts into single characters and a word (信/达/生物) was searched as the word alone:
    信达生物 found every article saying 生物. Every character is now held by a word or a character pair."""
    tsq, _ = search.query(name)
    held = {t for t in re.findall(r"'([^']+)'", tsq) if t != name}
    assert set(name) <= set("".join(held)), (name, tsq)


def test_the_pages_cut_queries_without_jiebas_full_dictionary() -> None:
    """The api-server cuts queries with the frequent words only (search._query_cutter): ~12 MB, not ~70."""
    cutter = search._query_cutter()
    assert len(cutter.FREQ) < 200_000 and cutter.total > 0  # the full dictionary's prefix table holds 498,113
    assert list(cutter.cut("储能订单")) == ["储能", "订单"]



def test_any_query_text_makes_a_valid_tsquery(conn) -> None:
    for text in ("a'b\\c 储能", "'';drop table x;--", "\\' & | ! ( ) :*", "储能 OR 1=1", "ab\x01cd"):
        tsq, _ = search.query(text)
        if tsq:
            conn.execute("SELECT %s::tsquery", (tsq,))  # parses: no quote or operator breaks out


def test_highlight_marks_the_terms_around_the_first_match() -> None:
    parts = search.highlight("开头" * 50 + "宁德时代公告回购" + "结尾" * 50, ["宁德", "回购"], 40)
    assert ("宁德", True) in parts and ("回购", True) in parts and parts[0] == ("…", False)


def _corpus(seed: Seeder) -> dict[str, int]:
    morning = seed.slot(DAY, "07:00", new=4)
    ids = {
        "deep": seed.article(morning, "行业周报", 70, account="研究所", summary="周度综述"),
        "ticker": seed.article(morning, "贵州茅台提价", 85, account="白酒观察", summary="茅台（600519）提价。"),
        "byd": seed.article(morning, "比亚迪海外建厂", 55, account="汽车前沿", summary="出海加速"),
        "hostile": seed.article(morning, XSS + "储能骗局", 20, account="研究所", summary="<b>储能</b>" + XSS),
    }
    store.focus.exclude_items(seed.conn, morning["id"], {})
    seed.close(morning)
    seed.conn.execute("UPDATE content_item SET clean_text = %s, search_tsv = NULL WHERE title = '行业周报'",
                      (LONG + "其中储能电芯价格见底。",))
    seed.conn.execute("UPDATE analysis_result SET watch_hits = '{茅台}' WHERE id = %s", (ids["ticker"],))
    assert store.searching.index_missing(seed.conn) == 1  # what predates search is indexed by `cli migrate`
    commit(seed)
    return ids


def test_search_finds_a_word_deep_in_a_long_article_and_filters(seed: Seeder, client) -> None:
    ids = _corpus(seed)
    html = client.get("/search?q=储能").text
    assert "找到 2 篇" in html and f"/analysis/{ids['deep']}" in html and f"/analysis/{ids['hostile']}" in html
    assert "<mark>储能</mark>电芯价格见底" in html  # the snippet is where the word is, 7,500 characters in
    assert f"/analysis/{ids['ticker']}" in client.get("/search?q=600519.SH").text  # a ticker with its suffix
    assert f"/analysis/{ids['byd']}" in client.get("/search?q=比亚迪").text
    assert "找到 1 篇" in client.get("/search?q=储能&band=60").text  # 70 in 60–79, the 20 out
    assert "找到 1 篇" in client.get("/search?q=储能&account=研究所&band=0").text
    assert "没有找到" in client.get("/search?q=储能&account=白酒观察").text
    assert f"/analysis/{ids['ticker']}" in client.get("/search?q=茅台&watch=1").text
    assert "没有找到" in client.get("/search?q=储能&watch=1").text
    day = DAY.isoformat()
    assert "找到 2 篇" in client.get(f"/search?q=储能&from={day}&to={day}").text
    assert "没有找到" in client.get(f"/search?q=储能&from={(DAY + timedelta(days=1)).isoformat()}").text


def test_a_page_past_the_last_says_how_many_there_are_and_links_the_last(seed: Seeder, client) -> None:
    """It said 没有找到 (nothing found) for a word found on page 1."""
    _corpus(seed)
    html = client.get("/search?q=储能&page=50").text
    assert "没有第 50 页" in html and "共找到 2 篇、1 页" in html and "没有找到" not in html
    assert "page=1" in html.split("看最后一页")[0].rsplit("href=", 1)[1]
    assert "没有找到" in client.get("/search?q=白酒&page=2").text  # nothing at all is still said as such


def test_results_escape_hostile_titles_and_snippets(seed: Seeder, client) -> None:
    _corpus(seed)
    html = client.get("/search?q=储能骗局").text
    assert XSS not in html and XSS_ESCAPED in html and "<b>储能</b>" not in html


@pytest.mark.parametrize("query, status, message", [
    ("q=" + "长" * 101, 400, "搜索词最多 100 个字符"),
    ("q=储能&band=99", 400, "分数段"),
    ("q=储能&from=2026-13-01", 400, "开始日期"),
    ("q=储能&from=2026-01-09&to=2026-01-08", 400, "开始日期晚于结束日期"),
    ("q=储能&page=0", 400, "页码"),
    ("q=储能&page=" + "9" * 4301, 400, "页码"),
    ("q=储能&q=光伏", 400, "重复"),
    ("q=！？", 200, "没有可以搜索的词"),
])
def test_bad_search_parameters_are_a_clear_page_never_a_500(seed: Seeder, client, query, status, message) -> None:
    answer = client.get(f"/search?{query}")
    assert answer.status_code == status and message in answer.text


@pytest.mark.parametrize("max_page", [search_views.MAX_PAGE, record_views.MAX_PAGE])
def test_one_page_parser_bounds_search_and_record_alike(max_page: int) -> None:
    def bad(message: str) -> PageError:
        return PageError(400, "无效", message)

    assert query.page_number("", max_page, bad) == 1 and query.page_number(str(max_page), max_page, bad) == max_page
    for text in ("0", str(max_page + 1), "9" * 4301, "1" * 5000, "١", "+1", "1.0", "-1"):
        with pytest.raises(PageError, match="400"):
            query.page_number(text, max_page, bad)


def test_the_search_page_without_a_query_is_the_empty_form_and_searches_nothing(seed: Seeder, client) -> None:
    _corpus(seed)
    answer = client.get("/search")
    assert answer.status_code == 200
    assert '<h1>搜索</h1>' in answer.text and '<input type="search" name="q" value=""' in answer.text
    assert "results" not in answer.text and "没有找到" not in answer.text and "找到 " not in answer.text


@pytest.mark.browser
def test_search_on_a_phone(seed: Seeder, db_url: str) -> None:
    from include.radar.web.app import create_app
    from tests.browser import PHONE, chromium, screenshot, serve
    from tests.pages import FakeUser, airflow_get_user, allow_reading, make_settings

    ids = _corpus(seed)
    app = create_app(lambda: make_settings(demo_mode=True), db_url, clock=FixedClock(NOW))
    app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
    allow_reading(app)
    with serve(app) as base, chromium() as browser:
        page = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
        page.goto(base + "/")
        with page.expect_navigation():
            page.get_by_role("link", name="搜索", exact=True).tap()
        page.get_by_label("搜索词").fill("储能")
        with page.expect_navigation():
            page.get_by_role("button", name="搜索").tap()
        assert "q=" in page.url
        results = page.locator("ul.results > li")
        assert results.count() == 2
        assert page.locator("mark", has_text="储能").count() >= 2
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        screenshot(page, "search.png")
        with page.expect_navigation():
            page.locator(f'a[href="/analysis/{ids["deep"]}"]').tap()
        assert "行业周报" in page.title() or "行业周报" in page.content()

