"""An Airflow connection as the radar reads it: the environment's ``AIRFLOW_CONN_<ID>`` first, then Airflow's
own (its secrets backends, its metadata database, the Execution API inside a task).

The environment's JSON form is read here, without Airflow: importing Airflow where none is configured would
write ``~/airflow`` behind the user's back (:func:`airflow_here`). Its URI form is read by Airflow's own parser
when Airflow is here, else by the standard ``conn-type://login:password@host:port/schema?extra`` reading.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit


def airflow_here() -> bool:
    """Whether this process has an Airflow to ask: ``AIRFLOW_HOME`` or ``AIRFLOW_CONFIG`` set, or Airflow's
    default home present. Without one, importing Airflow would write ``~/airflow`` behind the user's back."""
    return bool(os.environ.get("AIRFLOW_HOME") or os.environ.get("AIRFLOW_CONFIG")) or (Path.home() / "airflow").is_dir()


@dataclass(frozen=True)
class ConnectionInfo:
    """What the radar needs from an Airflow connection, without depending on Airflow's classes."""

    conn_id: str
    host: str | None = None
    login: str | None = None
    password: str | None = None
    port: int | None = None
    schema: str | None = None
    extra: dict[str, Any] | None = None

    def __repr__(self) -> str:  # never print the password
        return f"ConnectionInfo(conn_id={self.conn_id!r}, host={self.host!r}, login={self.login!r})"


def get_connection(conn_id: str) -> ConnectionInfo | None:
    """Resolve a connection: the environment's ``AIRFLOW_CONN_<ID>`` first, then Airflow; None when neither
    has it (or no Airflow is here). Any other error of Airflow's (the Execution API down, a secrets backend
    refusing) is raised: a connection silently taken for "not set" would send the radar elsewhere."""
    raw = os.environ.get(f"AIRFLOW_CONN_{conn_id.upper()}")
    if raw:
        return _from_env(conn_id, raw)
    conn = _from_airflow(conn_id)
    if conn is None:
        return None
    extra = conn.extra_dejson if hasattr(conn, "extra_dejson") else {}
    return ConnectionInfo(conn_id=conn_id, host=conn.host, login=conn.login, password=conn.password,
                          port=conn.port, schema=conn.schema, extra=extra or {})


def _from_airflow(conn_id: str) -> Any:
    if not airflow_here():
        return None
    try:
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException
    except ImportError:  # plain Python: no Airflow installed
        return None
    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def _from_env(conn_id: str, raw: str) -> ConnectionInfo:
    """``AIRFLOW_CONN_<ID>``'s JSON (``conn_type``, ``host``, ``login``, ``password``, ``port``, ``schema``,
    ``extra`` as an object or JSON text) or URI, as Airflow's ``Connection`` reads them."""
    if raw.lstrip().startswith("{"):
        data = json.loads(raw)
        extra = data.get("extra") or {}
        port = data.get("port")
        return ConnectionInfo(conn_id=conn_id, host=data.get("host"), login=data.get("login"),
                              password=data.get("password"), port=int(port) if port not in (None, "") else None,
                              schema=data.get("schema"), extra=json.loads(extra) if isinstance(extra, str) else extra)
    if airflow_here():
        try:
            from airflow.models.connection import Connection
        except ImportError:
            pass
        else:
            conn = Connection(conn_id=conn_id, uri=raw)
            return ConnectionInfo(conn_id=conn_id, host=conn.host, login=conn.login, password=conn.password,
                                  port=conn.port, schema=conn.schema, extra=conn.extra_dejson or {})
    parts = urlsplit(raw)
    query = dict(parse_qsl(parts.query))
    extra = json.loads(query["__extra__"]) if "__extra__" in query else query
    return ConnectionInfo(conn_id=conn_id, host=unquote(parts.hostname or ""),
                          login=unquote(parts.username) if parts.username else None,
                          password=unquote(parts.password) if parts.password else None, port=parts.port,
                          schema=unquote(parts.path.lstrip("/")), extra=extra)
