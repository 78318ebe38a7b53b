"""Watching the radar's dependencies from inside the slot's steps, for the overview and the operator's
alerts: WeRSS's last outcome and auth stalls, accounts gone quiet, planned slots that never ran."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from include.radar import ingest, redact, store
from include.radar.settings import Settings
from include.radar.slots import SlotKey, slots_between

if TYPE_CHECKING:
    from include.radar.pipeline import Runtime

log = logging.getLogger(__name__)

AUTH_STALL_SLOTS = 2
EXPIRED = re.compile(r"401|expired|过期|重新登录|重新扫码|session", re.IGNORECASE)


def werss_outcome(rt: Runtime, slot: dict[str, Any], summary: ingest.IngestSummary, *, failed: str | None) -> None:
    """Keep WeRSS's last outcome for the overview; two slots in a row that ingested nothing while WeRSS
    spoke of an expired session (its own WeChat login, which only a new scan revives) are an auth stall."""
    errors = [e for e in [failed, *summary.errors] if e]
    stalled = summary.new == 0 and any(EXPIRED.search(e) for e in errors)

    def change(state: dict[str, Any]) -> dict[str, Any]:
        if state.get("last_slot_run_id") != slot["slot_run_id"]:  # a rerun of a slot counts once
            state["auth_stalled_slots"] = int(state.get("auth_stalled_slots") or 0) + 1 if stalled else 0
        state.update(last_slot_run_id=slot["slot_run_id"], last_ingest_at=datetime.now(UTC).isoformat(),
                     last_status="failed" if failed else ("partial" if summary.errors else "ok"),
                     last_new=summary.new, last_errors=[redact.scrub(e)[:200] for e in errors[:3]])
        return state

    try:
        with rt.connect() as conn:
            state = store.update_status(conn, "werss:status", change)
    except Exception:  # noqa: BLE001 - a status for the pages; the step's own outcome matters more
        log.warning("WeRSS status could not be recorded", exc_info=True)
        return
    if int(state.get("auth_stalled_slots") or 0) >= AUTH_STALL_SLOTS:
        rt.alert("werss_auth", f"连续 {state['auth_stalled_slots']} 个时段没有抓到新文章，WeRSS 提示会话过期："
                 f"{errors[0][:200]}", slot)


SILENT_FACTOR = 3


def silent_accounts(rt: Runtime, slot: dict[str, Any], at: datetime) -> None:
    """Accounts quiet for more than three times their usual interval between articles: alert, listing them."""
    try:
        with rt.connect() as conn:
            silent = store.silent_accounts(conn, at, SILENT_FACTOR)
    except Exception:  # noqa: BLE001 - a watcher: its failure must not fail the ingest it follows
        log.warning("quiet accounts could not be checked", exc_info=True)
        return
    if silent:
        names = "、".join(f"{a['name'] or a['mp_id']}（已 {_span(at - a['last_article_at'])}无新文，通常每 "
                         f"{_span(a['cadence'])}一篇）" for a in silent[:8])
        rt.alert("werss_stale", f"{len(silent)} 个公众号长时间没有新文章：{names}", slot)


def _span(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours / 24:.1f} 天" if hours >= 48 else f"{hours:.0f} 小时"


SILENCE_MINUTES = 30


def missed_slots(conn: Any, settings: Settings, key: SlotKey, now: datetime) -> list[str]:
    """The planned slots since the last slot that has a run record (within a day), due more than 30 minutes
    ago, that never got one: each missed slot is reported by the first run after it, once."""
    expected = slots_between(key.scheduled_at - timedelta(days=1), now - timedelta(minutes=SILENCE_MINUTES),
                             settings.schedule_slots)
    pairs = [(k.run_date, k.slot) for k in expected if k.scheduled_at < key.scheduled_at]
    return [f"{d:%m-%d} {s}" for d, s in store.missed_since_last_run(conn, pairs, (key.run_date, key.slot))]
