"""Small key/value service state, such as the WeRSS login token and its expiry."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from include.radar.store.common import Row


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
