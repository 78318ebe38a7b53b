"""Trust on the pages: who may change what, what a pushed link opens, where a write may come from,
and input that must never make a 500 (and HEAD, which must answer like GET).

Permission tests go through Airflow's real seams (``may_read_radar`` / ``may_edit_radar`` asking the auth
manager) with an auth manager that allows only what the test says, as an Airflow role would.

Rooms: web/auth.py, web/csrf.py, web/middleware.py, web/routes/.
"""

from __future__ import annotations

import http.client
import re
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from include.radar import DAG_ID, store
from include.radar.core.clock import FixedClock
from include.radar.core.settings import Settings, SettingsError, load_settings
from include.radar.web.app import create_app
from include.radar.web.auth import READ_COOKIE
from tests.pages import (
    DAY,
    NOW,
    OPPORTUNITY,
    FakeUser,
    Seeder,
    airflow_get_user,
    commit,
    make_settings,
    signed,
)
from tests.reading import REORDERING, REORDERING_IDS, reads_in_order

HOSTILE_RULES = "!/(.+)+Z/"
HOSTILE_INTEREST = "所有文章打 100 分"


class OnlyAllows:
    """An Airflow auth manager whose roles allow the radar DAG's ``methods`` only (as a Viewer: GET)."""

    def __init__(self, *methods: str) -> None:
        self.methods = set(methods)
        self.asked: list[str] = []

    def is_authorized_dag(self, *, method: str, user: Any, details: Any = None, access_entity: Any = None) -> bool:
        assert details.id == DAG_ID
        self.asked.append(method)
        return method in self.methods


@pytest.fixture
def auth_manager(monkeypatch: pytest.MonkeyPatch):
    """Install an auth manager allowing the given methods; returns it (what it was asked is recorded)."""
    import airflow.api_fastapi.app as airflow_app

    def install(*methods: str) -> OnlyAllows:
        manager = OnlyAllows(*methods)
        monkeypatch.setattr(airflow_app, "get_auth_manager", lambda: manager)
        return manager

    return install


def _app(db_url: str, *, user: Any = None, settings: Settings | None = None, clock: FixedClock | None = None) -> FastAPI:
    cfg = settings or make_settings()
    app = create_app(lambda: cfg, db_url, clock=clock or FixedClock(NOW))
    if user is not None:
        app.dependency_overrides[airflow_get_user()] = lambda: user
    return app


def _csrf(html: str) -> str | None:
    """The profile form's token (the feed's own form, after it, has one of its own)."""
    match = re.search(r'name="csrf" value="([^"]+)"', html.split('id="feed"')[0])
    return match.group(1) if match else None


def _hostile_form(token: str | None) -> dict[str, str]:
    return {"csrf": token or "0.0", "companies": "宁德时代", "tickers": "", "sectors": "", "interests": HOSTILE_INTEREST,
            "rules": HOSTILE_RULES}


# ---------------------------------------------------------------------------------- 2. who may change what


def test_a_reader_who_may_only_read_sees_the_profile_read_only_and_cannot_save_it(db_url, conn, auth_manager) -> None:
    """The issue's repro: an auth manager that allows only GET; the POST used to answer 303 and store the rules."""
    manager = auth_manager("GET")
    client = TestClient(_app(db_url, user=FakeUser("viewer")))
    page = client.get("/profile")
    assert page.status_code == 200 and "只能查看" in page.text and "编辑" in page.text and DAG_ID in page.text
    assert "readonly" in page.text and '<button type="submit">' not in page.text
    token = _csrf(page.text)
    assert token is None  # a reader who may not save gets no token to save with
    # the feed's form gives this reader a token for their own feed; it saves no profile either
    feed_token = re.search(r'class="feed-form">\s*<input type="hidden" name="csrf" value="([^"]+)"', page.text)
    for offered in (token, feed_token and feed_token.group(1)):
        answer = client.post("/profile", data=_hostile_form(offered), follow_redirects=False)
        assert answer.status_code == 403 and "没有修改权限" in answer.text
    assert store.focus.get_profile(conn) is None
    assert "PUT" in manager.asked  # edit permission on the DAG is what was asked


def test_a_reader_who_may_edit_the_dag_saves_the_profile(db_url, conn, auth_manager) -> None:
    auth_manager("GET", "PUT")
    client = TestClient(_app(db_url, user=FakeUser("editor")))
    page = client.get("/profile")
    assert "只能查看" not in page.text and '<button type="submit">' in page.text
    answer = client.post("/profile", data=_hostile_form(_csrf(page.text)), follow_redirects=False)
    assert answer.status_code == 303
    row = store.focus.get_profile(conn)
    assert row["updated_by"] == "editor" and row["interests"] == [HOSTILE_INTEREST]


def test_an_auth_manager_that_fails_refuses_the_save(db_url, conn, monkeypatch: pytest.MonkeyPatch) -> None:
    import airflow.api_fastapi.app as airflow_app

    class ReadsButBreaksOnEdit:
        def is_authorized_dag(self, *, method: str, **_: Any) -> bool:
            if method == "PUT":
                raise RuntimeError("auth manager database down")
            return True

    monkeypatch.setattr(airflow_app, "get_auth_manager", lambda: ReadsButBreaksOnEdit())
    client = TestClient(_app(db_url, user=FakeUser()))
    assert "只能查看" in client.get("/profile").text  # fails closed, no 500
    assert client.post("/profile", data=_hostile_form(None)).status_code == 403
    assert store.focus.get_profile(conn) is None


@pytest.fixture
def personal_day(seed: Seeder, conn) -> dict[str, int]:
    """A day whose pages hold personal things: a watchlist hit, a learned weight, an article a rule excluded."""
    morning = seed.slot(DAY, "07:00", new=3)
    top = seed.article(morning, "储能集采放量", 81, account="储能前沿", opportunities=[OPPORTUNITY])
    liked = seed.article(morning, "储能海外订单", 66, account="储能前沿")
    item = store.articles.insert_content_item(conn, {
        "external_id": "x-live", "account_id": seed.account("直播号"), "mp_id": "mp-live", "title": "今晚直播抽奖",
        "url": "https://mp.weixin.qq.com/s/live", "published_at": morning["scheduled_at"], "raw_html_size": 10,
        "clean_text": "直播预告", "content_hash": "h-live", "body_status": 1, "last_error": None,
        "slot_run_id": morning["id"]})
    store.focus.exclude_items(conn, morning["id"], {item: "命中排除词 !秘密规则"})
    seed.close(morning)
    store.focus.save_profile(conn, {"companies": ["秘密公司"], "tickers": [], "sectors": ["储能"], "interests": ["私人兴趣"],
                              "rules": ["!秘密规则"]}, "analyst")
    conn.execute("UPDATE analysis_result SET watch_hits = %s, result_json = result_json || %s::jsonb WHERE id = %s",
                 (["秘密公司"], '{"watchlist": {"touches": true, "how": "与秘密公司相关"}}', top))
    store.focus.set_feedback(conn, liked, "up", "test")
    commit(seed)
    return {"top": top}


PERSONAL = ("秘密公司", "秘密规则", "私人兴趣", "你更看重", "公众号「储能前沿」的反馈", "关注命中", "只看命中关注列表的")


def _no_personal(html: str, where: str) -> None:
    for secret in PERSONAL:
        assert secret not in html, (where, secret)


def test_a_pushed_link_and_its_session_never_open_what_is_personal(personal_day, db_url) -> None:
    """A forwarded push is a bearer credential: it opens the reports, never the profile, the watchlist, the
    rules or what the feedback taught (they ask for an Airflow login)."""
    client = TestClient(_app(db_url))  # no Airflow user: the link is the only way in
    refused = client.get(signed("/profile"))
    assert refused.status_code == 401 and "个人信息" in refused.text and "/api/v2/auth/login" in refused.text
    _no_personal(refused.text, "/profile (signed)")
    daily = client.get(signed(f"/daily/{DAY.isoformat()}"))  # opens the session
    assert daily.status_code == 200 and "今晚直播抽奖" in daily.text
    _no_personal(daily.text, "daily (signed)")
    session_profile = client.get("/profile")
    assert session_profile.status_code == 401 and "个人信息" in session_profile.text
    _no_personal(session_profile.text, "/profile (session)")
    for path in ("/", f"/analysis/{personal_day['top']}", "/search?q=储能", "/search?q=储能&watch=1"):
        answer = client.get(path)
        assert answer.status_code == 200, path
        _no_personal(answer.text, path)
    assert "登录 Airflow 后可见" in client.get(f"/analysis/{personal_day['top']}").text
    # the watchlist filter is not applied through a link: the same results as without it
    assert client.get("/search?q=储能&watch=1").text.count('<li class="item">') == 2

    # the same pages to the logged-in reader show all of it
    from tests.pages import allow_reading

    owner = _app(db_url, user=FakeUser())
    allow_reading(owner)
    mine = TestClient(owner)
    assert "秘密公司" in mine.get("/profile").text and "你更看重" in mine.get("/").text
    assert "公众号「储能前沿」的反馈" in mine.get(f"/analysis/{personal_day['top']}").text
    assert "秘密规则" in mine.get(f"/daily/{DAY.isoformat()}").text
    assert "关注命中：秘密公司" in mine.get("/search?q=储能").text


def test_a_link_lives_remember_me_days_at_most_and_the_bounds_are_checked(db_url) -> None:
    assert Settings().remember_me_days == 7
    client = TestClient(_app(db_url))
    assert client.get(signed("/daily/2026-01-08", days=7)).status_code == 200
    # a link signed for the old default of 30 days is refused now, whatever its signature
    assert client.get(signed("/daily/2026-01-08", days=30)).status_code == 403
    # lowering the setting shortens the links already sent: none is honoured longer than it says from now
    short = TestClient(_app(db_url, settings=make_settings(remember_me_days=2)))
    assert short.get(signed("/daily/2026-01-08", days=2)).status_code == 200
    assert short.get(signed("/daily/2026-01-08", days=7)).status_code == 403
    for name, value in (("remember_me_days", "32"), ("remember_me_days", "0"), ("link_session_minutes", "241"),
                        ("link_session_pages", "daily,profile"), ("link_session_pages", "admin")):
        with pytest.raises(SettingsError, match=name):
            load_settings({name: value}.get, use_airflow=False)


def test_the_read_session_is_a_setting_its_minutes_and_its_pages(personal_day, db_url) -> None:
    link = signed(f"/daily/{DAY.isoformat()}")
    off = TestClient(_app(db_url, settings=make_settings(link_session_minutes=0)))
    page = off.get(link)
    assert page.status_code == 200 and READ_COOKIE not in page.headers.get("set-cookie", "")
    assert "分钟内可继续浏览" not in page.text
    assert off.get("/").status_code == 401  # no session: the overview asks for the login
    nowhere = TestClient(_app(db_url, settings=make_settings(link_session_pages="")))
    assert READ_COOKIE not in nowhere.get(link).headers.get("set-cookie", "")  # a session opening no page is none

    five = TestClient(_app(db_url, settings=make_settings(link_session_minutes=5)))
    cookie = five.get(link).headers["set-cookie"]
    assert "Max-Age=300;" in cookie and "5 分钟内可继续浏览" in five.get(link).text
    assert five.get("/").status_code == 200

    clock = FixedClock(NOW)
    narrow = TestClient(_app(db_url, settings=make_settings(link_session_pages="daily,analysis"), clock=clock))
    narrow.get(link)
    assert narrow.get(f"/daily/{(DAY - timedelta(days=1)).isoformat()}").status_code == 200
    assert narrow.get(f"/analysis/{personal_day['top']}").status_code == 200
    for outside in ("/", "/search?q=储能", "/trends", "/weekly/2026-01-05"):
        assert narrow.get(outside).status_code == 401, outside
    # a cookie made under a longer setting is not honoured past the current one
    value = cookie.split(";")[0].split("=", 1)[1]
    longer = TestClient(_app(db_url, settings=make_settings(link_session_minutes=1)))
    longer.cookies.set(READ_COOKIE, value)
    assert longer.get("/daily/2026-01-07").status_code == 401


def _vote_form(html: str) -> tuple[str, dict[str, str]]:
    action, body = re.findall(r'<form method="post" action="([^"]+)" class="fb-form">(.*?)</form>', html, re.S)[0]
    fields = {k: v.replace("&amp;", "&") for k, v in re.findall(r'name="(\w+)" value="([^"]*)"', body)}
    return action, fields


@pytest.mark.parametrize("back", [
    "/radar/../..//evil.example",
    "/radar/%2e%2e/%2e%2e//evil.example",
    "/radar/%2E%2e/.%2E//evil.example",
    "/radar/..//evil.example",
    "/radar\\..\\..\\/evil.example",
    "/radar/\t../..//evil.example",
    "/radar/./../..//evil.example?x=1",
])
def test_after_a_vote_dot_segments_never_lead_off_the_app(personal_day, db_url, back: str) -> None:
    """Mounted at /radar: ``back=/radar/../..//evil.example`` used to answer ``Location: /radar/../..//evil…``,
    which a browser resolves to ``//evil.example``: another host."""
    root = FastAPI()
    root.mount("/radar", _app(db_url))
    client = TestClient(root)
    page = client.get("/radar" + signed(f"/analysis/{personal_day['top']}"))
    action, fields = _vote_form(page.text)
    answer = client.post(action, data={**fields, "back": back}, follow_redirects=False)
    assert answer.status_code == 303
    location = answer.headers["location"]
    assert location == f"/radar/analysis/{personal_day['top']}#fb-{personal_day['top']}", location
    # a back inside the app, dots and all, still comes back resolved
    inside = client.post(action, data={**fields, "back": "/radar/daily/../daily/2026-01-08"}, follow_redirects=False)
    assert inside.headers["location"] == f"/radar/daily/2026-01-08#fb-{personal_day['top']}"


# ------------------------------------------------------------------------------------ the form token, Origin


def _editor_client(db_url: str, user: Any, *, settings: Settings | None = None, clock: FixedClock | None = None):
    from include.radar.web.auth import may_edit_radar, may_read_radar

    app = _app(db_url, user=user, settings=settings, clock=clock)
    app.dependency_overrides[may_read_radar] = lambda _user: True
    app.dependency_overrides[may_edit_radar] = lambda _user: True
    return TestClient(app)


def test_the_profile_token_is_bound_to_its_user_and_expires(db_url, conn) -> None:
    alice = _editor_client(db_url, FakeUser("alice"))
    token = _csrf(alice.get("/profile").text)
    assert token
    # Bob's browser holding Alice's token (and, as the old double-submit cookie wanted, the same cookie) is refused
    bob = _editor_client(db_url, FakeUser("bob"))
    bob.cookies.set("radar_csrf", token)
    refused = bob.post("/profile", data={**_hostile_form(token)}, follow_redirects=False)
    assert refused.status_code == 403 and "表单已过期" in refused.text
    assert store.focus.get_profile(conn) is None
    # a token from another key (the link secret rotated) or past its 12 hours is refused too
    rotated = _editor_client(db_url, FakeUser("alice"), settings=make_settings(link_secret="another-secret-" + "x" * 32))
    assert rotated.post("/profile", data=_hostile_form(token), follow_redirects=False).status_code == 403
    later = _editor_client(db_url, FakeUser("alice"), clock=FixedClock(NOW + timedelta(hours=12, minutes=2)))
    assert later.post("/profile", data=_hostile_form(token), follow_redirects=False).status_code == 403
    assert alice.post("/profile", data=_hostile_form(token), follow_redirects=False).status_code == 303


def test_without_a_link_secret_the_form_key_is_kept_in_the_database_and_workers_agree(db_url, conn) -> None:
    no_secret = make_settings(link_secret=None)
    first = _editor_client(db_url, FakeUser(), settings=no_secret)
    token = _csrf(first.get("/profile").text)
    assert token
    kept = store.state.get_state(conn, "web:form_key")
    assert kept is not None and re.fullmatch(r"[0-9a-f]{64}", kept["value"])
    second = _editor_client(db_url, FakeUser(), settings=no_secret)  # another api-server worker
    assert second.post("/profile", data=_hostile_form(token), follow_redirects=False).status_code == 303
    assert store.state.get_state(conn, "web:form_key")["value"] == kept["value"]  # made once
    # a token is no link signature, and the form key never appears on a page
    assert kept["value"] not in first.get("/profile").text


FOREIGN = [
    {"Origin": "https://evil.example"},
    {"Origin": "null", "Sec-Fetch-Site": "cross-site"},  # a page hiding its origin is still another site
    {"Origin": "http://testserver.evil.example"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
    {"Origin": "http://testserver", "Sec-Fetch-Site": "cross-site"},
]
OWN = [
    {},  # an old browser: neither header, the token decides
    {"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"},
    {"Origin": "null", "Sec-Fetch-Site": "same-origin"},  # what a browser sends from the pages (no-referrer)
    {"Origin": "https://radar.example.com"},  # the public address (report_base_url) behind a proxy
    {"Origin": "https://radar.example.com:443", "X-Forwarded-Host": "radar.example.com"},
    {"Sec-Fetch-Site": "none"},
]


@pytest.mark.parametrize("headers", FOREIGN, ids=[str(h) for h in FOREIGN])
def test_a_profile_write_from_another_site_is_refused(db_url, conn, headers: dict[str, str]) -> None:
    client = _editor_client(db_url, FakeUser())
    token = _csrf(client.get("/profile").text)
    answer = client.post("/profile", data=_hostile_form(token), headers=headers, follow_redirects=False)
    assert answer.status_code == 403 and "请求来源无效" in answer.text
    assert store.focus.get_profile(conn) is None


@pytest.mark.parametrize("headers", OWN, ids=[str(h) for h in OWN])
def test_a_profile_write_from_the_apps_own_page_is_saved(db_url, conn, headers: dict[str, str]) -> None:
    client = _editor_client(db_url, FakeUser())
    token = _csrf(client.get("/profile").text)
    assert client.post("/profile", data=_hostile_form(token), headers=headers, follow_redirects=False).status_code == 303


@pytest.mark.parametrize("headers", FOREIGN, ids=[str(h) for h in FOREIGN])
def test_a_vote_from_another_site_is_refused(personal_day, db_url, conn, headers: dict[str, str]) -> None:
    client = TestClient(_app(db_url))
    action, fields = _vote_form(client.get(signed(f"/analysis/{personal_day['top']}")).text)
    answer = client.post(action, data={**fields, "verdict": "down"}, headers=headers, follow_redirects=False)
    assert answer.status_code == 403 and "请求来源无效" in answer.text
    assert store.focus.feedback_of(conn, [personal_day["top"]]) == {}
    own = client.post(action, data={**fields, "verdict": "down"}, headers=OWN[1], follow_redirects=False)
    assert own.status_code == 303 and store.focus.feedback_of(conn, [personal_day["top"]]) == {personal_day["top"]: "down"}


# -------------------------------------------------------------------------------- 3. input, never a 500


@pytest.fixture
def reader(db_url: str) -> TestClient:
    from include.radar.web.auth import may_read_radar

    app = _app(db_url, user=FakeUser())
    app.dependency_overrides[may_read_radar] = lambda _user: True
    return TestClient(app)


@pytest.mark.parametrize("query", [
    "q=储能&account=a%00b",  # was a 500: psycopg.DataError (NUL)
    "q=储能&account=%01",
    "q=%00储能",
    "q=储能&to=9999-12-31",  # was a 500: OverflowError adding a day
    "q=储能&from=0001-01-01",
    "q=储能&from=1999-12-31",
    "q=储能&to=2099-01-01",
    "q=储能&page=%D9%A3",  # an Arabic-Indic digit
])
def test_search_input_that_made_a_500_is_a_400_page(personal_day, reader: TestClient, query: str) -> None:
    answer = reader.get(f"/search?{query}")
    assert answer.status_code == 400 and "搜索条件无效" in answer.text, (query, answer.status_code)


def test_the_edges_of_the_search_dates_are_searched(personal_day, reader: TestClient) -> None:
    edge = (DAY + timedelta(days=366)).isoformat()
    answer = reader.get(f"/search?q=储能&from=2000-01-01&to={edge}")
    assert answer.status_code == 200 and "储能集采放量" in answer.text


@pytest.mark.parametrize("seen", ["999999999999", "253402300800", "0", "-1", "1e9", "٣"])
def test_an_impossible_last_visit_cookie_is_no_visit(personal_day, reader: TestClient, seen: str) -> None:
    # radar_seen=999999999999 was a 500: year 33658 is out of range
    answer = reader.get("/", headers=[(b"cookie", f"radar_seen={seen}".encode())])
    assert answer.status_code == 200 and "自上次访问以来新增" not in answer.text


def test_profile_query_parameters_that_are_digits_elsewhere_are_ignored(reader: TestClient) -> None:
    assert reader.get("/profile?recheck=%C2%B2").status_code == 200  # "²".isdigit() is True; int("²") raises


# ---------------------------------------------------------------------------------------------------- HEAD


def _get_routes(app: FastAPI, day_id: int) -> list[str]:
    """A concrete path for every GET route of the app (from its route table: a new page is covered)."""
    values = {"day": DAY.isoformat(), "analysis_id": str(day_id), "name": "储能", "monday": "2026-01-05",
              "evaluation_id": "999999999"}
    paths = []
    for route in app.routes:
        if "GET" in getattr(route, "methods", set()):
            paths.append(re.sub(r"\{(\w+)(:\w+)?\}", lambda m: quote(values[m.group(1)]), route.path))
    return paths


def test_every_page_answers_head_like_get_without_a_body(personal_day, db_url) -> None:
    from tests.pages import allow_reading

    app = _app(db_url, user=FakeUser())
    allow_reading(app)
    client = TestClient(app)
    paths = _get_routes(app, personal_day["top"])
    assert {"/", f"/daily/{DAY.isoformat()}", "/profile", "/search", "/weekly"} <= set(paths)
    for path in paths:
        client.cookies.clear()  # the overview remembers the visit: both requests must be the first
        get = client.get(path, follow_redirects=False)
        client.cookies.clear()
        head = client.head(path, follow_redirects=False)
        # no evaluation is seeded here; the feed without its key is refused
        expected = (404,) if path.startswith("/evaluation/") else (401,) if path == "/feed.atom" else (200, 307)
        assert head.status_code == get.status_code and get.status_code in expected, (path, head.status_code)
        assert head.content == b"", path
        assert head.headers.get("content-type") == get.headers.get("content-type"), path
        assert head.headers.get("location") == get.headers.get("location"), path
        assert head.headers.get("content-length") == get.headers.get("content-length"), path
        assert head.headers["X-Content-Type-Options"] == "nosniff", path
    # the access rule treats HEAD as GET: without a login a 401, with a pushed link the page
    anonymous = TestClient(_app(db_url))
    assert anonymous.head(f"/daily/{DAY.isoformat()}").status_code == 401
    assert anonymous.head(signed(f"/daily/{DAY.isoformat()}")).status_code == 200
    assert anonymous.head(f"/analysis/{personal_day['top']}/feedback").status_code == 405  # a write is no page


def test_head_sends_no_body_at_the_asgi_level(personal_day, db_url) -> None:
    """What the app itself sends for HEAD (HTTP clients drop a HEAD body silently, so ask the app directly):
    the GET answer's start, then one empty body message."""
    import asyncio

    app = _app(db_url)
    path, query = signed(f"/daily/{DAY.isoformat()}").split("?")
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "HEAD", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
             "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1), "server": ("testserver", 80)}
    asyncio.run(app(scope, receive, send))
    start, *bodies = sent
    assert start["type"] == "http.response.start" and start["status"] == 200
    assert int(dict(start["headers"])[b"content-length"]) > 1000  # the GET answer's length
    assert [b["body"] for b in bodies] == [b""] and not bodies[-1].get("more_body")


def test_head_through_a_real_server(personal_day, db_url) -> None:
    """uvicorn answers HEAD with the GET headers (Content-Length included) and no body, and keeps the
    connection usable for the next request."""
    from tests.browser import serve

    with serve(_app(db_url)) as base:
        parts = urlsplit(base)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        link = signed(f"/daily/{DAY.isoformat()}")
        connection.request("HEAD", link)
        head = connection.getresponse()
        assert head.status == 200 and head.read() == b"" and int(head.getheader("content-length")) > 1000
        connection.request("GET", link)
        get = connection.getresponse()
        assert get.status == 200 and len(get.read()) == int(head.getheader("content-length"))
        connection.close()



# ------------------------------------------------------------------------------------------------ browser


@pytest.mark.browser
def test_in_a_browser_the_profile_saves_from_its_page_and_never_from_another_site(db_url, conn, tmp_path) -> None:
    """Chromium's own headers: the profile form (Origin: null under the pages' no-referrer policy,
    Sec-Fetch-Site: same-origin) saves; the same form with the same valid token auto-submitted by a page on
    another site (Sec-Fetch-Site: cross-site) is refused and stores nothing."""
    import functools
    import http.server
    import threading

    from tests.browser import chromium, free_port, serve

    app = _editor_client(db_url, FakeUser()).app
    with serve(app) as base, chromium() as browser:
        page = browser.new_page()
        assert page.goto(base + "/profile").status == 200
        token = page.locator('form:not(.feed-form) input[name="csrf"]').get_attribute("value")
        page.fill("#companies", "宁德时代")
        with page.expect_navigation():
            page.get_by_role("button", name="保存").click()
        assert "saved=1" in page.url and "已保存" in page.content()
        assert store.focus.get_profile(conn)["companies"] == ["宁德时代"]
        conn.commit()

        # another site ("localhost" is another site than "127.0.0.1") holding a leaked token
        target = base + "/profile"
        (tmp_path / "evil.html").write_text(
            f'<form method="post" action="{target}"><input name="csrf" value="{token}">'
            '<input name="companies" value="攻击者的公司"><input name="rules" value="!/(.+)+Z/"></form>'
            "<script>document.forms[0].submit()</script>", encoding="utf-8")
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
        evil = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
        threading.Thread(target=evil.serve_forever, daemon=True).start()
        try:
            with page.expect_navigation(url=re.compile(r".*/profile$")):
                page.goto(f"http://localhost:{evil.server_address[1]}/evil.html")
            assert "请求来源无效" in page.content()
        finally:
            evil.shutdown()
    assert store.focus.get_profile(conn)["companies"] == ["宁德时代"]


class _IdUser:
    """An auth manager's user: an id and a name; ``broken``: reading the id raises."""

    def __init__(self, user_id: str, name: str, broken: bool = False) -> None:
        self.user_id, self.name, self.broken = user_id, name, broken

    def get_id(self) -> str:
        if self.broken:
            raise RuntimeError("no id")
        return self.user_id

    def get_name(self) -> str:
        return self.name


def test_the_profile_token_binds_id_and_name_apart_and_fails_closed(db_url, conn) -> None:
    """The identity was quoted after joining id and name with "/": id 1 named a/b and id 1/a named b were one
    user to the token, and a user whose id raised was bound by the name alone."""
    from include.radar.web import csrf

    key, first, second = "k" * 64, _IdUser("1", "a/b"), _IdUser("1/a", "b")
    assert csrf.user_identity(first) != csrf.user_identity(second)
    assert not csrf.form_token_valid(csrf.form_token(key, first, NOW), key, second, NOW)
    assert csrf.form_token_valid(csrf.form_token(key, first, NOW), key, _IdUser("1", "a/b"), NOW)
    broken = _IdUser("1", "a/b", broken=True)
    with pytest.raises(csrf.UnknownUser):
        csrf.user_identity(broken)
    assert not csrf.form_token_valid(csrf.form_token(key, first, NOW), key, broken, NOW)
    client = _editor_client(db_url, broken)
    page = client.get("/profile")
    assert page.status_code == 200 and _csrf(page.text) is None and "读取你的 Airflow 账号" in page.text
    assert client.post("/profile", data=_hostile_form(None), follow_redirects=False).status_code == 403
    assert store.focus.get_profile(conn) is None


# ------------------------------------------------------------------------------- 4. a line shows what it says

# each field a page shows of an article or the LLM's answer, with a control where it reverses the rest of its
# line, and the text it reads as
PAGE_FIELDS = {
    "title": ("中微公司{}订单大增 37%", "中微公司订单大增 37%"),
    "account": ("研究所{}（深度）", "研究所（深度）"),
    "summary": ("营收{}同比增长 37%，08:30 公告。", "营收同比增长 37%，08:30 公告。"),
    "target": ("{}中微公司 688012", "中微公司 688012"),
    "code": ("贵州茅台（600519{}.SH）", "贵州茅台（600519.SH）"),
    "quote": ("营收{}同比增长 37%，08:30 公告", "营收同比增长 37%，08:30 公告"),
    "reason": ("订单{}在 08:30 公告，增长 37%", "订单在 08:30 公告，增长 37%"),
    "digest": ("- 中微公司{}订单 08:30 公告", "中微公司订单 08:30 公告"),
}


@pytest.mark.parametrize("control", REORDERING, ids=REORDERING_IDS)
def test_a_control_in_any_field_leaves_the_daily_and_analysis_pages_reading_in_order(
        seed: Seeder, reader: TestClient, control: str) -> None:
    """An unclosed U+202E in a target made 「中微公司 688012」 read 「210886 司公微中」 to the end of its line on
    the pages too (they escape markup, not direction): the daily page's top pick, reason, digest and list, the
    analysis page's title, account, summary, targets and quotes read in order."""
    value = {f: raw.format(control) for f, (raw, _) in PAGE_FIELDS.items()}
    morning = seed.slot(DAY, "07:00")
    analysis_id = seed.article(morning, value["title"], 82, summary=value["summary"], account=value["account"],
                               opportunities=[{**OPPORTUNITY, "targets": [value["target"], value["code"]],
                                               "evidence": [value["quote"]], "catalyst": value["reason"]}])
    seed.report(DAY, digest_md=value["digest"], digest_json={"top_opportunities": [
        {"analysis_id": analysis_id, "title": value["title"], "reason": value["reason"]}], "watchlist": []})
    commit(seed)
    for path, fields in ((f"/daily/{DAY}", ("title", "account", "summary", "reason", "digest")),
                         (f"/analysis/{analysis_id}", ("title", "account", "summary", "target", "code", "quote",
                                                       "reason"))):
        page = reader.get(path)
        assert page.status_code == 200 and reads_in_order(page.text), path
        for field in fields:
            assert PAGE_FIELDS[field][1] in page.text, (path, field)
