"""View models of the report pages: store rows in, small immutable objects out.

Everything here is a pure function of its arguments (no database, no clock, no settings lookup), so the
page logic that matters — slot states, push status, ordering, which links carry a signature, what counts as
a safe link — is tested without a server. Templates only lay out what these objects hold.

Text from articles and from the LLM is never marked safe here, with one exception: the daily digest,
rendered by markdown-it with raw HTML disabled and only http(s) links and this app's own page links kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlsplit
from zoneinfo import ZoneInfo

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markupsafe import Markup

from include.radar import DAG_ID, events, redact
from include.radar.pricing import format_money
from include.radar.rubric import band_of
from include.radar.slots import slot_at
from include.radar.web.trust import Quote, Trust, trust_view

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
_SLOT_STATUS = {0: SLOT_RUNNING, 1: SLOT_DONE, 2: SLOT_FAILED}

PUSH_SENT, PUSH_PENDING, PUSH_FAILED, PUSH_PARTIAL, PUSH_NONE = "sent", "pending", "failed", "partial", "none"
PUSH_LABELS = {
    PUSH_SENT: "已送达",
    PUSH_PENDING: "发送中",
    PUSH_FAILED: "发送失败",
    PUSH_PARTIAL: "部分失败",
    PUSH_NONE: "未推送",
}
_NOTE_STATUS = {0: PUSH_PENDING, 1: PUSH_SENT, 2: PUSH_FAILED}

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
_REPORT_STATUS = {0: REPORT_BUILDING, 1: REPORT_OK, 2: REPORT_FAILED, 3: REPORT_PARTIAL}
REPORT_FAILED_NOTICE = "日报生成失败，请稍后刷新"
REPORT_PARTIAL_NOTICE = "日报根据已完成的部分生成"

TYPE_LABELS = {
    "stock": "个股",
    "sector": "行业",
    "fund": "基金",
    "commodity": "商品",
    "macro": "宏观",
    "bond": "债券",
    "fx": "外汇",
    "crypto": "加密资产",
    "other": "其他",
    "none": "无机会",
}
DIRECTION_LABELS = {"bullish": "看多", "bearish": "看空", "neutral": "中性", "watch": "观察"}
_WEEKDAYS = "一二三四五六日"


def type_label(value: str | None) -> str:
    return TYPE_LABELS.get(value or "", value or "—")


def direction_label(value: str | None) -> str:
    return DIRECTION_LABELS.get(value or "", value or "—")


def day_label(day: date) -> str:
    """``2026年1月8日 周四``: how the pages name a report date."""
    return f"{day.year}年{day.month}月{day.day}日 周{_WEEKDAYS[day.weekday()]}"


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


def span(seconds: float) -> str:
    """A wall-clock span as people say it: ``45 秒``, ``12 分钟``, ``1 小时 5 分``, ``2 天 3 小时``."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{max(seconds, 0)} 秒"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} 分钟"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} 小时 {minutes} 分" if minutes else f"{hours} 小时"
    days, hours = divmod(hours, 24)
    return f"{days} 天 {hours} 小时" if hours else f"{days} 天"


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


# ---------------------------------------------------------------------------------------------- markdown

_ANALYSIS_PATH = re.compile(r"/analysis/([0-9]{1,18})")
_DAILY_PATH = re.compile(r"/daily/([0-9]{4}-[0-9]{2}-[0-9]{2})")

# What decides a digest link's target: a rewriter from digest_link_rewriter, or safe_http_url alone.
LinkRule = Callable[[str], "str | None"]


def _is_app_path(href: str) -> bool:
    """A path on this host (``/radar/...``): one leading slash, never ``//`` or ``/\\`` (another host)."""
    return href.startswith("/") and not href.startswith(("//", "/\\"))


def _vet_links(state: StateCore) -> None:
    """Core rule: a link keeps its ``<a>`` only when the page's link rule gives it a target; else its text stays.

    The digest is LLM output that may quote article text: markdown-it already refuses ``javascript:``,
    ``vbscript:``, ``file:`` and ``data:`` links, but relative and protocol-relative ones (``//host/x``) would
    open another site or a wrong page inside the Airflow iframe. Links cannot nest in CommonMark, so a dropped
    ``link_open`` is matched by the next ``link_close``; a stack keeps that true whatever the plugins do.
    """
    rule: LinkRule = state.env.get("rewrite_href") or safe_http_url
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        kept: list[Token] = []
        dropped: list[bool] = []
        for token in block.children:
            if token.type == "link_open":
                href = rule(str(token.attrGet("href") or ""))
                allowed = href is not None and (safe_http_url(href) is not None or _is_app_path(href))
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
    # Remote images would be blocked by the page's CSP anyway; render them as links instead of broken images.
    md.disable("image")
    md.core.ruler.push("radar_vet_links", _vet_links)

    def link_open(renderer: Any, tokens: list[Any], idx: int, options: Any, env: dict[str, Any]) -> str:
        token = tokens[idx]
        token.attrSet("rel", "noopener noreferrer nofollow")
        if safe_http_url(str(token.attrGet("href") or "")):  # external: leave the Airflow iframe
            token.attrSet("target", "_blank")
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", link_open)
    return md


_MD = _markdown()


def digest_link_rewriter(report_base_url: str, links: Links) -> LinkRule:
    """The digest's link rule: report pages become this app's links, other absolute http(s) URLs stay, the
    rest (relative, protocol-relative, other schemes) gets no link (None).

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
        return safe_http_url(href)

    return rewrite


def render_markdown(text: str, rewrite_href: LinkRule | None = None) -> Markup:
    """Digest markdown as HTML: raw HTML is escaped; links survive only as ``rewrite_href`` (or, without one,
    :func:`safe_http_url`) allows, and always only to http(s) URLs or paths on this host."""
    return Markup(_MD.render(text or "", {"rewrite_href": rewrite_href}))


# ----------------------------------------------------------------------------------------------- slots


@dataclass(frozen=True)
class StepLink:
    """A failed step of a slot (``ingest``, ``analyse:42``) and the Airflow log page of its task."""

    step: str
    url: str | None


@dataclass(frozen=True)
class SlotView:
    slot: str
    state: str
    label: str
    dag_run_url: str | None = None
    new_count: int = 0
    analysed_count: int = 0
    failed_count: int = 0
    opportunity_count: int = 0
    attempts: int = 0
    started: str = ""
    finished: str = ""
    error: str | None = None
    skipped_count: int = 0  # malformed WeRSS rows skipped
    deferred_count: int = 0  # analyses left to later slots (a deadline came first)
    warnings: list[str] = field(default_factory=list)  # handled problems: skipped rows, failed accounts, deadlines
    error_log: list[str] = field(default_factory=list)  # every step error of every run, fixed since or not
    run_date: date | None = None
    budget_deferred: int = 0  # articles the daily budget held back to the next day
    duration: str = ""  # first start to last finish ("已运行 …" while running)
    cost: str | None = None  # what the slot's LLM calls cost (None: not looked up)
    failed_steps: list[StepLink] = field(default_factory=list)  # outstanding step errors, linked to their logs
    dag_url: str | None = None  # a slot that should have run and did not: the DAG's page in Airflow

    @property
    def has_run(self) -> bool:
        return self.state not in (SLOT_PENDING, SLOT_LATE)


def slot_views(
    day: date,
    slots: Sequence[str],
    runs: Iterable[Row],
    *,
    now: datetime,
    late_after_minutes: int,
    tz: ZoneInfo,
    links: Links,
    spend: Mapping[int, float] | None = None,
    currency: str = "USD",
) -> list[SlotView]:
    """The configured slots of ``day`` (plus any other slot that ran), each with its state.

    A slot without a run row is ``late`` once ``now`` passes its scheduled time plus the grace period,
    otherwise ``pending``; a row is running (0), done (1) or failed (2, with its error). ``spend`` is the
    LLM cost per slot run id (store.slot_spend), in ``currency``.
    """
    by_slot = {r["slot"]: r for r in runs}
    views = []
    for slot in sorted(set(slots) | set(by_slot)):
        run = by_slot.get(slot)
        if run is None:
            due = slot_at(day, slot, tz).scheduled_at + timedelta(minutes=late_after_minutes)
            state = SLOT_LATE if now > due else SLOT_PENDING
            views.append(missing_slot_view(day, slot, state, links))
            continue
        views.append(slot_view(run, now=now, tz=tz, links=links, spend=spend, currency=currency))
    return views


def missing_slot_view(day: date, slot: str, state: str, links: Links) -> SlotView:
    """A planned slot without a run: pending, or late (then linked to the DAG in Airflow)."""
    return SlotView(slot=slot, state=state, label=SLOT_LABELS[state], run_date=day,
                    dag_url=links.dag() if state == SLOT_LATE else None)


def failed_step_links(run: Row, links: Links) -> list[StepLink]:
    """The outstanding step errors of a run, each linked to its task's page (``analyse:<id>`` → ``analyse``:
    the map index of an article is not stored, and the task page lists them all)."""
    errors = run.get("step_errors")
    steps = sorted(str(k) for k in errors) if isinstance(errors, dict) else []
    return [StepLink(step=error_text(s, 80),
                     url=links.task_log(run.get("dag_id"), run.get("dag_run_id"), s.split(":", 1)[0].strip()))
            for s in steps[:10]]


def run_duration(run: Row, now: datetime) -> str:
    started, finished = run.get("started_at"), run.get("finished_at")
    if started is None:
        return ""
    if finished is not None:
        return span((finished - started).total_seconds()) if finished >= started else ""
    return f"已运行 {span((now - started).total_seconds())}" if now >= started else ""


def slot_view(
    run: Row, *, now: datetime, tz: ZoneInfo, links: Links, spend: Mapping[int, float] | None = None,
    currency: str = "USD",
) -> SlotView:
    """One slot run row as a card."""
    state = _SLOT_STATUS.get(run["status"], SLOT_FAILED)
    cost = None if spend is None else spend.get(run["id"], 0.0)  # no ledger row: nothing was spent
    return SlotView(
        slot=run["slot"],
        state=state,
        label=SLOT_LABELS[state],
        dag_run_url=links.dag_run(run.get("dag_id"), run.get("dag_run_id")),
        new_count=run.get("new_count") or 0,
        analysed_count=run.get("analysed_count") or 0,
        failed_count=run.get("failed_count") or 0,
        opportunity_count=run.get("opportunity_count") or 0,
        attempts=run.get("attempts") or 0,
        started=_clock(run.get("started_at"), run.get("run_date"), tz),
        finished=_clock(run.get("finished_at"), run.get("run_date"), tz),
        error=error_text(run.get("error"), 2000) if state == SLOT_FAILED else None,
        skipped_count=run.get("skipped_count") or 0,
        deferred_count=run.get("deferred_count") or 0,
        warnings=_entries(run.get("warnings"), "message"),
        error_log=_entries(run.get("error_log"), "error"),
        run_date=run.get("run_date"),
        budget_deferred=run.get("budget_deferred") or 0,
        duration=run_duration(run, now),
        cost=money(cost, currency) if cost is not None else None,
        failed_steps=failed_step_links(run, links) if state == SLOT_FAILED else [],
    )


def _clock(moment: datetime | None, day: date | None, tz: ZoneInfo) -> str:
    """A slot's start or end as a time of its own day, with the date when it ran on another (a backfill, a
    redo, a run past midnight)."""
    if moment is None:
        return ""
    same_day = day is not None and moment.astimezone(tz).date() == day
    return local_time(moment, tz, "%H:%M" if same_day else "%m-%d %H:%M")


def _entries(value: Any, key: str, limit: int = 20) -> list[str]:
    """Lines of a slot's jsonb log (warnings, error_log): ``step: text``, scrubbed, newest last."""
    items = value if isinstance(value, list) else []
    lines = [f"{i.get('step') or '?'}: {i.get(key) or ''}" for i in items if isinstance(i, dict)]
    return [error_text(line, 300) for line in lines[-limit:]]


# ------------------------------------------------------------------------------------------------ pushes


@dataclass(frozen=True)
class ChannelPush:
    channel: str
    state: str
    label: str
    attempts: int
    when: str
    error: str | None


@dataclass(frozen=True)
class PushView:
    state: str
    label: str
    channels: list[ChannelPush] = field(default_factory=list)


def push_state(total: int, sent: int, failed: int) -> str:
    """One state for a push that went to several channels: all sent, some failed, all failed, or pending."""
    if total == 0:
        return PUSH_NONE
    if sent == total:
        return PUSH_SENT
    if failed == total:
        return PUSH_FAILED
    if failed:
        return PUSH_PARTIAL
    return PUSH_PENDING


def silent_label(daily_run: Row | None) -> str | None:
    """Why a day's report was not pushed, when its daily slot chose not to: a backfill, or an operator's redo."""
    if not daily_run or daily_run.get("decision") != "silent":
        return None
    return "补跑不推送" if daily_run.get("run_type") == "backfill" else "重建不推送"


def push_view(rows: Iterable[Row], tz: ZoneInfo, daily_run: Row | None = None) -> PushView:
    """The daily push of a date from its ``notification_log`` rows (one per channel); ``daily_run``: the
    day's daily slot run, to say why nothing was pushed."""
    channels = []
    for r in rows:
        state = _NOTE_STATUS.get(r["status"], PUSH_FAILED)
        channels.append(
            ChannelPush(
                channel=r.get("channel") or "",
                state=state,
                label=PUSH_LABELS[state],
                attempts=r.get("attempts") or 0,
                when=local_time(r.get("sent_at") or r.get("updated_at"), tz, "%m-%d %H:%M"),
                error=(error_text(r.get("error"), 300) or "未知错误") if state == PUSH_FAILED else None,
            )
        )
    state = push_state(
        len(channels),
        sum(c.state == PUSH_SENT for c in channels),
        sum(c.state == PUSH_FAILED for c in channels),
    )
    label = (silent_label(daily_run) if state == PUSH_NONE else None) or PUSH_LABELS[state]
    return PushView(state=state, label=label, channels=channels)


# ------------------------------------------------------------------------------------------------ overview


@dataclass(frozen=True)
class DayRowView:
    day: date
    label: str
    weekday: str
    url: str
    analysed: int
    opportunities: int
    failed: int
    max_score: int | None
    slots_done: int
    slots_total: int
    report_state: str
    report_label: str
    push_state: str
    push_label: str
    is_today: bool
    cost: str = "—"


@dataclass(frozen=True)
class AccountView:
    name: str
    mp_id: str
    last_article: str
    last_checked: str
    consecutive_failures: int
    backoff_until: str
    last_error: str
    healthy: bool
    rows_skipped: int = 0
    bodies_missing: int = 0
    last_skip_reason: str = ""


@dataclass(frozen=True)
class OverviewPage:
    today: date
    today_label: str
    today_url: str
    now_label: str
    slots: list[SlotView]
    slots_done: int
    push: PushView
    analysed: int
    opportunities: int
    failed: int
    best_score: int | None
    threshold: int
    daily_slot: str
    days: list[DayRowView]
    accounts: list[AccountView]


def day_rows(
    rows: Iterable[Row], *, today: date, slot_count: int, links: Links, spend: Mapping[date, float] | None = None,
    currency: str = "USD",
) -> list[DayRowView]:
    """``spend``: the LLM cost per day (store.spend_by_day); a day without ledger rows shows "—"."""
    spend = spend or {}
    views = []
    for r in rows:
        report_state = (
            _REPORT_STATUS.get(r["report_status"], REPORT_MISSING)
            if r["report_status"] is not None
            else (REPORT_MISSING if r["analysed"] or r["failed"] or r["slots_run"] else REPORT_EMPTY)
        )
        state = push_state(r["push_total"], r["push_sent"], r["push_failed"])
        views.append(
            DayRowView(
                day=r["day"],
                label=f"{r['day'].month}月{r['day'].day}日",
                weekday=_WEEKDAYS[r["day"].weekday()],
                url=links.daily(r["day"]),
                analysed=r["analysed"],
                opportunities=r["opportunities"],
                failed=r["failed"],
                max_score=r["max_score"],
                slots_done=r["slots_done"],
                slots_total=max(slot_count, r["slots_run"]),
                report_state=report_state,
                report_label=REPORT_LABELS[report_state],
                push_state=state,
                push_label=PUSH_LABELS[state],
                is_today=r["day"] == today,
                cost=money(spend[r["day"]], currency) if r["day"] in spend else "—",
            )
        )
    return views


def account_views(rows: Iterable[Row], *, now: datetime, tz: ZoneInfo) -> list[AccountView]:
    """WeRSS accounts, the ones in trouble first (failing or backing off), then by name."""
    views = []
    for r in rows:
        backoff = r.get("backoff_until")
        backing_off = backoff is not None and backoff > now
        failures = r.get("consecutive_failures") or 0
        views.append(
            AccountView(
                name=r.get("name") or r.get("mp_id") or "",
                mp_id=r.get("mp_id") or "",
                last_article=local_time(r.get("last_article_at"), tz, "%m-%d %H:%M") or "—",
                last_checked=local_time(r.get("last_checked_at"), tz, "%m-%d %H:%M") or "—",
                consecutive_failures=failures,
                backoff_until=local_time(backoff, tz, "%m-%d %H:%M") if backing_off else "",
                last_error=error_text(r.get("last_error"), 160),
                healthy=failures == 0 and not backing_off,
                rows_skipped=r.get("rows_skipped") or 0,
                bodies_missing=r.get("bodies_missing") or 0,
                last_skip_reason=error_text(r.get("last_skip_reason"), 160),
            )
        )
    return sorted(views, key=lambda a: (a.healthy, a.name))


def overview_page(
    *,
    today: date,
    now: datetime,
    tz: ZoneInfo,
    slots: Sequence[str],
    late_after_minutes: int,
    threshold: int,
    runs: Iterable[Row],
    notifications: Iterable[Row],
    days: Sequence[Row],
    accounts: Iterable[Row],
    links: Links,
    slot_spend: Mapping[int, float] | None = None,
    day_spend: Mapping[date, float] | None = None,
    currency: str = "USD",
) -> OverviewPage:
    slot_list = slot_views(today, slots, runs, now=now, late_after_minutes=late_after_minutes, tz=tz, links=links,
                           spend=slot_spend, currency=currency)
    today_row = next((r for r in days if r["day"] == today), None)
    return OverviewPage(
        today=today,
        today_label=day_label(today),
        today_url=links.daily(today),
        now_label=local_time(now, tz, "%H:%M"),
        slots=slot_list,
        slots_done=sum(s.state == SLOT_DONE for s in slot_list),
        push=push_view(notifications, tz, next((r for r in runs if slots and r.get("slot") == max(slots)), None)),
        analysed=today_row["analysed"] if today_row else 0,
        opportunities=today_row["opportunities"] if today_row else 0,
        failed=today_row["failed"] if today_row else 0,
        best_score=today_row["max_score"] if today_row else None,
        threshold=threshold,
        daily_slot=max(slots) if slots else "",
        days=day_rows(days, today=today, slot_count=len(slots), links=links, spend=day_spend, currency=currency),
        accounts=account_views(accounts, now=now, tz=tz),
    )


# --------------------------------------------------------------------------------------------- daily page


@dataclass(frozen=True)
class SourceView:
    """Another account's article about the same event, under the entry its best-evidenced analysis leads."""

    id: int
    url: str
    title: str
    mp_name: str
    published: str
    score: int
    unverified: bool


@dataclass(frozen=True)
class AnalysisCard:
    id: int
    url: str
    score: int
    hot: bool
    title: str
    mp_name: str
    slot: str
    published: str
    summary: str
    top_type: str
    reused: bool = False  # a repost carrying another analysis: listed, not counted as a new opportunity
    unverified: bool = False  # none of its evidence is in the article: listed, never pushed
    sources: list[SourceView] = field(default_factory=list)  # the other articles about the same event

    @property
    def accounts(self) -> list[str]:
        return list(dict.fromkeys([self.mp_name, *(s.mp_name for s in self.sources)]))


@dataclass(frozen=True)
class FailureView:
    title: str
    mp_name: str
    slot: str
    published: str
    attempts: int
    error: str
    source_url: str | None


@dataclass(frozen=True)
class TopOpportunity:
    analysis_id: int
    url: str
    title: str
    reason: str
    score: int | None
    sources: list[str] = field(default_factory=list)  # the accounts that reported the event, when several did


@dataclass(frozen=True)
class Stats:
    analysed: int
    opportunities: int
    failed: int
    max_score: int | None
    pending: int = 0
    budget_deferred: int = 0  # articles the daily budget left for the next day


@dataclass(frozen=True)
class PendingView:
    title: str
    mp_name: str
    published: str
    source_url: str | None


@dataclass(frozen=True)
class DailyPage:
    day: date
    day_label: str
    prev_url: str
    next_url: str | None
    overview_url: str
    report_state: str
    report_label: str
    notice: str | None
    reasons: list[str]
    warnings: list[str]
    digest_html: Markup | None
    top: list[TopOpportunity]
    watchlist: list[str]
    analyses: list[AnalysisCard]
    failures: list[FailureView]
    pending: list[PendingView]
    stats: Stats
    slots: list[SlotView]
    slots_done: list[str]
    push: PushView
    threshold: int
    cost: str = "—"  # everything the day's LLM calls cost, failed ladders and the digest included


def analysis_cards(rows: Iterable[Row], *, threshold: int, tz: ZoneInfo, links: Links) -> list[AnalysisCard]:
    """The day's analyses, one card per real-world event led by its best-evidenced analysis, the other
    accounts' articles listed under it; verified evidence first, then best score (ties: oldest first)."""
    return [
        AnalysisCard(
            id=r["id"],
            url=links.analysis(r["id"]),
            score=r["score"],
            hot=r["score"] >= threshold,
            title=r.get("title") or "（无标题）",
            mp_name=r.get("mp_name") or "",
            slot=r.get("slot") or "",
            published=local_time(r.get("published_at"), tz, "%m-%d %H:%M"),
            summary=r.get("summary") or "",
            top_type=type_label(r.get("top_type")),
            reused=bool(r.get("reused_from_id")),
            unverified=r.get("evidence_verified") is False,
            sources=[source_view(m, tz, links) for m in entry.others],
        )
        for entry in events.entries(rows)
        for r in [entry.lead]
    ]


def source_view(row: Row, tz: ZoneInfo, links: Links) -> SourceView:
    return SourceView(
        id=row["id"],
        url=links.analysis(row["id"]),
        title=row.get("title") or "（无标题）",
        mp_name=row.get("mp_name") or "",
        published=local_time(row.get("published_at"), tz, "%m-%d %H:%M"),
        score=row["score"],
        unverified=row.get("evidence_verified") is False,
    )


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def top_opportunities(digest_json: Any, cards: Sequence[AnalysisCard], links: Links) -> list[TopOpportunity]:
    """``digest_json["top_opportunities"]`` (LLM output, so validated item by item) as links to analyses."""
    items = digest_json.get("top_opportunities") if isinstance(digest_json, dict) else None
    by_id = {c.id: c for c in cards}
    tops = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        analysis_id = _as_int(item.get("analysis_id"))
        if analysis_id is None or analysis_id <= 0:
            continue
        card = by_id.get(analysis_id)
        title = str(item.get("title") or (card.title if card else f"分析 #{analysis_id}"))
        tops.append(
            TopOpportunity(
                analysis_id=analysis_id,
                url=links.analysis(analysis_id),
                title=title,
                reason=str(item.get("reason") or ""),
                score=card.score if card else None,
                sources=card.accounts if card and card.sources else [],
            )
        )
    return tops


def watchlist(digest_json: Any) -> list[str]:
    items = digest_json.get("watchlist") if isinstance(digest_json, dict) else None
    if not isinstance(items, list):
        return []
    return [str(i).strip() for i in items if isinstance(i, (str, int, float)) and str(i).strip()][:20]


def _stats(
    report: Row | None, cards: Sequence[AnalysisCard], failures: Sequence[Row], budget_deferred: int = 0
) -> Stats:
    live = Stats(
        analysed=sum(1 + len(c.sources) for c in cards),
        # a repost is not a second opportunity, and one without verified evidence is not one at all
        opportunities=sum(c.hot and not c.reused and not c.unverified for c in cards),
        failed=len(failures),
        max_score=max((c.score for c in cards), default=None),
        budget_deferred=budget_deferred,
    )
    stored = report.get("stats") if report else None
    if not isinstance(stored, dict):
        return live

    def pick(key: str, fallback: Any) -> Any:
        value = _as_int(stored.get(key))
        return fallback if value is None else value

    return Stats(
        analysed=pick("analysed", live.analysed),
        opportunities=pick("opportunities", live.opportunities),
        failed=pick("failed", live.failed),
        max_score=pick("max_score", live.max_score),
        pending=pick("pending", 0),
        budget_deferred=pick("budget_deferred", live.budget_deferred),
    )



def pending_views(digest_json: Any, tz: ZoneInfo) -> list[PendingView]:
    """The articles the report listed as still waiting for an analysis (a snapshot taken when it was built)."""
    items = digest_json.get("pending") if isinstance(digest_json, dict) else None
    views = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        try:
            published = datetime.fromisoformat(str(item.get("published_at")))
        except ValueError:
            published = None
        views.append(PendingView(
            title=str(item.get("title") or "（无标题）"),
            mp_name=str(item.get("mp_name") or ""),
            published=local_time(published, tz, "%m-%d %H:%M") if published and published.tzinfo else "",
            source_url=safe_http_url(item.get("url") if isinstance(item.get("url"), str) else None),
        ))
    return views


def failure_reasons(report: Row | None, runs: Iterable[Row]) -> list[str]:
    """Why the report failed: its own error lines, then the errors of the day's failed slots (seed 10.2)."""
    reasons: list[str] = []
    if report and report.get("error"):
        reasons += [line.strip() for line in str(report["error"]).splitlines() if line.strip()]
    for r in runs:
        if r.get("status") == 2 and r.get("error"):
            reasons += [f"{r['slot']} {line.strip()}" for line in str(r["error"]).splitlines() if line.strip()]
    return list(dict.fromkeys(error_text(reason, 500) for reason in reasons))


def daily_page(
    *,
    day: date,
    today: date,
    now: datetime,
    tz: ZoneInfo,
    slots: Sequence[str],
    late_after_minutes: int,
    threshold: int,
    report_base_url: str,
    report: Row | None,
    analyses: Iterable[Row],
    failures: Sequence[Row],
    runs: Sequence[Row],
    notifications: Iterable[Row],
    links: Links,
    cost: str = "—",
    currency: str = "USD",
    slot_spend: Mapping[int, float] | None = None,
    budget_deferred: int = 0,
) -> DailyPage:
    """``cost``: the day's spend (health.day_cost); ``budget_deferred``: the articles the budget held back
    that day, for a day whose report does not say (store.day_budget_deferred)."""
    cards = analysis_cards(analyses, threshold=threshold, tz=tz, links=links)
    failure_views = [
        FailureView(
            title=f.get("title") or "（无标题）",
            mp_name=f.get("mp_name") or "",
            slot=f.get("slot") or "",
            published=local_time(f.get("published_at"), tz, "%m-%d %H:%M"),
            attempts=f.get("attempts") or 0,
            error=error_text(f.get("last_error"), 500) or "未知原因",
            source_url=safe_http_url(f.get("url")),
        )
        for f in failures
    ]
    has_data = bool(cards or failures or runs)
    notice: str | None = None
    reasons: list[str] = []
    if report is not None:
        state = _REPORT_STATUS.get(report["status"], REPORT_FAILED)
        if state == REPORT_FAILED:
            notice, reasons = REPORT_FAILED_NOTICE, failure_reasons(report, runs)
        elif state == REPORT_PARTIAL:
            notice, reasons = REPORT_PARTIAL_NOTICE, failure_reasons(report, runs)
        elif state == REPORT_BUILDING:
            notice = "日报正在生成，请稍后刷新。"
    elif has_data:
        state = REPORT_MISSING
        notice = f"当日日报尚未生成（{max(slots) if slots else '22:00'} 生成），以下是已完成的分析。"
    else:
        state = REPORT_EMPTY
        notice = "这一天没有任何数据：没有运行记录、分析或日报。"
    digest_md = (report or {}).get("digest_md") or ""
    digest_json = (report or {}).get("digest_json") or {}
    slot_list = slot_views(day, slots, runs, now=now, late_after_minutes=late_after_minutes, tz=tz, links=links,
                           spend=slot_spend, currency=currency)
    return DailyPage(
        day=day,
        day_label=day_label(day),
        prev_url=links.daily(day - timedelta(days=1)),
        next_url=links.daily(day + timedelta(days=1)) if day < today else None,
        overview_url=links.overview(),
        report_state=state,
        report_label=REPORT_LABELS[state],
        notice=notice,
        reasons=reasons,
        warnings=[error_text(str(w), 300) for w in (digest_json.get("warnings") or []) if w][:10],
        digest_html=render_markdown(digest_md, digest_link_rewriter(report_base_url, links)) if digest_md else None,
        top=top_opportunities(digest_json, cards, links),
        watchlist=watchlist(digest_json),
        analyses=cards,
        failures=failure_views,
        pending=pending_views(digest_json, tz),
        stats=_stats(report, cards, failures, budget_deferred),
        slots=slot_list,
        slots_done=[s.slot for s in slot_list if s.state == SLOT_DONE],  # live, not the report's snapshot
        push=push_view(notifications, tz, next((r for r in runs if slots and r.get("slot") == max(slots)), None)),
        threshold=threshold,
        cost=cost,
    )


# ------------------------------------------------------------------------------------------ analysis page


@dataclass(frozen=True)
class OpportunityView:
    name: str
    type_label: str
    direction: str
    direction_label: str
    targets: list[str]
    horizon: str
    catalyst: str
    evidence: list[Quote]
    risks: list[str]
    confidence: str


@dataclass(frozen=True)
class Reused:
    id: int
    url: str
    title: str | None


@dataclass(frozen=True)
class EventView:
    """The other accounts' articles about the same real-world event, and which analysis leads the event."""

    others: list[SourceView]
    lead: SourceView | None  # None when this analysis leads it
    note: str | None  # why this analysis joined the event (similarity, shared entities)


def event_view(row: Row, members: Iterable[Row], tz: ZoneInfo, links: Links) -> EventView | None:
    """``members``: every analysis of the row's event (store.event_members); None when it stands alone."""
    members = list(members)
    if len(members) < 2:
        return None
    lead = events.entries(members)[0].lead
    return EventView(
        others=[source_view(m, tz, links) for m in sorted(members, key=events.lead_key) if m["id"] != row["id"]],
        lead=None if lead["id"] == row["id"] else source_view(lead, tz, links),
        note=row.get("event_note"),
    )


@dataclass(frozen=True)
class AnalysisPage:
    id: int
    title: str
    mp_name: str
    published: str
    source_url: str | None
    raw_url: str
    score: int
    hot: bool
    threshold: int
    has_opportunity: bool
    top_type: str
    summary: str
    opportunities: list[OpportunityView]
    model: str
    prompt_version: str
    tokens: list[tuple[str, str]]
    cost: str
    total_cost: str | None  # the article's calls, failed attempts included, when that differs from ``cost``
    latency: str
    llm_calls: int
    analysed_at: str
    reused_from: Reused | None
    run_label: str | None
    daily_url: str | None
    dag_run_url: str | None
    overview_url: str
    trust: Trust
    band: str  # the rubric band of the score, as the prompt defines it for the threshold
    event: EventView | None = None  # the same event's other articles, when other accounts wrote about it


def _texts(value: Any) -> list[str]:
    """A jsonb list (targets, risks, evidence) as display strings, whatever shape the LLM gave it."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, dict):
            text = " ".join(str(v) for v in item.values() if v not in (None, ""))
        else:
            text = str(item)
        if text.strip():
            out.append(text.strip())
    return out


def opportunity_views(rows: Iterable[Row], quotes: Mapping[str, Quote] | None = None) -> list[OpportunityView]:
    """``quotes``: each evidence quote's check by its text (analyses from before the checks have none)."""
    quotes = quotes or {}
    views = []
    for r in rows:
        try:
            confidence = float(r.get("confidence") or 0)
        except (TypeError, ValueError):
            confidence = 0.0
        views.append(
            OpportunityView(
                name=r.get("name") or "",
                type_label=type_label(r.get("type")),
                direction=r.get("direction") or "",
                direction_label=direction_label(r.get("direction")),
                targets=_texts(r.get("targets")),
                horizon=r.get("horizon") or "",
                catalyst=r.get("catalyst") or "",
                evidence=[quotes.get(t) or Quote(t, None) for t in _texts(r.get("evidence"))],
                risks=_texts(r.get("risks")),
                confidence=f"{confidence * 100:.0f}%" if 0 <= confidence <= 1 else f"{confidence:g}",
            )
        )
    return views


def analysis_page(
    *,
    row: Row,
    opportunities: Iterable[Row],
    reused: Row | None,
    threshold: int,
    tz: ZoneInfo,
    links: Links,
    total_cost: str | None = None,
    event_members: Iterable[Row] = (),
) -> AnalysisPage:
    """``total_cost``: what every call for the article cost, failed attempts included (health.item_total);
    ``event_members``: every analysis of its event (store.event_members)."""
    run_date = row.get("run_date")
    reused_id = row.get("reused_from_id")
    trust, quotes = trust_view(row.get("result_json"), row.get("consistency_note"), row.get("clean_text"))
    return AnalysisPage(
        id=row["id"],
        title=row.get("title") or "（无标题）",
        mp_name=row.get("mp_name") or "",
        published=local_time(row.get("published_at"), tz),
        source_url=safe_http_url(row.get("url")),
        raw_url=row.get("url") or "",
        score=row["score"],
        hot=row["score"] >= threshold,
        threshold=threshold,
        has_opportunity=bool(row.get("has_opportunity")),
        top_type=type_label(row.get("top_type")),
        summary=row.get("summary") or "",
        opportunities=opportunity_views(opportunities, quotes),
        model=row.get("model") or "",
        prompt_version=row.get("prompt_version") or "",
        tokens=[
            ("输入", f"{row.get('prompt_tokens') or 0:,}"),
            ("输出", f"{row.get('completion_tokens') or 0:,}"),
            ("推理", f"{row.get('reasoning_tokens') or 0:,}"),
            ("缓存命中", f"{row.get('cache_hit_tokens') or 0:,}"),
            ("缓存未命中", f"{row.get('cache_miss_tokens') or 0:,}"),
        ],
        cost=money(row.get("cost"), row.get("currency") or "USD"),
        total_cost=total_cost,
        latency=duration(row.get("latency_ms")),
        llm_calls=row.get("llm_calls") or 0,
        analysed_at=local_time(row.get("created_at"), tz),
        reused_from=Reused(
            id=reused_id,
            url=links.analysis(reused_id),
            title=(reused or {}).get("title"),
        )
        if reused_id
        else None,
        run_label=f"{run_date.isoformat()} {row.get('slot')}" if run_date else None,
        daily_url=links.daily(run_date) if run_date else None,
        dag_run_url=links.dag_run(row.get("dag_id"), row.get("dag_run_id")),
        overview_url=links.overview(),
        trust=trust,
        band=_band(row["score"], threshold),
        event=event_view(row, event_members, tz, links),
    )


def _band(score: int, threshold: int) -> str:
    low, high, meaning = band_of(score, threshold)
    return f"{low}–{high} 分档：{meaning.split('，例如')[0]}"
