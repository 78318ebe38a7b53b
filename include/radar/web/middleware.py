"""ASGI middleware of the report app: security headers and the 500 page on every response, HEAD without a
body, the read session's cookie, and (as a root middleware of Airflow's api-server) ``/radar`` without its
trailing slash (web/mount.py, which the plugin imports without the app)."""

from __future__ import annotations

import logging

from fastapi import Request
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from include.radar.web.auth import READ_COOKIE
from include.radar.web.pages import Pages
from include.radar.web.server import redact_scope_query

log = logging.getLogger(__name__)

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


def _read_cookie(scope: Scope, value: str, max_age: int) -> str:
    """The read session's Set-Cookie (auth.py): this app's path only, script-proof, sent on top-level visits."""
    path = scope.get("root_path", "") or "/"
    secure = "; Secure" if scope.get("scheme") == "https" else ""
    return f"{READ_COOKIE}={value}; Max-Age={max_age}; Path={path}; HttpOnly; SameSite=Lax{secure}"


class SecurityHeadersMiddleware:
    """Adds the security headers to every response, and turns an unexpected exception into a 500 page; a HEAD
    request gets the headers of the answer without its body.

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
        head = scope.get("method") == "HEAD"

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if head and message["type"] == "http.response.body":
                # HEAD: the GET answer's status and headers (its Content-Length too), never its body
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
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
