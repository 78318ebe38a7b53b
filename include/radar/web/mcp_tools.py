"""What the MCP server's tools answer (web/mcp_server.py serves them): the pages' own figures, built by the pages'
own queries and view models (web/views/), as plain JSON-able dicts.

Each answer shows what the page shows its reader: the owner's token what an Airflow login sees, a read token what
a pushed link's read session sees (web/auth.py: ``Reader.personal``) — no filter-rule text, no spend, no check lines,
no alert details, no channel names or service errors, no watchlist hits; ``hidden`` names what was left out, as
the pages' "登录 Airflow 后可见" does. Bad input raises :class:`ToolInputError` with the page's own message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from include.radar import store
from include.radar.analysis import focus
from include.radar.core import search
from include.radar.market import outcomes
from include.radar.store.events import event_pushes
from include.radar.web import costs
from include.radar.web.auth import PageError
from include.radar.web.inputs import DAYS_AHEAD, FIRST_DAY, parse_day
from include.radar.web.mount import URL_PREFIX
from include.radar.web.resources import AppResources, zone
from include.radar.web.routes.reports import read_day
from include.radar.web.views import analysis as analysis_views
from include.radar.web.views import daily as daily_views
from include.radar.web.views import health
from include.radar.web.views import profile as profile_views
from include.radar.web.views import record as record_views
from include.radar.web.views import search as search_views
from include.radar.web.views.common import Links, PageContext, money
from include.radar.web.views.slots import PushView, SlotView

# the bounds of one answer: lists cut to these lengths (and said so), each text to TEXT_CHARS
LISTED = 50
TEXT_CHARS = 2000
OPEN_SCANNED = 500  # the newest picks an open-opportunity question looks through (a T+20 call is a month old)
OWNER_ONLY = "登录 Airflow 后可见"


class ToolInputError(ValueError):
    """A question the radar cannot answer as asked (a bad date, an unknown analysis): the page's own message."""


@dataclass(frozen=True)
class Access:
    """Who asks: ``owner`` sees what an Airflow login sees on the pages; otherwise what a read session sees."""

    owner: bool


class Params:
    """Form values as the pages' parsers read them (``getlist``), from a tool's arguments."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = {k: str(v) for k, v in values.items() if v not in (None, "")}

    def getlist(self, name: str) -> list[str]:
        return [self._values[name]] if name in self._values else []


def page_context(radar: AppResources) -> PageContext:
    """The pages' context with absolute links: the pushed links' base (``report_base_url``)."""
    settings = radar.settings()
    root = settings.report_base_url.rstrip("/")
    airflow_root = root[: -len(URL_PREFIX)] if root.endswith(URL_PREFIX) else ""
    return PageContext(settings=settings, now=radar.clock.now(), tz=zone(),
                       links=Links(root=root, airflow_root=airflow_root))


def _text(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + "…"


def _listed(items: Iterable[Any], limit: int = LISTED) -> list[Any]:
    return list(items)[:limit]


def _bad_input(exc: PageError) -> ToolInputError:
    return ToolInputError(exc.message)


# ------------------------------------------------------------------------------------------------- search


def search_history(radar: AppResources, access: Access, form_values: Mapping[str, Any]) -> dict[str, Any]:
    """The search page's answer: ``form_values`` are its form's (q, from, to, account, band, watch, page)."""
    ctx = page_context(radar)
    try:
        form = search_views.parse_form(Params(form_values), FIRST_DAY, ctx.today + timedelta(days=DAYS_AHEAD))
    except PageError as exc:
        raise _bad_input(exc) from exc
    hidden = []
    if not access.owner:  # which articles match the watchlist is personal, as on the page
        if form.watch:
            hidden.append("watch")
        form = replace(form, watch=False)
    tsquery, terms = search.query(form.q) if form.q else ("", [])
    rows, total = [], 0
    if tsquery:
        with radar.connect() as conn:
            rows, total = store.searching.search_articles(conn, tsquery, form.filters(ctx.tz), search_views.PAGE_SIZE,
                                                          (form.page - 1) * search_views.PAGE_SIZE,
                                                          terms[0] if terms else "")
    hits = []
    for hit in search_views.hits(rows, terms, ctx.tz, ctx.links):
        entry = {"title": _text(hit.title), "url": hit.url, "account": hit.mp_name, "published": hit.published,
                 "score": hit.score, "status": hit.status, "snippet": "".join(t for t, _ in hit.snippet)}
        if access.owner:
            entry["watch_hits"] = hit.watch_hits
        hits.append(entry)
    return {"query": form.q, "terms": terms, "searchable": bool(tsquery) or not form.q, "total": total,
            "page": form.page, "pages": min(search_views.MAX_PAGE, -(-total // search_views.PAGE_SIZE)),
            "page_url": form.url(ctx.links, form.page), "hits": hits, "hidden": hidden}


# ------------------------------------------------------------------------------------------------- a day


def _slot(view: SlotView, access: Access) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "slot": view.slot, "state": view.state, "label": view.label, "has_run": view.has_run, "new": view.new_count,
        "analysed": view.analysed_count, "opportunities": view.opportunity_count, "failed": view.failed_count,
        "skipped": view.skipped_count, "deferred": view.deferred_count, "budget_deferred": view.budget_deferred,
        "excluded": view.excluded_count, "body_problems": view.body_problems, "started": view.started,
        "finished": view.finished, "duration": view.duration, "attempts": view.attempts,
        "failed_steps": [s.step for s in view.failed_steps], "has_error": bool(view.error)}
    if access.owner:
        entry.update(error=view.error, warnings=view.warnings, error_log=view.error_log, cost=view.cost)
    return entry


def _push(view: PushView, access: Access) -> dict[str, Any]:
    channels = []
    for n, c in enumerate(view.channels, 1):
        channel = {"channel": c.channel if access.owner else f"通道 {n}", "state": c.state, "label": c.label,
                   "when": c.when, "attempts": c.attempts}
        if access.owner:
            channel["error"] = c.error
        channels.append(channel)
    return {"state": view.state, "label": view.label, "channels": channels}


def _card(card: daily_views.AnalysisCard) -> dict[str, Any]:
    return {"id": card.id, "url": card.url, "score": card.score, "hot": card.hot, "title": _text(card.title),
            "account": card.mp_name, "slot": card.slot, "published": card.published, "summary": _text(card.summary),
            "type": card.top_type, "reused": card.reused, "unverified": card.unverified, "pushed": card.pushed,
            "follow_up": card.follow_up,
            "sources": [{"id": s.id, "url": s.url, "title": _text(s.title), "account": s.mp_name,
                         "score": s.score, "unverified": s.unverified} for s in card.sources]}


def _coverage(coverage: Any) -> dict[str, Any] | None:
    if coverage is None:
        return None
    return {"active": coverage.active, "covered": coverage.covered, "share": coverage.share, "line": coverage.line()}


def daily_report(radar: AppResources, access: Access, day: str) -> dict[str, Any]:
    """The daily page of ``day`` (YYYY-MM-DD; empty: today), with the same queries as its route."""
    ctx = page_context(radar)
    settings = ctx.settings
    try:
        report_day = parse_day(day, ctx.today) if day else ctx.today
    except PageError as exc:
        raise _bad_input(exc) from exc
    with radar.connect() as conn:
        day_read = read_day(conn, radar, report_day, settings.deepseek_currency, evaluations=access.owner)
    page, report, excluded, evaluated = (day_read.page(ctx, report_day), day_read.report, day_read.excluded,
                                         day_read.evaluated)
    stats = page.stats
    answer: dict[str, Any] = {
        "day": report_day.isoformat(), "url": ctx.links.daily(report_day), "report_state": page.report_state,
        "report_label": page.report_label, "notice": page.notice, "threshold": page.threshold,
        "stats": {"analysed": stats.analysed, "opportunities": stats.opportunities, "failed": stats.failed,
                  "max_score": stats.max_score, "pending": stats.pending, "budget_deferred": stats.budget_deferred},
        "slots_done": page.slots_done, "slots": [_slot(s, access) for s in page.slots],
        "push": _push(page.push, access), "coverage": _coverage(page.coverage),
        "digest_md": _text((report or {}).get("digest_md") or ""), "watchlist": page.watchlist,
        "top": [{"analysis_id": t.analysis_id, "url": t.url, "title": _text(t.title), "reason": _text(t.reason),
                 "score": t.score, "sources": t.sources} for t in page.top],
        "analyses": [_card(c) for c in _listed(page.analyses)], "analyses_total": len(page.analyses),
        "failures": [{"title": _text(f.title), "account": f.mp_name, "slot": f.slot, "attempts": f.attempts,
                      "error": _text(f.error)} for f in _listed(page.failures)],
        "pending": [{"title": _text(p.title), "account": p.mp_name, "published": p.published}
                    for p in _listed(page.pending)],
    }
    views = profile_views.excluded_views(excluded, ctx.tz)
    answer["excluded"] = [{"title": _text(x.title), "account": x.mp_name, "published": x.published,
                           **({"reason": _text(x.reason)} if access.owner else {})} for x in _listed(views)]
    if access.owner:
        answer.update(reasons=page.reasons, warnings=page.warnings, cost=page.cost,
                      evaluation_cost=money(evaluated, settings.deepseek_currency) if evaluated else None, hidden=[])
    else:
        answer["hidden"] = [name for name, shown in (("reasons", page.reasons), ("warnings", page.warnings),
                                                     ("excluded reasons", views)) if shown] + ["cost"]
    return answer


# ---------------------------------------------------------------------------------------------- an analysis


def analysis(radar: AppResources, access: Access, analysis_id: int) -> dict[str, Any]:
    """The analysis page: the opportunities with each evidence quote and whether the article holds it."""
    ctx = page_context(radar)
    if not 0 < analysis_id < 2**63:
        raise ToolInputError("分析编号应为正整数。")
    with radar.connect() as conn:
        row = store.analyses.get_analysis(conn, analysis_id)
        if row is None:
            raise ToolInputError(f"分析 #{analysis_id} 不存在，可能已被删除或编号有误。")
        opportunities = store.analyses.opportunities_of(conn, analysis_id)
        reused = store.analyses.analysis_brief(conn, row["reused_from_id"]) if row["reused_from_id"] else None
        spend = store.operations.item_spend(conn, row["content_item_id"])
        members = store.events.event_members(conn, [row["event_id"]]) if row["event_id"] else []
        push = event_pushes(conn, [row["event_id"]]).get(row["event_id"]) if members else None
        pick = store.track.pick_of_analysis(conn, analysis_id)
    page = analysis_views.analysis_page(
        ctx, row=row, opportunities=opportunities, reused=reused, total_cost=costs.item_total(row, spend),
        event=analysis_views.event_view(row, members, push, ctx.tz, ctx.links))
    trust = page.trust
    answer: dict[str, Any] = {
        "id": page.id, "url": ctx.links.analysis(page.id), "title": _text(page.title), "account": page.mp_name,
        "published": page.published, "source_url": page.source_url, "score": page.score, "hot": page.hot,
        "threshold": page.threshold, "band": page.band, "has_opportunity": page.has_opportunity,
        "type": page.top_type, "summary": _text(page.summary), "analysed_at": page.analysed_at,
        "run": page.run_label, "daily_url": page.daily_url, "model": page.model,
        "evidence_check": {"checked": trust.checked, "verified": trust.verified, "unverified": trust.unverified,
                           "consistency": trust.consistency, "blocks_push": trust.blocks_push},
        "opportunities": [{
            "name": _text(o.name), "type": o.type_label, "direction": o.direction, "direction_label": o.direction_label,
            "targets": o.targets, "horizon": o.horizon, "catalyst": _text(o.catalyst), "risks": o.risks,
            "confidence": o.confidence,
            "evidence": [{"quote": _text(q.text), "verified": q.verified} for q in o.evidence]}
            for o in page.opportunities],
        "reused_from": {"id": page.reused_from.id, "url": page.reused_from.url} if page.reused_from else None,
        "event": None if page.event is None else {
            "pushed_at": page.event.pushed_at, "lead": page.event.lead.id if page.event.lead else None,
            "others": [{"id": s.id, "url": s.url, "title": _text(s.title), "account": s.mp_name, "score": s.score}
                       for s in _listed(page.event.others)]},
        "outcome": _pick(record_views.pick_view(pick, ctx.links, ctx.tz)) if pick else None,
    }
    if access.owner:
        answer.update(cost=page.cost, total_cost=page.total_cost, hidden=[])
    else:
        answer["hidden"] = ["cost"]
    return answer


# ------------------------------------------------------------------------------------- the track record


def _pick(view: record_views.PickView) -> dict[str, Any]:
    return {"title": _text(view.title), "url": view.url, "picked": view.picked, "origin": view.origin,
            "score": view.score, "direction": view.direction, "type": view.opp_type, "account": view.account,
            "measurable": view.measurable, "reason": _text(view.reason), "instrument": view.instrument,
            "benchmark": view.benchmark, "reference": view.reference,
            "horizons": [{"horizon": h.label, "status": h.status, "return": h.ret, "benchmark": h.bench,
                          "excess": h.excess, "hit": h.hit, "note": h.note} for h in view.horizons]}


def _is_open(row: Mapping[str, Any]) -> bool:
    """A measurable pick the market has not settled yet: a horizon still waiting, or not computed yet."""
    if row.get("status") != "measurable":
        return False
    found = {o.get("horizon"): o.get("status") for o in row.get("outcomes") or [] if isinstance(o, dict)}
    return any(found.get(h) in (None, "waiting") for h in outcomes.HORIZONS)


def _names_target(row: Mapping[str, Any], spellings: set[str], wanted: str) -> bool:
    instrument = str(row.get("instrument") or "").split(":", 1)[-1]
    names = {str(row.get("target") or ""), str(row.get("instrument_name") or ""), instrument}
    return bool(spellings & names) or any(wanted and wanted in n for n in names)


def open_opportunities(radar: AppResources, access: Access, target: str = "", account: str = "") -> dict[str, Any]:
    """The track record's open calls (a horizon still waiting for the market), newest first, narrowed to a target
    (a name or any spelling of a code: 600519, 600519.SH, SH600519) and/or an account."""
    ctx = page_context(radar)
    target, account = target.strip(), account.strip()
    if len(target) > 100 or len(account) > 100:
        raise ToolInputError("标的或公众号名称过长。")
    spellings = set(focus.ticker_spellings(target)) if target else set()
    with radar.connect() as conn:
        rows, _ = store.track.record_page(conn, store.track.RecordFilters(account=account or None), OPEN_SCANNED, 0)
    found = [r for r in rows if _is_open(r) and (not target or _names_target(r, spellings, target))]
    return {"target": target, "account": account, "total": len(found), "scanned": len(rows),
            "picks": [_pick(record_views.pick_view(r, ctx.links, ctx.tz)) for r in _listed(found)],
            "record_url": ctx.links.record()}


def _summary(row: record_views.SummaryRow) -> dict[str, Any]:
    return {"label": row.label, "picks": row.picks, "sample": row.sample, "conclusive": row.conclusive,
            "hit_rate": row.hit, "mean_excess": row.excess, "outside_sample": row.note, "marked": row.marked,
            "bias": row.bias}


def track_record(radar: AppResources, access: Access, form_values: Mapping[str, Any]) -> dict[str, Any]:
    """The record page's summaries: ``form_values`` its form's (from, to, account, type, band, h)."""
    try:
        form = record_views.parse_form(Params(form_values))
    except PageError as exc:
        raise _bad_input(exc) from exc
    ctx = page_context(radar)
    filters = form.filters()
    with radar.connect() as conn:
        _, total = store.track.record_page(conn, filters, 1, 0)
        groups = store.track.summary_groups(conn, filters, int(form.horizon))
    summary = record_views.summaries(groups, form.horizon)
    return {"horizon": summary.horizon, "picks": total, "min_sample": outcomes.MIN_SAMPLE,
            "calibrated": summary.calibrated, "url": form.url(ctx.links),
            "overall": _summary(summary.overall), "bands": [_summary(r) for r in summary.bands],
            "accounts": [_summary(r) for r in _listed(summary.accounts)],
            "types": [_summary(r) for r in summary.types], "directions": [_summary(r) for r in summary.directions]}


# ----------------------------------------------------------------------------------------------- health


def _service(view: health.ServiceView, access: Access, internal: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": view.name, "state": view.state, "label": view.label, "when": view.when,
                             "warnings": view.warnings, "has_errors": bool(view.errors)}
    if access.owner or not internal:
        entry["facts"] = view.facts
    if access.owner:
        entry["errors"] = view.errors
    return entry


def _alert(view: health.AlertView, access: Access) -> dict[str, Any]:
    entry: dict[str, Any] = {"title": view.title, "when": view.when, "occurrences": view.occurrences}
    if access.owner:
        entry.update(detail=view.detail, delivery=view.delivery, delivered=view.delivered, action=view.action)
    return entry


def slot_health(radar: AppResources, access: Access) -> dict[str, Any]:
    """The overview's health section: the last slots, the accounts' coverage, today's alerts, the services, the
    data, the deployment check; the spend and the details for the owner only."""
    ctx = page_context(radar)
    currency = ctx.settings.deepseek_currency
    with radar.connect() as conn:
        by_day = store.operations.spend_by_day(conn, ctx.today - timedelta(days=costs.SPEND_DAYS - 1), ctx.today,
                                               currency)
        view = health.gather(conn, ctx, spend_by_day=by_day)
    check = view.check
    answer: dict[str, Any] = {
        "issues": view.issues + (view.private_issues if access.owner else []),
        "slots": [{"day": s.day.isoformat(), "when": s.when, "daily_url": s.daily_url, **_slot(s.view, access)}
                  for s in view.slots],
        "next_slot": {"label": view.next_slot.label, "eta": view.next_slot.eta} if view.next_slot else None,
        "coverage": _coverage(view.collection), "quiet_accounts": len(view.silent),
        "alerts": [_alert(a, access) for a in view.alerts],
        "services": [_service(v, access) for v in view.services],
        "storage": _service(view.storage, access, internal=True),
        "check": {"recorded": check.recorded, "when": check.when, "passed": check.passed,
                  "warnings": check.warnings, "failures": check.failures},
    }
    if access.owner:
        spend = view.spend
        answer["check"]["failing"] = check.failing
        answer["spend"] = {"text": spend.text, "reached": spend.reached, "budget_set": spend.budget_set,
                           "percent": spend.percent, "estimated": spend.estimated, "evaluations": spend.evaluations}
        answer["hidden"] = []
    else:
        answer["hidden"] = ["spend", "alert details", "service errors", "check lines"]
    return answer
