"""Claims and the attempts behind them: who may analyse an article now, for how long, and how each try ended.

A claim takes an article for one counted attempt with a lease, under a lock on its text hash (two claims of
one text pay for one call: the second waits to reuse the first's analysis); an ``analysis_attempt`` row says
how the attempt ended. A claim belongs to one task try (:func:`claim_owner`) and nobody takes over a running
lease, a retry of the same task included (a zombie try would otherwise call DeepSeek again). The lease is
short (:data:`LEASE`) and renewed every :data:`HEARTBEAT` by its holder (analyst.ClaimKeeper): a live try
keeps its claims, a dead one's run out within minutes and its article is failed, the attempt counted. The same
claims keep a shadow evaluation's sample (:data:`EVALUATIONS`: its own tables, keyed by evaluation and article).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from include.radar.core import redact
from include.radar.store.analyses import analysis_for_hash, analysis_for_item
from include.radar.store.common import ANALYSING, DONE, Row

# A claim's lease, renewed by its holder every HEARTBEAT while the attempt runs: a live try never loses its
# claim, a dead one's is free within LEASE (a retry waits that long at most)
LEASE = timedelta(minutes=5)
HEARTBEAT = timedelta(seconds=30)
_OWNER_SEP = "|"  # never in an Airflow run id (its allowed pattern is [A-Za-z0-9_.~:+-])


@dataclass(frozen=True)
class Table:
    """Where claims are kept: the articles and their attempts, each keyed by ``key`` (identifiers of the schema,
    never input). ``touched``: the article row has an ``updated_at``; ``reserves``: an attempt holds the cap's
    reservations (released when it closes)."""

    items: str
    status: str
    attempts: str
    key: tuple[str, ...]
    attempt_key: tuple[str, ...]
    touched: bool = True
    reserves: bool = False

    def where(self, prefix: str = "") -> sql.Composed:
        """``<key> = %(key0)s AND …`` on the article row."""
        return sql.SQL(" AND ").join(sql.SQL("{} = {}").format(sql.Identifier(k), sql.Placeholder(f"{prefix}key{i}"))
                                     for i, k in enumerate(self.key))

    def attempt_where(self) -> sql.Composed:
        return sql.SQL(" AND ").join(sql.SQL("{} = {}").format(sql.Identifier(k), sql.Placeholder(f"key{i}"))
                                     for i, k in enumerate(self.attempt_key))

    def params(self, key: tuple[Any, ...]) -> dict[str, Any]:
        return {f"key{i}": v for i, v in enumerate(key)}


SLOTS = Table("content_item", "analyzed_status", "analysis_attempt", ("id",), ("content_item_id",))
EVALUATIONS = Table("evaluation_item", "status", "evaluation_attempt", ("evaluation_id", "content_item_id"),
                    ("evaluation_id", "content_item_id"), touched=False, reserves=True)


def claim_owner(run: str, task_id: str, map_index: int, try_number: int) -> str:
    """The owner of the claims one task try takes: ``<dag run id>|<task id>|<map index>|<try number>``."""
    return _OWNER_SEP.join((run, task_id, str(map_index), str(try_number)))


def same_task(owner: str | None, other: str | None) -> bool:
    """Whether two owners are two tries of one task instance (same run, task and map index)."""
    if not owner or not other or owner == other:
        return False
    a, b = owner.split(_OWNER_SEP), other.split(_OWNER_SEP)
    return len(a) == len(b) == 4 and a[:3] == b[:3]


@dataclass(frozen=True)
class Claim:
    """The answer to "may I analyse this article now?".

    ``state``: claimed (yes: ``attempt_id`` is yours), done (it has an analysis: ``analysis``), twin (its
    text was analysed under another id: reuse ``analysis``), twin_busy (its text is being analysed right
    now), busy (another run holds it), exhausted (no attempts left: it is failed for good), pruned
    (retention took its body), missing.
    """

    state: str
    item: Row | None = None
    attempt_id: int | None = None
    analysis: Row | None = None


def claim_item(
    conn: psycopg.Connection, item_id: int, *, slot_run_id: int, claimer: str, max_attempts: int,
    lease: timedelta | None = None,
) -> Claim:
    """Take an article for one analysis attempt, or say why not (see :class:`Claim`).

    ``claimer`` names the task try (:func:`claim_owner`; the DAG run id outside Airflow). A claim whose lease
    is running is busy for everyone else, a retry of the same task included (it may wait for the lease, see
    analyst.analyse_item); one whose lease ran out is taken over, that attempt closed (``crashed`` when it was
    an earlier try of the same task, else ``expired``). Serialised per clean-text hash with a
    transaction-level advisory lock, so of two claims of the same text exactly one goes on to the LLM.
    """
    lease = LEASE if lease is None else lease
    head = conn.execute("SELECT content_hash FROM content_item WHERE id = %s", (item_id,)).fetchone()
    if head is None:
        return Claim("missing")
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (head["content_hash"] or f"id:{item_id}",))
    item = conn.execute(
        """
        SELECT c.*, coalesce(a.name, c.mp_id) AS mp_name, coalesce(c.lease_until > now(), false) AS leased
        FROM content_item c LEFT JOIN wechat_account a ON a.id = c.account_id
        WHERE c.id = %s FOR UPDATE OF c
        """,
        (item_id,),
    ).fetchone()
    refused = _not_claimable(conn, item)
    if refused is not None:
        return refused
    if item["analyzed_status"] == ANALYSING:  # its holder's lease ran out: an earlier try of ours, or a lost worker
        own = same_task(claimer, item["claimed_by"])
        end_running(conn, SLOTS, (item_id,), "crashed" if own else "expired",
                    "its task try ended without finishing (a retry took over after its lease ran out)" if own
                    else "lease expired: worker lost")
    return take(conn, SLOTS, item, claimer=claimer, max_attempts=max_attempts, lease=lease,
                extra={"last_slot_run_id": slot_run_id}, attempt_extra={"slot_run_id": slot_run_id})


def _not_claimable(conn: psycopg.Connection, item: Row) -> Claim | None:
    """Why a locked article is not to be analysed now (done, pruned, busy, a twin done or in progress), or None."""
    item_id = item["id"]
    existing = analysis_for_item(conn, item_id)
    if existing is not None or item["analyzed_status"] == DONE:
        return Claim("done", item, analysis=existing)
    if item["body_pruned_at"] is not None:  # retention took its body: there is nothing left to analyse
        return Claim("pruned", item)
    if item["analyzed_status"] == ANALYSING and item["leased"]:
        return Claim("busy", item)
    if not item["content_hash"]:
        return None
    twin = analysis_for_hash(conn, item["content_hash"], item_id)
    if twin is not None:
        return Claim("twin", item, analysis=twin)
    busy = conn.execute(
        """
        SELECT 1 FROM content_item WHERE content_hash = %s AND id <> %s AND analyzed_status = 1
           AND lease_until > now() LIMIT 1
        """,
        (item["content_hash"], item_id),
    ).fetchone()
    return Claim("twin_busy", item) if busy is not None else None


def _touch(table: Table) -> sql.SQL:
    return sql.SQL(", updated_at = now()") if table.touched else sql.SQL("")


def take(
    conn: psycopg.Connection, table: Table, item: Row, *, claimer: str, max_attempts: int, lease: timedelta,
    extra: dict[str, Any] | None = None, attempt_extra: dict[str, Any] | None = None,
) -> Claim:
    """Count an attempt on a locked article (its row in ``table``), leased to ``claimer``, and open it (``extra``:
    more columns set on the article, ``attempt_extra`` on the attempt); exhausted, and failed for good, when it has
    no attempt left."""
    key, extra, attempt_extra = tuple(item[k] for k in table.key), extra or {}, attempt_extra or {}
    names = {"items": sql.Identifier(table.items), "status": sql.Identifier(table.status), "where": table.where(),
             "touch": _touch(table)}
    params = {**table.params(key), "claimer": claimer, "lease": lease, **{f"x_{c}": v for c, v in extra.items()}}
    if item["attempts"] >= max_attempts:
        conn.execute(sql.SQL(
            "UPDATE {items} SET {status} = 3, claimed_by = NULL, lease_until = NULL{touch}, "
            "last_error = coalesce(last_error, 'no attempts left') WHERE {where}").format(**names), params)
        return Claim("exhausted", item)
    sets = sql.SQL("").join(sql.SQL(", {} = {}").format(sql.Identifier(c), sql.Placeholder(f"x_{c}")) for c in extra)
    claimed = conn.execute(sql.SQL(
        "UPDATE {items} SET {status} = 1, attempts = attempts + 1, claimed_by = %(claimer)s, "
        "lease_until = now() + %(lease)s{sets}{touch} WHERE {where} RETURNING attempts, lease_until",
    ).format(sets=sets, **names), params).fetchone()
    values = {**dict(zip(table.attempt_key, key, strict=True)), **attempt_extra, "claimed_by": claimer,
              "attempt": claimed["attempts"], "lease_until": claimed["lease_until"]}
    attempt = conn.execute(sql.SQL("INSERT INTO {} ({}) VALUES ({}) RETURNING id").format(
        sql.Identifier(table.attempts), sql.SQL(", ").join(map(sql.Identifier, values)),
        sql.SQL(", ").join(sql.Placeholder(c) for c in values)), values).fetchone()
    return Claim("claimed", {**item, "attempts": claimed["attempts"]}, attempt_id=attempt["id"])


def end_running(conn: psycopg.Connection, table: Table, key: tuple[Any, ...], outcome: str, error: str) -> None:
    """Close the article's running attempt (its lease ran out): ``expired``, or ``crashed`` for our own try."""
    conn.execute(sql.SQL(
        "UPDATE {} SET outcome = %(outcome)s, error = %(error)s, finished_at = now() WHERE {} AND outcome = 'running'",
    ).format(sql.Identifier(table.attempts), table.attempt_where()),
        {**table.params(key), "outcome": outcome, "error": error})


_FINISHED = {"analysed": "2", "failed": "3", "crashed": "3", "released": "0",
             "interrupted": "CASE WHEN attempts >= %(max)s THEN 3 ELSE 0 END"}


def finish_attempt(
    conn: psycopg.Connection, attempt_id: int, outcome: str, *, error: str | None = None, llm_calls: int = 0,
    max_attempts: int | None = None, table: Table = SLOTS,
) -> bool:
    """Close an attempt and put its article where a later run handles it.

    analysed: done; failed / crashed: failed (retried by later runs while attempts remain); interrupted: pending
    again (failed when it has no attempts left); released: pending, the attempt not counted (no paid call was
    made). The article is touched only while this attempt still holds it (a lease taken over stays with its new
    holder); an attempt's reservations are released. Returns False when the attempt was already closed.
    """
    error = redact.scrub(error)[:4000] or None
    released = sql.SQL(", reserved = 0") if table.reserves else sql.SQL("")
    row = conn.execute(sql.SQL(
        "UPDATE {} SET outcome = %s, error = %s, llm_calls = %s, finished_at = now(){} WHERE id = %s "
        "AND outcome = 'running' RETURNING {}, claimed_by",
    ).format(sql.Identifier(table.attempts), released, sql.SQL(", ").join(map(sql.Identifier, table.attempt_key))),
        (outcome, error, llm_calls, attempt_id)).fetchone()
    if row is None:
        return False
    attempts = "GREATEST(attempts - 1, 0)" if outcome == "released" else "attempts"
    conn.execute(sql.SQL(
        "UPDATE {items} SET {status} = {value}, attempts = {attempts}, last_error = %(error)s, claimed_by = NULL, "
        "lease_until = NULL{touch} WHERE {where} AND {status} = 1 AND claimed_by = %(claimer)s",
    ).format(items=sql.Identifier(table.items), status=sql.Identifier(table.status), value=sql.SQL(_FINISHED[outcome]),
             attempts=sql.SQL(attempts), touch=_touch(table), where=table.where()),
        {**table.params(tuple(row[k] for k in table.attempt_key)), "error": error, "claimer": row["claimed_by"],
         "max": max_attempts if max_attempts is not None else 1 << 30})
    return True


def renew_claims(conn: psycopg.Connection, owner: str, lease: timedelta | None = None, *, table: Table = SLOTS) -> int:
    """Extend the lease of every claim ``owner`` still holds (its heartbeat); how many it holds."""
    names = {"items": sql.Identifier(table.items), "status": sql.Identifier(table.status),
             "attempts": sql.Identifier(table.attempts), "key": sql.SQL(", ").join(map(sql.Identifier, table.key)),
             "attempt_key": sql.SQL(", ").join(map(sql.Identifier, table.attempt_key))}
    params = {"owner": owner, "lease": LEASE if lease is None else lease}
    held = conn.execute(sql.SQL(
        "UPDATE {items} SET lease_until = now() + %(lease)s WHERE {status} = 1 AND claimed_by = %(owner)s",
    ).format(**names), params).rowcount
    if held:
        conn.execute(sql.SQL(
            "UPDATE {attempts} SET lease_until = now() + %(lease)s WHERE outcome = 'running' AND claimed_by = %(owner)s "
            "AND ({attempt_key}) IN (SELECT {key} FROM {items} WHERE {status} = 1 AND claimed_by = %(owner)s)",
        ).format(**names), params)
    return held


def expire_leases(conn: psycopg.Connection) -> int:
    """Articles whose claim outlived its lease (the worker was lost): failed, the attempt already counted."""
    rows = conn.execute(
        """
        UPDATE content_item SET analyzed_status = 3, claimed_by = NULL, lease_until = NULL, updated_at = now(),
               last_error = 'analysis interrupted: its worker was lost (lease expired)'
        WHERE analyzed_status = 1 AND lease_until < now()
        RETURNING id
        """
    ).fetchall()
    for r in rows:
        end_running(conn, SLOTS, (r["id"],), "expired", "lease expired: worker lost")
    return len(rows)


def reap_claims(conn: psycopg.Connection, run: str) -> tuple[int, int]:
    """Claims a finished run still holds (an analyse task try was killed or timed out): those whose lease ran
    out are failed, counted; those whose lease still runs are left to it — their holder may be a zombie that
    still renews them while its call goes on, and failing its claim would let a later slot pay DeepSeek for
    the article again. A dead holder's lease runs out within :data:`LEASE`, and the next slot's
    :func:`expire_leases` fails it then. ``run`` is the DAG run id: every try of every task of the run (see
    :func:`claim_owner`). Returns (failed now, left to their lease)."""
    mine = "(claimed_by = %(run)s OR left(claimed_by, length(%(run)s) + 1) = %(run)s || %(sep)s)"
    rows = conn.execute(
        f"""
        UPDATE content_item SET analyzed_status = 3, claimed_by = NULL, lease_until = NULL, updated_at = now(),
               last_error = 'analysis interrupted: its task ended without finishing (killed or timed out)'
        WHERE analyzed_status = 1 AND {mine} AND (lease_until IS NULL OR lease_until <= now())
        RETURNING id
        """,
        {"run": run, "sep": _OWNER_SEP},
    ).fetchall()
    for r in rows:
        end_running(conn, SLOTS, (r["id"],), "crashed", "its task ended without finishing (killed or timed out)")
    leased = conn.execute(
        f"SELECT count(*) AS n FROM content_item WHERE analyzed_status = 1 AND {mine} AND lease_until > now()",
        {"run": run, "sep": _OWNER_SEP},
    ).fetchone()["n"]
    return len(rows), leased


def items_to_analyse(
    conn: psycopg.Connection, *, max_attempts: int, limit: int,
    published_between: tuple[datetime, datetime] | None = None,
) -> list[Row]:
    """Pending articles, then failed ones still under the attempt limit, oldest first.

    One article per clean-text hash: a repost waits for its twin's analysis and then reuses it, so two
    parallel mapped tasks never pay for the same text. ``published_between`` (start, end] limits a backfill
    or a redo to the articles of its own slot: published after the slot before it, up to its own time. Articles being analysed are not offered (their lease
    decides: see :func:`expire_leases`).
    """
    return conn.execute(
        """
        SELECT id, title, analyzed_status, attempts FROM (
            SELECT DISTINCT ON (coalesce(content_hash, 'id:' || id)) id, title, analyzed_status, attempts, published_at
            FROM content_item
            WHERE body_status = 1 AND analyzed_status IN (0, 3) AND attempts < %(max_attempts)s
              AND body_pruned_at IS NULL
              AND (%(after)s::timestamptz IS NULL OR (published_at > %(after)s AND published_at <= %(until)s))
            ORDER BY coalesce(content_hash, 'id:' || id), (analyzed_status = 3), published_at, id
        ) candidates
        ORDER BY (analyzed_status = 3), published_at, id
        LIMIT %(limit)s
        """,
        {"max_attempts": max_attempts, "limit": limit, "after": published_between[0] if published_between else None,
         "until": published_between[1] if published_between else None},
    ).fetchall()


def reset_failed(conn: psycopg.Connection) -> int:
    """Give every failed article a fresh set of attempts (the operator's 'retry failed' after an outage)."""
    return conn.execute(
        "UPDATE content_item SET attempts = 0, updated_at = now() "
        "WHERE analyzed_status = 3 AND body_status = 1 AND body_pruned_at IS NULL"
    ).rowcount
