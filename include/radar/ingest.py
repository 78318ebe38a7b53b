"""Ingest one slot: the articles of the last ``window_days`` from WeRSS, only what is new, cleaned.

Two phases (seed 000 section 6): list metadata per account (light), then fetch the detail (heavy) only for
external ids not stored yet, or stored while WeRSS had no body. Each article is committed on its own, so a
failure halfway loses nothing already stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from include.radar import store
from include.radar.cleaning import clean_html, is_missing_body
from include.radar.slots import SlotKey, epoch_seconds
from include.radar.werss import Token, WeRSSAuthError, WeRSSClient, WeRSSError, WeRSSNotFound

log = logging.getLogger(__name__)



class ArticleMeta(BaseModel):
    """One row of the WeRSS article list, validated; malformed rows are counted and skipped."""

    model_config = ConfigDict(extra="ignore")

    id: str
    mp_id: str
    title: str = ""
    url: str = ""
    publish_time: int

    @field_validator("id", "mp_id", mode="before")
    @classmethod
    def _non_empty(cls, value: Any) -> str:
        text = str(value).strip() if value is not None else ""
        if not text:
            raise ValueError("empty")
        return text

    @field_validator("title", "url", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return "" if value is None else str(value).strip()

    @field_validator("publish_time", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> int:
        seconds = epoch_seconds(value)
        if seconds <= 0:
            raise ValueError("not a positive timestamp")
        return seconds

    @property
    def published_at(self) -> datetime:
        return datetime.fromtimestamp(self.publish_time, UTC)


@dataclass
class IngestSummary:
    slot: str
    accounts: int = 0
    accounts_failed: int = 0
    accounts_backed_off: int = 0
    in_window: int = 0
    new: int = 0
    waiting: int = 0
    unusable: int = 0
    deferred: int = 0
    malformed: int = 0
    detail_errors: int = 0
    errors: list[str] = field(default_factory=list)

    def line(self) -> str:
        parts = [
            f"slot {self.slot}: {self.accounts} accounts",
            f"{self.in_window} in window",
            f"{self.new} new",
            f"{self.waiting} waiting for body",
        ]
        for label, value in (
            ("accounts failed", self.accounts_failed),
            ("accounts backed off", self.accounts_backed_off),
            ("unusable", self.unusable),
            ("deferred to the next slot", self.deferred),
            ("malformed rows", self.malformed),
            ("detail errors", self.detail_errors),
        ):
            if value:
                parts.append(f"{value} {label}")
        return ", ".join(parts)

    def as_xcom(self) -> dict[str, Any]:
        data = asdict(self)
        data["errors"] = data["errors"][:10]
        return data


def backoff_for(status: int | None, message: str, consecutive_failures: int) -> timedelta:
    """How long to leave an account alone after a failure (seed 004's error classes).

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


def window_metas(
    client: WeRSSClient, mp_id: str, start: datetime, end: datetime, page_size: int
) -> tuple[list[ArticleMeta], int]:
    """The account's articles published in [start, end], newest first, deduplicated by id.

    Pages newest first and stops at the first page that reaches before ``start`` (or a short page). The
    server's sort has no tie-breaker, so a row may repeat across pages: the first copy wins.
    Returns (metas, malformed row count).
    """
    seen: dict[str, ArticleMeta] = {}
    malformed = 0
    offset = 0
    start_s, end_s = int(start.timestamp()), int(end.timestamp())
    while True:
        rows = client.article_page(mp_id, offset, page_size)
        oldest: int | None = None
        for row in rows:
            try:
                meta = ArticleMeta.model_validate({"mp_id": mp_id, **row})
            except (ValidationError, ValueError, TypeError):
                malformed += 1
                log.warning("account %s: skipping malformed article row %r", mp_id, _short(row))
                continue
            oldest = meta.publish_time if oldest is None else min(oldest, meta.publish_time)
            if start_s <= meta.publish_time <= end_s and meta.id not in seen:
                seen[meta.id] = meta
        offset += len(rows)
        if len(rows) < page_size or (oldest is not None and oldest < start_s):
            break
    return sorted(seen.values(), key=lambda m: (-m.publish_time, m.id)), malformed


def _short(row: Any) -> str:
    text = repr(row)
    return text if len(text) <= 200 else text[:200] + "…"


def db_token_cache(connect: Callable[[], Any], key: str) -> tuple[Callable[[], Token | None], Callable[[Token | None], None]]:
    """Keep the WeRSS login token in the radar database so every task does not log in again."""

    def load() -> Token | None:
        with connect() as conn:
            row = store.get_state(conn, key)
        if not row or not row["expires_at"]:
            return None
        return Token(str(row["value"].get("token", "")), row["expires_at"])

    def save(token: Token | None) -> None:
        with connect() as conn:
            if token is None:
                store.delete_state(conn, key)
            else:
                store.set_state(conn, key, {"token": token.value}, token.expires_at)

    return load, save


def ingest_slot(
    connect: Callable[[], Any],
    client: WeRSSClient,
    *,
    slot_run_id: int,
    key: SlotKey,
    window_days: float,
    max_articles: int,
    page_size: int = 100,
    now: datetime | None = None,
) -> IngestSummary:
    """Pull the slot's window from every account and store what is new. Returns the summary.

    Raises WeRSSAuthError at once on bad credentials, and WeRSSError when every account failed
    (WeRSS is down): the slot then counts as failed, while one failing account only counts against itself.
    """
    now = now or datetime.now(UTC)
    start, end = key.scheduled_at - timedelta(days=window_days), key.scheduled_at
    summary = IngestSummary(slot=key.slot)

    remote_accounts = client.accounts()
    with connect() as conn:
        account_rows = {
            str(a["id"]): store.upsert_account(conn, str(a["id"]), str(a.get("mp_name") or a["id"]))
            for a in remote_accounts
            if isinstance(a, dict) and a.get("id")
        }
    summary.accounts = len(account_rows)

    metas: dict[str, ArticleMeta] = {}
    per_account: dict[str, list[ArticleMeta]] = {}
    tried = 0
    for mp_id, account in account_rows.items():
        if account["backoff_until"] and account["backoff_until"] > now:
            summary.accounts_backed_off += 1
            log.info("account %s backed off until %s (%s)", account["name"], account["backoff_until"], account["last_error"])
            continue
        tried += 1
        try:
            found, malformed = window_metas(client, mp_id, start, end, page_size)
        except WeRSSAuthError:
            raise
        except WeRSSError as exc:
            failures = account["consecutive_failures"] + 1
            until = now + backoff_for(exc.status, str(exc), failures)
            with connect() as conn:
                store.record_account_check(
                    conn, account["id"], hits=0, last_article_at=None, error=str(exc),
                    backoff_until=until if until > now else None,
                )
            summary.accounts_failed += 1
            summary.errors.append(f"{account['name']}: {exc}")
            log.warning("account %s failed (%s); backed off until %s", account["name"], exc, until)
            continue
        summary.malformed += malformed
        per_account[mp_id] = found
        for meta in found:
            metas.setdefault(meta.id, meta)

    if tried and summary.accounts_failed == tried:
        raise WeRSSError(f"ingest failed for all {tried} accounts: " + "; ".join(summary.errors[:3]))

    summary.in_window = len(metas)
    with connect() as conn:
        known = store.known_external_ids(conn, list(metas))
    candidates = [m for m in metas.values() if m.id not in known or known[m.id] == store.BODY_WAITING]
    candidates.sort(key=lambda m: (-m.publish_time, m.id))
    if len(candidates) > max_articles:
        summary.deferred = len(candidates) - max_articles
        log.info("slot %s: %d articles over max_articles_per_slot=%d wait for the next slot",
                 key.slot, summary.deferred, max_articles)
        candidates = candidates[:max_articles]

    new_by_account: dict[str, int] = {}
    for meta in candidates:
        outcome = _store_article(connect, client, meta, account_rows[meta.mp_id]["id"] if meta.mp_id in account_rows else None,
                                 slot_run_id, was_waiting=meta.id in known, summary=summary)
        if outcome == "new":
            new_by_account[meta.mp_id] = new_by_account.get(meta.mp_id, 0) + 1

    with connect() as conn:
        for mp_id, found in per_account.items():
            store.record_account_check(
                conn, account_rows[mp_id]["id"], hits=1 if new_by_account.get(mp_id) else 0,
                last_article_at=found[0].published_at if found else None, error=None, backoff_until=None,
            )
        store.set_slot_counts(conn, slot_run_id, new_count=summary.new, waiting_count=summary.waiting)
    log.info(summary.line())
    return summary


def _store_article(
    connect: Callable[[], Any],
    client: WeRSSClient,
    meta: ArticleMeta,
    account_id: int | None,
    slot_run_id: int,
    *,
    was_waiting: bool,
    summary: IngestSummary,
) -> str:
    """Fetch, clean and store one article; returns 'new', 'waiting', 'unusable', 'known' or 'error'."""
    try:
        detail = client.article(meta.id)
    except WeRSSAuthError:
        raise
    except WeRSSNotFound:
        log.info("article %s (%s) was deleted on WeRSS; skipped", meta.id, meta.title)
        summary.detail_errors += 1
        return "error"
    except WeRSSError as exc:
        summary.detail_errors += 1
        summary.errors.append(f"article {meta.id}: {exc}")
        log.warning("article %s (%s): detail failed, a later slot retries: %s", meta.id, meta.title, exc)
        return "error"

    html = next(
        (h for h in (detail.get("content_html"), detail.get("content")) if isinstance(h, str) and not is_missing_body(h)),
        "",
    )
    cleaned = clean_html(html) if html else None
    if cleaned is None:
        body_status, last_error = store.BODY_WAITING, "waiting for WeRSS to fetch the body"
    elif not cleaned.usable:
        body_status, last_error = store.BODY_UNUSABLE, cleaned.reason or "no usable text"
    else:
        body_status, last_error = store.BODY_READY, cleaned.reason
    item = {
        "external_id": meta.id,
        "account_id": account_id,
        "mp_id": meta.mp_id,
        "title": (str(detail.get("title") or meta.title) or meta.id)[:500],
        "url": str(detail.get("url") or meta.url),
        "published_at": meta.published_at,
        "raw_html_size": cleaned.raw_size if cleaned else 0,
        "clean_text": cleaned.text if cleaned else "",
        "content_hash": cleaned.content_hash if cleaned else None,
        "body_status": body_status,
        "last_error": last_error,
        "slot_run_id": slot_run_id,
    }
    with connect() as conn:
        if was_waiting:
            ready = store.fill_waiting_body(conn, meta.id, item)
            if body_status == store.BODY_WAITING:
                summary.waiting += 1
                return "waiting"
            if ready:
                summary.new += 1
                log.info("article %s (%s): body arrived, now analysable", meta.id, item["title"])
                return "new"
            summary.unusable += 1
            return "unusable"
        inserted = store.insert_content_item(conn, item)
    if inserted is None:
        return "known"  # a concurrent run stored it first
    if body_status == store.BODY_WAITING:
        summary.waiting += 1
        return "waiting"
    if body_status == store.BODY_UNUSABLE:
        summary.unusable += 1
        log.warning("article %s (%s) has no usable text: %s", meta.id, item["title"], last_error)
        return "unusable"
    summary.new += 1
    return "new"
