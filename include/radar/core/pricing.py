"""What a DeepSeek call costs, at the prices in force when it was made.

DeepSeek bills per million tokens in three parts: input served from its context cache (``cache hit``),
other input (``cache miss``) and output, reasoning tokens included (they are part of
``completion_tokens``). Since 2026-08-16 16:00 UTC it charges peak rates, double the off-peak ones, in two
windows of the Beijing day (09:00–12:00 and 14:00–18:00); before that moment every hour was billed at what
is now the off-peak rate. The price list changes often, so every figure is configuration
(``deepseek_prices``, ``deepseek_peak_*``) with the published 2026 prices as defaults for the current
models, in USD or CNY (DeepSeek's CNY list is separate, not a conversion). A model without a default is
priced as the dearest known one (an over-estimate, never free) and marked as estimated.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, time
from typing import Any

from include.radar.core.slots import SHANGHAI


@dataclass(frozen=True)
class Rates:
    """Prices per million tokens, in the table's currency."""

    cache_hit: float
    cache_miss: float
    output: float

    def scaled(self, factor: float) -> Rates:
        return Rates(self.cache_hit * factor, self.cache_miss * factor, self.output * factor)


# Off-peak prices as published for 2026 (external-apis.md); peak is off-peak × the peak multiplier (2).
# DeepSeek publishes the CNY list for deepseek-v4-pro only: other models in CNY need deepseek_prices.
DEFAULT_OFF_PEAK: dict[tuple[str, str], Rates] = {
    ("deepseek-v4-pro", "USD"): Rates(cache_hit=0.022, cache_miss=0.66, output=1.98),
    ("deepseek-flash", "USD"): Rates(cache_hit=0.003, cache_miss=0.15, output=0.60),
    ("deepseek-v4-pro", "CNY"): Rates(cache_hit=0.15, cache_miss=4.5, output=13.5),
}
# the most tokens a prompt is billed for: each byte a token (a byte-level tokenizer never makes more) and the chat
# template's own
TEMPLATE_TOKENS = 64
DEFAULT_PEAK_HOURS = "09:00-12:00,14:00-18:00"
DEFAULT_PEAK_SINCE = "2026-08-16T16:00:00+00:00"
CURRENCY_SIGN = {"USD": "$", "CNY": "¥"}

_WINDOW = re.compile(r"^\s*([01]?\d|2[0-3]):([0-5]\d)\s*-\s*([01]?\d|2[0-4]):([0-5]\d)\s*$")


def most_prompt_tokens(system: str, user: str) -> int:
    return len(system.encode()) + len(user.encode()) + TEMPLATE_TOKENS


def parse_windows(text: str) -> tuple[tuple[time, time], ...]:
    """``"09:00-12:00,14:00-18:00"`` → Beijing-time windows, start inclusive, end exclusive."""
    windows = []
    for part in (p for p in text.split(",") if p.strip()):
        m = _WINDOW.match(part)
        if not m:
            raise ValueError(f"{part.strip()!r} is not a HH:MM-HH:MM window")
        start = time(int(m[1]), int(m[2]))
        end = time.max if (int(m[3]), int(m[4])) == (24, 0) else time(int(m[3]) % 24, int(m[4]))
        if end <= start:
            raise ValueError(f"window {part.strip()!r} ends before it starts")
        windows.append((start, end))
    return tuple(windows)


def parse_rates(text: str) -> Rates:
    """``{"cache_hit": 0.022, "cache_miss": 0.66, "output": 1.98}`` (off-peak, per million tokens)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError('must be JSON like {"cache_hit": 0.022, "cache_miss": 0.66, "output": 1.98}') from None
    if not isinstance(data, dict) or set(data) != {"cache_hit", "cache_miss", "output"}:
        raise ValueError("needs exactly the keys cache_hit, cache_miss and output (off-peak prices per million tokens)")
    values = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e6:
            raise ValueError(f"{key} must be a non-negative number")
        values[key] = float(value)
    return Rates(**values)


@dataclass(frozen=True)
class PriceTable:
    currency: str
    off_peak: Rates
    peak_multiplier: float = 2.0
    peak_windows: tuple[tuple[time, time], ...] = parse_windows(DEFAULT_PEAK_HOURS)
    peak_since: datetime = datetime.fromisoformat(DEFAULT_PEAK_SINCE)
    peak_weekdays_only: bool = False
    estimated: bool = False  # no published price for the model: the dearest known one stands in

    def is_peak(self, at: datetime) -> bool:
        if at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        if at < self.peak_since:
            return False
        local = at.astimezone(SHANGHAI)
        if self.peak_weekdays_only and local.weekday() >= 5:
            return False
        now = local.time().replace(tzinfo=None)
        return any(start <= now < end for start, end in self.peak_windows)

    @property
    def peak(self) -> Rates:
        return self.off_peak.scaled(self.peak_multiplier)

    def most(self, prompt_tokens: int, output_tokens: int) -> float:
        """The most these tokens may cost: every prompt token a cache miss, at peak rates."""
        return (prompt_tokens * self.peak.cache_miss + output_tokens * self.peak.output) / 1e6

    def rates_at(self, at: datetime) -> Rates:
        return self.off_peak.scaled(self.peak_multiplier) if self.is_peak(at) else self.off_peak

    def cost(self, at: datetime, *, cache_hit: int, cache_miss: int, output: int) -> float:
        """The price of one call made at ``at`` (its usage as DeepSeek reports it)."""
        r = self.rates_at(at)
        return (cache_hit * r.cache_hit + cache_miss * r.cache_miss + output * r.output) / 1e6

    def money(self, amount: Any) -> str:
        return format_money(amount, self.currency)


def table_for(model: str, currency: str, prices: str | None = None, **peak: Any) -> PriceTable:
    """The price table for ``model`` in ``currency``: ``prices`` (off-peak JSON) when set, else the defaults."""
    if prices:
        return PriceTable(currency=currency, off_peak=parse_rates(prices), **peak)
    if (model, currency) in DEFAULT_OFF_PEAK:
        return PriceTable(currency=currency, off_peak=DEFAULT_OFF_PEAK[(model, currency)], **peak)
    # a model without a published default: priced as the dearest known model, never as free, and marked
    # as an estimate on the pages until deepseek_prices is set
    dearest = max((r for (_, c), r in DEFAULT_OFF_PEAK.items() if c == currency), key=lambda r: r.output)
    return PriceTable(currency=currency, off_peak=dearest, estimated=True, **peak)


def format_money(amount: Any, currency: str) -> str:
    if amount is None:
        return "—"
    value = float(amount)
    sign = CURRENCY_SIGN.get(currency, currency + " ")
    if value == 0:
        return f"{sign}0"
    return f"{sign}{value:.4f}" if abs(value) < 1 else f"{sign}{value:,.2f}"


@dataclass(frozen=True)
class CallUsage:
    """One answered call: when it was answered and what DeepSeek bills for it."""

    at: datetime
    cache_hit: int
    cache_miss: int
    output: int  # completion tokens, reasoning included


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cache_hit_tokens: int = 0
    cache_miss_tokens: int = 0
    calls: int = 0  # requests made
    answered: int = 0  # requests DeepSeek answered with a completion (the ones it may bill)
    latency_ms: int = 0
    rate_limited: int = 0  # 429 answers (not billed, no rung spent)
    per_call: list[CallUsage] = field(default_factory=list)

    def add(self, usage: Any, at: datetime) -> None:
        """Add one answer's ``usage``, whatever shape it came in (missing, null or junk counts as 0)."""
        if usage is None:
            return
        get = usage.get if isinstance(usage, dict) else lambda k, d=None: getattr(usage, k, d)
        prompt = _count(get("prompt_tokens", 0))
        completion = _count(get("completion_tokens", 0))
        hit = _count(get("prompt_cache_hit_tokens", 0))
        miss = _count(get("prompt_cache_miss_tokens", 0))
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cache_hit_tokens += hit
        self.cache_miss_tokens += miss
        details = get("completion_tokens_details", None)
        if details is not None:
            reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else getattr(details, "reasoning_tokens", 0)
            self.reasoning_tokens += _count(reasoning)
        # an answer without the cache split bills its whole prompt as cache misses
        self.per_call.append(CallUsage(at, hit, miss or max(prompt - hit, 0), completion))

    def cost(self, prices: PriceTable) -> float:
        """What DeepSeek bills for these calls, each at the prices in force when it was answered."""
        return round(sum(prices.cost(c.at, cache_hit=c.cache_hit, cache_miss=c.cache_miss, output=c.output)
                         for c in self.per_call), 6)

    def peak_calls(self, prices: PriceTable) -> int:
        return sum(1 for c in self.per_call if prices.is_peak(c.at))


def _count(value: Any) -> int:
    """A token count from an answer: a non-negative int, else 0 (never an exception)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        return 0
    return int(min(value, 10**9))
