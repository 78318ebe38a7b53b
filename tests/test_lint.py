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


MAX_FUNCTION_LINES = 60


def test_no_function_of_the_dag_or_include_is_over_60_lines():
    import ast

    long = {}
    for path in [*(REPO / "include").rglob("*.py"), *(REPO / "dags").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                name = f"{path.relative_to(REPO)}:{node.name}"
                if lines > MAX_FUNCTION_LINES:
                    long[name] = lines
    assert long == {}
