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

from include.radar.core import redact
from include.radar.store.claims import EVALUATIONS, LEASE, Claim, end_running, renew_claims, take
from include.radar.store.claims import finish_attempt as finish_any_attempt
from include.radar.store.common import Row

PENDING, CLAIMED, DONE, FAILED = 0, 1, 2, 3


def create(conn: psycopg.Connection, spec: dict[str, Any]) -> int:
    row = conn.execute(
        """
        INSERT INTO evaluation (created_by, model, thinking, reasoning_effort, prompt_version, conn_id, days,
                                sample_size, only_with, cap, currency, prices, baseline)
        VALUES (%(created_by)s, %(model)s, %(thinking)s, %(reasoning_effort)s, %(prompt_version)s, %(conn_id)s,
                %(days)s, %(sample_size)s, %(only_with)s, %(cap)s, %(currency)s, %(prices)s, %(baseline)s)
        RETURNING id
        """,
        {"prices": None, "baseline": None, **spec, **{k: Jsonb(spec[k]) for k in ("prices", "baseline") if spec.get(k)}},
    ).fetchone()
    return int(row["id"])


def sample(conn: psycopg.Connection, *, since: Any, size: int, only_with: str) -> list[Row]:
    """The reader's own analysed articles published since ``since``, newest first, at most ``size``: one per
    text (a repost's copied analysis is not a second sample), bodies still kept, optionally only those the reader
    gave a verdict on or whose pick has a measured outcome."""
    return conn.execute(
        """
        SELECT c.id AS content_item_id, a.id AS analysis_id, c.title, c.clean_text, c.published_at,
               coalesce(w.name, c.mp_id) AS mp_name, a.prompt_tokens, a.completion_tokens
        FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account w ON w.id = c.account_id
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
               estimate: float | None = None, reason: str | None = None) -> None:
    """``reason``: why it stopped, failed or was refused (evaluation.py's kinds), None while it runs or when done."""
    conn.execute(
        """
        UPDATE evaluation SET status = %s, note = %s, estimate = coalesce(%s, estimate), reason = %s,
               finished_at = CASE WHEN %s IN ('done', 'stopped', 'refused', 'failed') THEN now() END
        WHERE id = %s
        """,
        (status, redact.scrub(note)[:1000], estimate, reason, status, evaluation_id),
    )


def set_cap(conn: psycopg.Connection, evaluation_id: int, cap: float) -> None:
    """The operator raises (or lowers) an evaluation's cap before running it again."""
    conn.execute("UPDATE evaluation SET cap = %s WHERE id = %s", (cap, evaluation_id))


def set_over_cap(conn: psycopg.Connection, evaluation_id: int, over: dict[str, Any]) -> None:
    """The run passed its cap on an endpoint that reported more than a call reserved: by how much, which call."""
    conn.execute("UPDATE evaluation SET over_cap = %s WHERE id = %s", (Jsonb(over), evaluation_id))


def over_reported(conn: psycopg.Connection, conn_id: str, model: str) -> int | None:
    """The latest evaluation whose endpoint (this connection and model) reported more than a call reserved."""
    row = conn.execute("SELECT max(id) AS id FROM evaluation WHERE conn_id = %s AND model = %s AND over_cap IS NOT NULL",
                       (conn_id, model)).fetchone()
    return row["id"] if row else None


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


def claim(conn: psycopg.Connection, evaluation_id: int, item_id: int, *, claimer: str, max_attempts: int,
          lease: timedelta | None = None) -> Claim:
    """Take a sampled article for one attempt, or say why not: done, busy (a live lease), pruned, missing,
    exhausted (store/claims.py's rules, on the evaluation's own tables)."""
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
    key = (evaluation_id, item_id)
    if row["status"] == CLAIMED:  # its holder's lease ran out: the worker was lost, its attempt counted
        end_running(conn, EVALUATIONS, key, "expired", "lease expired: worker lost")
    return take(conn, EVALUATIONS, row, claimer=claimer, max_attempts=max_attempts,
                lease=LEASE if lease is None else lease)


def renew(conn: psycopg.Connection, claimer: str) -> int:
    return renew_claims(conn, claimer, table=EVALUATIONS)


def finish_attempt(conn: psycopg.Connection, attempt_id: int, outcome: str, *, error: str | None = None,
                   llm_calls: int = 0, max_attempts: int | None = None) -> bool:
    return finish_any_attempt(conn, attempt_id, outcome, error=error, llm_calls=llm_calls,
                              max_attempts=max_attempts, table=EVALUATIONS)


def store_answer(conn: psycopg.Connection, attempt_id: int, answer: dict[str, Any]) -> bool:
    """The candidate's checked answer, if this attempt still holds the article (a lease taken over is not)."""
    row = conn.execute("SELECT evaluation_id, content_item_id, claimed_by FROM evaluation_attempt "
                       "WHERE id = %s AND outcome = 'running' FOR UPDATE", (attempt_id,)).fetchone()
    if row is None:
        return False
    conn.execute(
        """
        UPDATE evaluation_item SET score = %(score)s, has_opportunity = %(has_opportunity)s, top_type = %(top_type)s,
               summary = %(summary)s, result_json = %(result_json)s, evidence_verified = %(evidence_verified)s,
               consistency_note = %(consistency_note)s, failed_rungs = %(failed_rungs)s,
               prompt_tokens = %(prompt_tokens)s, completion_tokens = %(completion_tokens)s,
               cache_hit_tokens = %(cache_hit_tokens)s, cost = %(cost)s, latency_ms = %(latency_ms)s,
               llm_calls = %(llm_calls)s, answered_at = now()
        WHERE evaluation_id = %(evaluation_id)s AND content_item_id = %(content_item_id)s AND status = 1
          AND claimed_by = %(claimer)s
        """,
        {**answer, "result_json": Jsonb(answer["result_json"]), "evaluation_id": row["evaluation_id"],
         "content_item_id": row["content_item_id"], "claimer": row["claimed_by"]},
    )
    return finish_attempt(conn, attempt_id, "analysed", llm_calls=answer["llm_calls"])


@dataclass(frozen=True)
class Reservation:
    taken: bool  # the attempt now holds the amount asked for
    spent: float  # the evaluation's ledger
    others: float  # what other live attempts hold (they will release it)
    held: float  # what this attempt held before asking (its ladder's earlier call)


def reserve(conn: psycopg.Connection, evaluation_id: int, attempt_id: int, amount: float) -> Reservation:
    """Make ``amount`` the attempt's reservation if the ledger, the other attempts' reservations and it stay within
    the cap. Serialised on the evaluation's row; the sums read in one statement after the lock, so a ladder
    settling meanwhile is seen whole (its spend in, its reservation out) or not at all. What a dead run left
    reserved is counted, never waited for."""
    cap = conn.execute("SELECT cap FROM evaluation WHERE id = %s FOR UPDATE", (evaluation_id,)).fetchone()
    sums = conn.execute(
        """
        SELECT (SELECT coalesce(sum(cost), 0) FROM llm_spend WHERE evaluation_id = %(e)s) AS spent,
               coalesce(sum(reserved) FILTER (WHERE id <> %(a)s), 0) AS others,
               coalesce(sum(reserved) FILTER (WHERE id <> %(a)s AND outcome = 'running' AND lease_until > now()), 0)
                   AS live,
               coalesce(sum(reserved) FILTER (WHERE id = %(a)s), 0) AS held
        FROM evaluation_attempt WHERE evaluation_id = %(e)s
        """,
        {"e": evaluation_id, "a": attempt_id},
    ).fetchone()
    spent, others, live, held = (float(sums[k]) for k in ("spent", "others", "live", "held"))
    if cap is None or spent + others + amount > float(cap["cap"]):
        conn.rollback()
        return Reservation(False, spent, live, held)
    taken = conn.execute("UPDATE evaluation_attempt SET reserved = %s WHERE id = %s AND outcome = 'running'",
                         (amount, attempt_id)).rowcount
    conn.commit()
    return Reservation(bool(taken), spent, live, held)


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


def volume(conn: psycopg.Connection, until: Any, days: int) -> tuple[int, Any]:
    """The reader's paid analyses (no repost's copy) in the ``days`` days up to ``until``, and when the first was made."""
    row = conn.execute(
        "SELECT count(*) AS n, min(created_at) AS first FROM analysis_result WHERE reused_from_id IS NULL "
        "AND created_at > %(until)s - make_interval(days => %(days)s) AND created_at <= %(until)s",
        {"until": until, "days": days},
    ).fetchone()
    return int(row["n"]), row["first"]


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

