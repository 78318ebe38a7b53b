"""View models of slot runs and pushes (the overview's cards, the daily page's slots, the health panel)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from include.radar.core.slots import slot_at
from include.radar.core.text import span
from include.radar.web.views.common import (
    PUSH_FAILED,
    PUSH_LABELS,
    PUSH_NONE,
    PUSH_PARTIAL,
    PUSH_PENDING,
    PUSH_SENT,
    PUSH_UNKNOWN,
    PUSH_UNKNOWN_NOTICE,
    SLOT_DONE,
    SLOT_FAILED,
    SLOT_LABELS,
    SLOT_LATE,
    SLOT_PENDING,
    SLOT_RUNNING,
    Links,
    PageContext,
    Row,
    error_text,
    local_time,
    money,
)

# slot_run.status and notification_log.status as the pages name them
_SLOT_STATUS = {0: SLOT_RUNNING, 1: SLOT_DONE, 2: SLOT_FAILED}
_NOTE_STATUS = {0: PUSH_PENDING, 1: PUSH_SENT, 2: PUSH_FAILED, 3: PUSH_UNKNOWN}


@dataclass(frozen=True)
class StepLink:
    """A failed step of a slot (``ingest``, ``analyse:42``) and the Airflow log page of its task."""

    step: str
    url: str | None


@dataclass(frozen=True)
class SlotView:
    slot: str
    state: str
    label: str
    dag_run_url: str | None = None
    new_count: int = 0
    analysed_count: int = 0
    failed_count: int = 0
    opportunity_count: int = 0
    attempts: int = 0
    started: str = ""
    finished: str = ""
    error: str | None = None
    skipped_count: int = 0  # malformed WeRSS rows skipped
    deferred_count: int = 0  # analyses left to later slots (a deadline came first)
    excluded_count: int = 0  # articles the reader's rules kept from the LLM (focus.py)
    body_problems: int = 0  # bodies that were WeChat's verification page, cut, or a deleted article's page
    warnings: list[str] = field(default_factory=list)  # handled problems: skipped rows, failed accounts, deadlines
    error_log: list[str] = field(default_factory=list)  # every step error of every run, fixed since or not
    run_date: date | None = None
    budget_deferred: int = 0  # articles the daily budget held back to the next day
    duration: str = ""  # first start to last finish ("已运行 …" while running)
    cost: str | None = None  # what the slot's LLM calls cost (None: not looked up)
    failed_steps: list[StepLink] = field(default_factory=list)  # outstanding step errors, linked to their logs
    dag_url: str | None = None  # a slot that should have run and did not: the DAG's page in Airflow

    @property
    def has_run(self) -> bool:
        return self.state not in (SLOT_PENDING, SLOT_LATE)


@dataclass(frozen=True)
class DayRuns:
    """A day's slots as a page reads them: the runs (store.slot_runs.slot_runs_for_day), the daily push's rows
    (store.reports.daily_notifications), what each run's LLM calls cost (store.operations.slot_spend; None: not looked up)."""

    runs: Sequence[Row]
    notifications: Sequence[Row] = ()
    spend: Mapping[int, float] | None = None


def slot_views(day: date, day_runs: DayRuns, page: PageContext) -> list[SlotView]:
    """The configured slots of ``day`` (plus any other slot that ran), each with its state.

    A slot without a run row is ``late`` once ``now`` passes its scheduled time plus the grace period,
    otherwise ``pending``; a row is running (0), done (1) or failed (2, with its error).
    """
    settings, links = page.settings, page.links
    by_slot = {r["slot"]: r for r in day_runs.runs}
    views = []
    for slot in sorted(set(settings.schedule_slots) | set(by_slot)):
        run = by_slot.get(slot)
        if run is None:
            due = slot_at(day, slot, page.tz).scheduled_at + timedelta(minutes=settings.late_after_minutes)
            state = SLOT_LATE if page.now > due else SLOT_PENDING
            views.append(missing_slot_view(day, slot, state, links))
            continue
        views.append(slot_view(run, now=page.now, tz=page.tz, links=links, spend=day_runs.spend,
                               currency=settings.deepseek_currency))
    return views


def day_push(day_runs: DayRuns, page: PageContext) -> PushView:
    """The day's daily push; the run of its daily slot (the last configured one) says why nothing was pushed."""
    slots = page.settings.schedule_slots
    daily_run = next((r for r in day_runs.runs if slots and r.get("slot") == max(slots)), None)
    return push_view(day_runs.notifications, page.tz, daily_run)


def missing_slot_view(day: date, slot: str, state: str, links: Links) -> SlotView:
    """A planned slot without a run: pending, or late (then linked to the DAG in Airflow)."""
    return SlotView(slot=slot, state=state, label=SLOT_LABELS[state], run_date=day,
                    dag_url=links.dag() if state == SLOT_LATE else None)


def failed_step_links(run: Row, links: Links) -> list[StepLink]:
    """The outstanding step errors of a run, each linked to its task's page (``analyse:<id>`` → ``analyse``:
    the map index of an article is not stored, and the task page lists them all)."""
    errors = run.get("step_errors")
    steps = sorted(str(k) for k in errors) if isinstance(errors, dict) else []
    return [StepLink(step=error_text(s, 80),
                     url=links.task_log(run.get("dag_id"), run.get("dag_run_id"), s.split(":", 1)[0].strip()))
            for s in steps[:10]]


def run_duration(run: Row, now: datetime) -> str:
    started, finished = run.get("started_at"), run.get("finished_at")
    if started is None:
        return ""
    if finished is not None:
        return span((finished - started).total_seconds()) if finished >= started else ""
    return f"已运行 {span((now - started).total_seconds())}" if now >= started else ""


def slot_view(
    run: Row, *, now: datetime, tz: ZoneInfo, links: Links, spend: Mapping[int, float] | None = None,
    currency: str = "USD",
) -> SlotView:
    """One slot run row as a card."""
    state = _SLOT_STATUS.get(run["status"], SLOT_FAILED)
    cost = None if spend is None else spend.get(run["id"], 0.0)  # no ledger row: nothing was spent
    return SlotView(
        slot=run["slot"],
        state=state,
        label=SLOT_LABELS[state],
        dag_run_url=links.dag_run(run.get("dag_id"), run.get("dag_run_id")),
        new_count=run.get("new_count") or 0,
        analysed_count=run.get("analysed_count") or 0,
        failed_count=run.get("failed_count") or 0,
        opportunity_count=run.get("opportunity_count") or 0,
        attempts=run.get("attempts") or 0,
        started=_clock(run.get("started_at"), run.get("run_date"), tz),
        finished=_clock(run.get("finished_at"), run.get("run_date"), tz),
        error=error_text(run.get("error"), 2000) if state == SLOT_FAILED else None,
        skipped_count=run.get("skipped_count") or 0,
        deferred_count=run.get("deferred_count") or 0,
        excluded_count=run.get("excluded_count") or 0,
        body_problems=run.get("body_problems") or 0,
        warnings=_entries(run.get("warnings"), "message"),
        error_log=_entries(run.get("error_log"), "error"),
        run_date=run.get("run_date"),
        budget_deferred=run.get("budget_deferred") or 0,
        duration=run_duration(run, now),
        cost=money(cost, currency) if cost is not None else None,
        failed_steps=failed_step_links(run, links) if state == SLOT_FAILED else [],
    )


def _clock(moment: datetime | None, day: date | None, tz: ZoneInfo) -> str:
    """A slot's start or end as a time of its own day, with the date when it ran on another (a backfill, a
    redo, a run past midnight)."""
    if moment is None:
        return ""
    same_day = day is not None and moment.astimezone(tz).date() == day
    return local_time(moment, tz, "%H:%M" if same_day else "%m-%d %H:%M")


def _entries(value: Any, key: str, limit: int = 20) -> list[str]:
    """Lines of a slot's jsonb log (warnings, error_log): ``step: text``, scrubbed, newest last."""
    items = value if isinstance(value, list) else []
    lines = [f"{i.get('step') or '?'}: {i.get(key) or ''}" for i in items if isinstance(i, dict)]
    return [error_text(line, 300) for line in lines[-limit:]]


# ------------------------------------------------------------------------------------------------ pushes


@dataclass(frozen=True)
class ChannelPush:
    channel: str
    state: str
    label: str
    attempts: int
    when: str
    error: str | None


@dataclass(frozen=True)
class PushView:
    state: str
    label: str
    channels: list[ChannelPush] = field(default_factory=list)


def push_state(total: int, sent: int, failed: int, unknown: int = 0) -> str:
    """One state for a push that went to several channels: all sent, some failed, all failed, some with
    their delivery unknown (the operator must look), or pending."""
    if total == 0:
        return PUSH_NONE
    if sent == total:
        return PUSH_SENT
    if failed == total:
        return PUSH_FAILED
    if unknown:
        return PUSH_UNKNOWN
    if failed:
        return PUSH_PARTIAL
    return PUSH_PENDING


def silent_label(daily_run: Row | None) -> str | None:
    """Why a day's report was not pushed, when its daily slot chose not to: a backfill, or an operator's redo."""
    if not daily_run or daily_run.get("decision") != "silent":
        return None
    return "补跑不推送" if daily_run.get("run_type") == "backfill" else "重建不推送"


def push_view(rows: Iterable[Row], tz: ZoneInfo, daily_run: Row | None = None) -> PushView:
    """The daily push of a date from its ``notification_log`` rows (one per channel); ``daily_run``: the
    day's daily slot run, to say why nothing was pushed."""
    channels = []
    for r in rows:
        state = _NOTE_STATUS.get(r["status"], PUSH_FAILED)
        channels.append(
            ChannelPush(
                channel=r.get("channel") or "",
                state=state,
                label=PUSH_LABELS[state],
                attempts=r.get("attempts") or 0,
                when=local_time(r.get("sent_at") or r.get("updated_at"), tz, "%m-%d %H:%M"),
                error=((error_text(r.get("error"), 300) or "未知错误") if state == PUSH_FAILED
                       else PUSH_UNKNOWN_NOTICE if state == PUSH_UNKNOWN else None),
            )
        )
    state = push_state(
        len(channels),
        sum(c.state == PUSH_SENT for c in channels),
        sum(c.state == PUSH_FAILED for c in channels),
        sum(c.state == PUSH_UNKNOWN for c in channels),
    )
    label = (silent_label(daily_run) if state == PUSH_NONE else None) or PUSH_LABELS[state]
    return PushView(state=state, label=label, channels=channels)
