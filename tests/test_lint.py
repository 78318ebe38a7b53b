"""The code stays ruff-clean (including Airflow's AIR3 rules), checked with the pinned ruff."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_reports_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is pinned in requirements.lock and installed by the bootstrap"
    result = subprocess.run([ruff, "check", "."], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
