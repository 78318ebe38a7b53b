"""A shadow evaluation: a candidate set-up (model, thinking, reasoning effort, prompt version, its own connection)
answers a bounded sample of the reader's stored articles, so the choice of model rests on evidence.

The candidate's answers go through what a slot's do (the retry ladder, the schema, the evidence check and its
repair rung) and are stored apart (store/evaluations.py): nothing that pushes, ranks, reports or keeps the track
record reads them. Spend is real money, so the estimate is checked against the cap before any call, every ladder
goes to the spend ledger, and articles are claimed as a slot's are, so a resumed run pays only for what was not
answered (the rules: docs/evaluation.md).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from include.radar import analyst, batches, evidence, focus, ratelimit, redact, spending, store
from include.radar.llm import (
    PROMPTS,
    LLMClient,
    LLMConfigError,
    LLMDeadline,
    LLMExhausted,
    LLMRejected,
    Prompt,
    Usage,
)
from include.radar.schemas import ArticleAnalysis
from include.radar.settings import Settings, check_secret, get_connection

log = logging.getLogger(__name__)

MAX_SAMPLE = 200  # articles in one evaluation: a bound on its cost and on its run's time
MAX_DAYS = 366
# when an article's own analysis did not record its tokens (a reused analysis, an old row): its length as tokens
# (Chinese is about a token per character) plus the prompt, and this much output
FALLBACK_PROMPT_TOKENS = 3000
FALLBACK_OUTPUT_TOKENS = 2000
_MODEL = re.compile(r"^[A-Za-z0-9._:/-]{1,100}$")
_VERSION = re.compile(r"^v[0-9]{1,3}$")
_CONN = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")
ONLY_WITH = ("all", "feedback", "outcomes")


class EvaluationError(ValueError):
    """A candidate or sample that cannot be evaluated (a bad name, a missing connection): nothing was paid."""


@dataclass(frozen=True)
class Candidate:
    """The set-up under evaluation; ``conn_id`` is an OpenAI-compatible connection of its own."""

    model: str
    thinking: bool = True
    reasoning_effort: str | None = "high"
    prompt_version: str = analyst.ANALYSIS_PROMPT.version
    conn_id: str = "deepseek_default"

    def check(self) -> Candidate:
        if not _MODEL.fullmatch(self.model or ""):
            raise EvaluationError(f"model {self.model!r}: letters, digits and ._:/- only, at most 100")
        if self.reasoning_effort not in (None, "low", "medium", "high", "max"):
            raise EvaluationError("reasoning effort: low, medium, high or max")
        if not _VERSION.fullmatch(self.prompt_version or "") or not _prompt_exists(self.prompt_version):
            raise EvaluationError(f"prompt version {self.prompt_version!r}: no such analysis prompt")
        if not _CONN.fullmatch(self.conn_id or ""):
            raise EvaluationError(f"connection id {self.conn_id!r} is not a connection id")
        return self

    @property
    def prompt(self) -> Prompt:
        return Prompt("analysis", self.prompt_version)

    @property
    def label(self) -> str:
        mode = f"thinking {self.reasoning_effort or 'on'}" if self.thinking else "no thinking"
        return f"{self.model} · {mode} · analysis-{self.prompt_version}"


def _prompt_exists(version: str) -> bool:
    return all((PROMPTS / f"analysis_{version}.{part}.txt").is_file() for part in ("system", "user"))


@dataclass(frozen=True)
class Sample:
    days: int = 14
    size: int = 50
    only_with: str = "all"  # all | feedback (the reader gave a verdict) | outcomes (its pick was measured)

    def check(self) -> Sample:
        if not 1 <= self.days <= MAX_DAYS:
            raise EvaluationError(f"days: 1 to {MAX_DAYS}")
        if not 1 <= self.size <= MAX_SAMPLE:
            raise EvaluationError(f"sample size: 1 to {MAX_SAMPLE} articles")
        if self.only_with not in ONLY_WITH:
            raise EvaluationError(f"only: one of {', '.join(ONLY_WITH)}")
        return self


def candidate_settings(settings: Settings, candidate: Candidate) -> Settings:
    """The settings as the candidate's calls are priced and made (its model's price table)."""
    return settings.model_copy(update={"deepseek_model": candidate.model, "deepseek_thinking": candidate.thinking})


def estimate(rows: list[dict[str, Any]], settings: Settings) -> float:
    """An upper estimate of what the sample costs the candidate: every token a cache miss at peak rates."""
    prices = settings.price_table()
    peak = prices.off_peak.scaled(prices.peak_multiplier)
    total = 0.0
    for r in rows:
        prompt = int(r.get("prompt_tokens") or 0) or len(r.get("clean_text") or "") + FALLBACK_PROMPT_TOKENS
        output = int(r.get("completion_tokens") or 0) or FALLBACK_OUTPUT_TOKENS
        total += (prompt * peak.cache_miss + output * peak.output) / 1e6
    return round(total, 6)


@dataclass(frozen=True)
class Plan:
    evaluation_id: int
    articles: int
    estimate: float
    refused: str | None = None


def start(connect: Callable[[], Any], settings: Settings, candidate: Candidate, sample: Sample, cap: float, *,
          created_by: str = "", now: datetime | None = None) -> Plan:
    """Record the evaluation and its sample, estimate its cost; refused (no call made) when over ``cap``."""
    candidate.check()
    sample.check()
    if not 0 <= cap < 1e6:
        raise EvaluationError("cap: a non-negative amount")
    priced = candidate_settings(settings, candidate)
    since = (now or datetime.now(UTC)) - timedelta(days=sample.days)
    with connect() as conn:
        evaluation_id = store.evaluations.create(conn, {
            "created_by": created_by[:200], "model": candidate.model, "thinking": candidate.thinking,
            "reasoning_effort": candidate.reasoning_effort if candidate.thinking else None,
            "prompt_version": candidate.prompt_version, "conn_id": candidate.conn_id, "days": sample.days,
            "sample_size": sample.size, "only_with": sample.only_with, "cap": cap, "currency": settings.deepseek_currency,
        })
        rows = store.evaluations.sample(conn, since=since, size=sample.size, only_with=sample.only_with)
        store.evaluations.add_items(conn, evaluation_id, rows)
        cost = estimate(rows, priced)
        refused = None
        if cost > cap:
            money = priced.price_table().money
            refused = f"estimated {money(cost)} for {len(rows)} articles is over the cap of {money(cap)}: no call made"
            store.evaluations.set_status(conn, evaluation_id, "refused", refused, estimate=cost)
        else:
            store.evaluations.set_status(conn, evaluation_id, "planned", f"{len(rows)} articles sampled", estimate=cost)
        conn.commit()
    log.info("evaluation %s of %s: %d articles, estimated %.4f %s%s", evaluation_id, candidate.label, len(rows), cost,
             settings.deepseek_currency, f"; refused: {refused}" if refused else "")
    return Plan(evaluation_id, len(rows), cost, refused)


def candidate_of(row: dict[str, Any]) -> Candidate:
    return Candidate(model=row["model"], thinking=row["thinking"], reasoning_effort=row["reasoning_effort"],
                     prompt_version=row["prompt_version"], conn_id=row["conn_id"])


def client_for(candidate: Candidate, settings: Settings, gate: Any = None, connections: int = 8) -> LLMClient:
    """An OpenAI-compatible client on the candidate's own connection, called as the slots call DeepSeek."""
    conn = get_connection(candidate.conn_id)
    if conn is None:
        raise LLMConfigError(f"the evaluation's connection {candidate.conn_id!r} is missing")
    extra = conn.extra or {}
    api_key = check_secret(conn.password or extra.get("api_key"), f"the API key (connection {candidate.conn_id!r})")
    redact.register(api_key)
    host = (conn.host or "").rstrip("/")
    if host and "://" not in host:
        host = f"http://{host}"
    if host and conn.port and host.count(":") < 2:
        host = f"{host}:{conn.port}"
    return LLMClient(
        base_url=host or "https://api.deepseek.com", api_key=api_key or "", model=candidate.model,
        thinking=candidate.thinking, reasoning_effort=candidate.reasoning_effort,
        timeout=settings.deepseek_timeout_seconds, max_retries=settings.deepseek_max_retries,
        backoff_seconds=float(extra.get("backoff_seconds", 2.0)), max_tokens=settings.deepseek_max_tokens,
        rate_limit_wait=settings.deepseek_rate_limit_wait_seconds, gate=gate, max_connections=connections,
    )


def default_claimer() -> str:
    return f"evaluation:{socket.gethostname()}:{os.getpid()}"


class _Keeper:
    """Renews the leases of the claims ``owner`` holds while the run lives (a dead run's run out within
    ``store.evaluations.LEASE`` and a later run takes them over)."""

    def __init__(self, connect: Callable[[], Any], owner: str, every: float = 30.0) -> None:
        self.connect, self.owner, self.every = connect, owner, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"evaluation-claims:{owner}", daemon=True)

    def __enter__(self) -> _Keeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                with self.connect() as conn:
                    store.evaluations.renew(conn, self.owner)
            except Exception:
                log.warning("evaluation claims of %s: renewing failed; trying again", self.owner, exc_info=True)


@dataclass
class Run:
    """What one run of an evaluation did; ``stopped`` says why articles were left pending (resume later)."""

    evaluation_id: int
    counts: dict[str, int]
    stopped: str | None = None


class _Stop(Exception):
    """The evaluation's cap, the day's budget or a configuration error: no further article is started."""


def run(connect: Callable[[], Any], settings: Settings, evaluation_id: int, *,
        client: Callable[[Any], LLMClient] | None = None, claimer: str | None = None,
        deadline: float | None = None) -> Run:
    """Answer every open article of the evaluation (a resumed one: only those not answered yet).

    ``client`` makes the candidate's client behind a rate gate (the candidate's own connection by default);
    ``claimer`` owns the claims (this process by default); ``deadline`` (``time.monotonic()``) bounds the run:
    what is left stays pending."""
    with connect() as conn:
        row = store.evaluations.get(conn, evaluation_id)
        if row is None:
            raise EvaluationError(f"no evaluation {evaluation_id}")
        if row["status"] == "refused":
            return Run(evaluation_id, {}, row["note"])
        items = store.evaluations.open_items(conn, evaluation_id, settings.max_analysis_attempts)
        store.evaluations.set_status(conn, evaluation_id, "running", row["note"])
        profile = focus.from_row(store.get_profile(conn))
        conn.commit()
    candidate = candidate_of(row)
    priced = candidate_settings(settings, candidate)
    per_article = float(row["estimate"]) / max(int(row["items"]), 1)
    gate = ratelimit.DatabaseGate(connect, -evaluation_id)  # shares the slots' cool-down, throttled on its own
    threads = batches.width(settings.llm_concurrency, settings.analysis_tasks)
    make = client or (lambda g: client_for(candidate, settings, g, connections=threads))
    owner = claimer or default_claimer()
    job = _Job(connect, priced, evaluation_id, candidate, profile, float(row["cap"]), per_article, owner, deadline)
    try:
        shared = make(gate)
        with _Keeper(connect, owner):
            batches.run([dict(i) for i in items], lambda item: job.answer(shared, item),
                        threads=threads, stop_on=(_Stop, LLMConfigError))
    except (_Stop, LLMConfigError) as exc:
        return _finish(connect, evaluation_id, job.counts, str(exc))
    except Exception as exc:  # articles crashed: recorded on their attempts; the run says so and fails
        _finish(connect, evaluation_id, job.counts, f"{exc.__class__.__name__}: {exc}")
        raise
    return _finish(connect, evaluation_id, job.counts, None)


def _finish(connect: Callable[[], Any], evaluation_id: int, counts: dict[str, int], stopped: str | None) -> Run:
    with connect() as conn:
        row = store.evaluations.get(conn, evaluation_id)
        assert row is not None
        left = int(row["items"]) - int(row["answered"]) - int(row["failed"])
        if stopped is None and left > 0:
            stopped = f"{left} articles not answered yet (held by another run): run it again to finish"
        note = stopped or (f"{row['answered']} answered, {row['failed']} failed" +
                           (" (run it again to retry those with attempts left)" if row["failed"] else ""))
        store.evaluations.set_status(conn, evaluation_id, "stopped" if stopped else "done", note)
    log.info("evaluation %s: %s (%s)", evaluation_id, note, ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return Run(evaluation_id, counts, stopped)


@dataclass
class _Job:
    connect: Callable[[], Any]
    settings: Settings  # priced at the candidate's model
    evaluation_id: int
    candidate: Candidate
    profile: focus.Profile
    cap: float
    per_article: float
    owner: str
    deadline: float | None

    def __post_init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._paid: set[int] = set()  # attempts whose calls are in the ledger

    def _count(self, status: str) -> dict[str, Any]:
        with self._lock:
            self.counts[status] = self.counts.get(status, 0) + 1
        return {"status": status}

    def _limits(self, conn: Any) -> None:
        """Stop before a claim when the evaluation's cap or the day's budget would be passed."""
        spent = store.evaluations.spent(conn, self.evaluation_id)
        money = self.settings.price_table().money
        if spent + self.per_article > self.cap:
            raise _Stop(f"the evaluation's cap of {money(self.cap)} is reached ({money(spent)} spent); "
                        "raise the cap and run it again to finish")
        day = spending.budget_reached(conn, self.settings)
        if day is not None:
            raise _Stop(f"the day's LLM budget is reached ({money(day)}); run it again another day to finish")
        if self.deadline is not None and self.deadline - time.monotonic() < 5:
            raise _Stop("the run's time is up; run it again to finish")

    def answer(self, llm: LLMClient, item: dict[str, Any]) -> dict[str, Any]:
        item_id = item["item_id"]
        with self.connect() as conn:
            self._limits(conn)
            claim = store.evaluations.claim(conn, self.evaluation_id, item_id, claimer=self.owner,
                                     max_attempts=self.settings.max_analysis_attempts)
            conn.commit()
        if claim.state != "claimed":
            return self._count(claim.state)
        assert claim.item is not None and claim.attempt_id is not None
        usage = Usage()
        try:
            stored = self._call(llm, claim.item, claim.attempt_id, usage)
        except LLMConfigError as exc:
            self._close(claim.attempt_id, "failed" if exc.usage.answered else "released", exc, usage)
            raise
        except LLMDeadline as exc:
            self._close(claim.attempt_id, "interrupted", exc, usage)
            return self._count("interrupted")
        except (LLMExhausted, LLMRejected) as exc:
            self._close(claim.attempt_id, "failed", exc, usage)
            return self._count("failed")
        except BaseException as exc:
            self._close(claim.attempt_id, "crashed", exc, usage)
            raise
        log.info("evaluation %s: article %s (%s) answered", self.evaluation_id, item_id, claim.item["title"][:40])
        return self._count("answered" if stored else "taken over")

    def _call(self, llm: LLMClient, item: dict[str, Any], attempt_id: int, usage: Usage) -> bool:
        source = evidence.Article(item["clean_text"])
        threshold = self.settings.push_score_threshold
        prompt = self.candidate.prompt
        answer = llm.complete_json(
            analyst.system_prompt(threshold, self.profile, prompt),
            analyst.article_prompt(item, self.settings.deepseek_content_truncate_chars, prompt), ArticleAnalysis,
            deadline=self.deadline, check=lambda value: evidence.needs_repair(value, source, threshold), usage=usage,
        )
        result, verdict = evidence.settle(answer.value, source, threshold)  # type: ignore[arg-type]
        with self.connect() as conn:
            self._spend(conn, attempt_id, usage)
            return store.evaluations.store_answer(conn, attempt_id, {
                "score": result.score, "has_opportunity": result.has_opportunity, "top_type": result.top_type,
                "summary": result.summary,
                "result_json": {**result.model_dump(mode="json"), "checks": evidence.record(verdict)},
                "evidence_verified": evidence.verified_flag(result, verdict, threshold),
                "consistency_note": verdict.consistency, "failed_rungs": len(answer.failures),
                "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                "cache_hit_tokens": usage.cache_hit_tokens, "cost": usage.cost(self.settings.price_table()),
                "latency_ms": usage.latency_ms, "llm_calls": usage.calls,
            })

    def _spend(self, conn: Any, attempt_id: int, usage: Usage) -> None:
        """The ladder's calls in the ledger, once, when any was answered (paid is paid: committed at once)."""
        if not usage.answered or attempt_id in self._paid:
            return
        prices = self.settings.price_table()
        store.evaluations.record_spend(conn, {
            "spent_on": spending.today(), "evaluation_id": self.evaluation_id, "model": self.candidate.model,
            "calls": usage.calls, "answered": usage.answered, "peak_calls": usage.peak_calls(prices),
            "rate_limited": usage.rate_limited, "prompt_tokens": usage.prompt_tokens,
            "cache_hit_tokens": usage.cache_hit_tokens, "cache_miss_tokens": usage.cache_miss_tokens,
            "completion_tokens": usage.completion_tokens, "reasoning_tokens": usage.reasoning_tokens,
            "cost": usage.cost(prices), "currency": prices.currency,
        })
        conn.commit()
        self._paid.add(attempt_id)

    def _close(self, attempt_id: int, outcome: str, exc: BaseException, usage: Usage) -> None:
        try:
            with self.connect() as conn:
                self._spend(conn, attempt_id, usage)
                store.evaluations.finish_attempt(conn, attempt_id, outcome, f"{exc.__class__.__name__}: {exc}", usage.calls)
                conn.commit()
        except Exception:
            log.exception("evaluation %s: could not close attempt %s; its lease will expire", self.evaluation_id,
                          attempt_id)
