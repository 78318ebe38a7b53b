"""The rank of an analysis for the push and the report: its score, boosted by the reader's focus and feedback.

    rank = score + watchlist boost + feedback weight + outcome weight

The watchlist boost is +10 for a company, ticker or sector the radar found (``watch_hits``), else +5 when the
model said the article touches the watchlist; the feedback weight sums what the reader's verdicts taught per
shared key (the account 👍 +3 / 👎 −3 / 已知道 −1; an entity or the topic ±2), each key capped at ±6 and the
total at ±10; the outcome weight is the track record's shrunk mean excess return per account and type
(outcomes.outcome_points, from ``outcome_min_picks`` picks), capped the same. The threshold applies to the
score alone: the rank orders, it never makes an opportunity. Every part is kept (``Rank.parts``) and shown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from include.radar import store
from include.radar.market.outcomes import RANK_HORIZON, outcome_points

WATCH_BOOST = 10
INTEREST_BOOST = 5
FEEDBACK_CAP = 10
KEY_CAP = 6
OUTCOME_CAP = 10
OUTCOME_HORIZON = RANK_HORIZON
DEFAULT_MIN_PICKS = 30
ACCOUNT_POINTS = {"up": 3, "down": -3, "knew": -1}
TOPIC_POINTS = {"up": 2, "down": -2, "knew": 0}
VERDICTS = {"up": "👍 有用", "down": "👎 没用", "knew": "🤷 早知道了"}
TOPIC_NAMES = {"stock": "个股", "sector": "行业", "fund": "基金", "commodity": "商品", "macro": "宏观",
               "bond": "债券", "fx": "外汇", "crypto": "加密资产", "other": "其它"}


def _cap(value: int, cap: int) -> int:
    return max(-cap, min(cap, value))


def account_of(analysis: dict[str, Any]) -> str:
    return str(analysis.get("mp_name") or analysis.get("mp_id") or "")


def entities_of(analysis: dict[str, Any]) -> list[str]:
    """The companies, sectors and products an analysis names: its opportunities' targets."""
    data = analysis.get("result_json")
    opportunities = data.get("opportunities") if isinstance(data, dict) else None
    found: list[str] = []
    for opp in opportunities if isinstance(opportunities, list) else []:
        if not isinstance(opp, dict):
            continue
        targets = opp.get("targets") if isinstance(opp.get("targets"), list) else []
        for value in targets:
            if isinstance(value, str) and value.strip() and len(value.strip()) <= 60:
                found.append(value.strip())
    return list(dict.fromkeys(found))


def topic_of(analysis: dict[str, Any]) -> str | None:
    topic = analysis.get("top_type")
    return topic if isinstance(topic, str) and topic not in ("", "none") else None


def model_touches(analysis: dict[str, Any]) -> tuple[bool, str]:
    """What the model said about the reader's watchlist (prompt v3 and later): (touches, how)."""
    data = analysis.get("result_json")
    note = data.get("watchlist") if isinstance(data, dict) else None
    if not isinstance(note, dict):
        return False, ""
    how = note.get("how") if isinstance(note.get("how"), str) else ""
    return note.get("touches") is True, how


@dataclass(frozen=True)
class Weights:
    """What the reader's feedback taught: points per account, entity and topic, with the verdict counts."""

    account: dict[str, int] = field(default_factory=dict)
    entity: dict[str, int] = field(default_factory=dict)
    topic: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # verdict -> how many
    # the track record: (points, measured picks, mean signed excess) per account and per type
    outcome_account: dict[str, tuple[int, int, float]] = field(default_factory=dict)
    outcome_topic: dict[str, tuple[int, int, float]] = field(default_factory=dict)

    def learned(self, limit: int = 6) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """(what the reader values more, what less), strongest first, as labelled points."""
        labelled = [(f"公众号「{k}」", v) for k, v in self.account.items()]
        labelled += [(f"「{k}」", v) for k, v in self.entity.items()]
        labelled += [(f"{TOPIC_NAMES.get(k, k)}类机会", v) for k, v in self.topic.items()]
        more = sorted((x for x in labelled if x[1] > 0), key=lambda x: (-x[1], x[0]))[:limit]
        less = sorted((x for x in labelled if x[1] < 0), key=lambda x: (x[1], x[0]))[:limit]
        return more, less


def learned(conn: Any, now: datetime, min_picks: int = DEFAULT_MIN_PICKS) -> Weights:
    """The weights as of ``now``: the reader's verdicts and the track record read from the database, learned."""
    return learn(store.focus.feedback_for_ranking(conn, now), store.track.outcome_means(conn, OUTCOME_HORIZON), min_picks)


def learn(feedback: Iterable[dict[str, Any]], outcomes: Iterable[dict[str, Any]] = (),
          min_picks: int = DEFAULT_MIN_PICKS) -> Weights:
    """Weights from feedback rows (store.focus.feedback_for_ranking: verdict plus the analysis's account, topic and
    result_json) and from the track record (store.track.outcome_means: kind 'account' or 'type', key, n, mean)."""
    account: dict[str, int] = {}
    entity: dict[str, int] = {}
    topic: dict[str, int] = {}
    counts: dict[str, int] = {}
    for row in feedback:
        verdict = row["verdict"]
        if verdict not in ACCOUNT_POINTS:
            continue
        counts[verdict] = counts.get(verdict, 0) + 1
        name = account_of(row)
        if name:
            account[name] = account.get(name, 0) + ACCOUNT_POINTS[verdict]
        points = TOPIC_POINTS[verdict]
        if points:
            for key in entities_of(row):
                entity[key] = entity.get(key, 0) + points
            if topic_of(row):
                topic[topic_of(row)] = topic.get(topic_of(row), 0) + points  # type: ignore[index]
    clean = lambda d: {k: _cap(v, KEY_CAP) for k, v in d.items() if v}  # noqa: E731
    measured: dict[str, dict[str, tuple[int, int, float]]] = {"account": {}, "type": {}}
    for row in outcomes:
        if row.get("kind") in measured and row.get("key") and row.get("mean") is not None:
            n, mean = int(row["n"]), float(row["mean"])
            points = outcome_points(n, mean, min_picks, KEY_CAP)
            if points:
                measured[row["kind"]][str(row["key"])] = (points, n, mean)
    return Weights(clean(account), clean(entity), clean(topic), counts, measured["account"], measured["type"])


@dataclass(frozen=True)
class Rank:
    score: int
    watch: int
    feedback: int
    parts: list[tuple[str, int]]  # (why, points), every non-zero contribution
    outcome: int = 0

    @property
    def total(self) -> int:
        return self.score + self.watch + self.feedback + self.outcome


def rank(analysis: dict[str, Any], weights: Weights) -> Rank:
    parts: list[tuple[str, int]] = []
    hits = [h for h in analysis.get("watch_hits") or [] if isinstance(h, str)]
    touches, _ = model_touches(analysis)
    if hits:
        watch = WATCH_BOOST
        parts.append(("关注列表命中：" + "、".join(hits[:4]), WATCH_BOOST))
    elif touches:
        watch = INTEREST_BOOST
        parts.append(("模型判断与关注相关", INTEREST_BOOST))
    else:
        watch = 0
    learned: list[tuple[str, int]] = []
    name = account_of(analysis)
    if weights.account.get(name):
        learned.append((f"公众号「{name}」的反馈", weights.account[name]))
    for key in entities_of(analysis):
        if weights.entity.get(key):
            learned.append((f"「{key}」的反馈", weights.entity[key]))
    topic = topic_of(analysis)
    if topic and weights.topic.get(topic):
        learned.append((f"{TOPIC_NAMES.get(topic, topic)}类机会的反馈", weights.topic[topic]))
    feedback = _cap(sum(p for _, p in learned), FEEDBACK_CAP)
    parts += learned
    if learned and feedback != sum(p for _, p in learned):
        parts.append((f"反馈合计封顶 ±{FEEDBACK_CAP}", feedback - sum(p for _, p in learned)))
    record: list[tuple[str, int]] = []
    if name in weights.outcome_account:
        points, n, mean = weights.outcome_account[name]
        record.append((f"公众号「{name}」的战绩：{n} 条已测，T+{OUTCOME_HORIZON} 平均超额 {mean * 100:+.1f}%", points))
    if topic and topic in weights.outcome_topic:
        points, n, mean = weights.outcome_topic[topic]
        record.append((f"{TOPIC_NAMES.get(topic, topic)}类机会的战绩：{n} 条已测，T+{OUTCOME_HORIZON} 平均超额 "
                       f"{mean * 100:+.1f}%", points))
    outcome = _cap(sum(p for _, p in record), OUTCOME_CAP)
    parts += record
    if record and outcome != sum(p for _, p in record):
        parts.append((f"战绩合计封顶 ±{OUTCOME_CAP}", outcome - sum(p for _, p in record)))
    return Rank(int(analysis["score"]), watch, feedback, parts, outcome)


def annotate(analyses: Iterable[dict[str, Any]], weights: Weights) -> list[dict[str, Any]]:
    """Copies of ``analyses`` carrying ``rank_score`` (what events.lead_key and the orderings sort by) and
    ``rank`` (the parts, for pages)."""
    out = []
    for a in analyses:
        r = rank(a, weights)
        out.append({**a, "rank_score": r.total, "rank": r})
    return out


def order(analyses: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Best first by rank (the score where no rank was computed), then the older analysis."""
    return sorted(analyses, key=lambda a: (-int(a.get("rank_score", a["score"])), -int(a["score"]), int(a["id"])))
