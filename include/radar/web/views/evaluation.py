"""The evaluation page's view models: an evaluation's row as the list shows it, the summary's figures as text, and
the chart of the candidate's score against the current one's (inline SVG, numbers only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from markupsafe import Markup

from include.radar import agreement, evaluation_report
from include.radar.evaluation_report import Summary
from include.radar.pricing import format_money

STATUS = {"planned": "已抽样，未运行", "running": "运行中", "done": "完成", "stopped": "已暂停（可续跑）",
          "refused": "已拒绝（估算超出上限）"}
SIZE, PAD = 220, 26


def setup_label(row: dict[str, Any]) -> str:
    mode = f"思考 {row['reasoning_effort'] or '开'}" if row["thinking"] else "不思考"
    return f"{row['model']} · {mode} · analysis-{row['prompt_version']}"


@dataclass(frozen=True)
class Listed:
    id: int
    setup: str
    status: str
    progress: str
    spent: str
    created: str


def listed(row: dict[str, Any]) -> Listed:
    currency = row["currency"]
    return Listed(
        id=int(row["id"]), setup=setup_label(row), status=STATUS.get(row["status"], row["status"]),
        progress=f"{row['answered']}/{row['items']} 篇已回答" + (f"，{row['failed']} 篇失败" if row["failed"] else ""),
        spent=f"{format_money(row['spent'], currency)} / 上限 {format_money(row['cap'], currency)}",
        created=f"{row['created_at']:%Y-%m-%d %H:%M}",
    )


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def chance_text(chance: float) -> str:
    """"1/20" when it is one in a whole number, else a share: "35%"."""
    k = evaluation_report.one_in(chance)
    return f"1/{k}" if k else f"{chance:.0%}"


def auc_text(value: agreement.Auc) -> str:
    if value.value is None:
        return f"—（👍 {value.liked} · 👎 {value.disliked}）"
    if value.conclusive:
        return f"{value.value:.2f}［{value.low:.2f}, {value.high:.2f}］（👍 {value.liked} · 👎 {value.disliked}）"
    chance = chance_text(value.chance if value.chance is not None else 1.0)
    return (f"{value.value:.2f}（👍 {value.liked} · 👎 {value.disliked}）：样本太少，不给区间（每类至少 "
            f"{agreement.MIN_VOTES} 条）；随机打分也有 {chance} 的机会分得一样好")


def cost_rows(summary: Summary, currency: str) -> list[tuple[str, str, str]]:
    """(what, current, candidate) rows of the cost-and-time table."""
    a, b = summary.current, summary.candidate
    if a is None or b is None:
        return []

    def money(value: float | None) -> str:
        return format_money(value, currency)

    return [
        ("费用", money(a.cost), money(b.cost)),
        ("输入 tokens（缓存命中）", f"{a.prompt_tokens}（{a.cache_hit_tokens}）", f"{b.prompt_tokens}（{b.cache_hit_tokens}）"),
        ("输出 tokens", str(a.completion_tokens), str(b.completion_tokens)),
        ("每篇平均耗时", f"{num(a.latency_ms, 0)} ms", f"{num(b.latency_ms, 0)} ms"),
        ("多于一次调用的回答（无效或补问证据）", str(a.repaired), str(b.repaired)),
        ("证据未通过核对", str(a.evidence_refused), str(b.evidence_refused)),
        ("判断为机会", str(a.opportunities), str(b.opportunities)),
        ("每个机会的费用", money(a.cost_per_opportunity), money(b.cost_per_opportunity)),
    ]


def scatter(points: Sequence[tuple[int, int]], *, title: str, desc: str) -> Markup:
    """Score against score (0–100 on both axes), the diagonal where they agree; a point per article."""

    def at(value: int) -> float:
        return PAD + (SIZE - 2 * PAD) * max(0, min(100, value)) / 100

    dots = "".join(f'<circle cx="{at(a):.1f}" cy="{SIZE - at(b):.1f}" r="3" fill="#2563eb" fill-opacity=".7"/>'
                   for a, b in points)
    ticks = "".join(f'<text x="{at(v):.1f}" y="{SIZE - 8}" font-size="9" text-anchor="middle">{v}</text>'
                    f'<text x="{PAD - 4}" y="{SIZE - at(v) + 3:.1f}" font-size="9" text-anchor="end">{v}</text>'
                    for v in (0, 60, 100))
    return Markup(
        f'<svg class="chart" viewBox="0 0 {SIZE} {SIZE}" role="img" style="max-width:320px">'
        f"<title>{escape(title)}</title><desc>{escape(desc)}</desc>"
        f'<line x1="{at(0)}" y1="{SIZE - at(0)}" x2="{at(100)}" y2="{SIZE - at(100)}" stroke="#9aa6b6" stroke-dasharray="3 3"/>'
        f'<line x1="{at(60)}" y1="{SIZE - at(0)}" x2="{at(60)}" y2="{SIZE - at(100)}" stroke="#e2e7ee"/>'
        f'<line x1="{at(0)}" y1="{SIZE - at(60)}" x2="{at(100)}" y2="{SIZE - at(60)}" stroke="#e2e7ee"/>'
        f"{ticks}{dots}</svg>"
    )


def market_rows(summary: Summary) -> list[tuple[str, str, str, str, str]]:
    """(group, picks, measured / waiting / not measurable, hits, mean signed excess) of the market table."""
    m = summary.market
    if m is None:
        return []
    rows = []
    for label, t in (("两者都选：当前", m.both_current), ("两者都选：候选", m.both_candidate),
                     ("只有当前选", m.only_current), ("只有候选选", m.only_candidate)):
        rows.append((label, str(t.picks), f"{t.measured} / {t.waiting} / {t.not_measurable}",
                     f"{t.hits}/{t.directional}" if t.directional else "—",
                     f"{t.mean_signed_excess:+.2%}" if t.mean_signed_excess is not None else "—"))
    return rows
