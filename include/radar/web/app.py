"""The report pages as a FastAPI app, served by the Airflow api-server under ``/radar`` (plugins/radar_plugin.py).

Routes (paths relative to the mount point):

- ``/``                    overview: today's slots, the daily push, the last 14 days, WeRSS account health;
- ``/daily/{YYYY-MM-DD}``  one day's report: digest, top opportunities, every analysis, failures;
- ``/analysis/{id}``       one analysis: article, score, opportunities, model usage;
- ``/static/icon.svg``     the navigation icon (public).

Access: an authenticated Airflow user (Airflow's own ``get_user``: the UI's ``_token`` cookie or a Bearer
token), or a signed link (``?exp=&sig=``) for exactly the requested page, as sent in pushes. One dependency,
:func:`require_reader`, decides for every page route.

Nothing here touches the database, the network or Airflow at import time: settings, the database URL and
Airflow's security module are resolved on the first request, so ``app = create_app()`` is safe to import
from the plugin in every Airflow component.
"""

from __future__ import annotations

import inspect
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import cache
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import psycopg
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from include.radar import db, signing, store
from include.radar.settings import Settings, SettingsError, load_settings
from include.radar.slots import SHANGHAI
from include.radar.web import views

log = logging.getLogger(__name__)

URL_PREFIX = "/radar"
TEMPLATES_DIR = Path(__file__).with_name("templates")
RECENT_DAYS = 14
# Settings come from Airflow Variables (a metadata-DB read each) or the environment: cache them briefly.
SETTINGS_TTL_SECONDS = 60.0

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'self'; "
        "base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    # pushed links carry their signature in the query string: never leak it to another site
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "SAMEORIGIN",
}

_DAY_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ID_RE = re.compile(r"^[0-9]{1,19}$")
_MAX_BIGINT = 2**63 - 1

ICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#f59e0b" '
    'stroke-width="2" stroke-linecap="round"><circle cx="12" cy="12" r="9"/><circle cx="12" cy="12" r="5"/>'
    '<path d="M12 12 19 5"/><circle cx="12" cy="12" r="1.5" fill="#f59e0b"/></svg>'
)


# ------------------------------------------------------------------------------------------------ errors


class PageError(Exception):
    """An error the reader should see as a page of its own (400, 401, 403, 404, 503) rather than a trace."""

    def __init__(self, status: int, title: str, message: str, *, login: bool = False) -> None:
        super().__init__(f"{status} {title}")
        self.status = status
        self.title = title
        self.message = message
        self.login = login


_HTTP_TITLES = {
    400: ("请求无效", "请求的参数格式不正确。"),
    404: ("页面不存在", "没有这个页面，请从总览页重新进入。"),
    405: ("不支持的请求", "该页面只支持浏览（GET）。"),
}


# ------------------------------------------------------------------------------------------------ runtime


class Runtime:
    """Per-app state resolved lazily: settings (briefly cached), the database URL, the clock.

    Lazy because the plugin module is imported by every Airflow component at start-up, where reaching the
    database or reading Variables would be wrong; cached because a page must not pay for either each time.
    """

    def __init__(
        self, settings_loader: Callable[[], Settings], db_url: str | None, clock: Callable[[], datetime]
    ) -> None:
        self._settings_loader = settings_loader
        self._db_url = db_url
        self.clock = clock
        self._lock = threading.Lock()
        self._settings: Settings | None = None
        self._resolved_url: str | None = None
        self._loaded_at = 0.0

    def _refresh(self) -> None:
        with self._lock:
            if self._settings is not None and time.monotonic() - self._loaded_at < SETTINGS_TTL_SECONDS:
                return
            settings = self._settings_loader()
            url = self._db_url
            if url is None:
                try:
                    url = db.database_url(settings.db_conn_id)
                except Exception as exc:  # noqa: BLE001 - any failure to locate it is "unreachable"
                    raise db.DatabaseUnavailable(f"cannot locate the radar database: {type(exc).__name__}") from exc
            self._settings, self._resolved_url, self._loaded_at = settings, url, time.monotonic()

    def settings(self) -> Settings:
        self._refresh()
        assert self._settings is not None
        return self._settings

    @contextmanager
    def connect(self) -> Iterator[psycopg.Connection]:
        """One read-only connection for the whole request, with a statement timeout as a backstop."""
        self._refresh()
        assert self._resolved_url is not None
        with db.connect(self._resolved_url) as conn:
            conn.execute("SET TRANSACTION READ ONLY; SET LOCAL statement_timeout = '5s'")
            yield conn


def _runtime(request: Request) -> Runtime:
    return request.app.state.radar


def _zone(settings: Settings) -> ZoneInfo:
    """Slots, report days and pages all live in Asia/Shanghai (the seed's fixed business timezone)."""
    return SHANGHAI


# -------------------------------------------------------------------------------------------------- auth


@dataclass(frozen=True)
class Reader:
    """Who is reading: an Airflow user, or the holder of a signed link valid for ``signed_path`` only."""

    user: Any = None
    signed_path: str | None = None
    signed_exp: int | None = None

    @property
    def signed(self) -> bool:
        return self.signed_path is not None


def app_path(request: Request) -> str:
    """The request path relative to the app's mount point: what a link signature covers."""
    path: str = request.scope["path"]
    root: str = request.scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("/", ""):
        path = path[len(root) :]
    return path or "/"


@cache
def _airflow_security() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """Airflow's ``get_user`` and its Bearer scheme, imported on first use (not when the plugin loads)."""
    try:
        from airflow.api_fastapi.core_api.security import bearer_scheme, get_user
    except Exception:  # noqa: BLE001 - Airflow missing or broken: only signed links can work
        log.warning("Airflow's API security module is unavailable; only signed links are accepted", exc_info=True)
        return None
    return get_user, bearer_scheme


async def _airflow_user(request: Request) -> Any:
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


async def require_reader(request: Request) -> Reader:
    """The one access rule of every page.

    - ``exp`` or ``sig`` in the query: the link must verify for exactly this page, else 403 (a tampered,
      expired or other-page link is refused outright, whoever clicks it; the page offers the unsigned URL);
    - otherwise an authenticated Airflow user, else 401 with a page that says to log in to Airflow.
    """
    params = request.query_params
    path = app_path(request)
    if "sig" in params or "exp" in params:
        runtime = _runtime(request)
        settings = await run_in_threadpool(runtime.settings)
        secret = settings.link_secret.get_secret_value() if settings.link_secret else None
        exp, sig = params.get("exp"), params.get("sig")
        if signing.verify(path, exp, sig, secret, runtime.clock()):
            return Reader(signed_path=path, signed_exp=int(exp or 0))
        raise PageError(
            403,
            "链接无效或已过期",
            "这个链接的签名不正确、已经过期，或者不属于这个页面。请使用最新推送中的链接，或登录 Airflow 后打开本页。",
            login=True,
        )
    user = await _airflow_user(request)
    if user is None:
        raise PageError(
            401, "请先登录 Airflow", "机会雷达的页面需要登录 Airflow 后查看（或使用推送消息中的签名链接）。", login=True
        )
    return Reader(user=user)


# what a page route declares to get the reader (FastAPI runs require_reader once per request)
ReaderDep = Annotated[Reader, Depends(require_reader)]


# ------------------------------------------------------------------------------------------- rendering


def _environment() -> Environment:
    """Templates compiled once per app; StrictUndefined turns a template typo into an error, not a blank."""
    return Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,  # every template is HTML; article and LLM text must never become markup
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )


def _links(
    request: Request, signer: Callable[[str], str] | None = None, signable: frozenset[int] = frozenset()
) -> views.Links:
    root = request.scope.get("root_path", "").rstrip("/")
    airflow_root = root[: -len(URL_PREFIX)] if root.endswith(URL_PREFIX) else ""
    return views.Links(root=root, airflow_root=airflow_root, signer=signer, signable=signable)


def _tz_label(settings: Settings | None) -> str:
    return "北京时间"


class Pages:
    """Renders templates into responses with the context every page shares (links, demo badge, signature)."""

    def __init__(self) -> None:
        self.env = _environment()

    def render(
        self,
        request: Request,
        template: str,
        *,
        status: int = 200,
        settings: Settings | None = None,
        reader: Reader | None = None,
        links: views.Links | None = None,
        **context: Any,
    ) -> HTMLResponse:
        signed_until = None
        if reader is not None and reader.signed and reader.signed_exp and settings is not None:
            signed_until = views.local_time(datetime.fromtimestamp(reader.signed_exp, UTC), _zone(settings))
        html = self.env.get_template(template).render(
            links=links or _links(request),
            demo=bool(settings and settings.demo_mode),
            tz_label=_tz_label(settings),
            signed_until=signed_until,
            **context,
        )
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return HTMLResponse(html, status_code=status, headers=headers)

    def error(self, request: Request, status: int, title: str, message: str, *, login: bool = False) -> HTMLResponse:
        unsigned = None
        if login and request.query_params:
            unsigned = request.scope.get("root_path", "").rstrip("/") + app_path(request)
        return self.render(
            request,
            "error.html",
            status=status,
            title=title,
            message=message,
            login=login,
            unsigned_url=unsigned,
            status_code=status,
        )


# ------------------------------------------------------------------------------------------- middleware


class SecurityHeadersMiddleware:
    """Adds the security headers to every response, and turns an unexpected exception into a 500 page.

    Pure ASGI (no BaseHTTPMiddleware overhead). It sits inside Starlette's ServerErrorMiddleware, so a crash
    is answered here with the same headers and no stack trace; the trace goes to the log.
    """

    def __init__(self, app: ASGIApp, pages: Pages) -> None:
        self.app = app
        self.pages = pages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                if "cache-control" not in headers:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            log.exception("report page %s failed", scope.get("path"))
            if started:
                raise
            response = self.pages.error(
                Request(scope), 500, "页面出错了", "生成页面时发生内部错误，已记录日志。请稍后刷新重试。"
            )
            await response(scope, receive, send_with_headers)


# ------------------------------------------------------------------------------------------------ parsing


def parse_day(text: str) -> date:
    if _DAY_RE.match(text):
        try:
            return date.fromisoformat(text)
        except ValueError:
            pass
    raise PageError(400, "日期格式不正确", "日期应为 YYYY-MM-DD 格式的有效日期，例如 2026-01-08。")


def parse_id(text: str) -> int:
    if _ID_RE.match(text) and 0 < int(text) <= _MAX_BIGINT:
        return int(text)
    raise PageError(400, "分析编号不正确", "分析编号应为正整数，例如 /analysis/12。")


# ---------------------------------------------------------------------------------------------------- app


def _day_signer(reader: Reader, settings: Settings) -> Callable[[str], str] | None:
    """On a signed daily page: sign links with the same expiry as the page's own link (never longer)."""
    if not reader.signed or not reader.signed_exp or settings.link_secret is None:
        return None
    secret = settings.link_secret.get_secret_value()
    expires = datetime.fromtimestamp(reader.signed_exp, UTC)
    return lambda path: urlencode(signing.sign(path, secret, expires, 0))


def create_app(
    settings_loader: Callable[[], Settings] = load_settings,
    db_url: str | None = None,
    *,
    clock: Callable[[], datetime] | None = None,
) -> FastAPI:
    """Build the report app. ``db_url`` pins the database (tests, benchmarks); ``clock`` pins "now"."""
    app = FastAPI(
        title="Opportunity Radar",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.radar = Runtime(settings_loader, db_url, clock or (lambda: datetime.now(UTC)))
    pages = Pages()
    app.add_middleware(SecurityHeadersMiddleware, pages=pages)

    @app.exception_handler(PageError)
    async def page_error(request: Request, exc: PageError) -> Response:
        return pages.error(request, exc.status, exc.title, exc.message, login=exc.login)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        title, message = _HTTP_TITLES.get(exc.status_code, ("请求失败", "请求无法完成。"))
        return pages.error(request, exc.status_code, title, message)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        title, message = _HTTP_TITLES[400]
        return pages.error(request, 400, title, message)

    @app.exception_handler(db.DatabaseUnavailable)
    @app.exception_handler(psycopg.OperationalError)
    async def database_down(request: Request, exc: Exception) -> Response:
        log.error("radar database unavailable: %s", exc)  # the log may name the host; the page must not
        return pages.error(request, 503, "雷达数据库暂时无法连接", "机会雷达的数据库当前无法访问，请稍后刷新。")

    @app.exception_handler(psycopg.errors.UndefinedTable)
    async def database_not_migrated(request: Request, exc: Exception) -> Response:
        log.error("radar database is not migrated: %s", exc)
        return pages.error(request, 503, "雷达数据库尚未初始化", "数据库中还没有机会雷达的表，请先运行数据库迁移。")

    @app.exception_handler(SettingsError)
    async def bad_settings(request: Request, exc: SettingsError) -> Response:
        log.error("radar settings are invalid: %s", exc)  # the message may quote a value: log only
        return pages.error(request, 500, "雷达配置无效", "机会雷达的配置有误，详情见 Airflow api-server 日志。")

    @app.get("/static/icon.svg", include_in_schema=False)
    def icon() -> Response:
        return Response(ICON_SVG, media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"})

    router = APIRouter(dependencies=[Depends(require_reader)])

    @router.get("/", response_class=HTMLResponse)
    def overview(request: Request, reader: ReaderDep) -> HTMLResponse:
        runtime = _runtime(request)
        settings = runtime.settings()
        tz = _zone(settings)
        now = runtime.clock()
        today = now.astimezone(tz).date()
        with runtime.connect() as conn:
            runs = store.slot_runs_for_day(conn, today)
            notes = store.daily_notifications(conn, today)
            days = store.recent_days(conn, today, RECENT_DAYS, settings.push_score_threshold)
            accounts = store.accounts(conn)
        links = _links(request)
        page = views.overview_page(
            today=today,
            now=now,
            tz=tz,
            slots=settings.schedule_slots,
            late_after_minutes=settings.late_after_minutes,
            threshold=settings.push_score_threshold,
            runs=runs,
            notifications=notes,
            days=days,
            accounts=accounts,
            links=links,
        )
        return pages.render(request, "overview.html", settings=settings, reader=reader, links=links, page=page)

    @router.get("/daily/{day}", response_class=HTMLResponse)
    def daily(request: Request, day: str, reader: ReaderDep) -> HTMLResponse:
        report_day = parse_day(day)
        runtime = _runtime(request)
        settings = runtime.settings()
        tz = _zone(settings)
        now = runtime.clock()
        with runtime.connect() as conn:
            report = store.get_daily_report(conn, report_day)
            analyses = store.day_analyses(conn, report_day)
            failures = store.day_failures(conn, report_day)
            runs = store.slot_runs_for_day(conn, report_day)
            notes = store.daily_notifications(conn, report_day)
        # a signed daily link opens that day's analyses too, and nothing else
        links = _links(request, _day_signer(reader, settings), frozenset(a["id"] for a in analyses))
        page = views.daily_page(
            day=report_day,
            today=now.astimezone(tz).date(),
            now=now,
            tz=tz,
            slots=settings.schedule_slots,
            late_after_minutes=settings.late_after_minutes,
            threshold=settings.push_score_threshold,
            report_base_url=settings.report_base_url,
            report=report,
            analyses=analyses,
            failures=failures,
            runs=runs,
            notifications=notes,
            links=links,
        )
        return pages.render(request, "daily.html", settings=settings, reader=reader, links=links, page=page)

    @router.get("/analysis/{analysis_id}", response_class=HTMLResponse)
    def analysis(request: Request, analysis_id: str, reader: ReaderDep) -> HTMLResponse:
        wanted = parse_id(analysis_id)
        runtime = _runtime(request)
        settings = runtime.settings()
        with runtime.connect() as conn:
            row = store.get_analysis(conn, wanted)
            if row is None:
                raise PageError(404, "找不到这条分析", f"分析 #{wanted} 不存在，可能已被删除或链接有误。")
            opportunities = store.opportunities_of(conn, wanted)
            reused = store.analysis_brief(conn, row["reused_from_id"]) if row["reused_from_id"] else None
        links = _links(request)
        page = views.analysis_page(
            row=row,
            opportunities=opportunities,
            reused=reused,
            threshold=settings.push_score_threshold,
            tz=_zone(settings),
            links=links,
        )
        return pages.render(request, "analysis.html", settings=settings, reader=reader, links=links, page=page)

    app.include_router(router)
    return app


app = create_app()
