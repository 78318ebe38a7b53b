"""A flood through one link: the pages degrade, Airflow does not.

Every page request held one of the api-server's 40 threads (shared with Airflow's API and the Execution API)
and one of 40 pooled connections: 100 readers of one pushed link moved Airflow's health endpoint from 12 ms to
953 ms (p50). Now a link or a read session is served at most RATE a second (429 beyond), the pages at most
AT_ONCE at a time with a short queue (503 beyond), both answered without a thread, a connection or a template.
The figures under a real flood: ``make bench-flood`` (docs/benchmarks.md).

Rooms: web/admission.py, web/app.py, web/resources.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi.testclient import TestClient

from include.radar.core.clock import FixedClock
from include.radar.web import admission, auth, resources
from include.radar.web.admission import Admission, AdmissionMiddleware
from include.radar.web.app import create_app
from tests.pages import DAY, NOW, FakeUser, Seeder, allow_reading, commit, make_settings, signed


def _app(db_url: str, bounds: Admission, user: Any = None):
    cfg = make_settings()
    app = create_app(lambda: cfg, db_url, clock=FixedClock(NOW), admission=bounds)
    if user is not None:
        from tests.pages import airflow_get_user

        app.dependency_overrides[airflow_get_user()] = lambda: user
        allow_reading(app)
    return app


def _count_connections(app) -> list[int]:
    resources, opened = app.state.radar, [0]
    connect = resources.connect

    def counted():
        opened[0] += 1
        return connect()

    resources.connect = counted
    return opened


@pytest.fixture
def day(conn) -> None:
    seed = Seeder(conn)
    run = seed.slot(DAY, "07:00", new=1)
    seed.article(run, "储能集采放量", 81)
    seed.close(run)
    commit(seed)


def test_one_link_is_served_its_rate_and_the_excess_is_429_at_once_without_a_connection(db_url, day) -> None:
    clock = [100.0]
    app = _app(db_url, Admission(clock=lambda: clock[0]))
    opened = _count_connections(app)
    client = TestClient(app)
    link = signed(f"/daily/{DAY.isoformat()}")
    assert [client.get(link).status_code for _ in range(admission.BURST)] == [200] * 20
    assert opened[0] == 20
    refused = client.get(link)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "2"
    assert "请求过于频繁" in refused.text and refused.headers["cache-control"] == "no-store"
    assert refused.headers["x-frame-options"] == "SAMEORIGIN" and "default-src 'none'" in refused.headers[
        "content-security-policy"]
    assert opened[0] == 20  # turned away before the app: no connection, no thread, no template
    # another link is another reader; the read session the link opened is the same one: its bucket is empty too
    other = TestClient(app)
    assert other.get(signed(f"/daily/{(DAY.replace(day=7)).isoformat()}")).status_code == 200
    assert client.get("/").status_code == 429
    clock[0] += 1.0  # a second later: RATE more, for the link and its session together
    assert [client.get(link if n % 2 else "/").status_code for n in range(6)] == [200] * 5 + [429]
    session = [other.get("/").status_code for _ in range(admission.BURST + 1)]  # the other link's session
    assert session == [200] * admission.BURST + [429]  # its own bucket (full again a second later)


def test_an_airflow_login_is_not_counted_per_link(db_url, day) -> None:
    client = TestClient(_app(db_url, Admission(clock=lambda: 0.0), user=FakeUser()))
    assert {client.get("/").status_code for _ in range(admission.BURST * 2)} == {200}


def test_an_address_that_keeps_asking_has_its_refusals_held_no_more_than_held_at_once() -> None:
    """A refusal costs ~1 ms of Airflow's middleware and access log: readers asking again at once would spend
    the api-server's event loop on them. FAST_RATE a second are answered at once, the rest HOLD_SECONDS late."""
    clock = [0.0]
    bounds = Admission(clock=lambda: clock[0])
    assert [bounds.hold("10.0.0.1") for _ in range(admission.FAST_BURST)] == [0.0] * 20
    assert bounds.hold("10.0.0.1") == 2.0 and bounds.held == 1
    assert bounds.hold("10.0.0.2") == 0.0  # another address
    clock[0] += 1.0  # a second later: FAST_RATE more at once
    assert [bounds.hold("10.0.0.1") for _ in range(11)] == [0.0] * 10 + [2.0]
    bounds.release()
    bounds.release()
    bounds.held = admission.HELD  # as many held as it takes: the next is answered at once
    assert bounds.hold("10.0.0.1") == 0.0 and bounds.held == admission.HELD


def test_a_held_refusal_is_answered_after_the_hold_and_closes_nothing_early() -> None:
    async def held() -> None:
        bounds = Admission(burst=1, hold_seconds=0.2)
        app = AdmissionMiddleware(_Held(), bounds, {})
        for _ in range(admission.FAST_BURST):
            bounds.hold("127.0.0.1")  # this address has had its refusals at once
        bounds.allow("link:x")
        scope = {"type": "http", "method": "GET", "path": "/", "root_path": "", "query_string": b"sig=x",
                 "headers": [], "client": ("127.0.0.1", 4000)}
        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)

        started = asyncio.get_running_loop().time()
        await app(scope, None, send)
        assert asyncio.get_running_loop().time() - started >= 0.2
        assert sent[0]["status"] == 429 and bounds.held == 0
        assert (b"connection", b"close") not in sent[0]["headers"]

    asyncio.run(held())


def test_the_buckets_are_bounded_the_oldest_forgotten_first() -> None:
    bounds = Admission(keys=3, burst=1, clock=lambda: 0.0)
    for key in ("a", "b", "c", "d"):
        assert bounds.allow(key)
    assert not bounds.allow("d") and list(bounds._buckets) == ["b", "c", "d"]
    assert bounds.allow("a")  # forgotten: a fresh bucket


def test_the_key_is_the_link_s_signature_or_the_session_cookie_and_nothing_else() -> None:
    def key(query: bytes = b"", cookie: bytes | None = None) -> str | None:
        headers = [(b"cookie", cookie)] if cookie is not None else []
        return admission.client_key({"query_string": query, "headers": headers})

    assert key(b"exp=1&sig=abc") == "link:abc" and key(b"exp=1&%73ig=abc") == "link:abc"  # as the app decodes it
    assert key(b"sig=" + b"f" * 500) == "link:" + "f" * 16
    # a read session counts against the link that opened it: the origin its cookie carries
    assert key(cookie=b"radar_seen=1; radar_read=123.0123456789abcdef.sig") == "link:0123456789abcdef"
    assert admission.KEY_CHARS == auth.ORIGIN_CHARS
    assert key(cookie=b"_token=jwt") is None and key(b"q=sig") is None


def test_the_session_cookie_is_read_as_the_app_reads_it_whatever_its_spelling() -> None:
    """The app takes the cookie as Starlette parses every Cookie header (spaces around ``=``, quotes, the last
    of a repeated name wins): the bound must count the session the app serves, not a decoy before it."""
    from starlette.requests import Request

    real, decoy = "123.0123456789abcdef.sig", "9.ffffffffffffffff.sig"
    spellings = [[b"radar_read =" + real.encode()], [b" radar_read = " + real.encode() + b" ; x=1"],
                 [b'radar_read="' + real.encode() + b'"'], [b"radar_read=" + decoy.encode() + b"; radar_read=" + real.encode()],
                 [b"radar_read=" + decoy.encode(), b"radar_read=" + real.encode()], [b"radar_read" + real.encode()]]
    for cookies in spellings:
        scope = {"type": "http", "query_string": b"", "headers": [(b"cookie", c) for c in cookies]}
        served = Request(scope).cookies.get(auth.READ_COOKIE)
        origin = served.split(".")[1] if served else None
        assert admission.client_key(scope) == (f"link:{origin}" if origin else None), cookies
    assert admission.client_key({"query_string": b"", "headers": [(b"cookie", b"radar_read =" + real.encode())]}) == (
        "link:0123456789abcdef")


def test_a_session_cookie_spelt_another_way_is_held_by_its_link_s_bound(db_url, day) -> None:
    app = _app(db_url, Admission(clock=lambda: 100.0))
    client = TestClient(app)
    assert client.get(signed(f"/daily/{DAY.isoformat()}")).status_code == 200
    session = client.cookies[auth.READ_COOKIE]
    phone = TestClient(app)  # sends its own Cookie header, as a script would
    served = [phone.get("/", headers={"cookie": f"radar_read ={session}"}).status_code for _ in range(40)]
    assert served.count(200) == admission.BURST - 1 and set(served) == {200, 429}  # the link took one
    decoy = [phone.get("/", headers={"cookie": f"radar_read=1.{'e' * 16}.x; radar_read={session}"}).status_code]
    assert decoy == [429]  # a decoy before it mints no fresh allowance


@pytest.fixture
def five(conn) -> list[int]:
    seed = Seeder(conn)
    run = seed.slot(DAY, "07:00", new=5)
    ids = [seed.article(run, f"储能集采放量 {n}", 81 - n) for n in range(5)]
    seed.close(run)
    commit(seed)
    return ids


def test_the_analysis_links_a_signed_daily_page_signs_count_as_its_own_link(db_url, five) -> None:
    """Each analysis link the daily page signs had a bucket of its own: five analyses, five times the burst
    (100 pages) from one pushed link. They carry the daily link's origin, under their signature."""
    import re
    from urllib.parse import parse_qs, urlsplit

    app = _app(db_url, Admission(clock=lambda: 100.0))
    page = TestClient(app).get(signed(f"/daily/{DAY.isoformat()}"))
    links = dict.fromkeys(h.replace("&amp;", "&") for h in re.findall(r'href="(/analysis/\d+\?[^"]*)"', page.text))
    assert len(links) == 5
    served = [TestClient(app).get(link).status_code for link in links for _ in range(admission.BURST)]
    assert served.count(200) == admission.BURST - 1  # the daily page took one
    link = next(iter(links))
    origin = parse_qs(urlsplit(link).query)["via"][0]
    assert origin == parse_qs(urlsplit(signed(f"/daily/{DAY.isoformat()}")).query)["sig"][0][:admission.KEY_CHARS]
    # the origin is signed: another one, or none, is a link that does not verify; the session it opens is its origin's
    fresh = TestClient(_app(db_url, Admission(clock=lambda: 100.0)))
    assert fresh.get(link).status_code == 200 and fresh.cookies[auth.READ_COOKIE].split(".")[1] == origin
    assert fresh.get(link.replace(f"via={origin}", f"via={'0' * 16}")).status_code == 403
    assert fresh.get(link.replace(f"via={origin}&", "")).status_code == 403


# ------------------------------------------------------------------------------------- the shared bound


class _Held:
    """An ASGI app whose requests stay in it until released (a page waiting for its database)."""

    def __init__(self) -> None:
        self.inside = 0
        self.release = asyncio.Event()

    async def __call__(self, scope, receive, send) -> None:
        self.inside += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def _get(app, path: str = "/daily/2026-01-08") -> int:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "root_path": "", "query_string": b"", "headers": []}
    await app(scope, receive, send)
    return sent[0]["status"]


def test_at_most_at_once_pages_in_the_app_a_short_queue_and_503_at_once_beyond() -> None:
    async def flood() -> None:
        held = _Held()
        bounds = Admission(at_once=2, queued=2, wait_seconds=0.3)
        app = AdmissionMiddleware(held, bounds, {})
        first = [asyncio.create_task(_get(app)) for _ in range(4)]  # two in, two waiting
        await asyncio.sleep(0.05)
        assert held.inside == 2 and bounds.active == 2 and len(bounds._waiters) == 2
        assert await asyncio.wait_for(_get(app), 0.1) == 503  # the queue is full: at once
        static = asyncio.create_task(_get(app, "/static/frame.js"))
        await asyncio.sleep(0.05)
        assert held.inside == 3 and bounds.active == 2  # the static files are never held back
        held.release.set()  # the first two answer, the two waiting get their places
        assert await asyncio.gather(*first, static) == [200] * 5
        assert bounds.active == 0 and not bounds._waiters

        held = _Held()
        app = AdmissionMiddleware(held, bounds, {})
        busy = [asyncio.create_task(_get(app)) for _ in range(3)]  # two in, one waits out its 0.3 s
        assert await busy[2] == 503 and held.inside == 2
        held.release.set()
        assert await asyncio.gather(*busy[:2]) == [200, 200] and bounds.active == 0

    asyncio.run(flood())


def test_a_reader_gone_while_waiting_gives_no_place_away_twice() -> None:
    async def gone() -> None:
        held = _Held()
        bounds = Admission(at_once=1, queued=2, wait_seconds=5)
        app = AdmissionMiddleware(held, bounds, {})
        inside = asyncio.create_task(_get(app))
        waiting = asyncio.create_task(_get(app))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not bounds._waiters and bounds.active == 1
        held.release.set()
        assert await inside == 200 and bounds.active == 0

    asyncio.run(gone())


def test_the_pages_pool_holds_a_connection_per_place() -> None:
    assert resources.PAGES_POOL_SIZE == admission.AT_ONCE == 4
