"""``build_daily_report``, ``push_daily_report`` and ``catch_up_daily_report``: the day's report, built from what
was done (include/radar/report/digest.py) and always pushed at the daily slot, once per channel, even when everything
before failed; a daily slot that never ran is made up for by the next day's first run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from include.radar import store
from include.radar.market import outcomes
from include.radar.pushes import briefs, decide, push
from include.radar.pushes.message import Block, Message
from include.radar.report import digest
from include.radar.steps.runtime import Runtime, step, step_deadline

log = logging.getLogger(__name__)


REPORT_STEPS = ("build_daily_report", "push_daily_report", "weekly_summary", "track_record")


def _upstream_errors(rt: Runtime, slot: dict[str, Any]) -> list[str]:
    """The errors of this slot's steps before the report (not the report's own earlier tries)."""
    with rt.connect() as conn:
        row = store.slot_runs.get_slot_run(conn, slot["slot_run_id"])
    errors = (row["step_errors"] or {}) if row else {}
    return [f"{slot['slot']} {k}: {v}" for k, v in sorted(errors.items()) if k not in REPORT_STEPS]


@step("build_daily_report")
def build_daily_report(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    return digest.build_report(
        rt.asking(slot["slot_run_id"], step_deadline(slot, "build_daily_report", rt.clock)),
        day=date.fromisoformat(slot["run_date"]), analysis_url=lambda i: rt.canonical_url(f"/analysis/{i}"),
        upstream_errors=_upstream_errors(rt, slot),
    )


@step("push_daily_report")
def push_daily_report(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    """Push the /daily/{date} link whatever happened before; the stats come from the database."""
    if not slot["is_daily"]:  # reached only when the branch itself failed in a daytime slot
        return {"reason": "not the daily slot"}
    rt.sweep_pushes(slot)
    should_push, reason = decide.daily_push_plan(slot)
    with rt.connect() as conn:
        report = store.reports.get_daily_report(conn, date.fromisoformat(slot["run_date"]))
        store.slot_runs.set_slot_decision(conn, slot["slot_run_id"], "daily_push" if should_push else "silent",
                                {"reason": reason, "report_status": report["status"] if report else None})
    if not should_push:
        log.info("daily report %s: not pushed: %s", slot["run_date"], reason)
        return {"reason": reason}
    forced = slot["push_mode"] == "force"
    return _push_daily(rt, date.fromisoformat(slot["run_date"]), slot, late=slot["late"],
                       nonce=(slot["dag_run_id"] or "") if forced else "")


def _push_daily(rt: Runtime, day: date, slot: dict[str, Any], *, late: bool, nonce: str = "") -> dict[str, Any]:
    """Send the daily message of ``day`` through the notification log (its msg_uuid does not depend on which
    run sends it, so a catch-up and the real 22:00 can never both deliver)."""
    with rt.connect() as conn:
        report = _report_to_push(conn, day, slot)
    stats = report["stats"] or _stats_from_database(rt, day)
    path = f"/daily/{day.isoformat()}"
    lines = [f"分析 {stats.get('analysed', 0)} 篇，机会 {stats.get('opportunities', 0)} 条，失败 {stats.get('failed', 0)} 篇"
             + (f"，待分析 {stats['pending']} 篇" if stats.get("pending") else "")]
    if stats.get("budget_deferred"):
        lines.append(f"今日 LLM 预算用尽，{stats['budget_deferred']} 篇顺延到次日分析")
    lines += decide.coverage_line(stats)
    glance = _glance(rt, day, report["digest_json"])
    lines += glance.failures if glance else []
    message = Message(
        title=decide.daily_title(day, stats.get("opportunities", 0), stats.get("max_score"), late=late),
        lines=lines if glance else lines + decide.top_lines(report["digest_json"]), link=rt.page_url(path),
        blocks=glance.blocks if glance else (),
        notes=(*(glance.record if glance else ()), *decide.daily_notes(
            built=report["status"] != store.common.REPORT_FAILED, partial=report["status"] == store.common.REPORT_PARTIAL,
            digest_json=report["digest_json"])),
        link_label="查看日报",
    )
    with rt.connect() as conn:
        before = store.track.sent_daily_pushes(conn, day)
    delivery = push.deliver(rt.connect, rt.channels(), message, push.Occasion(
        day, rt.settings.daily_slot, "daily", rt.canonical_url(path), slot["slot_run_id"], nonce=nonce))
    with rt.connect() as conn:  # which picks this push showed: the track record dates each at its first push
        store.track.link_daily_push_picks(conn, day, before, decide.top_analysis_ids(report["digest_json"]))
    if delivery.failed:
        raise push.PushFailed(f"daily push failed for {', '.join(delivery.failed)}; a retry resends only to those")
    # the Asset event (seam/assets.py): only when this try reached a channel, so a rerun that pushes nothing
    # gives a consumer nothing
    report_event = {"day": day.isoformat(), "link": rt.canonical_url(path), "late": late,
                    **{k: stats.get(k, 0) for k in ("analysed", "opportunities", "failed")},
                    "max_score": stats.get("max_score")}
    return {**delivery.as_xcom(), "asset_events": [["daily-report", report_event]] if delivery.sent else []}


@dataclass(frozen=True)
class Glance:
    """What the 22:00 push says of the day beyond its counts (briefs.py)."""

    blocks: tuple[Block, ...]  # the day's top opportunities
    failures: list[str]  # the articles whose analysis failed
    record: list[str]  # the track record's hit rate, when the record page concludes one


def _glance(rt: Runtime, day: date, digest_json: Any) -> Glance | None:
    """The day's top opportunities (the report's picks first, up to briefs.MAX_DAY_ITEMS), its failed articles
    and the track record's line; None when they cannot be had (the push goes out with the report's picks)."""
    threshold = rt.settings.push_score_threshold
    try:
        with rt.connect() as conn:
            facts = digest.gather(conn, day, threshold, rt.settings.deepseek_currency, now=rt.clock.now())
            groups = store.track.summary_groups(conn, store.track.RecordFilters(), briefs.RECORD_HORIZON)
    except Exception:  # whatever broke the report must not also stop its push
        log.exception("the day's top opportunities could not be gathered for the daily push; pushing the report's")
        return None
    overall = next((g for g in groups if g["dim"] == "all"), {})
    items = briefs.day_items(digest_json, facts.entries, threshold)
    return Glance(
        tuple(briefs.day_block(e, digest_json, rt.page_url(f"/analysis/{e.lead['id']}")) for e in items),
        briefs.failures_line(facts.failures), briefs.record_line(outcomes.Group.from_sums("all", "全部", overall)))


def _stats_from_database(rt: Runtime, day: date) -> dict[str, Any]:
    """The day's counts when the report step failed; none at all when even they cannot be had (the push
    still goes out: it is the one message the reader gets every day)."""
    try:
        with rt.connect() as conn:
            return digest.gather(conn, day, rt.settings.push_score_threshold, rt.settings.deepseek_currency,
                                 now=rt.clock.now()).stats
    except Exception:  # whatever broke the report must not also stop its push
        log.exception("the day's counts could not be gathered for the daily push; pushing without them")
        return {}


def _report_to_push(conn: Any, day: date, slot: dict[str, Any]) -> dict[str, Any]:
    """The report row the push describes. When this run's build step failed, the row says so (status
    failed, with the error) so the page and the push agree: "generation failed" only when nothing was built.
    """
    report = store.reports.get_daily_report(conn, day)
    run = store.slot_runs.get_slot_run(conn, slot["slot_run_id"]) if slot.get("slot_run_id") else None
    build_error = ((run or {}).get("step_errors") or {}).get("build_daily_report")
    if report is not None and not build_error:
        return report
    return store.reports.mark_report_failed(conn, day, build_error or "the daily report was not built", slot.get("slot_run_id"))


@step("catch_up_daily_report")
def catch_up_daily_report(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    """Make up for a daily slot that never ran (scheduler down across 22:00, DAG unpaused the next morning).

    With catchup off Airflow runs only the latest missed tick, so yesterday's report could be skipped for
    good. The first run of the next day that finds yesterday's slots but no daily slot run builds that
    report and pushes it, marked late. A day with no runs at all (the radar was off) is left alone.
    """
    if slot["run_type"] == "backfill" or slot["explicit"] or slot["push_mode"] == "suppress":
        return {"reason": "not for backfills, redos or suppressed runs"}
    yesterday = date.fromisoformat(slot["run_date"]) - timedelta(days=1)
    with rt.connect() as conn:
        runs = {r["slot"] for r in store.slot_runs.slot_runs_for_day(conn, yesterday)}
        report = store.reports.get_daily_report(conn, yesterday)
    if not runs or rt.settings.daily_slot in runs:
        return {"reason": "nothing to make up"}
    log.warning("the %s slot of %s never ran: building and pushing its report now, marked late",
                rt.settings.daily_slot, yesterday)
    if report is None:
        digest.build_report(rt.asking(None), day=yesterday, analysis_url=lambda i: rt.canonical_url(f"/analysis/{i}"))
    return _push_daily(rt, yesterday, slot, late=True)
