"""A real Airflow on this machine, as an operator runs it (issue 16): `make backfill-check` (docs/operations.md's
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
