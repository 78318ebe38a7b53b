"""``ingest``: the slot's window of articles from WeRSS, new ones only, cleaned and stored (include/radar/collect/ingest.py),
and what the watchers make of it (watch.py: WeRSS's outcome and login, quiet accounts, a day collecting nothing).
"""

from __future__ import annotations

import logging
from typing import Any

from include.radar.collect import watch
from include.radar.collect.ingest import IngestSummary, SlotIngest, ingest_slot
from include.radar.collect.werss import WeRSSAuthError, WeRSSError
from include.radar.steps.runtime import Runtime, slot_key, step, step_deadline

log = logging.getLogger(__name__)


@step("ingest")
def ingest(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    client = rt.werss()
    client.deadline = step_deadline(slot, "ingest", rt.clock)
    s = rt.settings
    reads = SlotIngest(slot["slot_run_id"], slot_key(slot), window_days=s.window_days,
                       max_articles=s.max_articles_per_slot, page_size=s.werss_page_size, max_pages=s.werss_max_pages)
    summary = IngestSummary(slot=slot["slot"])
    try:
        ingest_slot(rt.connect, client, reads, summary)
    except WeRSSAuthError as exc:  # a refused login, or a 401 that a fresh login did not cure
        watch.werss_outcome(rt, slot, summary, failed=str(exc))
        rt.alert("werss_auth", f"WeRSS 拒绝登录或授权：{exc}", slot)
        raise
    except WeRSSError as exc:
        watch.werss_outcome(rt, slot, summary, failed=str(exc))
        raise
    watch.werss_outcome(rt, slot, summary, failed=None)
    watch.wechat_login(rt, slot, client)
    watch.silent_accounts(rt, slot, slot_key(slot).scheduled_at)
    watch.collecting(rt, slot, slot_key(slot), rt.clock.now())
    return summary.as_xcom()
