"""``close_slot``: the run's teardown: what a late backfill slot changed in its day's report, the claims the
run's killed tasks left, the failures Airflow saw, and the slot's status, counts and alerts.
"""

from __future__ import annotations

import logging
from datetime import date, datetime
from typing import Any

from include.radar import store
from include.radar.pushes import decide
from include.radar.report import digest
from include.radar.steps.analyse import claimer
from include.radar.steps.runtime import Runtime

log = logging.getLogger(__name__)


# a report rebuilt by a late-closing backfill slot gets this long for its digest call (else the database summary)
REBUILD_DIGEST_SECONDS = 120


def _account_for_late_slot(rt: Runtime, slot: dict[str, Any]) -> None:
    """A backfill or redo of a daytime slot that analysed something after its day's report was built (backfill
    runs going at once, or out of order) rebuilds that report, without a push, so it accounts for the slot."""
    if slot["is_daily"] or not (slot["run_type"] == "backfill" or slot["explicit"]):
        return
    day = date.fromisoformat(slot["run_date"])
    with rt.connect() as conn:
        stale = store.reports.report_predates_slot(conn, day, slot["slot_run_id"])
    if not stale:
        return
    log.info("the %s report was built before this %s slot finished: rebuilding it (no push)", day, slot["slot"])
    error = None
    try:
        digest.build_report(rt.asking(slot["slot_run_id"], rt.clock.monotonic() + REBUILD_DIGEST_SECONDS), day=day,
                            analysis_url=lambda i: rt.canonical_url(f"/analysis/{i}"))
    except Exception as exc:  # recorded on the slot (it fails), the close goes on
        log.exception("rebuilding the %s report failed", day)
        error = f"{type(exc).__name__}: {exc}"
    with rt.connect() as conn:  # a clean rebuild clears an earlier run's error
        store.slot_runs.record_step(conn, slot["slot_run_id"], "rebuild_daily_report", error, dag_run_id=slot.get("dag_run_id"))


def close_slot(rt: Runtime, slot: dict[str, Any], failed_tasks: list[str]) -> dict[str, Any]:
    """Write the slot's outcome. Task failures Airflow saw but no step recorded count too. Pushes whose sender
    died are accounted for first (sweep_pushes)."""
    rt.sweep_pushes(slot)
    _account_for_late_slot(rt, slot)
    with rt.connect() as conn:
        # every analyse task of this run has ended: a claim any of its tries still holds was killed mid-call,
        # or its holder is a zombie still renewing it (then it keeps the article until its lease runs out)
        reaped, leased = store.claims.reap_claims(conn, claimer(slot))
        if reaped:
            log.warning("%d analyses of this run ended without finishing (killed or timed out): failed, counted",
                        reaped)
        if leased:
            log.warning("%d claims of this run are still leased (a task killed moments ago, or a zombie still "
                        "calling): left to their lease; a later slot fails them once it runs out", leased)
        recorded = {k.split(":")[0] for k in (store.slot_runs.get_slot_run(conn, slot["slot_run_id"])["step_errors"] or {})}
        for task_id in failed_tasks:
            if task_id not in recorded:  # killed before it could record (timeout, lost worker)
                store.slot_runs.record_step(conn, slot["slot_run_id"], task_id, "failed in Airflow",
                                  dag_run_id=slot.get("dag_run_id"))
        row = store.slot_runs.close_slot_run(conn, slot["slot_run_id"], rt.settings.push_score_threshold)
        store.slot_runs.refresh_slots_done(conn, row["run_date"])
        undelivered = (slot["is_daily"] and decide.daily_push_plan(slot)[0]
                       and not store.pushes.daily_push_sent(conn, date.fromisoformat(slot["run_date"])))
    if undelivered:
        errors = (row["step_errors"] or {})
        why = errors.get("push_daily_report") or errors.get("build_daily_report") or "the push step did not run"
        rt.alert("daily_undelivered", f"{slot['run_date']} 的日报没有送达：{why}", slot,
                 day_of=datetime.fromisoformat(slot["scheduled_at"]))  # the report's day, even after midnight
    outcome = "success" if row["status"] == store.common.SUCCESS else "failed"
    log.info("slot %s %s closed as %s: %d new, %d analysed, %d failed, %d opportunities, %d pushed%s",
             slot["run_date"], slot["slot"], outcome, row["new_count"], row["analysed_count"], row["failed_count"],
             row["opportunity_count"], row["pushed_count"], f"; errors: {row['error']}" if row["error"] else "")
    return {"status": outcome, "error": row["error"]}
