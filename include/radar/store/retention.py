"""Retention's SQL: pruning old article bodies in batches, and what the database holds (include/radar/retention.py
decides when and how much)."""

from __future__ import annotations

from datetime import datetime

import psycopg

from include.radar.store.common import ANALYSING, Row
from include.radar.store.searching import article_lexemes

# the tables an operator watches grow (the rest stay under a megabyte a year: bench-growth)
WATCHED_TABLES = ("content_item", "analysis_result", "opportunity", "analysis_attempt", "llm_spend",
                  "notification_log", "market_bar")


def prune_bodies(conn: psycopg.Connection, cutoff: datetime, limit: int) -> int:
    """Prune the bodies of up to ``limit`` articles published before ``cutoff`` (oldest first): the text goes,
    the search lexemes shrink to the title's and the analysis's, ``body_pruned_at`` is set. An article being
    analysed right now is left for the next run; rows another session holds are skipped, not waited for.
    Returns how many were pruned; the caller commits (one batch, one transaction)."""
    rows = conn.execute(
        """
        SELECT c.id, c.title, a.summary, a.result_json FROM content_item c
        LEFT JOIN analysis_result a ON a.content_item_id = c.id
        WHERE c.body_pruned_at IS NULL AND c.published_at < %s AND c.analyzed_status <> %s
        ORDER BY c.published_at, c.id LIMIT %s
        FOR UPDATE OF c SKIP LOCKED
        """,
        (cutoff, ANALYSING, limit),
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


def unpruned_before(conn: psycopg.Connection, cutoff: datetime) -> int:
    """How many articles published before ``cutoff`` still hold their body (the backlog of the next run)."""
    return conn.execute(
        "SELECT count(*) AS n FROM content_item WHERE body_pruned_at IS NULL AND published_at < %s", (cutoff,)
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
