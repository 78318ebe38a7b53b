"""The radar's read-only MCP server (docs/mcp.md): the pages' answers (web/mcp_tools.py) as tools of the official
MCP SDK, for an AI assistant. ``python -m include.radar.cli mcp`` (``make mcp``) speaks stdio, for a desktop
assistant on the reader's own machine; ``--http`` streamable HTTP, for one elsewhere.

Every caller holds a bearer token: ``RADAR_MCP_OWNER_TOKEN`` sees what an Airflow login sees on the pages,
``RADAR_MCP_READ_TOKEN`` what a pushed link's read session sees. Over stdio the client's token is
``RADAR_MCP_TOKEN`` in the environment it starts the server with; over HTTP each request's ``Authorization:
Bearer`` header, any other request a 401. No tool writes: the connection is the pages' read-only one (their own
login where one is set). An answer is bounded (MAX_ANSWER_CHARS, TOOL_SECONDS) and scrubbed of known secrets.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import psycopg
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from include.radar.core import db, redact, settings
from include.radar.core.clock import SYSTEM, Clock
from include.radar.web import mcp_tools
from include.radar.web.mcp_tools import Access, ToolInputError
from include.radar.web.resources import AppResources

log = logging.getLogger(__name__)

NAME = "opportunity-radar"
TOOL_SECONDS = 20.0  # a tool's whole answer; each statement has the pages' own 5 s (web/resources.py)
MAX_ANSWER_CHARS = 100_000  # of an answer's JSON: the longest lists are cut to fit (``truncated`` says so)
TOKEN_MIN_CHARS = 32
HTTP_HOST, HTTP_PORT, HTTP_PATH = "127.0.0.1", 8765, "/mcp"
_TOKEN_SHAPE = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no spaces: what a header carries unchanged
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
INSTRUCTIONS = ("机会雷达（Opportunity Radar）的只读数据：历史搜索、某日日报、单条分析及其证据、未了结的机会、战绩汇总、"
                "最近时段的覆盖与运行状况。数字与报告页面相同；链接指向报告页面。")


class TokenError(ValueError):
    """The server's tokens are missing or malformed, or the client's token is none of them."""


@dataclass(frozen=True)
class Tokens:
    """The server's two bearer tokens; either may be unset (then no client holds that kind)."""

    owner: str | None = None
    read: str | None = None

    @classmethod
    def from_environment(cls) -> Tokens:
        tokens = cls(settings.deployment("RADAR_MCP_OWNER_TOKEN"), settings.deployment("RADAR_MCP_READ_TOKEN"))
        for name, value in (("RADAR_MCP_OWNER_TOKEN", tokens.owner), ("RADAR_MCP_READ_TOKEN", tokens.read)):
            if value is not None and (len(value) < TOKEN_MIN_CHARS or not _TOKEN_SHAPE.fullmatch(value)):
                raise TokenError(f"{name} must be at least {TOKEN_MIN_CHARS} printable ASCII characters without "
                                 "spaces: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'")
        if tokens.owner is None and tokens.read is None:
            raise TokenError("set RADAR_MCP_OWNER_TOKEN and/or RADAR_MCP_READ_TOKEN: the MCP server answers token "
                             "holders only (docs/mcp.md)")
        if tokens.owner is not None and tokens.owner == tokens.read:
            raise TokenError("RADAR_MCP_OWNER_TOKEN and RADAR_MCP_READ_TOKEN must differ")
        redact.register(tokens.owner, tokens.read)
        return tokens

    def access(self, presented: str | None) -> Access | None:
        """What the holder of ``presented`` may see; None for no token or a wrong one (compared in constant time)."""
        given = (presented or "").encode()
        if self.owner and hmac.compare_digest(given, self.owner.encode()):
            return Access(owner=True)
        if self.read and hmac.compare_digest(given, self.read.encode()):
            return Access(owner=False)
        return None

    def of_header(self, authorization: str | None) -> Access | None:
        scheme, _, value = (authorization or "").partition(" ")
        return self.access(value.strip()) if scheme.lower() == "bearer" else None


AccessOf = Callable[[Context], Access]  # who asks, from a tool call's context


# ------------------------------------------------------------------------------------------ an answer


def _scrubbed(value: Any) -> Any:
    """Every string of an answer through the secrets' net (core/redact.py), a second one behind the views'."""
    if isinstance(value, str):
        return redact.scrub(value)
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str))


def fitted(answer: dict[str, Any], limit: int = MAX_ANSWER_CHARS) -> dict[str, Any]:
    """``answer`` within ``limit`` characters of JSON: its longest top-level list halved until it fits, and
    ``truncated`` names the lists that were cut."""
    cut: list[str] = []
    while _size(answer) > limit:
        lists = [(_size(v), k) for k, v in answer.items() if isinstance(v, list) and v]
        if not lists:
            raise ToolError("回答过大，请缩小查询范围。")
        _, longest = max(lists)
        answer = {**answer, longest: answer[longest][: len(answer[longest]) // 2]}
        cut.append(longest)
    return {**answer, "truncated": sorted(set(cut))} if cut else answer


async def bounded(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one tool's reading in a worker thread, at most TOOL_SECONDS; a failure is the tool's error message
    (the page's words for bad input; never an exception's text, which may name a host)."""
    try:
        with anyio.fail_after(TOOL_SECONDS):
            answer = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
    except ToolInputError as exc:
        raise ToolError(str(exc)) from None
    except TimeoutError:
        raise ToolError(f"查询超过 {TOOL_SECONDS:g} 秒，已放弃；请缩小查询范围后重试。") from None
    except psycopg.errors.QueryCanceled:  # a statement past the pages' timeout (an OperationalError too)
        raise ToolError("查询超时，请缩小查询范围后重试。") from None
    except (db.DatabaseUnavailable, psycopg.OperationalError) as exc:
        log.error("radar database unavailable: %s", redact.scrub(str(exc)))
        raise ToolError("雷达数据库暂时无法连接，请稍后再试。") from None
    except Exception:
        log.exception("an MCP tool failed")
        raise ToolError("雷达内部错误，详情见服务器日志。") from None
    return fitted(_scrubbed(answer))


# ------------------------------------------------------------------------------------------- the tools


def build(radar: AppResources, access_of: AccessOf) -> MCPServer:
    """The server and its six read-only tools over ``radar`` (the pages' resources: settings, read-only
    connection, clock); ``access_of`` says who asks."""
    server = MCPServer(NAME, instructions=INSTRUCTIONS)
    tool = partial(server.tool, annotations=READ_ONLY)

    async def answer(ctx: Context, fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
        return await bounded(partial(fn, radar, access_of(ctx), *args))

    @tool()
    async def search_history(ctx: Context, query: str, after: str = "", before: str = "", account: str = "",
                             band: str = "", watch: bool = False, page: int = 1) -> dict[str, Any]:
        """搜索雷达的全部历史文章与分析（与搜索页相同的中文分词搜索）。after/before：YYYY-MM-DD；band：80、60、40、0
        （分数段）；watch：只看命中关注列表的（仅所有者令牌）；page：第几页，每页 20 条。"""
        form = {"q": query, "from": after, "to": before, "account": account, "band": band,
                "watch": "1" if watch else "", "page": str(page)}
        return await answer(ctx, mcp_tools.search_history, form)

    @tool()
    async def daily_report(ctx: Context, day: str = "") -> dict[str, Any]:
        """某一天（YYYY-MM-DD，留空为今天）的日报：状态、统计、摘要、重点机会、当日分析、各时段与推送，同日报页。"""
        return await answer(ctx, mcp_tools.daily_report, day)

    @tool()
    async def get_analysis(ctx: Context, analysis_id: int) -> dict[str, Any]:
        """一条分析（编号来自日报或搜索）：评分、摘要、各个机会及其证据引文与核验结果、同一事件的其他报道、战绩。"""
        return await answer(ctx, mcp_tools.analysis, analysis_id)

    @tool()
    async def open_opportunities(ctx: Context, target: str = "", account: str = "") -> dict[str, Any]:
        """战绩中尚未了结（还有期限在等待行情）的机会，最新的在前；可按标的（名称或代码）和/或公众号筛选。"""
        return await answer(ctx, mcp_tools.open_opportunities, target, account)

    @tool()
    async def track_record(ctx: Context, horizon: str = "5", after: str = "", before: str = "", account: str = "",
                           opp_type: str = "", band: str = "") -> dict[str, Any]:
        """战绩页的汇总：命中率与平均超额收益，总体及按评分段、公众号、类型、方向。horizon：1、5 或 20（T+N）。"""
        form = {"h": horizon, "from": after, "to": before, "account": account, "type": opp_type, "band": band}
        return await answer(ctx, mcp_tools.track_record, form)

    @tool()
    async def slot_health(ctx: Context) -> dict[str, Any]:
        """最近时段的运行状况与公众号覆盖：各时段计数与状态、下一时段、今日告警、外部服务、数据、部署检查。"""
        return await answer(ctx, mcp_tools.slot_health)

    return server


# ---------------------------------------------------------------------------------------- the transports


def stdio_access(tokens: Tokens, presented: str | None) -> Access:
    """The access of the stdio client: the token it started the server with (``RADAR_MCP_TOKEN``)."""
    access = tokens.access(presented)
    if access is None:
        raise TokenError("RADAR_MCP_TOKEN (the client's token) is missing or none of the server's tokens")
    return access


def serve_stdio(radar: AppResources, access: Access) -> None:
    """Serve one client over stdin/stdout until it closes them (the SDK points stray output at stderr)."""
    anyio.run(build(radar, lambda ctx: access).run_stdio_async)


class BearerGate:
    """ASGI middleware: an HTTP request without a valid ``Authorization: Bearer`` token is a 401, before the
    MCP transport sees it; the app's lifespan passes through."""

    def __init__(self, app: Any, tokens: Tokens) -> None:
        self.app, self.tokens = app, tokens

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            if self.tokens.of_header(headers.get("authorization")) is None:
                body = json.dumps({"error": "a valid bearer token is required (docs/mcp.md)"}).encode()
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="radar"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(radar: AppResources, tokens: Tokens, host: str = HTTP_HOST) -> BearerGate:
    """The streamable HTTP app behind the token gate; each tool call's access is its own request's token."""

    def access_of(ctx: Context) -> Access:
        access = tokens.of_header((ctx.headers or {}).get("authorization"))
        if access is None:  # the gate let no such request through; refuse rather than guess
            raise ToolError("a valid bearer token is required")
        return access

    app = build(radar, access_of).streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    return BearerGate(app, tokens)


def serve_http(radar: AppResources, tokens: Tokens, host: str = HTTP_HOST, port: int = HTTP_PORT) -> None:
    import uvicorn

    log.info("MCP over streamable HTTP at http://%s:%d%s (bearer token required)", host, port, HTTP_PATH)
    uvicorn.run(http_app(radar, tokens, host), host=host, port=port, log_level="warning")


def resources(clock: Clock | None = None) -> AppResources:
    """The pages' resources as the api-server has them: settings read as its (the environment, then Airflow's
    Variables), the pages' own read-only login where one is set (loader.load(pages=True))."""
    return AppResources(lambda: settings.load_settings(settings.server_lookup), None, clock or SYSTEM)


def main(http: bool, host: str, port: int) -> int:
    """``cli mcp``: stdio unless ``http``; a missing or wrong token is an error before anything is served."""
    tokens = Tokens.from_environment()
    if http:
        serve_http(resources(), tokens, host, port)
    else:
        serve_stdio(resources(), stdio_access(tokens, settings.deployment("RADAR_MCP_TOKEN")))
    return 0
