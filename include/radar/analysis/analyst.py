"""Analyse one article with the LLM, never paying twice, never leaving it stuck.

All inside one claim (store.claims.claim_item): an article already analysed is skipped, a repost of analysed text
reuses that analysis, one whose twin is being analysed waits for it, one without attempts left fails for
good; otherwise an attempt is counted and the LLM called (:func:`ask`), the result inserted under a unique key.
Every way out closes the attempt (:func:`attempt`): analysed, failed (counted on the slot), interrupted (the
deadline came first: pending again), released (a configuration error or a cap before any paid call) or crashed
(recorded, then re-raised). Claims are held by a short lease a :class:`ClaimKeeper` renews while the task try
lives, so DeepSeek is called once per article either way. A shadow evaluation goes the same way on its own tables.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from include.radar import store
from include.radar.analysis import evidence, focus, spending
from include.radar.analysis.llm import (
    MIN_CALL_SECONDS,
    JsonAnswer,
    LLMBudget,
    LLMClient,
    LLMConfigError,
    LLMDeadline,
    LLMError,
    LLMExhausted,
    LLMRejected,
)
from include.radar.analysis.prompting import Prompt, neutralise_delimiters
from include.radar.analysis.rubric import rubric
from include.radar.analysis.schemas import ArticleAnalysis
from include.radar.analysis.spending import Asking, Spend
from include.radar.core.clock import SYSTEM, Clock
from include.radar.core.pricing import Usage
from include.radar.core.settings import Settings
from include.radar.core.slots import to_local

log = logging.getLogger(__name__)

ANALYSIS_PROMPT = Prompt("analysis", "v3")
# how often a try waiting for another try's claim looks again
BUSY_POLL_SECONDS = 5.0


class ClaimKeeper:
    """Renews, every ``store.claims.HEARTBEAT``, the lease of every claim ``owner`` holds (``renew``: the slots' by
    default, an evaluation's), from a daemon thread, for as long as the block runs (and never past ``until``, a
    ``clock.monotonic()`` value: a try hung beyond its own time limit must not hold its claims for ever). A live
    try — even a zombie Airflow gave up on — keeps its claims; a dead one's leases run out within ``store.claims.LEASE``.
    A renewal that fails (the database away for a moment) is logged and tried again at the next beat."""

    def __init__(self, connect: Callable[[], Any], owner: str, *, until: float | None = None,
                 every: float | None = None, renew: Callable[[Any, str], int] = store.claims.renew_claims,
                 clock: Clock = SYSTEM) -> None:
        self.connect = connect
        self.clock = clock
        self.owner = owner
        self.renew = renew
        self.until = until
        self.every = store.claims.HEARTBEAT.total_seconds() if every is None else every
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"claims:{owner}", daemon=True)

    def __enter__(self) -> ClaimKeeper:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            if self.until is not None and self.clock.monotonic() > self.until:
                log.warning("claims of %s: past the try's time limit; their leases are no longer renewed", self.owner)
                return
            try:
                with self.connect() as conn:
                    self.renew(conn, self.owner)
                self.renewals += 1
            except Exception:  # the next beat tries again; the lease has room for a few misses
                log.warning("claims of %s: renewing their leases failed; trying again in %.0fs", self.owner,
                            self.every, exc_info=True)


def system_prompt(threshold: int, profile: focus.Profile | None = None, prompt: Prompt = ANALYSIS_PROMPT) -> str:
    """The system part: rubric, threshold and the reader's watchlist (their own words, delimited, with any
    delimiter run in them cut, so a profile line can never close its block)."""
    block = neutralise_delimiters((profile or focus.Profile()).prompt_block())
    return (prompt.system().replace("<RUBRIC>", rubric(threshold))
            .replace("<THRESHOLD>", str(threshold)).replace("<READER_PROFILE>", block))
TRUNCATION_NOTICE = "（正文过长已截断，可能缺失关键信息，需核验原文）"


@dataclass(frozen=True)
class Outcome:
    content_item_id: int
    status: str  # analysed | reused | skipped | deferred | interrupted | failed
    analysis_id: int | None = None
    score: int | None = None
    error: str | None = None

    def as_xcom(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def article_prompt(item: dict[str, Any], truncate_chars: int, prompt: Prompt = ANALYSIS_PROMPT) -> str:
    """The user message: the article as data between delimiters, truncated with a notice saying so."""
    text = item["clean_text"]
    if len(text) > truncate_chars:
        text = text[:truncate_chars] + "\n" + TRUNCATION_NOTICE
    published = to_local(item["published_at"])
    return prompt.user(
        title=neutralise_delimiters(item["title"]).replace("\n", " "),
        mp_name=neutralise_delimiters(item.get("mp_name") or item.get("mp_id") or "").replace("\n", " "),
        published_at=published.strftime("%Y-%m-%d %H:%M") if published else "",
        content=neutralise_delimiters(text),
    )


def analyse_item(asking: Asking, *, item_id: int, claimer: str,
                 on_budget: Callable[[str], None] | None = None) -> Outcome:
    """Analyse one content item for ``asking``'s slot run (see the module docstring for every way out).

    ``claimer`` names the task try (store.claims.claim_owner; the DAG run id outside Airflow); ``asking.deadline`` is
    when the slot needs its analyses done, and bounds the wait for another try of the same task. Raises
    LLMConfigError (the item is put back) and whatever crashed (recorded first).
    """
    if asking.deadline is not None and asking.deadline - asking.clock.monotonic() < MIN_CALL_SECONDS:
        with asking.connect() as conn:
            store.slot_runs.add_deferred(conn, asking.slot_run_id)
        log.info("item %s: the slot's analysis deadline has passed; left for a later slot", item_id)
        return Outcome(item_id, "deferred", error="the slot's analysis deadline passed; a later slot analyses it")
    llm = asking.llm()  # a configuration problem (a missing or malformed key) surfaces before any claim
    over_budget = _over_budget(asking, item_id, on_budget)
    if over_budget is not None:
        return over_budget
    claim, early, profile = _claim(asking, item_id, claimer)
    if early is not None:
        return early
    return _analyse_claimed(asking, llm, claim, profile)


def _over_budget(asking: Asking, item_id: int, on_budget: Callable[[str], None] | None) -> Outcome | None:
    """The deferral of an item once the day's LLM budget is reached, else None."""
    settings, clock = asking.settings, asking.clock
    if not settings.daily_budget:
        return None
    with asking.connect() as conn:
        spent = spending.budget_reached(conn, settings, clock)
        if spent is not None:
            store.operations.defer_for_budget(conn, asking.slot_run_id, [item_id], clock.today())
    if spent is None:
        return None
    reason = (f"the day's LLM budget is reached ({settings.price_table().money(spent)} of "
              f"{settings.price_table().money(settings.daily_budget)}); left for the next day")
    log.warning("item %s: %s", item_id, reason)
    if on_budget:
        on_budget(reason)
    return Outcome(item_id, "deferred", error=reason)


def _claim(asking: Asking, item_id: int, claimer: str) -> tuple[store.claims.Claim, Outcome | None, focus.Profile]:
    """Claim the item: the claim, the outcome when it needs no call, and the reader's profile for the prompt.

    While another try of this task holds it, wait for that try to finish it, or for its lease to run out
    (it died), within the slot's deadline.
    """
    clock, slot_run_id = asking.clock, asking.slot_run_id
    patience = clock.monotonic() + store.claims.LEASE.total_seconds() + BUSY_POLL_SECONDS
    if asking.deadline is not None:
        patience = min(patience, asking.deadline - MIN_CALL_SECONDS)
    while True:
        with asking.connect() as conn:
            claim = store.claims.claim_item(conn, item_id, slot_run_id=slot_run_id, claimer=claimer,
                                     max_attempts=asking.settings.max_analysis_attempts)
            waiting = (claim.state == "busy" and claim.item is not None
                       and store.claims.same_task(claimer, claim.item["claimed_by"]) and clock.monotonic() < patience)
            if not waiting:
                early = _without_call(conn, claim, item_id, slot_run_id)
                profile = focus.from_row(store.focus.get_profile(conn)) if early is None else focus.Profile()
                return claim, early, profile
        assert claim.item is not None
        log.info("item %s: another try of this task holds it (%s); waiting for it", item_id, claim.item["claimed_by"])
        clock.sleep(max(min(BUSY_POLL_SECONDS, patience - clock.monotonic()), 0.05))


T = TypeVar("T")


@dataclass(frozen=True)
class Closed:
    """An attempt that ended without an answer and was closed: ``outcome`` (interrupted, released, failed)."""

    outcome: str
    error: LLMError


def attempt(connect: Callable[[], Any], spend: Spend, close: Callable[[Any, str, str, int], Any],
            work: Callable[[], T]) -> T | Closed:
    """Run ``work`` (the ladder and storing its answer) for a claimed attempt. Every way out records what was paid,
    then closes the attempt with ``close(conn, outcome, error, calls)``: a deadline or a cap leaves the article for
    later (interrupted, or released when nothing was paid), an unusable answer fails it; a configuration error
    (released when nothing was paid) and anything else (crashed) are re-raised once recorded."""
    try:
        return work()
    except (LLMDeadline, LLMBudget) as exc:
        outcome = "interrupted" if isinstance(exc, LLMDeadline) or exc.usage.answered else "released"
        error: LLMError = exc
    except LLMConfigError as exc:
        _close(connect, spend, close, "failed" if exc.usage.answered else "released", exc)
        raise
    except (LLMExhausted, LLMRejected) as exc:
        outcome, error = "failed", exc
    except BaseException as exc:  # anything else, even a task timeout: record the crash, then fail the task
        try:
            _close(connect, spend, close, "crashed", exc)
        except Exception:  # the database may be what failed: the lease takes over
            log.exception("could not record the crash of an attempt; its lease will expire")
        raise
    _close(connect, spend, close, outcome, error)
    return Closed(outcome, error)


def _close(connect: Callable[[], Any], spend: Spend, close: Callable[[Any, str, str, int], Any], outcome: str,
           exc: BaseException) -> None:
    usage = exc.usage if isinstance(exc, LLMError) else spend.usage
    with connect() as conn:
        spend.record(conn, usage)  # an answer paid for before the failure (a database that dropped after it)
        close(conn, outcome, str(exc) if isinstance(exc, LLMError) else f"{exc.__class__.__name__}: {exc}",
              usage.calls if usage is not None else 0)


def ask(llm: LLMClient, item: dict[str, Any], profile: focus.Profile, settings: Settings, *, usage: Usage,
        deadline: float | None, prompt: Prompt = ANALYSIS_PROMPT,
        reserve: Callable[[int, int], None] | None = None) -> tuple[ArticleAnalysis, evidence.Verdict, JsonAnswer]:
    """The ladder's answer on one article, its evidence settled against the article's text."""
    source = evidence.Article(item["clean_text"])
    threshold = settings.push_score_threshold
    answer = llm.complete_json(
        system_prompt(threshold, profile, prompt), article_prompt(item, settings.deepseek_content_truncate_chars, prompt),
        ArticleAnalysis, deadline=deadline, check=lambda value: evidence.needs_repair(value, source, threshold),
        usage=usage, reserve=reserve,
    )
    result, verdict = evidence.settle(answer.value, source, threshold)  # type: ignore[arg-type]
    return result, verdict, answer


def _analyse_claimed(asking: Asking, llm: LLMClient, claim: store.claims.Claim, profile: focus.Profile) -> Outcome:
    """Call the LLM for a claimed item and store its analysis; every way out closes the attempt."""
    item, attempt_id = claim.item, claim.attempt_id
    assert item is not None and attempt_id is not None
    item_id = item["id"]
    # the ladder's usage is ours from the first call: whatever kills the task, what was paid is recorded
    spend = Spend(asking.settings, item_id=item_id, attempt_id=attempt_id, slot_run_id=asking.slot_run_id,
                  model=llm.model, usage=Usage(), clock=asking.clock)

    def close(conn: Any, outcome: str, error: str, calls: int) -> None:
        store.claims.finish_attempt(conn, attempt_id, outcome, error=error, llm_calls=calls,
                             max_attempts=asking.settings.max_analysis_attempts)
        if outcome == "interrupted":
            store.slot_runs.add_deferred(conn, asking.slot_run_id)

    done = attempt(asking.connect, spend, close, lambda: _call_and_store(asking, llm, claim, profile, spend))
    if not isinstance(done, Closed):
        return done
    if done.outcome == "interrupted":
        log.warning("item %s (%s): the slot's deadline came first (%s); left for a later slot", item_id, item["title"],
                    done.error)
    else:
        log.warning("item %s (%s) failed analysis: %s", item_id, item["title"], done.error)
    return Outcome(item_id, done.outcome, error=str(done.error))


def _call_and_store(asking: Asking, llm: LLMClient, claim: store.claims.Claim, profile: focus.Profile,
                    spend: Spend) -> Outcome:
    """The ladder's answer on the claimed item, its evidence settled, stored with what it cost (``spend``)."""
    item, attempt_id, settings = claim.item, claim.attempt_id, asking.settings
    assert item is not None and attempt_id is not None and spend.usage is not None
    item_id = item["id"]
    result, verdict, answer = ask(llm, item, profile, settings, usage=spend.usage, deadline=asking.deadline)
    record = _record(item_id, asking.slot_run_id, result, answer.usage, answer.model, settings, verdict)
    record["watch_hits"] = profile.watch_hits(item["title"], item["clean_text"])
    with asking.connect() as conn:
        spend.record(conn)
        analysis_id = store.analyses.insert_analysis(conn, record, [o.model_dump() for o in result.opportunities],
                                            attempt_id=attempt_id)
        if analysis_id is None:  # a concurrent run stored it first: that one stands
            store.claims.finish_attempt(conn, attempt_id, "analysed", llm_calls=answer.usage.calls)
            existing = store.analyses.analysis_for_item(conn, item_id)
            return Outcome(item_id, "skipped", existing["id"] if existing else None, existing and existing["score"])
    log.info("item %s (%s): score %d, %d opportunities, %d calls, %d ms",
             item_id, item["title"], result.score, len(result.opportunities), answer.usage.calls, answer.usage.latency_ms)
    return Outcome(item_id, "analysed", analysis_id, result.score)


def _without_call(conn: Any, claim: store.claims.Claim, item_id: int, slot_run_id: int) -> Outcome | None:
    """The outcome of a claim that needs no LLM call (done, a repost, busy, no attempts left), else None."""
    if claim.state == "claimed":
        return None
    if claim.state == "done":
        if claim.analysis is not None:
            store.analyses.mark_item_done(conn, item_id)
            log.info("item %s already analysed (analysis %s); no call", item_id, claim.analysis["id"])
            return Outcome(item_id, "skipped", claim.analysis["id"], claim.analysis["score"])
        return Outcome(item_id, "skipped")
    if claim.state == "twin":
        assert claim.item is not None and claim.analysis is not None
        analysis_id = _reuse(conn, claim.analysis, item_id, slot_run_id)
        log.info("item %s (%s) repeats the text of analysis %s; reused, no call", item_id, claim.item["title"],
                 claim.analysis["id"])
        return Outcome(item_id, "reused", analysis_id, claim.analysis["score"])
    reasons = {
        "twin_busy": ("deferred", "the same text is being analysed right now; a later slot reuses that analysis"),
        "busy": ("skipped", "another run (or another try of this task) is analysing it"),
        "exhausted": ("skipped", "no attempts left: failed for good"),
        "missing": ("skipped", "no such article"),
        "pruned": ("skipped", "its body was pruned (retention_days): nothing to analyse"),
    }
    status, reason = reasons[claim.state]
    if status == "deferred":
        store.slot_runs.add_deferred(conn, slot_run_id)
    log.info("item %s: %s", item_id, reason)
    return Outcome(item_id, status, error=reason)


def _record(
    item_id: int, slot_run_id: int, result: ArticleAnalysis, usage: Usage, model: str, settings: Settings,
    verdict: evidence.Verdict,
) -> dict[str, Any]:
    return {
        "evidence_verified": evidence.verified_flag(result, verdict, settings.push_score_threshold),
        "consistency_note": verdict.consistency,
        "content_item_id": item_id,
        "slot_run_id": slot_run_id,
        "reused_from_id": None,
        "score": result.score,
        "has_opportunity": result.has_opportunity,
        "top_type": result.top_type,
        "summary": result.summary,
        "result_json": {**result.model_dump(mode="json"), "checks": evidence.record(verdict)},
        "model": model,
        "prompt_version": ANALYSIS_PROMPT.label,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cache_hit_tokens": usage.cache_hit_tokens,
        "cache_miss_tokens": usage.cache_miss_tokens,
        "cost": usage.cost(settings.price_table()),
        "currency": settings.deepseek_currency,
        "latency_ms": usage.latency_ms,
        "llm_calls": usage.calls,
    }


def _reuse(conn: Any, twin: dict[str, Any], item_id: int, slot_run_id: int) -> int | None:
    """Copy an analysis of the same text onto this item: no LLM call, no tokens, a pointer to the source."""
    record = {
        **{k: twin[k] for k in ("score", "has_opportunity", "top_type", "summary", "result_json", "model",
                                "prompt_version", "evidence_verified", "consistency_note")},
        "watch_hits": twin.get("watch_hits") or [],
        "content_item_id": item_id,
        "slot_run_id": slot_run_id,
        "reused_from_id": twin["reused_from_id"] or twin["id"],
        "prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0,
        "cache_hit_tokens": 0, "cache_miss_tokens": 0, "cost": 0, "currency": twin["currency"], "latency_ms": 0,
        "llm_calls": 0,
    }
    opportunities = twin["result_json"].get("opportunities", []) if isinstance(twin["result_json"], dict) else []
    return store.analyses.insert_analysis(conn, record, opportunities)

