"""The report pages: the overview (``/``), a day's report (``/daily/{day}``), one analysis
(``/analysis/{id}``), and the 👍/👎/🤷 a reader casts on them (``POST /analysis/{id}/feedback``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from include.radar import store
from include.radar.pushes import ranking
from include.radar.report import weekly
from include.radar.store.events import event_pushes, with_pushes
from include.radar.web import costs, csrf, feedback
from include.radar.web.auth import PageError, ReaderDep, airflow_user, require_reader, user_name
from include.radar.web.feedback import day_signer, feedback_forms
from include.radar.web.inputs import parse_day, parse_id, read_body
from include.radar.web.pages import get_pages, page_context, page_links
from include.radar.web.resources import AppResources, get_resources
from include.radar.web.views import analysis as analysis_views
from include.radar.web.views import daily as daily_views
from include.radar.web.views import health
from include.radar.web.views import overview as overview_views
from include.radar.web.views import profile as profile_views
from include.radar.web.views import record as record_views
from include.radar.web.views import trends as trend_views
from include.radar.web.views.common import PageContext, local_time, money
from include.radar.web.views.slots import DayRuns

RECENT_DAYS = 14
SEEN_COOKIE = "radar_seen"  # when this browser last opened the overview: what is new since then
TOP_LISTED = 5
NEW_LISTED = 10

router = APIRouter(dependencies=[Depends(require_reader)])
# a vote's signed action is its own authority (web/feedback.py): no reader dependency
votes = APIRouter()


def _last_seen(request: Request, now: datetime) -> datetime | None:
    """The previous overview visit of this browser; a cookie that is no plausible time is no visit."""
    value = request.cookies.get(SEEN_COOKIE, "")
    if not (value.isascii() and value.isdigit() and len(value) <= 12):
        return None
    seconds = int(value)  # compared before it becomes a date: year 33658 is no datetime at all
    if not (now - timedelta(days=400)).timestamp() <= seconds <= now.timestamp():
        return None
    return datetime.fromtimestamp(seconds, UTC)


@router.get("/", response_class=HTMLResponse)
def overview(request: Request, reader: ReaderDep) -> HTMLResponse:
    resources = get_resources(request)
    ctx = page_context(request)
    settings, now, today, links = ctx.settings, ctx.now, ctx.today, ctx.links
    currency = settings.deepseek_currency
    with resources.connect() as conn:
        runs = store.slot_runs.slot_runs_for_day(conn, today)
        notes = store.reports.daily_notifications(conn, today)
        days = store.reports.recent_days(conn, today, RECENT_DAYS, settings.push_score_threshold)
        accounts = store.articles.accounts(conn)
        by_day = store.operations.spend_by_day(
            conn, today - timedelta(days=max(RECENT_DAYS, costs.SPEND_DAYS) - 1), today, currency)
        run_spend = store.operations.slot_spend(conn, [r["id"] for r in runs])
        health_view = health.gather(conn, ctx, spend_by_day=by_day)
        weights = resources.ranking_weights(conn)
        learned_more, learned_less = weights.learned()
        today_rows = ranking.annotate(store.analyses.day_analyses(conn, today), weights)
        last_seen = _last_seen(request, now)
        new_rows, new_total = store.focus.analyses_since(conn, last_seen, NEW_LISTED) if last_seen else ([], 0)
    page = overview_views.overview_page(ctx, DayRuns(runs, notes, run_spend), days=days, accounts=accounts,
                                        day_spend=by_day)
    top = [c for c in daily_views.analysis_cards(today_rows, ctx) if not c.reused][:TOP_LISTED]
    fresh = daily_views.analysis_cards(ranking.annotate(new_rows, weights), ctx)
    response = get_pages(request).render(
        request, "overview.html", settings=settings, reader=reader, links=links, page=page, health=health_view,
        accounts_head=overview_views.accounts_headline(page.accounts, health_view.silent, health_view.collection),
        learned_more=learned_more, learned_less=learned_less, top_today=top,
        since=local_time(last_seen, ctx.tz) if last_seen else None, new_cards=fresh, new_total=new_total,
        new_limit=NEW_LISTED,
    )
    response.set_cookie(SEEN_COOKIE, str(int(now.timestamp())), max_age=366 * 86400, httponly=True,
                        samesite="lax", path=links.root or "/", secure=request.url.scheme == "https")
    return response


@router.get("/daily/{day}", response_class=HTMLResponse)
def daily(request: Request, day: str, reader: ReaderDep) -> HTMLResponse:
    resources = get_resources(request)
    ctx = page_context(request)
    settings, tz = ctx.settings, ctx.tz
    report_day = parse_day(day, ctx.today)
    with resources.connect() as conn:
        day_read = read_day(conn, resources, report_day, settings.deepseek_currency, evaluations=reader.personal)
        analyses = day_read.analyses
        verdicts = store.focus.feedback_of(conn, [a["id"] for a in analyses])
    histogram, histogram_text = trend_views.score_histogram(
        [a["score"] for a in analyses if not a.get("reused_from_id")], settings.push_score_threshold)
    # a signed daily link opens that day's analyses too, and nothing else
    ctx = replace(ctx, links=page_links(request, day_signer(reader, settings), frozenset(a["id"] for a in analyses)))
    links = ctx.links
    page, evaluated, excluded = day_read.page(ctx, report_day), day_read.evaluated, day_read.excluded
    forms = feedback_forms(request, reader, settings, links)
    buttons = {a["id"]: forms.buttons(a["id"], verdicts.get(a["id"])) for a in analyses}
    return get_pages(request).render(
        request, "daily.html", settings=settings, reader=reader, links=links, page=page,
        feedback_forms=buttons, excluded=profile_views.excluded_views(excluded, tz),
        histogram=histogram if analyses else None, histogram_text=histogram_text,
        week_url=links.weekly(weekly.week_of(report_day)[0]),
        evaluation_cost=money(evaluated, settings.deepseek_currency) if evaluated else None)


@dataclass(frozen=True)
class DayRead:
    """What the daily page reads of a day (its route and the MCP server's daily_report alike): the report,
    the day's analyses in the reader's order, failures, runs, spend, deferrals and exclusions."""

    report: dict[str, Any] | None
    analyses: list[dict[str, Any]]
    failures: list[dict[str, Any]]
    runs: DayRuns
    spent: float
    evaluated: float  # an evaluation's spend, the operator's apart from the slots' (0: not read)
    budget_deferred: int
    excluded: list[dict[str, Any]]

    def page(self, ctx: PageContext, day: date) -> daily_views.DailyPage:
        """The daily page's view model of ``day`` under ``ctx`` (its links: the request's)."""
        return daily_views.daily_page(
            ctx, day, self.runs, report=self.report, analyses=self.analyses, failures=self.failures,
            cost=costs.day_cost(self.spent, ctx.settings.deepseek_currency, self.report),
            budget_deferred=self.budget_deferred)


def read_day(conn: Any, resources: AppResources, day: date, currency: str, *, evaluations: bool) -> DayRead:
    """The daily page's queries for ``day`` (blocking), spend in ``currency``; ``evaluations``: also the
    evaluations' spend."""
    analyses = with_pushes(conn, store.analyses.day_analyses(conn, day), day)
    runs = store.slot_runs.slot_runs_for_day(conn, day)
    return DayRead(
        store.reports.get_daily_report(conn, day),
        ranking.order(ranking.annotate(analyses, resources.ranking_weights(conn))),  # the reader's order
        store.analyses.day_failures(conn, day),
        DayRuns(runs, store.reports.daily_notifications(conn, day),
                store.operations.slot_spend(conn, [r["id"] for r in runs])),
        store.operations.day_spend(conn, day, currency),
        store.operations.day_spend(conn, day, currency, evaluations=True) if evaluations else 0,
        store.operations.day_budget_deferred(conn, day),
        store.focus.excluded_items(conn, [r["id"] for r in runs]))


@router.get("/analysis/{analysis_id}", response_class=HTMLResponse)
def analysis(request: Request, analysis_id: str, reader: ReaderDep) -> HTMLResponse:
    wanted = parse_id(analysis_id)
    resources = get_resources(request)
    ctx = page_context(request)
    settings, links = ctx.settings, ctx.links
    with resources.connect() as conn:
        row = store.analyses.get_analysis(conn, wanted)
        if row is None:
            raise PageError(404, "找不到这条分析", f"分析 #{wanted} 不存在，可能已被删除或链接有误。")
        opportunities = store.analyses.opportunities_of(conn, wanted)
        reused = store.analyses.analysis_brief(conn, row["reused_from_id"]) if row["reused_from_id"] else None
        spend = store.operations.item_spend(conn, row["content_item_id"])
        members = store.events.event_members(conn, [row["event_id"]]) if row["event_id"] else []
        push = event_pushes(conn, [row["event_id"]]).get(row["event_id"]) if members else None
        weights = resources.ranking_weights(conn)
        verdict = store.focus.feedback_of(conn, [wanted]).get(wanted)
        pick = store.track.pick_of_analysis(conn, wanted)
        prices = store.track.push_prices_of(conn, wanted)
    page = analysis_views.analysis_page(
        ctx, row=row, opportunities=opportunities, reused=reused, total_cost=costs.item_total(row, spend),
        event=analysis_views.event_view(row, members, push, ctx.tz, links))
    return get_pages(request).render(
        request, "analysis.html", settings=settings, reader=reader, links=links, page=page,
        rank=profile_views.rank_view(row, weights),
        boosts={"watch": ranking.WATCH_BOOST, "interest": ranking.INTEREST_BOOST, "cap": ranking.FEEDBACK_CAP,
                "outcome": ranking.OUTCOME_CAP, "min_picks": settings.outcome_min_picks},
        feedback_buttons=feedback_forms(request, reader, settings, links).buttons(wanted, verdict),
        outcome=record_views.pick_view(pick, links, ctx.tz) if pick else None,
        prices=analysis_views.pushed_prices(prices, ctx.tz),
    )


@votes.post("/analysis/{analysis_id}/feedback", include_in_schema=False)
async def vote(request: Request, analysis_id: str) -> Response:
    """A 👍 / 👎 / 🤷 from a page: its signed action is the authority (web/feedback.py), no login needed; sent
    from this app's own page (web/csrf.py)."""
    wanted = parse_id(analysis_id)
    resources = get_resources(request)
    settings = await run_in_threadpool(resources.settings)
    csrf.check_same_origin(request, settings)  # from this app's own page, not another site's
    secret = settings.link_secret.get_secret_value() if settings.link_secret else None
    body = await read_body(request, feedback.MAX_BODY)
    cast = feedback.parse_vote(body, wanted, secret, resources.clock.now(), page_links(request).root)
    user = await airflow_user(request)
    via = f"user:{user_name(user)}" if user is not None else "link"

    def write() -> str:
        with resources.connect_write() as conn:
            return store.focus.set_feedback(conn, wanted, cast.verdict, via)

    if await run_in_threadpool(write) == "missing":
        raise PageError(404, "找不到这条分析", f"分析 #{wanted} 不存在，可能已被删除或链接有误。")
    return RedirectResponse(f"{cast.back}#fb-{wanted}", status_code=303)
