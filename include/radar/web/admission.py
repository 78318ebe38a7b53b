"""How many page requests the api-server serves at once, and how often one link may ask: what keeps a flood
through a pushed link from taking Airflow's own API down with the pages.

Every page request holds one of the api-server's threads (anyio's 40, shared with Airflow's REST API and the
Execution API that tasks report to) and one of the pages' database connections. So each api-server process
serves at most AT_ONCE page requests at a time; up to QUEUED more wait for one at most WAIT_SECONDS, the rest
are refused 503. A pushed link (its signature) or a read session (its cookie) is served at most RATE requests a
second (BURST in a row), the rest refused 429. A refusal costs no thread, no database and no template (a fixed
page with ``Retry-After``); one address's refusals beyond FAST_RATE a second are answered HOLD_SECONDS late.
An Airflow login is held by the shared bound only. Figures: docs/benchmarks.md; rules: docs/security.md.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from urllib.parse import parse_qsl

from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

from include.radar.core.clock import SYSTEM
from include.radar.web.server import redact_scope_query

AT_ONCE = 4  # page requests served at once in one api-server process (its pool has as many connections)
QUEUED = 8  # waiting for one of them, each at most WAIT_SECONDS
WAIT_SECONDS = 1.0
RATE = 5.0  # requests a second one link or one read session is served, on average
BURST = 20  # in a row (a reader opening a page and walking a few more)
# A refusal costs the api-server ~1 ms of Airflow's own middleware and access log whatever the pages do: clients
# that ask again at once, ignoring Retry-After, would spend its event loop on refusals. So one address gets
# FAST_RATE refusals a second at once (FAST_BURST in a row); beyond, its refusals are answered HOLD_SECONDS late
# (no thread: a timer), at most HELD at a time; past that, at once and with the connection closed.
FAST_RATE = 10.0
FAST_BURST = 20
HOLD_SECONDS = 2.0
HELD = 1_000
KEYS = 10_000  # links, sessions and refused clients remembered (least recently seen forgotten first)
# a link is counted by the first 16 of its signature's 64 hex digits, which the read sessions it opens carry
# (auth.ORIGIN_CHARS; not imported, as READ_COOKIE): a link and its sessions are one client
KEY_CHARS = 16
STATIC = "/static/"  # the two static files: no database, no thread (async), never held back
READ_COOKIE = "radar_read"  # auth.READ_COOKIE (not imported: auth loads the app's settings)
VIA = "via"  # auth.VIA: a daily page's links name the daily link they came from, one client with it

_BUSY = ("页面繁忙", "机会雷达的页面此刻访问的人太多，请稍后刷新。")
_TOO_FAST = ("请求过于频繁", "通过这个链接访问得太频繁了，请稍后再打开。")


def _page(title: str, message: str) -> bytes:
    return (f'<!doctype html><html lang="zh-CN"><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width, initial-scale=1"><title>{title} · 机会雷达</title>'
            f'<body style="font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem">'
            f'<h1 style="font-size:1.3rem">{title}</h1><p>{message}</p></body></html>').encode()


class Admission:
    """The bounds of one app (AT_ONCE, QUEUED, WAIT_SECONDS, RATE, BURST, KEYS), and their state. ``clock``:
    what the buckets count seconds on (a test's own)."""

    def __init__(self, *, at_once: int = AT_ONCE, queued: int = QUEUED, wait_seconds: float = WAIT_SECONDS,
                 rate: float = RATE, burst: int = BURST, keys: int = KEYS, hold_seconds: float = HOLD_SECONDS,
                 clock: Callable[[], float] = SYSTEM.monotonic) -> None:
        self.at_once, self.queued, self.wait_seconds = at_once, queued, wait_seconds
        self.rate, self.burst, self.keys, self.clock = rate, burst, keys, clock
        self.hold_seconds = hold_seconds
        self.active = 0
        self.held = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key → (tokens, when)
        self._refused: OrderedDict[str, tuple[float, float]] = OrderedDict()  # address → its refusals' bucket
        self._lock = threading.Lock()  # one event loop in an api-server; tests may run apps on several

    def allow(self, key: str) -> bool:
        """Whether ``key`` (a link or a session) may be served now: a token bucket of BURST, RATE a second."""
        return self._take(self._buckets, key, self.rate, self.burst)

    def hold(self, address: str) -> float:
        """How long to hold a refusal of a client at ``address`` before answering it: 0 within FAST_RATE a
        second (FAST_BURST in a row), else HOLD_SECONDS; 0 once HELD are held (the connection then closes). A
        held caller must call :meth:`release`."""
        if self._take(self._refused, address, FAST_RATE, FAST_BURST):
            return 0.0
        with self._lock:
            if self.held >= HELD:
                return 0.0
            self.held += 1
        return self.hold_seconds

    def release(self) -> None:
        with self._lock:
            self.held -= 1

    def _take(self, buckets: OrderedDict[str, tuple[float, float]], key: str, rate: float, burst: int) -> bool:
        now = self.clock()
        with self._lock:
            tokens, when = buckets.pop(key, (float(burst), now))
            tokens = min(float(burst), tokens + (now - when) * rate)
            allowed = tokens >= 1.0
            buckets[key] = (tokens - 1.0 if allowed else tokens, now)
            while len(buckets) > self.keys:
                buckets.popitem(last=False)
        return allowed

    async def enter(self) -> bool:
        """Take one of AT_ONCE places, waiting at most WAIT_SECONDS behind at most QUEUED others; False when
        there is none (the caller answers 503). A True caller must call :meth:`leave`."""
        with self._lock:
            if self.active < self.at_once and not self._waiters:
                self.active += 1
                return True
            if len(self._waiters) >= self.queued:
                return False
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.wait_seconds)
        except TimeoutError:
            return not self._withdraw(waiter)  # handed a place as the wait ended: it is this request's
        except asyncio.CancelledError:  # the reader went away while waiting
            if not self._withdraw(waiter):
                self.leave()
            raise
        return True

    def _withdraw(self, waiter: asyncio.Future[None]) -> bool:
        """Take a waiter out of the queue; False when leave() already handed it a place (it left the queue)."""
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                return True
            return False

    def leave(self) -> None:
        """Give a place back: to the first waiter, else to no one."""
        with self._lock:
            if not self._waiters:
                self.active -= 1
                return
            waiter = self._waiters.popleft()
        try:
            same_loop = asyncio.get_running_loop() is waiter.get_loop()
        except RuntimeError:
            same_loop = False
        if same_loop:
            _hand(waiter)
        else:
            waiter.get_loop().call_soon_threadsafe(_hand, waiter)


def _hand(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def client_key(scope: Scope) -> str | None:
    """What the per-link bound counts a request against: the link's signature, or the daily link a link of its
    page names (``via``, under that link's signature); else the link that opened the read session (its
    cookie's origin); None for anyone else (an Airflow login, or no one: a 401 page).

    The cookie is read as the app reads it (Starlette's parser over every Cookie header, the last of a name
    winning): ``radar_read =…``, quotes or a decoy before it would be a session the app serves and this
    bound does not count, or counts against a fresh allowance."""
    query = scope.get("query_string") or b""
    if b"sig" in query or b"%" in query:
        found = {name: value for name, value in reversed(parse_qsl(query.decode("latin-1"), keep_blank_values=True))}
        link = found.get(VIA, found.get("sig"))
        if link is not None:
            return "link:" + link[:KEY_CHARS]
    headers = [value for name, value in scope.get("headers") or () if name == b"cookie"]
    if not any(READ_COOKIE.encode() in value for value in headers):
        return None
    cookies: dict[str, str] = {}
    for value in headers:
        cookies.update(cookie_parser(value.decode("latin-1")))
    if READ_COOKIE not in cookies:
        return None
    _, _, origin = cookies[READ_COOKIE].partition(".")
    return "link:" + origin.partition(".")[0][:KEY_CHARS]


class AdmissionMiddleware:
    """The app's outermost bound (pure ASGI): 429 for a link or a session over its rate, 503 when every place
    is taken and the queue is full or its wait ran out; what it refuses never reaches the app. The signature in
    the query is redacted before the answer, as the app redacts it (web/server.py), for the access logs."""

    def __init__(self, app: ASGIApp, admission: Admission, headers: Mapping[str, str]) -> None:
        self.app = app
        self.admission = admission
        self.headers = [(name.lower().encode(), value.encode()) for name, value in headers.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _app_path(scope).startswith(STATIC):
            await self.app(scope, receive, send)
            return
        key = client_key(scope)
        if key is not None and not self.admission.allow(key):
            await self._refuse(scope, send, 429, _TOO_FAST)
            return
        if not await self.admission.enter():
            await self._refuse(scope, send, 503, _BUSY)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.admission.leave()

    async def _refuse(self, scope: Scope, send: Send, status: int, text: tuple[str, str]) -> None:
        delay = self.admission.hold(str((scope.get("client") or ("",))[0]))
        if delay:
            try:
                await asyncio.sleep(delay)
            finally:
                self.admission.release()
        close = not delay and self.admission.held >= HELD
        await _refuse(scope, send, status, text, [*self.headers, *([(b"connection", b"close")] if close else [])],
                      retry_after=max(1, round(self.admission.hold_seconds)))


def _app_path(scope: Scope) -> str:
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


async def _refuse(scope: Scope, send: Send, status: int, text: tuple[str, str], headers: list[tuple[bytes, bytes]],
                  *, retry_after: int) -> None:
    page = _page(*text)
    body = b"" if scope.get("method") == "HEAD" else page
    redact_scope_query(scope)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(page)).encode()),
        (b"retry-after", str(retry_after).encode()), (b"cache-control", b"no-store"), *headers]})
    await send({"type": "http.response.body", "body": body})
