"""The report pages as a FastAPI app, served by the Airflow api-server under ``/radar`` (plugins/radar_plugin.py).

:func:`create_app` builds it: the error pages, the static files, the routes of web/routes/ (one module per group
of pages, listed in docs/architecture.md), HEAD answered like GET. Who may read and write is web/auth.py's
and web/csrf.py's; what the routes share is web/resources.py's, web/pages.py's and web/inputs.py's; the security headers web/middleware.py's.
Whatever a request carries, the answer is a page (a 404, 403 or 400), never a 500.

Nothing here touches the database, the network or Airflow at import time (settings, the database and
Airflow's security module are resolved on the first request), so ``app = create_app()`` is safe to import in
every Airflow component; importing it keeps link signatures out of uvicorn's access log (server.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from include.radar.core import db
from include.radar.core.clock import SYSTEM, Clock
from include.radar.core.settings import Settings, SettingsError, load_settings, server_lookup
from include.radar.web.admission import Admission, AdmissionMiddleware
from include.radar.web.auth import PageError
from include.radar.web.middleware import SECURITY_HEADERS, SecurityHeadersMiddleware
from include.radar.web.pages import Pages
from include.radar.web.resources import AppResources
from include.radar.web.routes import evaluation, feed, history, profile, record, reports
from include.radar.web.server import install_access_log_filter

__all__ = ["app", "create_app"]

log = logging.getLogger(__name__)

FRAME_JS = (Path(__file__).with_name("static") / "frame.js").read_text(encoding="utf-8")
ICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#f59e0b" '
    'stroke-width="2" stroke-linecap="round"><circle cx="12" cy="12" r="9"/><circle cx="12" cy="12" r="5"/>'
    '<path d="M12 12 19 5"/><circle cx="12" cy="12" r="1.5" fill="#f59e0b"/></svg>'
)

_HTTP_TITLES = {
    400: ("请求无效", "请求的参数格式不正确。"),
    404: ("页面不存在", "没有这个页面，请从总览页重新进入。"),
    405: ("不支持的请求", "该页面只支持浏览（GET）。"),
}


def pages_settings() -> Settings:
    """The app's settings: the api-server has no task context, so the Variables are read through Airflow's
    server-side reader after the environment (settings.py's ``server_lookup``); otherwise a threshold or a
    ``link_secret`` kept as a Variable would be ignored, and every signed link refused."""
    return load_settings(server_lookup)


def create_app(
    settings_loader: Callable[[], Settings] | None = None,
    db_url: str | None = None,
    *,
    clock: Clock | None = None,
    admission: Admission | None = None,
) -> FastAPI:
    """Build the report app. ``db_url`` pins the database (tests, benchmarks); ``clock`` pins "now" (a test's
    :class:`~include.radar.core.clock.FixedClock`; the system's by default);
    ``admission`` the bounds of a flood (web/admission.py: how many requests at once, how often per link).

    Authentication and the permission check are Airflow's; tests replace them through
    ``app.dependency_overrides`` (``get_user``, :func:`~include.radar.web.auth.may_read_radar` and
    :func:`~include.radar.web.auth.may_edit_radar`).
    """
    app = FastAPI(
        title="Opportunity Radar",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.radar = AppResources(settings_loader or pages_settings, db_url, clock or SYSTEM)
    pages = app.state.pages = Pages()
    app.add_middleware(SecurityHeadersMiddleware, pages=pages)
    # outermost: what it turns away costs no thread, no connection, no template
    app.add_middleware(AdmissionMiddleware, admission=admission or Admission(), headers=SECURITY_HEADERS)
    answer_errors_with_pages(app, pages)
    serve_static_files(app)
    for router in (reports.router, reports.votes, history.router, profile.router, record.router, evaluation.router,
                   feed.router, feed.profile):
        app.include_router(router)
    answer_head_like_get(app)
    return app


def answer_errors_with_pages(app: FastAPI, pages: Pages) -> None:
    """Whatever goes wrong, the reader gets a page: a bad path or input its 4xx, the database down or not
    migrated a 503, bad settings a 500 that says where to look (the details go to the log only)."""

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


def serve_static_files(app: FastAPI) -> None:
    """The two static files, public and cached: the pages' one script and the icon."""

    @app.get("/static/frame.js", include_in_schema=False)
    async def frame_script() -> Response:  # async: no thread of the api-server's for a constant
        """The pages' one script: links that work inside Airflow's sandboxed iframe (static/frame.js)."""
        return Response(FRAME_JS, media_type="text/javascript", headers={"Cache-Control": "public, max-age=3600"})

    @app.get("/static/icon.svg", include_in_schema=False)
    async def icon() -> Response:
        return Response(ICON_SVG, media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"})


def answer_head_like_get(app: FastAPI) -> None:
    """Every GET route answers HEAD too (link unfurlers of chat apps and uptime checks send HEAD): FastAPI,
    unlike Starlette, does not add it. The route runs as for GET, with the same access rule; the middleware
    sends the headers without the body."""
    for route in app.routes:
        if isinstance(route, APIRoute) and "GET" in route.methods:
            route.methods.add("HEAD")


app = create_app()
install_access_log_filter()
