"""Analyses: storing an article's analysis (and its opportunities, its search words) and reading them back for
the slot's decision, the reports and the pages. How an article comes to be analysed — claims, leases and
attempts — is store/claims.py's.
"""


from __future__ import annotations

from datetime import date, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from include.radar.core import search
from include.radar.store.common import Row
from include.radar.store.slot_runs import FAILED_OUTCOMES


def analysis_for_item(conn: psycopg.Connection, item_id: int) -> Row | None:
    return conn.execute("SELECT * FROM analysis_result WHERE content_item_id = %s", (item_id,)).fetchone()


def analysis_for_hash(conn: psycopg.Connection, content_hash: str, exclude_item_id: int) -> Row | None:
    """An analysis of the same clean text under another external id (a repost), if there is one."""
    return conn.execute(
        """
        SELECT a.* FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id
        WHERE c.content_hash = %s AND c.id <> %s
        ORDER BY a.id LIMIT 1
        """,
        (content_hash, exclude_item_id),
    ).fetchone()


def insert_analysis(
    conn: psycopg.Connection, record: dict[str, Any], opportunities: list[dict[str, Any]], *,
    attempt_id: int | None = None,
) -> int | None:
    """Store an analysis and its opportunities, mark the item done and close its attempt; None when one
    already existed (that one stands)."""
    row = conn.execute(
        """
        INSERT INTO analysis_result (content_item_id, slot_run_id, reused_from_id, score, has_opportunity,
               top_type, summary, result_json, model, prompt_version, prompt_tokens, completion_tokens,
               reasoning_tokens, cache_hit_tokens, cache_miss_tokens, cost, currency, latency_ms, llm_calls, evidence_verified, consistency_note, watch_hits)
        VALUES (%(content_item_id)s, %(slot_run_id)s, %(reused_from_id)s, %(score)s, %(has_opportunity)s,
               %(top_type)s, %(summary)s, %(result_json)s, %(model)s, %(prompt_version)s, %(prompt_tokens)s,
               %(completion_tokens)s, %(reasoning_tokens)s, %(cache_hit_tokens)s, %(cache_miss_tokens)s,
               %(cost)s, %(currency)s, %(latency_ms)s, %(llm_calls)s, %(evidence_verified)s, %(consistency_note)s, %(watch_hits)s)
        ON CONFLICT ON CONSTRAINT analysis_result_content_item_id_key DO NOTHING
        RETURNING id
        """,
        {"evidence_verified": None, "consistency_note": None, "watch_hits": [], **record, "result_json": Jsonb(record["result_json"])},
    ).fetchone()
    if row is None:
        return None
    analysis_id = row["id"]
    _insert_opportunities(conn, analysis_id, opportunities)
    conn.execute(
        """
        UPDATE content_item SET analyzed_status = 2, last_error = NULL, claimed_by = NULL, lease_until = NULL,
               updated_at = now(), search_tsv = coalesce(search_tsv, ''::tsvector) || array_to_tsvector(%s::text[])
        WHERE id = %s
        """,
        (search.lexemes("", "", analysis_words(record, opportunities)), record["content_item_id"]),
    )
    if attempt_id is not None:
        conn.execute(
            """
            UPDATE analysis_attempt SET outcome = 'analysed', llm_calls = %s, finished_at = now()
            WHERE id = %s AND outcome = 'running'
            """,
            (record.get("llm_calls") or 0, attempt_id),
        )
    return analysis_id


def _insert_opportunities(conn: psycopg.Connection, analysis_id: int, opportunities: list[dict[str, Any]]) -> None:
    for position, opp in enumerate(opportunities):
        conn.execute(
            """
            INSERT INTO opportunity (analysis_result_id, position, name, type, targets, direction, horizon,
                                     catalyst, risks, evidence, confidence)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            """,
            (
                analysis_id,
                position,
                opp["name"],
                opp["type"],
                Jsonb(opp.get("targets", [])),
                opp.get("direction", ""),
                opp.get("horizon", ""),
                opp.get("catalyst", ""),
                Jsonb(opp.get("risks", [])),
                Jsonb(opp.get("evidence", [])),
                opp.get("confidence", 0),
            ),
        )

def analysis_words(record: dict[str, Any], opportunities: list[dict[str, Any]]) -> list[str]:
    """What an analysis adds to its article's search lexemes: its summary, opportunity names and targets."""
    found = [str(record.get("summary") or "")]
    for opp in opportunities:
        found.append(str(opp.get("name") or ""))
        found += [str(t) for t in opp.get("targets") or [] if isinstance(t, str)]
    return found


def mark_item_done(conn: psycopg.Connection, item_id: int) -> None:
    conn.execute(
        "UPDATE content_item SET analyzed_status = 2, claimed_by = NULL, lease_until = NULL, updated_at = now() "
        "WHERE id = %s",
        (item_id,),
    )


# ----------------------------------------------------------------------------------- analyses for reading

ANALYSIS_COLUMNS = """
    a.id, a.content_item_id, a.slot_run_id, a.reused_from_id, a.score, a.has_opportunity, a.top_type,
    a.summary, a.result_json, a.model, a.prompt_version, a.prompt_tokens, a.completion_tokens,
    a.reasoning_tokens, a.cache_hit_tokens, a.cache_miss_tokens, a.cost, a.currency, a.evidence_verified, a.consistency_note, a.latency_ms, a.llm_calls,
    a.event_id, a.event_note, a.watch_hits,
    a.created_at, c.title, c.url, c.published_at, c.external_id, c.mp_id,
    coalesce(acc.name, c.mp_id) AS mp_name, s.run_date, s.slot
"""


def slot_analyses(conn: psycopg.Connection, slot_run_id: int) -> list[Row]:
    """The analyses produced by this slot run, best first."""
    return conn.execute(
        f"""
        SELECT {ANALYSIS_COLUMNS} FROM analysis_result a
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        JOIN slot_run s ON s.id = a.slot_run_id
        WHERE a.slot_run_id = %s
        ORDER BY a.score DESC, a.id
        """,
        (slot_run_id,),
    ).fetchall()


def day_analyses(conn: psycopg.Connection, day: date) -> list[Row]:
    """Every analysis produced by a slot run of that (Asia/Shanghai) day, best first."""
    return analyses_between(conn, day, day)


def analyses_between(conn: psycopg.Connection, first: date, last: date) -> list[Row]:
    """Every analysis produced by a slot run of the (Asia/Shanghai) days ``first`` to ``last``, best first."""
    return conn.execute(
        f"""
        SELECT {ANALYSIS_COLUMNS} FROM slot_run s
        JOIN analysis_result a ON a.slot_run_id = s.id
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        WHERE s.run_date BETWEEN %s AND %s
        ORDER BY a.score DESC, a.id
        """,
        (first, last),
    ).fetchall()


def day_failures(conn: psycopg.Connection, day: date) -> list[Row]:
    """Articles whose analysis failed in a slot of that day and that no slot of that day analysed after all.

    One row per article (its latest failed attempt of the day): the day's record stays true when a later
    day retries the article. ``final`` says whether it has used up its attempts.
    """
    return conn.execute(
        """
        SELECT * FROM (
            SELECT DISTINCT ON (c.id) c.id, c.title, c.url, c.published_at, c.attempts, c.analyzed_status,
                   coalesce(t.error, c.last_error) AS last_error, t.outcome, s.slot,
                   coalesce(acc.name, c.mp_id) AS mp_name
            FROM slot_run s
            JOIN analysis_attempt t ON t.slot_run_id = s.id AND t.outcome = ANY(%(failed)s)
            JOIN content_item c ON c.id = t.content_item_id
            LEFT JOIN wechat_account acc ON acc.id = c.account_id
            WHERE s.run_date = %(day)s
              AND NOT EXISTS (SELECT 1 FROM analysis_result r JOIN slot_run rs ON rs.id = r.slot_run_id
                               WHERE r.content_item_id = c.id AND rs.run_date = %(day)s)
            ORDER BY c.id, t.id DESC
        ) failures
        ORDER BY published_at DESC, id
        """,
        {"day": day, "failed": FAILED_OUTCOMES},
    ).fetchall()


def pending_items(conn: psycopg.Connection, published_before: datetime, limit: int = 50) -> list[Row]:
    """Articles published before ``published_before`` that still wait for an analysis (pending, or being
    analysed right now)."""
    return conn.execute(
        """
        SELECT c.id, c.title, c.url, c.published_at, c.attempts, c.analyzed_status,
               coalesce(acc.name, c.mp_id) AS mp_name
        FROM content_item c LEFT JOIN wechat_account acc ON acc.id = c.account_id
        WHERE c.body_status = 1 AND c.analyzed_status IN (0, 1) AND c.published_at < %s
        ORDER BY c.published_at DESC, c.id
        LIMIT %s
        """,
        (published_before, limit),
    ).fetchall()


def get_analysis(conn: psycopg.Connection, analysis_id: int) -> Row | None:
    return conn.execute(
        f"""
        SELECT {ANALYSIS_COLUMNS}, s.dag_run_id, s.dag_id, c.clean_text, c.body_pruned_at FROM analysis_result a
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        LEFT JOIN slot_run s ON s.id = a.slot_run_id
        WHERE a.id = %s
        """,
        (analysis_id,),
    ).fetchone()


def opportunities_of(conn: psycopg.Connection, analysis_id: int) -> list[Row]:
    return conn.execute(
        "SELECT * FROM opportunity WHERE analysis_result_id = %s ORDER BY position", (analysis_id,)
    ).fetchall()


def existing_analysis_ids(conn: psycopg.Connection, ids: list[int]) -> set[int]:
    if not ids:
        return set()
    rows = conn.execute("SELECT id FROM analysis_result WHERE id = ANY(%s)", (ids,)).fetchall()
    return {r["id"] for r in rows}



def analysis_brief(conn: psycopg.Connection, analysis_id: int) -> Row | None:
    """Title and score of one analysis: enough to name the analysis another one reused."""
    return conn.execute(
        """
        SELECT a.id, a.score, c.title FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id
        WHERE a.id = %s
        """,
        (analysis_id,),
    ).fetchone()
