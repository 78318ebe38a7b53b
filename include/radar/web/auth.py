"""Who may read the report pages (:func:`require_reader`, once per request) and who may change the profile
(:func:`require_editor`).

A reader is a signed link for exactly its page, the short read session such a link opens, or an Airflow user
whose role may read the radar DAG (being logged in is not enough: the pages show that DAG's runs). What is
personal (the profile and those parts of the other pages) needs an Airflow login; saving the profile needs
edit permission on the DAG, since it decides what is analysed, paid for and put in the prompt (the rules:
docs/security.md). Tests and apps outside the api-server replace Airflow's checks through
``app.dependency_overrides``: ``get_user`` (returns the user), :func:`may_read_radar` and :func:`may_edit_radar`
(take it, return True to allow).
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

from include.radar import DAG_ID
from include.radar.core import signing
from include.radar.core.settings import PERSONAL_PAGES, Settings

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
    reader in the short read session a signed link opened (``session``: the pages of ``link_session_pages``,
    reading only)."""

    user: Any = None
    signed_path: str | None = None
    signed_exp: int | None = None
    session: bool = False
    origin: str | None = None  # a link's: the first ORIGIN_CHARS of its own signature, or of the daily link's (VIA)

    @property
    def signed(self) -> bool:
        return self.signed_path is not None or self.session

    @property
    def personal(self) -> bool:
        """Whether pages may show this reader what is personal (the watchlist and what it matched, the filter
        rules, the weights learned from feedback): an Airflow login only, never a link or its session."""
        return self.user is not None and not self.signed


# ------------------------------------------------------------------------------------------ the read session

# A valid signed link opens a short read session: an HttpOnly cookie scoped to the app's path, holding an expiry,
# the first ORIGIN_CHARS of the opening link's signature and their HMAC. Its message is ``read-session:<origin>``
# (page paths start with "/"), so a cookie value is never a link signature or a feedback token, nor the reverse.
# The origin makes the link and every session it opens one client to the per-link bound (web/admission.py): a
# link opened again mints no fresh allowance. It lets a reader who came from a push walk to the overview, other
# days and analyses (the pages of ``link_session_pages``) during the link's first day; it never opens what is
# personal and never lets anyone write (its pages carry no vote forms, web/feedback.py).
READ_COOKIE = "radar_read"
ORIGIN_CHARS = 16  # of a link's 64 hex digits: admission.KEY_CHARS
# A signed daily page signs its analyses' links with its own expiry (feedback.day_signer); each names the daily
# link's origin (``via``, under the signature: ``day-link:<origin>:<path>``), so that the bound counts a day's
# links as the one link they came from, not each a fresh allowance
VIA = "via"
_DAY_LINK_PURPOSE = "day-link:"
_ORIGIN_RE = re.compile(f"[0-9a-f]{{{ORIGIN_CHARS}}}")
_READ_PURPOSE = "read-session:"
_READ_RE = re.compile(r"([0-9]{1,12})\.([0-9a-f]{16})\.([0-9a-f]{64})")
_CLOCK_SKEW_SECONDS = 60  # between the api-server workers that set and check a cookie
SESSION_DAYS = 1  # a link opens read sessions during the first day after it was signed only


def page_of(path: str) -> str:
    """The page a path of the app belongs to, as ``link_session_pages`` names them: its first segment
    (``/daily/2026-01-08`` is ``daily``), ``overview`` for ``/``."""
    return path.lstrip("/").split("/", 1)[0] or "overview"


def read_session_value(secret: str, link_exp: int, now_ts: float, minutes: int, link_days: int,
                       link_sig: str) -> tuple[str, int] | None:
    """The cookie value and its lifetime in seconds, or None when the link opens no session any more (or
    ``link_sig``, the opening link's signature, is none).

    A session lasts at most ``minutes``, never past the link's expiry, and never past the end of the link's
    first day: a day after it was signed (its expiry less ``link_days``, the lifetime links are signed for).
    Opening the link again renews the session within that day only, so a forwarded link is a day of walking
    the pages at most; its own page opens for its whole life. A link signed under a longer ``link_days`` than
    the current one counts as older than it is: it opens fewer sessions, never more."""
    first_day_ends = link_exp - link_days * 86400 + SESSION_DAYS * 86400
    expires = int(min(link_exp, now_ts + minutes * 60, first_day_ends))
    origin = link_sig[:ORIGIN_CHARS].lower()
    if expires <= now_ts or not re.fullmatch(f"[0-9a-f]{{{ORIGIN_CHARS}}}", origin):
        return None
    query = signing.sign_until(_READ_PURPOSE + origin, secret, expires)
    return f"{query['exp']}.{origin}.{query['sig']}", expires - int(now_ts)


def day_link_message(origin: str, path: str) -> str:
    """What a daily page's link to ``path`` is signed over: the daily link's ``origin`` and the path."""
    return f"{_DAY_LINK_PURPOSE}{origin}:{path}"


def session_opens(settings: Settings) -> bool:
    """Whether a valid link opens a read session at all (minutes, and at least one page to open)."""
    return settings.link_session_minutes > 0 and bool(settings.link_session_pages)


def session_reader(request: Request, settings: Settings, page: str) -> Reader | None:
    """The reader a valid read-session cookie stands for on ``page``; a tampered, expired or foreign cookie,
    sessions switched off, or a page outside the session's reach is no session."""
    match = _READ_RE.fullmatch(request.cookies.get(READ_COOKIE, ""))
    secret = settings.link_secret.get_secret_value() if settings.link_secret else None
    minutes = settings.link_session_minutes
    if match is None or not secret or minutes <= 0 or page not in settings.link_session_pages:
        return None
    longest = (minutes * 60 + _CLOCK_SKEW_SECONDS) / 86400  # a cookie of a longer setting is cut to this one
    if not signing.verify(_READ_PURPOSE + match.group(2), match.group(1), match.group(3), secret,
                          request.app.state.radar.clock.now(), longest):
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
    except Exception:  # Airflow missing or broken: only signed links can work
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
    except Exception:  # e.g. auth manager not initialised: deny, but say why in the log
        log.warning("Airflow authentication failed", exc_info=True)
        return None


# ------------------------------------------------------------------------------------------- authorization


def _dag_permission(user: Any, method: str) -> bool:
    """Whether Airflow's auth manager allows ``method`` on the radar DAG to ``user`` (blocking: an auth manager
    may ask its database; called in a worker thread)."""
    from airflow.api_fastapi import app as airflow_app
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    manager = airflow_app.get_auth_manager()  # looked up per call: it is created when the api-server starts
    return manager.is_authorized_dag(method=method, user=user, details=DagDetails(id=DAG_ID)) is True


def may_read_radar(user: Any) -> bool:
    """Whether ``user`` may read the radar DAG (the pages show its runs and results). The override seam is
    this function itself in ``app.dependency_overrides``."""
    return _dag_permission(user, "GET")


def may_edit_radar(user: Any) -> bool:
    """Whether ``user`` may edit the radar DAG: what saving the profile needs (it decides what is analysed and
    paid for, and goes into the analysis prompt). The override seam is this function itself."""
    return _dag_permission(user, "PUT")


async def _permitted(request: Request, user: Any, seam: Callable[[Any], bool] = may_read_radar) -> bool:
    """A permission check (or its override); any failure of it refuses, and says why in the log."""
    check = request.app.dependency_overrides.get(seam, seam)
    try:
        allowed = await run_in_threadpool(check, user)
        if inspect.isawaitable(allowed):
            allowed = await allowed
    except Exception:  # e.g. auth manager not initialised: fail closed
        log.warning("Airflow authorization (%s) failed; refused", seam.__name__, exc_info=True)
        return False
    return allowed is True


# ------------------------------------------------------------------------------------------ the access rule


def _signed_reader(request: Request, path: str, settings: Settings) -> Reader | None:
    """A reader for a link that verifies for exactly ``path`` (and, from a daily page, its ``via``); one ``exp``
    and one ``sig``; its expiry at most ``remember_me_days`` (and a day of clock skew) ahead, whatever it was
    signed for."""
    params = request.query_params
    exps, sigs, vias = params.getlist("exp"), params.getlist("sig"), params.getlist(VIA)
    if len(exps) != 1 or len(sigs) != 1 or len(vias) > 1 or (vias and not _ORIGIN_RE.fullmatch(vias[0])):
        return None
    secret = settings.link_secret.get_secret_value() if settings.link_secret else None
    now = request.app.state.radar.clock.now()
    longest = settings.remember_me_days + 1
    message = day_link_message(vias[0], path) if vias else path
    if not signing.verify(message, exps[0], sigs[0], secret, now, longest):
        return None
    return Reader(signed_path=path, signed_exp=signing.parse_exp(exps[0], now, longest),
                  origin=vias[0] if vias else sigs[0][:ORIGIN_CHARS])


def _open_session(request: Request, settings: Settings, reader: Reader) -> None:
    """Leave the read session's cookie for the middleware to set on the page's response, when the link still
    opens one (:func:`read_session_value`)."""
    if not (settings.link_secret and reader.signed_exp and session_opens(settings)):
        return
    session = read_session_value(settings.link_secret.get_secret_value(), reader.signed_exp,
                                 request.app.state.radar.clock.now().timestamp(), settings.link_session_minutes,
                                 settings.remember_me_days, reader.origin or "")
    if session is not None:
        request.scope.setdefault("state", {})["radar_read_session"] = session


def personal_page_error() -> PageError:
    return PageError(
        401,
        "请登录 Airflow 查看关注设置",
        "关注设置（关注列表、过滤规则、从你的反馈学到的偏好）是个人信息，推送链接和由它打开的浏览都不能查看。"
        "登录 Airflow 后即可查看。",
        login=True,
    )


async def require_reader(request: Request) -> Reader:
    """The one access rule of every page.

    - ``exp`` or ``sig`` in the query: the link must verify for exactly this page, else 403 (a tampered,
      expired, malformed or other-page link is refused outright, whoever clicks it; the page offers the
      unsigned URL); a valid one opens a read session (the middleware sets its cookie);
    - otherwise an authenticated Airflow user; else, for reading (GET, HEAD), a valid read session for a page
      in its reach; else 401 with a page that says to log in to Airflow;
    - whose role may read the radar DAG, else 403.

    A personal page (the profile) is never opened by a link or a session: 401, with the reason and the login.
    """
    params = request.query_params
    path = app_path(request)
    page = page_of(path)
    if "sig" in params or "exp" in params:
        if page in PERSONAL_PAGES:
            raise personal_page_error()
        settings = await run_in_threadpool(request.app.state.radar.settings)
        reader = _signed_reader(request, path, settings)
        if reader is not None:
            _open_session(request, settings, reader)
            return reader
        raise PageError(
            403,
            "链接无效或已过期",
            "这个链接的签名不正确、已经过期，或者不属于这个页面。请使用最新推送中的链接，或登录 Airflow 后打开本页。",
            login=True,
        )
    user = await airflow_user(request)
    if user is None and page in PERSONAL_PAGES:
        raise personal_page_error()
    if user is None and request.method in ("GET", "HEAD") and READ_COOKIE in request.cookies:
        settings = await run_in_threadpool(request.app.state.radar.settings)
        session = session_reader(request, settings, page)
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


async def may_edit(request: Request, reader: Reader) -> bool:
    """Whether this reader may change the profile: an Airflow user (never a link) with edit permission."""
    return reader.user is not None and not reader.signed and await _permitted(request, reader.user, may_edit_radar)


EDIT_REFUSED = (f"你的 Airflow 账号可以查看机会雷达，但没有编辑 DAG {DAG_ID} 的权限。关注设置决定哪些文章送去分析、"
                "花多少模型费用，并写进分析提示词，修改它需要编辑权限，请联系 Airflow 管理员。")


async def require_editor(request: Request, reader: ReaderDep) -> Reader:
    """The rule of every write of the reader's settings: an Airflow user whose role may edit the radar DAG."""
    if reader.signed:
        raise PageError(401, "请登录后修改", "通过推送链接访问时不能修改关注设置，登录 Airflow 后才能修改。", login=True)
    if not await may_edit(request, reader):
        raise PageError(403, "没有修改权限", EDIT_REFUSED, airflow_home=True)
    return reader


EditorDep = Annotated[Reader, Depends(require_editor)]


def user_name(user: Any) -> str:
    """An Airflow user's name for the record (who saved the profile, who voted)."""
    for attr in ("get_name", "get_id"):
        method = getattr(user, attr, None)
        if callable(method):
            try:
                return str(method())[:100]
            except Exception:  # a name is for the record only
                continue
    return str(getattr(user, "username", "") or "airflow user")[:100]
