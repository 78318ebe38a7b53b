"""What every room of the store shares: the row type, the status codes of the schema, JSON for logs."""

from __future__ import annotations

import json
from typing import Any

Row = dict[str, Any]

# content_item.analyzed_status
PENDING, ANALYSING, DONE, FAILED = 0, 1, 2, 3
# content_item.body_status
BODY_WAITING, BODY_READY, BODY_UNUSABLE = 0, 1, 2
# slot_run.status
RUNNING, SUCCESS, SLOT_FAILED = 0, 1, 2
# notification_log.status
NOTE_PENDING, NOTE_SENT, NOTE_FAILED, NOTE_UNKNOWN = 0, 1, 2, 3  # unknown: the send started, no outcome
# daily_report.status: 3 = built from what was done (fallback digest, pending or failed work listed);
# 2 = nothing could be built
REPORT_BUILDING, REPORT_OK, REPORT_FAILED, REPORT_PARTIAL = 0, 1, 2, 3


# the analysis an opportunity push linked to, from its notification_log row ``n`` (its target is the page)
PUSHED_ANALYSIS_ID = "substring(n.target_url FROM '/analysis/([0-9]+)$')::bigint"


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
