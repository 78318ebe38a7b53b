"""The history pages: the weekly summary (``/weekly``, ``/weekly/{monday}``), one entity's analyses and
scores (``/entity/{name}``), 30-day trends (``/trends``) and search over every analysis (``/search``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from include.radar import store
from include.radar.analysis import focus
from include.radar.core import search
from include.radar.market import outcomes
from include.radar.report import weekly
from include.radar.web.auth import PageError, ReaderDep, require_reader
from include.radar.web.inputs import DAYS_AHEAD, FIRST_DAY, parse_day
from include.radar.web.pages import get_pages, page_links
from include.radar.web.resources import get_resources, today, zone
from include.radar.web.views import record as record_views
from include.radar.web.views import search as search_views
from include.radar.web.views import trends as trend_views
from include.radar.web.views.common import WEEKDAYS, digest_link_rewriter, render_markdown

ENTITY_LISTED = 100
WEEK_PICKS = 30  # the weekly page lists the week's picks up to this many (the record page has them all)

router = APIRouter(dependencies=[Depends(require_reader)])


@router.get("/weekly", include_in_schema=False)
def this_week(request: Request, reader: ReaderDep) -> Response:
    resources = get_resources(request)
    monday, _ = weekly.week_of(today(resources))
    target = page_links(request).weekly(monday)
    query = request.url.query
    return RedirectResponse(target + (f"?{query}" if query else ""), status_code=307)


@router.get("/weekly/{monday}", response_class=HTMLResponse)
def weekly_page(request: Request, monday: str, reader: ReaderDep) -> HTMLResponse:
    resources = get_resources(request)
    settings = resources.settings()
    current = today(resources)
    week = parse_day(monday, current)
    if week.weekday() != 0:
        raise PageError(404, "没有这一周的周报",
                        f"周报地址应为 /weekly/ 加当周星期一的日期，例如 /weekly/{weekly.week_of(week)[0]}。")
    end = week + timedelta(days=6)
    week_filters = store.track.RecordFilters(first=week, last=end)
    with resources.connect() as conn:
        report = store.weekly.get_weekly_report(conn, week)
        picks, _ = store.track.record_page(conn, week_filters, WEEK_PICKS, 0)
        pick_rows = store.track.summary_groups(conn, week_filters, outcomes.WEEK_HORIZON)
    links = page_links(request)
    data = (report or {}).get("digest_json") or {}
    tops = []
    for t in data.get("top_opportunities") or []:
        if isinstance(t, dict) and isinstance(t.get("analysis_id"), int) and t["analysis_id"] > 0:
            tops.append({"url": links.analysis(t["analysis_id"]), "title": str(t.get("title") or ""),
                         "reason": str(t.get("reason") or ""),
                         "sources": [x for x in t.get("sources") or [] if isinstance(x, str)]})
    return get_pages(request).render(
        request, "weekly.html", settings=settings, reader=reader, links=links, monday=week, report=report,
        span=f"{week.isoformat()} 至 {end.month}月{end.day}日", tops=tops,
        fallback=bool(report) and data.get("source") == "fallback", report_error=(report or {}).get("error") or "",
        digest_html=render_markdown(report["digest_md"], digest_link_rewriter(
            settings.report_base_url, links)) if report and report["digest_md"] else None,
        watchlist=[w for w in data.get("watchlist") or [] if isinstance(w, str)][:8],
        days=[(f"{d.month}/{d.day} 周{WEEKDAYS[d.weekday()]}", links.daily(d))
              for d in (week + timedelta(days=i) for i in range(7)) if d <= current],
        prev_url=links.weekly(week - timedelta(days=7)),
        next_url=links.weekly(week + timedelta(days=7)) if end < current else None,
        past=end < current, daily_slot=settings.daily_slot,
        record=record_views.week_record(picks, pick_rows, links, zone(),
                                        record_views.RecordForm(first=week.isoformat(), last=end.isoformat(),
                                                                horizon=str(outcomes.WEEK_HORIZON))),
        threshold=settings.push_score_threshold,
    )


@router.get("/entity/{name:path}", response_class=HTMLResponse)  # a name may hold "/" (A/H 股)
def entity(request: Request, name: str, reader: ReaderDep) -> HTMLResponse:
    wanted = trend_views.parse_entity(name)
    resources = get_resources(request)
    settings = resources.settings()
    tz = zone()
    day = today(resources)
    spellings = focus.ticker_spellings(wanted)  # 600519, 600519.SH and SH600519 are one page
    with resources.connect() as conn:
        rows, total = store.trends.entity_analyses(conn, spellings, ENTITY_LISTED)
        if not rows:
            raise PageError(404, "没有这个标的", f"没有分析提到「{wanted}」。标的名称来自分析页“投资机会”下列出的标的。")
        daily = store.trends.entity_daily(conn, spellings, day - timedelta(days=trend_views.DAYS - 1), day)
    links = page_links(request)
    page = trend_views.entity_page(wanted, rows, total, daily, day, links, tz, spellings)
    return get_pages(request).render(request, "entity.html", settings=settings, reader=reader, links=links,
                                     page=page, threshold=settings.push_score_threshold)


@router.get("/trends", response_class=HTMLResponse)
def trends(request: Request, reader: ReaderDep) -> HTMLResponse:
    resources = get_resources(request)
    settings = resources.settings()
    day = today(resources)
    first = day - timedelta(days=trend_views.DAYS - 1)
    with resources.connect() as conn:
        topics = store.trends.topic_daily(conn, first, day)
        entities = store.trends.top_entities(conn, first, day, 20)
        scores = store.trends.day_scores(conn, day)
    links = page_links(request)
    histogram, histogram_text = trend_views.score_histogram(scores, settings.push_score_threshold)
    return get_pages(request).render(
        request, "trends.html", settings=settings, reader=reader, links=links,
        page=trend_views.trends_page(topics, entities, day, links), histogram=histogram,
        histogram_text=histogram_text, today=day)


@router.get("/search", response_class=HTMLResponse)
def search_page(request: Request, reader: ReaderDep) -> HTMLResponse:
    resources = get_resources(request)
    settings = resources.settings()
    tz = zone()
    form = search_views.parse_form(request.query_params, FIRST_DAY,
                                   today(resources) + timedelta(days=DAYS_AHEAD))
    if not reader.personal:  # which articles match the watchlist is personal: no filter by it through a link
        form = replace(form, watch=False)
    links = page_links(request)
    tsquery, terms = search.query(form.q) if form.q else ("", [])
    rows, total = [], 0
    with resources.connect() as conn:
        accounts = store.searching.account_names(conn)
        if tsquery:
            rows, total = store.searching.search_articles(conn, tsquery, form.filters(tz), search_views.PAGE_SIZE,
                                                (form.page - 1) * search_views.PAGE_SIZE, terms[0] if terms else "")
            if not rows and form.page > 1:  # past the last page: how many there are, to say so and link back
                total = store.searching.search_articles(conn, tsquery, form.filters(tz), 1, 0)[1]
    pages_total = min(search_views.MAX_PAGE, -(-total // search_views.PAGE_SIZE))
    return get_pages(request).render(
        request, "search.html", settings=settings, reader=reader, links=links, form=form,
        searched=bool(form.q), unsearchable=bool(form.q) and not tsquery, total=total,
        hits=search_views.hits(rows, terms, tz, links), accounts=accounts, bands=search_views.BAND_LABELS,
        threshold=settings.push_score_threshold,
        prev_url=form.url(links, form.page - 1) if form.page > 1 else None,
        next_url=form.url(links, form.page + 1) if form.page < pages_total else None,
        page_label=f"第 {form.page} / {max(pages_total, 1)} 页",
        past_end=not rows and total > 0, pages_total=pages_total,
        last_url=form.url(links, max(pages_total, 1)),
    )
