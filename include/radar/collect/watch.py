"""Watching the radar's dependencies from inside the slot's steps, for the overview and the operator's
alerts: WeRSS's last outcome and auth stalls, accounts gone quiet, planned slots that never ran."""

from __future__ import annotations

import logging
import re
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from include.radar import store
from include.radar.collect import coverage
from include.radar.collect.coverage import SILENT_FACTOR, WECHAT_STATUS, Coverage
from include.radar.collect.werss import judged
from include.radar.core import redact
from include.radar.core.clock import Clock
from include.radar.core.settings import Settings
from include.radar.core.slots import SlotKey, local_day_bounds, slots_between, to_local
from include.radar.store.articles import last_collection

if TYPE_CHECKING:
    from include.radar.collect import ingest
    from include.radar.collect.werss import WeRSSClient

log = logging.getLogger(__name__)


class StepRuntime(Protocol):
    """What the watchers use of the step's runtime (runtime.Runtime has it; this room does not import it:
    the runtime is above the rooms it builds on)."""

    settings: Settings
    clock: Clock

    def connect(self) -> Any: ...

    def alert(self, cause: str, detail: str, slot: dict[str, Any] | None = None, *,
              day_of: datetime | None = None) -> str: ...


AUTH_STALL_SLOTS = 2
EXPIRED = re.compile(r"401|expired|过期|重新登录|重新扫码|session", re.IGNORECASE)


def werss_outcome(rt: StepRuntime, slot: dict[str, Any], summary: ingest.IngestSummary, *, failed: str | None) -> None:
    """Keep WeRSS's last outcome for the overview; two slots in a row that ingested nothing while WeRSS
    spoke of an expired session (its own WeChat login, which only a new scan revives) are an auth stall."""
    errors = [e for e in [failed, *summary.errors] if e]
    stalled = summary.new == 0 and any(EXPIRED.search(e) for e in errors)

    def change(state: dict[str, Any]) -> dict[str, Any]:
        if state.get("last_slot_run_id") != slot["slot_run_id"]:  # a rerun of a slot counts once
            state["auth_stalled_slots"] = int(state.get("auth_stalled_slots") or 0) + 1 if stalled else 0
        state.update(last_slot_run_id=slot["slot_run_id"], last_ingest_at=rt.clock.now().isoformat(),
                     last_status="failed" if failed else ("partial" if summary.errors else "ok"),
                     last_new=summary.new, last_errors=[redact.scrub(e)[:200] for e in errors[:3]])
        return state

    try:
        with rt.connect() as conn:
            state = store.operations.update_status(conn, "werss:status", change)
    except Exception:  # a status for the pages; the step's own outcome matters more
        log.warning("WeRSS status could not be recorded", exc_info=True)
        return
    if int(state.get("auth_stalled_slots") or 0) >= AUTH_STALL_SLOTS:
        rt.alert("werss_auth", f"连续 {state['auth_stalled_slots']} 个时段没有抓到新文章，WeRSS 提示会话过期："
                 f"{errors[0][:200]}", slot)


DELIVERED = ("sent", "already", "pending")


def wechat_login(rt: StepRuntime, slot: dict[str, Any], client: WeRSSClient) -> None:
    """WeRSS's own WeChat login, when WeRSS reports it (``sys/info``): kept for the overview; the operator is
    warned once a day while it lapses within ``wechat_login_warn_hours``, and alerted once when it has lapsed
    (once per lapse: the next lapse, after a new scan, alerts again). A WeRSS that does not answer leaves the
    last state as it was; one that does not report its login is recorded as such."""
    now = rt.clock.now()
    try:
        login = client.wechat_login()
        if login.scanned is None:  # sys/info does not say (v1.4.9 after a restart): WeRSS's collections do
            with rt.connect() as conn:
                login = judged(login, last_collection(conn))
    except Exception as exc:  # a watcher: its failure must not fail the ingest it follows
        log.warning("WeRSS's WeChat login could not be read: %s", redact.scrub(str(exc))[:300])
        return
    expired = login.expired(now)
    lapse = login.expires_at.isoformat() if login.expires_at else "logged out"

    def change(state: dict[str, Any]) -> dict[str, Any]:
        if login.reported and not expired:
            state.pop("expired_alerted", None)  # logged in again: the next lapse alerts again
        state.update(reported=login.reported, logged_in=login.logged_in, expired=expired, scanned=login.scanned,
                     expires_at=login.expires_at.isoformat() if login.expires_at else None,
                     checked_at=now.isoformat(), note=login.note[:200])
        return state

    try:
        with rt.connect() as conn:
            state = store.operations.update_status(conn, WECHAT_STATUS, change)
    except Exception:  # a status for the pages
        log.warning("WeRSS's WeChat login could not be recorded", exc_info=True)
        return
    if not login.reported:
        log.info("WeRSS does not report its WeChat login: %s", login.note)
        return
    if not login.scanned:
        rt.alert("wechat_not_scanned", "WeRSS 还没有用微信登录采集过（从未扫码，或扫码后还没有任何采集运行）：没有一个"
                 "公众号被采集过，雷达读不到新文章", slot)
        return
    if expired:
        if state.get("expired_alerted") == lapse:
            return
        since = f"（{to_local(login.expires_at):%m-%d %H:%M} 过期）" if login.expires_at else ""
        outcome = rt.alert("wechat_login_expired", f"WeRSS 报告其微信公众平台登录已失效{since}：WeRSS 已停止采集新文章，"
                           "在重新扫码登录之前，公众号的新文章不会进入雷达", slot)
        if outcome in DELIVERED:  # a failed delivery is retried by the next slot
            with rt.connect() as conn:
                store.operations.update_status(conn, WECHAT_STATUS, lambda s: {**s, "expired_alerted": lapse})
        return
    left = login.expires_at - now if login.expires_at else None
    warn = timedelta(hours=rt.settings.wechat_login_warn_hours)
    if left is not None and left <= warn:
        rt.alert("wechat_login_expiring", f"WeRSS 的微信公众平台登录将于 {to_local(login.expires_at):%m-%d %H:%M} "
                 f"过期（还剩 {_span(left)}）：过期后 WeRSS 会静默停止采集", slot)


def silent_accounts(rt: StepRuntime, slot: dict[str, Any], at: datetime) -> None:
    """Accounts quiet for more than three times their usual interval between articles: alert, listing them."""
    try:
        with rt.connect() as conn:
            silent = store.articles.silent_accounts(conn, at, SILENT_FACTOR)
    except Exception:  # a watcher: its failure must not fail the ingest it follows
        log.warning("quiet accounts could not be checked", exc_info=True)
        return
    if silent:
        names = "、".join(f"{a['name'] or a['mp_id']}（已 {_span(at - a['last_article_at'])}无新文，通常每 "
                         f"{_span(a['cadence'])}一篇）" for a in silent[:8])
        rt.alert("werss_stale", f"{len(silent)} 个公众号长时间没有新文章：{names}", slot)


def _span(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    if hours < 1:
        return f"{max(delta.total_seconds() // 60, 0):.0f} 分钟"
    return f"{hours / 24:.1f} 天" if hours >= 48 else f"{hours:.0f} 小时"


def coverage_of(conn: Any, day: date, now: datetime) -> Coverage:
    """The coverage of ``day`` as of ``now`` (or of the day's end, for a day gone by), by coverage.py's rules."""
    start, end = local_day_bounds(day)
    at = min(now, end)
    accounts = store.articles.accounts_of_day(conn, day)
    listed = bool(accounts)
    if not listed:
        accounts = store.articles.accounts_listed_between(conn, day - timedelta(days=coverage.FALLBACK_DAYS),
                                                 day - timedelta(days=1))
    found = {r["id"]: r for r in store.articles.collection_evidence(conn, [a["id"] for a in accounts], at)}
    rows = [{**found.get(a["id"], {}), **a} for a in accounts]
    login = coverage.login_state(store.operations.status(conn, WECHAT_STATUS), start, at)
    return coverage.summarise(rows, at=at, login=login, listed=listed)


def collecting(rt: StepRuntime, slot: dict[str, Any], key: SlotKey, at: datetime) -> None:
    """When no account of the day shows that WeRSS is collecting it, and no WeChat login problem (alerted on its
    own) explains it, the operator hears of it once a day: the report would otherwise be made of nothing. A slot of a day gone by (a backfill,
    a late rerun) says nothing: the evidence is of today."""
    if at - key.scheduled_at > coverage.SYNC_FRESH:
        return
    try:
        with rt.connect() as conn:
            found = coverage_of(conn, key.run_date, at)
    except Exception:  # a watcher: its failure must not fail the ingest it follows
        log.warning("the day's collection could not be checked", exc_info=True)
        return
    if found.nothing_collected:
        rt.alert("werss_not_collecting", found.line(), slot)


SILENCE_MINUTES = 30


def missed_slots(conn: Any, settings: Settings, key: SlotKey, now: datetime) -> list[str]:
    """The planned slots since the last slot that has a run record (within a day), due more than 30 minutes
    ago, that never got one: each missed slot is reported by the first run after it, once."""
    expected = slots_between(key.scheduled_at - timedelta(days=1), now - timedelta(minutes=SILENCE_MINUTES),
                             settings.schedule_slots)
    pairs = [(k.run_date, k.slot) for k in expected if k.scheduled_at < key.scheduled_at]
    return [f"{d:%m-%d} {s}" for d, s in store.operations.missed_since_last_run(conn, pairs, (key.run_date, key.slot))]
