"""The notification log: one row per message and channel, claimed before it is sent (exactly once)."""

from __future__ import annotations

from datetime import date
from typing import Any

import psycopg

from include.radar import redact
from include.radar.store.common import Row


def claim_notification(conn: psycopg.Connection, note: dict[str, Any]) -> Row | None:
    """Take the right to send one message to one channel; None when it is not ours to send.

    A new msg_uuid is inserted as pending and is ours. An existing one that failed before is ours again
    (same uuid, one more attempt). One that was sent, or is pending (another sender, or a crash while
    sending, when delivery is unknown), is not: the message is never delivered twice.
    """
    row = conn.execute(
        """
        INSERT INTO notification_log (msg_uuid, report_date, slot, push_type, target_url, channel, slot_run_id,
                                      title, attempts)
        VALUES (%(msg_uuid)s, %(report_date)s, %(slot)s, %(push_type)s, %(target_url)s, %(channel)s,
                %(slot_run_id)s, %(title)s, 1)
        ON CONFLICT ON CONSTRAINT notification_log_msg_uuid_key DO NOTHING
        RETURNING *
        """,
        note,
    ).fetchone()
    if row is not None:
        return row
    return conn.execute(
        """
        UPDATE notification_log SET status = 0, attempts = attempts + 1, updated_at = now()
        WHERE msg_uuid = %s AND status = 2
        RETURNING *
        """,
        (note["msg_uuid"],),
    ).fetchone()


def finish_notification(conn: psycopg.Connection, msg_uuid: str, error: str | None) -> None:
    if error is None:
        conn.execute(
            "UPDATE notification_log SET status = 1, error = NULL, sent_at = now(), updated_at = now() WHERE msg_uuid = %s",
            (msg_uuid,),
        )
    else:
        conn.execute(
            "UPDATE notification_log SET status = 2, error = %s, updated_at = now() WHERE msg_uuid = %s",
            (redact.scrub(error)[:2000], msg_uuid),
        )


def notification(conn: psycopg.Connection, msg_uuid: str) -> Row | None:
    return conn.execute("SELECT * FROM notification_log WHERE msg_uuid = %s", (msg_uuid,)).fetchone()


def notifications_for_day(conn: psycopg.Connection, day: date) -> list[Row]:
    return conn.execute(
        "SELECT * FROM notification_log WHERE report_date = %s ORDER BY created_at, id", (day,)
    ).fetchall()



def daily_push_sent(conn: psycopg.Connection, day: date) -> bool:
    """Whether the daily report of ``day`` has reached at least one channel."""
    return conn.execute(
        "SELECT 1 FROM notification_log WHERE report_date = %s AND push_type = 'daily' AND status = 1 LIMIT 1", (day,)
    ).fetchone() is not None
