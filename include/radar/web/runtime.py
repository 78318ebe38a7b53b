"""What every page route shares: the app's resources (settings, the database, the clock), the page renderer,
path parsing.

A route reaches them through the request (``get_resources(request)``, ``get_pages(request)``), so the route
modules (web/routes/) hold no state of their own and ``create_app`` (app.py) decides everything per app.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import psycopg
from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from include.radar import store
from include.radar.core import db, signing
from include.radar.core.settings import Settings
from include.radar.core.slots import SHANGHAI
from include.radar.pushes import ranking
from include.radar.web import feedback, views
from include.radar.web.admission import AT_ONCE
from include.radar.web.auth import AIRFLOW_LOGIN_PATH, PageError, Reader, app_path, local_path
from include.radar.web.mount import URL_PREFIX

TEMPLATES_DIR = Path(__file__).with_name("templates")
# Settings come from Airflow Variables (a metadata-DB read each) or the environment: cache them briefly.
SETTINGS_TTL_SECONDS = 60.0
# a connection per page request the api-server serves at once (web/admission.py bounds them)
PAGES_POOL_SIZE = AT_ONCE

_DAY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ID_RE = re.compile(r"[0-9]{1,19}")
_MAX_BIGINT = 2**63 - 1
# what stands in a page a link opened for what only an Airflow login sees (the operator's lines, the spend)
PRIVATE_NOTE = "登录 Airflow 后可见"
# Report pages exist from the radar's era to a year ahead; any other date is "no such page", not an error.
FIRST_DAY = date(2000, 1, 1)
DAYS_AHEAD = 366


# ------------------------------------------------------------------------------------------ app resources


class AppResources:
    """Per-app state resolved lazily: settings (briefly cached), the database URL, the clock, the ranking weights,
    the keys the radar keeps in its database (the profile form's, web/csrf.py).

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
        self._weights: tuple[tuple[Any, ...], float, ranking.Weights] | None = None
        self._kept: dict[str, str] = {}

    def _refresh(self) -> None:
        with self._lock:
            if self._settings is not None and time.monotonic() - self._loaded_at < SETTINGS_TTL_SECONDS:
                return
            settings = self._settings_loader()
            url = self._db_url
            if url is None:
                try:
                    url = db.pages_database_url(settings.db_conn_id)
                except Exception as exc:  # any failure to locate it is "unreachable"
                    raise db.DatabaseUnavailable(f"cannot locate the radar database: {type(exc).__name__}") from exc
            self._settings, self._resolved_url, self._loaded_at = settings, url, time.monotonic()

    def settings(self) -> Settings:
        self._refresh()
        assert self._settings is not None
        return self._settings

    @contextmanager
    def connect(self) -> Iterator[psycopg.Connection]:
        """One read-only connection for the whole request, with a statement timeout as a backstop. Read-only
        by the transaction here; by its privileges too where the pages have a login of their own (roles.py)."""
        self._refresh()
        assert self._resolved_url is not None
        with db.connect(self._resolved_url, pool_size=PAGES_POOL_SIZE) as conn:
            conn.execute("SET TRANSACTION READ ONLY; SET LOCAL statement_timeout = '5s'")
            yield conn

    def ranking_weights(self, conn: psycopg.Connection) -> ranking.Weights:
        """What the reader's feedback and the track record taught the ranking (ranking.learn), learned again
        only when a verdict or an outcome changed (store.feedback_version, store.track.outcome_version) or after
        SETTINGS_TTL_SECONDS (an account renamed): most pages read it, few requests change it."""
        now = self.clock()
        min_picks = self.settings().outcome_min_picks
        # the track record's outcomes change once a day (its step), the verdicts whenever the reader votes
        version = (store.feedback_version(conn, now), store.track.outcome_version(conn), min_picks)
        with self._lock:
            cached = self._weights
        if cached is not None and cached[0] == version and time.monotonic() - cached[1] < SETTINGS_TTL_SECONDS:
            return cached[2]
        weights = ranking.learn(store.feedback_for_ranking(conn, now),
                                store.track.outcome_means(conn, ranking.OUTCOME_HORIZON), min_picks)
        with self._lock:
            self._weights = (version, time.monotonic(), weights)
        return weights

    def kept(self, name: str, make: Callable[[], str]) -> str:
        """A value that never changes once made (a key the radar keeps in its database): made on first use,
        then kept for the app's life."""
        with self._lock:
            found = self._kept.get(name)
        if found is None:
            found = make()
            with self._lock:
                found = self._kept.setdefault(name, found)
        return found

    @contextmanager
    def connect_write(self) -> Iterator[psycopg.Connection]:
        """A connection that may write: the reader's own data only (their profile, their feedback); where the
        pages have a login of their own (roles.py), that is all its privileges allow."""
        self._refresh()
        assert self._resolved_url is not None
        with db.connect(self._resolved_url, pool_size=PAGES_POOL_SIZE) as conn:
            conn.execute("SET LOCAL statement_timeout = '5s'")
            yield conn


def get_resources(request: Request) -> AppResources:
    return request.app.state.radar


def zone() -> ZoneInfo:
    """Slots, report days and pages all live in Asia/Shanghai: the one business time zone, not a setting."""
    return SHANGHAI


def today(resources: AppResources) -> date:
    return resources.clock().astimezone(zone()).date()


# ------------------------------------------------------------------------------------------- rendering


def _environment() -> Environment:
    """Templates compiled once per app; StrictUndefined turns a template typo into an error, not a blank."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,  # every template is HTML; article and LLM text must never become markup
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.globals["private_note"] = PRIVATE_NOTE  # the macros see globals, not the page's context
    return env


def page_links(
    request: Request, signer: Callable[[str], str] | None = None, signable: frozenset[int] = frozenset()
) -> views.Links:
    root = request.scope.get("root_path", "").rstrip("/")
    airflow_root = root[: -len(URL_PREFIX)] if root.endswith(URL_PREFIX) else ""
    return views.Links(root=root, airflow_root=airflow_root, signer=signer, signable=signable)


def _session_minutes(request: Request) -> int:
    """The minutes of the read session this page's link opens (auth.py), rounded up; 0 when it opens none."""
    session = request.scope.get("state", {}).get("radar_read_session")
    return -(-session[1] // 60) if session else 0


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
            signed_until = views.local_time(datetime.fromtimestamp(reader.signed_exp, UTC), zone())
        html = self.env.get_template(template).render(
            links=links or page_links(request),
            demo=bool(settings and settings.demo_mode),
            tz_label="北京时间",
            signed_until=signed_until,
            read_session=bool(reader is not None and reader.session),
            session_minutes=_session_minutes(request),
            # what is personal (watchlist hits, filter rules, learned weights) shows to an Airflow login only
            personal=bool(reader is not None and reader.personal),
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
        links = page_links(request)
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


def get_pages(request: Request) -> Pages:
    return request.app.state.pages


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


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused past ``limit`` bytes without reading the rest."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PageError(400, "请求无效", "提交的内容过大。")
    return body


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


# ------------------------------------------------------------------------------------------------ signing


def day_signer(reader: Reader, settings: Settings) -> Callable[[str], str] | None:
    """On a signed daily page: sign links with the same expiry as the page's own link (never longer), so a
    phone that keeps no cookie still opens them. In a read session the cookie carries the reader instead."""
    if not reader.signed or reader.session or not reader.signed_exp or settings.link_secret is None:
        return None
    secret = settings.link_secret.get_secret_value()
    expires = datetime.fromtimestamp(reader.signed_exp, UTC)
    return lambda path: urlencode(signing.sign(path, secret, expires, 0))


def _here(request: Request, links: views.Links) -> str:
    """This page's own path and query (a signed page's signature included): where a form comes back to."""
    query = request.url.query
    return local_path(links.root + app_path(request)) + (f"?{query}" if query else "")


def feedback_forms(request: Request, reader: Reader, settings: Settings, links: views.Links) -> feedback.Forms:
    """The 👍/👎/🤷 forms of this page: signed actions that come back here (web/feedback.py).

    A read session's pages get none: its cookie reaches every analysis of every day, and whoever a push is
    forwarded to holds it, so votes come only from an Airflow login or from the page a link names (a daily
    link's own analyses, whose links it signs), never from the session a link opened."""
    secret = settings.link_secret.get_secret_value() if settings.link_secret and not reader.session else None
    return feedback.Forms(secret, get_resources(request).clock(), links.root, _here(request, links),
                          reader.signed_exp if reader.signed else None)
