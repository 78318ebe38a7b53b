"""How a push's calls have fared: the account's record beside its name, and how calls of the top item's score
band did, in the track record page's own figures (outcomes.Group over store.track.summary_groups' rows, the
page's definitions and formats: web/views/record.py's summary_row). A figure the page would not conclude from
(fewer than MIN_SAMPLE measured calls) is never shown; below it the account's line says so with the count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from include.radar import store
from include.radar.market import outcomes


@dataclass(frozen=True)
class Standing:
    """The record's groups at ``horizon`` by dimension and key ('account' by account name, 'band' by
    outcomes.BANDS key), and the measured calls an account needs before its record is said."""

    horizon: int
    groups: Mapping[str, Mapping[str, outcomes.Group]] = field(default_factory=dict)
    min_picks: int = outcomes.MIN_SAMPLE

    def group(self, dim: str, key: str) -> outcomes.Group | None:
        return self.groups.get(dim, {}).get(key)


def load(conn: Any, horizon: int, min_picks: int) -> Standing:
    """The whole record's groups at ``horizon`` (the page unfiltered); an account's rate needs ``min_picks``
    measured calls (outcome_min_picks), and never fewer than the page's MIN_SAMPLE."""
    groups: dict[str, dict[str, outcomes.Group]] = {}
    for row in store.track.summary_groups(conn, store.track.RecordFilters(), horizon):
        groups.setdefault(row["dim"], {})[row["key"]] = outcomes.Group.from_sums(row["key"], row["key"], row)
    return Standing(horizon, groups, max(min_picks, outcomes.MIN_SAMPLE))


def account_line(standing: Standing, account: str) -> str:
    """「该号战绩 18/30，T+5 超额 +1.8%（-0.3%～+3.9%）」: hits of the measured calls and the mean excess in
    the call's direction with its 95 % interval, as the record page's account row; below the minimum
    「该号战绩不足（已测 12 条）」; '' for an account the record has no pick of (a new radar says nothing)."""
    group = standing.group("account", account[:100]) if account else None  # track_pick.account: 100 characters
    if group is None:
        return ""
    measured, mean = group.directional, group.mean_excess
    if measured < standing.min_picks or mean is None:
        return f"该号战绩不足（已测 {measured} 条）"
    return (f"该号战绩 {group.hits}/{measured}，T+{standing.horizon} 超额 {outcomes.percent(mean[0])}"
            f"（{outcomes.percent(mean[1])}～{outcomes.percent(mean[2])}）")


def band_line(standing: Standing, score: int) -> list[str]:
    """「80–89 分的机会：已测 34 条，T+5 命中率 62%（46%–76%）」 for ``score``'s band, when the record page
    concludes a rate for it (MIN_SAMPLE measured calls); else nothing."""
    key, label = outcomes.band_of(score)
    group = standing.group("band", key)
    if group is None or not group.conclusive or group.hit_rate is None:
        return []
    low, high = group.hit_interval
    return [f"{label} 分的机会：已测 {group.directional} 条，T+{standing.horizon} 命中率 {outcomes.percent(group.hit_rate, False)}"
            f"（{outcomes.percent(low, False)}–{outcomes.percent(high, False)}）"]
