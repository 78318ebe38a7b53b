"""Every route of the report app, driven with generated input, never answers a 5xx (the one
designed exception: 503 when the radar database is down).

The routes are read from the app's own route table, so a page added later is driven too. Each example picks a
route and a method (GET, HEAD, POST, sometimes another), fills the route's path parameters, and sends a query
string (NUL, huge values, non-UTF-8 percent-escapes, repeated keys, valid and forged link signatures), cookies
(``radar_seen``, ``radar_read``, ``radar_csrf``, Airflow's ``_token``, garbage), ``Origin`` /
``Sec-Fetch-Site`` headers and a body (the profile's and the votes' fields with valid and forged tokens, or
raw bytes), as one of several readers: nobody, a pushed link's holder, a reader who may only read, an editor,
a user refused the DAG, an app without a link secret, and an app whose database is down. It runs on the real
test database, seeded with a day that has analyses, a profile, feedback and an excluded article.

Rooms: every route of web/app.py (web/routes/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import psycopg
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from include.radar import store
from include.radar.core import signing
from include.radar.core.clock import FixedClock
from include.radar.web.app import create_app
from include.radar.web.auth import READ_COOKIE, may_edit_radar, may_read_radar, read_session_value
from tests.conftest import TABLES
from tests.pages import DAY, NOW, OPPORTUNITY, SECRET, FakeUser, Seeder, airflow_get_user, make_settings

DEAD_DB = "postgresql://radar:secret@127.0.0.1:1/radar"


def _route_table() -> list[tuple[str, tuple[str, ...]]]:
    """Every route of the app with its methods, read from a fresh app (no database, no settings touched)."""
    table = []
    for route in create_app().routes:
        methods = getattr(route, "methods", None)
        if methods:
            table.append((route.path, tuple(sorted(methods))))
    return table


ROUTES = _route_table()
PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")


@dataclass
class World:
    clients: dict[str, TestClient]
    analysis_ids: list[int]
    link_query: dict[str, str]  # a valid signature per path
    vote_fields: dict[str, str]  # a valid 👍 form of the first analysis
    csrf: str  # the editor's valid profile token
    session: str  # a valid read-session cookie value


def _seed(url: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
    from include.radar.core import db

    with db.connect(url) as conn:
        seed = Seeder(conn)
        morning = seed.slot(DAY, "07:00", new=3)
        ids = [seed.article(morning, "储能集采放量", 81, account="储能前沿", opportunities=[OPPORTUNITY]),
               seed.article(morning, "券商成交放大", 45, account="券商研究")]
        item = store.articles.insert_content_item(conn, {
            "external_id": "x-live", "account_id": seed.account("直播号"), "mp_id": "mp-live", "title": "今晚直播",
            "url": "https://mp.weixin.qq.com/s/live", "published_at": morning["scheduled_at"], "raw_html_size": 10,
            "clean_text": "直播预告", "content_hash": "h-live", "body_status": 1, "last_error": None,
            "slot_run_id": morning["id"]})
        store.focus.exclude_items(conn, morning["id"], {item: "命中排除词 !直播"})
        seed.close(morning)
        seed.report(DAY)
        store.focus.save_profile(conn, {"companies": ["宁德时代"], "tickers": ["300750"], "sectors": ["储能"],
                                  "interests": ["储能"], "rules": ["!直播"]}, "analyst")
        store.focus.set_feedback(conn, ids[1], "down", "test")
        conn.commit()
    return ids


def _app(url: str, *, user: Any = None, read: bool = True, edit: bool = False, **overrides: Any) -> TestClient:
    cfg = make_settings(**overrides)
    app = create_app(lambda: cfg, url, clock=FixedClock(NOW))
    if user is not None:
        app.dependency_overrides[airflow_get_user()] = lambda: user
        app.dependency_overrides[may_read_radar] = lambda _user: read
        app.dependency_overrides[may_edit_radar] = lambda _user: edit
    return TestClient(app)


@pytest.fixture(scope="module")
def world(database_url: str) -> World:
    ids = _seed(database_url)
    clients = {
        "nobody": _app(database_url),
        "reader": _app(database_url, user=FakeUser("viewer")),
        "editor": _app(database_url, user=FakeUser(), edit=True),
        "refused": _app(database_url, user=FakeUser("visitor"), read=False),
        "no secret": _app(database_url, user=FakeUser(), edit=True, link_secret=None),
        "dead database": _app(DEAD_DB, user=FakeUser(), edit=True),
    }
    link_query = {}
    for path in ("/", f"/daily/{DAY.isoformat()}", *(f"/analysis/{i}" for i in ids), "/profile", "/trends",
                 "/search", "/weekly/2026-01-05"):
        link_query[path] = urlencode(signing.sign(path, SECRET, NOW, 7))
    page = clients["nobody"].get(f"/analysis/{ids[0]}?{link_query[f'/analysis/{ids[0]}']}").text
    form = re.search(r'<form method="post" action="[^"]+" class="fb-form">(.*?)</form>', page, re.S)
    assert form is not None
    vote_fields = {k: v.replace("&amp;", "&") for k, v in re.findall(r'name="(\w+)" value="([^"]*)"', form.group(1))}
    token = re.search(r'name="csrf" value="([^"]+)"', clients["editor"].get("/profile").text)
    assert token is not None
    session, _ = read_session_value(SECRET, int(NOW.timestamp()) + 86400, NOW.timestamp(), 30, 1, "ab" * 32)
    return World(clients, ids, link_query, vote_fields, token.group(1), session)


# ------------------------------------------------------------------------------------------- strategies

_INTERESTING = [
    "", "0", "1", "2", "-1", "9" * 40, "%00", "a%00b", "%ff%fe", "%C3%A9", "%2e%2e", "..", "%2F%2Fevil.example",
    "0001-01-01", "9999-12-31", "2026-02-30", DAY.isoformat(), "2026-01-05", "1999-12-31", "储能", "%E5%82%A8%E8%83%BD",
    "999999999999", "1e9", "%D9%A3", "%C2%B2", "+", "%20", "x" * 5000,
]
# raw percent-escapes (valid UTF-8 or not) and unreserved characters, sent as they are
_RAW = st.from_regex(r"\A(%[0-9A-Fa-f]{2}|[A-Za-z0-9._~-]){0,40}\Z")
_TEXT = st.text(max_size=40) | st.text(min_size=1000, max_size=3000)
# (a strategy listed twice in one_of is drawn twice as often: the values that reach code paths come first)
_INTERESTING_PIECE = st.sampled_from(_INTERESTING)
_PIECE = st.one_of(_INTERESTING_PIECE, _INTERESTING_PIECE, _RAW, _TEXT.map(lambda t: quote(t, safe="")))
_KNOWN_KEYS = st.sampled_from(["exp", "sig", "q", "from", "to", "account", "band", "watch", "page", "saved",
                               "recheck", "next", "csrf", "type", "h"])
_KEYS = st.one_of(_KNOWN_KEYS, _KNOWN_KEYS, _RAW)
# values the pages accept, so that one odd value among well-formed ones gets past the checks before it
_WELL_FORMED = {"q": ["储能", "%E5%82%A8%E8%83%BD", "300750"], "from": [DAY.isoformat(), ""],
                "to": [DAY.isoformat(), ""], "account": ["储能前沿", ""], "band": ["", "80", "0"], "watch": ["1", ""],
                "page": ["1", "2"], "saved": ["1"], "recheck": ["3"], "type": ["stock", "sector", ""],
                "h": ["5", "20"]}
_COOKIE_NAMES = st.sampled_from(["radar_seen", READ_COOKIE, "radar_csrf", "_token", "x", ""])
_COOKIE_VALUES = (st.sampled_from(["999999999999", "0", "-1", "1767225600", "٣", "garbage", "1.2", "a" * 4000,
                                   str(int(NOW.timestamp()))])
                  | st.from_regex(r"\A[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]{0,80}\Z")
                  | st.integers(min_value=-(10**15), max_value=10**15).map(str))
_HEADERS = st.fixed_dictionaries({}, optional={
    "origin": st.sampled_from(["http://testserver", "https://radar.example.com", "https://evil.example", "null", "",
                               "http://testserver:80", "javascript:alert(1)", "http://[::1]:x"]),
    "sec-fetch-site": st.sampled_from(["same-origin", "none", "same-site", "cross-site", "", "SAME-ORIGIN", "?"]),
    "x-forwarded-host": st.sampled_from(["radar.example.com", "evil.example", "", ",,"]),
})


@st.composite
def requests(draw: Any, world_ref: list) -> dict[str, Any]:
    world: World = world_ref[0]
    path, methods = draw(st.sampled_from(ROUTES))
    own = st.sampled_from(methods)  # mostly the route's own methods; then the others, to be refused
    method = draw(st.one_of(own, own, own, st.sampled_from(["GET", "HEAD", "POST", "PUT", "OPTIONS", "DELETE"])))
    valid = {"day": DAY.isoformat(), "analysis_id": str(world.analysis_ids[0]), "monday": "2026-01-05",
             "name": "储能"}
    filled = PARAM.sub(lambda m: draw(st.sampled_from([valid.get(m.group(1), "x")]) | _PIECE), path)

    pairs: list[str] = []
    if draw(st.booleans()):
        pairs.append(world.link_query.get(filled, world.link_query["/"]))  # a real signature (maybe another page's)
    for key in draw(st.lists(_KNOWN_KEYS, unique=True, max_size=8)):  # what the pages read, often well-formed
        value = draw(st.sampled_from(_WELL_FORMED.get(key, [""])) | _PIECE)
        pairs.append(f"{key}={value}")
    for key, value in draw(st.lists(st.tuples(_KEYS, _PIECE), max_size=3)):  # and anything else
        pairs.append(f"{key}={value}")
    if pairs and draw(st.booleans()):
        pairs.append(draw(st.sampled_from(pairs)))  # a repeated key
    url = filled + ("?" + "&".join(pairs) if pairs else "")

    cookies = draw(st.lists(st.tuples(_COOKIE_NAMES, _COOKIE_VALUES), max_size=4))
    if draw(st.booleans()):
        cookies.append((READ_COOKIE, world.session))
    if draw(st.booleans()):
        cookies.append(("radar_csrf", world.csrf))
    headers: list[tuple[bytes, bytes]] = [(b"cookie", "; ".join(f"{n}={v}" for n, v in cookies).encode())]
    headers += [(k.encode(), v.encode()) for k, v in draw(_HEADERS).items()]

    body = b""
    if method in ("POST", "PUT"):
        kind = draw(st.sampled_from(["vote", "profile", "fields", "bytes"]))
        if kind == "vote":
            fields = dict(world.vote_fields)
            for key, value in draw(st.dictionaries(st.sampled_from(["verdict", "exp", "tok", "back", "x"]),
                                                   st.sampled_from(_INTERESTING) | st.text(max_size=30), max_size=3)).items():
                fields[key] = value
            body = urlencode(fields).encode()
        elif kind == "profile":
            fields = {"csrf": draw(st.sampled_from([world.csrf, "", "0.0", world.csrf[:-1] + "0"]))}
            for key in ("companies", "tickers", "sectors", "interests", "rules"):
                fields[key] = draw(st.sampled_from(["", "宁德时代", "/(/", "!/(.+)+Z/", "a\x00b", "x" * 3000])
                                   | st.text(max_size=60))
            body = urlencode(fields).encode()
        elif kind == "fields":
            body = "&".join(f"{k}={v}" for k, v in draw(st.lists(st.tuples(_KEYS, _PIECE), max_size=8))).encode()
        else:
            body = draw(st.binary(max_size=300) | st.sampled_from([b"\xff\xfe" * 100, b"a=" + b"x" * 70_000]))
        headers.append((b"content-type", b"application/x-www-form-urlencoded"))
    # mostly readers who get past the access rule: that is where input reaches the pages
    who = draw(st.sampled_from(["reader", "editor", "no secret"]) | st.sampled_from(sorted(world.clients)))
    return {"who": who, "method": method, "url": url, "headers": headers, "content": body}


_WORLD: list = []


@pytest.fixture(scope="module", autouse=True)
def _share_world(world: World) -> None:
    _WORLD[:] = [world]


def _check(world: World, request: dict[str, Any]) -> int:
    client = world.clients[request["who"]]
    response = client.request(request["method"], request["url"], headers=request["headers"],
                              content=request["content"], follow_redirects=False)
    status = response.status_code
    dead = request["who"] == "dead database"
    assert status < 500 or (dead and status == 503), (request["who"], request["method"], request["url"][:300],
                                                      status, response.text[-300:])
    if request["method"] == "HEAD":
        assert response.content == b"", request["url"][:300]
    assert "Traceback" not in response.text and "secret@" not in response.text
    return status


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=requests(_WORLD))
@example(request={"who": "reader", "method": "GET", "url": "/search?q=储能&account=a%00b", "headers": [],
                  "content": b""})
@example(request={"who": "reader", "method": "GET", "url": "/record?account=%00", "headers": [], "content": b""})
@example(request={"who": "reader", "method": "GET", "url": "/record?type=a%00b&h=20", "headers": [],
                  "content": b""})
@example(request={"who": "reader", "method": "GET", "url": "/search?q=储能&to=9999-12-31", "headers": [],
                  "content": b""})
@example(request={"who": "reader", "method": "GET", "url": "/", "headers": [(b"cookie", b"radar_seen=999999999999")],
                  "content": b""})
def test_no_generated_request_makes_a_5xx(world: World, request: dict[str, Any]) -> None:
    status = _check(world, request)
    event(f"{request['method']} {request['url'].split('?')[0].split('/')[1] or '/'}: {status}")


@pytest.mark.parametrize(("path", "methods"), ROUTES, ids=[p for p, _ in ROUTES])
def test_every_route_and_method_answers_every_reader_without_a_5xx(world: World, path: str, methods: tuple) -> None:
    """The plain sweep: each route with valid parameters, every method, every reader, a link and no link."""
    valid = {"day": DAY.isoformat(), "analysis_id": str(world.analysis_ids[0]), "monday": "2026-01-05",
             "name": "储能"}
    filled = PARAM.sub(lambda m: quote(valid.get(m.group(1), "x")), path)
    for who in world.clients:
        for method in ("GET", "HEAD", "POST", "PUT"):
            for query in ("", world.link_query.get(filled, "")):
                url = filled + (f"?{query}" if query else "")
                _check(world, {"who": who, "method": method, "url": url, "headers": [], "content": b""})


def test_the_route_table_is_what_the_fuzzer_drives() -> None:
    paths = {p for p, _ in ROUTES}
    assert {"/", "/daily/{day}", "/analysis/{analysis_id}", "/analysis/{analysis_id}/feedback", "/profile",
            "/search", "/entity/{name:path}", "/trends", "/weekly", "/weekly/{monday}"} <= paths
    assert all("HEAD" in m for p, m in ROUTES if "GET" in m), "every GET route answers HEAD"
