"""The report pages (include/radar/web) against a real PostgreSQL, through FastAPI's TestClient.

Data is seeded with the same store functions the pipeline uses, so the pages are tested on the rows the
pipeline really writes. Authentication is overridden the way the brief promises it can be
(``app.dependency_overrides[get_user]``) except in the tests of authentication itself, which use Airflow's
real ``get_user``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from include.radar import store
from include.radar.core import signing
from include.radar.core.clock import FixedClock
from include.radar.core.settings import Settings
from include.radar.core.slots import SHANGHAI, slot_at
from include.radar.web.app import create_app
from include.radar.web.views import common, slots
from tests.pages import (
    DAY,
    NOW,
    OPPORTUNITY,
    SECRET,
    XSS,
    XSS_ESCAPED,
    FakeUser,
    Seeder,
    airflow_get_user,
    allow_reading,
    commit,
    make_settings,
    signed,
)

REPO = Path(__file__).resolve().parents[1]


def text_order(html: str, *needles: str) -> list[int]:
    positions = [html.find(n) for n in needles]
    assert all(p >= 0 for p in positions), dict(zip(needles, positions, strict=True))
    return positions


def slot_states(html: str) -> dict[str, str]:
    return dict(re.findall(r'<span class="time">(\d\d:\d\d)</span><span class="badge state-(\w+)">', html))


# ------------------------------------------------------------------------------------------------- pages


def test_overview_shows_slot_states_counts_push_and_recent_days(seed: Seeder, client: TestClient) -> None:
    morning = seed.slot(DAY, "07:00", new=3)
    seed.article(morning, "早间机会", 81, opportunities=[OPPORTUNITY])
    seed.article(morning, "早间资讯", 30)
    seed.close(morning)
    noon = seed.slot(DAY, "12:00", error="WeRSS 503: service unavailable")
    seed.close(noon)
    seed.slot(DAY, "14:00")  # opened, never closed: running
    yesterday = seed.slot(DAY - timedelta(days=1), "22:00")
    seed.article(yesterday, "昨日文章", 66)
    seed.close(yesterday)
    seed.report(DAY - timedelta(days=1))
    seed.push(DAY - timedelta(days=1))
    seed.push(DAY, error="HTTP 500 from push gateway")
    account = seed.account("坏掉的号")
    store.articles.record_account_check(
        seed.conn, account, hits=0, last_article_at=None, error="token expired", backoff_until=NOW + timedelta(hours=2)
    )
    commit(seed)

    response = client.get("/")
    assert response.status_code == 200
    html = response.text
    assert slot_states(html) == {
        "07:00": "done",
        "12:00": "failed",
        "14:00": "running",
        "18:00": "late",
        "22:00": "pending",
    }
    assert "WeRSS 503: service unavailable" in html
    morning_card = html.split('<span class="time">07:00</span>')[1]
    counts = re.findall(r"(新增|分析|机会|失败) <b[^>]*>(\d+)</b>", morning_card)[:4]
    assert counts == [("新增", "3"), ("分析", "2"), ("机会", "1"), ("失败", "0")]
    # the DAG run link, run id encoded (":" and "+"), on the Airflow UI origin, out of the iframe
    run_id = "scheduled__2026-01-07T23:00:00+00:00"
    assert f'href="/dags/opportunity_radar/runs/{run_id.replace(":", "%3A").replace("+", "%2B")}" target="_top"' in html
    # today's daily push failed on its channel, with the error
    assert "push-failed" in html and "HTTP 500 from push gateway" in html
    assert "secret-signature" not in html  # the pushed (signed) URL is never shown
    # best score of the day
    assert re.search(r'最高分</div><div class="v hot">81<', html)
    # 14 days, newest first, each linking to its daily page
    days = re.findall(r'<td><a href="/daily/(\d{4}-\d{2}-\d{2})">', html)
    assert len(days) == 14 and days[0] == "2026-01-08" and days[-1] == "2025-12-26"
    yesterday_row = html[html.find('href="/daily/2026-01-07"') :].split("</tr>")[0]
    assert "report-ok" in yesterday_row and "push-sent" in yesterday_row and ">66<" in yesterday_row
    # account health: the troubled account first, with its error and backoff
    assert "坏掉的号" in html and "token expired" in html and "1 个异常" in html


def test_daily_page_lists_every_analysis_by_score(seed: Seeder, client: TestClient) -> None:
    morning = seed.slot(DAY, "07:00")
    low = seed.article(morning, "低分资讯", 45, summary="仅资讯")
    top = seed.article(morning, "储能集采放量", 88, summary="储能电芯价格见底", opportunities=[OPPORTUNITY])
    seed.close(morning)
    evening = seed.slot(DAY, "18:00")
    mid = seed.article(evening, "券商板块异动", 72, summary="成交放大", account="券商研究")
    seed.failure(evening, "一篇超长文章", "DeepSeek 返回的 JSON 无效")
    seed.close(evening)
    seed.report(
        DAY,
        digest_md=f"## 今日要点\n- 储能集采放量\n- [查看详情](https://radar.example.com/radar/analysis/{top})",
        digest_json={
            "top_opportunities": [{"analysis_id": top, "title": "储能集采放量", "reason": "集采放量叠加价格企稳"}],
            "watchlist": ["储能集采节奏", "碳酸锂价格"],
        },
        stats={"analysed": 3, "opportunities": 2, "failed": 1, "max_score": 88},
        slots_done=["07:00", "18:00"],
    )
    seed.push(DAY)
    commit(seed)

    html = client.get("/daily/2026-01-08").text
    listing = html[html.find("全部分析") :]
    text_order(listing, "储能集采放量", "券商板块异动", "低分资讯")
    a, b, c = text_order(listing, f'href="/analysis/{top}"', f'href="/analysis/{mid}"', f'href="/analysis/{low}"')
    assert a < b < c
    assert len(re.findall(r'class="score hot"', listing.split("分析失败")[0])) == 2  # 88 and 72 are >= 60
    assert "券商研究 · 18:00 时段" in listing
    # top opportunity, watchlist, digest (its canonical link rewritten to this app)
    assert "集采放量叠加价格企稳" in html
    assert '<li class="chip">储能集采节奏</li>' in html
    assert f'<a href="/analysis/{top}" rel="noopener noreferrer nofollow">查看详情</a>' in html
    # failures with the reason, stats, slots done, push status
    assert "一篇超长文章" in html and "DeepSeek 返回的 JSON 无效" in html
    assert re.search(r'机会（≥60）</div><div class="v hot">2<', html)
    assert "已完成时段：07:00、18:00" in html
    assert "push-sent" in html and "已送达" in html
    assert 'href="/daily/2026-01-07"' in html and "后一天 →</span>" in html  # no next day after today


def test_daily_page_before_the_report_and_without_data(seed: Seeder, client: TestClient) -> None:
    morning = seed.slot(DAY, "07:00")
    seed.article(morning, "早间文章", 55)
    seed.close(morning)
    commit(seed)

    html = client.get("/daily/2026-01-08").text
    assert "当日日报尚未生成" in html and "早间文章" in html

    empty = client.get("/daily/2025-06-01")
    assert empty.status_code == 200
    assert "这一天没有任何数据" in empty.text
    assert 'href="/daily/2025-05-31"' in empty.text and 'href="/daily/2025-06-02"' in empty.text


def test_failed_report_shows_notice_reasons_and_fallback(seed: Seeder, client: TestClient) -> None:
    failed = seed.slot(DAY, "22:00", error="DeepSeek 429 rate limited")
    seed.close(failed)
    seed.report(
        DAY,
        status=store.common.REPORT_FAILED,
        digest_md="## 今日概况（系统自动生成）\n- 分析 0 篇",
        error="digest: LLM exhausted after 3 attempts",
    )
    commit(seed)

    html = client.get("/daily/2026-01-08").text
    assert "日报生成失败，请稍后刷新" in html
    assert "日报摘要改用数据库生成：LLM exhausted after 3 attempts" in html  # the kind in Chinese, the error quoted
    assert "22:00 抓取文章：DeepSeek 429 rate limited" in html
    assert "今日概况（系统自动生成）" in html  # the fallback digest is still shown


def test_analysis_page_shows_article_opportunities_and_usage(seed: Seeder, client: TestClient) -> None:
    morning = seed.slot(DAY, "07:00")
    original = seed.article(morning, "原始文章", 70)
    published = datetime(2026, 1, 8, 1, 30, tzinfo=UTC)  # 09:30 in Shanghai
    analysis_id = seed.article(
        morning,
        "储能集采放量",
        88,
        summary="储能电芯价格见底，头部厂商订单回暖。",
        account="储能前沿",
        published_at=published,
        opportunities=[OPPORTUNITY],
        reused_from_id=original,
    )
    commit(seed)

    html = client.get(f"/analysis/{analysis_id}").text
    assert "储能集采放量" in html and "储能前沿" in html and "2026-01-08 09:30" in html
    assert 'href="https://mp.weixin.qq.com/s/abc" target="_blank" rel="noopener noreferrer"' in html
    assert '<span class="score hot big"' in html and ">88<" in html
    assert "储能电芯龙头" in html and "看多" in html and "行业" in html and "置信度 70%" in html
    assert '<blockquote class="quote">11月储能集采中标规模同比增长120%</blockquote>' in html
    assert "碳酸锂价格反弹挤压利润" in html and "四季度集采招标量同比翻倍" in html and "1-3个月" in html
    for text in (
        "deepseek-v4-pro",
        "analysis/v1",
        "输入 5,321",
        "推理 2,048",
        "缓存命中 4,096",
        "$0.0012",
        "23.5 s",
        "2 次",
    ):
        assert text in html, text
    assert f'href="/analysis/{original}"' in html and "原始文章" in html  # reused analysis, linked
    assert 'href="/daily/2026-01-08">2026-01-08 07:00</a>' in html
    assert "/dags/opportunity_radar/runs/scheduled__2026-01-07T23%3A00%3A00%2B00%3A00" in html


def test_only_http_article_urls_become_links(seed: Seeder, client: TestClient) -> None:
    morning = seed.slot(DAY, "07:00")
    analysis_id = seed.article(morning, "奇怪的链接", 50, url="javascript:alert(1)")
    commit(seed)
    html = client.get(f"/analysis/{analysis_id}").text
    assert 'href="javascript:' not in html
    assert "javascript:alert(1)" in html  # shown as text


# ---------------------------------------------------------------------------------------------- escaping


def test_article_and_llm_text_is_escaped(seed: Seeder, client: TestClient) -> None:
    morning = seed.slot(DAY, "07:00")
    evil = dict(OPPORTUNITY, name=XSS, evidence=[XSS], risks=[XSS], targets=[XSS])
    analysis_id = seed.article(morning, f"标题{XSS}", 90, summary=f"摘要{XSS}", account=XSS, opportunities=[evil])
    seed.failure(morning, XSS, XSS)
    seed.report(
        DAY,
        digest_json={
            "top_opportunities": [{"analysis_id": analysis_id, "title": XSS, "reason": XSS}],
            "watchlist": [XSS],
        },
    )
    commit(seed)

    for path in ("/daily/2026-01-08", f"/analysis/{analysis_id}"):
        html = client.get(path).text
        assert XSS not in html, path
        # the one script is the pages' own file (static/frame.js), never anything inline or from the data
        assert html.count("<script") == 1 and '<script src="/static/frame.js" defer></script>' in html, path
        assert XSS_ESCAPED in html, path
    assert f"标题{XSS_ESCAPED}" in client.get("/daily/2026-01-08").text
    assert f"摘要{XSS_ESCAPED}" in client.get(f"/analysis/{analysis_id}").text


def test_markdown_digest_is_neutralised(seed: Seeder, client: TestClient) -> None:
    seed.report(
        DAY,
        digest_md=(
            "## 要点\n\n<img src=x onerror=alert(1)>\n\n<script>alert(1)</script>\n\n"
            "[点我](javascript:alert(1)) [也点我](JAVASCRIPT:alert(2)) <javascript:alert(3)>\n\n"
            "[正常链接](https://example.com/a) **加粗**"
        ),
    )
    commit(seed)
    html = client.get("/daily/2026-01-08").text
    digest = html[html.find('<div class="md">') :].split("</section>")[0]
    assert "<img" not in digest and "<script" not in digest.lower()
    assert "&lt;img src=x onerror=alert(1)&gt;" in digest and XSS_ESCAPED in digest
    assert "javascript:" not in "".join(re.findall(r'href="([^"]*)"', digest)).lower()
    assert "正常链接" in digest and "https://example.com/a" not in digest  # an LLM-written URL is no link
    assert "<strong>加粗</strong>" in digest and "<h2>要点</h2>" in digest


# -------------------------------------------------------------------------------------------------- auth


@pytest.mark.parametrize("path", ["/", "/daily/2026-01-08", "/analysis/1"])
def test_pages_require_an_airflow_login(make_client, path: str) -> None:
    response = make_client(user=False).get(path)
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("text/html")
    assert "请先登录 Airflow" in response.text
    assert response.headers["Content-Security-Policy"] == EXPECTED_SECURITY_HEADERS["Content-Security-Policy"]


def test_airflow_tokens_go_through_airflows_get_user(make_client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cookie and Bearer tokens are checked by Airflow's own get_user (with a stand-in auth manager)."""
    import airflow.api_fastapi.app as airflow_app
    from airflow.api_fastapi.core_api import security
    from jwt import InvalidTokenError

    class FakeAuthManager:
        async def get_user_from_token(self, token: str) -> FakeUser:
            if token != "good-token":
                raise InvalidTokenError("bad")
            return FakeUser()

        def is_authorized_dag(self, **kwargs: Any) -> bool:
            return True

    monkeypatch.setattr(security, "get_auth_manager", lambda: FakeAuthManager())
    monkeypatch.setattr(airflow_app, "get_auth_manager", lambda: FakeAuthManager())
    client = make_client(user=False)
    assert client.get("/daily/2026-01-08", headers={"Authorization": "Bearer good-token"}).status_code == 200
    client.cookies.set("_token", "good-token")
    assert client.get("/daily/2026-01-08").status_code == 200
    client.cookies.set("_token", "forged")
    assert client.get("/daily/2026-01-08").status_code == 401


def test_signed_link_opens_its_page_and_its_analyses(seed: Seeder, make_client) -> None:
    morning = seed.slot(DAY, "07:00")
    first = seed.article(morning, "第一篇", 80)
    second = seed.article(morning, "第二篇", 40)
    other_day = seed.article(seed.slot(DAY - timedelta(days=1), "07:00"), "别的日子", 90)
    seed.report(DAY, digest_md=f"[别的日子](https://radar.example.com/radar/analysis/{other_day})")
    commit(seed)
    client = make_client(user=False)

    response = client.get(signed("/daily/2026-01-08"))
    assert response.status_code == 200
    assert "链接有效至" in response.text
    links = {
        int(i): href.replace("&amp;", "&") for href, i in re.findall(r'href="(/analysis/(\d+)[^"]*)"', response.text)
    }
    for analysis_id in (first, second):
        href = links[analysis_id]
        query = parse_qs(urlsplit(href).query)
        assert query["exp"] == [signing.sign("/", SECRET, NOW, 7)["exp"]]  # same expiry as the daily link
        assert client.get(href).status_code == 200
    assert links[other_day] == f"/analysis/{other_day}"  # another day's analysis gets no signature
    # the signature opens its own page; the other pages only through the read session it opened (a cookie)
    assert make_client(user=False).get(f"/analysis/{first}").status_code == 401
    assert client.get(f"/analysis/{first}").status_code == 200


def test_bad_signatures_are_forbidden(seed: Seeder, make_client) -> None:
    analysis_id = seed.article(seed.slot(DAY, "07:00"), "文章", 80)
    commit(seed)
    client = make_client(user=False)
    good = signed("/daily/2026-01-08")

    tampered = good[:-1] + ("0" if good[-1] != "0" else "1")
    assert client.get(tampered).status_code == 403
    moved_expiry = re.sub(r"exp=(\d+)", lambda m: f"exp={int(m.group(1)) + 86400}", good)
    assert client.get(moved_expiry).status_code == 403
    expired = signed("/daily/2026-01-08", now=NOW - timedelta(days=31), days=30)
    assert client.get(expired).status_code == 403
    other_page = signed("/daily/2026-01-07").replace("2026-01-07", "2026-01-08", 1)
    assert client.get(other_page).status_code == 403
    daily_sig_on_analysis = f"/analysis/{analysis_id}?" + good.split("?", 1)[1]
    assert client.get(daily_sig_on_analysis).status_code == 403
    assert client.get("/daily/2026-01-08?sig=abc").status_code == 403
    response = client.get("/daily/2026-01-08?exp=1&sig=abc")
    assert response.status_code == 403 and "链接无效或已过期" in response.text
    # a logged-in user with a stale link is refused too, but offered the unsigned page
    assert 'href="/daily/2026-01-08">登录后打开本页' in response.text
    # without a configured secret no signature is valid
    assert make_client(user=False, settings=make_settings(link_secret=None)).get(good).status_code == 403


def test_mounted_under_radar_links_and_signatures_work(seed: Seeder, db_url: str) -> None:
    """Inside Airflow the app is mounted at /radar: links carry the prefix, signatures cover the app path."""
    analysis_id = seed.article(seed.slot(DAY, "07:00"), "文章", 80)
    commit(seed)
    radar = create_app(lambda: make_settings(), db_url, clock=FixedClock(NOW))
    root = FastAPI()
    root.mount("/radar", radar)
    client = TestClient(root)
    response = client.get("/radar" + signed("/daily/2026-01-08"))
    assert response.status_code == 200
    assert f'href="/radar/analysis/{analysis_id}?exp=' in response.text
    assert 'href="/radar/daily/2026-01-07"' in response.text
    assert "/dags/opportunity_radar/runs/" in response.text and "/radar/dags/" not in response.text
    assert "Path=/radar;" in response.headers["set-cookie"]  # the read session is the app's own, under /radar
    assert TestClient(root).get("/radar/daily/2026-01-08").status_code == 401


# ------------------------------------------------------------------------------------------------ errors


def test_unknown_analysis_is_a_404_page(client: TestClient) -> None:
    response = client.get("/analysis/999999")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html") and "找不到这条分析" in response.text


@pytest.mark.parametrize(
    "path",
    [
        "/daily/2026-13-01",
        "/daily/2026-02-30",
        "/daily/20260108",
        "/daily/yesterday",
        "/analysis/abc",
        "/analysis/1.5",
        "/analysis/-1",
        "/analysis/0",
        "/analysis/99999999999999999999",
    ],
)
def test_malformed_parameters_are_404_pages(client: TestClient, path: str) -> None:
    """A path that names no report is "no such page", not a bad request."""
    response = client.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "Traceback" not in response.text


def test_unknown_route_is_a_404_page(client: TestClient) -> None:
    response = client.get("/nothing/here")
    assert response.status_code == 404 and "页面不存在" in response.text


def test_database_outage_is_a_503_page_without_secrets(make_client) -> None:
    url = "postgresql://radar:hunter2@127.0.0.1:1/radar"
    response = make_client(url=url).get("/")
    assert response.status_code == 503
    assert "雷达数据库暂时无法连接" in response.text
    for leaked in ("hunter2", "127.0.0.1", "postgresql://", "Traceback"):
        assert leaked not in response.text


def test_unexpected_errors_are_a_500_page(db_url: str) -> None:
    def broken() -> Settings:
        raise RuntimeError("boom: secret detail")

    app = create_app(broken, db_url, clock=FixedClock(NOW))
    app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
    allow_reading(app)
    response = TestClient(app).get("/")
    assert response.status_code == 500
    assert "secret detail" not in response.text and "页面出错了" in response.text
    assert response.headers["X-Content-Type-Options"] == "nosniff"


# what the pages promise a browser, written out: no script but the app's own, no frame but Airflow's, no form
# posting elsewhere, no referrer (a pushed link's signature is in its query)
EXPECTED_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; "
                               "img-src 'self' data:; frame-ancestors 'self'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "SAMEORIGIN",
}


def test_security_headers_on_every_response(client: TestClient) -> None:
    for path in ("/", "/daily/2026-01-08", "/analysis/1", "/analysis/x"):
        response = client.get(path)
        for name, value in EXPECTED_SECURITY_HEADERS.items():
            assert response.headers[name] == value, (path, name)
        assert response.headers["Cache-Control"] == "no-store"
    assert client.get("/static/icon.svg").headers["content-type"].startswith("image/svg+xml")


def test_demo_mode_badge(make_client) -> None:
    assert "演示数据 DEMO" in make_client(settings=make_settings(demo_mode=True)).get("/daily/2026-01-08").text
    assert "演示数据 DEMO" not in make_client().get("/daily/2026-01-08").text


# ------------------------------------------------------------------------------------------- view models


def test_slot_view_lateness_boundaries() -> None:
    settings = make_settings(schedule_slots=["18:00"], late_after_minutes=30)
    at = slot_at(DAY, "18:00").scheduled_at
    for now, expected in ((at + timedelta(minutes=30), "pending"), (at + timedelta(minutes=31), "late")):
        page = common.PageContext(settings=settings, now=now, tz=SHANGHAI, links=common.Links())
        [view] = slots.slot_views(DAY, slots.DayRuns([]), page)
        assert view.state == expected


def test_safe_http_url() -> None:
    assert common.safe_http_url("https://mp.weixin.qq.com/s/x?a=1") == "https://mp.weixin.qq.com/s/x?a=1"
    for bad in (
        "javascript:alert(1)",
        "JAVASCRIPT:alert(1)",
        "data:text/html,x",
        "/relative",
        "http://",
        "",
        None,
        "https://a.b/\nx",
        " https://a.b/",
    ):
        assert common.safe_http_url(bad) is None, bad


def test_push_state_summarises_channels() -> None:
    assert slots.push_state(0, 0, 0) == "none"
    assert slots.push_state(2, 2, 0) == "sent"
    assert slots.push_state(2, 1, 1) == "partial"
    assert slots.push_state(2, 0, 2) == "failed"
    assert slots.push_state(2, 1, 0) == "pending"


# ----------------------------------------------------------------------------------------------- plugin


def test_plugin_is_registered_with_airflow(tmp_path: Path) -> None:
    """Airflow's own plugins manager loads plugins/radar_plugin.py and mounts the app at /radar.

    Run in a fresh interpreter outside the repository and without PYTHONPATH, as the api-server would: the
    plugin must make the bundle root importable itself.
    """
    script = """
import json
from fastapi import FastAPI
from airflow import plugins_manager
from airflow.api_fastapi.app import init_plugins
info = plugins_manager.get_plugin_info()
apps, _ = plugins_manager.get_fastapi_plugins()
views, _ = plugins_manager._get_ui_plugins()
from fastapi.testclient import TestClient
root = FastAPI()
init_plugins(root)
@root.get("/{rest_of_path:path}")  # Airflow's catch-all UI route, added after the plugins
def catch_all(rest_of_path: str):
    return {"airflow": rest_of_path}
import sys
built_before = "include.radar.web.app" in sys.modules
bare = TestClient(root).get("/radar?exp=1&sig=ab", follow_redirects=False)
icon = TestClient(root).get("/radar/static/icon.svg")
print(json.dumps({
    "bare": [bare.status_code, bare.headers.get("location")],
    "built": [built_before, "include.radar.web.app" in sys.modules, icon.status_code],
    "plugins": info,
    "errors": plugins_manager.get_import_errors(),
    "apps": [{"url_prefix": a["url_prefix"], "name": a["name"], "type": type(a["app"]).__name__} for a in apps],
    "views": views,
    "mounts": [getattr(r, "path", None) for r in root.routes],
}, default=str))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "PYTHONPATH"}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__CORE__PLUGINS_FOLDER=str(REPO / "plugins"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert not data["errors"], data["errors"]
    [plugin] = [p for p in data["plugins"] if p["name"] == "opportunity_radar"]
    assert plugin["fastapi_apps"][0]["url_prefix"] == "/radar"
    assert {"url_prefix": "/radar", "name": "Opportunity Radar", "type": "LazyApp"} in data["apps"]
    # the report app is built on its first request, not when the plugin loads (web/mount.py)
    assert data["built"] == [False, True, 200]
    [view] = [v for v in data["views"] if v["name"] == "机会雷达"]
    assert view["url_route"] == "radar" and view["href"] == "/radar/" and view["destination"] == "nav"
    assert "/radar" in data["mounts"]
    # /radar without its slash reaches the radar (signature kept), not Airflow's catch-all page
    assert data["bare"] == [307, "/radar/?exp=1&sig=ab"]


def test_the_bare_prefix_redirect_keeps_the_signature_for_the_page_and_out_of_the_access_log() -> None:
    """Airflow's HttpAccessLogMiddleware logs the scope's query once the response is done: the redirect of
    ``/radar?…&sig=…`` (answered before the app, which redacts its own) left the signature in it."""
    import asyncio

    from include.radar.web.mount import AddTrailingSlash

    sent: list[dict] = []
    scope = {"type": "http", "path": "/radar", "root_path": "", "query_string": b"exp=1&sig=abc"}

    async def send(message: dict) -> None:
        sent.append(message)

    async def never(*_: object) -> None:
        raise AssertionError("the redirect answers itself")

    asyncio.run(AddTrailingSlash(never)(scope, never, send))
    assert sent[0]["status"] == 307 and (b"location", b"/radar/?exp=1&sig=abc") in sent[0]["headers"]
    assert scope["query_string"] == b"exp=1&sig=***"


def test_a_task_process_loading_plugins_never_imports_the_report_app(tmp_path: Path) -> None:
    """Airflow loads plugins in every task process (macros, listeners): the report app (FastAPI, Jinja2, the
    routes: 0.8 s and 19 MB) stayed out of them only since the plugin mounts it lazily (web/mount.py)."""
    script = """
import json, sys
from airflow.sdk import plugins_manager
plugins, errors = plugins_manager._get_plugins()
plugins_manager.integrate_macros_plugins()
print(json.dumps({"plugins": [p.name for p in plugins], "errors": errors,
                  "web": sorted(m for m in sys.modules if m.startswith("include.radar.web"))}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "PYTHONPATH"}
    env.update(AIRFLOW_HOME=str(tmp_path / "airflow"), AIRFLOW__CORE__PLUGINS_FOLDER=str(REPO / "plugins"),
               AIRFLOW__CORE__LOAD_EXAMPLES="False")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert "opportunity_radar" in data["plugins"] and not data["errors"]
    assert data["web"] == ["include.radar.web", "include.radar.web.mount"]


# ----------------------------------------------------------------------------------------------- browser

CHROMIUM = "/usr/bin/chromium"


def seed_showcase_day(seed: Seeder) -> None:
    """A realistic day for the screenshot: every section of the daily page has something to show."""
    morning = seed.slot(DAY, "07:00", new=4)
    top = seed.article(
        morning,
        "储能集采放量，电芯价格见底回升",
        86,
        account="储能前沿",
        summary="四季度储能集采招标量同比翻倍，电芯价格企稳，头部厂商订单回暖，板块有望修复。",
        opportunities=[OPPORTUNITY],
    )
    seed.article(
        morning, "央行公开市场净投放 3000 亿", 42, account="宏观观察", summary="流动性平稳，短期对市场影响有限。"
    )
    seed.close(morning)
    noon = seed.slot(DAY, "12:00", new=3)
    second = seed.article(
        noon,
        "券商板块成交放大，并购重组预期升温",
        71,
        account="券商研究",
        summary="两市成交额连续三日破万亿，券商板块受益于交投活跃与并购重组政策。",
        opportunities=[dict(OPPORTUNITY, name="头部券商", type="stock", targets=["中信证券"], direction="bullish")],
    )
    seed.article(
        noon, "碳酸锂期货大幅波动", 55, account="商品日报", summary="供给扰动加剧，价格短期波动放大，建议观察。"
    )
    seed.failure(noon, "一篇无法解析的长文", "DeepSeek 返回的 JSON 不符合格式（已重试 3 次）")
    seed.close(noon)
    for slot in ("14:00", "18:00"):
        seed.close(seed.slot(DAY, slot, new=1))
    seed.report(
        DAY,
        digest_md=(
            "## 今日要点\n- **储能**：集采放量，电芯价格企稳\n- **券商**：成交放大，并购重组预期升温\n\n"
            "## 风险\n- 碳酸锂价格波动加大\n\n"
            f"[查看储能分析](https://radar.example.com/radar/analysis/{top})"
        ),
        digest_json={
            "top_opportunities": [
                {
                    "analysis_id": top,
                    "title": "储能集采放量，电芯价格见底回升",
                    "reason": "集采放量叠加价格企稳，催化明确",
                },
                {"analysis_id": second, "title": "券商板块成交放大", "reason": "交投活跃，政策催化"},
            ],
            "watchlist": ["储能集采节奏", "碳酸锂价格", "券商并购进展"],
        },
        stats={"analysed": 4, "opportunities": 2, "failed": 1, "max_score": 86},
        slots_done=["07:00", "12:00", "14:00", "18:00"],
    )
    seed.push(DAY, channel="bark://api.day.app")
    commit(seed)


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--window-size=420,1400",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.browser
def test_daily_page_renders_in_chromium(seed: Seeder, db_url: str, tmp_path: Path) -> None:
    from tests.browser import require_chromium, serve

    require_chromium()
    seed_showcase_day(seed)
    app = create_app(lambda: make_settings(demo_mode=True), db_url, clock=FixedClock(NOW))
    with serve(app) as base:
        # signed like a pushed link (the server checks it against its own, pinned, clock)
        url = base + signed("/daily/2026-01-08")

        dom = _chromium("--dump-dom", url, profile=tmp_path / "profile-dom")
        assert dom.returncode == 0, dom.stderr[-2000:]
        assert "<title>日报 2026-01-08 · 机会雷达</title>" in dom.stdout
        assert "储能集采放量，电芯价格见底回升" in dom.stdout and "演示数据 DEMO" in dom.stdout

        # the daily page as a phone opens it from a push, plus the overview and an analysis for review
        top_analysis = re.search(r'href="/analysis/(\d+)\?', dom.stdout)
        assert top_analysis is not None  # signed links to the day's analyses
        analysis_id = int(top_analysis.group(1))
        pages = {
            "daily-report.png": url,
            "overview.png": base + signed("/"),
            "analysis.png": base + signed(f"/analysis/{analysis_id}"),
        }
        for name, page_url in pages.items():
            shot = REPO / "artifacts" / "screenshots" / name
            shot.parent.mkdir(parents=True, exist_ok=True)
            shot.unlink(missing_ok=True)
            result = _chromium("--hide-scrollbars", f"--screenshot={shot}", page_url, profile=tmp_path / f"p-{name}")
            assert result.returncode == 0, result.stderr[-2000:]
            assert shot.exists() and shot.stat().st_size > 20_000, name
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.browser
def test_the_browser_harness_opens_a_signed_page_on_a_phone(seed: Seeder, db_url: str) -> None:
    from tests.browser import PHONE, chromium, serve

    seed_showcase_day(seed)
    app = create_app(lambda: make_settings(demo_mode=True), db_url, clock=FixedClock(NOW))
    with serve(app) as base, chromium() as browser:
        page = browser.new_page(viewport=PHONE)
        response = page.goto(base + signed("/daily/2026-01-08"))
        assert response is not None and response.status == 200
        assert page.title() == "日报 2026-01-08 · 机会雷达"
        # nothing overflows the phone's width
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
