"""The spend ledger's writer and the daily budget: what a ladder of DeepSeek calls cost, recorded once
when it was answered at all (paid is paid, whatever fails after), and whether the day's budget is reached."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from include.radar import store
from include.radar.pricing import Usage
from include.radar.settings import Settings
from include.radar.slots import SHANGHAI


def today() -> date:
    return datetime.now(UTC).astimezone(SHANGHAI).date()


def budget_reached(conn: Any, settings: Settings) -> float | None:
    """The day's spend when it has reached ``daily_budget`` (a set budget), else None."""
    if not settings.daily_budget:
        return None
    spent = store.day_spend(conn, today(), settings.deepseek_currency)
    return spent if spent >= settings.daily_budget else None


@dataclass
class Spend:
    """What one ladder of calls cost, written to the spend ledger once (when it was answered at all)."""

    settings: Settings
    item_id: int | None
    attempt_id: int | None
    slot_run_id: int | None
    model: str
    purpose: str = "analysis"
    usage: Usage | None = None
    recorded: bool = False

    def record(self, conn: Any, usage: Usage | None = None) -> None:
        usage = usage or self.usage
        if self.recorded or usage is None or not usage.answered:
            return
        prices = self.settings.price_table()
        store.record_spend(conn, {
            "spent_on": today(), "purpose": self.purpose, "content_item_id": self.item_id,
            "attempt_id": self.attempt_id, "slot_run_id": self.slot_run_id, "model": self.model,
            "calls": usage.calls, "answered": usage.answered, "peak_calls": usage.peak_calls(prices),
            "rate_limited": usage.rate_limited, "prompt_tokens": usage.prompt_tokens,
            "cache_hit_tokens": usage.cache_hit_tokens, "cache_miss_tokens": usage.cache_miss_tokens,
            "completion_tokens": usage.completion_tokens, "reasoning_tokens": usage.reasoning_tokens,
            "cost": usage.cost(prices), "currency": prices.currency,
        })
        conn.commit()  # paid is paid: whatever fails after this, the ledger keeps the call
        self.recorded = True
