"""All of the radar's SQL, parameterised, in one place.

Every function takes an open psycopg connection (``db.connect()``) and leaves committing to the caller's
``with`` block. Idempotency rests on the schema's unique constraints; the functions here use
``ON CONFLICT`` so that a duplicate is an answer, never an error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from include.radar.slots import SlotKey

Row = dict[str, Any]

# content_item.analyzed_status
PENDING, ANALYSING, DONE, FAILED = 0, 1, 2, 3
# content_item.body_status
BODY_WAITING, BODY_READY, BODY_UNUSABLE = 0, 1, 2
# slot_run.status
RUNNING, SUCCESS, SLOT_FAILED = 0, 1, 2
# notification_log.status
NOTE_PENDING, NOTE_SENT, NOTE_FAILED = 0, 1, 2
# daily_report.status
REPORT_BUILDING, REPORT_OK, REPORT_FAILED = 0, 1, 2


# --------------------------------------------------------------------------------------------- slot runs


def open_slot_run(
    conn: psycopg.Connection, key: SlotKey, *, run_type: str, dag_id: str | None, dag_run_id: str | None
) -> Row:
    """Get or create the run record of (run_date, slot); concurrent openers get the same row.

    Reopening (a rerun, a second trigger of the same slot) marks it running again, counts the attempt and
    forgets the step errors of the previous run (each step records again as it runs); ``started_at`` keeps
    the first opening so lateness is judged from the first start.
    """
    return conn.execute(
        """
        INSERT INTO slot_run (run_date, slot, scheduled_at, run_type, dag_id, dag_run_id)
        VALUES (%s, %s, %s, %s, %s, %s)
        ON CONFLICT ON CONSTRAINT slot_run_date_slot_key DO UPDATE
           SET status = 0,
               attempts = slot_run.attempts + 1,
               run_type = EXCLUDED.run_type,
               dag_id = EXCLUDED.dag_id,
               dag_run_id = EXCLUDED.dag_run_id,
               finished_at = NULL,
               step_errors = '{}'::jsonb,
               error = NULL
        RETURNING *, (xmax = 0) AS created
        """,
        (key.run_date, key.slot, key.scheduled_at, run_type, dag_id, dag_run_id),
    ).fetchone()


def get_slot_run(conn: psycopg.Connection, slot_run_id: int) -> Row | None:
    return conn.execute("SELECT * FROM slot_run WHERE id = %s", (slot_run_id,)).fetchone()


def record_step(conn: psycopg.Connection, slot_run_id: int, step: str, error: str | None) -> None:
    """Remember the outcome of a step: its error, or clear it when the step (re)ran cleanly."""
    if error is None:
        conn.execute("UPDATE slot_run SET step_errors = step_errors - %s WHERE id = %s", (step, slot_run_id))
    else:
        conn.execute(
            "UPDATE slot_run SET step_errors = step_errors || jsonb_build_object(%s::text, %s::text) WHERE id = %s",
            (step, error[:2000], slot_run_id),
        )


def record_ingest(conn: psycopg.Connection, slot_run_id: int, *, new: int, skipped: int, waiting: int) -> None:
    """Add what one ingest run found to the slot: a rerun adds its new articles, never writes over them.

    ``waiting_count`` is a state (articles of the window still without a body), so it is the latest value.
    """
    conn.execute(
        """
        UPDATE slot_run SET new_count = new_count + %s, skipped_count = skipped_count + %s, waiting_count = %s
        WHERE id = %s
        """,
        (new, skipped, waiting, slot_run_id),
    )


MAX_SLOT_WARNINGS = 100


def add_slot_warnings(conn: psycopg.Connection, slot_run_id: int, step: str, messages: list[str]) -> None:
    """Append handled problems (a skipped row, a failed account, a deadline) to the slot's warnings."""
    if not messages:
        return
    entries = [{"step": step, "message": m[:500]} for m in messages]
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


def close_slot_run(conn: psycopg.Connection, slot_run_id: int, threshold: int) -> Row:
    """Set the final counts (from the database, not from XCom) and the status from the step errors."""
    return conn.execute(
        """
        UPDATE slot_run s SET
            analysed_count = (SELECT count(*) FROM analysis_result a WHERE a.slot_run_id = s.id),
            opportunity_count = (SELECT count(*) FROM analysis_result a
                                  WHERE a.slot_run_id = s.id AND a.score >= %(threshold)s
                                    AND a.reused_from_id IS NULL),
            failed_count = (SELECT count(*) FROM content_item c
                             WHERE c.last_slot_run_id = s.id AND c.analyzed_status = 3),
            pushed_count = (SELECT count(*) FROM notification_log n
                             WHERE n.slot_run_id = s.id AND n.status = 1),
            status = CASE WHEN s.step_errors = '{}'::jsonb THEN 1 ELSE 2 END,
            error = CASE WHEN s.step_errors = '{}'::jsonb THEN NULL ELSE
                    (SELECT string_agg(key || ': ' || value, E'\n' ORDER BY key) FROM jsonb_each_text(s.step_errors))
                    END,
            finished_at = now()
        WHERE s.id = %(id)s
        RETURNING *
        """,
        {"threshold": threshold, "id": slot_run_id},
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


# ---------------------------------------------------------------------------------------------- accounts


def upsert_account(conn: psycopg.Connection, mp_id: str, name: str) -> Row:
    return conn.execute(
        """
        INSERT INTO wechat_account (mp_id, name) VALUES (%s, %s)
        ON CONFLICT (mp_id) DO UPDATE SET name = EXCLUDED.name, updated_at = now()
        RETURNING *
        """,
        (mp_id, name),
    ).fetchone()


def record_account_check(
    conn: psycopg.Connection,
    account_id: int,
    *,
    hits: int,
    last_article_at: datetime | None,
    error: str | None,
    backoff_until: datetime | None,
) -> None:
    """One check of an account: success resets its failures and backoff; failure counts and may back off."""
    if error is None:
        conn.execute(
            """
            UPDATE wechat_account SET check_count = check_count + 1, hit_count = hit_count + %s,
                   last_article_at = GREATEST(last_article_at, %s), last_checked_at = now(),
                   consecutive_failures = 0, backoff_until = NULL, last_error = NULL, updated_at = now()
            WHERE id = %s
            """,
            (hits, last_article_at, account_id),
        )
    else:
        conn.execute(
            """
            UPDATE wechat_account SET check_count = check_count + 1, last_checked_at = now(),
                   consecutive_failures = consecutive_failures + 1, backoff_until = %s,
                   last_error = %s, updated_at = now()
            WHERE id = %s
            """,
            (backoff_until, error[:2000], account_id),
        )


def record_account_skips(conn: psycopg.Connection, account_id: int, count: int, reason: str) -> None:
    """Malformed rows of this account that were skipped: counted, the last reason kept."""
    conn.execute(
        """
        UPDATE wechat_account SET rows_skipped = rows_skipped + %s, last_skip_reason = %s, updated_at = now()
        WHERE id = %s
        """,
        (count, reason[:500], account_id),
    )


def record_body_missing(conn: psycopg.Connection, account_id: int) -> None:
    """One more check of an article of this account that found no body yet."""
    conn.execute(
        "UPDATE wechat_account SET bodies_missing = bodies_missing + 1, updated_at = now() WHERE id = %s",
        (account_id,),
    )


def accounts(conn: psycopg.Connection) -> list[Row]:
    return conn.execute("SELECT * FROM wechat_account ORDER BY name, mp_id").fetchall()


# ----------------------------------------------------------------------------------------- content items


def known_external_ids(conn: psycopg.Connection, external_ids: list[str]) -> dict[str, Row]:
    """external_id -> {body_status, next_body_check_at} of the ids already stored."""
    if not external_ids:
        return {}
    rows = conn.execute(
        "SELECT external_id, body_status, next_body_check_at FROM content_item WHERE external_id = ANY(%s)",
        (external_ids,),
    ).fetchall()
    return {r["external_id"]: r for r in rows}


def insert_content_item(conn: psycopg.Connection, item: dict[str, Any]) -> int | None:
    """Store a new article; None when another run stored it first (counts as already stored)."""
    row = conn.execute(
        """
        INSERT INTO content_item (external_id, account_id, mp_id, title, url, published_at, raw_html_size,
                                  clean_text, content_hash, body_status, last_error, first_slot_run_id,
                                  body_checks, next_body_check_at)
        VALUES (%(external_id)s, %(account_id)s, %(mp_id)s, %(title)s, %(url)s, %(published_at)s,
                %(raw_html_size)s, %(clean_text)s, %(content_hash)s, %(body_status)s, %(last_error)s,
                %(slot_run_id)s, %(body_checks)s, %(next_body_check_at)s)
        ON CONFLICT ON CONSTRAINT content_item_external_id_key DO NOTHING
        RETURNING id
        """,
        item,
    ).fetchone()
    return None if row is None else row["id"]


def fill_waiting_body(
    conn: psycopg.Connection, external_id: str, item: dict[str, Any], *, next_check: Callable[[int], datetime]
) -> Row | None:
    """Another check of an article stored while WeRSS had no body: it gets its body, or its next check.

    ``next_check(checks)`` says when an article still without a body after ``checks`` checks is due again.
    Returns the row's ``body_status``, ``body_checks`` and ``next_body_check_at``; None when the article
    was not waiting (another run filled it first).
    """
    row = conn.execute(
        """
        UPDATE content_item SET raw_html_size = %(raw_html_size)s, clean_text = %(clean_text)s,
               content_hash = %(content_hash)s, body_status = %(body_status)s, last_error = %(last_error)s,
               title = %(title)s, body_checks = body_checks + 1, updated_at = now()
        WHERE external_id = %(external_id)s AND body_status = 0
        RETURNING id, body_status, body_checks
        """,
        {**item, "external_id": external_id},
    ).fetchone()
    if row is None:
        return None
    due = next_check(row["body_checks"]) if row["body_status"] == BODY_WAITING else None
    conn.execute("UPDATE content_item SET next_body_check_at = %s WHERE id = %s", (due, row["id"]))
    return {**row, "next_body_check_at": due}


def reset_failed(conn: psycopg.Connection) -> int:
    """Give every failed article a fresh set of attempts (the operator's 'retry failed' after an outage)."""
    return conn.execute(
        "UPDATE content_item SET attempts = 0, updated_at = now() WHERE analyzed_status = 3 AND body_status = 1"
    ).rowcount


# an item left "analysing" this long (a crashed worker) may be claimed again
ANALYSIS_LEASE = "1 hour"


def items_to_analyse(
    conn: psycopg.Connection, *, max_attempts: int, limit: int, first_slot_run_id: int | None = None
) -> list[Row]:
    """Pending articles, then failed ones still under the attempt limit, oldest first (seed 10.3).

    One article per clean-text hash: a repost waits for its twin's analysis and then reuses it, so two
    parallel mapped tasks never pay for the same text. ``first_slot_run_id`` limits a backfill or a
    redo to the articles its own ingest stored. Items left analysing past the lease are picked up again.
    """
    return conn.execute(
        f"""
        SELECT id, title, analyzed_status, attempts FROM (
            SELECT DISTINCT ON (coalesce(content_hash, 'id:' || id)) id, title, analyzed_status, attempts, published_at
            FROM content_item
            WHERE body_status = 1
              AND (analyzed_status = 0
                   OR (analyzed_status = 1 AND updated_at < now() - interval '{ANALYSIS_LEASE}')
                   OR (analyzed_status = 3 AND attempts < %(max_attempts)s))
              AND (%(only)s::bigint IS NULL OR first_slot_run_id = %(only)s)
            ORDER BY coalesce(content_hash, 'id:' || id), (analyzed_status = 3), published_at, id
        ) candidates
        ORDER BY (analyzed_status = 3), published_at, id
        LIMIT %(limit)s
        """,
        {"max_attempts": max_attempts, "limit": limit, "only": first_slot_run_id},
    ).fetchall()


def get_item(conn: psycopg.Connection, item_id: int) -> Row | None:
    return conn.execute(
        """
        SELECT c.*, a.name AS mp_name FROM content_item c
        LEFT JOIN wechat_account a ON a.id = c.account_id WHERE c.id = %s
        """,
        (item_id,),
    ).fetchone()


def start_analysis(conn: psycopg.Connection, item_id: int, slot_run_id: int) -> Row | None:
    """Claim an item for analysis and count the attempt; None when it is done or another run holds it.

    The claim is one conditional UPDATE, so of two runs racing for the same item exactly one wins.
    """
    return conn.execute(
        f"""
        UPDATE content_item SET analyzed_status = 1, attempts = attempts + 1, last_slot_run_id = %s,
               updated_at = now()
        WHERE id = %s
          AND (analyzed_status IN (0, 3)
               OR (analyzed_status = 1 AND updated_at < now() - interval '{ANALYSIS_LEASE}'))
        RETURNING *
        """,
        (slot_run_id, item_id),
    ).fetchone()


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


def insert_analysis(conn: psycopg.Connection, record: dict[str, Any], opportunities: list[dict[str, Any]]) -> int | None:
    """Store an analysis and its opportunities and mark the item done; None when one already existed."""
    row = conn.execute(
        """
        INSERT INTO analysis_result (content_item_id, slot_run_id, reused_from_id, score, has_opportunity,
               top_type, summary, result_json, model, prompt_version, prompt_tokens, completion_tokens,
               reasoning_tokens, cache_hit_tokens, cache_miss_tokens, cost_usd, latency_ms, llm_calls)
        VALUES (%(content_item_id)s, %(slot_run_id)s, %(reused_from_id)s, %(score)s, %(has_opportunity)s,
               %(top_type)s, %(summary)s, %(result_json)s, %(model)s, %(prompt_version)s, %(prompt_tokens)s,
               %(completion_tokens)s, %(reasoning_tokens)s, %(cache_hit_tokens)s, %(cache_miss_tokens)s,
               %(cost_usd)s, %(latency_ms)s, %(llm_calls)s)
        ON CONFLICT ON CONSTRAINT analysis_result_content_item_id_key DO NOTHING
        RETURNING id
        """,
        {**record, "result_json": Jsonb(record["result_json"])},
    ).fetchone()
    if row is None:
        return None
    analysis_id = row["id"]
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
    conn.execute(
        "UPDATE content_item SET analyzed_status = 2, last_error = NULL, updated_at = now() WHERE id = %s",
        (record["content_item_id"],),
    )
    return analysis_id


def mark_item_done(conn: psycopg.Connection, item_id: int) -> None:
    conn.execute("UPDATE content_item SET analyzed_status = 2, updated_at = now() WHERE id = %s", (item_id,))


def release_item(conn: psycopg.Connection, item_id: int, error: str) -> None:
    """Put an item back to pending without counting the attempt: the failure was not the article's."""
    conn.execute(
        """
        UPDATE content_item SET analyzed_status = 0, attempts = GREATEST(attempts - 1, 0), last_error = %s,
               updated_at = now()
        WHERE id = %s AND analyzed_status = 1
        """,
        (error[:4000], item_id),
    )


def mark_item_failed(conn: psycopg.Connection, item_id: int, error: str) -> None:
    conn.execute(
        "UPDATE content_item SET analyzed_status = 3, last_error = %s, updated_at = now() WHERE id = %s",
        (error[:4000], item_id),
    )


# ----------------------------------------------------------------------------------- analyses for reading

_ANALYSIS_COLUMNS = """
    a.id, a.content_item_id, a.slot_run_id, a.reused_from_id, a.score, a.has_opportunity, a.top_type,
    a.summary, a.result_json, a.model, a.prompt_version, a.prompt_tokens, a.completion_tokens,
    a.reasoning_tokens, a.cache_hit_tokens, a.cache_miss_tokens, a.cost_usd, a.latency_ms, a.llm_calls,
    a.created_at, c.title, c.url, c.published_at, c.external_id, c.mp_id,
    coalesce(acc.name, c.mp_id) AS mp_name, s.run_date, s.slot
"""


def slot_analyses(conn: psycopg.Connection, slot_run_id: int) -> list[Row]:
    """The analyses produced by this slot run, best first."""
    return conn.execute(
        f"""
        SELECT {_ANALYSIS_COLUMNS} FROM analysis_result a
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        JOIN slot_run s ON s.id = a.slot_run_id
        WHERE a.slot_run_id = %s
        ORDER BY a.score DESC, a.id
        """,
        (slot_run_id,),
    ).fetchall()


def slot_failed_count(conn: psycopg.Connection, slot_run_id: int) -> int:
    return conn.execute(
        "SELECT count(*) AS n FROM content_item WHERE last_slot_run_id = %s AND analyzed_status = 3", (slot_run_id,)
    ).fetchone()["n"]


def day_analyses(conn: psycopg.Connection, day: date) -> list[Row]:
    """Every analysis produced by a slot run of that (Asia/Shanghai) day, best first."""
    return conn.execute(
        f"""
        SELECT {_ANALYSIS_COLUMNS} FROM slot_run s
        JOIN analysis_result a ON a.slot_run_id = s.id
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        WHERE s.run_date = %s
        ORDER BY a.score DESC, a.id
        """,
        (day,),
    ).fetchall()


def day_failures(conn: psycopg.Connection, day: date) -> list[Row]:
    """Articles whose latest analysis attempt, made by a slot of that day, failed."""
    return conn.execute(
        """
        SELECT c.id, c.title, c.url, c.published_at, c.attempts, c.last_error, coalesce(acc.name, c.mp_id) AS mp_name,
               s.slot
        FROM slot_run s
        JOIN content_item c ON c.last_slot_run_id = s.id AND c.analyzed_status = 3
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        WHERE s.run_date = %s
        ORDER BY c.published_at DESC
        """,
        (day,),
    ).fetchall()


def get_analysis(conn: psycopg.Connection, analysis_id: int) -> Row | None:
    return conn.execute(
        f"""
        SELECT {_ANALYSIS_COLUMNS}, s.dag_run_id, s.dag_id FROM analysis_result a
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


# ---------------------------------------------------------------------------------------- notifications


def claim_notification(conn: psycopg.Connection, note: dict[str, Any]) -> Row | None:
    """Take the right to send one message to one channel; None when it is not ours to send.

    A new msg_uuid is inserted as pending and is ours. An existing one that failed before is ours again
    (same uuid, one more attempt). One that was sent, or is pending (another sender, or a crash while
    sending, when delivery is unknown), is not: the message is never delivered twice.
    """
    row = conn.execute(
        """
        INSERT INTO notification_log (msg_uuid, report_date, slot, push_type, target_url, channel, slot_run_id,
                                      title, attempts)
        VALUES (%(msg_uuid)s, %(report_date)s, %(slot)s, %(push_type)s, %(target_url)s, %(channel)s,
                %(slot_run_id)s, %(title)s, 1)
        ON CONFLICT ON CONSTRAINT notification_log_msg_uuid_key DO NOTHING
        RETURNING *
        """,
        note,
    ).fetchone()
    if row is not None:
        return row
    return conn.execute(
        """
        UPDATE notification_log SET status = 0, attempts = attempts + 1, updated_at = now()
        WHERE msg_uuid = %s AND status = 2
        RETURNING *
        """,
        (note["msg_uuid"],),
    ).fetchone()


def finish_notification(conn: psycopg.Connection, msg_uuid: str, error: str | None) -> None:
    if error is None:
        conn.execute(
            "UPDATE notification_log SET status = 1, error = NULL, sent_at = now(), updated_at = now() WHERE msg_uuid = %s",
            (msg_uuid,),
        )
    else:
        conn.execute(
            "UPDATE notification_log SET status = 2, error = %s, updated_at = now() WHERE msg_uuid = %s",
            (error[:2000], msg_uuid),
        )


def notification(conn: psycopg.Connection, msg_uuid: str) -> Row | None:
    return conn.execute("SELECT * FROM notification_log WHERE msg_uuid = %s", (msg_uuid,)).fetchone()


def notifications_for_day(conn: psycopg.Connection, day: date) -> list[Row]:
    return conn.execute(
        "SELECT * FROM notification_log WHERE report_date = %s ORDER BY created_at, id", (day,)
    ).fetchall()


# ---------------------------------------------------------------------------------------- daily reports


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
        {**report, "digest_json": Jsonb(report["digest_json"]), "stats": Jsonb(report["stats"])},
    ).fetchone()


def get_daily_report(conn: psycopg.Connection, day: date) -> Row | None:
    return conn.execute("SELECT * FROM daily_report WHERE report_date = %s", (day,)).fetchone()


# ------------------------------------------------------------------------------------------ service state


def get_state(conn: psycopg.Connection, key: str) -> Row | None:
    return conn.execute("SELECT * FROM service_state WHERE key = %s", (key,)).fetchone()


def set_state(conn: psycopg.Connection, key: str, value: Any, expires_at: datetime | None) -> None:
    conn.execute(
        """
        INSERT INTO service_state (key, value, expires_at) VALUES (%s, %s, %s)
        ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, updated_at = now()
        """,
        (key, Jsonb(value), expires_at),
    )


def delete_state(conn: psycopg.Connection, key: str) -> None:
    conn.execute("DELETE FROM service_state WHERE key = %s", (key,))


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


# ------------------------------------------------------------------------------------------ report pages
# Read-only queries of the report web app (include/radar/web). Each page makes a handful of these on one
# connection; they are shaped so a year of data stays on index scans.


def recent_days(conn: psycopg.Connection, end_day: date, days: int, threshold: int) -> list[Row]:
    """One summary row per calendar day of ``[end_day - days + 1, end_day]``, newest first.

    Days without any data are included (all zero, statuses NULL) so the overview shows gaps rather than
    hiding them. Counts follow the daily page's definitions: analyses and failures belong to the day of the
    slot run that produced them; ``opportunities`` counts scores at or above ``threshold``; the push columns
    count the day's ``daily`` notifications by status (one row per channel).
    """
    return conn.execute(
        """
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
                   count(*) FILTER (WHERE a.score >= %(threshold)s AND a.reused_from_id IS NULL) AS opportunities,
                   max(a.score) AS max_score
            FROM slot_run s JOIN analysis_result a ON a.slot_run_id = s.id
            WHERE s.run_date BETWEEN %(start)s AND %(end)s
            GROUP BY s.run_date
        ), failed AS (
            SELECT s.run_date, count(*) AS failed
            FROM slot_run s JOIN content_item c ON c.last_slot_run_id = s.id AND c.analyzed_status = 3
            WHERE s.run_date BETWEEN %(start)s AND %(end)s
            GROUP BY s.run_date
        ), pushes AS (
            SELECT report_date, count(*) AS push_total,
                   count(*) FILTER (WHERE status = 1) AS push_sent,
                   count(*) FILTER (WHERE status = 2) AS push_failed
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
               coalesce(p.push_failed, 0) AS push_failed
        FROM days d
        LEFT JOIN runs r ON r.run_date = d.day
        LEFT JOIN analysed an ON an.run_date = d.day
        LEFT JOIN failed f ON f.run_date = d.day
        LEFT JOIN pushes p ON p.report_date = d.day
        LEFT JOIN reports dr ON dr.report_date = d.day
        ORDER BY d.day DESC
        """,
        {"start": date.fromordinal(end_day.toordinal() - days + 1), "end": end_day, "threshold": threshold},
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


def analysis_brief(conn: psycopg.Connection, analysis_id: int) -> Row | None:
    """Title and score of one analysis: enough to name the analysis another one reused."""
    return conn.execute(
        """
        SELECT a.id, a.score, c.title FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id
        WHERE a.id = %s
        """,
        (analysis_id,),
    ).fetchone()
