"""The weekly summary's row (one per week, by its Monday) and the week's analyses it is built from."""

from __future__ import annotations

from datetime import date
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from include.radar.core import redact
from include.radar.store.analyses import analyses_between
from include.radar.store.common import Row


def week_analyses(conn: psycopg.Connection, first: date, last: date) -> list[Row]:
    """Every analysis of the slot runs from ``first`` to ``last`` (Shanghai days), best first."""
    return analyses_between(conn, first, last)


def week_failed(conn: psycopg.Connection, first: date, last: date) -> int:
    return conn.execute(
        """
        SELECT count(*) AS n FROM content_item c JOIN slot_run s ON s.id = c.last_slot_run_id
        WHERE c.analyzed_status = 3 AND s.run_date BETWEEN %s AND %s
        """,
        (first, last),
    ).fetchone()["n"]


def get_weekly_report(conn: psycopg.Connection, week_start: date) -> Row | None:
    return conn.execute("SELECT * FROM weekly_report WHERE week_start = %s", (week_start,)).fetchone()


def upsert_weekly_report(conn: psycopg.Connection, report: dict[str, Any]) -> Row:
    return conn.execute(
        """
        INSERT INTO weekly_report (week_start, status, digest_md, digest_json, stats, model, prompt_version, error,
                                   slot_run_id)
        VALUES (%(week_start)s, %(status)s, %(digest_md)s, %(digest_json)s, %(stats)s, %(model)s,
                %(prompt_version)s, %(error)s, %(slot_run_id)s)
        ON CONFLICT ON CONSTRAINT weekly_report_week_start_key DO UPDATE SET
            status = EXCLUDED.status, digest_md = EXCLUDED.digest_md, digest_json = EXCLUDED.digest_json,
            stats = EXCLUDED.stats, model = EXCLUDED.model, prompt_version = EXCLUDED.prompt_version,
            error = EXCLUDED.error, slot_run_id = EXCLUDED.slot_run_id, updated_at = now()
        RETURNING *
        """,
        {**report, "error": redact.scrub(report["error"]) or None, "digest_json": Jsonb(report["digest_json"]),
         "stats": Jsonb(report["stats"])},
    ).fetchone()
