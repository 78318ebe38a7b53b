"""Charts drawn on the server as inline SVG: no JavaScript, nothing the strict CSP has to allow.

Every chart is a ``viewBox`` drawing that scales to the width of its container (a phone's too), carries a
``<title>`` and ``<desc>`` for screen readers, and is built from numbers and labels only: every label is
escaped here, and the result is marked safe for the templates. A day without data is a gap in a line (the
line is broken there, not drawn through a zero it does not know) and an empty bar.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from html import escape

from markupsafe import Markup

WIDTH, HEIGHT = 320, 150
LEFT, RIGHT, TOP, BOTTOM = 28, 8, 10, 22
COLORS = ("#d97706", "#2563eb", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#65a30d", "#db2777")


@dataclass(frozen=True)
class Series:
    label: str
    values: Sequence[float | None]  # one per day; None: no data that day
    color: str = COLORS[0]


def _x(i: int, n: int) -> float:
    return LEFT + (WIDTH - LEFT - RIGHT) * (i / max(1, n - 1))


def _y(value: float, top: float) -> float:
    return TOP + (HEIGHT - TOP - BOTTOM) * (1 - value / top) if top else HEIGHT - BOTTOM


def nice_top(values: Sequence[float | None], floor: float = 1) -> float:
    """The axis top: the largest value rounded up to 1, 2 or 5 times a power of ten."""
    peak = max([v for v in values if v is not None] + [floor])
    step = 1.0
    while True:
        for m in (1, 2, 5):
            if m * step >= peak:
                return m * step
        step *= 10


def paths(values: Sequence[float | None], top: float) -> list[str]:
    """SVG path data for one series: one sub-path per run of days with data (a missing day breaks the line)."""
    runs: list[list[tuple[float, float]]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((_x(i, len(values)), _y(v, top)))
    return ["M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in run) for run in runs if run]


def line_chart(days: Sequence[date], series: Sequence[Series], *, title: str, desc: str, top: float | None = None,
               unit: str = "") -> Markup:
    top = top or nice_top([v for s in series for v in s.values])
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
             f'preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{escape(title)}</title><desc>{escape(desc)}</desc>"]
    for frac in (0, 0.5, 1):
        y = _y(top * frac, top)
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#cbd5e1" '
                     f'stroke-width="0.5"/><text x="{LEFT - 3}" y="{y + 3:.1f}" font-size="8" text-anchor="end" '
                     f'fill="#64748b">{escape(_num(top * frac))}{escape(unit)}</text>')
    if days:
        for i in (0, len(days) // 2, len(days) - 1):
            parts.append(f'<text x="{_x(i, len(days)):.1f}" y="{HEIGHT - 6}" font-size="8" text-anchor="middle" '
                         f'fill="#64748b">{days[i].month}/{days[i].day}</text>')
    for s in series:
        for d in paths(s.values, top):
            parts.append(f'<path d="{d}" fill="none" stroke="{escape(s.color)}" stroke-width="1.6" '
                         f'stroke-linejoin="round"/>')
        for i, v in enumerate(s.values):
            single = v is not None and (i == 0 or s.values[i - 1] is None) and (
                i == len(s.values) - 1 or s.values[i + 1] is None)
            if single:  # a day with data between two without: a dot, or it would not show
                parts.append(f'<circle cx="{_x(i, len(s.values)):.1f}" cy="{_y(v, top):.1f}" r="1.8" '
                             f'fill="{escape(s.color)}"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


def bar_chart(labels: Sequence[str], values: Sequence[int], *, title: str, desc: str,
              marked: int | None = None) -> Markup:
    """Bars with their counts above; ``marked`` highlights one bar (the threshold's band)."""
    top = nice_top(values)
    n = max(1, len(values))
    slot = (WIDTH - LEFT - RIGHT) / n
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title><desc>{escape(desc)}</desc>']
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        x = LEFT + i * slot + slot * 0.15
        y = _y(value, top)
        color = "#dc2626" if marked is not None and i >= marked else "#94a3b8"
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" height="{HEIGHT - BOTTOM - y:.1f}" '
                     f'fill="{color}"/><text x="{x + slot * 0.35:.1f}" y="{y - 2:.1f}" font-size="9" '
                     f'text-anchor="middle" fill="#334155">{value}</text><text x="{x + slot * 0.35:.1f}" '
                     f'y="{HEIGHT - 6}" font-size="8" text-anchor="middle" fill="#64748b">{escape(label)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


@dataclass(frozen=True)
class Estimate:
    """A group's figure with its 95 % interval; None where the group is too small to conclude (its count shows)."""

    label: str
    n: int
    value: float | None = None
    low: float | None = None
    high: float | None = None


def interval_chart(points: Sequence[Estimate], *, title: str, desc: str, low: float, high: float, unit: str = "%",
                   reference: float | None = None, scale: float = 100.0) -> Markup:
    """One dot per group with its 95 % interval as a whisker (the track record's calibration by score band); a
    group without a conclusion shows only its count. ``low``/``high``: the axis range (in the values' units);
    ``reference``: a dashed line (50 % of hits, zero excess); ``scale``: value → label (100: fractions as %)."""
    span_ = (high - low) or 1.0

    def y(value: float) -> float:
        clipped = max(low, min(high, value))
        return TOP + (HEIGHT - TOP - BOTTOM) * (1 - (clipped - low) / span_)

    n = max(1, len(points))
    slot = (WIDTH - LEFT - RIGHT) / n
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title><desc>{escape(desc)}</desc>']
    for frac in (0, 0.5, 1):
        value = low + span_ * frac
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#cbd5e1" '
                     f'stroke-width="0.5"/><text x="{LEFT - 3}" y="{y(value) + 3:.1f}" font-size="8" text-anchor="end" '
                     f'fill="#64748b">{escape(_num(value * scale))}{escape(unit)}</text>')
    if reference is not None:
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(reference):.1f}" y2="{y(reference):.1f}" '
                     f'stroke="#94a3b8" stroke-width="0.8" stroke-dasharray="3 2"/>')
    for i, p in enumerate(points):
        x = LEFT + slot * (i + 0.5)
        parts.append(f'<text x="{x:.1f}" y="{HEIGHT - 6}" font-size="8" text-anchor="middle" fill="#64748b">'
                     f'{escape(p.label)}</text>')
        if p.value is None or p.low is None or p.high is None:  # no conclusion: the count only, on the axis
            parts.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM - 4:.1f}" font-size="8" text-anchor="middle" '
                         f'fill="#94a3b8">n={p.n}</text>')
            continue
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y(p.low):.1f}" y2="{y(p.high):.1f}" stroke="#2563eb" '
                     f'stroke-width="1.6"/><line x1="{x - 4:.1f}" x2="{x + 4:.1f}" y1="{y(p.low):.1f}" '
                     f'y2="{y(p.low):.1f}" stroke="#2563eb" stroke-width="1.2"/><line x1="{x - 4:.1f}" '
                     f'x2="{x + 4:.1f}" y1="{y(p.high):.1f}" y2="{y(p.high):.1f}" stroke="#2563eb" stroke-width="1.2"/>'
                     f'<circle cx="{x:.1f}" cy="{y(p.value):.1f}" r="3" fill="#d97706"/>'
                     f'<text x="{x:.1f}" y="{max(TOP + 7, y(p.high) - 3):.1f}" font-size="8" text-anchor="middle" '
                     f'fill="#334155">{escape(_num(round(p.value * scale, 1)))}{escape(unit)} · n={p.n}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def progress_chart(points: Sequence[Estimate], *, title: str, desc: str, target: int, hits: Sequence[int]) -> Markup:
    """One row per group: how far its sample is toward ``target`` (a bar filled n / target) and, beside it, the
    count of calls right and wrong — what a few picks can say, without a rate they cannot support yet."""
    row, label_width = 26, 64
    height = TOP + row * max(1, len(points)) + 4
    bar = WIDTH - label_width - RIGHT - 92
    parts = [f'<svg class="chart progress" viewBox="0 0 {WIDTH} {height}" width="100%" role="img" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title><desc>{escape(desc)}</desc>']
    for i, (p, right) in enumerate(zip(points, hits, strict=True)):
        y = TOP + row * i
        filled = bar * min(1.0, p.n / target) if target else 0.0
        parts.append(f'<text x="{label_width - 4}" y="{y + 12:.1f}" font-size="10" text-anchor="end" fill="#334155">'
                     f'{escape(p.label)}</text><rect x="{label_width}" y="{y + 3:.1f}" width="{bar}" height="12" '
                     f'fill="#e2e8f0"/><rect x="{label_width}" y="{y + 3:.1f}" width="{filled:.1f}" height="12" '
                     f'fill="#2563eb"/><text x="{label_width + bar + 4}" y="{y + 12:.1f}" font-size="10" '
                     f'fill="#334155">{p.n} / {target} · 对 {right} 错 {p.n - right}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
