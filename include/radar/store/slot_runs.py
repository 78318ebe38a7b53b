"""Slot runs: one row per planned slot (run_date, slot), and what every run of it did.

A slot run is a record of what happened, so a rerun (a retry, a cleared task, a second trigger, an
overlapping run) adds to it and never writes over it: counts are added, every step error goes to the
append-only ``error_log``, and ``step_errors`` keeps the errors not yet fixed by a later successful run of
the same step. The status is computed from those at close.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from include.radar.core import redact
from include.radar.core.slots import SlotKey
from include.radar.store.common import PUSHED_ANALYSIS_ID, Row

MAX_SLOT_WARNINGS = 100
MAX_ERROR_LOG = 200
# an attempt of one of the slot's articles that ended this way counts the article as failed in that slot
FAILED_OUTCOMES = ["failed", "crashed", "expired"]


def open_slot_run(
    conn: psycopg.Connection, key: SlotKey, *, run_type: str, dag_id: str | None, dag_run_id: str | None,
    deadline_at: datetime | None = None, started_at: datetime | None = None,
) -> Row:
    """Get or create the run record of (run_date, slot), started at ``started_at`` (the opener's clock; the
    database's now by default); concurrent openers get the same row.

    Reopening (a rerun, a second trigger of the same slot) marks it running again and counts the attempt;
    what earlier runs recorded (counts, errors, warnings) stays. ``started_at`` keeps the first opening so
    lateness is judged from the first start.
    """
    return conn.execute(
        """
        INSERT INTO slot_run (run_date, slot, scheduled_at, run_type, dag_id, dag_run_id, deadline_at, started_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, COALESCE(%s, now()))
        ON CONFLICT ON CONSTRAINT slot_run_date_slot_key DO UPDATE
           SET status = 0,
               attempts = slot_run.attempts + 1,
               run_type = EXCLUDED.run_type,
               dag_id = EXCLUDED.dag_id,
               dag_run_id = EXCLUDED.dag_run_id,
               deadline_at = EXCLUDED.deadline_at,
               finished_at = NULL
        RETURNING *, (xmax = 0) AS created
        """,
        (key.run_date, key.slot, key.scheduled_at, run_type, dag_id, dag_run_id, deadline_at, started_at),
    ).fetchone()


def get_slot_started_at(conn: psycopg.Connection, run_date: date, slot: str) -> datetime | None:
    """When the slot was first opened (lateness is judged from it), or None when it never was."""
    row = conn.execute("SELECT started_at FROM slot_run WHERE run_date = %s AND slot = %s", (run_date, slot)).fetchone()
    return row["started_at"] if row else None


def get_slot_run(conn: psycopg.Connection, slot_run_id: int) -> Row | None:
    return conn.execute("SELECT * FROM slot_run WHERE id = %s", (slot_run_id,)).fetchone()


def record_step(
    conn: psycopg.Connection, slot_run_id: int, step: str, error: str | None, *, dag_run_id: str | None = None
) -> None:
    """Remember the outcome of a step: its error (also logged for good), or clear it when the step ran cleanly.

    Clearing removes only this step's outstanding error; the error log keeps it.
    """
    if error is None:
        conn.execute("UPDATE slot_run SET step_errors = step_errors - %s WHERE id = %s", (step, slot_run_id))
        return
    error = redact.scrub(error)[:2000]
    entry = {"step": step, "error": error, "dag_run_id": dag_run_id}
    conn.execute(
        """
        UPDATE slot_run SET
            step_errors = step_errors || jsonb_build_object(%(step)s::text, %(error)s::text),
            error_log = CASE WHEN jsonb_array_length(error_log) >= %(cap)s THEN error_log
                             ELSE error_log || jsonb_build_array(%(entry)s::jsonb || jsonb_build_object('at', now()))
                        END
        WHERE id = %(id)s
        """,
        {"step": step, "error": error[:2000], "entry": Jsonb(entry), "cap": MAX_ERROR_LOG, "id": slot_run_id},
    )


def record_ingest(conn: psycopg.Connection, slot_run_id: int, *, new: int, skipped: int, waiting: int,
                  body_problems: int = 0) -> None:
    """Add what one ingest run found to the slot: a rerun adds its new articles, never writes over them.

    ``waiting_count`` is a state (articles of the window still without a body), so it is the latest value.
    ``body_problems``: bodies that were WeChat's verification page, cut, or a deleted article's page.
    """
    conn.execute(
        """
        UPDATE slot_run SET new_count = new_count + %s, skipped_count = skipped_count + %s, waiting_count = %s,
               body_problems = body_problems + %s
        WHERE id = %s
        """,
        (new, skipped, waiting, body_problems, slot_run_id),
    )


def add_deferred(conn: psycopg.Connection, slot_run_id: int, count: int = 1) -> None:
    """Analyses this slot left to later slots (its deadline came first)."""
    conn.execute("UPDATE slot_run SET deferred_count = deferred_count + %s WHERE id = %s", (count, slot_run_id))


def add_slot_warnings(conn: psycopg.Connection, slot_run_id: int, step: str, messages: list[str]) -> None:
    """Append handled problems (a skipped row, a failed account, a deadline) to the slot's warnings."""
    if not messages:
        return
    entries = [{"step": step, "message": redact.scrub(m)[:500]} for m in messages]
    conn.execute(
        """
        UPDATE slot_run SET warnings = CASE
            WHEN jsonb_array_length(warnings) >= %(cap)s THEN warnings
            ELSE warnings || %(entries)s::jsonb END
        WHERE id = %(id)s
        """,
        {"cap": MAX_SLOT_WARNINGS, "entries": Jsonb(entries), "id": slot_run_id},
    )


def set_slot_decision(conn: psycopg.Connection, slot_run_id: int, decision: str, detail: dict[str, Any]) -> None:
    conn.execute("UPDATE slot_run SET decision = %s WHERE id = %s", (decision, slot_run_id))
    conn.execute(
        "INSERT INTO push_decision (slot_run_id, decision, detail) VALUES (%s, %s, %s)",
        (slot_run_id, decision, Jsonb(detail)),
    )


def slot_failed_count(conn: psycopg.Connection, slot_run_id: int) -> int:
    """Articles whose analysis failed in this slot, in any of its runs: a record of what happened, so a rerun
    that analyses the article after all adds an analysis and leaves the failure on record."""
    return conn.execute(
        """
        SELECT count(DISTINCT t.content_item_id) AS n FROM analysis_attempt t
        WHERE t.slot_run_id = %(id)s AND t.outcome = ANY(%(failed)s)
        """,
        {"id": slot_run_id, "failed": FAILED_OUTCOMES},
    ).fetchone()["n"]


def close_slot_run(conn: psycopg.Connection, slot_run_id: int, threshold: int) -> Row:
    """Set the counts (from the database, not from XCom) and the status from the outstanding step errors.

    Opportunities are counted per real-world event (events.py), as the push decision counts them. The counts
    are facts about everything the slot's runs did: analyses are never deleted, and failures
    come from the attempt log, so a later slot retrying an article does not change what this one was.
    """
    failed = slot_failed_count(conn, slot_run_id)
    return conn.execute(
        f"""
        UPDATE slot_run s SET
            analysed_count = (SELECT count(*) FROM analysis_result a WHERE a.slot_run_id = s.id),
            -- one per real-world event, and not an event another slot run's push already linked to
            opportunity_count = (SELECT count(DISTINCT coalesce(a.event_id, a.id)) FROM analysis_result a
                                  WHERE a.slot_run_id = s.id AND a.score >= %(threshold)s
                                    AND a.reused_from_id IS NULL AND a.evidence_verified IS NOT FALSE
                                    AND NOT EXISTS (
                                        SELECT 1 FROM notification_log n
                                        JOIN analysis_result e
                                          ON e.id = {PUSHED_ANALYSIS_ID}
                                        WHERE a.event_id IS NOT NULL AND e.event_id = a.event_id
                                          AND n.push_type = 'opportunity' AND n.status = 1
                                          AND n.slot_run_id IS DISTINCT FROM s.id)),
            failed_count = %(failed)s,
            pushed_count = (SELECT count(*) FROM notification_log n
                             WHERE n.slot_run_id = s.id AND n.status = 1 AND n.push_type <> 'alert'),
            status = CASE WHEN s.step_errors = '{{}}'::jsonb THEN 1 ELSE 2 END,
            error = CASE WHEN s.step_errors = '{{}}'::jsonb THEN NULL ELSE
                    (SELECT string_agg(key || ': ' || value, E'\\n' ORDER BY key) FROM jsonb_each_text(s.step_errors))
                    END,
            finished_at = now()
        WHERE s.id = %(id)s
        RETURNING *
        """,
        {"threshold": threshold, "failed": failed, "id": slot_run_id},
    ).fetchone()


def refresh_slots_done(conn: psycopg.Connection, day: date) -> None:
    """Keep the day's report in step with its slot runs (the 22:00 slot closes after its report is built)."""
    conn.execute(
        """
        UPDATE daily_report SET slots_done = coalesce(
            (SELECT array_agg(slot ORDER BY slot) FROM slot_run WHERE run_date = %(day)s AND status = 1), '{}')
        WHERE report_date = %(day)s
        """,
        {"day": day},
    )


def slot_runs_for_day(conn: psycopg.Connection, day: date) -> list[Row]:
    return conn.execute("SELECT * FROM slot_run WHERE run_date = %s ORDER BY slot", (day,)).fetchall()
