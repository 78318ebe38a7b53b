"""The report pages as a FastAPI app, served by the Airflow api-server under ``/radar`` (plugins/radar_plugin.py).

Routes (paths relative to the mount point):

- ``/``                    overview: health at a glance (last slots, next slot, today's alerts, WeRSS and
                           DeepSeek, spend against the budget, 30 days of spend), today's slots, the daily
                           push, the last 14 days, WeRSS account health;
- ``/daily/{YYYY-MM-DD}``  one day's report: digest, top opportunities, every analysis, failures, cost;
- ``/analysis/{id}``       one analysis: article, score, opportunities, model usage and cost;
- ``/static/icon.svg``     the navigation icon (public).

Access: an Airflow user whose role may read the radar DAG, or a signed link (``?exp=&sig=``) for exactly the
requested page, as sent in pushes. One dependency, :func:`~include.radar.web.auth.require_reader`, decides
for every page route (auth.py). Whatever a request carries, the answer is a page: a path that names no
report (an impossible date or id) is a 404, a bad link a 403, never a 500.

Nothing here touches the database, the network or Airflow at import time: settings (server.py: environment,
then Airflow Variables), the database URL and Airflow's security module are resolved on the first request,
so ``app = create_app()`` is safe to import from the plugin in every Airflow component. Importing this
module does one thing to the process: it keeps link signatures out of uvicorn's access log (server.py).
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode
from zoneinfo import ZoneInfo

import psycopg
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from include.radar import db, focus, ranking, search, signing, store, weekly
from include.radar.settings import Settings, SettingsError
from include.radar.slots import SHANGHAI
from include.radar.web import feedback, health, views
from include.radar.web.auth import (
    AIRFLOW_LOGIN_PATH,
    READ_COOKIE,
    PageError,
    Reader,
    ReaderDep,
    airflow_user,
    app_path,
    local_path,
    require_reader,
)
from include.radar.web.server import install_access_log_filter, redact_scope_query, server_settings
from include.radar.web.views import profile as profile_views
from include.radar.web.views import search as search_views
from include.radar.web.views import trends as trend_views

log = logging.getLogger(__name__)

URL_PREFIX = "/radar"


class AddTrailingSlash:
    """A root middleware (the plugin's ``fastapi_root_middlewares``): ``/radar`` without its slash would reach
    Airflow's catch-all route and show an empty Airflow page; it is redirected to ``/radar/``, query kept."""

    def __init__(self, app: ASGIApp, prefix: str = URL_PREFIX) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        root = scope.get("root_path", "") if scope["type"] == "http" else ""
        if scope["type"] == "http" and scope.get("path") in (self.prefix, f"{root}{self.prefix}"):
            query = scope.get("query_string", b"").decode("latin-1")
            location = f"{root}{self.prefix}/" + (f"?{query}" if query else "")
            await Response(status_code=307, headers={"location": location})(scope, receive, send)
            return
        await self.app(scope, receive, send)
TEMPLATES_DIR = Path(__file__).with_name("templates")
FRAME_JS = (Path(__file__).with_name("static") / "frame.js").read_text(encoding="utf-8")
RECENT_DAYS = 14
# Settings come from Airflow Variables (a metadata-DB read each) or the environment: cache them briefly.
SETTINGS_TTL_SECONDS = 60.0

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; "
        "frame-ancestors 'self'; "
        "base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    # pushed links carry their signature in the query string: never leak it to another site
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "SAMEORIGIN",
}

_DAY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ID_RE = re.compile(r"[0-9]{1,19}")
_MAX_BIGINT = 2**63 - 1
# Report pages exist from the radar's era to a year ahead; any other date is "no such page", not an error.
FIRST_DAY = date(2000, 1, 1)
DAYS_AHEAD = 366

ICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#f59e0b" '
    'stroke-width="2" stroke-linecap="round"><circle cx="12" cy="12" r="9"/><circle cx="12" cy="12" r="5"/>'
    '<path d="M12 12 19 5"/><circle cx="12" cy="12" r="1.5" fill="#f59e0b"/></svg>'
)


# ------------------------------------------------------------------------------------------------ errors


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


    @contextmanager
    def connect_write(self) -> Iterator[psycopg.Connection]:
        """A connection that may write: the reader's own data only (their profile, their feedback)."""
        self._refresh()
        assert self._resolved_url is not None
        with db.connect(self._resolved_url) as conn:
            conn.execute("SET LOCAL statement_timeout = '5s'")
            yield conn


def _runtime(request: Request) -> Runtime:
    return request.app.state.radar


def _zone(settings: Settings) -> ZoneInfo:
    """Slots, report days and pages all live in Asia/Shanghai (the seed's fixed business timezone)."""
    return SHANGHAI


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
            read_session=bool(reader is not None and reader.session),
            **context,
        )
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return HTMLResponse(html, status_code=status, headers=headers)

    def error(
        self,
        request: Request,
        status: int,
        title: str,
        message: str,
        *,
        login: bool = False,
        airflow_home: bool = False,
    ) -> HTMLResponse:
        """The error page. With ``login``: Airflow's login, coming back to this page (unsigned) afterwards.

        The way back is a path on this host built from the mount point and the request path only, never from
        the Host header or an absolute URL: Airflow's login accepts any ``next`` on the host the request
        named, so a forged Host would otherwise send the reader elsewhere after logging in.
        """
        links = _links(request)
        here = local_path(links.root + app_path(request))
        return self.render(
            request,
            "error.html",
            status=status,
            links=links,
            title=title,
            message=message,
            login=login,
            airflow_home=airflow_home,
            login_url=f"{local_path(links.airflow_root + AIRFLOW_LOGIN_PATH)}?{urlencode({'next': here})}",
            unsigned_url=here if login and request.query_params else None,
            status_code=status,
        )


# ------------------------------------------------------------------------------------------- middleware


def _read_cookie(scope: Scope, value: str, max_age: int) -> str:
    """The read session's Set-Cookie (auth.py): this app's path only, script-proof, sent on top-level visits."""
    path = scope.get("root_path", "") or "/"
    secure = "; Secure" if scope.get("scheme") == "https" else ""
    return f"{READ_COOKIE}={value}; Max-Age={max_age}; Path={path}; HttpOnly; SameSite=Lax{secure}"


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
                redact_scope_query(scope)  # the page is answered: access logs read the scope from here on
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                session = scope.get("state", {}).get("radar_read_session")
                if session is not None and message["status"] < 400:
                    headers.append("set-cookie", _read_cookie(scope, *session))
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


def parse_day(text: str, today: date) -> date:
    """The report date a ``/daily/`` path names; anything else (not a date, 2026-02-30, year 1) is a 404.

    The range also keeps the page's own date arithmetic (previous and next day) far from ``date``'s limits.
    """
    if _DAY_RE.fullmatch(text):
        try:
            day = date.fromisoformat(text)
        except ValueError:
            pass
        else:
            if FIRST_DAY <= day <= today + timedelta(days=DAYS_AHEAD):
                return day
    raise PageError(
        404, "没有这一天的日报", f"日报地址应为 /daily/YYYY-MM-DD，日期在 {FIRST_DAY.isoformat()} 到明年之间，例如 /daily/2026-01-08。"
    )


def parse_id(text: str) -> int:
    """The analysis id an ``/analysis/`` path names (a positive bigint); anything else is a 404."""
    if _ID_RE.fullmatch(text) and 0 < int(text) <= _MAX_BIGINT:
        return int(text)
    raise PageError(404, "找不到这条分析", "分析地址应为 /analysis/ 加正整数编号，例如 /analysis/12。")


# ---------------------------------------------------------------------------------------------------- app


def _day_signer(reader: Reader, settings: Settings) -> Callable[[str], str] | None:
    """On a signed daily page: sign links with the same expiry as the page's own link (never longer), so a
    phone that keeps no cookie still opens them. In a read session the cookie carries the reader instead."""
    if not reader.signed or reader.session or not reader.signed_exp or settings.link_secret is None:
        return None
    secret = settings.link_secret.get_secret_value()
    expires = datetime.fromtimestamp(reader.signed_exp, UTC)
    return lambda path: urlencode(signing.sign(path, secret, expires, 0))


CSRF_COOKIE = "radar_csrf"
SEEN_COOKIE = "radar_seen"  # when this browser last opened the overview: what is new since then
TOP_LISTED = 5
ENTITY_LISTED = 100
NEW_LISTED = 10


def _last_seen(request: Request, now: datetime) -> datetime | None:
    """The previous overview visit of this browser; a cookie that is no plausible time is no visit."""
    value = request.cookies.get(SEEN_COOKIE, "")
    if not (value.isascii() and value.isdigit() and len(value) <= 12):
        return None
    seen = datetime.fromtimestamp(int(value), UTC)
    return seen if now - timedelta(days=400) <= seen <= now else None
_CSRF_RE = re.compile(r"[A-Za-z0-9_-]{43}")
MAX_PROFILE_BODY = 64 * 1024
REOPEN_HOURS = 72  # a changed rule gives back what it excluded from the articles a slot still looks at


def _here(request: Request, links: views.Links) -> str:
    """This page's own path and query (a signed page's signature included): where a form comes back to."""
    query = request.url.query
    return local_path(links.root + app_path(request)) + (f"?{query}" if query else "")


def _feedback_forms(request: Request, reader: Reader, settings: Settings, links: views.Links) -> feedback.Forms:
    secret = settings.link_secret.get_secret_value() if settings.link_secret else None
    return feedback.Forms(secret, _runtime(request).clock(), links.root, _here(request, links),
                          reader.signed_exp if reader.signed else None)


async def _read_body(request: Request, limit: int) -> bytes:
    """The request body, refused past ``limit`` bytes without reading the rest."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PageError(400, "请求无效", "提交的内容过大。")
    return body


def _user_name(user: Any) -> str:
    for attr in ("get_name", "get_id"):
        method = getattr(user, attr, None)
        if callable(method):
            try:
                return str(method())[:100]
            except Exception:  # noqa: BLE001 - a name is for the record only
                continue
    return str(getattr(user, "username", "") or "airflow user")[:100]


def create_app(
    settings_loader: Callable[[], Settings] = server_settings,
    db_url: str | None = None,
    *,
    clock: Callable[[], datetime] | None = None,
) -> FastAPI:
    """Build the report app. ``db_url`` pins the database (tests, benchmarks); ``clock`` pins "now".

    Authentication and the permission check are Airflow's; tests replace them through
    ``app.dependency_overrides`` (``get_user`` and :func:`~include.radar.web.auth.may_read_radar`).
    """
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
        return pages.error(
            request, exc.status, exc.title, exc.message, login=exc.login, airflow_home=exc.airflow_home
        )

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

    @app.get("/static/frame.js", include_in_schema=False)
    def frame_script() -> Response:
        """The pages' one script: links that work inside Airflow's sandboxed iframe (static/frame.js)."""
        return Response(FRAME_JS, media_type="text/javascript", headers={"Cache-Control": "public, max-age=3600"})

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
        links = _links(request)
        currency = settings.deepseek_currency
        with runtime.connect() as conn:
            runs = store.slot_runs_for_day(conn, today)
            notes = store.daily_notifications(conn, today)
            days = store.recent_days(conn, today, RECENT_DAYS, settings.push_score_threshold)
            accounts = store.accounts(conn)
            by_day = store.spend_by_day(
                conn, today - timedelta(days=max(RECENT_DAYS, health.SPEND_DAYS) - 1), today, currency)
            run_spend = store.slot_spend(conn, [r["id"] for r in runs])
            health_view = health.gather(conn, settings, now=now, tz=tz, links=links, spend_by_day=by_day)
            weights = ranking.learn(store.feedback_for_ranking(conn, now))
            learned_more, learned_less = weights.learned()
            today_rows = ranking.annotate(store.day_analyses(conn, today), weights)
            last_seen = _last_seen(request, now)
            new_rows, new_total = store.analyses_since(conn, last_seen, NEW_LISTED) if last_seen else ([], 0)
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
            slot_spend=run_spend,
            day_spend=by_day,
            currency=currency,
        )
        top = [c for c in views.analysis_cards(today_rows, threshold=settings.push_score_threshold, tz=tz, links=links)
               if not c.reused][:TOP_LISTED]
        fresh = views.analysis_cards(ranking.annotate(new_rows, weights), threshold=settings.push_score_threshold,
                                     tz=tz, links=links)
        response = pages.render(
            request, "overview.html", settings=settings, reader=reader, links=links, page=page, health=health_view,
            learned_more=learned_more, learned_less=learned_less, top_today=top,
            since=views.local_time(last_seen, tz) if last_seen else None, new_cards=fresh, new_total=new_total,
            new_limit=NEW_LISTED,
        )
        response.set_cookie(SEEN_COOKIE, str(int(now.timestamp())), max_age=366 * 86400, httponly=True,
                            samesite="lax", path=links.root or "/", secure=request.url.scheme == "https")
        return response

    @router.get("/daily/{day}", response_class=HTMLResponse)
    def daily(request: Request, day: str, reader: ReaderDep) -> HTMLResponse:
        runtime = _runtime(request)
        settings = runtime.settings()
        tz = _zone(settings)
        now = runtime.clock()
        report_day = parse_day(day, now.astimezone(tz).date())
        with runtime.connect() as conn:
            report = store.get_daily_report(conn, report_day)
            analyses = store.day_analyses(conn, report_day)
            failures = store.day_failures(conn, report_day)
            runs = store.slot_runs_for_day(conn, report_day)
            notes = store.daily_notifications(conn, report_day)
            spent = store.day_spend(conn, report_day, settings.deepseek_currency)
            run_spend = store.slot_spend(conn, [r["id"] for r in runs])
            budget_deferred = store.day_budget_deferred(conn, report_day)
            weights = ranking.learn(store.feedback_for_ranking(conn, now))
            verdicts = store.feedback_of(conn, [a["id"] for a in analyses])
            excluded = store.excluded_items(conn, [r["id"] for r in runs])
        histogram, histogram_text = trend_views.score_histogram(
            [a["score"] for a in analyses if not a.get("reused_from_id")], settings.push_score_threshold)
        analyses = ranking.order(ranking.annotate(analyses, weights))  # the reader's order, as the report's
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
            cost=health.day_cost(spent, settings.deepseek_currency, report),
            currency=settings.deepseek_currency,
            slot_spend=run_spend,
            budget_deferred=budget_deferred,
        )
        forms = _feedback_forms(request, reader, settings, links)
        buttons = {a["id"]: forms.buttons(a["id"], verdicts.get(a["id"])) for a in analyses}
        return pages.render(request, "daily.html", settings=settings, reader=reader, links=links, page=page,
                            feedback_forms=buttons, excluded=profile_views.excluded_views(excluded, tz),
                            histogram=histogram if analyses else None, histogram_text=histogram_text,
                            week_url=links.weekly(weekly.week_of(report_day)[0]))

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
            spend = store.item_spend(conn, row["content_item_id"])
            members = store.event_members(conn, [row["event_id"]]) if row["event_id"] else []
            weights = ranking.learn(store.feedback_for_ranking(conn, runtime.clock()))
            verdict = store.feedback_of(conn, [wanted]).get(wanted)
        links = _links(request)
        page = views.analysis_page(
            row=row,
            opportunities=opportunities,
            reused=reused,
            threshold=settings.push_score_threshold,
            tz=_zone(settings),
            links=links,
            total_cost=health.item_total(row, spend),
            event_members=members,
        )
        return pages.render(
            request, "analysis.html", settings=settings, reader=reader, links=links, page=page,
            rank=profile_views.rank_view(row, weights),
            boosts={"watch": ranking.WATCH_BOOST, "interest": ranking.INTEREST_BOOST, "cap": ranking.FEEDBACK_CAP},
            feedback_buttons=_feedback_forms(request, reader, settings, links).buttons(wanted, verdict),
        )

    @router.get("/weekly", include_in_schema=False)
    def this_week(request: Request, reader: ReaderDep) -> Response:
        runtime = _runtime(request)
        today = runtime.clock().astimezone(_zone(runtime.settings())).date()
        monday, _ = weekly.week_of(today)
        target = _links(request).weekly(monday)
        query = request.url.query
        return RedirectResponse(target + (f"?{query}" if query else ""), status_code=307)

    @router.get("/weekly/{monday}", response_class=HTMLResponse)
    def weekly_page(request: Request, monday: str, reader: ReaderDep) -> HTMLResponse:
        runtime = _runtime(request)
        settings = runtime.settings()
        today = runtime.clock().astimezone(_zone(settings)).date()
        week = parse_day(monday, today)
        if week.weekday() != 0:
            raise PageError(404, "没有这一周的周报", f"周报地址应为 /weekly/ 加当周星期一的日期，例如 /weekly/{weekly.week_of(week)[0]}。")
        with runtime.connect() as conn:
            report = store.get_weekly_report(conn, week)
        links = _links(request)
        data = (report or {}).get("digest_json") or {}
        tops = []
        for t in data.get("top_opportunities") or []:
            if isinstance(t, dict) and isinstance(t.get("analysis_id"), int) and t["analysis_id"] > 0:
                tops.append({"url": links.analysis(t["analysis_id"]), "title": str(t.get("title") or ""),
                             "reason": str(t.get("reason") or ""),
                             "sources": [x for x in t.get("sources") or [] if isinstance(x, str)]})
        end = week + timedelta(days=6)
        return pages.render(
            request, "weekly.html", settings=settings, reader=reader, links=links, monday=week, report=report,
            span=f"{week.isoformat()} 至 {end.month}月{end.day}日", tops=tops,
            fallback=bool(report) and data.get("source") == "fallback", report_error=(report or {}).get("error") or "",
            digest_html=views.render_markdown(report["digest_md"], views.digest_link_rewriter(
                settings.report_base_url, links)) if report and report["digest_md"] else None,
            watchlist=[w for w in data.get("watchlist") or [] if isinstance(w, str)][:8],
            days=[(f"{d.month}/{d.day} 周{'一二三四五六日'[d.weekday()]}", links.daily(d))
                  for d in (week + timedelta(days=i) for i in range(7)) if d <= today],
            prev_url=links.weekly(week - timedelta(days=7)),
            next_url=links.weekly(week + timedelta(days=7)) if end < today else None,
            past=end < today, daily_slot=settings.daily_slot,
        )

    @router.get("/entity/{name:path}", response_class=HTMLResponse)  # a name may hold "/" (A/H 股)
    def entity(request: Request, name: str, reader: ReaderDep) -> HTMLResponse:
        wanted = trend_views.parse_entity(name)
        runtime = _runtime(request)
        settings = runtime.settings()
        tz = _zone(settings)
        today = runtime.clock().astimezone(tz).date()
        with runtime.connect() as conn:
            rows, total = store.entity_analyses(conn, wanted, ENTITY_LISTED)
            if not rows:
                raise PageError(404, "没有这个标的", f"没有分析提到「{wanted}」。标的名称来自分析页“投资机会”下列出的标的。")
            daily = store.entity_daily(conn, wanted, today - timedelta(days=trend_views.DAYS - 1), today)
        links = _links(request)
        page = trend_views.entity_page(wanted, rows, total, daily, today, links, tz)
        return pages.render(request, "entity.html", settings=settings, reader=reader, links=links, page=page,
                            threshold=settings.push_score_threshold)

    @router.get("/trends", response_class=HTMLResponse)
    def trends(request: Request, reader: ReaderDep) -> HTMLResponse:
        runtime = _runtime(request)
        settings = runtime.settings()
        today = runtime.clock().astimezone(_zone(settings)).date()
        first = today - timedelta(days=trend_views.DAYS - 1)
        with runtime.connect() as conn:
            topics = store.topic_daily(conn, first, today)
            entities = store.top_entities(conn, first, today, 20)
            scores = store.day_scores(conn, today)
        links = _links(request)
        histogram, histogram_text = trend_views.score_histogram(scores, settings.push_score_threshold)
        return pages.render(request, "trends.html", settings=settings, reader=reader, links=links,
                            page=trend_views.trends_page(topics, entities, today, links), histogram=histogram,
                            histogram_text=histogram_text, today=today)

    @router.get("/search", response_class=HTMLResponse)
    def search_page(request: Request, reader: ReaderDep) -> HTMLResponse:
        runtime = _runtime(request)
        settings = runtime.settings()
        tz = _zone(settings)
        form = search_views.parse_form(request.query_params)
        links = _links(request)
        tsquery, terms = search.query(form.q) if form.q else ("", [])
        rows, total = [], 0
        with runtime.connect() as conn:
            accounts = store.account_names(conn)
            if tsquery:
                rows, total = store.search_articles(conn, tsquery, form.filters(tz), search_views.PAGE_SIZE,
                                                    (form.page - 1) * search_views.PAGE_SIZE, terms[0] if terms else "")
        pages_total = min(search_views.MAX_PAGE, -(-total // search_views.PAGE_SIZE))
        return pages.render(
            request, "search.html", settings=settings, reader=reader, links=links, form=form,
            searched=bool(form.q), unsearchable=bool(form.q) and not tsquery, total=total,
            hits=search_views.hits(rows, terms, tz, links), accounts=accounts, bands=search_views.BAND_LABELS,
            threshold=settings.push_score_threshold,
            prev_url=form.url(links, form.page - 1) if form.page > 1 else None,
            next_url=form.url(links, form.page + 1) if form.page < pages_total else None,
            page_label=f"第 {form.page} / {max(pages_total, 1)} 页",
        )

    @router.get("/profile", response_class=HTMLResponse)
    def profile(request: Request, reader: ReaderDep) -> HTMLResponse:
        reopened = request.query_params.get("reopened", "")
        return _profile_response(request, reader, saved=request.query_params.get("saved") == "1",
                                 reopened=int(reopened) if reopened.isdigit() and len(reopened) < 6 else 0)

    @router.post("/profile", response_class=HTMLResponse)
    async def save_profile(request: Request, reader: ReaderDep) -> Response:
        """Save the profile: an Airflow user only (a signed push link reads, never writes), with the form's
        CSRF token equal to its cookie (a form on another site can send the cookie, never read it)."""
        if reader.signed:
            raise PageError(403, "请登录后修改", "通过推送链接访问时只能查看关注设置，登录 Airflow 后才能修改。", login=True)
        body = await _read_body(request, MAX_PROFILE_BODY)
        try:
            fields = parse_qs(body.decode("utf-8"), max_num_fields=20)
        except (UnicodeDecodeError, ValueError):
            raise PageError(400, "请求无效", "提交的内容格式不正确。") from None
        form = {k: v[0] for k, v in fields.items() if v}
        cookie = request.cookies.get(CSRF_COOKIE, "")
        if not (_CSRF_RE.fullmatch(cookie) and secrets.compare_digest(form.get("csrf", ""), cookie)):
            raise PageError(403, "表单已过期", "请重新打开关注设置页面后再保存（表单校验失败）。")
        typed = {name: form.get(name, "") for name in profile_views.FIELDS}
        try:
            profile = focus.Profile.build(**{k: [v] for k, v in typed.items()})
        except focus.ProfileError as exc:
            return await run_in_threadpool(
                _profile_response, request, reader, errors=exc.errors, typed=typed, status=400)
        lists = {"companies": list(profile.companies), "tickers": list(profile.tickers),
                 "sectors": list(profile.sectors), "interests": list(profile.interests), "rules": profile.rule_lines()}

        def write() -> int:
            runtime = _runtime(request)
            with runtime.connect_write() as conn:
                store.save_profile(conn, lists, _user_name(reader.user))
                # what the old rules excluded and the new ones let through is analysed by the next slot
                return store.reopen_excluded(conn, runtime.clock() - timedelta(hours=REOPEN_HOURS),
                                             lambda title, text: profile.exclusion(title, text) is not None,
                                             focus.MATCH_CHARS)

        reopened = await run_in_threadpool(write)
        return RedirectResponse(_links(request).profile() + f"?saved=1&reopened={reopened}", status_code=303)

    def _profile_response(request: Request, reader: Reader, *, saved: bool = False, errors: list[str] | None = None,
                          typed: dict[str, str] | None = None, status: int = 200, reopened: int = 0) -> HTMLResponse:
        runtime = _runtime(request)
        settings = runtime.settings()
        links = _links(request)
        with runtime.connect() as conn:
            current = focus.from_row(store.get_profile(conn))
            weights = ranking.learn(store.feedback_for_ranking(conn, runtime.clock()))
        cookie = request.cookies.get(CSRF_COOKIE, "")
        token = cookie if _CSRF_RE.fullmatch(cookie) else secrets.token_urlsafe(32)
        page = profile_views.profile_page(
            profile=current, weights=weights, action=links.profile(), csrf=token, read_only=reader.signed,
            tz=_zone(settings), saved=saved, errors=errors, typed=typed, reopened=reopened)
        response = pages.render(request, "profile.html", status=status, settings=settings, reader=reader,
                                links=links, page=page)
        response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path=links.root or "/",
                            secure=request.url.scheme == "https")
        return response

    @app.post("/analysis/{analysis_id}/feedback", include_in_schema=False)
    async def vote(request: Request, analysis_id: str) -> Response:
        """A 👍 / 👎 / 🤷 from a page: its signed action is the authority (web/feedback.py), no login needed."""
        wanted = parse_id(analysis_id)
        runtime = _runtime(request)
        settings = await run_in_threadpool(runtime.settings)
        secret = settings.link_secret.get_secret_value() if settings.link_secret else None
        body = await _read_body(request, feedback.MAX_BODY)
        cast = feedback.parse_vote(body, wanted, secret, runtime.clock(), _links(request).root)
        user = await airflow_user(request)
        via = f"user:{_user_name(user)}" if user is not None else "link"

        def write() -> str:
            with runtime.connect_write() as conn:
                return store.set_feedback(conn, wanted, cast.verdict, via)

        if await run_in_threadpool(write) == "missing":
            raise PageError(404, "找不到这条分析", f"分析 #{wanted} 不存在，可能已被删除或链接有误。")
        return RedirectResponse(f"{cast.back}#fb-{wanted}", status_code=303)

    app.include_router(router)
    return app


app = create_app()
install_access_log_filter()
