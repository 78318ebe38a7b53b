"""The track record's page (``/record``): every pick the radar made, how it did in the market, and the record
summarised by score band (a calibration chart), account, type and direction. It reads the database only: the
figures are the track-record step's (include/radar/report/track_record.py)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from include.radar import store
from include.radar.market import outcomes
from include.radar.pushes import labels
from include.radar.web.auth import ReaderDep, require_reader
from include.radar.web.pages import get_pages, page_links
from include.radar.web.resources import get_resources, zone
from include.radar.web.views import record as record_views

router = APIRouter(dependencies=[Depends(require_reader)])


@router.get("/record", response_class=HTMLResponse)
def record(request: Request, reader: ReaderDep) -> HTMLResponse:
    resources = get_resources(request)
    settings = resources.settings()
    form = record_views.parse_form(request.query_params)
    filters = form.filters()
    with resources.connect() as conn:
        rows, total = store.track.record_page(conn, filters, record_views.PAGE_SIZE,
                                              (form.page - 1) * record_views.PAGE_SIZE)
        groups = store.track.summary_groups(conn, filters, int(form.horizon))
        accounts, types = store.track.record_choices(conn)
    links = page_links(request)
    tz = zone()
    pages_total = max(1, min(record_views.MAX_PAGE, -(-total // record_views.PAGE_SIZE)))
    past_end = form.page > pages_total  # a page the record does not have: say so, and link its last page
    return get_pages(request).render(
        request, "record.html", settings=settings, reader=reader, links=links, form=form, total=total,
        picks=[record_views.pick_view(r, links, tz) for r in rows],
        summary=record_views.summaries(groups, form.horizon), accounts=accounts,
        types=[(t, labels.type_label(t)) for t in types], bands=record_views.BAND_LABELS,
        horizons=record_views.HORIZONS, min_sample=outcomes.MIN_SAMPLE, threshold=settings.push_score_threshold,
        horizon_urls=[(label, form.url(links, h=key), key == form.horizon) for key, label in record_views.HORIZONS.items()],
        prev_url=form.url(links, min(form.page - 1, pages_total)) if form.page > 1 else None,
        next_url=form.url(links, form.page + 1) if form.page < pages_total else None,
        page_label=f"没有第 {form.page} 页 · 共 {pages_total} 页" if past_end else f"第 {form.page} / {pages_total} 页",
        past_end=past_end, pages_total=pages_total, last_url=form.url(links, pages_total),
    )
