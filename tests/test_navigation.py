"""Pages that never dead-end — a signed push link opens a short read session for the other pages;
the login button comes back to the page the reader was on.

Rooms: web/auth.py (the read session), web/middleware.py, the pages' top bar.
"""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from include.radar.core.clock import FixedClock
from include.radar.core.settings import Settings
from include.radar.web.app import create_app
from include.radar.web.auth import READ_COOKIE
from tests.pages import DAY, NOW, OPPORTUNITY, Seeder, commit, make_settings, signed

READ_SESSION_SECONDS = Settings().link_session_minutes * 60  # the default session: 30 minutes


@pytest.fixture
def day(seed: Seeder) -> dict[str, int]:
    morning = seed.slot(DAY, "07:00", new=1)
    top = seed.article(morning, "储能集采放量", 81, opportunities=[OPPORTUNITY])
    seed.close(morning)
    earlier = seed.slot(DAY - timedelta(days=1), "07:00", new=1)
    old = seed.article(earlier, "昨日的分析", 50)
    seed.close(earlier)
    commit(seed)
    return {"top": top, "old": old}


def _client(db_url: str, clock: FixedClock) -> TestClient:
    return TestClient(create_app(lambda: make_settings(), db_url, clock=clock))


def test_a_signed_link_opens_a_read_session_for_the_other_pages(day, db_url) -> None:
    clock = FixedClock(NOW)
    client = _client(db_url, clock)  # no Airflow user
    assert client.get("/").status_code == 401
    page = client.get(signed(f"/daily/{DAY.isoformat()}"))
    assert page.status_code == 200
    cookie = page.headers["set-cookie"]
    assert cookie.startswith(f"{READ_COOKIE}=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert f"Max-Age={READ_SESSION_SECONDS}" in cookie and "Path=/" in cookie
    # the reader walks on: the overview, the day before, an analysis of that day — all without a signature
    for path in ("/", f"/daily/{(DAY - timedelta(days=1)).isoformat()}", f"/analysis/{day['old']}"):
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert "可浏览至" in answer.text
    # the profile is personal: a session never opens it, nor saves it
    profile = client.get("/profile")
    assert profile.status_code == 401 and "个人信息" in profile.text and "/api/v2/auth/login" in profile.text
    assert client.post("/profile", data={"companies": "x"}).status_code == 401
    # half an hour later the session is over: the page offers the login, coming back to this very page
    clock.at = NOW + timedelta(seconds=READ_SESSION_SECONDS + 1)
    expired = client.get(f"/analysis/{day['old']}")
    assert expired.status_code == 401 and "请先登录 Airflow" in expired.text
    login = re.search(r'href="([^"]*/api/v2/auth/login\?[^"]*)"', expired.text)
    assert login is not None
    assert parse_qs(urlsplit(login.group(1).replace("&amp;", "&")).query)["next"] == [f"/analysis/{day['old']}"]


def test_a_session_never_outlives_its_link(day, db_url) -> None:
    client = TestClient(create_app(lambda: make_settings(remember_me_days=1), db_url, clock=FixedClock(NOW)))
    # a one-day link that expires in ten minutes
    page = client.get(signed(f"/daily/{DAY.isoformat()}", now=NOW - timedelta(days=1, minutes=-10), days=1))
    assert page.status_code == 200
    max_age = int(re.search(r"Max-Age=(\d+)", page.headers["set-cookie"]).group(1))
    assert max_age == 600  # the link's own expiry caps the session
    ending = client.get(signed(f"/daily/{DAY.isoformat()}", days=0))  # a link that expires now
    assert ending.status_code == 200 and READ_COOKIE not in ending.headers.get("set-cookie", "")


@pytest.mark.parametrize("value", ["", "1.2", "9999999999." + "0" * 64, "9999999999." + "0" * 16 + "." + "0" * 64,
                                   "garbage", "1770467400.zz"])
def test_a_forged_or_foreign_read_cookie_is_no_cookie(day, db_url, value: str) -> None:
    client = _client(db_url, FixedClock(NOW))
    client.cookies.set(READ_COOKIE, value)
    assert client.get("/").status_code == 401


def test_a_link_signature_is_no_session_cookie_and_the_reverse(day, db_url) -> None:
    client = _client(db_url, FixedClock(NOW))
    query = parse_qs(urlsplit(signed("/")).query)
    client.cookies.set(READ_COOKIE, f"{query['exp'][0]}.{query['sig'][0]}")
    assert client.get("/").status_code == 401  # a signature for "/" is not a session
    session = client.get(signed(f"/daily/{DAY.isoformat()}")).headers["set-cookie"].split(";")[0].split("=", 1)[1]
    exp, origin, sig = session.split(".")
    fresh = _client(db_url, FixedClock(NOW))
    assert fresh.get(f"/daily/{DAY.isoformat()}?exp={exp}&sig={sig}").status_code == 403


def test_a_session_is_bound_to_the_link_that_opened_it(day, db_url) -> None:
    # the per-link bound counts a link and its sessions as one client: a session claiming another link's origin
    # does not verify, and opening the link again mints a session of the same origin
    from include.radar.web import admission

    client = _client(db_url, FixedClock(NOW))
    link = signed(f"/daily/{DAY.isoformat()}")
    link_sig = parse_qs(urlsplit(link).query)["sig"][0]
    session = client.get(link).headers["set-cookie"].split(";")[0].split("=", 1)[1]
    exp, origin, sig = session.split(".")
    assert origin == link_sig[:admission.KEY_CHARS]
    assert admission.client_key({"query_string": b"", "headers": [(b"cookie", f"{READ_COOKIE}={session}".encode())]}) \
        == admission.client_key({"query_string": urlsplit(link).query.encode(), "headers": []})
    assert client.get("/").status_code == 200
    other = _client(db_url, FixedClock(NOW))
    other.cookies.set(READ_COOKIE, f"{exp}.{'f' * 16}.{sig}")  # the same HMAC under another origin
    assert other.get("/").status_code == 401


@pytest.mark.browser
def test_from_a_pushed_link_a_phone_walks_to_other_pages(day, db_url) -> None:
    from tests.browser import PHONE, chromium, serve

    clock = FixedClock(NOW)
    app = create_app(lambda: make_settings(), db_url, clock=clock)
    with serve(app) as base, chromium() as browser:
        page = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
        assert page.goto(base + signed(f"/daily/{DAY.isoformat()}")).status == 200
        with page.expect_navigation():
            page.get_by_role("link", name="总览", exact=True).first.tap()
        assert urlsplit(page.url).path == "/" and "最近" in page.content()
        with page.expect_navigation():
            page.locator(f'a[href="/daily/{(DAY - timedelta(days=1)).isoformat()}"]').first.tap()
        assert "昨日的分析" in page.content()
        with page.expect_navigation():
            page.get_by_role("link", name="昨日的分析").first.tap()
        assert urlsplit(page.url).path == f"/analysis/{day['old']}" and "对你有用吗" in page.content()
        clock.at = NOW + timedelta(seconds=READ_SESSION_SECONDS + 1)
        answer = page.reload()
        assert answer is not None and answer.status == 401 and "登录" in page.content()


def test_the_overview_opens_with_todays_top_and_what_is_new_since_the_last_visit(seed: Seeder, db_url, conn) -> None:
    from tests.pages import FakeUser, airflow_get_user, allow_reading

    morning = seed.slot(DAY, "07:00", new=3)
    seed.article(morning, "低分资讯", 30)
    top = seed.article(morning, "储能集采放量", 81, opportunities=[OPPORTUNITY])
    seed.close(morning)
    commit(seed)
    clock = FixedClock(NOW)
    app = create_app(lambda: make_settings(), db_url, clock=clock)
    app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
    allow_reading(app)
    client = TestClient(app)
    first = client.get("/")
    html = first.text
    assert html.index("今日重点") < html.index("储能集采放量") < html.index("低分资讯")  # best first, at the top
    assert "自上次访问以来新增" not in html  # a first visit has no "since"
    assert "radar_seen=" in first.headers["set-cookie"]
    # an hour later two analyses have arrived
    conn.execute("UPDATE analysis_result SET created_at = %s", (NOW - timedelta(hours=2),))
    conn.commit()
    noon = seed.slot(DAY, "12:00", new=2)
    seed.article(noon, "券商成交放大", 70)
    seed.article(noon, "光伏排产回升", 64)
    conn.execute("UPDATE analysis_result SET created_at = %s WHERE id > %s", (NOW + timedelta(minutes=30), top))
    commit(seed)
    clock.at = NOW + timedelta(hours=1)
    later = client.get("/").text
    assert "自上次访问以来新增 2 条" in later
    block = later[later.index("自上次访问以来新增"):]
    assert "券商成交放大" in block and "光伏排产回升" in block and "储能集采放量" not in block.split("</section>")[0]
    assert "自上次访问以来新增 0 条" in client.get("/").text  # seen now
    client.cookies.clear()
    client.cookies.set("radar_seen", "not-a-time")
    assert "自上次访问以来新增" not in client.get("/").text  # a garbage cookie is no visit
