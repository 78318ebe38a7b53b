"""The shadow evaluations' SQL: an evaluation, its sampled articles with their claims and the candidate's answers,
the attempts, and the evaluation's lines of the spend ledger.

An evaluation's article is claimed as a slot claims one (store/claims.py): one conditional update takes it for one
attempt, counted against the attempt limit, with a lease its holder renews; a lease that ran out is taken over
(that attempt closed as ``expired``); an answered article is never claimed again. So an evaluation started
again after a crash pays only for what it had not been answered, and never twice for one article.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from include.radar import redact
from include.radar.store.common import Row

PENDING, CLAIMED, DONE, FAILED = 0, 1, 2, 3
LEASE = timedelta(minutes=5)


def create(conn: psycopg.Connection, spec: dict[str, Any]) -> int:
    row = conn.execute(
        """
        INSERT INTO evaluation (created_by, model, thinking, reasoning_effort, prompt_version, conn_id, days,
                                sample_size, only_with, cap, currency)
        VALUES (%(created_by)s, %(model)s, %(thinking)s, %(reasoning_effort)s, %(prompt_version)s, %(conn_id)s,
                %(days)s, %(sample_size)s, %(only_with)s, %(cap)s, %(currency)s)
        RETURNING id
        """,
        spec,
    ).fetchone()
    return int(row["id"])


def sample(conn: psycopg.Connection, *, since: Any, size: int, only_with: str) -> list[Row]:
    """The reader's own analysed articles published since ``since``, newest first, at most ``size``: one per
    text (a repost's copied analysis is not a second sample), bodies still kept, optionally only those the reader
    gave a verdict on or whose pick has a measured outcome."""
    return conn.execute(
        """
        SELECT c.id AS content_item_id, a.id AS analysis_id, c.title, c.clean_text, a.prompt_tokens,
               a.completion_tokens
        FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id
        WHERE a.reused_from_id IS NULL AND c.body_pruned_at IS NULL AND c.clean_text IS NOT NULL
          AND c.published_at >= %(since)s
          AND (%(only)s <> 'feedback' OR EXISTS (SELECT 1 FROM feedback f WHERE f.analysis_id = a.id))
          AND (%(only)s <> 'outcomes' OR EXISTS (
                SELECT 1 FROM track_pick p JOIN track_outcome o ON o.pick_id = p.id
                WHERE p.analysis_id = a.id AND o.status IN ('measured', 'suspended')))
        ORDER BY c.published_at DESC, c.id DESC
        LIMIT %(size)s
        """,
        {"since": since, "size": size, "only": only_with},
    ).fetchall()


def add_items(conn: psycopg.Connection, evaluation_id: int, rows: list[Row]) -> None:
    for r in rows:
        conn.execute(
            "INSERT INTO evaluation_item (evaluation_id, content_item_id, baseline_analysis_id) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            (evaluation_id, r["content_item_id"], r["analysis_id"]),
        )


def set_status(conn: psycopg.Connection, evaluation_id: int, status: str, note: str = "", *,
               estimate: float | None = None) -> None:
    conn.execute(
        """
        UPDATE evaluation SET status = %s, note = %s, estimate = coalesce(%s, estimate),
               finished_at = CASE WHEN %s IN ('done', 'stopped', 'refused') THEN now() END
        WHERE id = %s
        """,
        (status, redact.scrub(note)[:1000], estimate, status, evaluation_id),
    )


def set_cap(conn: psycopg.Connection, evaluation_id: int, cap: float) -> None:
    """The operator raises (or lowers) an evaluation's cap before running it again."""
    conn.execute("UPDATE evaluation SET cap = %s WHERE id = %s", (cap, evaluation_id))


def get(conn: psycopg.Connection, evaluation_id: int) -> Row | None:
    return conn.execute(
        """
        SELECT e.*, (SELECT coalesce(sum(cost), 0) FROM llm_spend s WHERE s.evaluation_id = e.id) AS spent,
               (SELECT count(*) FROM evaluation_item i WHERE i.evaluation_id = e.id) AS items,
               (SELECT count(*) FROM evaluation_item i WHERE i.evaluation_id = e.id AND i.status = 2) AS answered,
               (SELECT count(*) FROM evaluation_item i WHERE i.evaluation_id = e.id AND i.status = 3) AS failed
        FROM evaluation e WHERE e.id = %s
        """,
        (evaluation_id,),
    ).fetchone()


def listing(conn: psycopg.Connection, limit: int = 50) -> list[Row]:
    ids = [r["id"] for r in conn.execute("SELECT id FROM evaluation ORDER BY id DESC LIMIT %s", (limit,)).fetchall()]
    return [row for row in (get(conn, i) for i in ids) if row is not None]


def spent(conn: psycopg.Connection, evaluation_id: int) -> float:
    row = conn.execute("SELECT coalesce(sum(cost), 0) AS total FROM llm_spend WHERE evaluation_id = %s",
                       (evaluation_id,)).fetchone()
    return float(row["total"])


def open_items(conn: psycopg.Connection, evaluation_id: int, max_attempts: int) -> list[Row]:
    """The articles still to answer: pending, or failed with attempts left, or claimed by a lease that ran out."""
    return conn.execute(
        """
        SELECT i.content_item_id AS item_id, c.title FROM evaluation_item i JOIN content_item c ON c.id = i.content_item_id
        WHERE i.evaluation_id = %s AND i.attempts < %s
          AND (i.status IN (0, 3) OR (i.status = 1 AND i.lease_until <= now()))
        ORDER BY i.content_item_id
        """,
        (evaluation_id, max_attempts),
    ).fetchall()


# ------------------------------------------------------------------------------------------------ claims


@dataclass(frozen=True)
class Claim:
    """``state``: claimed (``attempt_id`` is yours), done, busy (a live lease), exhausted, pruned, missing."""

    state: str
    item: Row | None = None
    attempt_id: int | None = None


def claim(conn: psycopg.Connection, evaluation_id: int, item_id: int, *, claimer: str, max_attempts: int,
          lease: timedelta = LEASE) -> Claim:
    row = conn.execute(
        """
        SELECT i.*, coalesce(i.lease_until > now(), false) AS leased, c.title, c.clean_text, c.published_at,
               c.body_pruned_at, coalesce(a.name, c.mp_id) AS mp_name, c.mp_id
        FROM evaluation_item i JOIN content_item c ON c.id = i.content_item_id
        LEFT JOIN wechat_account a ON a.id = c.account_id
        WHERE i.evaluation_id = %s AND i.content_item_id = %s FOR UPDATE OF i
        """,
        (evaluation_id, item_id),
    ).fetchone()
    if row is None:
        return Claim("missing")
    if row["status"] == DONE:
        return Claim("done", row)
    if row["status"] == CLAIMED and row["leased"]:
        return Claim("busy", row)
    if row["body_pruned_at"] is not None or not row["clean_text"]:
        return Claim("pruned", row)
    if row["status"] == CLAIMED:  # its holder's lease ran out: the worker was lost, its attempt counted
        _end_running(conn, evaluation_id, item_id, "expired", "lease expired: worker lost")
    if row["attempts"] >= max_attempts:
        conn.execute("UPDATE evaluation_item SET status = 3, claimed_by = NULL, lease_until = NULL "
                     "WHERE evaluation_id = %s AND content_item_id = %s", (evaluation_id, item_id))
        return Claim("exhausted", row)
    taken = conn.execute(
        """
        UPDATE evaluation_item SET status = 1, attempts = attempts + 1, claimed_by = %s, lease_until = now() + %s
        WHERE evaluation_id = %s AND content_item_id = %s RETURNING attempts
        """,
        (claimer, lease, evaluation_id, item_id),
    ).fetchone()
    attempt = conn.execute(
        "INSERT INTO evaluation_attempt (evaluation_id, content_item_id, claimed_by, attempt) VALUES (%s, %s, %s, %s) "
        "RETURNING id",
        (evaluation_id, item_id, claimer, taken["attempts"]),
    ).fetchone()
    return Claim("claimed", {**row, "attempts": taken["attempts"]}, attempt_id=int(attempt["id"]))


def _end_running(conn: psycopg.Connection, evaluation_id: int, item_id: int, outcome: str, error: str) -> None:
    conn.execute(
        "UPDATE evaluation_attempt SET outcome = %s, error = %s, finished_at = now() "
        "WHERE evaluation_id = %s AND content_item_id = %s AND outcome = 'running'",
        (outcome, error, evaluation_id, item_id),
    )


def renew(conn: psycopg.Connection, claimer: str, lease: timedelta = LEASE) -> int:
    return conn.execute("UPDATE evaluation_item SET lease_until = now() + %s WHERE status = 1 AND claimed_by = %s",
                        (lease, claimer)).rowcount


def store_answer(conn: psycopg.Connection, attempt_id: int, answer: dict[str, Any]) -> bool:
    """The candidate's checked answer, if this attempt still holds the article (a lease taken over is not)."""
    row = conn.execute(
        "UPDATE evaluation_attempt SET outcome = 'analysed', llm_calls = %s, finished_at = now() "
        "WHERE id = %s AND outcome = 'running' RETURNING evaluation_id, content_item_id, claimed_by",
        (answer["llm_calls"], attempt_id),
    ).fetchone()
    if row is None:
        return False
    conn.execute(
        """
        UPDATE evaluation_item SET status = 2, claimed_by = NULL, lease_until = NULL, last_error = NULL,
               score = %(score)s, has_opportunity = %(has_opportunity)s, top_type = %(top_type)s,
               summary = %(summary)s, result_json = %(result_json)s, evidence_verified = %(evidence_verified)s,
               consistency_note = %(consistency_note)s, failed_rungs = %(failed_rungs)s,
               prompt_tokens = %(prompt_tokens)s, completion_tokens = %(completion_tokens)s,
               cache_hit_tokens = %(cache_hit_tokens)s, cost = %(cost)s, latency_ms = %(latency_ms)s,
               llm_calls = %(llm_calls)s, answered_at = now()
        WHERE evaluation_id = %(evaluation_id)s AND content_item_id = %(content_item_id)s AND claimed_by = %(claimer)s
        """,
        {**answer, "result_json": Jsonb(answer["result_json"]), "evaluation_id": row["evaluation_id"],
         "content_item_id": row["content_item_id"], "claimer": row["claimed_by"]},
    )
    return True


def finish_attempt(conn: psycopg.Connection, attempt_id: int, outcome: str, error: str | None, llm_calls: int) -> None:
    """An attempt that produced no answer: failed or crashed (retried while attempts remain), interrupted (the
    run's time ran out mid-ladder: pending again, the attempt counted), or released (a configuration error before
    any answered call: pending, not counted)."""
    row = conn.execute(
        "UPDATE evaluation_attempt SET outcome = %s, error = %s, llm_calls = %s, finished_at = now() "
        "WHERE id = %s AND outcome = 'running' RETURNING evaluation_id, content_item_id, claimed_by",
        (outcome, redact.scrub(error)[:2000] or None, llm_calls, attempt_id),
    ).fetchone()
    if row is None:
        return
    released = outcome == "released"
    status = PENDING if outcome in ("released", "interrupted") else FAILED
    conn.execute(
        f"""
        UPDATE evaluation_item SET status = {status}, last_error = %s, claimed_by = NULL,
               lease_until = NULL, attempts = {"GREATEST(attempts - 1, 0)" if released else "attempts"}
        WHERE evaluation_id = %s AND content_item_id = %s AND claimed_by = %s AND status = 1
        """,
        (redact.scrub(error)[:2000] or None, row["evaluation_id"], row["content_item_id"], row["claimed_by"]),
    )


def record_spend(conn: psycopg.Connection, entry: dict[str, Any]) -> None:
    """One answered ladder of an evaluation's calls, in the shared ledger (the day's budget counts it)."""
    conn.execute(
        """
        INSERT INTO llm_spend (spent_on, purpose, evaluation_id, model, calls, answered, peak_calls, rate_limited,
                               prompt_tokens, cache_hit_tokens, cache_miss_tokens, completion_tokens, reasoning_tokens,
                               cost, currency)
        VALUES (%(spent_on)s, 'evaluation', %(evaluation_id)s, %(model)s, %(calls)s, %(answered)s, %(peak_calls)s,
                %(rate_limited)s, %(prompt_tokens)s, %(cache_hit_tokens)s, %(cache_miss_tokens)s,
                %(completion_tokens)s, %(reasoning_tokens)s, %(cost)s, %(currency)s)
        """,
        entry,
    )


# ------------------------------------------------------------------------------------------ comparison


def pairs(conn: psycopg.Connection, evaluation_id: int) -> list[Row]:
    """Every sampled article with the reader's analysis, the candidate's answer (when there is one), the reader's
    verdict and when the slot that analysed it ran."""
    return conn.execute(
        """
        SELECT i.content_item_id, c.title, i.status, i.attempts, i.last_error,
               i.score AS c_score, i.has_opportunity AS c_opp, i.top_type AS c_type, i.summary AS c_summary,
               i.result_json AS c_json, i.evidence_verified AS c_verified, i.failed_rungs AS c_failed_rungs,
               i.prompt_tokens AS c_prompt, i.completion_tokens AS c_completion, i.cache_hit_tokens AS c_hit,
               i.cost AS c_cost, i.latency_ms AS c_latency, i.llm_calls AS c_calls,
               a.id AS analysis_id, a.score AS b_score, a.has_opportunity AS b_opp, a.top_type AS b_type,
               a.summary AS b_summary, a.result_json AS b_json, a.evidence_verified AS b_verified,
               a.llm_calls AS b_calls, a.prompt_tokens AS b_prompt, a.completion_tokens AS b_completion,
               a.cache_hit_tokens AS b_hit, a.cost AS b_cost, a.latency_ms AS b_latency, a.model AS b_model,
               a.prompt_version AS b_prompt_version, f.verdict, s.started_at AS slot_at
        FROM evaluation_item i JOIN content_item c ON c.id = i.content_item_id
        LEFT JOIN analysis_result a ON a.id = i.baseline_analysis_id
        LEFT JOIN feedback f ON f.analysis_id = a.id
        LEFT JOIN slot_run s ON s.id = a.slot_run_id
        WHERE i.evaluation_id = %s
        ORDER BY i.content_item_id
        """,
        (evaluation_id,),
    ).fetchall()


def ledger(conn: psycopg.Connection, evaluation_id: int) -> Row:
    return conn.execute(
        """
        SELECT coalesce(sum(cost), 0) AS cost, coalesce(sum(calls), 0) AS calls, coalesce(sum(prompt_tokens), 0) AS prompt,
               coalesce(sum(cache_hit_tokens), 0) AS hit, coalesce(sum(completion_tokens), 0) AS completion,
               max(currency) AS currency
        FROM llm_spend WHERE evaluation_id = %s
        """,
        (evaluation_id,),
    ).fetchone()

