"""The evaluation page's view models: an evaluation's row as the list shows it, the verdict at a glance (both
set-ups, the cost and a month of it, what is missed and added, the rank, whether the reader's verdicts can judge;
why it stopped or failed), the summary's figures as Chinese text, and the chart of the candidate's score against
the current one's (inline SVG, numbers only, its axes labelled)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from markupsafe import Markup

from include.radar.core.pricing import format_money
from include.radar.core.slots import SHANGHAI
from include.radar.evaluation import agreement
from include.radar.evaluation import summary as evaluation_report
from include.radar.evaluation.summary import Disagreement, Setup, Summary
from include.radar.pushes.labels import DIRECTIONS as DIRECTION_LABELS
from include.radar.pushes.labels import TYPES as TYPE_LABELS

STATUS = {"planned": "已抽样，未运行", "running": "运行中", "done": "完成", "stopped": "已暂停（可续跑）",
          "refused": "已拒绝（估算超出上限，可提高上限续跑）", "failed": "失败（已停止，可续跑）"}
REASONS = {"cap": "达到本次评估的费用上限，提高上限后续跑即可", "time": "本次运行的时间用完，续跑即可",
           "held": "有文章正被另一次运行占用，稍后续跑", "config": "连接或配置出错", "failing": "文章接连失败",
           "crashed": "运行出错", "refused": "估算费用超出上限，没有调用",
           "over_cap": "端点报告的用量超出调用的预留（不遵守 max_tokens），已立即停止"}
# the run's own English notes, in Chinese; what an endpoint said stays as it said it
NOTES = ((re.compile(r"^(\d+) articles in a row failed; the last: (.*)$", re.S), "连续 {0} 篇文章的每次调用都失败；最后一次：{1}"),
         (re.compile(r"^every article it tried failed \((\d+)\); the last: (.*)$", re.S), "试过的 {0} 篇文章全部失败；最后一次：{1}"),
         (re.compile(r"^estimated (\S+) for (\d+) articles is over the cap of (\S+): no call made$"),
          "估算 {0}（{1} 篇）超出上限 {2}"),
         (re.compile(r"^the cap of (\S+) does not cover one call at its most \((\S+)\)"),
          "上限 {0} 不够一次调用的最多费用 {1}（每次调用前先预留）"),
         (re.compile(r"^(?:\w+: )?(\d+) of (\d+) articles crashed: (.*)$", re.S), "{1} 篇中 {0} 篇出错：{2}"))
ENDED = {"cap": "达到费用上限", "time": "运行时间用完", "held": "有文章被另一次运行占用", "failing": "端点接连失败",
         "config": "端点拒绝了连接或配置", "crashed": "运行出错", "over_cap": "端点报告的用量超出预留"}
EFFORT = {"low": "低", "medium": "中", "high": "高", "max": "最高"}
DIFFERS = {"call": "机会判断", "type": "类型", "direction": "方向", "score": "评分"}
PRICE_SOURCES = {"published": "公开价格", "given": "你给的价格", "deployment": "部署配置的价格（deepseek_prices）"}
LEFT, BOTTOM, TOP, RIGHT, SIZE = 40, 36, 10, 10, 240


def mode_label(thinking: bool | None, effort: str | None) -> str:
    if thinking is None:
        return "思考方式未知"
    return f"思考·{EFFORT.get(effort or '', effort or '开')}" if thinking else "不思考"


def setup_label(row: dict[str, Any]) -> str:
    return f"{row['model']} · {mode_label(row['thinking'], row['reasoning_effort'])} · analysis-{row['prompt_version']}"


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
        spent=f"已花 {format_money(row['spent'], currency)} / 上限 {format_money(row['cap'], currency)}",
        created=f"{row['created_at'].astimezone(SHANGHAI):%Y-%m-%d %H:%M}",  # the pages speak Beijing time
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


@dataclass(frozen=True)
class Verdict:
    """The page's first card: both set-ups side by side, one sentence, the deciding figures, and the state."""

    title: str
    setups: list[tuple[str, str, str]]  # (what, current, candidate)
    reading: str
    figures: list[tuple[str, str]]  # (what, text)
    status: str
    prices: str
    reason: str | None  # why it stopped, failed or was refused, with the detail
    failed: bool
    over: str | None = None  # the run passed its cap: said first, in red


def over_text(over: dict[str, Any], money: Any) -> str:
    """An overspend as the page says it first: by how much, the call that did it, and what follows."""
    return (f"超出费用上限 {money(over.get('over'))}：已花 {money(over.get('spent'))}，上限 {money(over.get('cap'))}。"
            f"端点报告一次调用输出 {over.get('output_tokens')} tokens，而请求最多 {over.get('max_tokens')}"
            f"（《{over.get('title')}》第 {over.get('call')} 次调用：{money(over.get('cost'))}，预留 "
            f"{money(over.get('reserved'))}）：它不遵守 max_tokens。运行已立即停止；除非明确要求"
            "（--trust-max-tokens），不再用这个端点续跑。")


def _setup_rows(current: Setup, candidate: Setup) -> list[tuple[str, str, str]]:
    return [("模型", current.model, candidate.model),
            ("思考", mode_label(current.thinking, current.effort), mode_label(candidate.thinking, candidate.effort)),
            ("提示词", current.prompt, candidate.prompt)]


def note_text(reason: str, note: str) -> str:
    """Why a run stopped, failed or was refused, in Chinese: the reason, then its detail."""
    for pattern, text in NOTES:
        if m := pattern.match(note):
            return f"{REASONS.get(reason, reason)}：{text.format(*m.groups())}"
    detail = f"端点的回答：{note}" if reason == "config" else note
    return f"{REASONS.get(reason, reason)}：{detail}" if detail else REASONS.get(reason, reason)


def ended(e: dict[str, Any]) -> str:
    """A run that stopped early, first: how far it got and why."""
    if e["status"] not in ("stopped", "failed"):
        return ""
    how = "已暂停" if e["status"] == "stopped" else "失败"
    return f"{how}：{e['items']} 篇中回答了 {e['answered']} 篇后停止（{ENDED.get(e['reason'], e['reason'])}）。"


def _reading(s: Summary, ratio: float | None) -> str:
    """One sentence of what the figures say, no further than they go; a run that stopped early says so first."""
    first = ended(s.evaluation)
    if not s.compared:
        return first + "还没有两种设置都回答过的文章，无从对照。"
    c, billed = s.confusion, s.glance.billed if s.glance else 0
    cost = (f"只有 {billed} 篇两种设置都回答并计费，不足 {evaluation_report.MIN_COMPARED} 篇，不比较每篇费用"
            if billed < evaluation_report.MIN_COMPARED else "每篇费用无从比较" if ratio is None
            else f"候选每篇便宜 {1 - ratio:.0%}" if ratio < 1 else f"候选每篇贵 {ratio - 1:.0%}" if ratio > 1
            else "每篇费用相同")
    judge = (f"按你的反馈，候选 AUC {s.reader_candidate.value:.2f}，当前 {s.reader_current.value:.2f}"
             if s.reader_current.conclusive and s.reader_candidate.conclusive else "你的反馈还不够判断哪个更准")
    p = s.pushed
    return first + (f"{cost}，机会判断一致 {pct(c.agreement)}（按推送的规则漏掉 {p.only_current} 个、多出 {p.only_candidate} 个），"
                    f"评分排序 Spearman {num(s.spearman)}；{judge}。")


def verdict(s: Summary) -> Verdict:
    e, g, p = s.evaluation, s.glance, s.pushed
    assert g is not None
    currency = e["currency"]

    def money(value: float | None) -> str:
        return format_money(value, currency)

    row = listed(e)
    month = (f"按近 {g.days} 天每天约 {g.per_day:.1f} 篇：候选约 {money(g.month(g.candidate_per_article))}，当前约 "
             f"{money(g.month(g.per_article))}（估算）" if g.per_day else "近 30 天没有分析，无从估算")
    verdicts = (f"足以判断（👍 {s.reader_current.liked} · 👎 {s.reader_current.disliked}）" if g.verdicts_enough else
                f"不足以判断（👍 {s.reader_current.liked} · 👎 {s.reader_current.disliked}，每类至少 {agreement.MIN_VOTES} 条）")
    figures = [
        ("费用", f"候选为当前的 {pct(g.ratio)}（每篇 {money(g.candidate_per_article)} 对 {money(g.per_article)}）"
         if g.ratio is not None else
         f"不比较（只有 {g.billed} 篇两种设置都回答并计费，至少 {evaluation_report.MIN_COMPARED} 篇）；每篇 "
         f"{money(g.candidate_per_article)} 对 {money(g.per_article)}"),
        ("价格", f"两种设置都按标准价（非高峰价）比较，不论在哪个时段调用；这 {g.billed} 篇实际计费：候选 "
                 f"{money(g.billed_candidate)}，当前 {money(g.billed_current)}（高峰时段为北京时间 {g.peak}）"),
        ("一个月", month),
        ("机会", f"按推送的规则（达到门槛、证据核对通过），当前的 {p.both + p.only_current} 个中候选漏掉 {p.only_current} 个，"
                 f"另多出 {p.only_candidate} 个"),
        ("排序一致", f"Spearman {num(s.spearman)}（{s.compared} 篇）"),
        ("你的反馈", verdicts),
    ]
    source = PRICE_SOURCES.get((e.get("prices") or {}).get("source"), "估算价格")
    prices = f"候选按 {e['model']} 的{source}（{currency}）计" + (
        "；当前的价格为估算（未设置 deepseek_prices）" if s.current_estimated else "") + "；金额均按价格表计算"
    reason = e.get("reason")
    detail = (REASONS.get(reason, reason) if reason in ("cap", "time", "held", "over_cap")
              else note_text(reason, e["note"] or "")) if reason else None
    return Verdict(
        title=f"{e['model']} 对比 {g.current.model}", setups=_setup_rows(g.current, g.candidate),
        reading=_reading(s, g.ratio), figures=figures,
        status=f"{row.status} · {row.progress} · {row.spent}", prices=prices, reason=detail,
        failed=e["status"] in ("failed", "refused"), over=over_text(e["over_cap"], money) if e.get("over_cap") else None,
    )


@dataclass(frozen=True)
class DisagreementView:
    item: Disagreement
    differs: str
    current: str
    candidate: str


def _brief(b: dict[str, Any]) -> str:
    if not b["opportunity"]:
        return f"{b['score']} 分 · 无机会"
    parts = [f"{b['score']} 分", "有机会", TYPE_LABELS.get(b["type"] or "", b["type"] or "—")]
    if b["direction"]:
        parts.append(DIRECTION_LABELS.get(b["direction"], b["direction"]))
    if b["targets"]:
        parts.append("、".join(b["targets"]))
    if not b.get("verified", True):
        parts.append("证据未通过核对（不会推送）")
    return " · ".join(parts)


def disagreements(summary: Summary) -> list[DisagreementView]:
    return [DisagreementView(d, "、".join(DIFFERS.get(w, w) for w in d.differs), _brief(d.current), _brief(d.candidate))
            for d in summary.disagreements]


def cost_rows(summary: Summary, currency: str) -> list[tuple[str, str, str]]:
    """(what, current, candidate) rows of the cost-and-time table."""
    a, b = summary.current, summary.candidate
    if a is None or b is None:
        return []

    def money(value: float | None) -> str:
        return format_money(value, currency)

    return [
        ("费用（两边都按标准价）", money(a.listed), money(b.listed)),
        ("实际计费（各按调用时段的价格）", money(a.cost), money(b.cost)),
        ("输入 tokens（缓存命中）", f"{a.prompt_tokens}（{a.cache_hit_tokens}）", f"{b.prompt_tokens}（{b.cache_hit_tokens}）"),
        ("输出 tokens", str(a.completion_tokens), str(b.completion_tokens)),
        ("每篇平均耗时", f"{num(a.latency_ms, 0)} ms", f"{num(b.latency_ms, 0)} ms"),
        ("多于一次调用的回答（无效或补问证据）", str(a.repaired), str(b.repaired)),
        ("证据未通过核对", str(a.evidence_refused), str(b.evidence_refused)),
        ("判断为机会", str(a.opportunities), str(b.opportunities)),
        ("每个机会的费用", money(a.cost_per_opportunity), money(b.cost_per_opportunity)),
    ]


def text_width(text: str, size: float = 10) -> float:
    """How wide a label is drawn, about: a CJK character a full em, anything else 0.75 of one (wider than most
    Latin letters and digits in the pages' sans-serif)."""
    return sum(size if ord(ch) >= 0x2E80 else size * 0.75 for ch in text)


def fit(label: str, length: float, size: float = 10) -> str:
    """A label cut in its middle (…) until it fits ``length``: a long model name never runs off the chart (the
    chart's title and description keep it whole)."""
    if text_width(label, size) <= length:
        return label
    head, tail = label[: len(label) // 2], label[len(label) // 2:]
    while head and text_width(f"{head}…{tail}", size) > length:
        head, tail = head[:-1], tail[1:] if len(tail) > len(head) else tail
    return f"{head}…{tail}"


def scatter(points: Sequence[tuple[int, int]], *, title: str, desc: str, x_label: str, y_label: str,
            threshold: int = 60) -> Markup:
    """Score against score (0–100 on both axes, each named), the diagonal where they agree, the push threshold on
    each axis; a point per article."""
    width, height = SIZE - LEFT - RIGHT, SIZE - TOP - BOTTOM

    def x(value: int) -> float:
        return LEFT + width * max(0, min(100, value)) / 100

    def y(value: int) -> float:
        return TOP + height * (1 - max(0, min(100, value)) / 100)

    dots = "".join(f'<circle cx="{x(a):.1f}" cy="{y(b):.1f}" r="3" fill="#2563eb" fill-opacity=".7"/>'
                   for a, b in points)
    ticks = "".join(f'<text x="{x(v):.1f}" y="{TOP + height + 12}" font-size="9" text-anchor="middle" '
                    f'fill="currentColor">{v}</text><text x="{LEFT - 4}" y="{y(v) + 3:.1f}" font-size="9" '
                    f'text-anchor="end" fill="currentColor">{v}</text>' for v in sorted({0, threshold, 100}))
    axes = (f'<text x="{LEFT + width / 2:.1f}" y="{SIZE - 4}" font-size="10" text-anchor="middle" '
            f'fill="currentColor">{escape(fit(x_label, width))}</text><text x="12" y="{TOP + height / 2:.1f}" '
            f'font-size="10" text-anchor="middle" fill="currentColor" transform="rotate(-90 12 {TOP + height / 2:.1f})">'
            f"{escape(fit(y_label, height))}</text>")
    return Markup(
        f'<svg class="chart" viewBox="0 0 {SIZE} {SIZE}" role="img" style="max-width:340px">'
        f"<title>{escape(title)}</title><desc>{escape(desc)}</desc>"
        f'<rect x="{LEFT}" y="{TOP}" width="{width}" height="{height}" fill="none" stroke="#c9d1dc"/>'
        f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(100)}" y2="{y(100)}" stroke="#9aa6b6" stroke-dasharray="3 3"/>'
        f'<line x1="{x(threshold)}" y1="{y(0)}" x2="{x(threshold)}" y2="{y(100)}" stroke="#e2e7ee"/>'
        f'<line x1="{x(0)}" y1="{y(threshold)}" x2="{x(100)}" y2="{y(threshold)}" stroke="#e2e7ee"/>'
        f"{ticks}{axes}{dots}</svg>"
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
