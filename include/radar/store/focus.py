"""The reader's profile (one row), the articles its rules exclude, and the reader's feedback on analyses."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from include.radar.store.common import Row

EXCLUDED = 4  # content_item.analyzed_status: the reader's rules keep it from the LLM
FEEDBACK_DAYS = 180  # what the ranking learns from: the verdicts of the last half year
SLOW_RULES_STATE = "focus:slow_rules"  # service_state: the regex rules slots switched off, rule label → why
MAX_SLOW_RULES = 200


def slow_rules(conn: psycopg.Connection) -> dict[str, str]:
    """The regex rules slots switched off as too slow (rule label as the reader wrote it → why, in Chinese)."""
    row = conn.execute("SELECT value FROM service_state WHERE key = %s", (SLOW_RULES_STATE,)).fetchone()
    value = row["value"] if row else None
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def switch_off_rules(conn: psycopg.Connection, reasons: dict[str, str]) -> None:
    """Add ``reasons`` to the switched-off rules (the newest MAX_SLOW_RULES kept: a profile holds fewer)."""
    merged = list({**slow_rules(conn), **reasons}.items())[-MAX_SLOW_RULES:]
    conn.execute(
        """
        INSERT INTO service_state (key, value) VALUES (%s, %s)
        ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
        """,
        (SLOW_RULES_STATE, Jsonb(dict(merged))),
    )


def get_profile(conn: psycopg.Connection) -> Row | None:
    return conn.execute("SELECT * FROM reader_profile WHERE id = 1").fetchone()


def save_profile(conn: psycopg.Connection, lists: dict[str, list[str]], updated_by: str | None) -> None:
    conn.execute(
        """
        INSERT INTO reader_profile (id, companies, tickers, sectors, interests, rules, updated_by, updated_at)
        VALUES (1, %(companies)s, %(tickers)s, %(sectors)s, %(interests)s, %(rules)s, %(by)s, now())
        ON CONFLICT (id) DO UPDATE SET companies = EXCLUDED.companies, tickers = EXCLUDED.tickers,
               sectors = EXCLUDED.sectors, interests = EXCLUDED.interests, rules = EXCLUDED.rules,
               updated_by = EXCLUDED.updated_by, updated_at = now()
        """,
        {**lists, "by": updated_by},
    )


def texts_of(conn: psycopg.Connection, item_ids: list[int], chars: int) -> dict[int, Row]:
    """Title and the first ``chars`` of the clean text of each article, for the reader's rules."""
    rows = conn.execute(
        "SELECT id, title, left(clean_text, %s) AS text FROM content_item WHERE id = ANY(%s)", (chars, item_ids)
    ).fetchall()
    return {r["id"]: r for r in rows}


def exclude_items(conn: psycopg.Connection, slot_run_id: int, reasons: dict[int, str]) -> int:
    """Mark the articles the reader's rules exclude (only those still waiting: a claimed or analysed one is
    not taken back) and count them on the slot run; returns how many were marked."""
    marked = 0
    for item_id, reason in reasons.items():
        marked += conn.execute(
            """
            UPDATE content_item SET analyzed_status = 4, last_error = %s, last_slot_run_id = %s, updated_at = now()
            WHERE id = %s AND analyzed_status IN (0, 3)
            """,
            (reason, slot_run_id, item_id),
        ).rowcount
    if marked:
        conn.execute("UPDATE slot_run SET excluded_count = excluded_count + %s WHERE id = %s", (marked, slot_run_id))
    return marked


def excluded_items(conn: psycopg.Connection, slot_run_ids: list[int], limit: int = 50) -> list[Row]:
    """The articles these slot runs excluded, newest first (the pages list them with the rule)."""
    return conn.execute(
        """
        SELECT c.id, c.title, c.url, c.published_at, c.last_error AS reason, c.last_slot_run_id,
               coalesce(acc.name, c.mp_id) AS mp_name
        FROM content_item c LEFT JOIN wechat_account acc ON acc.id = c.account_id
        WHERE c.analyzed_status = 4 AND c.last_slot_run_id = ANY(%s)
        ORDER BY c.published_at DESC, c.id DESC LIMIT %s
        """,
        (slot_run_ids, limit),
    ).fetchall()


def set_feedback(conn: psycopg.Connection, analysis_id: int, verdict: str, via: str) -> str:
    """Record the reader's verdict; 'recorded', 'unchanged' (the same verdict again: idempotent),
    'changed' or 'missing' (no such analysis)."""
    row = conn.execute(
        """
        WITH target AS (SELECT id FROM analysis_result WHERE id = %(id)s),
        previous AS (SELECT verdict FROM feedback WHERE analysis_id = %(id)s),
        written AS (
            INSERT INTO feedback (analysis_id, verdict, via)
            SELECT id, %(verdict)s, %(via)s FROM target
            ON CONFLICT (analysis_id) DO UPDATE SET verdict = EXCLUDED.verdict, via = EXCLUDED.via, updated_at = now()
            WHERE feedback.verdict IS DISTINCT FROM EXCLUDED.verdict
            RETURNING analysis_id
        )
        SELECT (SELECT count(*) FROM target) AS found, (SELECT verdict FROM previous) AS previous,
               (SELECT count(*) FROM written) AS written
        """,
        {"id": analysis_id, "verdict": verdict, "via": via},
    ).fetchone()
    if not row["found"]:
        return "missing"
    if not row["written"]:
        return "unchanged"
    return "changed" if row["previous"] else "recorded"


def feedback_of(conn: psycopg.Connection, analysis_ids: list[int]) -> dict[int, str]:
    rows = conn.execute(
        "SELECT analysis_id, verdict FROM feedback WHERE analysis_id = ANY(%s)", (analysis_ids,)
    ).fetchall()
    return {r["analysis_id"]: r["verdict"] for r in rows}


def feedback_version(conn: psycopg.Connection, now: datetime, days: int = FEEDBACK_DAYS) -> tuple[Any, ...]:
    """What :func:`feedback_for_ranking` would read, summed up in one cheap row (how many verdicts, the
    latest change, a checksum of who said what): the pages reuse the weights learned while it is unchanged."""
    row = conn.execute(
        """
        SELECT count(*) AS n, max(updated_at) AS latest,
               coalesce(sum(hashtext(analysis_id::text || ':' || verdict)), 0) AS mix
        FROM feedback WHERE updated_at > %s - make_interval(days => %s)
        """,
        (now, days),
    ).fetchone()
    return (row["n"], row["latest"], row["mix"])


def feedback_for_ranking(conn: psycopg.Connection, now: datetime, days: int = FEEDBACK_DAYS) -> list[Row]:
    """The verdicts of the last ``days`` with what the ranking learns from: the account, the topic and the
    opportunities (result_json) of each analysis."""
    return conn.execute(
        """
        SELECT f.verdict, a.top_type, a.result_json, coalesce(acc.name, c.mp_id) AS mp_name
        FROM feedback f
        JOIN analysis_result a ON a.id = f.analysis_id
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        WHERE f.updated_at > %s - make_interval(days => %s)
        ORDER BY f.updated_at DESC LIMIT 2000
        """,
        (now, days),
    ).fetchall()



def excluded_to_recheck(conn: psycopg.Connection, since: datetime, chars: int, limit: int) -> list[Row]:
    """After the reader changed their rules (run by the next slot, never by the page that saved them): the
    articles published since ``since`` that an older profile excluded, newest first, at most ``limit`` (a slot
    re-checks a batch; the next slot takes the rest: what :func:`settle_recheck` did not touch is still older
    than the profile)."""
    return conn.execute(
        """
        SELECT c.id, c.title, left(c.clean_text, %s) AS text FROM content_item c, reader_profile p
        WHERE p.id = 1 AND c.analyzed_status = 4 AND c.published_at > %s AND c.updated_at < p.updated_at
        ORDER BY c.published_at DESC, c.id DESC LIMIT %s
        """,
        (chars, since, limit),
    ).fetchall()


def settle_recheck(conn: psycopg.Connection, back: list[int], kept: dict[int, str]) -> int:
    """What a re-check decided: the articles ``back`` wait for analysis again, those ``kept`` stay excluded
    with the reason the current rules give. Each is checked once per profile change; returns how many came
    back."""
    for item_id, reason in kept.items():
        conn.execute("UPDATE content_item SET last_error = %s, updated_at = now() WHERE id = %s AND analyzed_status = 4",
                     (reason, item_id))
    if back:
        conn.execute(
            "UPDATE content_item SET analyzed_status = 0, last_error = NULL, updated_at = now() "
            "WHERE id = ANY(%s) AND analyzed_status = 4", (back,))
    return len(back)


def excluded_count(conn: psycopg.Connection, since: datetime) -> int:
    """How many articles published since ``since`` the rules keep excluded (what the next slot re-checks)."""
    return conn.execute(
        "SELECT count(*) AS n FROM content_item WHERE analyzed_status = 4 AND published_at > %s", (since,)
    ).fetchone()["n"]


def analyses_since(conn: psycopg.Connection, since: datetime, limit: int) -> tuple[list[Row], int]:
    """The analyses stored after ``since`` (the reader's last visit), newest first, and how many there are."""
    from include.radar.store.analyses import ANALYSIS_COLUMNS  # the one column list

    rows = conn.execute(
        f"""
        SELECT {ANALYSIS_COLUMNS}, count(*) OVER () AS total FROM analysis_result a
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        JOIN slot_run s ON s.id = a.slot_run_id
        WHERE a.created_at > %s AND a.reused_from_id IS NULL
        ORDER BY a.created_at DESC, a.id DESC LIMIT %s
        """,
        (since, limit),
    ).fetchall()
    return rows, (rows[0]["total"] if rows else 0)
