"""Who may read the report pages, decided once per request by :func:`require_reader`.

Two ways in:

- a signed link (``?exp=&sig=``, as sent in pushes) for exactly the requested page, no login needed;
- an Airflow user (Airflow's own ``get_user``: the UI's ``_token`` cookie or a Bearer token) whose role may
  read the radar DAG (``is_authorized_dag(method="GET", details=DagDetails(id=DAG_ID))`` of Airflow's auth
  manager): being logged in to Airflow is not enough, the pages show that DAG's runs and results.

Both Airflow checks have a seam for tests and for running the app outside the api-server, registered the
FastAPI way in ``app.dependency_overrides``: ``get_user`` (a no-argument callable returning the user) and
:func:`may_read_radar` (a callable taking the user, returning True to allow).
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from include.radar import DAG_ID, signing

log = logging.getLogger(__name__)

# Airflow's login route; it sends the user back to ``next`` (a path it checks is on this host) afterwards.
AIRFLOW_LOGIN_PATH = "/api/v2/auth/login"


class PageError(Exception):
    """An error the reader should see as a page of its own (401, 403, 404, 503) rather than a trace.

    ``login``: the page offers Airflow's login (and the unsigned page); ``airflow_home``: it offers the way
    back to Airflow (the reader is logged in, but not allowed here); otherwise the way back to the overview.
    """

    def __init__(
        self, status: int, title: str, message: str, *, login: bool = False, airflow_home: bool = False
    ) -> None:
        super().__init__(f"{status} {title}")
        self.status = status
        self.title = title
        self.message = message
        self.login = login
        self.airflow_home = airflow_home


@dataclass(frozen=True)
class Reader:
    """Who is reading: an Airflow user, the holder of a signed link valid for ``signed_path`` only, or a
    reader in the short read session a signed link opened (``session``: any page, reading only)."""

    user: Any = None
    signed_path: str | None = None
    signed_exp: int | None = None
    session: bool = False

    @property
    def signed(self) -> bool:
        return self.signed_path is not None or self.session


# ------------------------------------------------------------------------------------------ the read session

# A valid signed link opens a short read session: an HttpOnly cookie scoped to the app's path, holding an expiry
# and its HMAC. Its message is ``read-session:`` (page paths start with "/"), so a cookie value is never a
# link signature or a feedback token, nor the reverse. It lets a reader who came from a push walk to the
# overview, other days and analyses; it never lets anyone write (the profile needs an Airflow login).
READ_COOKIE = "radar_read"
READ_SESSION_SECONDS = 30 * 60
_READ_PURPOSE = "read-session:"
_READ_RE = re.compile(r"([0-9]{1,12})\.([0-9a-f]{64})")


def read_session_value(secret: str, link_exp: int, now_ts: float) -> tuple[str, int]:
    """The cookie value and its lifetime in seconds: until the link expires, at most READ_SESSION_SECONDS."""
    expires = int(min(link_exp, now_ts + READ_SESSION_SECONDS))
    query = signing.sign_until(_READ_PURPOSE, secret, expires)
    return f"{query['exp']}.{query['sig']}", max(0, expires - int(now_ts))


def session_reader(request: Request, secret: str | None) -> Reader | None:
    """The reader a valid read-session cookie stands for; a tampered, expired or foreign one is no cookie."""
    match = _READ_RE.fullmatch(request.cookies.get(READ_COOKIE, ""))
    if match is None or not secret:
        return None
    if not signing.verify(_READ_PURPOSE, match.group(1), match.group(2), secret, request.app.state.radar.clock()):
        return None
    return Reader(signed_exp=int(match.group(1)), session=True)


def app_path(request: Request) -> str:
    """The request path relative to the app's mount point: what a link signature covers."""
    path: str = request.scope["path"]
    root: str = request.scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("/", ""):
        path = path[len(root) :]
    return path or "/"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def local_path(path: str) -> str:
    """``path`` made a path on this host: exactly one leading slash, no control characters.

    Browsers drop tabs and newlines anywhere in a URL and read ``//host`` or ``/\\host`` as another host, so
    a path taken from the request must lose both before it becomes a link or a login ``next`` target.
    """
    return "/" + _CONTROL.sub("", path).lstrip("/\\")


# ------------------------------------------------------------------------------------------ authentication


@cache
def _airflow_security() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """Airflow's ``get_user`` and its Bearer scheme, imported on first use (not when the plugin loads)."""
    try:
        from airflow.api_fastapi.core_api.security import bearer_scheme, get_user
    except Exception:  # noqa: BLE001 - Airflow missing or broken: only signed links can work
        log.warning("Airflow's API security module is unavailable; only signed links are accepted", exc_info=True)
        return None
    return get_user, bearer_scheme


async def airflow_user(request: Request) -> Any:
    """The Airflow user of this request, or None; never raises.

    ``get_user`` is called here rather than declared as a sub-dependency because it raises 401 when there is
    no token, and a signed link must work without one. Overrides registered for it on this app
    (``app.dependency_overrides[get_user] = lambda: user``, as in tests) are honoured; they take no arguments.
    """
    security = await run_in_threadpool(_airflow_security)  # the first import is slow: keep it off the loop
    if security is None:
        return None
    get_user, bearer_scheme = security
    override = request.app.dependency_overrides.get(get_user)
    try:
        if override is not None:
            user = override()
        else:
            user = get_user(request, None, await bearer_scheme(request))
        if inspect.isawaitable(user):
            user = await user
        return user
    except HTTPException:  # no token, expired or invalid token
        return None
    except Exception:  # noqa: BLE001 - e.g. auth manager not initialised: deny, but say why in the log
        log.warning("Airflow authentication failed", exc_info=True)
        return None


# ------------------------------------------------------------------------------------------- authorization


def may_read_radar(user: Any) -> bool:
    """Whether Airflow's auth manager lets ``user`` read the radar DAG (the pages show its runs and results).

    Blocking (an auth manager may ask its database): called in a worker thread. The override seam is this
    function itself in ``app.dependency_overrides``.
    """
    from airflow.api_fastapi import app as airflow_app
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    manager = airflow_app.get_auth_manager()  # looked up per call: it is created when the api-server starts
    return manager.is_authorized_dag(method="GET", user=user, details=DagDetails(id=DAG_ID)) is True


async def _permitted(request: Request, user: Any) -> bool:
    """The permission check (or its override); any failure of it refuses, and says why in the log."""
    check = request.app.dependency_overrides.get(may_read_radar, may_read_radar)
    try:
        allowed = await run_in_threadpool(check, user)
        if inspect.isawaitable(allowed):
            allowed = await allowed
    except Exception:  # noqa: BLE001 - e.g. auth manager not initialised: fail closed
        log.warning("Airflow authorization failed; the report pages are refused", exc_info=True)
        return False
    return allowed is True


# ------------------------------------------------------------------------------------------ the access rule


def _signed_reader(request: Request, path: str, secret: str | None) -> Reader | None:
    """A reader for a link that verifies for exactly ``path``; one ``exp`` and one ``sig``, nothing else."""
    params = request.query_params
    exps, sigs = params.getlist("exp"), params.getlist("sig")
    if len(exps) != 1 or len(sigs) != 1:
        return None
    now = request.app.state.radar.clock()
    if not signing.verify(path, exps[0], sigs[0], secret, now):
        return None
    return Reader(signed_path=path, signed_exp=signing.parse_exp(exps[0], now))


async def require_reader(request: Request) -> Reader:
    """The one access rule of every page.

    - ``exp`` or ``sig`` in the query: the link must verify for exactly this page, else 403 (a tampered,
      expired, malformed or other-page link is refused outright, whoever clicks it; the page offers the
      unsigned URL);
    - otherwise an authenticated Airflow user; else, for reading (GET), a valid read session that a signed link
      opened; else 401 with a page that says to log in to Airflow;
    - whose role may read the radar DAG, else 403.
    """
    params = request.query_params
    path = app_path(request)
    if "sig" in params or "exp" in params:
        settings = await run_in_threadpool(request.app.state.radar.settings)
        secret = settings.link_secret.get_secret_value() if settings.link_secret else None
        reader = _signed_reader(request, path, secret)
        if reader is not None:
            if secret and reader.signed_exp:  # the middleware sets the cookie on the page's response
                request.scope.setdefault("state", {})["radar_read_session"] = read_session_value(
                    secret, reader.signed_exp, request.app.state.radar.clock().timestamp())
            return reader
        raise PageError(
            403,
            "链接无效或已过期",
            "这个链接的签名不正确、已经过期，或者不属于这个页面。请使用最新推送中的链接，或登录 Airflow 后打开本页。",
            login=True,
        )
    user = await airflow_user(request)
    if user is None and request.method in ("GET", "HEAD") and READ_COOKIE in request.cookies:
        settings = await run_in_threadpool(request.app.state.radar.settings)
        session = session_reader(request, settings.link_secret.get_secret_value() if settings.link_secret else None)
        if session is not None:
            return session
    if user is None:
        raise PageError(
            401, "请先登录 Airflow", "机会雷达的页面需要登录 Airflow 后查看（或使用推送消息中的签名链接）。", login=True
        )
    if not await _permitted(request, user):
        raise PageError(
            403,
            "没有查看权限",
            f"你的 Airflow 账号没有读取 DAG {DAG_ID} 的权限，机会雷达的页面需要这个权限。请联系 Airflow 管理员。",
            airflow_home=True,
        )
    return Reader(user=user)


# what a page route declares to get the reader (FastAPI runs require_reader once per request)
ReaderDep = Annotated[Reader, Depends(require_reader)]
