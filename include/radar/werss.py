"""A client for a self-hosted WeRSS (github.com/rachelos/we-mp-rss) built on the real v1.4.9+ API.

Facts it is built on (../shared/reference/external-apis.md): everything under ``/api/v1/wx``; success is
``{"code": 0, "data": ...}`` and failures may arrive as HTTP 406/201/202 with ``{"detail": {...}}``; login
is form-encoded and locks the account after 5 failures, so a failed login is tried once and never looped;
AK/SK keys go in ``Authorization: AK-SK <ak>:<sk>``; ``limit`` defaults to 5 (we always send it); never send
``has_content``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

log = logging.getLogger(__name__)

PREFIX = "/api/v1/wx"
RETRY_STATUSES = {429, 500, 502, 503, 504}
# refresh the login token this long before it expires
REFRESH_MARGIN = timedelta(minutes=10)


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


@dataclass
class Token:
    value: str
    expires_at: datetime

    def fresh(self, now: datetime) -> bool:
        return now < self.expires_at - REFRESH_MARGIN


TokenCache = tuple[Callable[[], "Token | None"], Callable[["Token | None"], None]]


class WeRSSClient:
    """Reads accounts and articles. Credentials: AK/SK when configured, otherwise username/password login.

    ``token_cache`` is a (load, save) pair so the login token outlives one task (the radar keeps it in
    its database, see ``ingest.db_token_cache``); without one the token lives as long as the client.
    """

    def __init__(
        self,
        base_url: str,
        *,
        username: str | None = None,
        password: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        timeout: float = 20.0,
        max_retries: int = 3,
        backoff_seconds: float = 1.0,
        token_cache: TokenCache | None = None,
        session: requests.Session | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not base_url:
            raise WeRSSAuthError("WeRSS base URL is empty: set the host of the werss_default connection")
        if not (access_key and secret_key) and not (username and password):
            raise WeRSSAuthError(
                "no WeRSS credentials: set login/password or extra access_key/secret_key on the werss_default connection"
            )
        self.base_url = base_url.rstrip("/")
        self.username, self.password = username, password
        self.access_key, self.secret_key = access_key, secret_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self.session = session or requests.Session()
        self.clock = clock
        self._load_token, self._save_token = token_cache or (lambda: None, lambda _t: None)
        self._token: Token | None = None
        self.login_count = 0

    # ----------------------------------------------------------------------------------------- auth

    @property
    def uses_keys(self) -> bool:
        return bool(self.access_key and self.secret_key)

    def _auth_header(self) -> dict[str, str]:
        if self.uses_keys:
            return {"Authorization": f"AK-SK {self.access_key}:{self.secret_key}"}
        return {"Authorization": f"Bearer {self._valid_token().value}"}

    def _valid_token(self) -> Token:
        now = self.clock()
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
            data={"username": self.username, "password": self.password},
            authenticated=False,
        )
        if response.status_code == 401 or _detail_code(response) in (40101, 40100):
            raise WeRSSAuthError(
                f"WeRSS refused the login for user {self.username!r} ({_message(response)}): check the WeRSS "
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
        token = Token(token_value, self.clock() + timedelta(seconds=expires_in))
        self._save_token(token)
        log.info("logged in to WeRSS as %s; token valid for %d min", self.username, expires_in // 60)
        return token

    # -------------------------------------------------------------------------------------- requests

    def _send(self, method: str, path: str, *, authenticated: bool = True, **kwargs: Any) -> requests.Response:
        """One logical call: retries with backoff on connection errors, 5xx and 429 only."""
        url = self.base_url + path
        attempt = 0
        while True:
            headers = self._auth_header() if authenticated else {}
            try:
                response = self.session.request(method, url, headers=headers, timeout=self.timeout, **kwargs)
            except (requests.ConnectionError, requests.Timeout) as exc:
                if attempt >= self.max_retries:
                    raise WeRSSError(f"WeRSS unreachable at {self.base_url}: {exc.__class__.__name__}") from exc
                error: str = exc.__class__.__name__
            else:
                if response.status_code not in RETRY_STATUSES or attempt >= self.max_retries:
                    return response
                error = f"HTTP {response.status_code}"
            attempt += 1
            delay = self.backoff_seconds * 2 ** (attempt - 1)
            log.warning("WeRSS %s %s failed (%s); retry %d/%d in %.1fs", method, path, error, attempt,
                        self.max_retries, delay)
            time.sleep(delay)

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """GET with the credentials; on a 401 log in again once (a refresh cannot revive an expired token)."""
        response = self._send("GET", path, params=params)
        if response.status_code == 401 and not self.uses_keys:
            log.info("WeRSS token rejected (%s); logging in again", _message(response))
            self._token = self.login()
            response = self._send("GET", path, params=params)
        if response.status_code == 401:
            raise WeRSSAuthError(
                f"WeRSS rejected the credentials ({_message(response)}): check the werss_default connection",
                status=401,
            )
        return self._unwrap(response)

    def _unwrap(self, response: requests.Response) -> Any:
        try:
            body = response.json()
        except ValueError:
            raise WeRSSError(
                f"WeRSS answered HTTP {response.status_code} with a non-JSON body", status=response.status_code
            ) from None
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

    def accounts(self) -> list[dict[str, Any]]:
        """Every subscribed account (paged 100 at a time)."""
        found: dict[str, dict[str, Any]] = {}
        offset = 0
        while True:
            data = self._get(f"{PREFIX}/mps", {"limit": 100, "offset": offset}) or {}
            rows = data.get("list") or []
            for row in rows:
                if isinstance(row, dict) and row.get("id"):
                    found.setdefault(str(row["id"]), row)
            offset += len(rows)
            if not rows or len(rows) < 100 or offset >= int(data.get("total") or 0):
                return list(found.values())

    def article_page(self, mp_id: str, offset: int, limit: int) -> list[dict[str, Any]]:
        data = self._get(f"{PREFIX}/articles", {"mp_id": mp_id, "offset": offset, "limit": limit}) or {}
        rows = data.get("list") or []
        return [r for r in rows if isinstance(r, dict)]

    def article(self, article_id: str) -> dict[str, Any]:
        data = self._get(f"{PREFIX}/articles/{article_id}")
        if not isinstance(data, dict):
            raise WeRSSError(f"WeRSS article {article_id}: detail has no data object")
        return data


def _json(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _detail_code(response: requests.Response) -> int | None:
    body = _json(response)
    if isinstance(body, dict) and isinstance(body.get("detail"), dict):
        code = body["detail"].get("code")
        return code if isinstance(code, int) else None
    return None


def _message(response: requests.Response) -> str:
    body = _json(response)
    if isinstance(body, dict):
        detail = body.get("detail")
        if isinstance(detail, dict):
            return str(detail.get("message") or detail)[:300]
        if detail:
            return str(detail)[:300]
        if body.get("message"):
            return str(body["message"])[:300]
    return f"HTTP {response.status_code}"
