"""Does WeRSS collect before the radar reads? Its message tasks (消息任务) against the radar's slots (pure).

WeRSS gathers article lists only when a message task fires (``cron_exp``, in WeRSS's local time: Asia/Shanghai in
our compose file) for the accounts of its ``mps_id`` — JSON text of ``[{"id", "mp_name"}]``; empty, or naming no
account that exists, means every account — and only tasks with ``status`` 1 are loaded by its scheduler. A slot
is served when some active task covering the accounts fires within :data:`LEAD` before it; a task firing at the
slot's own minute is still collecting when the radar reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter

LEAD = timedelta(minutes=60)
DAYS = 7  # the slots of the next week (a cron may name weekdays)


@dataclass(frozen=True)
class Task:
    id: str
    name: str
    cron: str
    active: bool
    accounts: frozenset[str] | None  # None: every account

    def covers(self, mp_ids: Iterable[str]) -> set[str]:
        ids = set(mp_ids)
        return ids if self.accounts is None or not self.accounts & ids else ids & self.accounts

    @property
    def valid_cron(self) -> bool:
        return bool(self.cron.strip()) and croniter.is_valid(self.cron.strip())


def task_of(row: Any) -> Task | None:
    """A message task row as WeRSS answers it; None for a row that is not an object."""
    if not isinstance(row, dict):
        return None
    accounts: frozenset[str] | None = None
    raw = row.get("mps_id")
    try:
        listed = json.loads(raw) if isinstance(raw, str) and raw.strip() else raw
    except ValueError:
        listed = None
    if isinstance(listed, list):
        ids = frozenset(str(item["id"]) for item in listed if isinstance(item, dict) and item.get("id"))
        accounts = ids or None
    status = row.get("status")
    return Task(id=str(row.get("id") or "?"), name=str(row.get("name") or "")[:60], cron=str(row.get("cron_exp") or ""),
                active=status == 1 and not isinstance(status, bool), accounts=accounts)


@dataclass(frozen=True)
class Coverage:
    missed: tuple[str, ...]  # slots no task serves within LEAD before them (on some day of the next week)
    next_run: datetime | None  # the next time any of the tasks fires
    next_slot: str | None  # the slot that next run comes before


def _fires_between(cron: str, start: datetime, end: datetime) -> bool:
    return croniter(cron, start - timedelta(seconds=1)).get_next(datetime) < end


def coverage(crons: Sequence[str], slots: Sequence[str], now: datetime, tz: ZoneInfo, *,
             lead: timedelta = LEAD, days: int = DAYS) -> Coverage:
    """Which ``slots`` (HH:MM in ``tz``) no cron of ``crons`` serves on the next ``days`` days, and when the
    next collection runs and which slot follows it."""
    local = now.astimezone(tz)
    missed: list[str] = []
    for slot in slots:
        hour, minute = (int(p) for p in slot.split(":"))
        for offset in range(1, days + 1):
            day: date = local.date() + timedelta(days=offset)
            at = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
            if not any(_fires_between(cron, at - lead, at) for cron in crons):
                missed.append(slot)
                break
    runs = [croniter(cron, local).get_next(datetime) for cron in crons]
    next_run = min(runs) if runs else None
    return Coverage(tuple(missed), next_run, _slot_after(next_run, slots, tz) if next_run else None)


def _slot_after(moment: datetime, slots: Sequence[str], tz: ZoneInfo) -> str:
    local = moment.astimezone(tz)
    later = [s for s in sorted(slots) if s > local.strftime("%H:%M")]
    return later[0] if later else f"next day's {sorted(slots)[0]}"
