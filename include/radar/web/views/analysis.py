"""View model of one analysis's page."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from include.radar.analysis.rubric import band_of
from include.radar.pushes import events
from include.radar.pushes.labels import direction_label, type_label
from include.radar.web.trust import Quote, Trust, trust_view
from include.radar.web.views.common import (
    Links,
    PageContext,
    Row,
    duration,
    local_time,
    money,
    safe_http_url,
)
from include.radar.web.views.daily import SourceView, source_view


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
    """The other accounts' articles about the same real-world event, which analysis leads the event, and the
    push that already told the reader of it."""

    others: list[SourceView]
    lead: SourceView | None  # None when this analysis leads it
    note: str | None  # why this analysis joined the event (similarity, shared entities)
    pushed_at: str | None = None  # the slot (MM-DD HH:MM) whose opportunity push first linked to the event
    pushed: SourceView | None = None  # the analysis that push linked to, when not this one: this is a follow-up


def event_view(row: Row, members: Iterable[Row], push: Row | None, tz: ZoneInfo, links: Links) -> EventView | None:
    """``members``: every analysis of the row's event (store.events.event_members); ``push``: the event's first
    opportunity push (store.event_pushes), if any. None when the analysis stands alone."""
    members = list(members)
    if len(members) < 2:
        return None
    lead = events.entries(members)[0].lead
    pushed = next((m for m in members if push and m["id"] == push["analysis_id"] != row["id"]), None)
    return EventView(
        others=[source_view(m, tz, links) for m in sorted(members, key=events.lead_key) if m["id"] != row["id"]],
        lead=None if lead["id"] == row["id"] else source_view(lead, tz, links),
        note=row.get("event_note"),
        pushed_at=push["pushed"] if push else None,
        pushed=source_view(pushed, tz, links) if pushed else None,
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
    body_pruned: str | None = None  # when retention pruned the article's body (the quotes' context is kept)


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
    page: PageContext,
    *,
    row: Row,
    opportunities: Iterable[Row],
    reused: Row | None,
    total_cost: str | None = None,
    event: EventView | None = None,
) -> AnalysisPage:
    """``total_cost``: what every call for the article cost, failed attempts included (web/costs.py: item_total);
    ``event``: its event (:func:`event_view`)."""
    threshold, tz, links = page.settings.push_score_threshold, page.tz, page.links
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
        body_pruned=local_time(row.get("body_pruned_at"), tz) if row.get("body_pruned_at") else None,
        event=event,
    )


def _band(score: int, threshold: int) -> str:
    low, high, meaning = band_of(score, threshold)
    return f"{low}–{high} 分档：{meaning.split('，例如')[0]}"


@dataclass(frozen=True)
class PushedPrices:
    at: str
    lines: list[str]


def pushed_prices(row: Row | None, tz: ZoneInfo) -> PushedPrices | None:
    """What the first push that told of the analysis said of its targets' moves (pushes/context.py), and when
    it worked them out; each line carries its price's own time."""
    if row is None or not isinstance(row.get("lines"), list):
        return None
    lines = [str(line) for line in row["lines"] if isinstance(line, str) and line]
    return PushedPrices(local_time(row["computed_at"], tz, "%Y-%m-%d %H:%M"), lines) if lines else None
