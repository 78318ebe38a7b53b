"""Which slot is this run? Pure functions on time, no I/O.

Airflow stores ``run_after`` in UTC; the 07:00 Shanghai run falls on the previous UTC day, so ``ds`` is
wrong for the report date. Everything here converts to the configured timezone first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

SHANGHAI = ZoneInfo("Asia/Shanghai")


@dataclass(frozen=True)
class SlotKey:
    """One planned fire time: the idempotency key of a slot run is (run_date, slot)."""

    run_date: date
    slot: str  # "HH:MM"
    scheduled_at: datetime  # aware, UTC

    @property
    def label(self) -> str:
        return f"{self.run_date.isoformat()} {self.slot}"


def _as_aware(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment!r}: Airflow times are timezone-aware")
    return moment


def slot_at(run_date: date, slot: str, tz: ZoneInfo = SHANGHAI) -> SlotKey:
    hour, minute = (int(p) for p in slot.split(":"))
    local = datetime.combine(run_date, time(hour, minute), tzinfo=tz)
    return SlotKey(run_date=run_date, slot=slot, scheduled_at=local.astimezone(UTC))


def slot_for(run_after: datetime, slots: tuple[str, ...], tz: ZoneInfo = SHANGHAI) -> SlotKey:
    """The latest configured slot at or before ``run_after`` (in ``tz``).

    A scheduled run fires exactly on a slot, so it maps to itself. A manual run triggered at 15:30 maps to
    the 14:00 slot of that day (re-running it is harmless: every step is idempotent and pushes are
    deduplicated); one triggered at 06:00 maps to the previous day's last slot.
    """
    local = _as_aware(run_after).astimezone(tz)
    ordered = sorted(slots)
    for day_offset in (0, 1):
        day = local.date() - timedelta(days=day_offset)
        for slot in reversed(ordered):
            key = slot_at(day, slot, tz)
            if key.scheduled_at <= local.astimezone(UTC):
                return key
    raise AssertionError("unreachable: the previous day always has a slot")


def window(key: SlotKey, window_days: float) -> tuple[datetime, datetime]:
    """The article window of a slot: it ends at the slot's scheduled time, not the wall clock."""
    end = key.scheduled_at
    return end - timedelta(days=window_days), end


def is_late(key: SlotKey, started_at: datetime, late_after_minutes: int) -> bool:
    return _as_aware(started_at) - key.scheduled_at > timedelta(minutes=late_after_minutes)


def local_day_bounds(day: date, tz: ZoneInfo = SHANGHAI) -> tuple[datetime, datetime]:
    """[start, end) of a calendar day in ``tz``, as UTC datetimes."""
    start = datetime.combine(day, time(0, 0), tzinfo=tz)
    return start.astimezone(UTC), (start + timedelta(days=1)).astimezone(UTC)


def to_local(moment: datetime | None, tz: ZoneInfo = SHANGHAI) -> datetime | None:
    return None if moment is None else _as_aware(moment).astimezone(tz)


def slots_between(start: datetime, end: datetime, slots: tuple[str, ...], tz: ZoneInfo = SHANGHAI) -> list[SlotKey]:
    """The planned slots with ``start < scheduled_at <= end``, oldest first."""
    keys = []
    day = start.astimezone(tz).date()
    while day <= end.astimezone(tz).date():
        keys += [k for k in (slot_at(day, s, tz) for s in slots) if start < k.scheduled_at <= end]
        day += timedelta(days=1)
    return keys
