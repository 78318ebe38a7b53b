"""``summarise`` and the branch (``choose_path``): the slot's analyses grouped into events, ranked by the reader's
focus, feedback and track record, and the decision to push, stay silent or build the daily report.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from include.radar import store
from include.radar.pushes import decide, events, ranking
from include.radar.steps.runtime import Runtime, step

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlotView:
    """A slot's analyses as its push sees them: the summary, its events (best first, ``candidates``: those no
    other slot's push linked to) and the same events' analyses by other slot runs."""

    summary: decide.SlotSummary
    entries: list[events.Entry]
    candidates: list[events.Entry]
    others: list[dict[str, Any]]


def slot_view(rt: Runtime, slot: dict[str, Any]) -> SlotView:
    with rt.connect() as conn:
        analyses = store.analyses.slot_analyses(conn, slot["slot_run_id"])
        failed = store.slot_runs.slot_failed_count(conn, slot["slot_run_id"])
        event_ids = sorted({events.event_of(a) for a in analyses})
        others = store.events.event_members(conn, event_ids)
        reported = store.events.pushed_events(conn, event_ids, slot["slot_run_id"])
        weights = ranking.learned(conn, rt.clock.now(), rt.settings.outcome_min_picks)
    analyses = ranking.annotate(analyses, weights)  # the reader's watchlist and feedback order the candidates
    others = [o for o in others if o["slot_run_id"] != slot["slot_run_id"]]
    entries = events.entries([a for a in analyses if not a.get("reused_from_id")])
    return SlotView(decide.summarise(analyses, failed, rt.settings.push_score_threshold, others, reported),
                    entries, [e for e in entries if e.event not in reported], others)


def slot_summary(rt: Runtime, slot: dict[str, Any]) -> decide.SlotSummary:
    return slot_view(rt, slot).summary


@step("summarise")
def summarise(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    error = None
    try:
        grouped = events.group_new(rt.connect, timedelta(hours=rt.settings.event_window_hours))  # before the decision
    except Exception as exc:  # recorded (the slot fails, visibly); the push goes on ungrouped
        log.exception("grouping the new analyses into events failed; this slot decides on them one by one")
        grouped, error = 0, f"{type(exc).__name__}: {exc}"
    with rt.connect() as conn:  # a rerun that groups cleanly clears an earlier run's error
        store.slot_runs.record_step(conn, slot["slot_run_id"], "group_events", error, dag_run_id=slot.get("dag_run_id"))
    summary = slot_summary(rt, slot)
    if grouped:
        log.info("grouped %d new analyses into events; this slot: %d folded into another's entry, %d events "
                 "already reported by an earlier slot", grouped, summary.grouped, summary.already_reported)
    if summary.unverified:
        with rt.connect() as conn:
            store.slot_runs.add_slot_warnings(conn, slot["slot_run_id"], "summarise", [
                f"evidence: {summary.unverified} analyses had unverifiable evidence (not pushed)"])
    if summary.failed >= 2 and summary.failed * 2 > summary.failed + summary.analysed:
        rt.alert("deepseek", f"本时段 {summary.failed + summary.analysed} 篇分析中 {summary.failed} 篇失败", slot)
    log.info("slot %s: %d analysed, %d failed, %d ≥ %d, best %s (analysis %s)", slot["slot"], summary.analysed,
             summary.failed, summary.above_threshold, summary.threshold, summary.max_score, summary.top_analysis_id)
    return summary.as_xcom()


def choose_path(slot: dict[str, Any], summary: dict[str, Any] | None) -> decide.Decision:
    """Pure: needs no database, so the daily path is taken even when everything before failed."""
    return decide.decide(
        decide.SlotSummary(**summary) if summary else None,
        is_daily=slot["is_daily"], run_type=slot["run_type"], push_mode=slot["push_mode"], late=slot["late"],
    )
