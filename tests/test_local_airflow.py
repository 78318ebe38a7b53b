"""A real Airflow on this machine, as an operator runs it: `make backfill-check` (docs/operations.md's
two-day backfill under the `make ui` set-up), `make asset-check` (a DAG scheduled on the daily report's Asset)
and `make celery` (two Celery workers share a slot).

Each starts its own Airflow (AIRFLOW_HOME, metadata database on the embedded PostgreSQL, stand-ins): about
1.5 and 1 minute here. `make celery` needs Debian's redis-server and is left out by CI (RADAR_SKIP_CELERY=1,
set by .ci/run)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from include.radar_demo.waiting import run, sizes
from tools.local_airflow import QUIET

REPO = Path(__file__).resolve().parents[1]

def _make(target: str, out: str) -> str:
    """``make target``'s output, when make ends: the script's own waits give up on a stall, each naming what it
    waited for; this one only on a script that stood still (no CPU spent, nothing written to its output or to
    ``.local/<out>``) for longer than they would wait."""
    # its own AIRFLOW_HOME and databases (on the embedded PostgreSQL), nothing of the test session's
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "RADAR_"))}
    done = run(["make", target], cwd=REPO, env=env, quiet=QUIET + 300,
               progress=lambda: sizes(REPO / ".local" / out))
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    return said


def test_the_readmes_two_day_backfill_runs_ten_slots_in_order_and_pushes_nothing():
    out = _make("backfill-check", "backfill-check")
    for check in ("10 runs, all successful", "in date and slot order, one at a time",
                  "every article analysed by its own slot", "2 reports, each with its five slots",
                  "nothing pushed for the backfilled days"):
        assert f"[backfill] ok   {check}" in out


def test_a_dag_scheduled_on_the_daily_report_runs_once_per_pushed_report_and_never_on_a_rerun():
    out = _make("asset-check", "asset-check")
    for check in ("the daily push is one event, the consumer ran once", "the event says the day, the counts and the link",
                  "a rerun that pushes nothing emits nothing", "a forced re-push is the consumer's second run"):
        assert f"[asset] ok   {check}" in out


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed (apt-get install redis-server)")
@pytest.mark.skipif(os.environ.get("RADAR_SKIP_CELERY") == "1", reason="RADAR_SKIP_CELERY=1 (CI)")
def test_two_celery_workers_share_a_slot_and_nothing_happens_twice():
    out = _make("celery", "celery")
    assert "[celery] ok   the batches ran on both workers" in out
    assert "20 WeRSS detail calls, 20 DeepSeek calls, 1 push(es)" in out
    assert "0 more calls, 0 more pushes" in out


# ------------------------------------------------------------------ the scripts' slots, at any hour


def _plan(y: int, mo: int, d: int, h: int, mi: int):
    import sys

    sys.path.insert(0, str(REPO))
    from datetime import datetime

    from include.radar.core.clock import FixedClock
    from include.radar.core.slots import SHANGHAI
    from tools.local_airflow import slots_now

    now = datetime(y, mo, d, h, mi, 30, tzinfo=SHANGHAI)
    return now, slots_now(FixedClock(now))


@pytest.mark.parametrize(("when", "daytime", "daily", "run_date"), [
    ((2026, 3, 10, 12, 0), "08:00", "09:00", "2026-03-09"),  # noon
    ((2026, 3, 10, 23, 30), "19:30", "20:30", "2026-03-09"),  # 23:30: no waiting for midnight
    ((2026, 3, 11, 0, 5), "20:05", "21:05", "2026-03-09"),  # 00:05: the day before's slots
    ((2026, 3, 11, 3, 30), "22:30", "23:30", "2026-03-09"),  # the daily slot never in a midnight hour
    ((2026, 3, 11, 4, 0), "00:00", "01:00", "2026-03-10"),
    ((2027, 1, 1, 0, 5), "20:05", "21:05", "2026-12-30"),  # across a year's end
])
def test_the_scripts_slots_are_named_at_once_at_any_hour(when, daytime, daily, run_date):
    import time

    started = time.monotonic()
    _, plan = _plan(*when)
    assert time.monotonic() - started < 0.5  # a plan, never a wait
    assert (plan.daytime, plan.daily, plan.run_date.isoformat()) == (daytime, daily, run_date)


def test_at_every_minute_of_a_day_the_scripts_slot_runs_by_name_and_no_tick_fires():
    """`make celery` and `make bench-slot` at any minute (23:30 and 00:05 as at noon): the daily slot is the
    schedule's latest tick (unpausing runs it at once, before WeRSS has articles) and the day's last slot; the
    next tick is far beyond the script's run; the trigger's params name the daytime slot of the day before the
    tick's (no report of its day built before it), and open_slot resolves them to it, explicitly, its push forced."""
    import json
    from datetime import timedelta

    from include.radar.core.settings import Settings
    from include.radar.core.slots import slot_at, slot_for
    from include.radar.pushes import decide
    from include.radar.steps.open_slot import resolve_slot

    for minute in range(24 * 60):
        now, plan = _plan(2026, 2, 28, minute // 60, minute % 60)
        settings = Settings(schedule_slots=(plan.daytime, plan.daily))
        assert settings.daily_slot == plan.daily and settings.cron  # the daily slot is the day's last
        latest = slot_for(now, settings.schedule_slots)  # what unpausing runs
        assert latest.slot == plan.daily and timedelta(hours=3) <= now - latest.scheduled_at < timedelta(hours=4, minutes=1)
        following = slot_at(latest.run_date + timedelta(days=1), plan.daytime).scheduled_at
        assert following - now >= timedelta(hours=18), now  # no tick while the script runs
        params = decide.apply_action(json.loads(plan.conf()), settings.daily_slot)
        key, explicit = resolve_slot(now, settings, params)
        assert (key.run_date, key.slot, explicit, params["push_mode"]) == (plan.run_date, plan.daytime, True, "force")
        assert key.scheduled_at.timestamp() == plan.slot_epoch and key.run_date == latest.run_date - timedelta(days=1)
        again = decide.apply_action(json.loads(plan.conf(force=False)), settings.daily_slot)
        assert resolve_slot(now, settings, again)[0] == key and again.get("push_mode", "auto") == "auto"


def test_no_script_sleeps_until_a_time_of_day():
    """What made `make test` fail between 23:00 and 24:00 Shanghai: a script that slept until midnight."""
    import re

    for path in [*(REPO / "scripts").glob("*.py"), *(REPO / "bench").glob("*.py"), *(REPO / "tools").glob("*.py"),
                 *(REPO / "include" / "radar_demo").glob("*.py")]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"sleep\([^)]*(start_at|midnight|until|wait)\b", text), path
        assert "waiting for midnight" not in text and "wait for midnight" not in text, path


# ------------------------------------------------------------------ the waits: events and a stall bound, no deadline


def test_a_wait_lasts_while_something_moves_and_gives_up_on_a_stall_naming_what_it_waited_for(tmp_path) -> None:
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from include.radar.core.clock import FixedClock
    from include.radar_demo.waiting import GaveUp, wait_for

    clock = FixedClock(datetime(2026, 1, 5, tzinfo=UTC), step=0)  # a poll's sleep moves it; nothing waits
    begun = clock.monotonic()

    def since() -> float:
        return clock.monotonic() - begun

    # a loaded machine: a task changes state every 200 s, the runs end after five times the stall bound
    assert wait_for(lambda: since() >= 3000 and "ended", "the runs", 600, [], lambda: since() // 200,
                    clock=clock) == "ended"
    begun = clock.monotonic()
    with pytest.raises(GaveUp, match=r"waited for the runs: nothing moved for 600 s \(still tasks running 1\)"):
        wait_for(lambda: None, "the runs", 600, [], lambda: "tasks running 1", clock=clock)
    assert 600 <= since() < 601
    log = tmp_path / "scheduler.log"
    log.write_text("scheduler | starting\nscheduler | Traceback: the database went away\n")
    dead = SimpleNamespace(args=["airflow", "scheduler"], log=log, returncode=1, poll=lambda: 1)
    begun = clock.monotonic()
    with pytest.raises(GaveUp, match=r"airflow scheduler exited \(1\) while waiting for the runs") as gave:
        wait_for(lambda: None, "the runs", 600, [dead], clock=clock)
    assert "Traceback: the database went away" in str(gave.value) and since() == 0  # at once


def test_only_a_new_kind_of_log_line_is_progress(tmp_path) -> None:
    """A heartbeat repeats one shape (its times, pids and ids aside); a line still being written waits."""
    from include.radar_demo.waiting import NewLines

    log = tmp_path / "standalone.log"
    log.write_text("scheduler | 2026-01-05T10:00:01 heartbeat pid 4242 job 9f3a2b1c77\n")
    lines = NewLines(log)
    first = lines()
    with log.open("a") as f:
        f.write("scheduler | 2026-01-05T10:00:06 heartbeat pid 4242 job 0c1d2e3f4a\nscheduler | task anal")
    assert lines() == first
    with log.open("a") as f:
        f.write("yse queued\n")
    assert lines() == first + 1


def test_a_watched_command_runs_while_it_works_and_is_stopped_when_it_stands_still() -> None:
    import sys
    import time

    from include.radar_demo.waiting import GaveUp

    busy = "import time\nend = time.process_time() + 2\nwhile time.process_time() < end: pass\nprint('worked')"
    done = run([sys.executable, "-c", busy], quiet=1.5)  # silent, but spending CPU for longer than the bound
    assert (done.returncode, done.stdout) == (0, "worked\n")
    started = time.monotonic()
    with pytest.raises(GaveUp, match="waited for sleep 600 to end: nothing moved for 1 s"):
        run(["sleep", "600"], quiet=1)
    assert time.monotonic() - started < 300  # given up on the stall, killed: not sleep's ten minutes
