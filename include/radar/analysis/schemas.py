"""Typed boundaries: what the LLM must answer, validated with pydantic.

Strict types: a score of ``true``, ``"80"`` or ``80.5`` is a failed rung (the ladder asks again), never a
number pydantic guessed. Out-of-range or missing required fields fail validation; unknown extra fields
are ignored.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

OpportunityType = Literal["stock", "sector", "fund", "commodity", "macro", "bond", "fx", "crypto", "other"]
TopType = Literal["stock", "sector", "fund", "commodity", "macro", "bond", "fx", "crypto", "other", "none"]
Direction = Literal["bullish", "bearish", "neutral", "watch"]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True, strict=True)


class Opportunity(_Answer):
    name: str = Field(min_length=1, max_length=200)
    type: OpportunityType
    targets: list[str] = Field(default_factory=list, max_length=20)
    direction: Direction = "watch"
    horizon: str = Field("", max_length=100)
    catalyst: str = Field("", max_length=1000)
    risks: list[str] = Field(default_factory=list, max_length=20)
    evidence: list[str] = Field(default_factory=list, max_length=10)
    confidence: float = Field(ge=0, le=1)

    @field_validator("targets", "risks", "evidence")
    @classmethod
    def _short_items(cls, items: list[str]) -> list[str]:
        return [i.strip()[:500] for i in items if i.strip()]


class WatchlistNote(_Answer):
    """Whether the article touches the reader's watchlist (prompt v3): the model's word, shown as such."""

    touches: bool = False
    how: str = Field("", max_length=300)


class ArticleAnalysis(_Answer):
    score: int = Field(ge=0, le=100)
    has_opportunity: bool
    top_type: TopType
    summary: str = Field(min_length=1, max_length=2000)
    opportunities: list[Opportunity] = Field(default_factory=list, max_length=10)
    watchlist: WatchlistNote | None = None  # optional: an answer without it is still a valid analysis


class TopOpportunity(_Answer):
    analysis_id: int
    title: str = Field(min_length=1, max_length=300)
    reason: str = Field("", max_length=1000)


class DigestStats(_Answer):
    analysed: int = Field(0, ge=0)
    opportunities: int = Field(0, ge=0)
    failed: int = Field(0, ge=0)


class DailyDigest(_Answer):
    has_opportunity: bool
    top_opportunities: list[TopOpportunity] = Field(default_factory=list)
    digest_md: str = Field(min_length=1, max_length=20000)
    watchlist: list[str] = Field(default_factory=list, max_length=20)
    stats: DigestStats = Field(default_factory=DigestStats)

    @field_validator("top_opportunities")
    @classmethod
    def _at_most_three(cls, items: list[TopOpportunity]) -> list[TopOpportunity]:
        return items[:3]
