"""The daily report, and the read-only queries of the report pages."""

from __future__ import annotations

from datetime import date
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from include.radar.core import redact
from include.radar.store.common import Row
from include.radar.store.slot_runs import FAILED_OUTCOMES


def upsert_daily_report(conn: psycopg.Connection, report: dict[str, Any]) -> Row:
    return conn.execute(
        """
        INSERT INTO daily_report (report_date, status, digest_md, digest_json, slots_done, stats, model,
                                  prompt_version, error, slot_run_id)
        VALUES (%(report_date)s, %(status)s, %(digest_md)s, %(digest_json)s, %(slots_done)s, %(stats)s,
                %(model)s, %(prompt_version)s, %(error)s, %(slot_run_id)s)
        ON CONFLICT ON CONSTRAINT daily_report_report_date_key DO UPDATE SET
            status = EXCLUDED.status, digest_md = EXCLUDED.digest_md, digest_json = EXCLUDED.digest_json,
            slots_done = EXCLUDED.slots_done, stats = EXCLUDED.stats, model = EXCLUDED.model,
            prompt_version = EXCLUDED.prompt_version, error = EXCLUDED.error,
            slot_run_id = EXCLUDED.slot_run_id, updated_at = now()
        RETURNING *
        """,
        {**report, "error": redact.scrub(report["error"]) or None, "digest_json": Jsonb(report["digest_json"]),
         "stats": Jsonb(report["stats"])},
    ).fetchone()


def report_predates_slot(conn: psycopg.Connection, day: date, slot_run_id: int) -> bool:
    """Whether ``day``'s report exists and was built before this slot run analysed (or failed) something."""
    row = conn.execute(
        """
        SELECT r.updated_at < greatest(
                   (SELECT max(created_at) FROM analysis_result WHERE slot_run_id = %(slot)s),
                   (SELECT max(finished_at) FROM analysis_attempt WHERE slot_run_id = %(slot)s)) AS stale
        FROM daily_report r WHERE r.report_date = %(day)s
        """,
        {"day": day, "slot": slot_run_id},
    ).fetchone()
    return bool(row and row["stale"])


def mark_report_failed(conn: psycopg.Connection, day: date, error: str, slot_run_id: int | None) -> Row:
    """The day's report could not be built: say so, keeping any digest an earlier build left."""
    return conn.execute(
        """
        INSERT INTO daily_report (report_date, status, error, slot_run_id) VALUES (%s, 2, %s, %s)
        ON CONFLICT ON CONSTRAINT daily_report_report_date_key DO UPDATE SET
            status = 2, error = EXCLUDED.error, slot_run_id = EXCLUDED.slot_run_id, updated_at = now()
        RETURNING *
        """,
        (day, redact.scrub(error)[:4000], slot_run_id),
    ).fetchone()


def get_daily_report(conn: psycopg.Connection, day: date) -> Row | None:
    return conn.execute("SELECT * FROM daily_report WHERE report_date = %s", (day,)).fetchone()



# ------------------------------------------------------------------------------------------ report pages
# Read-only queries of the report web app (include/radar/web). Each page makes a handful of these on one
# connection; they are shaped so a year of data stays on index scans.


_RECENT_DAYS = """
    WITH days AS (
        SELECT d::date AS day
        FROM generate_series(%(start)s::date, %(end)s::date, interval '1 day') AS d
    ), runs AS (
        SELECT run_date, count(*) AS slots_run,
               count(*) FILTER (WHERE status = 1) AS slots_done,
               count(*) FILTER (WHERE status = 2) AS slots_failed
        FROM slot_run WHERE run_date BETWEEN %(start)s AND %(end)s
        GROUP BY run_date
    ), analysed AS (
        SELECT s.run_date, count(*) AS analysed,
               count(*) FILTER (WHERE a.score >= %(threshold)s AND a.reused_from_id IS NULL
                                AND a.evidence_verified IS NOT FALSE) AS opportunities,
               max(a.score) AS max_score
        FROM slot_run s JOIN analysis_result a ON a.slot_run_id = s.id
        WHERE s.run_date BETWEEN %(start)s AND %(end)s
        GROUP BY s.run_date
    ), failed AS (  -- articles that failed in a slot of the day and were not analysed that day (day_failures)
        SELECT s.run_date, count(DISTINCT t.content_item_id) AS failed
        FROM slot_run s JOIN analysis_attempt t ON t.slot_run_id = s.id AND t.outcome = ANY(%(failed_outcomes)s)
        WHERE s.run_date BETWEEN %(start)s AND %(end)s
          AND NOT EXISTS (SELECT 1 FROM analysis_result r JOIN slot_run rs ON rs.id = r.slot_run_id
                           WHERE r.content_item_id = t.content_item_id AND rs.run_date = s.run_date)
        GROUP BY s.run_date
    ), pushes AS (
        SELECT report_date, count(*) AS push_total,
               count(*) FILTER (WHERE status = 1) AS push_sent,
               count(*) FILTER (WHERE status = 2) AS push_failed,
               count(*) FILTER (WHERE status = 3) AS push_unknown
        FROM notification_log
        WHERE report_date BETWEEN %(start)s AND %(end)s AND push_type = 'daily'
        GROUP BY report_date
    ), reports AS (
        SELECT report_date, status FROM daily_report WHERE report_date BETWEEN %(start)s AND %(end)s
    )
    SELECT d.day,
           coalesce(r.slots_run, 0) AS slots_run, coalesce(r.slots_done, 0) AS slots_done,
           coalesce(r.slots_failed, 0) AS slots_failed,
           coalesce(an.analysed, 0) AS analysed, coalesce(an.opportunities, 0) AS opportunities,
           an.max_score, coalesce(f.failed, 0) AS failed,
           dr.status AS report_status,
           coalesce(p.push_total, 0) AS push_total, coalesce(p.push_sent, 0) AS push_sent,
           coalesce(p.push_failed, 0) AS push_failed, coalesce(p.push_unknown, 0) AS push_unknown
    FROM days d
    LEFT JOIN runs r ON r.run_date = d.day
    LEFT JOIN analysed an ON an.run_date = d.day
    LEFT JOIN failed f ON f.run_date = d.day
    LEFT JOIN pushes p ON p.report_date = d.day
    LEFT JOIN reports dr ON dr.report_date = d.day
    ORDER BY d.day DESC
"""


def recent_days(conn: psycopg.Connection, end_day: date, days: int, threshold: int) -> list[Row]:
    """One summary row per calendar day of ``[end_day - days + 1, end_day]``, newest first.

    Days without any data are included (all zero, statuses NULL) so the overview shows gaps rather than
    hiding them. Counts follow the daily page's definitions: analyses and failures belong to the day of the
    slot run that produced them; ``opportunities`` counts scores at or above ``threshold``; the push columns
    count the day's ``daily`` notifications by status (one row per channel).
    """
    return conn.execute(
        _RECENT_DAYS,
        {"start": date.fromordinal(end_day.toordinal() - days + 1), "end": end_day, "threshold": threshold,
         "failed_outcomes": FAILED_OUTCOMES},
    ).fetchall()


def daily_notifications(conn: psycopg.Connection, day: date) -> list[Row]:
    """The ``daily`` push of a report date, one row per channel (without the target URL: it may be signed)."""
    return conn.execute(
        """
        SELECT id, channel, slot, title, status, attempts, error, created_at, updated_at, sent_at
        FROM notification_log WHERE report_date = %s AND push_type = 'daily'
        ORDER BY channel, id
        """,
        (day,),
    ).fetchall()


def recent_slot_runs(conn: psycopg.Connection, limit: int) -> list[Row]:
    """The latest ``limit`` slot runs across days, the latest planned slot first (the health section)."""
    return conn.execute(
        "SELECT * FROM slot_run ORDER BY run_date DESC, slot DESC, id DESC LIMIT %s", (limit,)
    ).fetchall()
