"""``retention``: after the daily push, old article bodies pruned within the step's time, and what the
database holds recorded for the health panel (include/radar/operations/retention.py).
"""

from __future__ import annotations

from typing import Any

from include.radar.operations.retention import daily
from include.radar.steps.runtime import Runtime, slot_key, step


@step("retention")
def retention(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    """At the daily slot only: bodies older than ``retention_days`` pruned (none when it is 0), a batch per
    transaction, for at most five minutes; a backlog is a warning on the slot and tomorrow's work."""
    return daily(rt.connect, rt.settings, slot, slot_key(slot).scheduled_at, clock=rt.clock)
