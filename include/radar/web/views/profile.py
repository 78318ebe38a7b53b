"""The profile page (the reader's focus: watchlist and filter rules) and the rank explained on analysis pages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from include.radar.analysis import focus
from include.radar.pushes import ranking
from include.radar.web.views.common import PageContext, local_time, safe_http_url

FIELDS = ("companies", "tickers", "sectors", "interests", "rules")


@dataclass(frozen=True)
class ProfilePage:
    action: str
    csrf: str
    values: dict[str, str]
    read_only: bool
    read_only_reason: str = ""  # why this reader may not change it
    saved: bool = False
    recheck: int = 0  # excluded articles of the last 72 h the next slot checks against the saved rules
    disabled: list[str] = field(default_factory=list)  # stored rules this version cannot run, and why
    slow: list[str] = field(default_factory=list)  # stored regex rules a slot switched off as too slow, and why
    errors: list[str] = field(default_factory=list)
    updated: str | None = None
    updated_by: str | None = None
    learned_more: list[tuple[str, int]] = field(default_factory=list)
    learned_less: list[tuple[str, int]] = field(default_factory=list)
    watch_boost: int = ranking.WATCH_BOOST
    interest_boost: int = ranking.INTEREST_BOOST
    key_cap: int = ranking.KEY_CAP
    feedback_cap: int = ranking.FEEDBACK_CAP


def profile_values(profile: focus.Profile) -> dict[str, str]:
    """The stored profile as the form shows it: one item per line."""
    return {"companies": "\n".join(profile.companies), "tickers": "\n".join(profile.tickers),
            "sectors": "\n".join(profile.sectors), "interests": "\n".join(profile.interests),
            "rules": "\n".join(profile.rule_lines())}


@dataclass(frozen=True)
class Outcome:
    """What the reader's last save came to: saved (``recheck``: the excluded articles the next slot checks
    against the new rules), or refused (``errors``, with what they ``typed`` shown again)."""

    saved: bool = False
    recheck: int = 0
    errors: list[str] = field(default_factory=list)
    typed: dict[str, str] | None = None


def profile_page(page: PageContext, *, profile: focus.Profile, weights: ranking.Weights, csrf: str,
                 read_only: bool, read_only_reason: str = "", outcome: Outcome = Outcome()) -> ProfilePage:
    more, less = weights.learned()
    return ProfilePage(
        action=page.links.profile(), csrf=csrf,
        values=outcome.typed if outcome.typed is not None else profile_values(profile), read_only=read_only,
        read_only_reason=read_only_reason, saved=outcome.saved, recheck=outcome.recheck,
        disabled=list(profile.disabled), slow=list(profile.slow), errors=list(outcome.errors),
        updated=local_time(profile.updated_at, page.tz) if profile.updated_at else None,
        updated_by=profile.updated_by, learned_more=more, learned_less=less,
    )


@dataclass(frozen=True)
class RankView:
    """Why an analysis ranks where it does: every part of the formula, and what the model said."""

    score: int
    total: int
    parts: list[tuple[str, int]]
    model_touches: bool
    model_how: str
    watch_hits: list[str]


def rank_view(row: dict[str, Any], weights: ranking.Weights) -> RankView:
    r = ranking.rank(row, weights)
    touches, how = ranking.model_touches(row)
    return RankView(r.score, r.total, r.parts, touches, how, [h for h in row.get("watch_hits") or [] if h])


@dataclass(frozen=True)
class ExcludedView:
    title: str
    mp_name: str
    published: str
    reason: str
    source_url: str | None


def excluded_views(rows: list[dict[str, Any]], tz: ZoneInfo) -> list[ExcludedView]:
    """The articles the reader's rules kept from the LLM: listed, so nothing leaves the radar unseen."""
    return [ExcludedView(r.get("title") or "（无标题）", r.get("mp_name") or "", local_time(r.get("published_at"), tz,
                                                                                    "%m-%d %H:%M"),
                         r.get("reason") or "", safe_http_url(r.get("url"))) for r in rows]
