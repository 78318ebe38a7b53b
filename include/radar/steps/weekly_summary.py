"""``weekly_summary``: Sunday's daily slot, after the daily push: the week's summary (include/radar/report/weekly.py),
pushed once by the daily rules.
"""

from __future__ import annotations

import logging
from datetime import date
from typing import Any

from include.radar.pushes import decide, push
from include.radar.pushes.message import Message
from include.radar.report import weekly
from include.radar.steps.runtime import Runtime, step

log = logging.getLogger(__name__)


# the weekly digest call's own bound: it runs after the daily push, so no daily phase bounds it; the task
# times out at 10 minutes, and this leaves the push its share of them
WEEKLY_DIGEST_SECONDS = 5 * 60


@step("weekly_summary")
def weekly_summary(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    """Sunday's 22:00, after the daily push: the week's summary (weekly.py), pushed once by the daily rules.
    Any other slot returns at once. A failure here is this step's (recorded, the run fails), never the daily
    push's: that one has gone out before."""
    day = date.fromisoformat(slot["run_date"])
    if not weekly.is_weekly_slot(day, slot["is_daily"]):
        return {"reason": "the weekly summary is built at Sunday's daily slot"}
    monday, _ = weekly.week_of(day)
    row = weekly.build(rt.asking(slot["slot_run_id"], rt.clock.monotonic() + WEEKLY_DIGEST_SECONDS), monday=monday,
                       analysis_url=lambda i: rt.canonical_url(f"/analysis/{i}"))
    should_push, reason = decide.daily_push_plan(slot)
    if not should_push:
        log.info("weekly summary %s: not pushed: %s", monday, reason)
        return {"week_start": monday.isoformat(), "reason": reason}
    path = f"/weekly/{monday.isoformat()}"
    message = Message(title=weekly.title(monday, row["stats"] or {}), lines=weekly.lines(row),
                           link=rt.page_url(path))
    forced = slot["push_mode"] == "force"
    delivery = push.deliver(rt.connect, rt.channels(), message, push.Occasion(
        day, rt.settings.daily_slot, "weekly", rt.canonical_url(path), slot["slot_run_id"],
        nonce=(slot["dag_run_id"] or "") if forced else "",
    ))
    if delivery.failed:
        raise push.PushFailed(f"weekly push failed for {', '.join(delivery.failed)}; a retry resends only to those")
    return {"week_start": monday.isoformat(), **delivery.as_xcom()}
