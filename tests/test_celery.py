"""The CeleryExecutor on this machine (`make celery`): Redis, a scheduler, an api-server and two Celery workers
run a slot of 20 articles; its analysis batches run on both workers, with exactly-once results.

Runs where Debian's redis-server exists (about three minutes); skipped otherwise, and in CI
(RADAR_SKIP_CELERY=1, set by .ci/run, to keep its time)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed (apt-get install redis-server)")
@pytest.mark.skipif(os.environ.get("RADAR_SKIP_CELERY") == "1", reason="RADAR_SKIP_CELERY=1 (CI)")
def test_two_celery_workers_share_a_slot_and_nothing_happens_twice():
    # its own AIRFLOW_HOME and databases (on the embedded PostgreSQL), nothing of the test session's
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "RADAR_"))}
    done = subprocess.run(["make", "celery"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "[celery] ok   the batches ran on both workers" in out
    assert "20 WeRSS detail calls, 20 DeepSeek calls, 1 push(es)" in out
    assert "0 more calls, 0 more pushes" in out
