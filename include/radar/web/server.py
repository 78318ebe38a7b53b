"""What the report app needs from the Airflow api-server process it runs in: settings and quiet access logs.

Settings. Tasks read ``radar_<name>`` Airflow Variables through the Task SDK, which only works inside a task
(settings.py); the api-server has no task context, so without :func:`server_settings` a threshold or a
``link_secret`` set as a Variable (UI, CLI, secrets backend) would be ignored by the pages and every signed
link would be refused. The lookup order is the tasks' own: the environment, then the Variable.

Access logs. A signed link carries its credential in the query string (``sig``), and access logs write the
query string. Two loggers do in practice: in Airflow 3.3's api-server, Airflow's ``HttpAccessLogMiddleware``
(structlog ``http.access``; the api-server switches uvicorn's own access log off), which reads the query
string from the request scope once the response is done and redacts only parameters whose *name* looks
secret (``token``, ``password``...; ``sig`` is not one); and uvicorn's ``uvicorn.access`` wherever uvicorn
serves the app with its access log on (``uvicorn include.radar.web.app:app``, other deployments). So the
signature is removed twice: :func:`redact_scope_query`, which the app applies to the request scope as the
response starts (after the page has been checked and rendered), and a logging filter on ``uvicorn.access``
(:func:`install_access_log_filter`) for records that did not pass through the app.
"""

from __future__ import annotations

import logging
import os
from functools import cache
from typing import Any
from urllib.parse import unquote_plus

from include.radar.settings import Settings, env_name, load_settings

ACCESS_LOGGER = "uvicorn.access"
REDACTED = "***"
_SECRET_PARAMS = frozenset({"sig"})


# ----------------------------------------------------------------------------------------------- settings


@cache
def _variable_getter() -> Any:
    """``airflow.models.variable.Variable`` (server side: secrets backends, then the metadata DB), or None.

    Imported on first use: the plugin module is imported by every Airflow component, and the import is slow.
    """
    try:
        from airflow.models.variable import Variable
    except ImportError:  # plain Python without Airflow: the environment and the defaults
        return None
    return Variable


def server_lookup(name: str) -> str | None:
    """The raw value of setting ``name``: ``AIRFLOW_VAR_RADAR_<NAME>``, else the Airflow Variable ``radar_<name>``.

    ``Variable.get`` of ``airflow.models`` is the api-server's own reader: it asks the configured secrets
    backends, the environment backend and the metadata database, in Airflow's order (a backend that fails is
    logged and skipped by Airflow itself). Errors other than Airflow being absent are raised, not taken for
    "not set": a silently defaulted ``link_secret`` would refuse every pushed link without saying why.
    """
    value = os.environ.get(env_name(name))
    if value is not None:
        return value
    variable = _variable_getter()
    if variable is None:
        return None
    found = variable.get(f"radar_{name}", default_var=None)
    return None if found is None else str(found)


def server_settings() -> Settings:
    """The default settings loader of the report app (AppResources caches its result for a minute)."""
    return load_settings(server_lookup)


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
