"""``select_articles``: the articles this slot analyses, split into the batches ``analyse`` is mapped over.

First what a changed profile gives back, then pending articles and earlier failures under the attempt limit,
oldest first, within the slot's cap; the reader's rules exclude some before anything is paid; the day's budget
and the daily deadline may leave the rest for later slots.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import Any

from include.radar import analyst, batches, focus, spending, store
from include.radar.runtime import Runtime, slot_key, step, step_deadline
from include.radar.settings import Settings
from include.radar.slots import SlotKey, slot_for

log = logging.getLogger(__name__)


def own_articles(key: SlotKey, settings: Settings) -> tuple[datetime, datetime]:
    """(start, end] of the publication times a backfill or a redo of ``key`` analyses: after the planned
    slot before it, up to its own time. Each article has exactly one such slot, so backfill runs going at
    once, or out of order, never take each other's articles; older ones wait for the next live slot."""
    previous = slot_for(key.scheduled_at - timedelta(seconds=1), settings.schedule_slots)
    return previous.scheduled_at, key.scheduled_at


@step("select_articles")
def articles_to_analyse(rt: Runtime, slot: dict[str, Any]) -> list[dict[str, Any]]:
    """Pending articles and earlier failures under the attempt limit, oldest first, within the slot's cap."""
    with rt.connect() as conn:
        expired = store.expire_leases(conn)
        if expired:
            log.warning("%d analyses whose worker was lost (lease expired) are failed, the attempt counted", expired)
        if slot.get("retry_failed"):
            log.info("slot %s: retry_failed requested: %d failed articles get fresh attempts",
                     slot["slot"], store.reset_failed(conn))
        profile = focus.from_row(store.get_profile(conn))
        reopened = store.recheck_excluded(conn, slot_key(slot).scheduled_at - timedelta(hours=focus.RECHECK_HOURS),
                                          profile.exclusion, focus.MATCH_CHARS)
        if reopened:
            log.info("slot %s: the reader's changed rules give back %d excluded articles", slot["slot"], reopened)
        # a backfill or a redo takes only its own slot's articles, whatever order its runs go in
        own_only = slot["run_type"] == "backfill" or slot["explicit"]
        rows = store.items_to_analyse(
            conn, max_attempts=rt.settings.max_analysis_attempts, limit=rt.settings.max_articles_per_slot,
            published_between=own_articles(slot_key(slot), rt.settings) if own_only else None,
        )
        rows = _without_excluded(conn, slot, profile, rows)
        spent = spending.budget_reached(conn, rt.settings)
        budget_note = None
        if rows and spent is not None:
            store.defer_for_budget(conn, slot["slot_run_id"], [r["id"] for r in rows], spending.today())
            store.add_slot_warnings(conn, slot["slot_run_id"], "select_articles", [
                f"budget: {len(rows)} analyses left for the next day (the day's LLM budget is reached)"])
            budget_note = (f"今日已花费 {rt.settings.price_table().money(spent)}，达到预算 "
                      f"{rt.settings.price_table().money(rt.settings.daily_budget)}；{len(rows)} 篇顺延到次日")
            log.warning("slot %s: %s", slot["slot"], budget_note)
            rows = []
        left = step_deadline(slot, "select_articles")
        if rows and left is not None and left - time.monotonic() < analyst.MIN_CALL_SECONDS:
            store.add_deferred(conn, slot["slot_run_id"], len(rows))
            store.add_slot_warnings(conn, slot["slot_run_id"], "select_articles", [
                f"deadline: {len(rows)} analyses left for later slots (the daily report is due first)"])
            log.warning("slot %s: the analysis deadline has passed; %d articles wait for later slots",
                        slot["slot"], len(rows))
            return []
    if budget_note:
        rt.alert("budget", budget_note, slot)
    retries = sum(1 for r in rows if r["analyzed_status"] == store.FAILED)
    log.info("slot %s: %d articles to analyse (%d retries of earlier failures)", slot["slot"], len(rows), retries)
    return [{"item_id": r["id"], "title": r["title"][:80]} for r in rows]


def _without_excluded(conn: Any, slot: dict[str, Any], profile: focus.Profile,
                      rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows the reader's rules (focus.py) let through; the others are marked excluded and counted on the
    slot, before anything is paid for them."""
    if not rows or not profile.rules:
        return rows
    texts = store.texts_of(conn, [r["id"] for r in rows], focus.MATCH_CHARS)
    reasons = {}
    for r in rows:
        text = texts.get(r["id"])
        reason = profile.exclusion(text["title"], text["text"]) if text else None
        if reason:
            reasons[r["id"]] = reason
    if reasons:
        marked = store.exclude_items(conn, slot["slot_run_id"], reasons)
        log.info("slot %s: %d articles excluded by the reader's rules, not sent to the LLM", slot["slot"], marked)
    return [r for r in rows if r["id"] not in reasons]


def analysis_batches(rt: Runtime, slot: dict[str, Any]) -> list[dict[str, Any]]:
    """The articles to analyse, split into the batches the mapped analyse task runs (include/radar/batches.py)."""
    return batches.plan(articles_to_analyse(rt, slot), rt.settings.analysis_tasks)
