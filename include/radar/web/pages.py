"""The page renderer every route shares (``get_pages(request)``): templates compiled once per app, the context
every page has (links, the demo badge, the link's expiry, the read session), and the error page; and what the
views of a request share (``page_context(request)``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from include.radar.core.settings import Settings
from include.radar.core.text import in_order
from include.radar.web.auth import AIRFLOW_LOGIN_PATH, Reader, app_path, local_path
from include.radar.web.mount import URL_PREFIX
from include.radar.web.resources import get_resources, zone
from include.radar.web.views.common import Links, PageContext, local_time

TEMPLATES_DIR = Path(__file__).with_name("templates")
# what stands in a page a link opened for what only an Airflow login sees (the operator's lines, the spend)
PRIVATE_NOTE = "登录 Airflow 后可见"


def _shown(value: Any) -> Any:
    """What a template prints of ``value`` (Jinja's finalize, before escaping): text, markup too (the digest,
    the charts), without what would reorder the rest of its line (core.text.in_order)."""
    if isinstance(value, Markup):
        return Markup(in_order(str(value)))
    return in_order(value) if isinstance(value, str) else value


def _environment() -> Environment:
    """Templates compiled once per app; StrictUndefined turns a template typo into an error, not a blank."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,  # every template is HTML; article and LLM text must never become markup
        finalize=_shown,  # every {{ … }} of every page, whatever view built it
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.globals["private_note"] = PRIVATE_NOTE  # the macros see globals, not the page's context
    return env


def page_links(
    request: Request, signer: Callable[[str], str] | None = None, signable: frozenset[int] = frozenset()
) -> Links:
    root = request.scope.get("root_path", "").rstrip("/")
    airflow_root = root[: -len(URL_PREFIX)] if root.endswith(URL_PREFIX) else ""
    return Links(root=root, airflow_root=airflow_root, signer=signer, signable=signable)


def page_context(request: Request) -> PageContext:
    """What the views of this request share, read once: the settings, the clock's moment, the zone, the links
    (a signed daily page replaces them with its own, once it knows its analyses)."""
    resources = get_resources(request)
    return PageContext(settings=resources.settings(), now=resources.clock.now(), tz=zone(), links=page_links(request))


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
        links: Links | None = None,
        **context: Any,
    ) -> HTMLResponse:
        signed_until = None
        if reader is not None and reader.signed and reader.signed_exp and settings is not None:
            signed_until = local_time(datetime.fromtimestamp(reader.signed_exp, UTC), zone())
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
