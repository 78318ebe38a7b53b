"""Search queries (include/radar/core/search.py makes the lexemes) and indexing what was stored before search."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg

from include.radar.core import search
from include.radar.store.analyses import analysis_words
from include.radar.store.common import Row

BANDS = {"80": (80, 100), "60": (60, 79), "40": (40, 59), "0": (0, 39)}


@dataclass(frozen=True)
class Filters:
    """What a search is narrowed to; every field optional. ``band`` is a key of BANDS; ``watch``: only
    analyses that named the reader's watchlist."""

    after: datetime | None = None
    before: datetime | None = None
    account: str | None = None
    band: str | None = None
    watch: bool = False


def search_articles(conn: psycopg.Connection, tsquery: str, filters: Filters, limit: int, offset: int,
                    near: str = "") -> tuple[list[Row], int]:
    """Articles matching ``tsquery`` (search.query), best match first then newest, with their analysis when
    there is one; and how many match in all. ``text`` is the stretch of the article around ``near`` (the
    query's first term), wherever in the article it is."""
    low, high = BANDS.get(filters.band or "", (None, None))
    # Two steps: rank every match on narrow rows, then read the text, the snippet and the analysis of the
    # page's rows only (reading them for every match cost a common word ~200 ms over a year of articles).
    rows = conn.execute(
        """
        WITH hits AS (
            SELECT c.id, a.id AS analysis_id, c.published_at, ts_rank(c.search_tsv, q) AS rank,
                   count(*) OVER () AS total
            FROM content_item c
            CROSS JOIN LATERAL (SELECT %(q)s::tsquery AS q) query
            LEFT JOIN analysis_result a ON a.content_item_id = c.id
            LEFT JOIN wechat_account acc ON acc.id = c.account_id
            WHERE c.search_tsv @@ q
              AND (%(after)s::timestamptz IS NULL OR c.published_at >= %(after)s)
              AND (%(before)s::timestamptz IS NULL OR c.published_at < %(before)s)
              AND (%(account)s::text IS NULL OR coalesce(acc.name, c.mp_id) = %(account)s)
              AND (%(low)s::int IS NULL OR a.score BETWEEN %(low)s AND %(high)s)
              AND (NOT %(watch)s OR cardinality(a.watch_hits) > 0)
            ORDER BY rank DESC, c.published_at DESC, c.id DESC
            LIMIT %(limit)s OFFSET %(offset)s
        )
        SELECT c.id AS item_id, c.title, c.url, c.published_at,
               substring(c.clean_text FROM greatest(1, strpos(lower(c.clean_text), %(near)s) - 40) FOR 200) AS text,
               coalesce(acc.name, c.mp_id) AS mp_name, c.analyzed_status, a.id AS analysis_id, a.score, a.summary,
               a.watch_hits, h.rank, h.total
        FROM hits h
        JOIN content_item c ON c.id = h.id
        LEFT JOIN analysis_result a ON a.id = h.analysis_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        ORDER BY h.rank DESC, h.published_at DESC, h.id DESC
        """,
        {"q": tsquery, "after": filters.after, "before": filters.before, "account": filters.account,
         "low": low, "high": high, "watch": filters.watch, "limit": limit, "offset": offset,
         "near": near or "\x01"},
    ).fetchall()
    return rows, (rows[0]["total"] if rows else 0)


def account_names(conn: psycopg.Connection) -> list[str]:
    return [r["name"] for r in conn.execute(
        "SELECT DISTINCT coalesce(nullif(name, ''), mp_id) AS name FROM wechat_account ORDER BY 1").fetchall()]


def index_missing(conn: psycopg.Connection, batch: int = 200) -> int:
    """Write the lexemes of articles stored before search existed (search_tsv NULL), with their analyses'
    words; returns how many were indexed. Called by ``cli migrate``: run once, then nothing is missing."""
    done = 0
    while True:
        rows = conn.execute(
            """
            SELECT c.id, c.title, c.clean_text, a.summary, a.result_json FROM content_item c
            LEFT JOIN analysis_result a ON a.content_item_id = c.id
            WHERE c.search_tsv IS NULL ORDER BY c.id LIMIT %s
            """,
            (batch,),
        ).fetchall()
        if not rows:
            return done
        for r in rows:
            conn.execute("UPDATE content_item SET search_tsv = array_to_tsvector(%s::text[]) WHERE id = %s",
                         (article_lexemes(r["title"], r["clean_text"], r["summary"], r["result_json"]), r["id"]))
        conn.commit()
        done += len(rows)


def article_lexemes(title: str, text: str, summary: str | None, result_json: object) -> list[str]:
    """The search lexemes of an article and its analysis (when it has one) as stored rows hold them."""
    data = result_json if isinstance(result_json, dict) else {}
    extra = analysis_words({"summary": summary or ""},
                           [o for o in data.get("opportunities") or [] if isinstance(o, dict)]) if summary else []
    return search.lexemes(title or "", text or "", extra)
