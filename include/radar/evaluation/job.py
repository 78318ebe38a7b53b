"""One run's articles, each the slots' way (claimed, asked under the cap, closed whatever happens), and the watch
over what its endpoint reports.

The cap's reservations assume the endpoint honours ``max_tokens``; one that reports more (a proxy, a gateway, a
model whose ``max_tokens`` means something else) could talk any cap past itself. So each call's reported usage is
held against what it reserved, before the ladder's next call and once the ladder ends; the first call over its
reservation stops the run at once (no call reserves after it is seen), so the ledger ends at most the cap plus
what the calls then in flight reported. docs/evaluation.md ("The money").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from include.radar import store
from include.radar.analysis import analyst, evidence, focus, spending
from include.radar.analysis.llm import LLMBudget, LLMClient, LLMError
from include.radar.core.clock import Clock
from include.radar.core.pricing import PriceTable, Usage
from include.radar.core.settings import Settings

log = logging.getLogger(__name__)

FAIL_STREAK = 3  # articles failed in a row (every rung of their ladders) that stop a run as failed


class Stop(Exception):
    """No further article is started: ``kind`` is over_cap, cap, time, failing or config (the page words it)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class OverReported(LLMBudget):
    """A call refused because the endpoint already reported more than a call reserved (the run stops)."""


@dataclass
class _Call:
    answers_before: int  # the ladder's answered calls before this one: its usage, if any, is the next entry
    reserved: float
    prompt_most: int
    max_tokens: int


@dataclass
class Watch:
    """One run's watch over its calls' reported usage; ``first`` is the first call over its reservation."""

    prices: PriceTable
    first: dict[str, Any] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reserve_for(self, inner: Callable[[int, int], None], usage: Usage,
                    item: dict[str, Any]) -> tuple[Callable[[int, int], None], list[_Call]]:
        """``inner`` (the cap's reservation) wrapped: before each call the ladder's earlier calls are held against
        what they reserved, and no call reserves once any call of the run was over."""
        calls: list[_Call] = []

        def reserve(prompt_tokens: int, output_tokens: int) -> None:
            self.settle(calls, usage, item)
            if self.first is not None:
                raise OverReported(f"the endpoint reported more than a call may cost: {self.says()}", usage)
            inner(prompt_tokens, output_tokens)
            if self.first is not None:  # seen while this one waited for its reservation: released on closing
                raise OverReported(f"the endpoint reported more than a call may cost: {self.says()}", usage)
            calls.append(_Call(len(usage.per_call), self.prices.most(prompt_tokens, output_tokens), prompt_tokens,
                               output_tokens))

        return reserve, calls

    def settle(self, calls: list[_Call], usage: Usage, item: dict[str, Any]) -> bool:
        """Whether any of these calls reported more than it reserved (the run's first such call is kept)."""
        over = False
        for number, call in enumerate(calls, 1):
            if len(usage.per_call) <= call.answers_before:
                continue
            c = usage.per_call[call.answers_before]
            cost = self.prices.cost(c.at, cache_hit=c.cache_hit, cache_miss=c.cache_miss, output=c.output)
            if round(cost, 6) <= round(call.reserved, 6) + 1e-6:
                continue
            over = True
            with self._lock:
                if self.first is None:
                    self.first = {
                        "content_item_id": item.get("item_id"), "title": str(item.get("title") or "")[:80],
                        "call": number, "prompt_tokens": c.cache_hit + c.cache_miss, "prompt_most": call.prompt_most,
                        "output_tokens": c.output, "max_tokens": call.max_tokens, "cost": round(cost, 6),
                        "reserved": round(call.reserved, 6)}
        return over

    def says(self) -> str:
        f = self.first or {}
        money = self.prices.money
        return (f"a call reported {f.get('output_tokens')} output tokens against the {f.get('max_tokens')} asked "
                f"(article {f.get('content_item_id')}, call {f.get('call')} of its ladder: {money(f.get('cost'))} "
                f"against {money(f.get('reserved'))} reserved): its endpoint does not honour max_tokens")


def over_text(over: dict[str, Any], money: Callable[[Any], str]) -> str:
    """The CLI's first line of an evaluation that passed its cap: by how much, and which call."""
    return (f"OVER THE CAP by {money(over.get('over'))}: spent {money(over.get('spent'))} of a cap of "
            f"{money(over.get('cap'))}; a call reported {over.get('output_tokens')} output tokens against the "
            f"{over.get('max_tokens')} asked ({over.get('title')!s}, call {over.get('call')}: {money(over.get('cost'))} "
            f"against {money(over.get('reserved'))} reserved); the endpoint does not honour max_tokens and is not "
            "run again unless asked (--trust-max-tokens)")


@dataclass
class Job:
    """One run's articles, each through the slots' way: claimed, asked under the cap, closed whatever happens."""

    connect: Callable[[], Any]
    settings: Settings
    evaluation_id: int
    candidate: Any  # shadow.Candidate
    prices: PriceTable
    profile: focus.Profile
    owner: str
    deadline: float | None
    cap: spending.Cap
    clock: Clock

    def __post_init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._failed_in_a_row = 0
        self.last_error: LLMError | None = None
        self.watch = Watch(self.prices)

    def _count(self, status: str, *, failed: bool = False) -> int:
        with self._lock:
            self.counts[status] = self.counts.get(status, 0) + 1
            self._failed_in_a_row = self._failed_in_a_row + 1 if failed else 0
            return self._failed_in_a_row

    def answer(self, llm: LLMClient, item: dict[str, Any]) -> dict[str, Any]:
        if self.watch.first is not None:
            raise Stop("over_cap", self.watch.says())
        if self.deadline is not None and self.deadline - self.clock.monotonic() < 5:
            raise Stop("time", "the run's time is up; run it again to finish")
        with self.connect() as conn:
            claim = store.evaluations.claim(conn, self.evaluation_id, item["item_id"], claimer=self.owner,
                                            max_attempts=self.settings.max_analysis_attempts)
        if claim.state != "claimed":
            self._count(claim.state)
            return {"status": claim.state}
        assert claim.item is not None and claim.attempt_id is not None
        attempt_id = claim.attempt_id
        spend = spending.Spend(self.settings, item_id=None, attempt_id=None, slot_run_id=None,
                               model=self.candidate.model, purpose="evaluation", usage=Usage(), prices=self.prices,
                               evaluation_id=self.evaluation_id, clock=self.clock)

        def close(conn: Any, outcome: str, error: str, calls: int) -> None:
            store.evaluations.finish_attempt(conn, attempt_id, outcome, error=error, llm_calls=calls,
                                             max_attempts=self.settings.max_analysis_attempts)

        assert spend.usage is not None
        reserve, calls = self.watch.reserve_for(self.cap.reserve_for(attempt_id, spend.usage), spend.usage, item)
        done = analyst.attempt(self.connect, spend, close,
                               lambda: self._ask(llm, claim.item, attempt_id, spend, reserve))
        over = self.watch.settle(calls, spend.usage, item)  # paid and recorded: then no further call starts
        if isinstance(done, analyst.Closed):
            return self._closed(done, over)
        log.info("evaluation %s: article %s (%s) answered", self.evaluation_id, item["item_id"], item["title"][:40])
        self._count("answered" if done else "taken over")
        if over:
            raise Stop("over_cap", self.watch.says())
        return {"status": "answered"}

    def _closed(self, done: analyst.Closed, over: bool) -> dict[str, Any]:
        in_a_row = self._count(done.outcome, failed=done.outcome == "failed")
        self.last_error = done.error
        if over or isinstance(done.error, OverReported):
            raise Stop("over_cap", self.watch.says())
        if isinstance(done.error, LLMBudget):
            raise Stop("cap", str(done.error))
        if in_a_row >= FAIL_STREAK:
            raise Stop("failing", f"{in_a_row} articles in a row failed; the last: {done.error}")
        return {"status": done.outcome}

    def _ask(self, llm: LLMClient, item: dict[str, Any], attempt_id: int, spend: spending.Spend,
             reserve: Callable[[int, int], None]) -> bool:
        assert spend.usage is not None
        result, verdict, answer = analyst.ask(
            llm, item, self.profile, self.settings, usage=spend.usage, deadline=self.deadline,
            prompt=self.candidate.prompt, reserve=reserve)
        usage = answer.usage
        with self.connect() as conn:
            spend.record(conn)
            return store.evaluations.store_answer(conn, attempt_id, {
                "score": result.score, "has_opportunity": result.has_opportunity, "top_type": result.top_type,
                "summary": result.summary,
                "result_json": {**result.model_dump(mode="json"), "checks": evidence.record(verdict)},
                "evidence_verified": evidence.verified_flag(result, verdict, self.settings.push_score_threshold),
                "consistency_note": verdict.consistency, "failed_rungs": len(answer.failures),
                "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                "cache_hit_tokens": usage.cache_hit_tokens, "cost": usage.cost(self.prices),
                "latency_ms": usage.latency_ms, "llm_calls": usage.calls,
            })
