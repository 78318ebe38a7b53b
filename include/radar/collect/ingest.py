"""Ingest one slot: the articles of the last ``window_days`` from WeRSS, only what is new, cleaned.

Two phases: list metadata per account (light), then fetch the detail (heavy) only for
external ids not stored yet, or stored while WeRSS had no body. Each article is committed on its own, so a
failure halfway loses nothing already stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from include.radar import store
from include.radar.collect import body_check
from include.radar.collect.body_check import Verdict
from include.radar.collect.cleaning import CleanResult, clean_html, is_missing_body
from include.radar.collect.listing import AccountWindow, backoff_for, read_collection, window_metas
from include.radar.collect.werss import Token, WeRSSAuthError, WeRSSClient, WeRSSDeadline, WeRSSError, WeRSSNotFound
from include.radar.collect.werss_rows import ArticleRow, RowRejected, account_row, article_row
from include.radar.core.slots import SlotKey

log = logging.getLogger(__name__)

# an article whose body WeRSS has not fetched yet is checked again at every slot for the first 24 hours after
# it was first seen (WeRSS fetches bodies within hours), then 6 hours later, then daily
BODY_EVERY_SLOT = timedelta(hours=24)
BODY_RECHECK_LATER = (timedelta(hours=6), timedelta(hours=24))
# a slot starts a few seconds to minutes later or earlier from one day to the next: the check at the next day's
# same slot is the one that ends the first day, whichever side of 24 hours its start fell
BODY_SLOT_DRIFT = timedelta(minutes=5)
# a slot keeps at most this many warning lines (the counters keep counting)
MAX_WARNINGS = 50


@dataclass
class IngestSummary:
    slot: str
    accounts: int = 0
    accounts_failed: int = 0
    accounts_backed_off: int = 0
    in_window: int = 0
    new: int = 0
    waiting: int = 0
    bodies_backed_off: int = 0
    unusable: int = 0
    body_problems: int = 0  # WeChat's verification page, a cut body or a deleted article's page instead of a body
    deferred: int = 0
    skipped: int = 0
    detail_errors: int = 0
    deadline_reached: bool = False
    errors: list[str] = field(default_factory=list)  # account failures: the slot fails when all accounts fail
    warnings: list[str] = field(default_factory=list)  # handled problems, listed on the slot

    def warn(self, message: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(message)

    def line(self) -> str:
        parts = [
            f"slot {self.slot}: {self.accounts} accounts",
            f"{self.in_window} in window",
            f"{self.new} new",
            f"{self.waiting} waiting for body",
        ]
        for label, value in (
            ("bodies not due for a recheck", self.bodies_backed_off),
            ("accounts failed", self.accounts_failed),
            ("accounts backed off", self.accounts_backed_off),
            ("unusable", self.unusable),
            ("bodies that were WeChat's pages or cut", self.body_problems),
            ("deferred to the next slot", self.deferred),
            ("malformed rows skipped", self.skipped),
            ("detail errors", self.detail_errors),
        ):
            if value:
                parts.append(f"{value} {label}")
        if self.deadline_reached:
            parts.append("stopped at the step's deadline")
        return ", ".join(parts)

    def count(self, result: ArticleResult) -> None:
        """Count one article's result."""
        counter = {Stored.NEW: "new", Stored.WAITING: "waiting", Stored.UNUSABLE: "unusable",
                   Stored.SKIPPED: "skipped", Stored.ERROR: "detail_errors"}.get(result.stored)
        if counter:
            setattr(self, counter, getattr(self, counter) + 1)
        if result.body_problem:
            self.body_problems += 1
        if result.warning:
            self.warn(result.warning)

    def as_xcom(self) -> dict[str, Any]:
        data = asdict(self)
        data["errors"] = data["errors"][:10]
        data["warnings"] = data["warnings"][:10]
        return data


def db_token_cache(connect: Callable[[], Any], key: str) -> tuple[Callable[[], Token | None], Callable[[Token | None], None]]:
    """Keep the WeRSS login token in the radar database so every task does not log in again."""

    def load() -> Token | None:
        with connect() as conn:
            row = store.state.get_state(conn, key)
        if not row or not row["expires_at"]:
            return None
        return Token(str(row["value"].get("token", "")), row["expires_at"])

    def save(token: Token | None) -> None:
        with connect() as conn:
            if token is None:
                store.state.delete_state(conn, key)
            else:
                store.state.set_state(conn, key, {"token": token.value}, token.expires_at)

    return load, save


def next_body_check(first_seen: datetime, now: datetime) -> datetime:
    """When an article first seen at ``first_seen``, still without a body at ``now``, is checked again.

    At the next slot (due at once) while it is younger than 24 hours: one detail call per slot, so a body
    WeRSS fetched at 15:00 for an article first seen at 12:00 is analysed at 18:00. Then the checks back off:
    the check that ends its first day is followed by one 6 hours later, and that by one a day.
    """
    age = now - first_seen
    if age < BODY_EVERY_SLOT - BODY_SLOT_DRIFT:
        return now
    later = BODY_RECHECK_LATER[0] if age < BODY_EVERY_SLOT + BODY_RECHECK_LATER[0] else BODY_RECHECK_LATER[1]
    return now + later


@dataclass(frozen=True)
class SlotIngest:
    """What one slot's ingest reads: its slot run, the ``window_days`` before its scheduled time, at most
    ``max_articles`` details, and each account's list ``page_size`` rows a page, ``max_pages`` pages at most."""

    slot_run_id: int
    key: SlotKey
    window_days: float
    max_articles: int
    page_size: int = 100
    max_pages: int = 50

    @property
    def start(self) -> datetime:
        return self.key.scheduled_at - timedelta(days=self.window_days)


def ingest_slot(connect: Callable[[], Any], client: WeRSSClient, slot: SlotIngest,
                summary: IngestSummary | None = None) -> IngestSummary:
    """Pull the slot's window from every account and store what is new. Returns the summary.

    Raises WeRSSAuthError at once on bad credentials, and WeRSSError when every account failed
    (WeRSS is down): the slot then counts as failed, while one failing account only counts against itself.
    A malformed row is skipped and counted (on the slot and its account). When the client's deadline
    passes, listing and fetching stop where they are: what is stored stays, the rest waits for a later slot.
    Everything counted is added to the slot run before returning, also when the ingest fails.
    """
    now = client.clock.now()  # the client's clock: the slot's, its deadline and its backoffs on it too
    summary = summary or IngestSummary(slot=slot.key.slot)  # the caller's, to read after a failure too
    try:
        _ingest(connect, client, summary, slot, now)
    finally:
        with connect() as conn:
            store.slot_runs.record_ingest(conn, slot.slot_run_id, new=summary.new, skipped=summary.skipped, waiting=summary.waiting,
                                body_problems=summary.body_problems)
            store.slot_runs.add_slot_warnings(conn, slot.slot_run_id, "ingest", summary.warnings)
    log.info(summary.line())
    return summary


class Stored(StrEnum):
    """What fetching and storing one article came to."""

    NEW = "new"  # analysable now: a new article, or a waiting one whose body arrived
    WAITING = "waiting"  # stored, WeRSS has no body for it yet (or sent one of WeChat's pages that may pass)
    UNUSABLE = "unusable"  # stored, no usable text: never analysed
    KNOWN = "known"  # a concurrent run stored (or filled) it first
    SKIPPED = "skipped"  # a malformed detail row
    ERROR = "error"  # the detail call failed (or the article was deleted): a later slot retries


@dataclass(frozen=True)
class ArticleResult:
    """One article's outcome, for the caller to count on the slot's summary."""

    stored: Stored
    warning: str | None = None  # a line for the slot's warnings
    body_problem: bool = False  # one of WeChat's pages or a cut body instead of the article


@dataclass
class Listing:
    """What listing the accounts found: every article in the window once, and each account's own rows."""

    metas: dict[str, ArticleRow] = field(default_factory=dict)
    per_account: dict[str, list[ArticleRow]] = field(default_factory=dict)
    tried: int = 0


def _ingest(connect: Callable[[], Any], client: WeRSSClient, summary: IngestSummary, slot: SlotIngest,
            now: datetime) -> None:
    account_rows = _accounts(connect, client, summary)
    summary.accounts = len(account_rows)
    with connect() as conn:  # active on the slot's day (coverage.py)
        store.articles.record_accounts_listed(conn, [a["id"] for a in account_rows.values()], slot.key.run_date)
    listing = _list_accounts(connect, client, summary, account_rows, slot, now)
    if listing.tried and summary.accounts_failed == listing.tried:
        raise WeRSSError(f"ingest failed for all {listing.tried} accounts: " + "; ".join(summary.errors[:3]))
    summary.in_window = len(listing.metas)
    with connect() as conn:
        known = store.articles.known_external_ids(conn, list(listing.metas))
    candidates = _candidates(listing.metas, known, summary, now=now)
    if len(candidates) > slot.max_articles:
        summary.deferred = len(candidates) - slot.max_articles
        log.info("slot %s: %d articles over max_articles_per_slot=%d wait for the next slot",
                 slot.key.slot, summary.deferred, slot.max_articles)
        candidates = candidates[:slot.max_articles]
    new_by_account = _store_candidates(connect, client, summary, candidates, account_rows, known,
                                       slot_run_id=slot.slot_run_id, now=now)
    with connect() as conn:
        store.articles.record_accounts_read(conn, [account_rows[mp_id]["id"] for mp_id in listing.per_account],
                                   slot.key.run_date)
        for mp_id, found_metas in listing.per_account.items():
            store.articles.record_account_check(
                conn, account_rows[mp_id]["id"], hits=1 if new_by_account.get(mp_id) else 0,
                last_article_at=found_metas[0].published_at if found_metas else None, error=None, backoff_until=None,
            )
    read_collection(connect, client, [account_rows[mp_id] for mp_id in listing.per_account], now)


def _list_accounts(connect: Callable[[], Any], client: WeRSSClient, summary: IngestSummary,
                   account_rows: dict[str, Any], slot: SlotIngest, now: datetime) -> Listing:
    """List the window of every account not backed off; a failing account is backed off and counted."""
    listing = Listing()
    for mp_id, account in account_rows.items():
        if account["backoff_until"] and account["backoff_until"] > now:
            summary.accounts_backed_off += 1
            log.info("account %s backed off until %s (%s)", account["name"], account["backoff_until"], account["last_error"])
            continue
        try:
            found = window_metas(client, mp_id, slot.start, slot.key.scheduled_at, slot.page_size,
                                 max_pages=slot.max_pages, now=now)
        except WeRSSAuthError:
            raise
        except WeRSSDeadline as exc:
            _deadline(summary, f"listing stopped before account {account['name']}: {exc}")
            break
        except WeRSSError as exc:
            listing.tried += 1
            _account_failed(connect, summary, account, exc, now)
            continue
        listing.tried += 1
        _note_listing(connect, summary, account, found)
        listing.per_account[mp_id] = found.metas
        for meta in found.metas:
            listing.metas.setdefault(meta.id, meta)
    return listing


def _account_failed(connect: Callable[[], Any], summary: IngestSummary, account: dict[str, Any], exc: WeRSSError,
                    now: datetime) -> None:
    failures = account["consecutive_failures"] + 1
    until = now + backoff_for(exc.status, str(exc), failures)
    with connect() as conn:
        store.articles.record_account_check(
            conn, account["id"], hits=0, last_article_at=None, error=str(exc),
            backoff_until=until if until > now else None,
        )
    summary.accounts_failed += 1
    summary.errors.append(f"{account['name']}: {exc}")
    summary.warn(f"account {account['name']} failed: {exc}")
    log.warning("account %s failed (%s); backed off until %s", account["name"], exc, until)


def _note_listing(connect: Callable[[], Any], summary: IngestSummary, account: dict[str, Any],
                  found: AccountWindow) -> None:
    """Count an account's skipped rows (on the slot and the account) and warn of its listing's oddities."""
    if found.skipped:
        summary.skipped += len(found.skipped)
        for reason in found.skipped:
            summary.warn(f"account {account['name']}: skipped {reason}")
        with connect() as conn:
            store.articles.record_account_skips(conn, account["id"], len(found.skipped), found.skipped[-1])
    for note in found.notes:
        summary.warn(f"account {account['name']}: {note}")


def _candidates(metas: dict[str, ArticleRow], known: dict[str, Any], summary: IngestSummary, *,
                now: datetime) -> list[ArticleRow]:
    """The articles to fetch, newest first: new ones, and waiting ones whose body check is due."""
    candidates = []
    for meta in metas.values():
        stored = known.get(meta.id)
        if stored is None:
            candidates.append(meta)
        elif stored["body_status"] == store.common.BODY_WAITING:
            due = stored["next_body_check_at"]
            if due is None or due <= now:
                candidates.append(meta)
            else:
                summary.bodies_backed_off += 1
    return sorted(candidates, key=lambda m: (-m.publish_time, m.id))


def _store_candidates(
    connect: Callable[[], Any], client: WeRSSClient, summary: IngestSummary, candidates: list[ArticleRow],
    account_rows: dict[str, Any], known: dict[str, Any], *, slot_run_id: int, now: datetime,
) -> dict[str, int]:
    """Fetch and store each candidate until the deadline; the number of new articles per account."""
    new_by_account: dict[str, int] = {}
    for number, meta in enumerate(candidates):
        try:
            result = _store_article(connect, client, meta, account_rows.get(meta.mp_id), slot_run_id,
                                    was_waiting=meta.id in known, now=now)
        except WeRSSDeadline as exc:
            _deadline(summary, f"{len(candidates) - number} article details not fetched: {exc}")
            break
        summary.count(result)
        if result.stored is Stored.NEW:
            new_by_account[meta.mp_id] = new_by_account.get(meta.mp_id, 0) + 1
    return new_by_account


def _accounts(connect: Callable[[], Any], client: WeRSSClient, summary: IngestSummary) -> dict[str, Any]:
    """The subscribed accounts, stored; a malformed account row is skipped and counted."""
    rows = {}
    for raw in client.accounts():
        try:
            row = account_row(raw)
        except RowRejected as exc:
            summary.skipped += 1
            summary.warn(f"skipped {exc}")
            log.warning("skipping a malformed account row: %s", exc)
            continue
        rows.setdefault(row.id, row)
    with connect() as conn:
        return {mp_id: store.articles.upsert_account(conn, mp_id, row.name) for mp_id, row in rows.items()}


def _deadline(summary: IngestSummary, message: str) -> None:
    summary.deadline_reached = True
    summary.warn(f"deadline: {message}")
    log.warning("ingest stopped at its deadline: %s", message)


def _store_article(
    connect: Callable[[], Any],
    client: WeRSSClient,
    meta: ArticleRow,
    account: dict[str, Any] | None,
    slot_run_id: int,
    *,
    was_waiting: bool,
    now: datetime,
) -> ArticleResult:
    """Fetch, clean and store one article (a new one, or fill a waiting one's body)."""
    account_id = account["id"] if account else None
    fetched = _fetch_detail(connect, client, meta, account_id, now=now)
    if isinstance(fetched, ArticleResult):
        return fetched
    raw, detail = fetched
    cleaned, verdict = read_body(raw)
    body_status, last_error = body_state(cleaned, verdict)
    usable = verdict is None and cleaned is not None
    item = {
        "external_id": meta.id,
        "account_id": account_id,
        "mp_id": meta.mp_id,
        "title": detail.title or meta.title or meta.id,
        "url": detail.url or meta.url,
        "published_at": meta.published_at,
        "raw_html_size": cleaned.raw_size if cleaned else 0,
        "clean_text": cleaned.text if usable else "",  # a page of WeChat's is not kept as the article's text
        "content_hash": cleaned.content_hash if usable else None,
        "body_status": body_status,
        "last_error": last_error,
        "slot_run_id": slot_run_id,
        "body_checks": 1,
        "first_seen_at": now,
        "next_body_check_at": next_body_check(now, now) if body_status == store.common.BODY_WAITING else None,
    }
    problem = _problem(meta, item["title"], verdict)
    with connect() as conn:
        if was_waiting:
            filled = store.articles.fill_waiting_body(conn, meta.id, item, next_check=lambda seen: next_body_check(seen, now))
            if filled is None:
                return ArticleResult(Stored.KNOWN)  # another run filled it first
            _record_problem(conn, meta, item["title"], account_id, verdict, missing=cleaned is None)
            return _filled(meta, item["title"], filled, last_error, problem)
        inserted = store.articles.insert_content_item(conn, item)
        if inserted is not None:
            _record_problem(conn, meta, item["title"], account_id, verdict, missing=cleaned is None)
    if inserted is None:
        return ArticleResult(Stored.KNOWN)  # a concurrent run stored it first
    if body_status == store.common.BODY_UNUSABLE:
        log.warning("article %s (%s) has no usable text: %s", meta.id, item["title"], last_error)
    stored = {store.common.BODY_WAITING: Stored.WAITING, store.common.BODY_UNUSABLE: Stored.UNUSABLE}.get(body_status, Stored.NEW)
    return ArticleResult(stored, problem, body_problem=problem is not None)


def _fetch_detail(
    connect: Callable[[], Any], client: WeRSSClient, meta: ArticleRow, account_id: int | None, *, now: datetime,
) -> tuple[dict[str, Any], ArticleRow] | ArticleResult:
    """The detail answer and its row checked, or the result of an article that cannot be fetched or read."""
    try:
        raw = client.article(meta.id)
    except (WeRSSAuthError, WeRSSDeadline):
        raise
    except WeRSSNotFound:
        log.info("article %s (%s) was deleted on WeRSS; skipped", meta.id, meta.title)
        return ArticleResult(Stored.ERROR)
    except WeRSSError as exc:
        log.warning("article %s (%s): detail failed, a later slot retries: %s", meta.id, meta.title, exc)
        return ArticleResult(Stored.ERROR, f"article {meta.id}: detail failed, a later slot retries: {exc}")
    try:  # the detail row must be as sound as the list row was; its fields win where present
        detail = article_row({**meta.model_dump(), **{k: v for k, v in raw.items() if v is not None}},
                             mp_id=meta.mp_id, now=now)
    except RowRejected as exc:
        if account_id is not None:
            with connect() as conn:
                store.articles.record_account_skips(conn, account_id, 1, f"detail of {exc}")
        log.warning("article %s: skipping a malformed detail row: %s", meta.id, exc)
        return ArticleResult(Stored.SKIPPED, f"skipped the detail of {exc}")
    return raw, detail


def body_state(cleaned: CleanResult | None, verdict: Verdict | None) -> tuple[str, str | None]:
    """The body status to store, and why: no body yet, one of WeChat's pages (never analysed, never paid
    for), no usable text, or ready."""
    if cleaned is None:
        return store.common.BODY_WAITING, "waiting for WeRSS to fetch the body"
    if verdict is not None:
        if verdict.to_come:
            return store.common.BODY_WAITING, f"{verdict.reason}; waiting for the real body"
        return store.common.BODY_UNUSABLE, verdict.reason
    if not cleaned.usable:
        return store.common.BODY_UNUSABLE, cleaned.reason or "no usable text"
    return store.common.BODY_READY, cleaned.reason


def _filled(meta: ArticleRow, title: str, filled: dict[str, Any], last_error: str | None,
            problem: str | None) -> ArticleResult:
    """The result of checking a waiting article's body again."""
    if filled["body_status"] == store.common.BODY_WAITING:
        log.info("article %s (%s): still no body after %d checks (%s); next check %s", meta.id,
                 title, filled["body_checks"], last_error, filled["next_body_check_at"])
        return ArticleResult(Stored.WAITING, problem, body_problem=problem is not None)
    if filled["body_status"] == store.common.BODY_READY:
        log.info("article %s (%s): body arrived, now analysable", meta.id, title)
        return ArticleResult(Stored.NEW, problem, body_problem=problem is not None)
    return ArticleResult(Stored.UNUSABLE, problem, body_problem=problem is not None)


def read_body(raw: dict[str, Any]) -> tuple[CleanResult | None, Verdict | None]:
    """The body of a detail answer, cleaned: of WeRSS's two shapes (``content_html``, then ``content``), the
    first that is the article; when neither is, the first one with its verdict (a verification page, a cut
    body, a deleted article's page). (None, None) when WeRSS has no body yet."""
    description = raw.get("description")
    description = description if isinstance(description, str) else None
    first: tuple[CleanResult, Verdict] | None = None
    for html in (raw.get("content_html"), raw.get("content")):
        if not isinstance(html, str) or is_missing_body(html):
            continue
        cleaned = clean_html(html)
        verdict = body_check.check(html, cleaned.text, images=cleaned.images, description=description)
        if verdict is None:
            return cleaned, None
        first = first or (cleaned, verdict)
    return first if first is not None else (None, None)


def _problem(meta: ArticleRow, title: str, verdict: Verdict | None) -> str | None:
    """The slot's warning for one of WeChat's pages (or a cut body) found instead of the article."""
    return None if verdict is None else f"article {meta.id} ({title[:60]}): {verdict.reason}"


def _record_problem(conn: Any, meta: ArticleRow, title: str, account_id: int | None, verdict: Verdict | None, *,
                    missing: bool) -> None:
    """Count a check that found no body, or one of WeChat's pages instead of it, on the account."""
    if verdict is not None:
        log.warning("article %s (%s): %s", meta.id, title, verdict.reason)
    if account_id is None:
        return
    if missing:
        store.articles.record_body_missing(conn, account_id)
    elif verdict is not None:
        store.articles.record_body_problem(conn, account_id, verdict.kind, verdict.reason)
