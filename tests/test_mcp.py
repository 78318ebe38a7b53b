"""The MCP server over the radar (web/mcp_server.py, web/mcp_tools.py), driven by the SDK's own client over stdio
as a desktop assistant drives it, on the demo day (tests/evaluation_day.py): it lists its tools, each is called,
the answers carry the pages' figures, and a read token sees what a pushed link's read session sees. The HTTP
transport refuses a request without the token; the CLI refuses a client token that is none of the server's.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import socket
import subprocess
import sys
import threading
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from include.radar import store
from include.radar.core.clock import FixedClock
from include.radar.web import mcp_server
from include.radar.web.views.health import CHECK_STATUS
from tests.conftest import REPO, connect
from tests.evaluation_day import DAY, LATER, demo_day
from tests.pages import SECRET, FakeUser, airflow_get_user, allow_reading, make_settings, signed

OWNER = "owner-" + "o" * 40
READ = "read-" + "r" * 40
TOOLS = {"search_history", "daily_report", "get_analysis", "open_opportunities", "track_record", "slot_health"}
CHECK_LINE = "✗ WeRSS：登录已过期（api_key=sk-live-abcdef123456）"
ALERT_DETAIL = "DeepSeek 返回 500：password=hunter2hunter2"
SEARCHED = "储能"
BASE = "https://radar.example.com/radar"  # tests/pages.py's report_base_url: the answers' links are absolute


@asynccontextmanager
async def _session(token: str, args: list[str], env: dict[str, str] | None = None):
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO), env={
        "PYTHONPATH": str(REPO), "RADAR_DATABASE_URL": os.environ["RADAR_DATABASE_URL"],
        "RADAR_MCP_OWNER_TOKEN": OWNER, "RADAR_MCP_READ_TOKEN": READ, "RADAR_MCP_TOKEN": token, **(env or {})})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _drive(token: str, calls: dict[str, tuple[str, dict[str, Any]]]) -> tuple[list[Any], dict[str, Any]]:
    """One stdio session of the server on the demo day's next morning: its tools and each call's answer (the
    structured result; an error result as ``{"error": text}``)."""

    async def run() -> tuple[list[Any], dict[str, Any]]:
        async with _session(token, ["-m", "tests.mcp_stub", LATER.isoformat()]) as session:
            tools = (await session.list_tools()).tools
            answers = {}
            for key, (name, arguments) in calls.items():
                result = await session.call_tool(name, arguments)
                answers[key] = ({"error": result.content[0].text} if result.is_error
                                else result.structured_content)
            return tools, answers

    return asyncio.run(run())


@pytest.fixture
def day(fakes, monkeypatch) -> dict[str, int]:
    """The demo day, with a failed deployment check and an alert on the morning after (what the operator sees)."""
    ids = demo_day(fakes, monkeypatch)
    with connect() as conn:
        store.operations.update_status(conn, CHECK_STATUS, lambda _: {
            "at": LATER.isoformat(), "ok": 9, "warnings": 1, "failures": 1, "failing": [CHECK_LINE]})
        store.operations.record_alert(conn, day=LATER.date(), cause="deepseek", title="DeepSeek 调用异常",
                                      detail=ALERT_DETAIL, slot_run_id=None, dag_run_id=None)
        # a pick's time is its push's (the database's clock), so the slot's track record found the demo's picks
        # months old and settled; on the morning after, the market has settled none: one stands as not computed
        conn.execute("DELETE FROM track_outcome WHERE pick_id = (SELECT min(id) FROM track_pick WHERE status = "
                     "'measurable')")
    return ids


def _calls(analysis_id: int) -> dict[str, tuple[str, dict[str, Any]]]:
    return {"search": ("search_history", {"query": SEARCHED}), "daily": ("daily_report", {"day": DAY.isoformat()}),
            "analysis": ("get_analysis", {"analysis_id": analysis_id}), "open": ("open_opportunities", {}),
            "record": ("track_record", {"horizon": "5"}), "health": ("slot_health", {}),
            "bad_day": ("daily_report", {"day": "2026-02-30"}), "missing": ("get_analysis", {"analysis_id": 999999})}


def _only(value: Any, keys: str) -> Any:
    """``value`` cut to ``keys`` (``a,b.c``: b's c), lists to their first two: the transcript's abridgement."""
    if isinstance(value, list):
        return [_only(v, keys) for v in value[:2]]
    wanted: dict[str, list[str]] = {}
    for key in keys.split(","):
        head, _, rest = key.partition(".")
        wanted.setdefault(head, []).append(rest)
    return {k: _only(value[k], ",".join(r for r in rest if r)) if any(rest) else value[k]
            for k, rest in wanted.items() if k in value}


ABRIDGED = {"search": "total,pages,hits.title,hits.score,hits.status", "daily": "report_state,stats,slots_done,"
            "top.analysis_id,top.title,top.score,cost,excluded.title,excluded.reason",
            "analysis": "id,title,score,band,evidence_check,opportunities.name,opportunities.direction_label,"
                        "opportunities.targets,opportunities.evidence",
            "open": "total,picks.title,picks.score,picks.direction,picks.instrument", "record": "horizon,picks,overall",
            "health": "issues,slots.when,slots.label,slots.new,slots.analysed,slots.failed,check,spend.text",
            "bad_day": "error", "missing": "error"}
READ_ABRIDGED = {"daily": "stats,cost,excluded.title,excluded.reason,hidden", "health": "check,alerts.title,alerts.detail,hidden"}


def transcript(tools: list[Any], calls: dict[str, tuple[str, dict[str, Any]]], answers: dict[str, Any],
               abridged: dict[str, str], token: str) -> str:
    """The session as docs/mcp.md shows it: the client's requests, the server's answers abridged."""
    lines = [f"$ RADAR_MCP_TOKEN=<{token}> python -m include.radar.cli mcp",
             "→ tools/list", "← " + ", ".join(t.name for t in tools)]
    for key, only in abridged.items():
        name, arguments = calls[key]
        lines += [f"→ tools/call {name} {json.dumps(arguments, ensure_ascii=False)}",
                  "← " + json.dumps(_only(answers[key], only), ensure_ascii=False)]
    return "\n".join(lines) + "\n"


def _documented(name: str) -> str:
    text = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    return text.split(f"<!-- {name} -->\n```text\n", 1)[-1].split("```", 1)[0]


def _tile(page: str, key: str) -> str:
    match = re.search(rf'<div class="k">{re.escape(key)}</div><div class="v[^"]*">([^<]*)', page)
    assert match, key
    return match.group(1)


def _pages(db_url: str, analysis_id: int, *, owner: bool) -> dict[str, str]:
    """The pages of the same figures on the same morning: through an Airflow login, or each through its own
    pushed link."""
    from fastapi.testclient import TestClient

    from include.radar.web.app import create_app

    app = create_app(make_settings, db_url, clock=FixedClock(LATER))
    if owner:
        app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
        allow_reading(app, edit=True)
    client = TestClient(app)
    paths = {"daily": f"/daily/{DAY}", "analysis": f"/analysis/{analysis_id}", "search": f"/search?q={SEARCHED}",
             "record": "/record", "overview": "/"}
    pages = {}
    for key, path in paths.items():
        plain, _, query = path.partition("?")
        url = path if owner else signed(plain, now=LATER) + (f"&{query}" if query else "")
        response = client.get(url)
        assert response.status_code == 200, (key, response.status_code)
        pages[key] = response.text
    return pages


def _best(ids: dict[str, int]) -> int:
    with connect() as conn:
        row = conn.execute("SELECT id FROM analysis_result WHERE id = ANY(%s) ORDER BY score DESC, id LIMIT 1",
                           (list(ids.values()),)).fetchone()
    return row["id"]


def _everything() -> str:
    """Every row of the radar's database, as text: what a session that writes nothing leaves as it was."""
    with connect() as conn:
        tables = [r["tablename"] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename").fetchall()]
        return json.dumps({t: conn.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall() for t in tables},
                          default=str, ensure_ascii=False)


def test_an_mcp_client_lists_the_tools_calls_each_and_gets_the_pages_figures(day, db_url):
    best = _best(day)
    before = _everything()
    tools, answers = _drive(OWNER, _calls(best))
    assert _everything() == before  # no tool writes, not even the feedback or the profile the pages may
    session = transcript(tools, _calls(best), answers, ABRIDGED, "owner token")
    assert session == _documented("owner session"), session  # the docs show a real session
    assert {t.name for t in tools} == TOOLS and all(t.annotations.read_only_hint for t in tools)
    pages = _pages(db_url, best, owner=True)
    daily, page = answers["daily"], pages["daily"]
    assert daily["stats"]["analysed"] > 0 and daily["analyses"]
    assert _tile(page, "分析") == str(daily["stats"]["analysed"])
    assert _tile(page, f"机会（≥{daily['threshold']}）") == str(daily["stats"]["opportunities"])
    assert _tile(page, "失败") == str(daily["stats"]["failed"])
    assert _tile(page, "最高分") == str(daily["stats"]["max_score"])
    assert _tile(page, "LLM 花费") == daily["cost"]
    assert all(f"/analysis/{a['id']}" in page for a in daily["analyses"])
    assert daily["excluded"] and all(html.escape(x["reason"]) in page for x in daily["excluded"])
    analysis = answers["analysis"]
    quotes = [q["quote"] for o in analysis["opportunities"] for q in o["evidence"]]
    assert analysis["id"] == best and quotes and all(html.escape(q) in pages["analysis"] for q in quotes)
    assert f"<dt>成本</dt><dd>{analysis['cost']}" in pages["analysis"]
    assert answers["search"]["total"] > 0 and f"找到 {answers['search']['total']} 篇" in pages["search"]
    record = answers["record"]
    assert record["picks"] > 0 and _tile(pages["record"], "选出") == str(record["overall"]["picks"])
    assert answers["open"]["picks"] and all(p["url"].removeprefix(BASE) in pages["record"]
                                            for p in answers["open"]["picks"])
    health = answers["health"]
    assert any(s["has_run"] for s in health["slots"])
    for s in (s for s in health["slots"] if s["has_run"]):
        assert f"新增 <b>{s['new']}</b> · 分析 <b>{s['analysed']}</b>" in pages["overview"]
    assert health["check"]["failing"] and "sk-live-abcdef123456" not in json.dumps(health, ensure_ascii=False)
    assert health["spend"]["text"] in pages["overview"]
    assert answers["bad_day"]["error"].endswith("日报地址应为 /daily/YYYY-MM-DD，日期在 2000-01-01 到明年之间，例如 /daily/2026-01-08。")
    assert "999999" in answers["missing"]["error"]
    text = json.dumps(answers, ensure_ascii=False)
    assert not any(secret in text for secret in (SECRET, OWNER, READ, "hunter2hunter2"))


def test_a_read_token_sees_what_a_pushed_links_read_session_sees(day, db_url):
    best = _best(day)
    _, owner = _drive(OWNER, _calls(best))
    tools, read = _drive(READ, _calls(best))
    session = transcript(tools, _calls(best), read, READ_ABRIDGED, "read token")
    assert session == _documented("read session"), session
    pages = _pages(db_url, best, owner=False)
    daily = read["daily"]
    assert daily["stats"] == owner["daily"]["stats"] and _tile(pages["daily"], "分析") == str(daily["stats"]["analysed"])
    # no spend, no rule text: neither in the answer nor on the link's page
    assert "cost" not in daily and "LLM 花费" not in pages["daily"]
    assert daily["excluded"] and all("reason" not in x for x in daily["excluded"])
    assert not any(html.escape(x["reason"]) in pages["daily"] for x in owner["daily"]["excluded"])
    assert "cost" not in read["analysis"] and "<dt>成本</dt>" not in pages["analysis"]
    assert read["analysis"]["opportunities"] == owner["analysis"]["opportunities"]
    health = read["health"]
    assert "spend" not in health and "failing" not in health["check"] and health["check"]["failures"] == 1
    assert all(set(a) == {"title", "when", "occurrences"} for a in health["alerts"]) and health["alerts"]
    assert "登录已过期" not in pages["overview"] and "登录已过期" not in json.dumps(read, ensure_ascii=False)
    assert all(not c["channel"].startswith(("bark", "json", "http")) for c in daily["push"]["channels"])
    assert read["search"]["total"] == owner["search"]["total"] and f"找到 {read['search']['total']} 篇" in pages["search"]
    assert read["record"] == owner["record"]


def test_the_cli_refuses_a_token_that_is_none_of_the_servers_and_serves_one_that_is(db_url):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADAR_MCP")}
    refused = subprocess.run([sys.executable, "-m", "include.radar.cli", "mcp"], cwd=REPO, capture_output=True,
                             text=True, timeout=120, env={**env, "RADAR_MCP_READ_TOKEN": READ,
                                                          "RADAR_MCP_TOKEN": "guessed-" + "g" * 40})
    assert refused.returncode == 2 and "RADAR_MCP_TOKEN" in refused.stderr and refused.stdout == ""
    weak = subprocess.run([sys.executable, "-m", "include.radar.cli", "mcp"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**env, "RADAR_MCP_READ_TOKEN": "short", "RADAR_MCP_TOKEN": "short"})
    assert weak.returncode == 2 and "at least 32" in weak.stderr

    async def run() -> Any:
        async with _session(READ, ["-m", "include.radar.cli", "mcp"], env) as session:
            return await session.call_tool("slot_health", {})

    result = asyncio.run(run())  # through the CLI: the settings and the database as the api-server finds them
    # no slot ran on this database: whichever slots the wall clock's hour lists (a slot due since the schema was
    # made shows as never run), none has a run
    assert not result.is_error and "spend" not in result.structured_content
    assert not any(slot["has_run"] for slot in result.structured_content["slots"])


def test_streamable_http_answers_a_bearer_token_only_and_each_request_by_its_own(db_url):
    from uvicorn import Config, Server

    from include.radar.web.resources import AppResources

    radar = AppResources(make_settings, db_url, FixedClock(LATER))
    app = mcp_server.http_app(radar, mcp_server.Tokens(owner=OWNER, read=READ))
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()  # connections wait in its backlog until the server accepts: no start to wait for
    url = f"http://127.0.0.1:{listening.getsockname()[1]}{mcp_server.HTTP_PATH}"
    server = Server(Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[listening])), daemon=True)
    thread.start()
    try:
        for headers in ({}, {"Authorization": "Bearer " + "x" * 40}, {"Authorization": OWNER}):
            answer = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers)
            assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer")

        async def call(token: str) -> Any:
            client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
            async with client, streamable_http_client(url, http_client=client) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                return (await session.call_tool("slot_health", {})).structured_content

        assert "spend" not in asyncio.run(call(READ)) and "spend" in asyncio.run(call(OWNER))
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_an_answer_past_its_bound_loses_the_tail_of_its_longest_list_and_says_so():
    answer = {"day": "2026-02-04", "analyses": [{"summary": "长" * 100} for _ in range(100)], "slots": [1, 2]}
    fitted = mcp_server.fitted(answer, limit=2000)
    assert len(json.dumps(fitted, ensure_ascii=False)) <= 2000 + len('"truncated": ["analyses"], ')
    assert fitted["truncated"] == ["analyses"] and 0 < len(fitted["analyses"]) < 100 and fitted["slots"] == [1, 2]
    assert mcp_server.fitted({"a": 1}, limit=2000) == {"a": 1}


def test_the_owner_and_the_read_token_are_told_apart_and_a_wrong_one_is_nobody():
    tokens = mcp_server.Tokens(owner=OWNER, read=READ)
    assert tokens.of_header(f"Bearer {OWNER}").owner and not tokens.of_header(f"bearer {READ}").owner
    assert tokens.of_header(OWNER) is None and tokens.access(OWNER[:-1]) is None and tokens.access(None) is None


def test_the_docs_page_names_every_tool_and_holds_a_desktop_config_that_parses():
    text = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in text for name in TOOLS)
    config = json.loads(text.split("```json\n", 1)[1].split("```", 1)[0])
    server = config["mcpServers"]["opportunity-radar"]
    assert server["args"][:2] == ["-m", "include.radar.cli"] and server["args"][-1] == "mcp"
    assert set(server["env"]) == {"RADAR_MCP_TOKEN"}  # the server's own tokens are in its env files, not here


HOSTILE = "\x00\u202e" + "中" * 200_000 + "'; DROP TABLE analysis_result; --"


def test_hostile_arguments_cost_their_call_only_with_a_clear_answer(db_url):
    """A client is outside input too: a huge, NUL-laden or out-of-range argument to each tool gets an error or a
    bounded answer, and the session serves the next call."""
    calls = {"search": ("search_history", {"query": HOSTILE, "after": "9999-99-99", "account": HOSTILE}),
             "day": ("daily_report", {"day": HOSTILE}), "id": ("get_analysis", {"analysis_id": 2**70}),
             "open": ("open_opportunities", {"target": HOSTILE, "account": "\x00"}),
             "record": ("track_record", {"horizon": HOSTILE, "after": "\x00"}), "health": ("slot_health", {})}
    _, answers = _drive(READ, calls)
    for key, answer in answers.items():
        assert len(json.dumps(answer, ensure_ascii=False)) < 110_000, key
        assert "Traceback" not in json.dumps(answer), key
    assert "error" in answers["day"] and "日报地址应为" in answers["day"]["error"]
    assert "error" in answers["id"]
    assert "slots" in answers["health"]  # the session still serves
    with connect() as conn:
        assert conn.execute("SELECT to_regclass('analysis_result') IS NOT NULL AS here").fetchone()["here"]
