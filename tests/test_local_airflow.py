"""A real Airflow on this machine, as an operator runs it: `make backfill-check` (docs/operations.md's
two-day backfill under the `make ui` set-up) and `make celery` (two Celery workers share a slot).

Each starts its own Airflow (AIRFLOW_HOME, metadata database on the embedded PostgreSQL, stand-ins): about
1.5 and 1 minute here. `make celery` needs Debian's redis-server and is left out by CI (RADAR_SKIP_CELERY=1,
set by .ci/run)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

def _make(target: str) -> str:
    # its own AIRFLOW_HOME and databases (on the embedded PostgreSQL), nothing of the test session's
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "RADAR_"))}
    done = subprocess.run(["make", target], cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    return out


def test_the_readmes_two_day_backfill_runs_ten_slots_in_order_and_pushes_nothing():
    out = _make("backfill-check")
    for check in ("10 runs, all successful", "in date and slot order, one at a time",
                  "every article analysed by its own slot", "2 reports, each with its five slots",
                  "nothing pushed for the backfilled days"):
        assert f"[backfill] ok   {check}" in out


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed (apt-get install redis-server)")
@pytest.mark.skipif(os.environ.get("RADAR_SKIP_CELERY") == "1", reason="RADAR_SKIP_CELERY=1 (CI)")
def test_two_celery_workers_share_a_slot_and_nothing_happens_twice():
    out = _make("celery")
    assert "[celery] ok   the batches ran on both workers" in out
    assert "20 WeRSS detail calls, 20 DeepSeek calls, 1 push(es)" in out
    assert "0 more calls, 0 more pushes" in out


# ------------------------------------------------------------------ the scripts' slots, at any hour


def _plan(y: int, mo: int, d: int, h: int, mi: int):
    import sys

    sys.path.insert(0, str(REPO))
    from datetime import datetime

    from include.radar.core.slots import SHANGHAI
    from scripts.local_airflow import plan_slots

    now = datetime(y, mo, d, h, mi, 30, tzinfo=SHANGHAI)
    return now, plan_slots(now)


@pytest.mark.parametrize(("when", "daytime", "daily", "start"), [
    ((2026, 3, 10, 15, 21), "15:18", "16:18", "2026-03-10 15:21"),  # the day: three minutes ago, an hour later
    ((2026, 3, 10, 23, 10), "22:59", "23:59", "2026-03-10 23:10"),  # late: the day's last minute is the daily slot
    ((2026, 3, 10, 23, 59), "00:00", "01:00", "2026-03-11 00:00"),  # no room before midnight: start at midnight
    ((2026, 3, 11, 0, 1), "00:00", "01:00", "2026-03-11 00:01"),  # never a slot of the day before
    ((2026, 1, 31, 23, 59), "00:00", "01:00", "2026-02-01 00:00"),  # across a month's end
    ((2026, 12, 31, 23, 30), "00:00", "01:00", "2027-01-01 00:00"),  # and a year's
])
def test_the_scripts_slots_put_the_daytime_slot_last_and_the_daily_slot_ahead(when, daytime, daily, start):
    _, plan = _plan(*when)
    assert (plan.daytime, plan.daily, f"{plan.start_at:%Y-%m-%d %H:%M}") == (daytime, daily, start)


def test_at_every_minute_of_a_day_the_scripts_run_the_daytime_slot_and_no_tick_fires():
    from datetime import timedelta

    from include.radar.core.settings import Settings
    from include.radar.core.slots import slot_at, slot_for

    for minute in range(24 * 60):
        now, plan = _plan(2026, 2, 28, minute // 60, minute % 60)
        settings = Settings(schedule_slots=(plan.daytime, plan.daily))
        assert settings.daily_slot == plan.daily and settings.cron  # the daily slot is the day's last
        key = slot_for(plan.start_at, settings.schedule_slots)
        assert (key.slot, key.run_date) == (plan.daytime, plan.start_at.date()), now
        assert key.scheduled_at.timestamp() == plan.slot_epoch
        assert timedelta(0) <= plan.start_at - key.scheduled_at <= timedelta(minutes=20), now  # not late
        daily_tick = slot_at(key.run_date, plan.daily).scheduled_at  # the next tick after the daytime slot
        assert daily_tick - plan.start_at >= timedelta(minutes=30), now  # no tick while the script runs
        assert timedelta(0) <= plan.start_at - now <= timedelta(minutes=41), now
