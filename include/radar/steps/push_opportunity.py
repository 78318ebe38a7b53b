"""``push_opportunity`` and ``skip_push``: a daytime slot's best new opportunity pushed once per slot and channel,
or the silence recorded with its reason.
"""

from __future__ import annotations

import logging
from datetime import date
from typing import Any

from include.radar import decide, push, store
from include.radar.runtime import Runtime, step
from include.radar.steps.summarise import choose_path, slot_summary

log = logging.getLogger(__name__)


@step("push_opportunity")
def push_opportunity(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    rt.sweep_pushes(slot)
    summary = slot_summary(rt, slot).as_xcom()
    decision = choose_path(slot, summary)
    with rt.connect() as conn:
        store.set_slot_decision(conn, slot["slot_run_id"], "push", {"reason": decision.reason, **decision.detail})
    count = summary["above_threshold"] or 1
    path = f"/analysis/{summary['top_analysis_id']}"
    unverified = not summary.get("top_verified", True)  # only a forced push gets here
    message = push.Message(
        title=decide.opportunity_title(slot["slot"], count, summary["max_score"]),
        lines=[decide.first_sentence(summary["top_summary"]) + ("（证据未核实）" if unverified else ""),
               *decide.watch_line(summary.get("top_watch") or []),
               *decide.sources_line(summary.get("top_sources") or [])],
        link=rt.page_url(path),
    )
    forced = slot["push_mode"] == "force"
    report = push.deliver(
        rt.connect, rt.channels(), message, report_date=date.fromisoformat(slot["run_date"]), slot=slot["slot"],
        push_type="opportunity", target_url=rt.canonical_url(path), slot_run_id=slot["slot_run_id"],
        nonce=(slot["dag_run_id"] or "") if forced else "", identity="",  # one alert per slot, whatever its top
    )
    if report.failed:
        raise push.PushFailed(f"push failed for {', '.join(report.failed)}; a retry resends only to those")
    return report.as_xcom()


@step("skip_push")
def record_skip(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    rt.sweep_pushes(slot)
    decision = choose_path(slot, slot_summary(rt, slot).as_xcom())
    with rt.connect() as conn:
        store.set_slot_decision(conn, slot["slot_run_id"], "silent", {"reason": decision.reason, **decision.detail})
    log.info("slot %s: no push: %s", slot["slot"], decision.reason)
    return {"reason": decision.reason}
