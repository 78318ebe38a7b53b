"""``track_record``: after the daily push, the picks followed in the market (include/radar/report/track_record.py).
"""

from __future__ import annotations

import logging
from typing import Any

from include.radar.report.track_record import daily
from include.radar.steps.runtime import Runtime, step

log = logging.getLogger(__name__)


@step("track_record")
def track_record(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    """After the daily push, whatever became of it: the picks followed in the market (report/track_record.py). A
    failing price source is a warning and one operator alert a day; the next day's run retries."""
    return daily(rt.connect, rt.settings, slot, lambda detail: rt.alert("market_data", detail, slot), clock=rt.clock)
