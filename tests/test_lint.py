"""The code stays ruff-clean (including Airflow's AIR3 rules), checked with the pinned ruff."""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_reports_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is pinned in requirements.lock and installed by the bootstrap"
    result = subprocess.run([ruff, "check", "."], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


MAX_FUNCTION_LINES = 60


def test_no_function_of_the_dag_or_include_is_over_60_lines():
    long = {}
    for path in [*(REPO / "include").rglob("*.py"), *(REPO / "dags").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                name = f"{path.relative_to(REPO)}:{node.name}"
                if lines > MAX_FUNCTION_LINES:
                    long[name] = lines
    assert long == {}


MAX_DOCSTRING_LINES = 11  # a docstring says why; the rules it would spell out are docs/'s, the figures benchmarks'


def test_no_docstring_of_the_product_runs_to_12_lines():
    # scripts/, bench/ and tools/ are left out: a script's module docstring is its usage text, what it prints and how to run it
    long = {}
    for path in [*(REPO / "include").rglob("*.py"), *(REPO / "dags").rglob("*.py"), *(REPO / "plugins").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc and len(doc.strip().splitlines()) > MAX_DOCSTRING_LINES:
                    long[f"{path.relative_to(REPO)}:{getattr(node, 'name', '<module>')}"] = len(doc.strip().splitlines())
    assert long == {}


# A reference to another project's tracker is a fact about that project: ``apache/airflow#73428``, ``we-mp-rss
# #149, #311`` or ``we-mp-rss PR #437``. Any other issue number is our own tracker's: history, for the commits.
UPSTREAM_REFERENCE = re.compile(r"(?:apache/airflow|we-mp-rss)(?:\s+(?:PR|issues?))?\s*#\d+(?:\s*,\s*#\d+)*")
OUR_ISSUE = re.compile(r"\bissues?\s+#?\d+|(?<![&\w])#\d+\b", re.IGNORECASE)


def comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    """Every comment and docstring of a module, with its line."""
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                found.append((node.body[0].lineno, doc))
    return found


def our_issue_numbers(text: str) -> list[str]:
    return OUR_ISSUE.findall(UPSTREAM_REFERENCE.sub("", text))


def test_the_guard_tells_our_issue_numbers_from_upstream_ones():
    assert our_issue_numbers("claimed before issue 24 (see #31); Issue 12 §1") == ["issue 24", "#31", "Issue 12"]
    assert our_issue_numbers("apache/airflow#73428; we-mp-rss\n#54, #114; since we-mp-rss PR #437") == []
    assert our_issue_numbers("color #d97706, &#34;, 2 issues left") == []


def test_no_comment_or_docstring_cites_an_issue_number_of_ours():
    cited = {}
    for folder in ("include", "dags", "plugins", "scripts", "bench", "tools"):
        for path in (REPO / folder).rglob("*.py"):
            for line, text in comments_and_docstrings(path.read_text(encoding="utf-8")):
                if our_issue_numbers(text):
                    cited[f"{path.relative_to(REPO)}:{line}"] = our_issue_numbers(text)
    assert cited == {}
