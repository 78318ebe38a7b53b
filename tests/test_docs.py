"""The README and docs/ stay true to the code: the tables that mirror code, the links, the commands they name.

The module and test tables of docs/architecture.md are held by test_architecture.py, the backfill command of
docs/operations.md by test_backfill.py.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", REPO / "README.en.md", *sorted(DOCS.glob("*.md"))]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = unicodedata.normalize("NFC", heading.strip().lower())
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    found, fence = set(), False
    for line in _text(path).splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            found.add(_anchor(line.lstrip("#")))
    return found


def test_the_readme_stays_short_and_says_what_a_stranger_needs() -> None:
    readme = _text(REPO / "README.md")
    assert len(readme.splitlines()) <= 300
    for needed in ("make run", "make test", "make ui", "make check", "make existing-airflow", "docs/deployment.md",
                   "PYTEST_ARGS", "不构成投资建议", "LICENSE", "README.en.md"):
        assert needed in readme, needed
    english = _text(REPO / "README.en.md")
    for needed in ("make run", "make test", "docs/deployment.md", "Not investment advice", "README.md"):
        assert needed in english, needed
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)|src=\"([^\"]+)\"", _text(page)):
        target = target[0] or target[1]
        if re.match(r"[a-z]+:", target):
            continue  # an outside address
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(target)
    assert broken == []


def test_the_settings_table_is_the_codes() -> None:
    from tools import config_reference
    assert config_reference.problems(_text(DOCS / "configuration.md")) == []


def test_the_settings_table_notices_a_setting_it_does_not_describe() -> None:
    from tools import config_reference
    doc = _text(DOCS / "configuration.md")
    row = next(line for line in doc.splitlines() if line.startswith("| `daily_budget` |"))
    assert config_reference.problems(doc.replace(row + "\n", "")) == [
        "daily_budget: not described", "the table differs from the code: run python -m tools.config_reference"]
    stale_default = doc.replace(row, row.replace("| `0` |", "| `5` |", 1))
    assert config_reference.problems(stale_default) == [
        "the table differs from the code: run python -m tools.config_reference"]


def test_the_alerts_table_names_every_alert_the_code_sends_and_no_other() -> None:
    from include.radar.operations.alerts import CAUSES

    doc = _text(DOCS / "operations.md")
    table = doc.split("| alert | raised when (by) | what to do |", 1)[1].split("\n\n", 1)[0]
    documented = re.findall(r"^\| 「([^」]+)」 \|", table, re.MULTILINE)
    assert sorted(documented) == sorted(cause.title for cause in CAUSES.values())


def test_every_make_target_is_documented() -> None:
    makefile = _text(REPO / "Makefile")
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.MULTILINE))
    written = "".join(_text(page) for page in PAGES)
    assert sorted(t for t in targets if f"make {t}" not in written) == []


def test_the_prompt_version_the_docs_name_is_the_codes() -> None:
    from include.radar.analysis.analyst import ANALYSIS_PROMPT

    named = {m for page in PAGES for m in re.findall(r"analysis-v\d+", _text(page))}
    assert named <= {ANALYSIS_PROMPT.label}


def test_the_migrations_the_docs_name_exist() -> None:
    files = {p.name for p in (REPO / "include" / "radar" / "store" / "migrations").glob("*.sql")}
    named = {m for page in PAGES for m in re.findall(r"\b\d{4}_\w+\.sql\b", _text(page))}
    assert sorted(named - files) == []


def test_a_transcript_s_count_of_migrations_is_today_s() -> None:
    files = sorted(p.name for p in (REPO / "include" / "radar" / "store" / "migrations").glob("*.sql"))
    counts = {int(n) for page in PAGES for n in re.findall(r"已迁移：(\d+) 个迁移全部应用", _text(page))}
    assert counts == {len(files)}  # docs/check.md's transcript says it
    # make existing-airflow's, in docs/deployment.md: how many, the first and the last
    walked = {(int(n), first, last) for page in PAGES
              for n, first, last in re.findall(r"radar schema: (\d+) migrations applied \((\S+) … (\S+)\)", _text(page))}
    assert walked == {(len(files), files[0], files[-1])}


def test_the_readmes_actions_are_the_trigger_forms() -> None:
    from include.radar.pushes.decide import ACTIONS

    readme = _text(REPO / "README.md")
    table = readme.split("| 操作 / `action` | 这次运行做什么 |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| (\S+) `(\w+)`", table, re.MULTILINE)
    assert [action for _, action in rows] == list(ACTIONS)
    assert all(ACTIONS[action].startswith(title) for title, action in rows)


def test_the_count_of_modules_a_step_loads_is_today_s() -> None:
    """docs/architecture.md says how much of the product a task process imports with its step."""
    import subprocess

    said = re.search(r"(\d+) of the product's (\d+) modules \(packages included\) for\s+`open_slot`, (\d+) for "
                     r"`close_slot`", _text(DOCS / "architecture.md"))
    assert said is not None
    total = len([p for p in (REPO / "include" / "radar").rglob("*.py") if "__pycache__" not in p.parts])
    loaded = {}
    for step in ("open_slot", "close_slot"):
        code = (f"import sys\nfrom include.radar.steps import load\nload({step!r})\n"
                "print(len([m for m in sys.modules if m.startswith('include.radar')]))")
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
        loaded[step] = int(out.stdout.strip().splitlines()[-1])
    assert (int(said[1]), int(said[2]), int(said[3])) == (loaded["open_slot"], total, loaded["close_slot"])


def _check_line_names() -> set[str]:
    """Every ``区域 · 名称`` the check can print, read from its code: the ``ok`` / ``warn`` / ``fail`` calls of
    include/radar/check, their area and name resolved from string constants (``<…>`` where they vary)."""
    import ast

    from include.radar import DAG_ID

    def render(node: ast.AST, names: dict[str, str]) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return names.get(node.id, "<…>")
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else render(v.value, names) for v in node.values)
        return "<…>"

    found = set()
    for path in sorted((REPO / "include" / "radar" / "check").glob("*.py")):
        tree = ast.parse(_text(path))
        module = {"DAG_ID": DAG_ID} | {
            n.targets[0].id: n.value.value for n in tree.body
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str)}
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            local = {n.targets[0].id: render(n.value, module) for n in ast.walk(function)
                     if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
                     and isinstance(n.value, ast.Constant | ast.JoinedStr)}
            for call in (n for n in ast.walk(function) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
                if call.func.id in ("ok", "warn", "fail") and len(call.args) >= 2:
                    found.add(f"{render(call.args[0], module | local)} · {render(call.args[1], module | local)}")
    return found


def test_check_md_lists_every_line_check_can_print_and_no_other() -> None:
    names = _check_line_names()
    assert {"WeRSS · 微信登录", "WeRSS · 任务运行", "WeRSS · 新订阅", "推送 · <…> <…>"} <= names  # the reader works
    table = _text(DOCS / "check.md").split("| 行 | ✓ 的意思 |", 1)[1].split("\n\n", 1)[0]
    documented = {re.sub(r"<[^>]*>", "<…>", name) for row in re.findall(r"^\| (.+?) \|", table, re.MULTILINE)
                  for name in re.findall(r"`([^`]+ · [^`]+)`", row)}

    def pattern(name: str) -> re.Pattern[str]:
        return re.compile("^" + ".+".join(re.escape(part) for part in name.split("<…>")) + "$")

    assert sorted(n for n in names if not any(pattern(n).match(d) or pattern(d).match(n) for d in documented)) == []
    assert sorted(d for d in documented if not any(pattern(n).match(d) or pattern(d).match(n) for n in names)) == []


def test_an_nginx_proxy_passes_the_host_with_its_port() -> None:
    """``$host`` drops the port: behind ``listen 8443`` Airflow's login redirects to port 443 and never returns."""
    files = [*PAGES, *(p for p in (REPO / "deploy").rglob("*") if p.is_file() and "nginx" in p.name)]
    headers = [line.split()[2] for f in files for line in _text(f).splitlines()
               if line.strip().startswith("proxy_set_header Host ")]
    assert headers and set(headers) == {"$http_host;"}
