"""What Airflow's plugin loader imports of the report pages in every process (plugins/radar_plugin.py).

Airflow loads plugins in every component, not only in the api-server that serves them: each task process
(for macros and listeners), the scheduler, the dag-processor and the triggerer. Importing the report app there
cost each task process 0.8 s and 19 MB (FastAPI, Jinja2, the routes, markdown) for pages it never serves. So
the plugin registers :class:`LazyApp`, which imports and builds the app (web/app.py) on its first request, in
the api-server only, and :class:`AddTrailingSlash`, which needs nothing but the ASGI protocol. This module
imports nothing beyond the standard library.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

URL_PREFIX = "/radar"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class AddTrailingSlash:
    """A root middleware (the plugin's ``fastapi_root_middlewares``): ``/radar`` without its slash would reach
    Airflow's catch-all route and show an empty Airflow page; it is redirected to ``/radar/``, query kept."""

    def __init__(self, app: Any, prefix: str = URL_PREFIX) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        root = scope.get("root_path", "") if scope["type"] == "http" else ""
        if scope["type"] == "http" and scope.get("path") in (self.prefix, f"{root}{self.prefix}"):
            query = scope.get("query_string", b"").decode("latin-1")
            location = f"{root}{self.prefix}/" + (f"?{query}" if query else "")
            await send({"type": "http.response.start", "status": 307,
                        "headers": [(b"location", location.encode("latin-1")), (b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            # a pushed link's signature is a credential, and Airflow's access log reads the query from the scope
            # once the response is done (the app redacts it for its own answers; this one never reaches the app)
            from include.radar.web.server import redact_scope_query  # a redirect: api-server only

            redact_scope_query(scope)
            return
        await self.app(scope, receive, send)


class LazyApp:
    """An ASGI app imported and built on its first request (``target``: ``"module:attribute"``), that Airflow
    mounts like a FastAPI one and that costs nothing in the processes that load plugins without serving them.
    The plugin names the report app (web/app.py) by its import path: this module imports none of it."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._app: Any = None
        self._lock = threading.Lock()

    @property
    def app(self) -> Any:
        if self._app is None:
            with self._lock:  # several first requests at once build it once
                if self._app is None:
                    module, _, attribute = self.target.partition(":")
                    self._app = getattr(importlib.import_module(module), attribute)
        return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
