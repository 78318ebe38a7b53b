"""The two days a backfill is tried on (tests/test_backfill.py, and for real under Airflow by
``make backfill-check``, tools/backfill_check.py): ten slots, the articles and the slot that owns each, and
DeepSeek's answers (every article 80, so that a live slot would push; a quiet digest)."""

from __future__ import annotations

import json
from datetime import date

from tests.slotrun import answer, shanghai

DAYS = (date(2026, 1, 5), date(2026, 1, 6))
SLOTS = ("07:00", "12:00", "14:00", "18:00", "22:00")
# published (Shanghai) -> the slot that owns it: the first planned slot at or after it (None: before the range)
PUBLISHED = [
    (shanghai(2026, 1, 4, 20), None),
    (shanghai(2026, 1, 5, 6, 30), (date(2026, 1, 5), "07:00")),
    (shanghai(2026, 1, 5, 11), (date(2026, 1, 5), "12:00")),
    (shanghai(2026, 1, 5, 13), (date(2026, 1, 5), "14:00")),
    (shanghai(2026, 1, 5, 16), (date(2026, 1, 5), "18:00")),
    (shanghai(2026, 1, 5, 21), (date(2026, 1, 5), "22:00")),
    (shanghai(2026, 1, 6, 1), (date(2026, 1, 6), "07:00")),
    (shanghai(2026, 1, 6, 12), (date(2026, 1, 6), "12:00")),  # exactly at a slot: that slot's
    (shanghai(2026, 1, 6, 17, 59), (date(2026, 1, 6), "18:00")),
    (shanghai(2026, 1, 6, 18, 1), (date(2026, 1, 6), "22:00")),
]


def respond(body: dict) -> str:
    user = body["messages"][1]["content"]
    if "<<<DATA_START>>>" in user:
        return json.dumps({"has_opportunity": False, "top_opportunities": [], "digest_md": "## 今日要点\n- 无"},
                          ensure_ascii=False)
    return answer(80)
