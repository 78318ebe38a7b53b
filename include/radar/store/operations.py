"""What running the radar costs and what its operator is told: the LLM spend ledger, the daily budget's
deferrals, operator alerts (one row per cause and day) and small shared service status."""

from __future__ import annotations

from datetime import date
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from psycopg.types.json import Jsonb

from include.radar.core import redact
from include.radar.store.common import Row

# ---------------------------------------------------------------------------------------------- spend


def record_spend(conn: psycopg.Connection, entry: dict[str, Any]) -> None:
    """One answered ladder of calls: its tokens and its cost at the prices of each call's time (an evaluation's
    under its ``evaluation_id``)."""
    conn.execute(
        """
        INSERT INTO llm_spend (spent_on, purpose, content_item_id, attempt_id, slot_run_id, evaluation_id, model,
                               calls, answered, peak_calls, rate_limited, prompt_tokens, cache_hit_tokens,
                               cache_miss_tokens, completion_tokens, reasoning_tokens, cost, currency)
        VALUES (%(spent_on)s, %(purpose)s, %(content_item_id)s, %(attempt_id)s, %(slot_run_id)s, %(evaluation_id)s,
                %(model)s, %(calls)s, %(answered)s, %(peak_calls)s, %(rate_limited)s, %(prompt_tokens)s,
                %(cache_hit_tokens)s, %(cache_miss_tokens)s, %(completion_tokens)s, %(reasoning_tokens)s, %(cost)s,
                %(currency)s)
        """,
        {"evaluation_id": None, **entry},
    )


# The slots' spend and the evaluations' are kept apart: the daily budget is the slots' (an evaluation spends from
# its own cap), and every page shows an evaluation's spend as its own line
_WHOSE = {False: "evaluation_id IS NULL", True: "evaluation_id IS NOT NULL"}


def day_spend(conn: psycopg.Connection, day: date, currency: str, *, evaluations: bool = False) -> float:
    """The day's spend of the slots (the analyses and the digest), or with ``evaluations`` of the evaluations."""
    row = conn.execute(
        f"SELECT coalesce(sum(cost), 0) AS total FROM llm_spend WHERE spent_on = %s AND currency = %s "
        f"AND {_WHOSE[evaluations]}", (day, currency)
    ).fetchone()
    return float(row["total"])


def spend_by_day(conn: psycopg.Connection, first: date, last: date, currency: str, *,
                 evaluations: bool = False) -> dict[date, float]:
    rows = conn.execute(
        f"""
        SELECT spent_on, sum(cost) AS total FROM llm_spend
        WHERE spent_on BETWEEN %s AND %s AND currency = %s AND {_WHOSE[evaluations]} GROUP BY spent_on
        """,
        (first, last, currency),
    ).fetchall()
    return {r["spent_on"]: float(r["total"]) for r in rows}


def slot_spend(conn: psycopg.Connection, slot_run_ids: list[int]) -> dict[int, float]:
    if not slot_run_ids:
        return {}
    rows = conn.execute(
        "SELECT slot_run_id, sum(cost) AS total FROM llm_spend WHERE slot_run_id = ANY(%s) GROUP BY slot_run_id",
        (slot_run_ids,),
    ).fetchall()
    return {r["slot_run_id"]: float(r["total"]) for r in rows}


def item_spend(conn: psycopg.Connection, content_item_id: int) -> Row:
    """Everything an article's analysis cost, failed attempts included."""
    return conn.execute(
        """
        SELECT coalesce(sum(cost), 0) AS cost, coalesce(sum(calls), 0) AS calls, count(*) AS ladders,
               max(currency) AS currency
        FROM llm_spend WHERE content_item_id = %s
        """,
        (content_item_id,),
    ).fetchone()


def defer_for_budget(conn: psycopg.Connection, slot_run_id: int, item_ids: list[int], day: date) -> None:
    """Articles this slot leaves for the next day because the day's budget was reached: counted on the slot,
    and marked with the day, so the daily report counts each article once however many slots deferred it."""
    if not item_ids:
        return
    conn.execute(
        "UPDATE slot_run SET budget_deferred = budget_deferred + %s, deferred_count = deferred_count + %s "
        "WHERE id = %s",
        (len(item_ids), len(item_ids), slot_run_id),
    )
    conn.execute("UPDATE content_item SET budget_deferred_on = %s WHERE id = ANY(%s)", (day, item_ids))


def day_budget_deferred(conn: psycopg.Connection, day: date) -> int:
    """Articles the budget held back on ``day`` that still wait for their analysis."""
    row = conn.execute(
        "SELECT count(*) AS n FROM content_item WHERE budget_deferred_on = %s AND analyzed_status <> 2",
        (day,),
    ).fetchone()
    return int(row["n"])


# --------------------------------------------------------------------------------------------- alerts


def record_alert(
    conn: psycopg.Connection, *, day: date, cause: str, title: str, detail: str, slot_run_id: int | None,
    dag_run_id: str | None,
) -> Row:
    """The day's alert for ``cause``: created, or one more occurrence of it (the first detail stays)."""
    return conn.execute(
        """
        INSERT INTO operator_alert (alert_date, cause, title, detail, slot_run_id, dag_run_id)
        VALUES (%s, %s, %s, %s, %s, %s)
        ON CONFLICT ON CONSTRAINT operator_alert_day_cause_key DO UPDATE
            SET occurrences = operator_alert.occurrences + 1, last_at = now()
        RETURNING *, (xmax = 0) AS created
        """,
        (day, cause, title, redact.scrub(detail)[:1000], slot_run_id, dag_run_id),
    ).fetchone()


def finish_alert(conn: psycopg.Connection, alert_id: int, error: str | None, *, delivered: bool) -> None:
    """What one delivery attempt of the alert found: delivered to every channel, or the error."""
    conn.execute(
        "UPDATE operator_alert SET delivered = delivered OR %s, delivery_error = %s WHERE id = %s",
        (delivered, redact.scrub(error)[:500] if error else None, alert_id),
    )


def alerts_between(conn: psycopg.Connection, first: date, last: date) -> list[Row]:
    return conn.execute(
        "SELECT * FROM operator_alert WHERE alert_date BETWEEN %s AND %s ORDER BY last_at DESC, id DESC",
        (first, last),
    ).fetchall()


# ------------------------------------------------------------------------------- shared service status


def update_status(conn: psycopg.Connection, key: str, change: Any) -> dict[str, Any]:
    """Read-modify-write the JSON status under ``key`` with the row locked (concurrent workers serialise);
    ``change(old) -> new``. Returns the new value."""
    conn.execute(
        "INSERT INTO service_state (key, value) VALUES (%s, '{}'::jsonb) ON CONFLICT (key) DO NOTHING", (key,)
    )
    row = conn.execute("SELECT value FROM service_state WHERE key = %s FOR UPDATE", (key,)).fetchone()
    old = row["value"] if row and isinstance(row["value"], dict) else {}
    new = change(dict(old))
    conn.execute("UPDATE service_state SET value = %s, updated_at = now() WHERE key = %s", (Jsonb(new), key))
    return new


def status(conn: psycopg.Connection, key: str) -> dict[str, Any]:
    row = conn.execute("SELECT value FROM service_state WHERE key = %s", (key,)).fetchone()
    return row["value"] if row and isinstance(row["value"], dict) else {}



def missed_slots(conn: psycopg.Connection, expected: list[tuple[date, str]], tz: ZoneInfo
                 ) -> list[tuple[date, str]]:
    """Of the ``expected`` (day, slot) pairs (slots of ``tz``), those with no slot run, counting only time since
    the radar's first slot run, or, before any, since its schema was made: a fresh install has missed nothing
    before it, and one whose DAG was never unpaused has missed every slot since."""
    if not expected:
        return []
    first = conn.execute("SELECT run_date, slot FROM slot_run ORDER BY run_date, slot LIMIT 1").fetchone()
    if first is not None:
        since = (first["run_date"], first["slot"])
    else:
        made = conn.execute("SELECT min(applied_at) AS at FROM schema_migration").fetchone()["at"]
        if made is None:
            return []
        local = made.astimezone(tz)
        since = (local.date(), f"{local:%H:%M}")
    days = sorted({d for d, _ in expected})
    seen = {(r["run_date"], r["slot"]) for r in conn.execute(
        "SELECT run_date, slot FROM slot_run WHERE run_date = ANY(%s)", (days,)).fetchall()}
    return [(d, s) for d, s in expected if (d, s) > since and (d, s) not in seen]


def missed_since_last_run(conn: psycopg.Connection, expected: list[tuple[date, str]], before: tuple[date, str]
                          ) -> list[tuple[date, str]]:
    """Of the ``expected`` (day, slot) pairs, those after the last slot run before ``before``: none of them
    has a run, and each is reported by the first run after it, once (a fresh install missed nothing)."""
    last = conn.execute(
        "SELECT run_date, slot FROM slot_run WHERE (run_date, slot) < (%s, %s) ORDER BY run_date DESC, slot DESC LIMIT 1",
        before,
    ).fetchone()
    if last is None or not expected:
        return []
    return [(d, s) for d, s in expected if (d, s) > (last["run_date"], last["slot"])]
