"""The reader's focus and feedback on the pages: the profile page, 👍/👎/🤷 as signed actions, what the overview learned.

Rooms: web/routes/profile.py, web/feedback.py, web/csrf.py, web/views/profile.py, store/focus.py, ranking.py.
"""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from include.radar import store
from include.radar.core import signing
from include.radar.core.clock import FixedClock
from include.radar.web.app import create_app
from include.radar.web.feedback import action_path
from tests.pages import DAY, NOW, OPPORTUNITY, SECRET, XSS, XSS_ESCAPED, Seeder, commit, make_settings, signed


def _forms(html: str) -> dict[str, dict[str, str]]:
    """verdict -> the hidden fields of its form, for every feedback form of the page (first analysis)."""
    found: dict[str, dict[str, str]] = {}
    for form in re.findall(r'<form method="post" action="([^"]+)" class="fb-form">(.*?)</form>', html, re.S):
        fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', form[1]))
        fields["_action"] = form[0]
        found.setdefault(fields["verdict"], fields)
    return found


def _unescape(value: str) -> str:
    return value.replace("&amp;", "&").replace("&#34;", '"').replace("&#39;", "'")


def _vote(client: TestClient, fields: dict[str, str], **changes: str):
    data = {k: _unescape(v) for k, v in fields.items() if not k.startswith("_")} | changes
    return client.post(fields["_action"], data=data, follow_redirects=False)


@pytest.fixture
def day(seed: Seeder) -> dict[str, int]:
    morning = seed.slot(DAY, "07:00", new=2)
    top = seed.article(morning, "储能集采放量", 81, account="储能前沿", opportunities=[OPPORTUNITY])
    other = seed.article(morning, "券商成交放大", 70, account="券商研究")
    seed.close(morning)
    commit(seed)
    return {"top": top, "other": other}


def _signed_client(db_url: str) -> TestClient:
    return TestClient(create_app(lambda: make_settings(), db_url, clock=FixedClock(NOW)))


def test_a_signed_analysis_page_votes_without_a_login_once_and_idempotently(day, db_url, conn) -> None:
    client = _signed_client(db_url)  # no Airflow user at all: the pushed link is the only way in
    page = client.get(signed(f"/analysis/{day['top']}"))
    assert page.status_code == 200 and "对你有用吗" in page.text
    forms = _forms(page.text)
    assert set(forms) == {"up", "down", "knew"}
    assert forms["up"]["_action"] == f"/analysis/{day['top']}/feedback"
    answer = _vote(client, forms["up"])
    assert answer.status_code == 303
    assert answer.headers["location"].startswith(f"/analysis/{day['top']}?exp=")  # back to the signed page
    assert answer.headers["location"].endswith(f"#fb-{day['top']}")
    assert store.focus.feedback_of(conn, [day["top"]]) == {day["top"]: "up"}
    again = client.get(answer.headers["location"].split("#")[0])
    assert again.status_code == 200 and 'class="fb-btn chosen" aria-pressed="true">👍 有用' in again.text
    assert _vote(client, forms["up"]).status_code == 303  # the same click twice: still one verdict
    assert conn.execute("SELECT count(*) AS n FROM feedback").fetchone()["n"] == 1
    assert _vote(client, forms["knew"]).status_code == 303  # another button replaces it
    assert store.focus.feedback_of(conn, [day["top"]]) == {day["top"]: "knew"}


def test_a_vote_needs_this_analysiss_own_unexpired_token(day, db_url, conn) -> None:
    client = _signed_client(db_url)
    forms = _forms(client.get(signed(f"/analysis/{day['top']}")).text)
    up = forms["up"]
    # the token of one analysis cannot vote on another
    other = client.post(f"/analysis/{day['other']}/feedback", data={**{k: _unescape(v) for k, v in up.items()
                                                                        if not k.startswith("_")}},
                        follow_redirects=False)
    assert other.status_code == 403 and "反馈链接无效或已过期" in other.text
    assert _vote(client, up, tok="0" * 64).status_code == 403
    assert _vote(client, up, exp=str(int(up["exp"]) + 1)).status_code == 403
    assert _vote(client, up, verdict="love").status_code == 400
    # a page link signature is no vote token, and a vote token opens no page
    link = signing.sign(f"/analysis/{day['top']}", SECRET, NOW, 7)
    assert _vote(client, up, exp=link["exp"], tok=link["sig"]).status_code == 403
    vote_token = signing.sign(action_path(day["top"]), SECRET, NOW, 7)
    assert client.get(f"/analysis/{day['top']}?exp={vote_token['exp']}&sig={vote_token['sig']}").status_code == 403
    # expired: a token made for a page whose link has run out
    stale = signing.sign_until(action_path(day["top"]), SECRET, int(NOW.timestamp()) - 1)
    assert _vote(client, up, exp=stale["exp"], tok=stale["sig"]).status_code == 403
    assert client.post(f"/analysis/{day['top']}/feedback", content=b"x" * 5000).status_code == 400
    assert store.focus.feedback_of(conn, [day["top"], day["other"]]) == {}


def test_after_a_vote_the_reader_is_never_sent_to_another_host(day, db_url) -> None:
    client = _signed_client(db_url)
    forms = _forms(client.get(signed(f"/analysis/{day['top']}")).text)
    for back in ("https://evil.example/x", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"):
        answer = _vote(client, forms["down"], back=back)
        assert answer.status_code == 303
        assert answer.headers["location"] == f"/analysis/{day['top']}#fb-{day['top']}", back


def test_the_daily_page_has_buttons_beside_each_entry_and_shows_the_rank(day, make_client, conn) -> None:
    client = make_client()
    html = client.get(f"/daily/{DAY.isoformat()}").text
    ids = re.findall(r'id="fb-(\d+)"', html)
    assert sorted(map(int, ids)) == sorted(day.values())
    # the reader says 券商研究's article was not news: its account sinks, and the overview says what it learned
    store.focus.set_feedback(conn, day["top"], "up", "test")
    conn.commit()
    overview = client.get("/").text
    assert "你更看重" in overview and "公众号「储能前沿」 +3" in overview
    analysis = client.get(f"/analysis/{day['top']}").text
    assert "排序分 = 评分 81 + 3（公众号「储能前沿」的反馈）" in analysis
    # the pages reuse what they learned until a verdict changes: a changed mind shows at once
    store.focus.set_feedback(conn, day["top"], "down", "test")
    conn.commit()
    overview = client.get("/").text
    assert "较少关注：公众号「储能前沿」（-3）" in overview and "公众号「储能前沿」 +3" not in overview


def test_without_a_link_secret_there_are_no_buttons_but_a_reason(day, make_client) -> None:
    client = make_client(settings=make_settings(link_secret=None))
    html = client.get(f"/analysis/{day['top']}").text
    assert 'class="fb-form"' not in html and "反馈按钮需要配置链接密钥" in html


# ----------------------------------------------------------------------------------------------- profile


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match
    return match.group(1)


def test_the_profile_is_saved_by_a_logged_in_reader_with_the_forms_token(make_client, conn) -> None:
    client = make_client()
    page = client.get("/profile")
    assert page.status_code == 200 and "关注设置" in page.text and "排序分 = 模型评分 + 关注加分 + 反馈加权" in page.text
    token = _csrf(page.text)
    form = {"csrf": token, "companies": "宁德时代、比亚迪", "tickers": "300750", "sectors": "储能\n光伏",
            "interests": "储能产业链的价格拐点", "rules": "!直播\n+订单"}
    saved = client.post("/profile", data=form, follow_redirects=False)
    assert saved.status_code == 303 and saved.headers["location"] == "/profile?saved=1&recheck=0"
    row = store.focus.get_profile(conn)
    assert row["companies"] == ["宁德时代", "比亚迪"] and row["rules"] == ["!直播", "+订单"]
    assert row["updated_by"] == "analyst"
    shown = client.get("/profile?saved=1").text
    assert "已保存" in shown and "宁德时代\n比亚迪" in shown


def test_a_profile_post_without_its_token_or_from_a_signed_link_is_refused(make_client, db_url, conn) -> None:
    client = make_client()
    client.get("/profile")
    assert client.post("/profile", data={"companies": "x"}).status_code == 403  # no token: another site's form
    assert client.post("/profile", data={"csrf": "A" * 43, "companies": "x"}).status_code == 403
    # a pushed link never opens the profile (it is personal), let alone saves it
    reader = _signed_client(db_url)
    page = reader.get(signed("/profile"))
    assert page.status_code == 401 and "个人信息" in page.text and "关注列表" not in page.text.split("<main>")[0]
    token = _csrf(client.get("/profile").text)
    refused = reader.post(signed("/profile"), data={"csrf": token, "companies": "x"})
    assert refused.status_code == 401
    assert store.focus.get_profile(conn) is None


def test_a_profile_that_cannot_be_used_is_shown_again_with_its_reasons_escaped(make_client, conn) -> None:
    client = make_client()
    token = _csrf(client.get("/profile").text)
    answer = client.post("/profile", data={"csrf": token, "companies": XSS, "rules": "/(/\n!直播"})
    assert answer.status_code == 400
    assert "没有保存" in answer.text and "正则「/(/」无效" in answer.text
    assert XSS not in answer.text and XSS_ESCAPED in answer.text  # what was typed comes back, escaped
    assert store.focus.get_profile(conn) is None


def test_hostile_watchlist_text_is_escaped_on_the_analysis_page(day, make_client, conn) -> None:
    conn.execute("UPDATE analysis_result SET watch_hits = %s, result_json = result_json || %s::jsonb WHERE id = %s",
                 ([XSS], '{"watchlist": {"touches": true, "how": "<img src=x onerror=alert(1)>"}}', day["top"]))
    conn.commit()
    html = make_client().get(f"/analysis/{day['top']}").text
    assert XSS not in html and "<img src=x" not in html
    assert "关注列表命中：" + XSS_ESCAPED in html and "&lt;img src=x onerror=alert(1)&gt;" in html




# ----------------------------------------------------------------------------------------------- browser


@pytest.mark.browser
def test_feedback_from_a_pushed_link_on_a_phone(day, db_url, conn) -> None:
    """As a reader does it: open the pushed daily link on a phone, tap 👍 beside an entry, land back on the
    same entry with the button marked; follow the signed link to the analysis and tap 🤷 there."""
    from tests.browser import PHONE, chromium, screenshot, serve

    app = create_app(lambda: make_settings(demo_mode=True), db_url, clock=FixedClock(NOW))
    with serve(app) as base, chromium() as browser:
        page = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
        page.goto(base + signed(f"/daily/{DAY.isoformat()}"))
        entry = page.locator(f"#fb-{day['other']}")
        with page.expect_navigation():
            entry.get_by_role("button", name="👍 有用").tap()
        assert page.url.endswith(f"#fb-{day['other']}") and "/daily/2026-01-08?exp=" in page.url
        assert page.locator(f"#fb-{day['other']} .fb-btn.chosen").inner_text() == "👍 有用"
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert store.focus.feedback_of(conn, [day["other"]]) == {day["other"]: "up"}
        with page.expect_navigation():
            page.locator(f'a[href^="/analysis/{day["top"]}?exp="]').first.tap()
        assert "对你有用吗" in page.content()
        with page.expect_navigation():
            page.get_by_role("button", name="🤷 早知道了").tap()
        assert page.locator(".fb-btn.chosen").inner_text() == "🤷 早知道了"
        page.evaluate("window.scrollTo(0, 0)")
        screenshot(page, "feedback-phone.png")
    assert store.focus.feedback_of(conn, [day["top"], day["other"]]) == {day["top"]: "knew", day["other"]: "up"}


def test_excluded_articles_are_counted_on_their_slot_and_listed_on_the_day(seed: Seeder, make_client, conn) -> None:
    morning = seed.slot(DAY, "07:00", new=2)
    seed.article(morning, "储能集采放量", 81)
    item = store.articles.insert_content_item(conn, {
        "external_id": "x-1", "account_id": seed.account("直播号"), "mp_id": "mp-live", "title": "今晚直播" + XSS,
        "url": "https://mp.weixin.qq.com/s/live", "published_at": morning["scheduled_at"], "raw_html_size": 10,
        "clean_text": "直播预告", "content_hash": "h-live", "body_status": 1, "last_error": None,
        "slot_run_id": morning["id"]})
    assert store.focus.exclude_items(conn, morning["id"], {item: "命中排除词 !直播"}) == 1
    assert store.focus.exclude_items(conn, morning["id"], {item: "命中排除词 !直播"}) == 0  # counted once
    seed.close(morning)
    commit(seed)
    html = make_client().get(f"/daily/{DAY.isoformat()}").text
    assert "按关注设置排除 <b>1</b> 篇" in html  # the slot card
    assert "命中排除词 !直播" in html and "今晚直播" + XSS_ESCAPED in html and XSS not in html


def test_saving_rules_leaves_the_recheck_of_excluded_articles_to_the_next_slot(seed: Seeder, make_client, conn) -> None:
    """The save answers without touching the articles (its time must not grow with them); it
    says how many excluded articles the next slot will look at again (test_focus shows that slot)."""
    morning = seed.slot(DAY, "07:00")
    item = store.articles.insert_content_item(conn, {
        "external_id": "x-2", "account_id": seed.account("直播号"), "mp_id": "mp-live", "title": "今晚直播",
        "url": "https://mp.weixin.qq.com/s/live", "published_at": NOW, "raw_html_size": 10,
        "clean_text": "直播预告", "content_hash": "h-live2", "body_status": 1, "last_error": None,
        "slot_run_id": morning["id"]})
    store.focus.exclude_items(conn, morning["id"], {item: "命中排除词 !直播"})
    commit(seed)
    client = make_client()
    token = _csrf(client.get("/profile").text)
    freed = client.post("/profile", data={"csrf": token, "rules": "!抽奖"}, follow_redirects=False)
    assert freed.headers["location"] == "/profile?saved=1&recheck=1"
    assert "近 72 小时被规则排除的 1 篇文章，下一个时段会按新规则重新检查" in client.get(freed.headers["location"]).text
    row = conn.execute("SELECT analyzed_status, last_error FROM content_item WHERE id = %s", (item,)).fetchone()
    assert row["analyzed_status"] == store.focus.EXCLUDED and row["last_error"] == "命中排除词 !直播"


@pytest.mark.browser
def test_the_focus_pages_render_on_a_phone(seed: Seeder, db_url, conn) -> None:
    """The profile page, an analysis whose rank has a watchlist boost and feedback, and the overview's 你更看重,
    on a phone (screenshots for docs/screenshots)."""
    from tests.browser import PHONE, chromium, screenshot, serve

    morning = seed.slot(DAY, "07:00", new=2)
    top = seed.article(morning, "储能集采放量，电芯价格见底回升", 81, account="储能前沿", opportunities=[OPPORTUNITY])
    earlier = seed.article(morning, "宁德时代海外储能大单落地", 66, account="储能前沿", opportunities=[OPPORTUNITY])
    seed.close(morning)
    store.focus.save_profile(conn, {"companies": ["宁德时代", "阳光电源"], "tickers": ["300750"], "sectors": ["储能"],
                              "interests": ["储能产业链的价格拐点"], "rules": ["!直播", "!/抽奖|福利/"]}, "analyst")
    conn.execute("UPDATE analysis_result SET watch_hits = %s, result_json = result_json || %s::jsonb WHERE id = %s",
                 (["储能"], '{"watchlist": {"touches": true, "how": "储能集采放量直接关系关注行业「储能」"}}', top))
    store.focus.set_feedback(conn, earlier, "up", "test")
    commit(seed)
    app = create_app(lambda: make_settings(demo_mode=True), db_url, clock=FixedClock(NOW))
    from tests.pages import FakeUser, airflow_get_user, allow_reading

    app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
    allow_reading(app, edit=True)
    with serve(app) as base, chromium() as browser:
        page = browser.new_page(viewport=PHONE, is_mobile=True)
        for path, name, must in (("/profile", "profile.png", "排序怎么算"),
                                 (f"/analysis/{top}", "analysis-rank.png", "关注列表命中：储能"),
                                 ("/", "overview-learned.png", "你更看重")):
            assert page.goto(base + path).status == 200
            assert must in page.content()
            assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], path
            screenshot(page, name)
