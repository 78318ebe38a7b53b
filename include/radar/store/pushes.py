"""The notification log: one row per message and channel, claimed before it is sent (exactly once).

A row is claimed (pending) with the text as fitted for its channel; ``send_started_at`` is written and
committed just before the channel is called. So a pending row says which of two things happened to a sender
that never came back: its send never started (any sender may deliver it now: :func:`start_send` lets exactly
one of them), or it started and no outcome was recorded (delivery unknown: :func:`mark_unknown`, never resent
automatically).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import psycopg

from include.radar.core import redact
from include.radar.store.common import Row


def claim_notification(conn: psycopg.Connection, note: dict[str, Any]) -> Row | None:
    """Take the right to send one message to one channel; None when it is not ours to send.

    A new msg_uuid is inserted as pending and is ours. An existing one that failed before is ours again
    (same uuid, one more attempt, the new text). One that was sent, is pending (another sender has it, or a
    sender died: see :func:`start_send` and :func:`mark_unknown`) or unknown is not: the message is never
    delivered twice. ``note`` carries ``channel_key`` and ``body`` (the fitted text) beside the row's fields,
    and for an opportunity push ``shown_ids``, the analyses it tells of.
    """
    note = {"shown_ids": None, **note}
    row = conn.execute(
        """
        INSERT INTO notification_log (msg_uuid, report_date, slot, push_type, target_url, channel, slot_run_id,
                                      title, attempts, channel_key, body, shown_ids)
        VALUES (%(msg_uuid)s, %(report_date)s, %(slot)s, %(push_type)s, %(target_url)s, %(channel)s,
                %(slot_run_id)s, %(title)s, 1, %(channel_key)s, %(body)s, %(shown_ids)s)
        ON CONFLICT ON CONSTRAINT notification_log_msg_uuid_key DO NOTHING
        RETURNING *
        """,
        note,
    ).fetchone()
    if row is not None:
        return row
    return conn.execute(
        """
        UPDATE notification_log SET status = 0, attempts = attempts + 1, send_started_at = NULL, title = %(title)s,
               channel_key = %(channel_key)s, body = %(body)s, shown_ids = %(shown_ids)s, updated_at = now()
        WHERE msg_uuid = %(msg_uuid)s AND status = 2
        RETURNING *
        """,
        note,
    ).fetchone()


def start_send(conn: psycopg.Connection, msg_uuid: str) -> bool:
    """Record that the channel is about to be called (commit before calling it). Only one sender of a pending
    row gets True: the row's claimer, or whoever delivers a row whose sender died before sending."""
    return conn.execute(
        """
        UPDATE notification_log SET send_started_at = now(), updated_at = now()
        WHERE msg_uuid = %s AND status = 0 AND send_started_at IS NULL
        RETURNING id
        """,
        (msg_uuid,),
    ).fetchone() is not None


def finish_notification(conn: psycopg.Connection, msg_uuid: str, error: str | None) -> None:
    """The channel's answer: sent, or failed with its (redacted) error. It also settles a row a sweep marked
    unknown meanwhile (a channel slower than the sweep's patience): the answer is the truth."""
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


def stale_notifications(conn: psycopg.Connection, older_than: timedelta) -> list[Row]:
    """Pending rows left by senders that never came back: claimed (or their send started) over ``older_than``
    ago."""
    return conn.execute(
        """
        SELECT * FROM notification_log
        WHERE status = 0 AND coalesce(send_started_at, updated_at) < now() - %s
        ORDER BY id
        """,
        (older_than,),
    ).fetchall()


def mark_unknown(conn: psycopg.Connection, msg_uuid: str, older_than: timedelta, error: str) -> Row | None:
    """A pending row whose send started over ``older_than`` ago with no outcome recorded (or a row claimed
    before sends were recorded as started, which may have been sent): delivery unknown (status 3), for good
    unless the operator forces a new push. The row when this call marked it, else None."""
    return conn.execute(
        """
        UPDATE notification_log SET status = 3, error = %s, updated_at = now()
        WHERE msg_uuid = %s AND status = 0 AND (send_started_at IS NOT NULL OR channel_key IS NULL)
          AND coalesce(send_started_at, updated_at) < now() - %s
        RETURNING *
        """,
        (error, msg_uuid, older_than),
    ).fetchone()


def notification(conn: psycopg.Connection, msg_uuid: str) -> Row | None:
    return conn.execute("SELECT * FROM notification_log WHERE msg_uuid = %s", (msg_uuid,)).fetchone()



def daily_push_sent(conn: psycopg.Connection, day: date) -> bool:
    """Whether the daily report of ``day`` has reached at least one channel."""
    return conn.execute(
        "SELECT 1 FROM notification_log WHERE report_date = %s AND push_type = 'daily' AND status = 1 LIMIT 1", (day,)
    ).fetchone() is not None
