"""Labels, formatting, links and markdown shared by the report pages' view models."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlsplit
from zoneinfo import ZoneInfo

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markupsafe import Markup

from include.radar import DAG_ID
from include.radar.core import redact
from include.radar.core.pricing import format_money
from include.radar.core.settings import Settings

Row = Mapping[str, Any]

# ------------------------------------------------------------------------------------------------ labels

SLOT_DONE, SLOT_RUNNING, SLOT_FAILED, SLOT_PENDING, SLOT_LATE = "done", "running", "failed", "pending", "late"
SLOT_LABELS = {
    SLOT_DONE: "已完成",
    SLOT_RUNNING: "运行中",
    SLOT_FAILED: "失败",
    SLOT_PENDING: "未到时间",
    SLOT_LATE: "超时未运行",
}

PUSH_SENT, PUSH_PENDING, PUSH_FAILED, PUSH_PARTIAL, PUSH_NONE = "sent", "pending", "failed", "partial", "none"
PUSH_UNKNOWN = "unknown"  # the send started and its sender never recorded an answer: never resent by itself
PUSH_LABELS = {
    PUSH_SENT: "已送达",
    PUSH_PENDING: "发送中",
    PUSH_FAILED: "发送失败",
    PUSH_PARTIAL: "部分失败",
    PUSH_UNKNOWN: "结果未知",
    PUSH_NONE: "未推送",
}
PUSH_UNKNOWN_NOTICE = "发送已开始但没有记录结果，系统不会自动重发：请在该通道确认；没收到可用「强制推送」重推"

REPORT_OK, REPORT_BUILDING, REPORT_FAILED, REPORT_MISSING, REPORT_EMPTY = "ok", "building", "failed", "missing", "empty"
REPORT_PARTIAL = "partial"
REPORT_LABELS = {
    REPORT_OK: "已生成",
    REPORT_BUILDING: "生成中",
    REPORT_FAILED: "生成失败",
    REPORT_PARTIAL: "部分完成",
    REPORT_MISSING: "未生成",
    REPORT_EMPTY: "无",
}
REPORT_STATUS = {0: REPORT_BUILDING, 1: REPORT_OK, 2: REPORT_FAILED, 3: REPORT_PARTIAL}
REPORT_FAILED_NOTICE = "日报生成失败，请稍后刷新"
REPORT_PARTIAL_NOTICE = "日报根据已完成的部分生成"

WEEKDAYS = "一二三四五六日"


def day_label(day: date) -> str:
    """``2026年1月8日 周四``: how the pages name a report date."""
    return f"{day.year}年{day.month}月{day.day}日 周{WEEKDAYS[day.weekday()]}"


def local_time(moment: datetime | None, tz: ZoneInfo, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """A stored (UTC, aware) timestamp as wall-clock text in ``tz``; empty for missing values."""
    if moment is None:
        return ""
    if moment.tzinfo is None:  # the schema stores timestamptz; a naive value would be a bug upstream
        return moment.strftime(fmt)
    return moment.astimezone(tz).strftime(fmt)


def safe_http_url(url: str | None) -> str | None:
    """``url`` when it is an absolute http(s) URL that is safe to put in an ``href``, else None.

    Article URLs come from WeRSS (ultimately from the article); anything else — ``javascript:``, ``data:``,
    relative paths, URLs with whitespace or control characters — is shown as text, never linked.
    """
    if not url or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return url


def short(text: str | None, limit: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_text(text: str | None, limit: int) -> str:
    """An error message for a page: scrubbed of anything secret-shaped (rows written before the store
    scrubbed them, or by another tool), then shortened."""
    return short(redact.scrub(text), limit)


def money(value: Any, currency: str = "USD") -> str:
    try:
        amount = Decimal(str(value or 0))
    except ArithmeticError:
        return "—"
    return format_money(amount, currency)


def duration(ms: int | None) -> str:
    if not ms:
        return "—"
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


# ------------------------------------------------------------------------------------------------- links


@dataclass(frozen=True)
class Links:
    """Every URL a page renders, relative to where the app is mounted.

    ``root`` is the mount path (``/radar`` inside Airflow, empty when served alone) and ``airflow_root`` the
    Airflow UI root on the same origin, so links work in the Airflow iframe and behind a path prefix alike.
    ``signer`` is set only on a page opened through a signed link that may hand out signatures (a signed
    daily page): then links to the analyses in ``signable`` (that day's) carry their own signature so a phone
    user can click through. Other ids — say, one an article talked the digest into citing — stay unsigned.
    """

    root: str = ""
    airflow_root: str = ""
    signer: Callable[[str], str] | None = None
    signable: frozenset[int] = frozenset()

    def overview(self) -> str:
        return f"{self.root}/"

    def daily(self, day: date) -> str:
        return f"{self.root}/daily/{day.isoformat()}"

    def profile(self) -> str:
        return f"{self.root}/profile"

    def search(self) -> str:
        return f"{self.root}/search"

    def entity(self, name: str) -> str:
        return f"{self.root}/entity/{quote(name, safe='')}"

    def trends(self) -> str:
        return f"{self.root}/trends"

    def weekly(self, monday: date | None = None) -> str:
        return f"{self.root}/weekly" + (f"/{monday.isoformat()}" if monday else "")

    def record(self) -> str:
        return f"{self.root}/record"

    def analysis(self, analysis_id: int) -> str:
        path = f"/analysis/{int(analysis_id)}"
        if self.signer is not None and analysis_id in self.signable:
            return f"{self.root}{path}?{self.signer(path)}"
        return self.root + path

    def airflow_home(self) -> str:
        return f"{self.airflow_root}/"

    def dag_run(self, dag_id: str | None, dag_run_id: str | None) -> str | None:
        """The Airflow UI page of a DAG run; run ids contain ``:`` and ``+``, so both parts are encoded."""
        if not dag_id or not dag_run_id:
            return None
        return f"{self.airflow_root}/dags/{quote(dag_id, safe='')}/runs/{quote(dag_run_id, safe='')}"

    def dag(self, dag_id: str = DAG_ID) -> str:
        """The Airflow UI page of a DAG (its runs, and a slot that never ran)."""
        return f"{self.airflow_root}/dags/{quote(dag_id, safe='')}"

    def task_log(self, dag_id: str | None, dag_run_id: str | None, task_id: str) -> str | None:
        """The Airflow 3 UI page of a task instance (its log); a mapped task's page lists its map indexes."""
        run = self.dag_run(dag_id, dag_run_id)
        return f"{run}/tasks/{quote(task_id, safe='')}" if run and task_id else None


@dataclass(frozen=True)
class PageContext:
    """What the views of one request share, read once by its route (web/pages.py: page_context): the settings,
    the request's moment, the business time zone and the page's links."""

    settings: Settings
    now: datetime
    tz: ZoneInfo
    links: Links

    @property
    def today(self) -> date:
        return self.now.astimezone(self.tz).date()


# ---------------------------------------------------------------------------------------------- markdown

_ANALYSIS_PATH = re.compile(r"/analysis/([0-9]{1,18})")
_DAILY_PATH = re.compile(r"/daily/([0-9]{4}-[0-9]{2}-[0-9]{2})")

# What decides a digest link's target: a rewriter from digest_link_rewriter; without one, no link at all.
LinkRule = Callable[[str], "str | None"]


def _no_link(href: str) -> str | None:
    return None


def _is_app_path(href: str) -> bool:
    """A path on this host (``/radar/...``): one leading slash, never ``//`` or ``/\\`` (another host)."""
    return href.startswith("/") and not href.startswith(("//", "/\\"))


def _vet_links(state: StateCore) -> None:
    """Core rule: a link keeps its ``<a>`` only when the page's link rule gives it a target; else its text stays.

    The digest is LLM output that may quote article text, and an article can make the model write a phishing
    URL: only the radar's own pages the digest refers to (``/analysis/<id>``, ``/daily/<date>``, rewritten by
    :func:`digest_link_rewriter`) become links; every other URL, whatever its form (``[x](https://…)``,
    ``<https://…>``, ``javascript:``, relative, protocol-relative), stays text. Links cannot nest in
    CommonMark, so a dropped ``link_open`` is matched by the next ``link_close``; a stack keeps that true
    whatever the plugins do.
    """
    rule: LinkRule = state.env.get("rewrite_href") or _no_link
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        kept: list[Token] = []
        dropped: list[bool] = []
        for token in block.children:
            if token.type == "link_open":
                href = rule(str(token.attrGet("href") or ""))
                allowed = href is not None and _is_app_path(href)
                dropped.append(not allowed)
                if not allowed:
                    continue
                token.attrSet("href", href)
            elif token.type == "link_close" and dropped and dropped.pop():
                continue
            kept.append(token)
        block.children = kept


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    # Remote images would be blocked by the page's CSP anyway; no image: its text stays (and no link, below).
    md.disable("image")
    md.core.ruler.push("radar_vet_links", _vet_links)

    def link_open(renderer: Any, tokens: list[Any], idx: int, options: Any, env: dict[str, Any]) -> str:
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", link_open)
    return md


_MD = _markdown()


def digest_link_rewriter(report_base_url: str, links: Links) -> LinkRule:
    """The digest's link rule: report pages become this app's links; anything else gets no link (None) and
    stays text — the digest is written by the LLM, and article links come only from WeRSS rows.

    The digest cites canonical URLs (``report_base_url`` + ``/analysis/N`` or ``/daily/YYYY-MM-DD``) or bare
    page paths; rewritten, they work inside the Airflow iframe and, on a signed daily page, analysis links
    get their own signature like every other analysis link there.
    """
    base = report_base_url.rstrip("/")

    def rewrite(href: str) -> str | None:
        path = href[len(base) :] if base and href.startswith(base + "/") else href
        if _is_app_path(path):
            bare = path.split("#", 1)[0].split("?", 1)[0]
            if match := _ANALYSIS_PATH.fullmatch(bare):
                return links.analysis(int(match.group(1)))
            if match := _DAILY_PATH.fullmatch(bare):
                try:
                    return links.daily(date.fromisoformat(match.group(1)))
                except ValueError:
                    pass
        return None

    return rewrite


def render_markdown(text: str, rewrite_href: LinkRule | None = None) -> Markup:
    """Digest markdown as HTML: raw HTML is escaped; links survive only as ``rewrite_href`` allows (the radar's
    own pages), never to another site; without a rule, no link survives."""
    return Markup(_MD.render(text or "", {"rewrite_href": rewrite_href}))
