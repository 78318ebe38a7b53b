"""A client for a self-hosted WeRSS (github.com/rachelos/we-mp-rss) built on the real v1.4.9+ API (the facts:
../shared/reference/external-apis.md): ``/api/v1/wx``; ``{"code": 0, "data": ...}`` on success, failures as
HTTP 406/201/202 with ``{"detail": {...}}``; a form login that locks the account after 5 failures (so a failed
login is tried once, never looped); AK/SK in ``Authorization: AK-SK <ak>:<sk>``; ``limit`` always sent, never
``has_content``. WeRSS's own WeChat login lapses every few days and collection then stops silently (we-mp-rss
#54, #114, #172, #216): ``GET /api/v1/wx/sys/info``'s ``data.wx`` says whether it holds (``login``) and, where
the release fills them, its token and until when; older versions omit it ("not reported"); the WeChat token and
cookie are never kept, logged or shown. Every request has a total deadline and a decoded-size cap (http.py);
bodies decode leniently and every page's shape is checked before use.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx2

from include.radar.core import http
from include.radar.core.clock import SYSTEM, Clock

log = logging.getLogger(__name__)

PREFIX = "/api/v1/wx"
# the time zone of WeRSS's local-time texts (docker-compose.werss.yaml sets TZ=Asia/Shanghai)
WERSS_TZ = ZoneInfo("Asia/Shanghai")
RETRY_STATUSES = {429, 500, 502, 503, 504}
# refresh the login token this long before it expires
REFRESH_MARGIN = timedelta(minutes=10)
# an article body above 5 MB is cut by the cleaner anyway; a page of 100 metadata rows is far smaller
MAX_RESPONSE_BYTES = 20_000_000
# a retry is not started with less than this left before the caller's deadline
MIN_ATTEMPT_SECONDS = 1.0


class WeRSSError(RuntimeError):
    """WeRSS answered with an error; ``status`` is the HTTP status, ``code`` the envelope's code."""

    def __init__(self, message: str, *, status: int | None = None, code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class WeRSSAuthError(WeRSSError):
    """The credentials were refused. Not retryable: repeated failed logins lock the WeRSS account."""


class WeRSSNotFound(WeRSSError):
    """The article was deleted (404, detail code 40401)."""


class WeRSSMalformed(WeRSSError):
    """WeRSS answered, but not in the shape its API promises (``data`` of the wrong type, say)."""


class WeRSSDeadline(WeRSSError):
    """The caller's deadline passed: no further request is started."""


@dataclass
class Reply:
    """One HTTP answer, read in full (within the size cap) and decoded leniently."""

    status_code: int
    body: Any  # the decoded JSON, or None when the body is not JSON


@dataclass
class Token:
    value: str
    expires_at: datetime

    def fresh(self, now: datetime) -> bool:
        return now < self.expires_at - REFRESH_MARGIN


TokenCache = tuple[Callable[[], "Token | None"], Callable[["Token | None"], None]]


@dataclass(frozen=True)
class WeChatLogin:
    """WeRSS's WeChat login as ``sys/info`` reports it. ``reported`` False: this WeRSS does not say (``note``
    says why); then the rest means nothing. ``scanned``: whether WeRSS holds a WeChat token (True), holds none
    (False: its QR code was never scanned) or sys/info does not say (None) — v1.4.9 keeps a scan's token in
    data/wx.lic's ``token_data``, which sys/info does not read: its ``token`` is always empty there, and its
    ``info`` holds the scan only in the process that saw it. :func:`judged` settles None from WeRSS's
    collections; ``collected_at`` is then the collection that proved the token."""

    reported: bool
    logged_in: bool = False
    expires_at: datetime | None = None
    note: str = ""
    scanned: bool | None = True
    collected_at: datetime | None = None

    def expired(self, now: datetime) -> bool:
        return self.reported and (not self.logged_in or (self.expires_at is not None and self.expires_at <= now))


def _is_token(value: Any) -> bool:
    # WeRSS's config turns an all-digit value into a number: WeChat's tokens are digits
    return isinstance(value, str) and bool(value.strip()) or isinstance(value, int) and not isinstance(value, bool) \
        and value != 0


def wechat_login(data: Any, now: datetime) -> WeChatLogin:
    """Read ``data`` of ``sys/info`` (at ``now``): its ``login`` flag, whether a token is shown (the ``wx`` block's, or the
    scan's in ``info``; never kept) and the expiry (``info.expiry``'s ``expiry_timestamp``, else its or the
    block's ``expiry_time`` in Shanghai time), nothing else of it. No token shown is no verdict: v1.4.9 shows
    none after a restart, scanned or not (``scanned`` None)."""
    if not isinstance(data, dict):
        return WeChatLogin(False, note=f"sys/info answered {type(data).__name__}, not an object")
    wx = data.get("wx")
    if not isinstance(wx, dict):
        return WeChatLogin(False, note="this WeRSS does not report its WeChat login (sys/info has no wx)")
    login = wx.get("login")
    if not isinstance(login, bool):
        return WeChatLogin(False, note="sys/info's wx.login is not true or false")
    info = wx.get("info") if isinstance(wx.get("info"), dict) else {}
    if not (_is_token(wx.get("token")) or _is_token(info.get("token"))):
        return WeChatLogin(True, login, note="sys/info shows no WeChat token (v1.4.9 shows none once WeRSS "
                           "restarted since the scan)", scanned=None)
    expiry = info.get("expiry") if isinstance(info.get("expiry"), dict) else {}
    return WeChatLogin(True, login, _expiry(expiry.get("expiry_timestamp"), expiry.get("expiry_time") or wx.get("expiry_time"),
                                            now))


def judged(login: WeChatLogin, collected_at: datetime | None) -> WeChatLogin:
    """``login`` with ``scanned`` settled where sys/info left it open, from ``collected_at``: WeRSS's latest
    collection start it knows of (an account's ``sync_time``), None when no account was ever collected. WeRSS
    starts a collection only with a token (v1.4.9 core/wx/base.py ``Start``: 「请先扫码登录公众号平台」 returns
    before ``sync_time`` is set), so one proves a scan; none at all, that none has been made."""
    if not login.reported or login.scanned is not None:
        return login
    if collected_at is None:
        return WeChatLogin(True, False, note="no account was ever collected: WeRSS collects only with a WeChat "
                           "login", scanned=False)
    return WeChatLogin(True, login.logged_in, note=login.note, scanned=True, collected_at=collected_at)


def _expiry(timestamp: Any, text: Any, now: datetime) -> datetime | None:
    """An expiry moment from WeRSS's Unix seconds, else from its local-time text; None when neither is
    plausible (before 2020 or more than a year ahead)."""
    moment = None
    if isinstance(timestamp, int | float) and not isinstance(timestamp, bool) and math.isfinite(timestamp):
        try:
            moment = datetime.fromtimestamp(timestamp, UTC)
        except (OverflowError, OSError, ValueError):
            moment = None
    if moment is None and isinstance(text, str) and len(text) < 40:
        try:
            moment = datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S").replace(tzinfo=WERSS_TZ)
        except ValueError:
            moment = None
    if moment is None or not datetime(2020, 1, 1, tzinfo=UTC) < moment < now + timedelta(days=366):
        return None
    return moment


@dataclass(frozen=True)
class Credentials:
    """How the radar signs in to WeRSS: AK/SK when both are set, else its username and password (a form login).
    The secrets stay out of the repr."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)

    @property
    def uses_keys(self) -> bool:
        return bool(self.access_key and self.secret_key)


class WeRSSClient:
    """Reads accounts and articles, signed in with ``credentials``.

    ``token_cache`` is a (load, save) pair so the login token outlives one task (the radar keeps it in
    its database, see ``ingest.db_token_cache``); without one the token lives as long as the client.
    """

    def __init__(
        self,
        base_url: str,
        credentials: Credentials,
        *,
        timeout: float = 20.0,
        max_retries: int = 3,
        backoff_seconds: float = 1.0,
        token_cache: TokenCache | None = None,
        clock: Clock = SYSTEM,
        deadline: float | None = None,
    ) -> None:
        if not base_url:
            raise WeRSSAuthError("WeRSS base URL is empty: set the host of the werss_default connection")
        if not credentials.uses_keys and not (credentials.username and credentials.password):
            raise WeRSSAuthError(
                "no WeRSS credentials: set login/password or extra access_key/secret_key on the werss_default connection"
            )
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self.http = http.client(timeout)
        self.clock = clock
        # clock.monotonic() after which no request is started and none runs on (the step's deadline)
        self.deadline = deadline
        self._load_token, self._save_token = token_cache or (lambda: None, lambda _t: None)
        self._token: Token | None = None
        self.login_count = 0

    # ----------------------------------------------------------------------------------------- auth

    def _auth_header(self) -> dict[str, str]:
        if self.credentials.uses_keys:
            return {"Authorization": f"AK-SK {self.credentials.access_key}:{self.credentials.secret_key}"}
        return {"Authorization": f"Bearer {self._valid_token().value}"}

    def _valid_token(self) -> Token:
        now = self.clock.now()
        if self._token is None:
            self._token = self._load_token()
        if self._token is None or not self._token.fresh(now):
            self._token = self.login()
        return self._token

    def login(self) -> Token:
        """One form-encoded login; a refusal raises WeRSSAuthError at once (5 failures lock the account)."""
        self.login_count += 1
        response = self._send(
            "POST",
            f"{PREFIX}/auth/login",
            data={"username": self.credentials.username, "password": self.credentials.password},
            authenticated=False,
        )
        if response.status_code == 401 or _detail_code(response) in (40101, 40100):
            raise WeRSSAuthError(
                f"WeRSS refused the login for user {self.credentials.username!r} ({_message(response)}): check the WeRSS "
                "credentials in the werss_default connection. Not retried: WeRSS locks the account after "
                "5 failed logins until it restarts.",
                status=response.status_code,
                code=_detail_code(response),
            )
        data = self._unwrap(response)
        token_value = (data or {}).get("access_token")
        if not token_value:
            raise WeRSSAuthError(f"WeRSS login answered without an access_token (HTTP {response.status_code})")
        expires_in = int(data.get("expires_in") or 1800)
        token = Token(token_value, self.clock.now() + timedelta(seconds=expires_in))
        self._save_token(token)
        log.info("logged in to WeRSS as %s; token valid for %d min", self.credentials.username, expires_in // 60)
        return token

    # -------------------------------------------------------------------------------------- requests

    def _send(self, method: str, path: str, *, authenticated: bool = True, retries: int | None = None,
              **kwargs: Any) -> Reply:
        """One logical call: retries with backoff on connection errors, timeouts, 5xx and 429 only.

        Each attempt is bounded as a whole (``timeout``, and what is left before ``deadline``); a retry
        is not started, nor slept for, past the deadline.
        """
        url = self.base_url + path
        retries = self.max_retries if retries is None else retries
        attempt = 0
        while True:
            budget = self._attempt_budget()
            headers = self._auth_header() if authenticated else {}
            try:
                with http.limits(budget, MAX_RESPONSE_BYTES):
                    response = self.http.request(method, url, headers=headers, **kwargs)
                reply = Reply(response.status_code, _decode(response.content))
            except httpx2.TransportError as exc:
                if attempt >= retries:
                    raise WeRSSError(f"WeRSS unreachable at {self.base_url}: {_transport_error(exc, budget)}") from None
                error = _transport_error(exc, budget)
            else:
                if reply.status_code not in RETRY_STATUSES or attempt >= retries:
                    return reply
                error = f"HTTP {reply.status_code}"
            attempt += 1
            delay = self.backoff_seconds * 2 ** (attempt - 1)
            if self.deadline is not None and self.clock.monotonic() + delay + MIN_ATTEMPT_SECONDS > self.deadline:
                raise WeRSSDeadline(f"WeRSS {method} {path} failed ({error}) and the step's deadline leaves no time to retry")
            log.warning("WeRSS %s %s failed (%s); retry %d/%d in %.1fs", method, path, error, attempt,
                        retries, delay)
            self.clock.sleep(delay)

    def _attempt_budget(self) -> float:
        if self.deadline is None:
            return self.timeout
        left = self.deadline - self.clock.monotonic()
        if left < MIN_ATTEMPT_SECONDS:
            raise WeRSSDeadline("the step's deadline passed: no further WeRSS request is started")
        return min(self.timeout, left)

    def _get(self, path: str, params: dict[str, Any] | None = None, *, retries: int | None = None) -> Any:
        """GET with the credentials; on a 401 log in again once (a refresh cannot revive an expired token)."""
        response = self._send("GET", path, params=params, retries=retries)
        if response.status_code == 401 and not self.credentials.uses_keys:
            log.info("WeRSS token rejected (%s); logging in again", _message(response))
            self._token = self.login()
            response = self._send("GET", path, params=params, retries=retries)
        if response.status_code == 401:
            raise WeRSSAuthError(
                f"WeRSS rejected the credentials ({_message(response)}): check the werss_default connection",
                status=401,
            )
        return self._unwrap(response)

    def _unwrap(self, response: Reply) -> Any:
        body = response.body
        if body is None:
            raise WeRSSError(
                f"WeRSS answered HTTP {response.status_code} with a non-JSON body", status=response.status_code
            )
        if response.status_code == 404 or _detail_code(response) == 40401:
            raise WeRSSNotFound(f"WeRSS: not found ({_message(response)})", status=404, code=_detail_code(response))
        if isinstance(body, dict) and body.get("code") == 0 and response.status_code < 300:
            return body.get("data")
        code = body.get("code") if isinstance(body, dict) else None
        raise WeRSSError(
            f"WeRSS error (HTTP {response.status_code}, code {code if code is not None else _detail_code(response)}): "
            f"{_message(response)}",
            status=response.status_code,
            code=code if isinstance(code, int) else _detail_code(response),
        )

    # ------------------------------------------------------------------------------------------- API

    def accounts(self) -> list[Any]:
        """Every subscribed account (paged 100 at a time), rows as WeRSS sent them (the caller validates)."""
        found: list[Any] = []
        seen: set[str] = set()
        offset = 0
        for _ in range(100):  # 10,000 accounts; a WeRSS that ignores offset cannot loop forever
            rows, total = _page(self._get(f"{PREFIX}/mps", {"limit": 100, "offset": offset}), "account list")
            new = 0
            for row in rows:
                key = str(row.get("id")) if isinstance(row, dict) else repr(row)
                if key not in seen:
                    seen.add(key)
                    found.append(row)
                    new += 1
            offset += len(rows)
            if not rows or not new or len(rows) < 100 or offset >= total:
                break
        return found

    def article_page(self, mp_id: str, offset: int, limit: int) -> list[Any]:
        """One page of an account's article list, as WeRSS sent it (rows are validated by the caller)."""
        rows, _total = _page(
            self._get(f"{PREFIX}/articles", {"mp_id": mp_id, "offset": offset, "limit": limit}), f"article list of {mp_id}"
        )
        return rows

    def message_tasks(self) -> list[Any]:
        """WeRSS's message tasks (消息任务, what makes it collect: ``cron_exp`` and the accounts of ``mps_id``),
        rows as WeRSS sent them; at most 1,000 (ten pages of 100)."""
        found: list[Any] = []
        for _ in range(10):
            rows, total = _page(self._get(f"{PREFIX}/message_tasks", {"limit": 100, "offset": len(found)}),
                                "message task list")
            found.extend(rows)
            if not rows or len(found) >= total:
                break
        return found

    def newest_articles(self, limit: int = 1) -> list[Any]:
        """The newest ``limit`` articles of every account together (rows as WeRSS sent them)."""
        rows, _total = _page(self._get(f"{PREFIX}/articles", {"offset": 0, "limit": limit}), "article list")
        return rows

    def wechat_login(self) -> WeChatLogin:
        """WeRSS's WeChat login (``sys/info``). A WeRSS whose ``sys/info`` refuses AK/SK (it took only a login
        token before it took AK/SK) or has no such route does not report it; other failures raise. One attempt,
        no retry: it is asked again at the next slot, so a slow WeRSS costs the slot one timeout at most."""
        try:
            data = self._get(f"{PREFIX}/sys/info", retries=0)
        except WeRSSNotFound:
            return WeChatLogin(False, note="this WeRSS has no sys/info")
        except WeRSSAuthError:
            if not self.credentials.uses_keys:
                raise
            return WeChatLogin(False, note="this WeRSS's sys/info does not accept AK/SK")
        return wechat_login(data, self.clock.now())

    def qr_status(self) -> dict[str, Any] | None:
        """WeRSS's QR login state (``auth/qr/status``: ``login_status``, ``qr_code`` a code is waiting), or None
        where it cannot be asked: the route takes a login token, not AK/SK. One attempt, no retry."""
        if self.credentials.uses_keys:
            return None
        data = self._get(f"{PREFIX}/auth/qr/status", retries=0)
        return data if isinstance(data, dict) else None

    def account(self, mp_id: str) -> dict[str, Any]:
        """One account's record (``mps/{id}``), which says when WeRSS last started collecting it
        (``sync_time``, Unix seconds, 0 never); one attempt, no retry."""
        data = self._get(f"{PREFIX}/mps/{mp_id}", retries=0)
        if not isinstance(data, dict):
            raise WeRSSMalformed(f"WeRSS account {mp_id}: detail has no data object ({type(data).__name__})")
        return data

    def article(self, article_id: str) -> dict[str, Any]:
        data = self._get(f"{PREFIX}/articles/{article_id}")
        if not isinstance(data, dict):
            raise WeRSSMalformed(f"WeRSS article {article_id}: detail has no data object ({type(data).__name__})")
        return data


def _page(data: Any, what: str) -> tuple[list[Any], int]:
    """``data`` of a list endpoint: ``{"list": [...], "total": n}``; anything else is malformed."""
    if data is None:
        return [], 0
    if not isinstance(data, dict):
        raise WeRSSMalformed(f"WeRSS {what}: data is {type(data).__name__}, not an object")
    rows = data.get("list")
    if rows is None:
        rows = []
    if not isinstance(rows, list):
        raise WeRSSMalformed(f"WeRSS {what}: data.list is {type(rows).__name__}, not a list")
    total = data.get("total")
    return rows, total if isinstance(total, int) and not isinstance(total, bool) and total >= 0 else len(rows)


def _decode(content: bytes) -> Any:
    """JSON from a body whatever its bytes: invalid UTF-8 is replaced, not fatal; None when not JSON."""
    try:
        return json.loads(content.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None


def _transport_error(exc: httpx2.TransportError, budget: float) -> str:
    if isinstance(exc, httpx2.TimeoutException):
        return f"no complete answer within {budget:.3g}s"
    detail = str(exc)[:200]  # e.g. the answer's size or an encoding refused (include/radar/core/http.py)
    return f"{exc.__class__.__name__}: {detail}" if detail else exc.__class__.__name__


def _detail_code(response: Reply) -> int | None:
    body = response.body
    if isinstance(body, dict) and isinstance(body.get("detail"), dict):
        code = body["detail"].get("code")
        return code if isinstance(code, int) else None
    return None


def _message(response: Reply) -> str:
    body = response.body
    if isinstance(body, dict):
        detail = body.get("detail")
        if isinstance(detail, dict):
            return str(detail.get("message") or detail)[:300]
        if detail:
            return str(detail)[:300]
        if body.get("message"):
            return str(body["message"])[:300]
    return f"HTTP {response.status_code}"
