"""Backfills hold whatever order or concurrency their runs go in: each slot analyses only the
articles of its own slot, each day's report accounts for all of that day's slots, nothing is pushed.

Rooms: steps/open_slot.py (a backfill run's own slot), steps/select_articles.py, steps/daily_report.py with
digest.py, decide.py (nothing pushed), the daily page.
"""

from __future__ import annotations

import random
from datetime import date

import pytest

from include.radar import store
from include.radar.core.slots import slot_at
from tests.backfill_days import DAYS, PUBLISHED, SLOTS, respond
from tests.conftest import connect
from tests.slotrun import article, run_slot, shanghai


def _slots() -> list:
    return [slot_at(day, s) for day in DAYS for s in SLOTS]


@pytest.mark.parametrize("order", ["in order", "reversed", "shuffled"])
def test_a_two_day_backfill_in_any_order_analyses_each_article_in_its_own_slot_and_pushes_nothing(fakes, order):
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(n, at, title=f"文章{n}") for n, (at, _) in enumerate(PUBLISHED, start=1)]
    fakes.deepseek.responder = respond
    fakes.at(shanghai(2026, 1, 7, 10))  # a backfill runs later: WeRSS has everything
    keys = _slots()
    if order == "reversed":
        keys.reverse()
    elif order == "shuffled":
        random.Random(5).shuffle(keys)
    results = [run_slot(k.scheduled_at, run_type="backfill", now=shanghai(2026, 1, 7, 10)) for k in keys]
    assert all(r["errors"] == {} for r in results), [r["errors"] for r in results]

    with connect() as conn:
        analysed_in = {r["title"]: (r["run_date"], r["slot"]) if r["slot"] else None for r in conn.execute(
            "SELECT c.title, s.run_date, s.slot FROM content_item c LEFT JOIN analysis_result a "
            "ON a.content_item_id = c.id LEFT JOIN slot_run s ON s.id = a.slot_run_id").fetchall()}
        reports = {r["report_date"]: r for r in conn.execute("SELECT * FROM daily_report").fetchall()}
        runs = conn.execute("SELECT status FROM slot_run").fetchall()
    assert len(runs) == 10 and all(r["status"] == store.common.SUCCESS for r in runs)
    # the evening before the range belongs to a slot that was not backfilled: left for the next live slot
    assert analysed_in == {f"文章{n}": owner for n, (_, owner) in enumerate(PUBLISHED, start=1)}
    assert set(reports) == set(DAYS)
    assert reports[DAYS[0]]["stats"]["analysed"] == 5 and reports[DAYS[1]]["stats"]["analysed"] == 4
    assert all(sorted(r["slots_done"]) == list(SLOTS) for r in reports.values())
    assert fakes.sink.received == [] and fakes.sink2.received == []


@pytest.mark.e2e
def test_the_documented_backfill_command_makes_ten_runs_for_two_shanghai_days():
    """docs/operations.md's command, run as written with --dry-run: the runs it would create, counted."""
    import os
    import re
    import shlex
    from pathlib import Path

    from include.radar_demo.waiting import run

    doc = (Path(__file__).parents[1] / "docs" / "operations.md").read_text(encoding="utf-8")
    command = re.search(r"```\n\s*(airflow backfill create [^`]+?)\n\s*```", doc).group(1).replace("\\\n", " ")
    env = {**os.environ, "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR"}
    # each waits while the command works, however loaded the machine (include/radar_demo/waiting.py)
    stored = run(["airflow", "dags", "reserialize"], env=env)
    assert stored.returncode == 0, stored.stderr[-2000:]
    out = run([*shlex.split(command), "--dry-run"], env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    runs = re.findall(r"^\| (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00) ", out.stdout, re.MULTILINE)
    # 07:00 Shanghai is 23:00 UTC the day before: the first run is 2026-01-04 23:00 UTC, the last 2026-01-06 14:00
    assert len(runs) == 10 and runs[0] == "2026-01-04 23:00:00+00:00" and runs[-1] == "2026-01-06 14:00:00+00:00"
    assert runs == sorted(runs)


def test_a_backfilled_days_report_page_says_why_nothing_was_pushed(fakes):
    from tests.slotrun import read_page

    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.deepseek.responder = respond
    fakes.at(shanghai(2026, 1, 7, 10))
    run_slot(shanghai(2026, 1, 6, 22), run_type="backfill", now=shanghai(2026, 1, 7, 10))
    page = read_page("/daily/2026-01-06", shanghai(2026, 1, 7, 10))
    assert "补跑不推送" in page and fakes.sink.received == []


def test_a_slot_that_ran_on_another_day_shows_the_date_it_ran():
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from include.radar.web.views import slots as slot_views

    tz = ZoneInfo("Asia/Shanghai")
    day = date(2026, 1, 5)
    same = datetime(2026, 1, 5, 7, 0, 5, tzinfo=tz)
    later = datetime(2026, 11, 23, 23, 58, tzinfo=tz)
    assert slot_views._clock(same, day, tz) == "07:00" and slot_views._clock(later, day, tz) == "11-23 23:58"
