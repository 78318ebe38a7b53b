"""Listing one account's window on WeRSS, page by page, newest first; how long to leave an account alone
after it failed; and when WeRSS last collected the accounts that show no recent article."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from include.radar import store
from include.radar.collect import coverage, werss_rows
from include.radar.collect.werss import WeRSSClient, WeRSSDeadline, WeRSSError
from include.radar.collect.werss_rows import EARLIEST_PUBLISH, ArticleRow, RowRejected, article_row
from include.radar.core import redact

log = logging.getLogger(__name__)
SYNC_READS = 30  # accounts a slot asks WeRSS about their last collection (the rest at later slots)


def backoff_for(status: int | None, message: str, consecutive_failures: int) -> timedelta:
    """How long to leave an account alone after a failure, by the kind of error.

    429 / rate limit → 6 h; 401 / expired → none (re-login fixes it); 403 / forbidden → 12 h; anything
    else → 15 min × 2^(failures−1), at most 24 h.
    """
    text = message.lower()
    if status == 429 or "429" in text or "rate" in text or "频繁" in text:
        return timedelta(hours=6)
    if status == 401 or "401" in text or "expired" in text or "过期" in text:
        return timedelta(0)
    if status == 403 or "403" in text or "forbidden" in text:
        return timedelta(hours=12)
    exponent = max(0, min(consecutive_failures, 20) - 1)
    return min(timedelta(minutes=15) * 2**exponent, timedelta(hours=24))


@dataclass
class AccountWindow:
    """What listing one account found: valid rows in the window, and the rows it skipped (with reasons)."""

    metas: list[ArticleRow] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # handled oddities of the listing itself


def window_metas(
    client: WeRSSClient, mp_id: str, start: datetime, end: datetime, page_size: int, *,
    max_pages: int = 50, now: datetime,
) -> AccountWindow:
    """The account's articles published in [start, end], newest first, deduplicated by id.

    Pages newest first and stops at the first page that reaches before ``start``, a short page, a page that
    brings no id not seen before (a WeRSS that ignores ``offset`` repeats its first page forever), or after
    ``max_pages`` pages. The server's sort has no tie-breaker, so a row may repeat across pages: the first copy
    wins. A malformed row is skipped with its reason; the rows beside it go on.
    """
    found = AccountWindow()
    seen: dict[str, ArticleRow] = {}
    offset = 0
    start_s, end_s = int(start.timestamp()), int(end.timestamp())
    for page in range(1, max_pages + 1):
        rows = client.article_page(mp_id, offset, page_size)
        oldest: int | None = None
        new_ids = 0
        for row in rows:
            try:
                meta = article_row(row, mp_id=mp_id, now=now)
            except RowRejected as exc:
                found.skipped.append(str(exc))
                log.warning("account %s: skipping a malformed article row: %s", mp_id, exc)
                continue
            oldest = meta.publish_time if oldest is None else min(oldest, meta.publish_time)
            if meta.id not in seen:
                new_ids += 1
                seen[meta.id] = meta
        offset += len(rows)
        if len(rows) < page_size or (oldest is not None and oldest < start_s):
            break
        if not new_ids:
            found.notes.append(f"page {page} repeated earlier rows (WeRSS ignoring offset?): listing stopped")
            break
    else:
        found.notes.append(f"listing stopped after werss_max_pages={max_pages} pages")
    found.metas = sorted(
        (m for m in seen.values() if start_s <= m.publish_time <= end_s), key=lambda m: (-m.publish_time, m.id)
    )
    return found


def read_collection(connect: Callable[[], Any], client: WeRSSClient, accounts: list[dict[str, Any]],
                    now: datetime) -> None:
    """When WeRSS last collected those of ``accounts`` (their stored rows, just checked) that no article of
    theirs shows collected (coverage.evidence): the other evidence coverage counts them by. At most SYNC_READS a
    slot, the longest unasked first; a failure or the deadline leaves the rest for a later slot."""
    with connect() as conn:
        found = store.articles.collection_evidence(conn, [a["id"] for a in accounts], now)
    by_article = {r["id"] for r in found if coverage.evidence({**r, "synced_at": None}, now) == "article"}
    doubtful = sorted((a for a in accounts if a["id"] not in by_article),
                      key=lambda a: a.get("werss_checked_at") or EARLIEST_PUBLISH)
    for row in doubtful[:SYNC_READS]:
        try:
            detail = client.account(row["mp_id"])
        except WeRSSDeadline:
            break
        except WeRSSError as exc:
            log.info("WeRSS's record of account %s could not be read: %s", row["name"], redact.scrub(str(exc))[:200])
            continue
        if "sync_time" in detail:  # a WeRSS whose record says nothing of it leaves the evidence as it was
            with connect() as conn:
                store.articles.record_account_sync(conn, row["id"], werss_rows.synced_at(detail, now))
