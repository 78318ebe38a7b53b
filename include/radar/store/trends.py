"""What the entity pages and the trends read: analyses naming a target, and per-day counts and scores."""

from __future__ import annotations

from datetime import date

import psycopg

from include.radar.store.common import Row


def entity_analyses(conn: psycopg.Connection, names: list[str], limit: int) -> tuple[list[Row], int]:
    """The analyses whose opportunities name any of ``names`` (one entity's spellings) among their targets,
    newest first, and how many."""
    rows = conn.execute(
        """
        SELECT a.id, a.score, a.summary, a.top_type, s.run_date, c.title, c.published_at,
               coalesce(acc.name, c.mp_id) AS mp_name, count(*) OVER () AS total
        FROM analysis_result a
        JOIN slot_run s ON s.id = a.slot_run_id
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        WHERE a.id IN (SELECT o.analysis_result_id FROM opportunity o WHERE o.targets ?| %s)
          AND a.reused_from_id IS NULL
        ORDER BY s.run_date DESC, a.id DESC LIMIT %s
        """,
        (names, limit),
    ).fetchall()
    return rows, (rows[0]["total"] if rows else 0)


def entity_daily(conn: psycopg.Connection, names: list[str], first: date, last: date) -> list[Row]:
    """Per day from ``first`` to ``last``: how many analyses named any of ``names``, their average and best score."""
    return conn.execute(
        """
        SELECT s.run_date AS day, count(*) AS n, avg(a.score)::float AS avg_score, max(a.score) AS max_score
        FROM analysis_result a JOIN slot_run s ON s.id = a.slot_run_id
        WHERE a.id IN (SELECT o.analysis_result_id FROM opportunity o WHERE o.targets ?| %s)
          AND a.reused_from_id IS NULL AND s.run_date BETWEEN %s AND %s
        GROUP BY s.run_date ORDER BY s.run_date
        """,
        (names, first, last),
    ).fetchall()


def topic_daily(conn: psycopg.Connection, first: date, last: date) -> list[Row]:
    """Per day and topic (top_type) of the analyses with an opportunity: how many, and their average score."""
    return conn.execute(
        """
        SELECT s.run_date AS day, a.top_type AS topic, count(*) AS n, avg(a.score)::float AS avg_score
        FROM slot_run s JOIN analysis_result a ON a.slot_run_id = s.id
        WHERE s.run_date BETWEEN %s AND %s AND a.top_type <> 'none' AND a.reused_from_id IS NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        """,
        (first, last),
    ).fetchall()


def top_entities(conn: psycopg.Connection, first: date, last: date, limit: int) -> list[Row]:
    """The targets named most often from ``first`` to ``last``, with their average score; an analysis counts
    once per target, and a stock code's spellings (``600519.SH``, ``SH600519``) count as its bare code, as
    on its entity page (focus.ticker_spellings)."""
    return conn.execute(
        r"""
        WITH named AS (
            SELECT DISTINCT CASE WHEN x.code ~ '^[0-9]{4,6}$' THEN x.code ELSE t.name END AS name, a.id, a.score
            FROM slot_run s
            JOIN analysis_result a ON a.slot_run_id = s.id
            JOIN opportunity o ON o.analysis_result_id = a.id
            CROSS JOIN LATERAL jsonb_array_elements_text(CASE jsonb_typeof(o.targets) WHEN 'array' THEN o.targets
                                                         ELSE '[]'::jsonb END) AS t(name)
            CROSS JOIN LATERAL (SELECT regexp_replace(btrim(t.name),
                '^(SH|SZ|BJ|HK)(?=[0-9])|\.(SH|SZ|BJ|HK|SS|US|O|N)$', '', 'gi') AS code) AS x
            WHERE s.run_date BETWEEN %s AND %s AND a.reused_from_id IS NULL AND length(t.name) BETWEEN 1 AND 60
        )
        SELECT name, count(*) AS n, avg(score)::float AS avg_score
        FROM named GROUP BY name ORDER BY n DESC, avg_score DESC, name LIMIT %s
        """,
        (first, last, limit),
    ).fetchall()


def day_scores(conn: psycopg.Connection, day: date) -> list[int]:
    return [r["score"] for r in conn.execute(
        "SELECT a.score FROM slot_run s JOIN analysis_result a ON a.slot_run_id = s.id "
        "WHERE s.run_date = %s AND a.reused_from_id IS NULL", (day,)).fetchall()]
