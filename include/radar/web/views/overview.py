"""View model of the overview page: the days, the accounts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from include.radar.collect.coverage import Coverage
from include.radar.web.views.common import (
    PUSH_LABELS,
    REPORT_EMPTY,
    REPORT_LABELS,
    REPORT_MISSING,
    REPORT_STATUS,
    SLOT_DONE,
    WEEKDAYS,
    Links,
    PageContext,
    Row,
    day_label,
    error_text,
    local_time,
    money,
)
from include.radar.web.views.slots import DayRuns, PushView, SlotView, day_push, push_state, slot_views


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
    body_problems: str = ""  # "验证页 2 · 正文不全 1 · 已删除 1": bodies that were WeChat's pages or cut
    last_body_problem: str = ""  # the last one's reason and when


BODY_PROBLEM_LABELS = (("bodies_verification", "验证页"), ("bodies_incomplete", "正文不全"), ("bodies_gone", "已删除"))


def body_problems(row: Row) -> str:
    """The account's bodies that were WeChat's verification page, cut, or a deleted article's page, by kind."""
    counts = [(label, row.get(column) or 0) for column, label in BODY_PROBLEM_LABELS]
    return " · ".join(f"{label} {n}" for label, n in counts if n)


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
    """``spend``: the LLM cost per day (store.operations.spend_by_day); a day without ledger rows shows "—"."""
    spend = spend or {}
    views = []
    for r in rows:
        report_state = (
            REPORT_STATUS.get(r["report_status"], REPORT_MISSING)
            if r["report_status"] is not None
            else (REPORT_MISSING if r["analysed"] or r["failed"] or r["slots_run"] else REPORT_EMPTY)
        )
        state = push_state(r["push_total"], r["push_sent"], r["push_failed"], r.get("push_unknown") or 0)
        views.append(
            DayRowView(
                day=r["day"],
                label=f"{r['day'].month}月{r['day'].day}日",
                weekday=WEEKDAYS[r["day"].weekday()],
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
                body_problems=body_problems(r),
                last_body_problem=_when_what(r.get("last_body_problem_at"), r.get("last_body_problem"), tz),
            )
        )
    return sorted(views, key=lambda a: (a.healthy, a.name))


@dataclass(frozen=True)
class AccountsHeadline:
    """The accounts section's headline (``alarm``: marked, and the section open)."""

    text: str
    alarm: bool


def accounts_headline(accounts: Sequence[AccountView], silent: Mapping[str, str],
                      collection: Coverage | None) -> AccountsHeadline:
    """How the accounts are: the ones failing, backing off or quiet (``silent``, health.py), else what was not seen.

    An all-clear only on evidence: every account checked by a slot, and the day's ``collection`` (coverage.py)
    covering every account WeRSS listed; 0 % coverage beside 「全部正常」 would tell the reader nothing is wrong
    while nothing is collected.
    """
    troubled = [a for a in accounts if not a.healthy or a.mp_id in silent]
    if troubled:
        return AccountsHeadline(f"{len(troubled)} 个异常", True)
    if not accounts:
        return AccountsHeadline("暂无记录", False)
    unchecked = sum(1 for a in accounts if a.last_checked == "—")
    if unchecked:
        return AccountsHeadline(f"{unchecked} 个尚未检查", True)
    if collection is None:
        return AccountsHeadline("采集情况未知", True)
    if not collection.active:
        return AccountsHeadline("WeRSS 没有列出任何公众号", True)
    if collection.covered < collection.active:
        return AccountsHeadline(f"采集覆盖 {collection.covered}/{collection.active}（{collection.share}%）", True)
    return AccountsHeadline("全部正常", False)


def _when_what(at: datetime | None, what: Any, tz: ZoneInfo) -> str:
    text = error_text(what, 160)
    return f"{local_time(at, tz, '%m-%d %H:%M')} {text}".strip() if text else ""


def overview_page(page: PageContext, day_runs: DayRuns, *, days: Sequence[Row], accounts: Iterable[Row],
                  day_spend: Mapping[date, float] | None = None) -> OverviewPage:
    """Today's slots and push (``day_runs``), the recent ``days`` (store.reports.recent_days) with what each cost
    (``day_spend``, store.operations.spend_by_day), and the WeRSS ``accounts``."""
    today, settings, links = page.today, page.settings, page.links
    slots = settings.schedule_slots
    slot_list = slot_views(today, day_runs, page)
    today_row = next((r for r in days if r["day"] == today), None)
    return OverviewPage(
        today=today,
        today_label=day_label(today),
        today_url=links.daily(today),
        now_label=local_time(page.now, page.tz, "%H:%M"),
        slots=slot_list,
        slots_done=sum(s.state == SLOT_DONE for s in slot_list),
        push=day_push(day_runs, page),
        analysed=today_row["analysed"] if today_row else 0,
        opportunities=today_row["opportunities"] if today_row else 0,
        failed=today_row["failed"] if today_row else 0,
        best_score=today_row["max_score"] if today_row else None,
        threshold=settings.push_score_threshold,
        daily_slot=max(slots) if slots else "",
        days=day_rows(days, today=today, slot_count=len(slots), links=links, spend=day_spend,
                      currency=settings.deepseek_currency),
        accounts=account_views(accounts, now=page.now, tz=page.tz),
    )
