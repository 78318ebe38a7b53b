"""``push_opportunity`` and ``skip_push``: a daytime slot's new opportunities pushed once per slot and channel
(linking its best), or the silence recorded with its reason.
"""

from __future__ import annotations

import logging
from datetime import date
from typing import Any

from include.radar import store
from include.radar.core.slots import SHANGHAI
from include.radar.pushes import briefs, context, decide, events, push, standing
from include.radar.pushes.message import Message
from include.radar.report.track_record import source_from
from include.radar.steps.runtime import Runtime, step
from include.radar.steps.summarise import SlotView, choose_path, slot_summary, slot_view

log = logging.getLogger(__name__)


@step("push_opportunity")
def push_opportunity(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    rt.sweep_pushes(slot)
    view = slot_view(rt, slot)
    summary = view.summary.as_xcom()
    decision = choose_path(slot, summary)
    with rt.connect() as conn:
        store.slot_runs.set_slot_decision(conn, slot["slot_run_id"], "push", {"reason": decision.reason, **decision.detail})
    path = f"/analysis/{summary['top_analysis_id']}"
    message = _message(rt, slot, view, path)
    forced = slot["push_mode"] == "force"
    report = push.deliver(rt.connect, rt.channels(), message, push.Occasion(
        date.fromisoformat(slot["run_date"]), slot["slot"], "opportunity", rt.canonical_url(path), slot["slot_run_id"],
        nonce=(slot["dag_run_id"] or "") if forced else "", identity="",  # one alert per slot, whatever its top
    ))
    if report.failed:
        raise push.PushFailed(f"push failed for {', '.join(report.failed)}; a retry resends only to those")
    # an Asset event per opportunity told of (seam/assets.py), only when this try reached a channel
    told = [["opportunity", _event(rt, slot, e)] for e in view.entries if e.lead["id"] in message.shown]
    return {**report.as_xcom(), "asset_events": told if report.sent else []}


def _event(rt: Runtime, slot: dict[str, Any], entry: events.Entry) -> dict[str, Any]:
    """What an opportunity's Asset event says: what its push said, as data (briefs.py's lines)."""
    lead = entry.lead
    result = lead.get("result_json") if isinstance(lead.get("result_json"), dict) else {}
    found = result.get("opportunities") if isinstance(result.get("opportunities"), list) else []
    first = found[0] if found and isinstance(found[0], dict) else {}
    targets = first.get("targets") if isinstance(first.get("targets"), list) else []
    return {"analysis_id": lead["id"], "event": entry.event, "day": slot["run_date"], "slot": slot["slot"],
            "score": lead["score"], "direction": str(first.get("direction") or ""),
            "targets": [briefs.target_label(t)[0] for t in targets if isinstance(t, str) and t.strip()],
            "account": str(lead.get("mp_name") or ""), "link": rt.canonical_url(f"/analysis/{lead['id']}")}


def _message(rt: Runtime, slot: dict[str, Any], view: SlotView, path: str) -> Message:
    """The slot's opportunities, a block each (briefs.py), best first, the reader's watchlist hits before;
    past briefs.MAX_ITEMS, 「另有 N 条」 with the day's page. The link is the top analysis's."""
    summary = view.summary
    items = briefs.slot_items(view.candidates, summary.threshold, summary.top_analysis_id, view.entries)
    day = date.fromisoformat(slot["run_date"])
    links = {e.lead["id"]: rt.page_url(f"/analysis/{e.lead['id']}") for e in items[: briefs.MAX_ITEMS]}
    more = len(items) - briefs.MAX_ITEMS
    best = max((e.lead["score"] for e in items), default=summary.max_score or 0)  # the rank may lead with less
    moves, record, band = _context(rt, slot, items[: briefs.MAX_ITEMS])
    return Message(
        title=decide.opportunity_title(slot["slot"], summary.above_threshold or 1, best),
        lines=[], link=links.get(summary.top_analysis_id) or rt.page_url(path),
        blocks=tuple(briefs.opportunity_block(e, briefs.event_sources(e, view.others), day, links[e.lead["id"]],
                                              moves.get(e.lead["id"], ()), record.get(e.lead["id"], ""))
                     for e in items[: briefs.MAX_ITEMS]),
        more=max(more, 0), more_link=rt.page_url(f"/daily/{day.isoformat()}"), notes=tuple(band),
        link_label="查看分析", shown=tuple(e.lead["id"] for e in items[: briefs.MAX_ITEMS]),
    )


def _context(rt: Runtime, slot: dict[str, Any], items: list[Any]
             ) -> tuple[dict[int, list[str]], dict[int, str], list[str]]:
    """Each item's coded targets' moves since its article (context.py, within push_market_seconds; none when
    push_market_context is off) and its account's record, and the top item's score band's record
    (standing.py). A record that cannot be read costs the push those lines only."""
    now, leads = rt.clock.now(), [e.lead for e in items]
    moves: dict[int, list[str]] = {}
    if rt.settings.push_market_context and leads:
        asks = [(lead["id"], ask) for lead in leads for ask in context.ask_for(lead, now)]
        seconds = rt.settings.push_market_seconds  # a source that cannot even be configured costs the prices only
        found = context.gather(lambda: source_from(rt.settings, seconds)(), [a for _, a in asks], rt.clock, seconds)
        for (lead_id, ask), move in zip(asks, found, strict=True):
            label = briefs.target_label(ask.target)[0]
            moves.setdefault(lead_id, []).append(f"{label}：{context.move_text(move, now.astimezone(SHANGHAI).date())}")
        unknown = sum(m.status == context.UNKNOWN for m in found)
        with rt.connect() as conn:  # the analysis page shows what the first push said (store.track.push_prices_of)
            for lead_id, lines in moves.items():
                store.track.save_push_prices(conn, lead_id, now, lines)
            if unknown:
                store.slot_runs.add_slot_warnings(conn, slot["slot_run_id"], "push_opportunity",
                                                  [f"push: {unknown} of {len(found)} prices unknown (行情未知)"])
    try:
        with rt.connect() as conn:
            record = standing.load(conn, briefs.RECORD_HORIZON, rt.settings.outcome_min_picks)
    except Exception:  # the record's lines are the push's extras, never its reason to fail
        log.exception("the track record could not be read for the push; sent without its record lines")
        return moves, {}, []
    accounts = {lead["id"]: standing.account_line(record, str(lead.get("mp_name") or "")) for lead in leads}
    return moves, accounts, standing.band_line(record, leads[0]["score"]) if leads else []


@step("skip_push")
def skip_push(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    rt.sweep_pushes(slot)
    decision = choose_path(slot, slot_summary(rt, slot).as_xcom())
    with rt.connect() as conn:
        store.slot_runs.set_slot_decision(conn, slot["slot_run_id"], "silent", {"reason": decision.reason, **decision.detail})
    log.info("slot %s: no push: %s", slot["slot"], decision.reason)
    return {"reason": decision.reason}
