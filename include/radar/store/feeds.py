"""The reader's Atom feed: its tokens (one live per Airflow user) and what it lists (what was pushed)."""

from __future__ import annotations

import secrets
from datetime import datetime

import psycopg

from include.radar.store.analyses import ANALYSIS_COLUMNS
from include.radar.store.common import PUSHED_ANALYSIS_ID, Row


def live_token(conn: psycopg.Connection, reader: str) -> Row | None:
    """The reader's token that is not revoked, if any."""
    return conn.execute("SELECT * FROM feed_token WHERE reader = %s AND revoked_at IS NULL", (reader,)).fetchone()


def rotate_token(conn: psycopg.Connection, reader: str, now: datetime) -> str:
    """Revoke the reader's live token (if any) and make a new one; its key."""
    revoke_token(conn, reader, now)
    key = secrets.token_hex(16)
    conn.execute("INSERT INTO feed_token (key, reader, created_at) VALUES (%s, %s, %s)", (key, reader, now))
    return key


def revoke_token(conn: psycopg.Connection, reader: str, now: datetime) -> bool:
    """Revoke the reader's live token; whether there was one."""
    return conn.execute("UPDATE feed_token SET revoked_at = %s WHERE reader = %s AND revoked_at IS NULL RETURNING key",
                        (now, reader)).fetchone() is not None


def token_is_live(conn: psycopg.Connection, key: str) -> bool:
    return conn.execute("SELECT 1 FROM feed_token WHERE key = %s AND revoked_at IS NULL", (key,)).fetchone() is not None


def pushed_analyses(conn: psycopg.Connection, limit: int) -> list[Row]:
    """The analyses opportunity pushes told of (delivered to at least one channel), each event once, at its first
    push (``pushed_at``), the latest ``limit``; with ``event`` and ``changed_at``, when its event last gained an
    analysis."""
    return conn.execute(
        f"""
        WITH told AS (
            SELECT DISTINCT ON (coalesce(a.event_id, a.id)) coalesce(a.event_id, a.id) AS event, a.id,
                   n.sent_at AS pushed_at
            FROM notification_log n
            JOIN analysis_result a ON a.id = {PUSHED_ANALYSIS_ID} OR a.id = ANY(n.shown_ids)
            WHERE n.push_type = 'opportunity' AND n.status = 1 AND n.sent_at IS NOT NULL
            ORDER BY coalesce(a.event_id, a.id), n.sent_at, n.id
        ), latest AS (SELECT * FROM told ORDER BY pushed_at DESC, id DESC LIMIT %s)
        SELECT {ANALYSIS_COLUMNS}, t.event, t.pushed_at,
               greatest(a.created_at, (SELECT max(m.created_at) FROM analysis_result m WHERE m.event_id = t.event))
                   AS changed_at
        FROM latest t
        JOIN analysis_result a ON a.id = t.id
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        LEFT JOIN slot_run s ON s.id = a.slot_run_id
        ORDER BY t.pushed_at DESC, a.id DESC
        """,
        (limit,),
    ).fetchall()


def pushed_reports(conn: psycopg.Connection, limit: int) -> list[Row]:
    """The daily reports whose push reached at least one channel, the latest ``limit``: the report row with
    ``pushed_at``, its first delivery."""
    return conn.execute(
        """
        SELECT r.report_date, r.status, r.stats, r.digest_json, r.updated_at, p.pushed_at
        FROM (SELECT report_date, min(sent_at) AS pushed_at FROM notification_log
              WHERE push_type = 'daily' AND status = 1 AND sent_at IS NOT NULL GROUP BY report_date) p
        JOIN daily_report r ON r.report_date = p.report_date
        ORDER BY p.pushed_at DESC
        LIMIT %s
        """,
        (limit,),
    ).fetchall()
