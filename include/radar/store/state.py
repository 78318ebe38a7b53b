"""Small key/value service state, such as the WeRSS login token and its expiry, or the pages' form key."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from include.radar.store.common import Row

FORM_KEY_STATE = "web:form_key"  # the profile form's key without a link_secret (web/csrf.py)


def get_state(conn: psycopg.Connection, key: str) -> Row | None:
    return conn.execute("SELECT * FROM service_state WHERE key = %s", (key,)).fetchone()


def set_state(conn: psycopg.Connection, key: str, value: Any, expires_at: datetime | None) -> None:
    conn.execute(
        """
        INSERT INTO service_state (key, value, expires_at) VALUES (%s, %s, %s)
        ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, updated_at = now()
        """,
        (key, Jsonb(value), expires_at),
    )


def delete_state(conn: psycopg.Connection, key: str) -> None:
    conn.execute("DELETE FROM service_state WHERE key = %s", (key,))


def ensure_state(conn: psycopg.Connection, key: str, value: Any) -> Any:
    """The value kept under ``key``, storing ``value`` first when there is none: callers racing to create it
    (several api-server workers) all get the one that was stored first."""
    conn.execute(
        "INSERT INTO service_state (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING", (key, Jsonb(value))
    )
    row = conn.execute("SELECT value FROM service_state WHERE key = %s", (key,)).fetchone()
    return row["value"]


def make_form_key(conn: psycopg.Connection) -> None:
    """Store a random profile-form key unless there is one (run as the radar's owner by ``cli grant-pages``:
    the pages' own login only reads it). Works with any row factory."""
    conn.execute("INSERT INTO service_state (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                 (FORM_KEY_STATE, Jsonb(secrets.token_hex(32))))
