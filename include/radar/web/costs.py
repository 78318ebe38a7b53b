"""What the radar costs, as the pages show it: today's spend against the budget and the 30-day
spend line of the overview's health section, a day's cost (daily page) and an article's every call (analysis
page). Pure. The spend line is inline SVG drawn here: no script, no charting library (the page's CSP allows
neither).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from include.radar.core.pricing import format_money
from include.radar.web.views.common import Row, money

SPEND_DAYS = 30
# the drawing area of the spend line, in SVG user units (the SVG stretches to the card's width)
CHART_W, CHART_H, CHART_PAD = 300.0, 64.0, 4.0


@dataclass(frozen=True)
class SpendLine:
    """30 days of spend as an SVG polyline in a ``CHART_W`` × ``CHART_H`` box, oldest day on the left."""

    points: str  # the polyline's "x,y x,y …", one pair per day
    area: str  # the same line closed along the bottom (the filled area under it)
    days: list[tuple[float, float, str]]  # per day: x, width, tooltip ("01-08 $0.1234")
    max_label: str
    min_label: str
    first_label: str
    last_label: str
    currency: str
    budget_y: float | None  # the budget as a dashed line, when it falls inside the axis
    width: float = CHART_W
    height: float = CHART_H

    @property
    def count(self) -> int:
        return len(self.days)


def spend_line(
    spend: Mapping[date, float], *, last_day: date, currency: str, budget: float = 0.0, days: int = SPEND_DAYS
) -> SpendLine:
    """The daily spend of the ``days`` days ending at ``last_day``; a day without spend is 0. The axis runs
    from 0 to the highest day (so a flat line sits at the bottom)."""
    first_day = last_day - timedelta(days=days - 1)
    series = [(first_day + timedelta(days=i), max(float(spend.get(first_day + timedelta(days=i), 0.0)), 0.0))
              for i in range(days)]
    low, high = 0.0, max(v for _, v in series)
    span_ = high - low
    inner = CHART_H - 2 * CHART_PAD
    step = CHART_W / (days - 1) if days > 1 else CHART_W

    def y(value: float) -> float:
        return CHART_H - CHART_PAD - ((value - low) / span_ * inner if span_ > 0 else 0.0)

    coords = [(round(i * step, 1), round(y(v), 1)) for i, (_, v) in enumerate(series)]
    points = " ".join(f"{x:g},{yy:g}" for x, yy in coords)
    bottom = f"{CHART_H:g}"
    area = f"{coords[0][0]:g},{bottom} {points} {coords[-1][0]:g},{bottom}"
    cells = [(round(max(i * step - step / 2, 0), 1), round(step, 1), f"{d:%m-%d} {money(v, currency)}")
             for i, (d, v) in enumerate(series)]
    return SpendLine(
        points=points,
        area=area,
        days=cells,
        max_label=money(high, currency),
        min_label=money(low, currency),
        first_label=f"{first_day:%m-%d}",
        last_label=f"{last_day:%m-%d}",
        currency=currency,
        budget_y=round(y(budget), 1) if 0 < budget <= high else None,
    )


@dataclass(frozen=True)
class SpendView:
    text: str  # "今日花费 $0.1234 / 预算 $5.00" or "今日花费 $0.1234 · 未设预算"
    budget_set: bool
    reached: bool
    percent: int  # of the budget spent, 0–100
    estimated: bool
    line: SpendLine
    evaluations: str | None = None  # the evaluations' spend, apart: never in the budget, the text or the line


def spend_view(
    spent_today: float, by_day: Mapping[date, float], *, today: date, budget: float, currency: str,
    estimated: bool, evaluations: tuple[float, float] = (0.0, 0.0),
) -> SpendView:
    """The slots' spend today against the budget and over the last days; ``evaluations``: what the shadow
    evaluations spent today and over the same days (their own caps'), said apart."""
    spent = money(spent_today, currency)
    if budget > 0:
        text = f"今日花费 {spent} / 预算 {format_money(budget, currency)}"
    else:
        text = f"今日花费 {spent} · 未设预算"
    return SpendView(
        text=text,
        budget_set=budget > 0,
        reached=budget > 0 and spent_today >= budget,
        percent=min(100, round(spent_today / budget * 100)) if budget > 0 else 0,
        estimated=estimated,
        line=spend_line({**by_day, today: spent_today}, last_day=today, currency=currency, budget=budget),
        evaluations=(f"模型评估另计：今日 {money(evaluations[0], currency)}，近 {SPEND_DAYS} 天 "
                     f"{money(evaluations[1], currency)}（不占预算，不在上图）") if evaluations[1] else None,
    )


def day_cost(spent: float | None, currency: str, report: Row | None) -> str:
    """A day's LLM cost: the spend ledger's total, or for a day before the ledger what its report stored
    (``cost`` in its ``currency``; older reports stored ``cost_usd``)."""
    stats = (report or {}).get("stats")
    stats = stats if isinstance(stats, dict) else {}
    if not spent:
        for key, unit in (("cost", stats.get("currency")), ("cost_usd", "USD")):
            value = stats.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                return money(value, unit if unit in ("USD", "CNY") else currency)
    return money(spent or 0, currency)


def item_total(row: Row, spend: Row | None) -> str | None:
    """What every call for an article cost (store.operations.item_spend: failed attempts included), when that is not
    just the analysis's own call."""
    if not spend or not spend.get("ladders"):
        return None
    total, own = Decimal(str(spend.get("cost") or 0)), Decimal(str(row.get("cost") or 0))
    currency = spend.get("currency") or row.get("currency") or "USD"
    if abs(total - own) < Decimal("0.0000005") and currency == (row.get("currency") or "USD"):
        return None
    return f"{money(total, currency)}（{spend.get('calls') or 0} 次调用，含失败的尝试）"
