"""A page per entity, 30-day trends, the day's score distribution — charts as inline SVG.

Rooms: web/views/trends.py, web/charts.py, web/routes/history.py, store/trends.py, focus.py (ticker spellings).
"""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import quote

import pytest

from include.radar.core.clock import FixedClock
from include.radar.web import charts
from tests.pages import DAY, NOW, OPPORTUNITY, XSS, XSS_ESCAPED, Seeder, commit


def _opp(*targets: str) -> dict:
    return dict(OPPORTUNITY, targets=list(targets))


def test_a_line_breaks_where_a_day_has_no_data_and_scales_to_its_top() -> None:
    assert charts.nice_top([3, 7]) == 10 and charts.nice_top([120]) == 200 and charts.nice_top([None]) == 1
    segments = charts.paths([10, 20, None, 40, None, None, 50], top=50)
    assert len(segments) == 3  # three runs of days with data: the gaps are not bridged
    first = [tuple(map(float, p.split(","))) for p in segments[0][1:].split(" L")]
    assert first[0][0] == charts.LEFT and first[0][1] > first[1][1]  # 10 sits lower than 20
    last = [tuple(map(float, p.split(","))) for p in segments[2][1:].split(" L")]
    assert last == [(charts.WIDTH - charts.RIGHT, charts.TOP)]  # the top value at the top edge, the last day right
    svg = charts.line_chart([DAY - timedelta(days=2 - i) for i in range(3)],
                            [charts.Series(XSS, [1, None, 3])], title=XSS, desc="d")
    assert XSS not in svg and XSS_ESCAPED in svg and svg.count("<circle") == 2  # lone days become dots
    assert 'viewBox="0 0 320 150"' in svg and 'width="100%"' in svg


def test_the_histogram_counts_each_band_and_marks_the_threshold() -> None:
    from include.radar.web.views.trends import score_histogram

    svg, text = score_histogram([5, 25, 45, 59, 60, 79, 80, 100], 60)
    assert text == "0–19 分 1 篇，20–39 分 1 篇，40–59 分 2 篇，60–79 分 2 篇，80–100 分 2 篇"
    assert svg.count('fill="#dc2626"') == 2 and svg.count("<rect") == 5


@pytest.fixture
def mentions(seed: Seeder) -> dict[str, int]:
    morning = seed.slot(DAY, "07:00", new=3)
    a = seed.article(morning, "宁德时代储能大单", 80, opportunities=[_opp("宁德时代", "储能")])
    b = seed.article(morning, "储能集采", 65, opportunities=[_opp("储能")])
    seed.article(morning, "白酒", 70, opportunities=[_opp("贵州茅台")])
    seed.close(morning)
    earlier = seed.slot(DAY - timedelta(days=3), "07:00", new=1)
    c = seed.article(earlier, "宁德时代海外建厂", 60, opportunities=[_opp("宁德时代")])
    seed.close(earlier)
    commit(seed)
    return {"a": a, "b": b, "c": c}


def test_an_entity_page_lists_exactly_the_analyses_naming_it_with_its_scores(mentions, client) -> None:
    html = client.get("/entity/" + quote("宁德时代")).text
    ids = [int(i) for i in re.findall(r'href="/analysis/(\d+)"', html)]
    assert ids == [mentions["a"], mentions["c"]]  # newest first, nothing else
    assert "共 2 篇" in html and "近 30 天 2 篇分析提到「宁德时代」，平均评分 70，最高 80" in html
    assert "<svg" in html and "<title>宁德时代 近 30 天评分</title>" in html
    analysis = client.get(f"/analysis/{mentions['a']}").text
    assert 'href="/entity/%E5%AE%81%E5%BE%B7%E6%97%B6%E4%BB%A3"' in analysis  # targets link to their page


def test_one_stock_code_is_one_page_however_an_analysis_spells_it(mentions, seed: Seeder, client) -> None:
    slot = seed.slot(DAY - timedelta(days=5), "07:00")
    plain = seed.article(slot, "茅台提价", 75, opportunities=[_opp("600519")])
    marked = seed.article(slot, "茅台渠道", 65, opportunities=[_opp("600519.SH")])
    prefixed = seed.article(slot, "茅台分红", 55, opportunities=[_opp("sh600519")])
    seed.article(slot, "别的股票", 90, opportunities=[_opp("600518.SH", "1600519")])
    commit(seed)
    for spelling in ("600519", "600519.SH", "SH600519"):
        html = client.get("/entity/" + spelling).text
        ids = sorted(int(i) for i in re.findall(r'href="/analysis/(\d+)"', html))
        assert ids == sorted([plain, marked, prefixed]), spelling
        assert "共 3 篇" in html and "代码 600519 的各种写法" in html
    assert "各种写法" not in client.get("/entity/" + quote("宁德时代")).text  # a name is only itself
    trends = client.get("/trends").text
    assert '<a href="/entity/600519">600519</a> <span class="muted small">3 篇' in trends  # one chip, not three
    assert ">600519.SH<" not in trends and ">sh600519<" not in trends


def test_stock_code_spellings() -> None:
    from include.radar.analysis.focus import ticker_spellings

    assert {"600519", "600519.SH", "600519.sh", "SH600519", "sh600519", "600519.SZ"} <= set(ticker_spellings("600519.SH"))
    assert ticker_spellings("00700.HK") == ticker_spellings("HK00700") == ticker_spellings("00700")
    assert ticker_spellings("宁德时代") == ["宁德时代"] and ticker_spellings("AAPL.O") == ["AAPL.O"]


@pytest.mark.parametrize("name", ["没提到过", "x" * 61, "%0A储能", "%20"])
def test_an_unknown_or_impossible_entity_is_a_404_page(mentions, client, name: str) -> None:
    answer = client.get(f"/entity/{name}")
    assert answer.status_code == 404 and ("没有这个标的" in answer.text or "页面不存在" in answer.text)


def test_a_hostile_entity_name_is_escaped_everywhere(mentions, seed: Seeder, client) -> None:
    hostile = seed.slot(DAY - timedelta(days=4), "07:00")
    seed.article(hostile, XSS, 62, opportunities=[_opp(XSS)])
    commit(seed)
    html = client.get("/entity/" + quote(XSS, safe="")).text
    assert XSS not in html and XSS_ESCAPED in html
    trends = client.get("/trends").text
    assert XSS not in trends and XSS_ESCAPED in trends


def test_trends_show_topics_top_entities_and_todays_distribution(mentions, client) -> None:
    html = client.get("/trends").text
    assert "各类机会的分析数" in html and "行业 4 篇" in html
    top = re.findall(r'<li class="chip"><a href="/entity/[^"]+">([^<]+)</a> <span class="muted small">(\d+) 篇', html)
    assert top[:2] == [("储能", "2"), ("宁德时代", "2")] or top[:2] == [("宁德时代", "2"), ("储能", "2")]
    daily = client.get(f"/daily/{DAY.isoformat()}").text
    assert "评分分布" in daily and "60–79 分 2 篇，80–100 分 1 篇" in daily


@pytest.mark.browser
def test_charts_render_on_a_phone(mentions, db_url: str) -> None:
    from include.radar.web.app import create_app
    from tests.browser import PHONE, chromium, screenshot, serve
    from tests.pages import FakeUser, airflow_get_user, allow_reading, make_settings

    app = create_app(lambda: make_settings(demo_mode=True), db_url, clock=FixedClock(NOW))
    app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
    allow_reading(app)
    with serve(app) as base, chromium() as browser:
        page = browser.new_page(viewport=PHONE, is_mobile=True)
        for path, name in (("/entity/" + quote("宁德时代"), "entity.png"), ("/trends", "trends.png"),
                           (f"/daily/{DAY.isoformat()}", None)):
            assert page.goto(base + path).status == 200
            chart = page.locator("svg.chart").first
            assert chart.is_visible()
            box = chart.bounding_box()
            assert box is not None and 200 < box["width"] <= PHONE["width"] and box["height"] > 80
            assert page.locator("svg.chart path, svg.chart rect, svg.chart circle").count() > 0
            assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], path
            if name:
                screenshot(page, name)


