"""The report app's access logs in the api-server: a signed link carries its credential in the query string
(``sig``), which access logs write. It is redacted in the request scope once the response starts
(:func:`redact_scope_query`), and in uvicorn's own records by a logging filter (:func:`install_access_log_filter`);
docs/security.md says which loggers and why.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote_plus

ACCESS_LOGGER = "uvicorn.access"
REDACTED = "***"
_SECRET_PARAMS = frozenset({"sig"})


# ------------------------------------------------------------------------------------------- access logs


def redact_query(query: str) -> str:
    """``query`` with the value of every ``sig`` parameter replaced by ``***``; everything else verbatim.

    Keys are compared decoded (``%73ig`` is ``sig`` to the app, so it is ``sig`` here too).
    """
    if not query:
        return query
    pairs = query.split("&")
    changed = False
    for i, pair in enumerate(pairs):
        key = pair.split("=", 1)[0]
        if unquote_plus(key) in _SECRET_PARAMS:
            pairs[i] = f"sig={REDACTED}"
            changed = True
    return "&".join(pairs) if changed else query


def redact_target(target: str) -> str:
    """A logged request target (``/path?query``) with its signature redacted."""
    path, sep, query = target.partition("?")
    return path + sep + redact_query(query) if sep else target


def redact_scope_query(scope: dict[str, Any]) -> None:
    """Redact ``sig`` in the request scope, for the access loggers that read it after the response.

    The ASGI scope is one dict shared by the api-server's middlewares and the mounted app, so this change is
    what Airflow's ``HttpAccessLogMiddleware`` and uvicorn's access log see. Call it only once the request
    has been answered (the response is starting): the page itself needed the signature.
    """
    raw: bytes = scope.get("query_string") or b""
    redacted = redact_query(raw.decode("latin-1")).encode("latin-1")
    if redacted != raw:
        scope["query_string"] = redacted


class SignatureLogFilter(logging.Filter):
    """Rewrites uvicorn access records so that no ``sig`` value reaches a handler.

    uvicorn logs ``'%s - "%s %s HTTP/%s" %d'`` with args ``(client_addr, method, full_path, http_version,
    status_code)``; ``full_path`` carries the query string. The record is changed in place and always kept.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and args:
            record.args = tuple(redact_target(a) if isinstance(a, str) and "?" in a else a for a in args)
        elif isinstance(record.msg, str) and "?" in record.msg and not args:
            record.msg = " ".join(redact_target(part) for part in record.msg.split(" "))
        return True


def install_access_log_filter() -> None:
    """Add :class:`SignatureLogFilter` to ``uvicorn.access`` once, however often the app module is imported."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, SignatureLogFilter) for f in logger.filters):
        logger.addFilter(SignatureLogFilter())
