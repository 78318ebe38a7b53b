"""The 战绩 (track record) page, the analysis page's outcome and the weekly section: rows in, views out (pure).

Every figure is one the track-record step stored (track_record.py, outcomes.py); the pages compute only the
summaries of those rows (outcomes.Group) and say what a figure is: a record of past calls, not advice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from include.radar import store
from include.radar.market import basis, outcomes
from include.radar.pushes.labels import direction_label, type_label
from include.radar.web.auth import PageError
from include.radar.web.charts import Estimate, interval_chart, progress_chart
from include.radar.web.views import query
from include.radar.web.views.common import Links, local_time

PAGE_SIZE = 25
MAX_PAGE = 400
HORIZONS = {"1": "T+1", "5": "T+5", "20": "T+20"}
BAND_LABELS = {"": "全部分数", **{key: f"{label} 分" for key, label, _, _ in outcomes.BANDS}}
ORIGINS = {"push": "时段推送", "daily": "日报精选"}
STATUS_LABELS = {"waiting": "等待", "measured": "已测", "suspended": "停牌", "no_data": "缺数据"}


@dataclass(frozen=True)
class RecordForm:
    first: str = ""
    last: str = ""
    account: str = ""
    opp_type: str = ""
    band: str = ""
    horizon: str = "5"
    page: int = 1

    def filters(self) -> store.track.RecordFilters:
        band = next(((low, high) for key, _, low, high in outcomes.BANDS if key == self.band), (None, None))
        return store.track.RecordFilters(date.fromisoformat(self.first) if self.first else None,
                             date.fromisoformat(self.last) if self.last else None,
                             self.account or None, self.opp_type or None, band[0], band[1])

    @property
    def narrowed(self) -> bool:
        """Whether a filter narrows the record (the horizon only chooses which return is shown)."""
        return any((self.first, self.last, self.account, self.opp_type, self.band))

    def url(self, links: Links, page: int | None = None, **change: str) -> str:
        params = {"from": self.first, "to": self.last, "account": self.account, "type": self.opp_type,
                  "band": self.band, "h": self.horizon if self.horizon != "5" else "", "page": str(page or "")}
        params.update(change)
        query = urlencode({k: v for k, v in params.items() if v and not (k == "page" and v == "1")})
        return links.record() + (f"?{query}" if query else "")




def _bad(message: str) -> PageError:
    return PageError(400, "筛选条件无效", message)


def parse_form(params: Any) -> RecordForm:
    """The page's query parameters, checked; anything else is a 400 saying what is wrong (never a 500). No
    parameter holds a control character (a NUL cannot even reach the database)."""
    def one(name: str) -> str:
        return query.one(params, name, _bad)

    band, horizon = one("band"), one("h") or "5"
    if band not in BAND_LABELS:
        raise _bad("分数段只能是页面上列出的选项。")
    if horizon not in HORIZONS:
        raise _bad("期限只能是 T+1、T+5 或 T+20。")
    page = query.page_number(one("page"), MAX_PAGE, _bad)
    account, opp_type = one("account"), one("type")
    if len(account) > 100 or len(opp_type) > 20:
        raise _bad("公众号或类型过长。")
    first, last = query.filter_day(one("from"), "开始日期", _bad), query.filter_day(one("to"), "结束日期", _bad)
    if first and last and first > last:
        raise _bad("开始日期晚于结束日期。")
    return RecordForm(first, last, account, opp_type, band, horizon, page)


# ------------------------------------------------------------------------------------------------ rows


@dataclass(frozen=True)
class HorizonView:
    label: str
    status: str  # waiting | measured | suspended | no_data | none
    ret: str = ""
    bench: str = ""
    excess: str = ""  # in the call's direction: a bearish call's is the benchmark's return less the stock's
    hit: bool | None = None
    note: str = ""
    end: str = ""
    priced: bool = False  # figures to show: measured, or suspended and marked at the last close (note says so)


@dataclass(frozen=True)
class PickView:
    title: str
    url: str
    picked: str
    origin: str
    score: int
    direction: str
    direction_key: str
    opp_type: str
    account: str
    measurable: bool
    reason: str
    instrument: str
    benchmark: str
    reference: str
    ref_note: str
    horizons: list[HorizonView]
    bias: str = ""  # what its excess figures leave out (a price-index benchmark), said beside them


def _horizons(raw: Any) -> list[HorizonView]:
    found = {o.get("horizon"): o for o in raw if isinstance(o, dict)} if isinstance(raw, list) else {}
    out = []
    for h in outcomes.HORIZONS:
        o = found.get(h)
        if o is None:
            out.append(HorizonView(f"T+{h}", "none", note="尚未计算"))
            continue
        end = o.get("end_day")
        out.append(HorizonView(
            f"T+{h}", str(o.get("status") or "none"), outcomes.percent(o.get("ret")), outcomes.percent(o.get("bench_ret")),
            outcomes.percent(o.get("signed_excess") if o.get("signed_excess") is not None else o.get("excess")),
            o.get("hit"), str(o.get("note") or ""), str(end)[5:] if end else "", o.get("ret") is not None))
    return out


def pick_view(row: dict[str, Any], links: Links, tz: ZoneInfo) -> PickView:
    measurable = row["status"] == "measurable"
    instrument = (f"{row['instrument_name']}（{row['instrument'].split(':', 1)[1]}）" if row["instrument_name"]
                  else row["instrument"] or "") if row.get("instrument") else ""
    reference = ""
    if row.get("ref_price") is not None and row.get("ref_day"):
        kind = {"open": "开盘价", "intraday": "盘中价", "close": "收盘价"}.get(row.get("ref_kind") or "", "")
        reference = f"{row['ref_day'].month}月{row['ref_day'].day}日{kind} {row['ref_price']:.2f}"
    return PickView(
        title=row["title"] or "（无标题）", url=links.analysis(row["analysis_id"]),
        picked=local_time(row["picked_at"], tz, "%Y-%m-%d %H:%M"), origin=ORIGINS.get(row["origin"], row["origin"]),
        score=int(row["score"]), direction=direction_label(row["direction"]), direction_key=row["direction"],
        opp_type=type_label(row["opp_type"]), account=row["account"] or "", measurable=measurable,
        reason=row["reason"] or "", instrument=instrument, benchmark=row.get("benchmark_name") or "",
        reference=reference, ref_note=row.get("ref_note") or "", horizons=_horizons(row.get("outcomes")),
        bias=basis.excess_bias(row.get("instrument"), row.get("benchmark"), row.get("benchmark_name") or ""),
    )


# ------------------------------------------------------------------------------------------- summaries


@dataclass(frozen=True)
class SummaryRow:
    label: str
    picks: int
    sample: int
    conclusive: bool
    hit: str
    excess: str
    note: str  # the picks outside the sample, by why
    marked: str = ""  # the suspended calls in the sample, and the bound counting them (and the unpriced) as misses
    bias: str = ""  # the sample's picks measured against a price index, said beside the mean excess


def summary_row(group: outcomes.Group) -> SummaryRow:
    notes = []
    for n, what in ((group.waiting, "等待"), (group.unmeasurable, "无法测量"), (group.unpriced, "停牌无价或缺数据"),
                    (group.undirected, "无方向")):
        if n:
            notes.append(f"{what} {n}")
    marked = f"停牌 {group.marked} 条按最后收盘价计入" if group.marked else ""
    if not group.conclusive:
        return SummaryRow(group.label, group.picks, group.directional, False,
                          f"样本 {group.directional}，不足 {outcomes.MIN_SAMPLE}", "—", "，".join(notes), marked)
    low, high = group.hit_interval
    mean = group.mean_excess
    assert mean is not None
    if group.marked or group.unpriced_calls:
        marked = "；".join(m for m in (marked, f"停牌与缺数据的都算错时 {outcomes.percent(group.hit_floor, False)}") if m)
    bias = (f"其中 {group.biased} 条的基准是价格指数（不含分红），这些超额偏高约为基准同期的股息率"
            if group.biased else "")
    return SummaryRow(group.label, group.picks, group.directional, True,
                      f"{outcomes.percent(group.hit_rate, False)}（{outcomes.percent(low, False)}–{outcomes.percent(high, False)}）",
                      f"{outcomes.percent(mean[0])}（{outcomes.percent(mean[1])}～{outcomes.percent(mean[2])}）", "，".join(notes), marked, bias)


@dataclass(frozen=True)
class Summaries:
    overall: SummaryRow
    bands: list[SummaryRow]
    accounts: list[SummaryRow]
    types: list[SummaryRow]
    directions: list[SummaryRow]
    hit_chart: Any
    excess_chart: Any
    horizon: str
    calibrated: bool = False  # a score band holds MIN_SAMPLE calls: the two interval charts say something
    progress_chart: Any = None  # until then: each band's count toward MIN_SAMPLE, its calls right and wrong


def _groups(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    by_dim: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_dim.setdefault(r["dim"], {})[r["key"]] = r
    return by_dim


def _ordered(groups: list[outcomes.Group]) -> list[SummaryRow]:
    return [summary_row(g) for g in sorted(groups, key=lambda g: (-g.picks, g.label))]


def summaries(rows: list[dict[str, Any]], horizon: str) -> Summaries:
    """The summaries from store.track.summary_groups' rows (one per group, aggregated in SQL)."""
    label = HORIZONS[horizon]
    by_dim = _groups(rows)
    band_rows = by_dim.get("band", {})
    bands = [outcomes.Group.from_sums(key, name, band_rows[key])  # ascending score: the chart's x axis
             for key, name, _, _ in reversed(outcomes.BANDS) if key in band_rows]
    hit_points, excess_points = [], []
    for g in bands:
        if g.conclusive:
            low, high = g.hit_interval
            mean = g.mean_excess or (0.0, 0.0, 0.0)
            hit_points.append(Estimate(g.label, g.directional, g.hit_rate, low, high))
            excess_points.append(Estimate(g.label, g.directional, mean[0], mean[1], mean[2]))
        else:
            hit_points.append(Estimate(g.label, g.directional))
            excess_points.append(Estimate(g.label, g.directional))
    spread = max([0.05] + [max(abs(p.low or 0), abs(p.high or 0)) for p in excess_points])
    every_band = [outcomes.Group.from_sums(key, name, band_rows.get(key, {})) for key, name, _, _ in outcomes.BANDS]
    return Summaries(
        overall=summary_row(outcomes.Group.from_sums("all", "全部", by_dim.get("all", {}).get("", {}))),
        bands=[summary_row(g) for g in reversed(bands)],
        accounts=_ordered([outcomes.Group.from_sums(k, k or "—", r) for k, r in by_dim.get("account", {}).items()]),
        types=_ordered([outcomes.Group.from_sums(k, type_label(k), r) for k, r in by_dim.get("type", {}).items()]),
        directions=_ordered([outcomes.Group.from_sums(k, direction_label(k), r)
                             for k, r in by_dim.get("direction", {}).items()]),
        hit_chart=interval_chart(
            hit_points, title=f"{label} 命中率（按评分段）",
            desc=f"各评分段 {label} 的命中率与 95% Wilson 区间；样本不足 {outcomes.MIN_SAMPLE} 的评分段只标出样本数",
            low=0.0, high=1.0, reference=0.5),
        excess_chart=interval_chart(
            excess_points, title=f"{label} 平均超额收益（按评分段）",
            desc=f"各评分段 {label} 按看多/看空方向计的平均超额收益与 95% 区间；样本不足 {outcomes.MIN_SAMPLE} 的只标出样本数",
            low=-spread, high=spread, reference=0.0),
        horizon=label,
        calibrated=any(g.conclusive for g in bands),
        progress_chart=progress_chart(
            [Estimate(f"{g.label} 分", g.directional) for g in every_band], target=outcomes.MIN_SAMPLE,
            hits=[g.hits for g in every_band], title=f"{label} 各评分段已测的判断",
            desc=f"各评分段 {label} 已测的看多/看空判断条数（满 {outcomes.MIN_SAMPLE} 条才计命中率）与其中对、错的条数"),
    )


# ------------------------------------------------------------------------------------------- the week


@dataclass(frozen=True)
class WeekRecord:
    picks: list[PickView]
    summary: SummaryRow
    url: str
    horizon: int = outcomes.WEEK_HORIZON


def week_record(rows: list[dict[str, Any]], groups: list[dict[str, Any]], links: Links, tz: ZoneInfo,
                form: RecordForm) -> WeekRecord:
    """The weekly page's section: the week's picks and their record at outcomes.WEEK_HORIZON, the horizon the
    weekly push says too (store.track.summary_groups' rows at it)."""
    overall = _groups(groups).get("all", {}).get("", {})
    return WeekRecord([pick_view(r, links, tz) for r in rows], summary_row(outcomes.Group.from_sums("all", "全部", overall)),
                      form.url(links))
