"""View model of the daily report page."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from markupsafe import Markup

from include.radar.collect.coverage import Coverage
from include.radar.pushes import events
from include.radar.pushes.labels import type_label
from include.radar.web.views.common import (
    REPORT_BUILDING,
    REPORT_EMPTY,
    REPORT_FAILED,
    REPORT_FAILED_NOTICE,
    REPORT_LABELS,
    REPORT_MISSING,
    REPORT_PARTIAL,
    REPORT_PARTIAL_NOTICE,
    REPORT_STATUS,
    SLOT_DONE,
    Links,
    PageContext,
    Row,
    day_label,
    digest_link_rewriter,
    error_text,
    local_time,
    render_markdown,
    safe_http_url,
)
from include.radar.web.views.slots import DayRuns, PushView, SlotView, day_push, slot_views


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
    pushed: str | None = None  # the slot (MM-DD HH:MM) whose opportunity push first linked to its event
    follow_up: bool = False  # that push was on an earlier day: this retells pushed news

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
    coverage: Coverage | None = None  # the share of the accounts the day covered, as the report worked it out


def analysis_cards(rows: Iterable[Row], page: PageContext) -> list[AnalysisCard]:
    """The day's analyses, one card per real-world event led by its best-evidenced analysis, the other
    accounts' articles listed under it; verified evidence first, then best score (ties: oldest first)."""
    threshold, tz, links = page.settings.push_score_threshold, page.tz, page.links
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
            pushed=r.get("pushed"),
            follow_up=any(m.get("follow_up") for m in entry.members),
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


# what a report's reason (``kind: detail``, report/digest.py) or a slot's step error (``step: error``) is about,
# in the page's words; the detail after it is the radar's own Chinese, or an error message quoted as it came
REASON_KINDS = {
    "digest": "日报摘要改用数据库生成", "analysis": "分析", "werss": "WeRSS", "budget": "LLM 预算",
    "pending": "待分析", "grouping": "事件归并", "open_slot": "开始时段", "ingest": "抓取文章",
    "select_articles": "挑选文章", "analyse": "分析", "summarise": "汇总", "group_events": "事件归并",
    "push_opportunity": "推送机会", "skip_push": "记录不推送", "build_daily_report": "生成日报",
    "rebuild_daily_report": "重建日报", "push_daily_report": "推送日报", "catch_up_daily_report": "补发日报",
    "weekly_summary": "周报", "track_record": "战绩", "retention": "数据保留", "close_slot": "结束时段",
    "deadline": "截止时间",
}
_REASON = re.compile(r"^(?:(\d{2}:\d{2}) )?([a-z_]+)(?::\d+)?: (.*)$", re.DOTALL)


def reason_line(reason: str) -> str:
    """``reason`` as the page says it: ``22:00 ingest: WeRSSError: …`` → ``22:00 抓取文章：WeRSSError: …``; a line
    of another shape is shown as it is."""
    m = _REASON.match(reason)
    if not m or m[2] not in REASON_KINDS:
        return reason
    return f"{m[1] + ' ' if m[1] else ''}{REASON_KINDS[m[2]]}：{m[3]}"


def failure_reasons(report: Row | None, runs: Iterable[Row]) -> list[str]:
    """Why the report failed: its own error lines, then the errors of the day's failed slots."""
    reasons: list[str] = []
    if report and report.get("error"):
        reasons += [line.strip() for line in str(report["error"]).splitlines() if line.strip()]
    for r in runs:
        if r.get("status") == 2 and r.get("error"):
            reasons += [f"{r['slot']} {line.strip()}" for line in str(r["error"]).splitlines() if line.strip()]
    return list(dict.fromkeys(reason_line(error_text(reason, 500)) for reason in reasons))


def failure_views(failures: Iterable[Row], tz: ZoneInfo) -> list[FailureView]:
    """The day's articles whose analysis failed for good, each with its attempts and last error."""
    return [
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


def report_state(
    report: Row | None, runs: Sequence[Row], slots: Sequence[str], *, has_data: bool
) -> tuple[str, str | None, list[str]]:
    """The report's state, the notice above the page and, for a failed or partial report, why."""
    if report is None and has_data:
        return REPORT_MISSING, f"当日日报尚未生成（{max(slots) if slots else '22:00'} 生成），以下是已完成的分析。", []
    if report is None:
        return REPORT_EMPTY, "这一天没有任何数据：没有运行记录、分析或日报。", []
    state = REPORT_STATUS.get(report["status"], REPORT_FAILED)
    if state == REPORT_FAILED:
        return state, REPORT_FAILED_NOTICE, failure_reasons(report, runs)
    if state == REPORT_PARTIAL:
        return state, REPORT_PARTIAL_NOTICE, failure_reasons(report, runs)
    if state == REPORT_BUILDING:
        return state, "日报正在生成，请稍后刷新。", []
    return state, None, []


def daily_page(
    page: PageContext,
    day: date,
    day_runs: DayRuns,
    *,
    report: Row | None,
    analyses: Iterable[Row],
    failures: Sequence[Row],
    cost: str = "—",
    budget_deferred: int = 0,
) -> DailyPage:
    """``cost``: the day's spend (web/costs.py: day_cost); ``budget_deferred``: the articles the budget held back
    that day, for a day whose report does not say (store.operations.day_budget_deferred)."""
    settings, links, tz = page.settings, page.links, page.tz
    runs, slots = day_runs.runs, settings.schedule_slots
    cards = analysis_cards(analyses, page)
    state, notice, reasons = report_state(report, runs, slots, has_data=bool(cards or failures or runs))
    digest_md = (report or {}).get("digest_md") or ""
    digest_json = (report or {}).get("digest_json") or {}
    slot_list = slot_views(day, day_runs, page)
    stored = (report or {}).get("stats")
    return DailyPage(
        day=day,
        day_label=day_label(day),
        prev_url=links.daily(day - timedelta(days=1)),
        next_url=links.daily(day + timedelta(days=1)) if day < page.today else None,
        overview_url=links.overview(),
        report_state=state,
        report_label=REPORT_LABELS[state],
        notice=notice,
        reasons=reasons,
        warnings=[error_text(str(w), 300) for w in (digest_json.get("warnings") or []) if w][:10],
        digest_html=(render_markdown(digest_md, digest_link_rewriter(settings.report_base_url, links))
                     if digest_md else None),
        top=top_opportunities(digest_json, cards, links),
        watchlist=watchlist(digest_json),
        analyses=cards,
        failures=failure_views(failures, tz),
        pending=pending_views(digest_json, tz),
        stats=_stats(report, cards, failures, budget_deferred),
        slots=slot_list,
        slots_done=[s.slot for s in slot_list if s.state == SLOT_DONE],  # live, not the report's snapshot
        push=day_push(day_runs, page),
        threshold=settings.push_score_threshold,
        cost=cost,
        coverage=Coverage.from_stats(stored.get("coverage")) if isinstance(stored, dict) else None,
    )
