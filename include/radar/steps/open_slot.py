"""``open_slot``: which slot this run stands for, and its run record (exactly once per date and slot).

The run's setup task: a scheduled or backfill run fires on its slot; a manual run may name ``run_date`` and
``slot``, or stands for the latest slot before its trigger. For the daily slot it fixes the run's deadlines.
"""

from __future__ import annotations

import logging
from datetime import date, datetime, timedelta
from typing import Any

from include.radar import store
from include.radar.collect import watch
from include.radar.core.deadlines import NONE, daily_deadlines
from include.radar.core.settings import Settings
from include.radar.core.slots import SHANGHAI, SlotKey, is_late, slot_at, slot_for
from include.radar.operations.connections import ConfigurationError
from include.radar.pushes import decide
from include.radar.steps.runtime import Runtime

log = logging.getLogger(__name__)


def resolve_slot(run_after: datetime, settings: Settings, params: dict[str, Any]) -> tuple[SlotKey, bool]:
    """The slot this run stands for, and whether the operator named it explicitly.

    Scheduled and backfill runs fire exactly on a slot. A manual run may name ``run_date`` and/or ``slot``
    (to redo a slot or rebuild a past day's report); a named slot without a date is its latest occurrence
    at or before the trigger, never a slot still in the future. Without params a manual run stands for the
    latest slot at or before it.
    """
    slot_param = (params.get("slot") or "").strip()
    date_param = (params.get("run_date") or "").strip()
    if slot_param and slot_param not in settings.schedule_slots:
        raise ConfigurationError(f"param slot={slot_param!r} is not one of {list(settings.schedule_slots)}")
    if date_param:
        try:
            day = date.fromisoformat(date_param)
        except ValueError:
            raise ConfigurationError(f"param run_date={date_param!r} is not a YYYY-MM-DD date") from None
        key = slot_at(day, slot_param or settings.daily_slot)
        if key.scheduled_at > run_after:
            raise ConfigurationError(f"param run_date={date_param!r} slot {key.slot} is still in the future")
        return key, True
    if slot_param:
        key = slot_at(run_after.astimezone(SHANGHAI).date(), slot_param)
        if key.scheduled_at > run_after:
            key = slot_at(key.run_date - timedelta(days=1), slot_param)
        return key, True
    return slot_for(run_after, settings.schedule_slots), False


# a manual run's logical date may be this far ahead of its trigger (clocks, a form filled in slowly)
FUTURE_TOLERANCE = timedelta(minutes=1)


def dated_in_the_past(run_type: str, run_after: datetime, triggered_at: datetime | None, settings: Settings) -> bool:
    """Whether a manual run names a past slot by its logical date: a manual backfill of that slot.

    A manual run whose logical date is more than ``late_after_minutes`` before its trigger is the operator
    redoing that slot, not the slot happening now: like a backfill it pushes nothing unless "force publish"
    is chosen. A logical date in the future is refused at once: a slot cannot run before its time (Airflow
    would keep the run queued until then).
    """
    if run_type != "manual" or triggered_at is None:
        return False
    if run_after > triggered_at + FUTURE_TOLERANCE:
        raise ConfigurationError(
            f"the run's logical date {run_after.astimezone(SHANGHAI):%Y-%m-%d %H:%M} (Asia/Shanghai) is in the "
            f"future (triggered at {triggered_at.astimezone(SHANGHAI):%Y-%m-%d %H:%M}): a slot cannot run before its "
            "time; trigger without a logical date to run the latest slot, or pick a past date to redo that slot")
    return triggered_at - run_after > timedelta(minutes=settings.late_after_minutes)


def open_slot(
    rt: Runtime, *, run_after: datetime, run_type: str, dag_id: str | None, dag_run_id: str | None,
    params: dict[str, Any], triggered_at: datetime | None = None,
) -> dict[str, Any]:
    """``run_after``: the moment the run stands for (its logical date, else when it may run);
    ``triggered_at``: when a manual run was triggered (Airflow's ``run_after``), to tell a past-dated one.
    The run opens at ``rt.clock``'s now: late or not, its deadlines and the slots missed before it."""
    try:
        params = decide.apply_action(params, rt.settings.daily_slot)  # the form's one choice, as raw params
    except decide.ActionError as exc:
        raise ConfigurationError(str(exc)) from None
    push_mode = params.get("push_mode") or "auto"
    if push_mode not in decide.PUSH_MODES:
        raise ConfigurationError(f"param push_mode={push_mode!r} is not one of {list(decide.PUSH_MODES)}")
    past_dated = dated_in_the_past(run_type, run_after, triggered_at, rt.settings)
    key, explicit = resolve_slot(run_after, rt.settings, params)
    explicit = explicit or past_dated
    opened_at = rt.clock.now()
    is_daily = key.slot == rt.settings.daily_slot
    with rt.connect() as conn:
        # a retry or a clear keeps the slot's first start; a slot the operator names is asked for now, so an
        # alert it finds hours after its time is stale whenever the slot first ran
        started = None if explicit else store.slot_runs.get_slot_started_at(conn, key.run_date, key.slot)
        late = is_late(key, started or opened_at, rt.settings.late_after_minutes)
        plan = {"push_mode": push_mode, "run_type": run_type, "past_dated": past_dated, "late": late}
        # the daily deadline binds the one run that delivers the day's report on time
        bound = is_daily and decide.daily_push_plan(plan)[0] and not store.pushes.daily_push_sent(conn, key.run_date)
        phases = daily_deadlines(key.scheduled_at, opened_at, rt.settings.daily_push_deadline_minutes) if bound else NONE
        row = store.slot_runs.open_slot_run(conn, key, run_type=run_type, dag_id=dag_id, dag_run_id=dag_run_id,
                                  deadline_at=phases.push, started_at=opened_at)
        missed = watch.missed_slots(conn, rt.settings, key, opened_at) if run_type == "scheduled" and row["created"] else []
    log.info("slot %s %s: run record %s %s (%s run%s)%s", key.run_date, key.slot, row["id"],
             "opened" if row["created"] else f"reopened (attempt {row['attempts']})", run_type, ", late" if late else "",
             f"; the report is due by {phases.push.astimezone(SHANGHAI):%H:%M:%S}" if phases.push else "")
    if missed:
        rt.alert("scheduler_silent", f"应运行但没有运行记录的时段：{'、'.join(missed)}（发现于 {key.label} 开始时）",
                 {"slot_run_id": row["id"], "dag_run_id": dag_run_id})
    return {
        "slot_run_id": row["id"],
        "run_date": key.run_date.isoformat(),
        "slot": key.slot,
        "scheduled_at": key.scheduled_at.isoformat(),
        "is_daily": is_daily,
        "run_type": run_type,
        "late": late,
        "push_mode": push_mode,
        "explicit": explicit,
        "past_dated": past_dated,
        "retry_failed": bool(params.get("retry_failed")),
        "dag_run_id": dag_run_id,
        "deadlines": phases.as_xcom(),
    }
