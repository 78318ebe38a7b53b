"""The spend ledger's writer, the daily budget and an evaluation's cap: what a ladder of calls cost, recorded once
when it was answered at all (paid is paid, whatever fails after); whether the slots' day's budget is reached; and
a cap no set of concurrent calls can pass, each call reserving its worst case before it is made."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from include.radar import store
from include.radar.analysis.llm import LLMBudget, LLMClient
from include.radar.core.clock import SYSTEM, Clock
from include.radar.core.pricing import PriceTable, Usage
from include.radar.core.settings import Settings

log = logging.getLogger(__name__)

# how often a call the cap refused looks again while other calls hold reservations that will be released
CAP_POLL_SECONDS = 0.25


def budget_reached(conn: Any, settings: Settings, clock: Clock = SYSTEM) -> float | None:
    """The slots' spend on ``clock``'s day (Asia/Shanghai) when it has reached ``daily_budget`` (a set budget),
    else None. An evaluation's spend is not counted: it spends from its own cap, so it never holds a reader's
    article back."""
    if not settings.daily_budget:
        return None
    spent = store.operations.day_spend(conn, clock.today(), settings.deepseek_currency)
    return spent if spent >= settings.daily_budget else None


@dataclass(frozen=True)
class Asking:
    """What asking the LLM on a slot run's behalf takes besides the prompt: the database (the ledger's), ``llm``
    (builds the client: a configuration problem surfaces when it is called), the settings, the slot run the calls
    are paid on (None: a report built for no slot), the ``deadline`` (``clock.monotonic()``) by which the answers
    are needed, and the clock (whose day the spend and the budget are of)."""

    connect: Callable[[], Any]
    llm: Callable[[], LLMClient]
    settings: Settings
    slot_run_id: int | None
    deadline: float | None = None
    clock: Clock = SYSTEM


@dataclass
class Spend:
    """What one ladder of calls cost, written to the spend ledger once (when it was answered at all), priced by
    ``prices`` (the configured model's by default; an evaluation's candidate has its own)."""

    settings: Settings
    item_id: int | None
    attempt_id: int | None
    slot_run_id: int | None
    model: str
    purpose: str = "analysis"
    usage: Usage | None = None
    recorded: bool = False
    prices: PriceTable | None = None
    evaluation_id: int | None = None
    clock: Clock = SYSTEM  # whose day the spend is on

    def record(self, conn: Any, usage: Usage | None = None) -> None:
        usage = usage or self.usage
        if self.recorded or usage is None or not usage.answered:
            return
        prices = self.prices or self.settings.price_table()
        store.operations.record_spend(conn, {
            "spent_on": self.clock.today(), "purpose": self.purpose, "content_item_id": self.item_id,
            "attempt_id": self.attempt_id, "slot_run_id": self.slot_run_id, "evaluation_id": self.evaluation_id,
            "model": self.model, "calls": usage.calls, "answered": usage.answered, "peak_calls": usage.peak_calls(prices),
            "rate_limited": usage.rate_limited, "prompt_tokens": usage.prompt_tokens,
            "cache_hit_tokens": usage.cache_hit_tokens, "cache_miss_tokens": usage.cache_miss_tokens,
            "completion_tokens": usage.completion_tokens, "reasoning_tokens": usage.reasoning_tokens,
            "cost": usage.cost(prices), "currency": prices.currency,
        })
        conn.commit()  # paid is paid: whatever fails after this, the ledger keeps the call
        self.recorded = True


@dataclass
class Cap:
    """An evaluation's cap. Before each call, an attempt reserves what its ladder paid so far and the call at its
    most (``PriceTable.most``), under a lock on the evaluation, only if the ledger, every other reservation and it
    stay within the cap; the reservation is released when the attempt closes, after what it cost is in the ledger.
    So the ledger never passes the cap, however many calls run at once. A first call that does not fit waits while
    other calls hold reservations (they will be released), and is refused (LLMBudget) when none does or
    ``deadline`` comes. A later call of a ladder (a repair) that does not fit is refused at once: its attempt
    holds a reservation, and two ladders each waiting for the other's would wait until the deadline."""

    connect: Callable[[], Any]
    evaluation_id: int
    prices: PriceTable
    deadline: float | None = None
    clock: Clock = SYSTEM  # the waits for a reservation, and the deadline's seconds

    def reserve_for(self, attempt_id: int, usage: Usage) -> Callable[[int, int], None]:
        def reserve(prompt_tokens: int, output_tokens: int) -> None:
            self.reserve(attempt_id, usage.cost(self.prices) + self.prices.most(prompt_tokens, output_tokens), usage)

        return reserve

    def reserve(self, attempt_id: int, amount: float, usage: Usage | None = None) -> None:
        """Hold ``amount`` (the attempt's whole reservation, replacing the one it held) or raise LLMBudget (carrying
        ``usage``, what the ladder paid so far)."""
        amount = math.ceil(amount * 1e6 - 1e-6) / 1e6  # the ledger keeps six places: never hold less than it records
        while True:
            with self.connect() as conn:
                asked = store.evaluations.reserve(conn, self.evaluation_id, attempt_id, amount)
            if asked.taken:
                return
            out_of_time = self.deadline is not None and self.clock.monotonic() + CAP_POLL_SECONDS > self.deadline
            if asked.others <= 0 or asked.held > 0 or out_of_time:
                money = self.prices.money
                raise LLMBudget(f"the evaluation's cap leaves too little for the next call (at most {money(amount)}; "
                                f"{money(asked.spent)} spent): raise the cap and resume it to finish", usage)
            self.clock.sleep(CAP_POLL_SECONDS)
