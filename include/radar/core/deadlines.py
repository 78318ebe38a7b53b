"""When each step of a slot must be done. Pure: no I/O, no clock of its own.

The daily slot promises its report by ``daily_push_deadline_minutes`` after its time (the report is pushed
every day), so that time is cut into phases and each step upstream of the push stops at the end of its
phase with what it has (ingest 30 %, analyses 65 %, the digest call 85 %, the push 100 %); a step failing
after its phase is not retried. The phases bind only the run that delivers the day's report; backfills,
redos and reruns after the push keep the steps' own limits. A run that starts late gets the full budget
from its own start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

PHASES = {"ingest": 0.30, "analysis": 0.65, "report": 0.85, "push": 1.0}
# which phase bounds each step (steps not listed have no phase: catch-up, close)
STEP_PHASE = {
    "ingest": "ingest",
    "select_articles": "analysis",
    "analyse": "analysis",
    "summarise": "report",
    "build_daily_report": "report",
    "push_daily_report": "push",
}
# steps whose failure is not retried once their phase is over (or would be over by the retry)
NO_RETRY_AFTER_PHASE = frozenset({"ingest", "select_articles", "analyse", "summarise", "build_daily_report"})
# Airflow waits this long before a retry (the DAG's retry_delay)
RETRY_DELAY = timedelta(minutes=1)


@dataclass(frozen=True)
class SlotDeadlines:
    """The end of each phase (aware datetimes), or an empty set of phases when the run has none."""

    phases: dict[str, datetime]

    @property
    def push(self) -> datetime | None:
        return self.phases.get("push")

    def for_step(self, step: str) -> datetime | None:
        phase = STEP_PHASE.get(step.split(":", 1)[0])
        return self.phases.get(phase) if phase else None

    def as_xcom(self) -> dict[str, str]:
        return {name: at.isoformat() for name, at in self.phases.items()}

    @classmethod
    def from_xcom(cls, data: dict[str, Any] | None) -> SlotDeadlines:
        return cls({name: datetime.fromisoformat(at) for name, at in (data or {}).items()})


NONE = SlotDeadlines({})


def daily_deadlines(scheduled_at: datetime, opened_at: datetime, minutes: float) -> SlotDeadlines:
    """The phases of a daily run opened at ``opened_at`` for the slot scheduled at ``scheduled_at``.

    On time (opened within half the budget of the slot's time) the push is due ``minutes`` after the
    scheduled time; a late run gets ``minutes`` from its own start. The phases share what is left.
    """
    budget = timedelta(minutes=minutes)
    push = scheduled_at + budget if opened_at < scheduled_at + budget / 2 else opened_at + budget
    start = min(opened_at, push)
    window = push - start
    return SlotDeadlines({name: start + window * share for name, share in PHASES.items()})


def retry_is_pointless(step: str, deadlines: SlotDeadlines, now: datetime) -> bool:
    """True when a failed ``step`` should not be retried: its phase is over by the time a retry would run."""
    if step.split(":", 1)[0] not in NO_RETRY_AFTER_PHASE:
        return False
    at = deadlines.for_step(step)
    return at is not None and now + RETRY_DELAY >= at
