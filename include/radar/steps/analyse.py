"""``analyse`` (mapped over the batches): each article of a batch analysed in threads, each with its own claim,
attempts and step record (include/radar/analysis/analyst.py); the claims belong to the task try and are kept alive while
it runs.
"""

from __future__ import annotations

import logging
from typing import Any

from include.radar import store
from include.radar.analysis import analyst, batches, ratelimit
from include.radar.analysis.llm import LLMClient, LLMConfigError
from include.radar.steps.runtime import Runtime, not_retryable, step, step_deadline

log = logging.getLogger(__name__)


# how long past the batch's own time its claims stay renewed (storing the last answers)
CLAIM_GRACE_SECONDS = 120


def analyse(rt: Runtime, slot: dict[str, Any], batch: dict[str, Any], *,
                  seconds: float | None = None, attempt: tuple[str, int, int] | None = None) -> dict[str, Any]:
    """One mapped task: its batch's articles, ``ceil(llm_concurrency / analysis_tasks)`` at a time, each with
    its own claim, attempts and step record. ``seconds``: the batch's time (within its task's timeout); a
    call still running then is interrupted and its article, like those not started, left for a later slot.
    ``attempt``: (task id, map index, try number) of this task try, which owns the claims (the DAG passes the
    running task instance's; without one, the DAG run owns them); their leases are renewed while the batch runs."""
    until = None if seconds is None else rt.clock.monotonic() + seconds
    owner = claimer(slot, attempt)
    threads = batches.width(rt.settings.llm_concurrency, rt.settings.analysis_tasks)
    try:  # one SDK client (one connection per thread) for the batch; a bad key surfaces in each article instead
        shared: LLMClient | None = rt.llm(connections=threads)
    except Exception:
        shared = None
    with analyst.ClaimKeeper(rt.connect, owner, until=None if until is None else until + CLAIM_GRACE_SECONDS,
                             clock=rt.clock):
        return batches.run(
            batch["articles"],
            lambda article: analyse_article(rt, slot, article, llm=shared, until=until, owner=owner),
            threads=threads, stop_on=not_retryable(),
        )


@step(lambda article, **_: f"analyse:{article['item_id']}")
def analyse_article(rt: Runtime, slot: dict[str, Any], article: dict[str, Any], *, llm: LLMClient | None = None,
                    until: float | None = None, owner: str | None = None) -> dict[str, Any]:
    def streak(count: int, error: str) -> None:
        rt.alert("deepseek", f"DeepSeek 连续 {count} 次限流（429）：{error}；本时段改为逐篇调用", slot)

    gate = ratelimit.DatabaseGate(rt.connect, slot["slot_run_id"], on_streak=streak, clock=rt.clock)
    try:
        deadline = min((d for d in (step_deadline(slot, "analyse", rt.clock), until) if d is not None), default=None)
        outcome = analyst.analyse_item(
            rt.asking(slot["slot_run_id"], deadline, (lambda: llm.with_gate(gate)) if llm else (lambda: rt.llm(gate))),
            item_id=article["item_id"], claimer=owner or claimer(slot),
            on_budget=lambda reason: rt.alert("budget", reason, slot),
        )
    except LLMConfigError as exc:
        rt.alert("deepseek", f"DeepSeek 配置或账户问题：{exc}", slot)
        raise
    return outcome.as_xcom()


def claimer(slot: dict[str, Any], attempt: tuple[str, int, int] | None = None) -> str:
    """Who holds an article's claim: the task try ``attempt`` (task id, map index, try number) of the DAG run,
    so a retry never takes over the claim of a try that still lives; the DAG run alone outside a task."""
    run = slot.get("dag_run_id") or f"slot_run:{slot['slot_run_id']}"
    return store.claims.claim_owner(run, *attempt) if attempt else run
