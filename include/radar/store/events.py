"""Events: which analyses report the same real-world event (events.py decides, this room reads and writes)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, timedelta

import psycopg

from include.radar.store.common import PUSHED_ANALYSIS_ID, Row

# one advisory lock id for "grouping analyses into events": two slots never group at once
_GROUPING_LOCK = 0x72616461_0005


def lock_grouping(conn: psycopg.Connection) -> None:
    """Held until the caller's transaction ends."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_GROUPING_LOCK,))


_DOC_COLUMNS = """
    a.id, a.event_id, a.reused_from_id, a.result_json, c.published_at, c.title,
    left(c.clean_text, 4000) AS clean_text, coalesce(acc.mp_id, c.mp_id) AS account,
    (SELECT ec.published_at FROM analysis_result ea JOIN content_item ec ON ec.id = ea.content_item_id
      WHERE ea.id = a.event_id) AS event_started
"""


def ungrouped(conn: psycopg.Connection, limit: int) -> list[Row]:
    """Analyses grouping has not seen yet, oldest first."""
    return conn.execute(
        f"""
        SELECT {_DOC_COLUMNS} FROM analysis_result a
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        WHERE a.grouped_at IS NULL
        ORDER BY c.published_at, a.id
        LIMIT %s
        """,
        (limit,),
    ).fetchall()


def grouped_near(conn: psycopg.Connection, rows: list[Row], window: timedelta) -> list[Row]:
    """Grouped analyses published within ``window`` of any of ``rows``, and those the reposts among them reuse."""
    if not rows:
        return []
    start = min(r["published_at"] for r in rows) - window
    end = max(r["published_at"] for r in rows) + window
    reused = [r["reused_from_id"] for r in rows if r["reused_from_id"]]
    return conn.execute(
        f"""
        SELECT {_DOC_COLUMNS} FROM analysis_result a
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        WHERE a.grouped_at IS NOT NULL AND (c.published_at BETWEEN %s AND %s OR a.id = ANY(%s))
        ORDER BY c.published_at, a.id
        """,
        (start, end, reused),
    ).fetchall()


def set_events(conn: psycopg.Connection, assigned: Iterable[tuple[int, int, str | None]]) -> int:
    """(analysis id, event id, note) for each newly grouped analysis."""
    count = 0
    for analysis_id, event_id, note in assigned:
        conn.execute(
            "UPDATE analysis_result SET event_id = %s, event_note = %s, grouped_at = now() WHERE id = %s",
            (event_id, note, analysis_id),
        )
        count += 1
    return count


def pushed_events(conn: psycopg.Connection, event_ids: list[int], other_than_slot_run: int) -> set[int]:
    """Of these events, those another slot run's opportunity push told of (its top, which it links to, or
    another item it listed; delivered to a channel, or perhaps: its delivery unknown, since a duplicate is worse
    than a miss)."""
    if not event_ids:
        return set()
    rows = conn.execute(
        f"""
        SELECT DISTINCT a.event_id FROM notification_log n
        JOIN analysis_result a ON a.id = {PUSHED_ANALYSIS_ID} OR a.id = ANY(n.shown_ids)
        WHERE n.push_type = 'opportunity' AND n.status IN (1, 3) AND a.event_id = ANY(%s)
          AND n.slot_run_id IS DISTINCT FROM %s
        """,
        (event_ids, other_than_slot_run),
    ).fetchall()
    return {r["event_id"] for r in rows}


def event_pushes(conn: psycopg.Connection, event_ids: list[int]) -> dict[int, Row]:
    """Of these events, those an opportunity push told of (delivered, or its delivery unknown: as
    :func:`pushed_events` counts them): the first such push's analysis (``analysis_id``), its day and slot, and
    ``pushed`` (``MM-DD HH:MM``, the slot that pushed it)."""
    if not event_ids:
        return {}
    rows = conn.execute(
        f"""
        SELECT DISTINCT ON (a.event_id) a.event_id, a.id AS analysis_id, n.report_date, n.slot,
               to_char(n.report_date, 'MM-DD') || ' ' || n.slot AS pushed
        FROM notification_log n
        JOIN analysis_result a ON a.id = {PUSHED_ANALYSIS_ID} OR a.id = ANY(n.shown_ids)
        WHERE n.push_type = 'opportunity' AND n.status IN (1, 3) AND a.event_id = ANY(%s)
        ORDER BY a.event_id, n.report_date, n.slot, n.id
        """,
        (event_ids,),
    ).fetchall()
    return {r["event_id"]: r for r in rows}


def with_pushes(conn: psycopg.Connection, rows: Iterable[Row], day: date) -> list[Row]:
    """``rows`` (analyses), each with its event's first opportunity push (:func:`event_pushes`): ``pushed``
    (its day and slot), and ``follow_up`` true when that push was on a day before ``day`` (the article retells
    pushed news)."""
    rows = list(rows)
    pushes = event_pushes(conn, list({r.get("event_id") or r["id"] for r in rows}))
    out = []
    for r in rows:
        push = pushes.get(r.get("event_id") or r["id"])
        out.append({**r, "pushed": push["pushed"], "follow_up": push["report_date"] < day} if push else r)
    return out


def event_members(conn: psycopg.Connection, event_ids: list[int]) -> list[Row]:
    """Every analysis of these events, with what the pages and the summary need of each."""
    if not event_ids:
        return []
    return conn.execute(
        """
        SELECT a.id, a.event_id, a.event_note, a.slot_run_id, a.reused_from_id, a.score, a.has_opportunity,
               a.summary, a.evidence_verified, a.result_json, a.created_at,
               c.title, c.url, c.published_at, coalesce(acc.name, c.mp_id) AS mp_name, s.run_date, s.slot
        FROM analysis_result a
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        LEFT JOIN slot_run s ON s.id = a.slot_run_id
        WHERE a.event_id = ANY(%s)
        ORDER BY c.published_at, a.id
        """,
        (event_ids,),
    ).fetchall()
