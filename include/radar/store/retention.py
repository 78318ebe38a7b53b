"""Retention's SQL: pruning old article bodies in batches, and what the database holds (include/radar/operations/retention.py
decides when and how much)."""

from __future__ import annotations

from datetime import datetime

import psycopg

from include.radar.store.common import ANALYSING, BODY_READY, FAILED, PENDING, Row
from include.radar.store.searching import article_lexemes

# the tables an operator watches grow (the rest stay under a megabyte a year: bench-growth)
WATCHED_TABLES = ("content_item", "analysis_result", "opportunity", "analysis_attempt", "llm_spend",
                  "notification_log", "market_bar")

# an article whose body a slot may still analyse keeps it: being analysed, or ready and not yet analysed with
# attempts left. A backfill of an old day stores its articles after today's daily slot may have pruned by age,
# and its own slot must still find their text (items_to_analyse offers no pruned article)
_PRUNABLE = (f"c.body_pruned_at IS NULL AND c.published_at < %(cutoff)s AND c.analyzed_status <> {ANALYSING} "
             f"AND NOT (c.body_status = {BODY_READY} AND c.analyzed_status IN ({PENDING}, {FAILED}) "
             "AND c.attempts < %(max_attempts)s)")


def prune_bodies(conn: psycopg.Connection, cutoff: datetime, limit: int, *, max_attempts: int) -> int:
    """Prune the bodies of up to ``limit`` articles published before ``cutoff`` (oldest first): the text goes,
    the search lexemes shrink to the title's and the analysis's, ``body_pruned_at`` is set. An article still
    owed its analysis (``max_attempts`` tells whether a failed one is) is left for a later run; rows another
    session holds are skipped, not waited for. Returns how many were pruned; the caller commits (one batch,
    one transaction)."""
    rows = conn.execute(
        f"""
        SELECT c.id, c.title, a.summary, a.result_json FROM content_item c
        LEFT JOIN analysis_result a ON a.content_item_id = c.id
        WHERE {_PRUNABLE}
        ORDER BY c.published_at, c.id LIMIT %(limit)s
        FOR UPDATE OF c SKIP LOCKED
        """,
        {"cutoff": cutoff, "max_attempts": max_attempts, "limit": limit},
    ).fetchall()
    if not rows:
        return 0
    with conn.cursor() as cur:
        cur.executemany(
            "UPDATE content_item SET clean_text = '', search_tsv = array_to_tsvector(%s::text[]), "
            "body_pruned_at = now() WHERE id = %s",
            [(article_lexemes(r["title"], "", r["summary"], r["result_json"]), r["id"]) for r in rows],
        )
    return len(rows)


def unpruned_before(conn: psycopg.Connection, cutoff: datetime, *, max_attempts: int) -> int:
    """How many articles published before ``cutoff`` could be pruned and still hold their body (the backlog of
    the next run; an article owed its analysis is no backlog)."""
    return conn.execute(
        f"SELECT count(*) AS n FROM content_item c WHERE {_PRUNABLE}", {"cutoff": cutoff, "max_attempts": max_attempts}
    ).fetchone()["n"]


def footprint(conn: psycopg.Connection) -> Row:
    """The database's size on disk, its watched tables' (table, TOAST and indexes) and the articles' counts:
    stored, and with their body pruned."""
    sizes = conn.execute(
        "SELECT relname AS name, pg_total_relation_size(oid) AS bytes FROM pg_class "
        "WHERE relkind = 'r' AND relname = ANY(%s) AND relnamespace = 'public'::regnamespace",
        (list(WATCHED_TABLES),),
    ).fetchall()
    counts = conn.execute(
        "SELECT count(*) AS articles, count(body_pruned_at) AS pruned FROM content_item"
    ).fetchone()
    return {
        "database_bytes": conn.execute("SELECT pg_database_size(current_database()) AS b").fetchone()["b"],
        "tables": {r["name"]: r["bytes"] for r in sorted(sizes, key=lambda r: -r["bytes"])},
        "articles": counts["articles"],
        "pruned": counts["pruned"],
    }
