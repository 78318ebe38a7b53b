"""Does WeRSS collect before the radar reads? Its message tasks (消息任务) against the radar's slots (pure).

WeRSS gathers article lists only when a message task fires (``cron_exp``, in WeRSS's local time: Asia/Shanghai in
our compose file) for the accounts of its ``mps_id`` — JSON text of ``[{"id", "mp_name"}]``; ``[]``, or naming
no account that exists, means every account subscribed when the tasks were applied — and only tasks with
``status`` 1 are loaded by its scheduler. A slot is served when some task WeRSS can load fires within
:data:`LEAD` before it; a task firing at the slot's own minute is still collecting when the radar reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter

from include.radar.collect.werss_rows import local_moment

LEAD = timedelta(minutes=60)
BEFORE_SLOT = 30  # the guide's collection runs this many minutes before each slot
DAYS = 7  # the slots of the next week (a cron may name weekdays)


def suggested_cron(slots: Sequence[str], before: int = BEFORE_SLOT) -> str:
    """The cron of the guide: firing ``before`` minutes ahead of every slot (slots sharing their minute)."""
    moments = sorted({(int(s[:2]) * 60 + int(s[3:]) - before) % 1440 for s in slots})
    minutes = sorted({m % 60 for m in moments})
    if len(minutes) == 1:
        return f"{minutes[0]} {','.join(str(m // 60) for m in moments)} * * *"
    return "*/30 * * * *"


@dataclass(frozen=True)
class Task:
    id: str
    name: str
    cron: str
    active: bool
    accounts: frozenset[str] | None  # None: every account (as subscribed when the tasks were last applied)
    problem: str = ""  # why WeRSS cannot load it (its mps_id), "" when it can
    saved_at: datetime | None = None  # updated_at: when it was last saved (in WeRSS's time zone)

    def covers(self, mp_ids: Iterable[str]) -> set[str]:
        ids = set(mp_ids)
        return ids if self.accounts is None or not self.accounts & ids else ids & self.accounts

    @property
    def form(self) -> str:
        """What WeRSS loads of it at 「应用」: a task saved in another form runs in its old one until then."""
        return f"{self.id}|{self.cron.strip()}|{','.join(sorted(self.accounts or ())) or '*'}|{self.active}"

    @property
    def valid_cron(self) -> bool:
        return bool(self.cron.strip()) and croniter.is_valid(self.cron.strip())

    @property
    def runs(self) -> bool:
        """WeRSS's scheduler loads it: active, a valid cron, and an ``mps_id`` it can read."""
        return self.active and self.valid_cron and not self.problem


def accounts_of(raw: Any) -> tuple[frozenset[str] | None, str]:
    """A task's ``mps_id`` read as WeRSS reads it (``json.loads``, then each item's ``"id"`` joined as text):
    the account ids (None: every account), or the reason it cannot load. ``""`` is not "every account" to
    WeRSS: it is a JSON error (「Expecting value」), and only ``"[]"`` means all."""
    try:
        listed = json.loads(raw) if isinstance(raw, str) else None
    except ValueError as exc:
        return None, f"mps_id 不是 JSON（{str(exc)[:80]}）"
    if not isinstance(listed, list):
        return None, "mps_id 不是 JSON 列表"
    if not all(isinstance(item, dict) and isinstance(item.get("id"), str) for item in listed):
        return None, "mps_id 的每一项都应是带 id 的对象"
    return frozenset(item["id"] for item in listed) or None, ""


def task_of(row: Any, tz: ZoneInfo | None = None) -> Task | None:
    """A message task row as WeRSS answers it; None for a row that is not an object."""
    if not isinstance(row, dict):
        return None
    accounts, problem = accounts_of(row.get("mps_id"))
    status = row.get("status")
    return Task(id=str(row.get("id") or "?"), name=str(row.get("name") or "")[:60], cron=str(row.get("cron_exp") or ""),
                active=status == 1 and not isinstance(status, bool), accounts=accounts, problem=problem,
                saved_at=local_moment(row.get("updated_at") or row.get("created_at"), tz))


def previous_run(crons: Sequence[str], before: datetime) -> datetime | None:
    """The latest moment before ``before`` at which one of ``crons`` fired (in ``before``'s time zone)."""
    runs = [croniter(cron, before).get_prev(datetime) for cron in crons]
    return max(runs) if runs else None


def next_run(crons: Sequence[str], after: datetime) -> datetime | None:
    """The first moment after ``after`` at which one of ``crons`` fires (in ``after``'s time zone)."""
    runs = [croniter(cron, after).get_next(datetime) for cron in crons]
    return min(runs) if runs else None


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
    upcoming = next_run(crons, local)
    return Coverage(tuple(missed), upcoming, _slot_after(upcoming, slots, tz) if upcoming else None)


def _slot_after(moment: datetime, slots: Sequence[str], tz: ZoneInfo) -> str:
    local = moment.astimezone(tz)
    later = [s for s in sorted(slots) if s > local.strftime("%H:%M")]
    return later[0] if later else f"next day's {sorted(slots)[0]}"
