"""WeChat accounts and their articles (content items) as ingest stores them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any

import psycopg

from include.radar.core import redact, search
from include.radar.store.common import BODY_WAITING, Row


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
            (backoff_until, redact.scrub(error)[:2000], account_id),
        )


def record_account_skips(conn: psycopg.Connection, account_id: int, count: int, reason: str) -> None:
    """Malformed rows of this account that were skipped: counted, the last reason kept."""
    conn.execute(
        """
        UPDATE wechat_account SET rows_skipped = rows_skipped + %s, last_skip_reason = %s, updated_at = now()
        WHERE id = %s
        """,
        (count, redact.scrub(reason)[:500], account_id),
    )


def record_body_missing(conn: psycopg.Connection, account_id: int) -> None:
    """One more check of an article of this account that found no body yet."""
    conn.execute(
        "UPDATE wechat_account SET bodies_missing = bodies_missing + 1, updated_at = now() WHERE id = %s",
        (account_id,),
    )


# the account's counter of each kind of body_check verdict
BODY_PROBLEM_COLUMNS = {"verification": "bodies_verification", "incomplete": "bodies_incomplete", "gone": "bodies_gone"}


def record_body_problem(conn: psycopg.Connection, account_id: int, kind: str, reason: str) -> None:
    """One more body of this account that was WeChat's verification page, cut, or a deleted article's page
    (``kind``, body_check's verdict): counted by kind, the last reason and when kept."""
    column = BODY_PROBLEM_COLUMNS[kind]
    conn.execute(
        f"""
        UPDATE wechat_account SET {column} = {column} + 1, last_body_problem = %s, last_body_problem_at = now(),
               updated_at = now()
        WHERE id = %s
        """,
        (redact.scrub(reason)[:500], account_id),
    )


def accounts(conn: psycopg.Connection) -> list[Row]:
    return conn.execute("SELECT * FROM wechat_account ORDER BY name, mp_id").fetchall()


def record_accounts_listed(conn: psycopg.Connection, account_ids: list[int], day: date) -> None:
    """WeRSS's account list named these accounts at a slot of ``day`` (its Shanghai date): active that day."""
    conn.execute(
        """
        INSERT INTO account_day (account_id, day, listed_at)
        SELECT unnest(%s::bigint[]), %s, now()
        ON CONFLICT (account_id, day) DO UPDATE SET listed_at = now()
        """,
        (account_ids, day),
    )


def record_accounts_read(conn: psycopg.Connection, account_ids: list[int], day: date) -> None:
    """These accounts' article lists were read at a slot of ``day``."""
    conn.execute(
        """
        INSERT INTO account_day (account_id, day, listed_at, read_at)
        SELECT unnest(%s::bigint[]), %s, now(), now()
        ON CONFLICT (account_id, day) DO UPDATE SET read_at = now()
        """,
        (account_ids, day),
    )


def accounts_of_day(conn: psycopg.Connection, day: date) -> list[Row]:
    """The accounts WeRSS named on ``day``: ``id``, ``mp_id``, ``name``, ``read`` (its article list was read)."""
    return conn.execute(
        """
        SELECT a.id, a.mp_id, a.name, d.read_at IS NOT NULL AS read
        FROM account_day d JOIN wechat_account a ON a.id = d.account_id
        WHERE d.day = %s ORDER BY a.name, a.mp_id
        """,
        (day,),
    ).fetchall()


def accounts_listed_between(conn: psycopg.Connection, first: date, last: date) -> list[Row]:
    """The accounts WeRSS named on any day from ``first`` to ``last``, none of them read (``read`` false)."""
    return conn.execute(
        """
        SELECT a.id, a.mp_id, a.name, false AS read
        FROM wechat_account a
        WHERE EXISTS (SELECT 1 FROM account_day d WHERE d.account_id = a.id AND d.day BETWEEN %s AND %s)
        ORDER BY a.name, a.mp_id
        """,
        (first, last),
    ).fetchall()


def record_account_sync(conn: psycopg.Connection, account_id: int, synced_at: datetime | None) -> None:
    """What WeRSS's record of an account says of its last collection (None: never collected)."""
    conn.execute(
        "UPDATE wechat_account SET werss_synced_at = %s, werss_checked_at = now() WHERE id = %s",
        (synced_at, account_id),
    )


def last_collection(conn: psycopg.Connection) -> datetime | None:
    """The latest moment the radar knows WeRSS to have collected by: an account's last collection as WeRSS's
    record said, else when the radar took in its newest article (which WeRSS must have collected before)."""
    row = conn.execute("SELECT GREATEST((SELECT max(werss_synced_at) FROM wechat_account), "
                       "(SELECT max(created_at) FROM content_item)) AS at").fetchone()
    return row["at"]


def collection_evidence(conn: psycopg.Connection, account_ids: list[int], at: datetime, *,
                        history_days: int = 90, min_articles: int = 4) -> list[Row]:
    """For each account: ``last_article_at`` (its newest article known by ``at``), ``cadence`` (its usual
    interval over the ``history_days`` before ``at``, from at least ``min_articles`` articles; else None) and
    ``synced_at`` (WeRSS's last collection of it, as last read)."""
    return conn.execute(
        """
        WITH history AS (
            SELECT account_id, count(*) AS n, min(published_at) AS first, max(published_at) AS last
            FROM content_item
            WHERE account_id = ANY(%(ids)s) AND published_at <= %(at)s
              AND published_at > %(at)s - make_interval(days => %(days)s)
            GROUP BY account_id
        )
        SELECT a.id, a.mp_id, a.name, a.werss_synced_at AS synced_at,
               GREATEST(h.last, CASE WHEN a.last_article_at <= %(at)s THEN a.last_article_at END) AS last_article_at,
               CASE WHEN h.n >= %(min_n)s THEN (h.last - h.first) / (h.n - 1) END AS cadence
        FROM wechat_account a LEFT JOIN history h ON h.account_id = a.id
        WHERE a.id = ANY(%(ids)s)
        """,
        {"ids": account_ids, "at": at, "days": history_days, "min_n": min_articles},
    ).fetchall()


def silent_accounts(conn: psycopg.Connection, at: datetime, factor: float, *, history_days: int = 90,
                    min_articles: int = 4, min_silence: str = "24 hours") -> list[Row]:
    """Accounts whose last article is older than ``factor`` × their usual interval between articles (over
    the ``history_days`` before ``at``, from at least ``min_articles`` articles) and than ``min_silence``, as
    of ``at``; each with ``cadence`` (interval) and ``last_article_at``."""
    return conn.execute(
        """
        WITH history AS (
            SELECT account_id, count(*) AS n, min(published_at) AS first, max(published_at) AS last
            FROM content_item
            WHERE account_id IS NOT NULL AND published_at <= %(at)s
              AND published_at > %(at)s - make_interval(days => %(days)s)
            GROUP BY account_id
        ), cadence AS (
            SELECT account_id, last, (last - first) / (n - 1) AS cadence FROM history WHERE n >= %(min_n)s
        )
        SELECT a.id, a.mp_id, a.name, c.last AS last_article_at, c.cadence
        FROM cadence c JOIN wechat_account a ON a.id = c.account_id
        WHERE c.cadence > interval '0' AND %(at)s - c.last > c.cadence * %(factor)s
          AND %(at)s - c.last > %(min_silence)s::interval
        ORDER BY c.last
        """,
        {"at": at, "days": history_days, "min_n": min_articles, "factor": factor, "min_silence": min_silence},
    ).fetchall()



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
                                  body_checks, next_body_check_at, first_seen_at, search_tsv)
        VALUES (%(external_id)s, %(account_id)s, %(mp_id)s, %(title)s, %(url)s, %(published_at)s,
                %(raw_html_size)s, %(clean_text)s, %(content_hash)s, %(body_status)s, %(last_error)s,
                %(slot_run_id)s, %(body_checks)s, %(next_body_check_at)s, COALESCE(%(first_seen_at)s, now()),
                array_to_tsvector(%(lexemes)s::text[]))
        ON CONFLICT ON CONSTRAINT content_item_external_id_key DO NOTHING
        RETURNING id
        """,
        {"body_checks": 0, "next_body_check_at": None, "first_seen_at": None, **item,
         "lexemes": search.lexemes(item.get("title") or "", item.get("clean_text") or "")},
    ).fetchone()
    return None if row is None else row["id"]


def fill_waiting_body(
    conn: psycopg.Connection, external_id: str, item: dict[str, Any], *, next_check: Callable[[int], datetime]
) -> Row | None:
    """Another check of an article stored while WeRSS had no body: it gets its body, or its next check.

    ``next_check(first_seen)`` says when an article first seen then, still without a body, is due again.
    Returns the row's ``body_status``, ``body_checks`` and ``next_body_check_at``; None when the article
    was not waiting (another run filled it first).
    """
    row = conn.execute(
        """
        UPDATE content_item SET raw_html_size = %(raw_html_size)s, clean_text = %(clean_text)s,
               content_hash = %(content_hash)s, body_status = %(body_status)s, last_error = %(last_error)s,
               title = %(title)s, body_checks = body_checks + 1, updated_at = now(),
               search_tsv = array_to_tsvector(%(lexemes)s::text[])
        WHERE external_id = %(external_id)s AND body_status = 0
        RETURNING id, body_status, body_checks, first_seen_at
        """,
        {**item, "external_id": external_id,
         "lexemes": search.lexemes(item.get("title") or "", item.get("clean_text") or "")},
    ).fetchone()
    if row is None:
        return None
    due = next_check(row["first_seen_at"]) if row["body_status"] == BODY_WAITING else None
    conn.execute("UPDATE content_item SET next_body_check_at = %s WHERE id = %s", (due, row["id"]))
    return {**row, "next_body_check_at": due}


def get_item(conn: psycopg.Connection, item_id: int) -> Row | None:
    return conn.execute(
        """
        SELECT c.*, a.name AS mp_name FROM content_item c
        LEFT JOIN wechat_account a ON a.id = c.account_id WHERE c.id = %s
        """,
        (item_id,),
    ).fetchone()
