"""``push_opportunity`` and ``skip_push``: a daytime slot's new opportunities pushed once per slot and channel
(linking its best), or the silence recorded with its reason.
"""

from __future__ import annotations

import logging
from datetime import date
from typing import Any

from include.radar import store
from include.radar.pushes import briefs, decide, push
from include.radar.pushes.message import Message
from include.radar.steps.runtime import Runtime, step
from include.radar.steps.summarise import SlotView, choose_path, slot_summary, slot_view

log = logging.getLogger(__name__)


@step("push_opportunity")
def push_opportunity(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    rt.sweep_pushes(slot)
    view = slot_view(rt, slot)
    summary = view.summary.as_xcom()
    decision = choose_path(slot, summary)
    with rt.connect() as conn:
        store.slot_runs.set_slot_decision(conn, slot["slot_run_id"], "push", {"reason": decision.reason, **decision.detail})
    path = f"/analysis/{summary['top_analysis_id']}"
    message = _message(rt, slot, view, path)
    forced = slot["push_mode"] == "force"
    report = push.deliver(rt.connect, rt.channels(), message, push.Occasion(
        date.fromisoformat(slot["run_date"]), slot["slot"], "opportunity", rt.canonical_url(path), slot["slot_run_id"],
        nonce=(slot["dag_run_id"] or "") if forced else "", identity="",  # one alert per slot, whatever its top
    ))
    if report.failed:
        raise push.PushFailed(f"push failed for {', '.join(report.failed)}; a retry resends only to those")
    return report.as_xcom()


def _message(rt: Runtime, slot: dict[str, Any], view: SlotView, path: str) -> Message:
    """The slot's opportunities, a block each (briefs.py), best first, the reader's watchlist hits before;
    past briefs.MAX_ITEMS, 「另有 N 条」 with the day's page. The link is the top analysis's."""
    summary = view.summary
    items = briefs.slot_items(view.candidates, summary.threshold, summary.top_analysis_id, view.entries)
    day = date.fromisoformat(slot["run_date"])
    links = {e.lead["id"]: rt.page_url(f"/analysis/{e.lead['id']}") for e in items[: briefs.MAX_ITEMS]}
    more = len(items) - briefs.MAX_ITEMS
    best = max((e.lead["score"] for e in items), default=summary.max_score or 0)  # the rank may lead with less
    return Message(
        title=decide.opportunity_title(slot["slot"], summary.above_threshold or 1, best),
        lines=[], link=links.get(summary.top_analysis_id) or rt.page_url(path),
        blocks=tuple(briefs.opportunity_block(e, briefs.event_sources(e, view.others), day, links[e.lead["id"]])
                     for e in items[: briefs.MAX_ITEMS]),
        more=max(more, 0), more_link=rt.page_url(f"/daily/{day.isoformat()}"),
        link_label="查看分析", shown=tuple(e.lead["id"] for e in items[: briefs.MAX_ITEMS]),
    )


@step("skip_push")
def skip_push(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    rt.sweep_pushes(slot)
    decision = choose_path(slot, slot_summary(rt, slot).as_xcom())
    with rt.connect() as conn:
        store.slot_runs.set_slot_decision(conn, slot["slot_run_id"], "silent", {"reason": decision.reason, **decision.detail})
    log.info("slot %s: no push: %s", slot["slot"], decision.reason)
    return {"reason": decision.reason}
