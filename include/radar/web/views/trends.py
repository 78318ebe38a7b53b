"""The entity pages (every analysis naming a company or product, its scores over time) and the trends page
(30 days per topic, the most-named entities), with their charts (charts.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from markupsafe import Markup

from include.radar.pushes.labels import TYPES as TYPE_LABELS
from include.radar.web import charts
from include.radar.web.auth import PageError
from include.radar.web.views.common import Links, local_time

DAYS = 30
MAX_ENTITY_CHARS = 60
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
BANDS = ((0, 19), (20, 39), (40, 59), (60, 79), (80, 100))


def parse_entity(name: str) -> str:
    """An entity as the opportunities name it (their ``targets``); impossible names are a 404, not a query."""
    cleaned = name.strip()
    if not cleaned or len(cleaned) > MAX_ENTITY_CHARS or _CONTROL.search(name):
        raise PageError(404, "没有这个标的", f"标的名称应为 1 到 {MAX_ENTITY_CHARS} 个字符，例如 /entity/宁德时代。")
    return cleaned


def window(today: date, days: int = DAYS) -> list[date]:
    return [today - timedelta(days=days - 1 - i) for i in range(days)]


@dataclass(frozen=True)
class EntityRow:
    url: str
    title: str
    mp_name: str
    day: str
    score: int
    summary: str


@dataclass(frozen=True)
class EntityPage:
    name: str
    total: int
    rows: list[EntityRow]
    chart: Markup
    summary: str  # the chart in words: the text fallback
    shown: int = 0
    code: str = ""  # a stock code: its spellings (600519.SH, SH600519…) are counted as one


def entity_page(name: str, rows: list[dict[str, Any]], total: int, daily: list[dict[str, Any]], today: date,
                links: Links, tz: Any, spellings: list[str] | None = None) -> EntityPage:
    days = window(today)
    by_day = {r["day"]: r for r in daily}
    counts = [float(by_day[d]["n"]) if d in by_day else 0.0 for d in days]
    avg = [round(by_day[d]["avg_score"], 1) if d in by_day else None for d in days]
    mentions = int(sum(counts))
    chart = charts.line_chart(
        days, [charts.Series("平均评分", avg, charts.COLORS[0])], top=100,
        title=f"{name} 近 {DAYS} 天评分", desc=f"近 {DAYS} 天有 {sum(1 for c in counts if c)} 天提到 {name}，共 {mentions} 篇")
    scored = [a for a in avg if a is not None]
    summary = (f"近 {DAYS} 天 {mentions} 篇分析提到「{name}」，平均评分 {sum(scored) / len(scored):.0f}，"
               f"最高 {max(by_day[d]['max_score'] for d in by_day)}" if scored else f"近 {DAYS} 天没有分析提到「{name}」")
    return EntityPage(
        name=name, total=total, shown=len(rows), chart=chart, summary=summary,
        code=min(spellings, key=len) if spellings and len(spellings) > 1 else "",
        rows=[EntityRow(links.analysis(r["id"]), r["title"] or "（无标题）", r["mp_name"] or "",
                        local_time(r["published_at"], tz, "%Y-%m-%d"), r["score"], r["summary"] or "") for r in rows],
    )


@dataclass(frozen=True)
class TopEntity:
    name: str
    url: str
    count: int
    avg_score: int


@dataclass(frozen=True)
class TrendsPage:
    chart: Markup
    legend: list[tuple[str, str, int]]  # (topic label, color, mentions)
    entities: list[TopEntity] = field(default_factory=list)


def trends_page(topic_rows: list[dict[str, Any]], entity_rows: list[dict[str, Any]], today: date,
                links: Links) -> TrendsPage:
    days = window(today)
    totals: dict[str, int] = {}
    for r in topic_rows:
        totals[r["topic"]] = totals.get(r["topic"], 0) + r["n"]
    topics = sorted(totals, key=lambda t: (-totals[t], t))[: len(charts.COLORS)]
    series = []
    legend = []
    for i, topic in enumerate(topics):
        per_day = {r["day"]: r["n"] for r in topic_rows if r["topic"] == topic}
        color = charts.COLORS[i]
        series.append(charts.Series(TYPE_LABELS.get(topic, topic), [float(per_day.get(d, 0)) for d in days], color))
        legend.append((TYPE_LABELS.get(topic, topic), color, totals[topic]))
    chart = charts.line_chart(days, series, title=f"近 {DAYS} 天各类机会的分析数",
                              desc="；".join(f"{label} {n} 篇" for label, _, n in legend) or "近 30 天没有机会类分析")
    return TrendsPage(chart, legend, [TopEntity(r["name"], links.entity(r["name"]), r["n"], round(r["avg_score"]))
                                      for r in entity_rows])


def score_histogram(scores: list[int], threshold: int) -> tuple[Markup, str]:
    """The day's score distribution in five bands, the bands at or above the threshold's in red."""
    counts = [sum(1 for s in scores if low <= s <= high) for low, high in BANDS]
    marked = next((i for i, (low, high) in enumerate(BANDS) if low <= threshold <= high), None)
    labels = [f"{low}–{high}" for low, high in BANDS]
    desc = "，".join(f"{label} 分 {n} 篇" for label, n in zip(labels, counts, strict=True))
    return charts.bar_chart(labels, counts, title="当日评分分布", desc=desc, marked=marked), desc
