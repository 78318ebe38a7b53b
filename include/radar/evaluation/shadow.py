"""A shadow evaluation: a candidate set-up (model, thinking, reasoning effort, prompt version, its own connection)
answers a bounded sample of the reader's stored articles, so the choice of model rests on evidence.

It goes the slots' way (connections.py's client, analyst.py's ladder, evidence check and attempt closing, the claims
of store/claims.py on its own tables, spending.py's ledger) and stores apart (store/evaluations.py): nothing that
pushes, ranks, reports or keeps the track record reads its answers. Its money: priced by the candidate's own prices,
spent from its own cap (never from the slots' daily budget), each call reserving its worst case first; its
endpoint is tried before anything is recorded, and a run whose articles keep failing, or whose endpoint reports
more than a call reserved, stops as failed (the articles' way and that watch: job.py). The rules:
docs/evaluation.md.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from include.radar import store
from include.radar.analysis import analyst, batches, evidence, focus, ratelimit, spending
from include.radar.analysis.llm import FIELD_ORDER, JSON_ONLY, LLMClient, LLMConfigError, LLMError
from include.radar.analysis.prompting import PROMPTS, Prompt
from include.radar.core import pricing
from include.radar.core.clock import SYSTEM, Clock
from include.radar.core.settings import Settings
from include.radar.evaluation import job
from include.radar.operations import connections

log = logging.getLogger(__name__)

MAX_SAMPLE = 200  # articles in one evaluation: a bound on its cost and on its run's time
MAX_DAYS = 366
MAX_CAP = {"USD": 50.0, "CNY": 350.0}  # the most one evaluation may be allowed to spend
PROBE_SECONDS = 15.0  # the endpoint's model list, asked before anything is recorded
# when an article's own analysis did not record its tokens (a reused analysis, an old row): its length as tokens
# (Chinese is about a token per character) plus the prompt, and this much output
FALLBACK_PROMPT_TOKENS = 3000
FALLBACK_OUTPUT_TOKENS = 2000
# what a repair adds to its article's prompt at most: the longest instruction a rung carries, after a blank line
REPAIR_BYTES = 2 + max(len(text.encode()) for text in (
    JSON_ONLY, FIELD_ORDER, evidence.EVIDENCE_AGAIN, evidence.CONSISTENCY_AGAIN.format(threshold=100)))
_MODEL = re.compile(r"^[A-Za-z0-9._:/-]{1,100}$")
_VERSION = re.compile(r"^v[0-9]{1,3}$")
_CONN = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")
ONLY_WITH = ("all", "feedback", "outcomes")
# an evaluation's own connection is named for the radar's LLM use: the trigger form's 连接 is any text, and another
# team's connection (or any other of this Airflow's) would send its password to the candidate's endpoint as a key
LLM_CONN_PREFIX = "radar_llm_"
PRICE_SOURCES = {"published": "published", "given": "given (--prices)", "deployment": "configured (deepseek_prices)"}


class EvaluationError(ValueError):
    """A candidate, sample, cap or endpoint that cannot be evaluated: nothing was recorded, nothing paid."""


@dataclass(frozen=True)
class Candidate:
    """The set-up under evaluation; ``conn_id`` is an OpenAI-compatible connection of its own, ``prices`` its
    off-peak prices per million tokens as JSON (needed when no price of the model is published)."""

    model: str
    thinking: bool = True
    reasoning_effort: str | None = "high"
    prompt_version: str = analyst.ANALYSIS_PROMPT.version
    conn_id: str = "deepseek_default"
    prices: str | None = None

    def check(self) -> Candidate:
        if not _MODEL.fullmatch(self.model or ""):
            raise EvaluationError(f"--model {self.model!r}: letters, digits and ._:/- only, at most 100")
        if self.reasoning_effort not in (None, "low", "medium", "high", "max"):
            raise EvaluationError("--effort: low, medium, high or max")
        if not _VERSION.fullmatch(self.prompt_version or "") or not _prompt_exists(self.prompt_version):
            raise EvaluationError(f"--prompt {self.prompt_version!r}: no such analysis prompt")
        if not _CONN.fullmatch(self.conn_id or ""):
            raise EvaluationError(f"--conn {self.conn_id!r} is not a connection id")
        if self.prices:
            try:
                pricing.parse_rates(self.prices)
            except ValueError as exc:
                raise EvaluationError(f"--prices: {exc}") from None
        return self

    @property
    def prompt(self) -> Prompt:
        return Prompt("analysis", self.prompt_version)

    @property
    def label(self) -> str:
        return label(self.model, self.thinking, self.reasoning_effort, self.prompt_version)

    def setup(self) -> connections.Setup:
        return connections.Setup(
            self.conn_id, self.model, self.thinking, self.reasoning_effort, whose="evaluation's",
            name="the evaluation's endpoint",
            model_fix="choose another candidate model (the evaluation's --model, or the trigger form's 候选模型)",
            https_only=True)


def label(model: str, thinking: bool, effort: str | None, prompt_version: str) -> str:
    mode = f"thinking {effort or 'on'}" if thinking else "no thinking"
    return f"{model} · {mode} · analysis-{prompt_version}"


def _prompt_exists(version: str) -> bool:
    return all((PROMPTS / f"analysis_{version}.{part}.txt").is_file() for part in ("system", "user"))


@dataclass(frozen=True)
class Sample:
    days: int = 14
    size: int = 50
    only_with: str = "all"  # all | feedback (the reader gave a verdict) | outcomes (its pick was measured)

    def check(self) -> Sample:
        if not 1 <= self.days <= MAX_DAYS:
            raise EvaluationError(f"--days: 1 to {MAX_DAYS}")
        if not 1 <= self.size <= MAX_SAMPLE:
            raise EvaluationError(f"--size: 1 to {MAX_SAMPLE} articles")
        if self.only_with not in ONLY_WITH:
            raise EvaluationError(f"--only: one of {', '.join(ONLY_WITH)}")
        return self


def check_cap(cap: float, currency: str) -> float:
    most = MAX_CAP.get(currency, MAX_CAP["USD"])
    if not 0 <= cap <= most:
        raise EvaluationError(f"--cap: from 0 to {pricing.format_money(most, currency)}")
    return cap


def price_source_text(source: str) -> str:
    return PRICE_SOURCES.get(source, "estimated")


def candidate_prices(settings: Settings, candidate: Candidate) -> tuple[pricing.PriceTable, str]:
    """The candidate's own price table and where its prices come from (given, the deployment's when it is the
    configured model, else published); a model without a known price is refused."""
    currency = settings.deepseek_currency
    if candidate.prices:
        rates, source = pricing.parse_rates(candidate.prices), "given"
    elif candidate.model == settings.deepseek_model and settings.deepseek_prices:
        rates, source = pricing.parse_rates(settings.deepseek_prices), "deployment"
    elif (candidate.model, currency) in pricing.DEFAULT_OFF_PEAK:
        rates, source = pricing.DEFAULT_OFF_PEAK[(candidate.model, currency)], "published"
    else:
        raise EvaluationError(
            f"no published {currency} prices for {candidate.model}: give its off-peak prices per million tokens with "
            "--prices '{\"cache_hit\": …, \"cache_miss\": …, \"output\": …}' (the trigger form's 价格)")
    return dataclasses.replace(settings.price_table(), currency=currency, off_peak=rates, estimated=False), source


def prices_of(row: dict[str, Any], settings: Settings) -> pricing.PriceTable:
    """The price table an evaluation was started with (its own model's, in its own currency)."""
    stored = row.get("prices") or {}
    table = settings.price_table()
    if "cache_miss" in stored:
        rates = pricing.Rates(float(stored["cache_hit"]), float(stored["cache_miss"]), float(stored["output"]))
        return dataclasses.replace(table, currency=row["currency"], off_peak=rates, estimated=False)
    return pricing.table_for(row["model"], row["currency"], peak_multiplier=table.peak_multiplier,
                             peak_windows=table.peak_windows, peak_since=table.peak_since,
                             peak_weekdays_only=table.peak_weekdays_only)


def estimate(rows: list[dict[str, Any]], prices: pricing.PriceTable) -> float:
    """An upper estimate of what the sample costs the candidate: every token a cache miss at peak rates."""
    total = 0.0
    for r in rows:
        prompt = int(r.get("prompt_tokens") or 0) or len(r.get("clean_text") or "") + FALLBACK_PROMPT_TOKENS
        output = int(r.get("completion_tokens") or 0) or FALLBACK_OUTPUT_TOKENS
        total += prices.most(prompt, output)
    return round(total, 6)


def with_repairs(rows: list[dict[str, Any]], prices: pricing.PriceTable, settings: Settings) -> float:
    """The estimate with every article's ladder at its worst: each rung (``deepseek_max_retries`` after the first)
    a call as dear as the article's own analysis, every token a cache miss at peak rates."""
    return round(estimate(rows, prices) * (settings.deepseek_max_retries + 1), 6)


def call_bounds(rows: list[dict[str, Any]], settings: Settings, candidate: Candidate, prices: pricing.PriceTable,
                profile: focus.Profile) -> tuple[float, float]:
    """The most one call of the sample may cost (the largest prompt, every byte a token, and a full answer): what
    the cap reserves before each call; and the cap that finishes the run whatever happens: every article's
    ladder, each rung at its most (a repair's prompt with the longest instruction it may carry)."""
    system = analyst.system_prompt(settings.push_score_threshold, profile, candidate.prompt)
    firsts = [pricing.most_prompt_tokens(system, analyst.article_prompt(
        r, settings.deepseek_content_truncate_chars, candidate.prompt)) for r in rows]
    out = settings.deepseek_max_tokens
    ladder = sum(prices.most(p, out) + settings.deepseek_max_retries * prices.most(p + REPAIR_BYTES, out)
                 for p in firsts)
    return (round(prices.most(max(firsts), out), 6) if rows else 0.0), round(ladder, 6)


def check_endpoint(settings: Settings, candidate: Candidate, timeout: float = PROBE_SECONDS) -> list[str]:
    """Ask the candidate's endpoint for its models (free) before anything is recorded: a missing or plain-http
    connection, a key refused, a dead host or a model not offered is an EvaluationError naming the connection."""
    try:
        offered = connections.llm_client(settings, connections=1, timeout=timeout, setup=candidate.setup()).models(
            timeout)
    except (connections.ConfigurationError, LLMError) as exc:
        raise EvaluationError(f"the evaluation's connection {candidate.conn_id!r} (--conn, the trigger form's 连接) "
                              f"does not answer: {exc}") from None
    if offered and candidate.model not in offered:
        raise EvaluationError(f"the evaluation's endpoint (connection {candidate.conn_id!r}) does not offer "
                              f"{candidate.model!r} (it offers {', '.join(sorted(offered)[:8])}): choose another --model")
    return offered


def configured_setup(settings: Settings) -> dict[str, Any]:
    """The current set-up, as the slots analyse now (what the candidate is compared with)."""
    return {"model": settings.deepseek_model, "thinking": settings.deepseek_thinking,
            "reasoning_effort": settings.deepseek_reasoning_effort if settings.deepseek_thinking else None,
            "prompt_version": analyst.ANALYSIS_PROMPT.version}


@dataclass(frozen=True)
class Plan:
    evaluation_id: int | None  # None: a dry run, nothing recorded
    articles: int
    estimate: float
    most_per_call: float
    prices: pricing.PriceTable
    source: str
    refused: str | None = None
    worst: float = 0.0  # the estimate with every ladder's repairs
    finishing: float = 0.0  # the cap that finishes the run whatever it needs (every call at its most)


def _refusal(plan: Plan, cap: float) -> str | None:
    money = plan.prices.money
    if plan.estimate > cap:
        return f"estimated {money(plan.estimate)} for {plan.articles} articles is over the cap of {money(cap)}: no call made"
    if plan.most_per_call > cap:
        return (f"the cap of {money(cap)} does not cover one call at its most ({money(plan.most_per_call)}), which "
                "each call reserves before it is made: no call made")
    return None


def check_connection(settings: Settings, conn_id: str) -> None:
    """Refuse a connection an evaluation may not use: the slots' own, or one named ``radar_llm_…``, only."""
    if conn_id != settings.deepseek_conn_id and not conn_id.startswith(LLM_CONN_PREFIX):
        raise EvaluationError(
            f"--conn {conn_id!r} (the trigger form's 连接): an evaluation runs on the slots' connection "
            f"({settings.deepseek_conn_id!r}) or on one named {LLM_CONN_PREFIX}…, made for it; its password is "
            "sent to the candidate's endpoint as the API key")


def preview(connect: Callable[[], Any], settings: Settings, candidate: Candidate, sample: Sample, cap: float, *,
            clock: Clock = SYSTEM, probe: bool = True) -> tuple[Plan, list[dict[str, Any]]]:
    """What an evaluation would sample and cost, its endpoint tried: nothing recorded, no paid call."""
    candidate.check()
    check_connection(settings, candidate.conn_id)
    sample.check()
    check_cap(cap, settings.deepseek_currency)
    if probe:  # a model the endpoint does not offer is said before any price is asked for it
        check_endpoint(settings, candidate)
    prices, source = candidate_prices(settings, candidate)
    since = clock.now() - timedelta(days=sample.days)
    with connect() as conn:
        rows = store.evaluations.sample(conn, since=since, size=sample.size, only_with=sample.only_with)
        profile = focus.from_row(store.focus.get_profile(conn))
    most, finishing = call_bounds(rows, settings, candidate, prices, profile)
    plan = Plan(None, len(rows), estimate(rows, prices), most, prices, source,
                worst=with_repairs(rows, prices, settings), finishing=finishing)
    return dataclasses.replace(plan, refused=_refusal(plan, cap)), rows


def start(connect: Callable[[], Any], settings: Settings, candidate: Candidate, sample: Sample, cap: float, *,
          created_by: str = "", clock: Clock = SYSTEM, probe: bool = True) -> Plan:
    """Record the evaluation and its sample once its endpoint answered; refused (no call made) when its estimate,
    or one call at its most, is over ``cap``."""
    plan, rows = preview(connect, settings, candidate, sample, cap, clock=clock, probe=probe)
    rates = plan.prices.off_peak
    with connect() as conn:
        evaluation_id = store.evaluations.create(conn, {
            "created_by": created_by[:200], "model": candidate.model, "thinking": candidate.thinking,
            "reasoning_effort": candidate.reasoning_effort if candidate.thinking else None,
            "prompt_version": candidate.prompt_version, "conn_id": candidate.conn_id, "days": sample.days,
            "sample_size": sample.size, "only_with": sample.only_with, "cap": cap, "currency": settings.deepseek_currency,
            "prices": {"cache_hit": rates.cache_hit, "cache_miss": rates.cache_miss, "output": rates.output,
                       "source": plan.source},
            "baseline": configured_setup(settings),
        })
        store.evaluations.add_items(conn, evaluation_id, rows)
        note = plan.refused or f"{plan.articles} articles sampled"
        store.evaluations.set_status(conn, evaluation_id, "refused" if plan.refused else "planned", note,
                                     estimate=plan.estimate, reason="refused" if plan.refused else None)
    log.info("evaluation %s of %s: %d articles, estimated %.4f %s%s", evaluation_id, candidate.label, plan.articles,
             plan.estimate, settings.deepseek_currency, f"; refused: {plan.refused}" if plan.refused else "")
    return dataclasses.replace(plan, evaluation_id=evaluation_id)


def new_cap(connect: Callable[[], Any], settings: Settings, evaluation_id: int, cap: float) -> str | None:
    """Set an evaluation's cap before it is run again; a refused one is planned again when the new cap covers its
    estimate. Returns why it is still refused, else None."""
    with connect() as conn:
        row = store.evaluations.get(conn, evaluation_id)
        if row is None:
            raise EvaluationError(f"--resume {evaluation_id}: no such evaluation")
        check_cap(cap, row["currency"])
        store.evaluations.set_cap(conn, evaluation_id, cap)
        if row["status"] != "refused":
            return None
        money = prices_of(row, settings).money
        if float(row["estimate"]) > cap:
            refused = (f"estimated {money(row['estimate'])} for {row['items']} articles is over the cap of "
                       f"{money(cap)}: no call made")
            store.evaluations.set_status(conn, evaluation_id, "refused", refused, reason="refused")
            return refused
        store.evaluations.set_status(conn, evaluation_id, "planned", f"the cap raised to {money(cap)}")
    return None


def candidate_of(row: dict[str, Any]) -> Candidate:
    return Candidate(model=row["model"], thinking=row["thinking"], reasoning_effort=row["reasoning_effort"],
                     prompt_version=row["prompt_version"], conn_id=row["conn_id"])


def default_claimer() -> str:
    return f"evaluation:{socket.gethostname()}:{os.getpid()}"


@dataclass
class Run:
    """What one run of an evaluation did; ``stopped`` says why articles were left (resume later), ``failed``
    whether it stopped as failed (its endpoint failed article after article, or a configuration error)."""

    evaluation_id: int
    counts: dict[str, int]
    stopped: str | None = None
    failed: bool = False
    reason: str | None = None  # the stop's kind (job.Stop)


FAILING = ("over_cap", "failing", "config", "crashed")


def run(connect: Callable[[], Any], settings: Settings, evaluation_id: int, *,
        client: Callable[[Any], LLMClient] | None = None, claimer: str | None = None,
        deadline: float | None = None, clock: Clock = SYSTEM, trust_max_tokens: bool = False) -> Run:
    """Answer every open article of the evaluation (a resumed one: only those not answered yet).

    ``client`` makes the candidate's client behind a rate gate (the candidate's own connection by default);
    ``claimer`` owns the claims (this process by default); ``deadline`` (``clock.monotonic()``) bounds the run:
    what is left stays pending; ``clock``: whose day the spend is on; ``trust_max_tokens``: run it although its
    endpoint once reported more than a call reserved."""
    with connect() as conn:
        row = store.evaluations.get(conn, evaluation_id)
        if row is None:
            raise EvaluationError(f"no evaluation {evaluation_id}")
        if row["status"] == "refused":
            return Run(evaluation_id, {}, row["note"])
        check_connection(settings, row["conn_id"])  # stored by a version that took any
        if not trust_max_tokens:
            check_trusted(conn, row)
        items = store.evaluations.open_items(conn, evaluation_id, settings.max_analysis_attempts)
        store.evaluations.set_status(conn, evaluation_id, "running", row["note"])
        profile = focus.from_row(store.focus.get_profile(conn))
    candidate = candidate_of(row)
    threads = batches.width(settings.llm_concurrency, settings.analysis_tasks)
    gate = gate_of(connect, settings, candidate, evaluation_id)
    make = client or (lambda g: connections.llm_client(settings, g, connections=threads, setup=candidate.setup(),
                                                       clock=clock))
    owner = claimer or default_claimer()
    prices = prices_of(row, settings)
    work = job.Job(connect, settings, evaluation_id, candidate, prices, profile, owner, deadline,
                   spending.Cap(connect, evaluation_id, prices, deadline, clock), clock)
    try:
        shared = make(gate)
        offered = shared.models(PROBE_SECONDS)
        if offered and candidate.model not in offered:
            raise LLMConfigError(f"the evaluation's endpoint (connection {candidate.conn_id!r}) does not offer "
                                 f"{candidate.model!r}: choose another --model")
        with analyst.ClaimKeeper(connect, owner, renew=store.evaluations.renew):
            batches.run([dict(i) for i in items], lambda item: work.answer(shared, item), threads=threads,
                        stop_on=(job.Stop, LLMConfigError))
    except job.Stop as exc:
        return _finish(connect, evaluation_id, work, exc)
    except (LLMError, connections.ConfigurationError) as exc:
        return _finish(connect, evaluation_id, work, job.Stop("config", str(exc)))
    except Exception as exc:  # articles crashed: recorded on their attempts; the run says so and fails
        _finish(connect, evaluation_id, work, job.Stop("crashed", f"{exc.__class__.__name__}: {exc}"))
        raise
    return _finish(connect, evaluation_id, work, None)


def check_trusted(conn: Any, row: dict[str, Any]) -> None:
    """Refuse an evaluation whose endpoint (connection and model) once reported more than a call reserved."""
    marked = store.evaluations.over_reported(conn, row["conn_id"], row["model"])
    if marked:
        raise EvaluationError(
            f"connection {row['conn_id']!r} reported more tokens for {row['model']} than max_tokens allows "
            f"(evaluation {marked}, past its cap): not run again unless asked (--trust-max-tokens)")


def gate_of(connect: Callable[[], Any], settings: Settings, candidate: Candidate,
            evaluation_id: int) -> ratelimit.DatabaseGate:
    """The candidate's rate-limit gate: on the slots' connection it waits out their cool-down and adds its 429s to
    it (one endpoint, one limit), throttled on its own, its outcomes not shown as the slots'; on a connection of its
    own, a state of its own."""
    if candidate.conn_id == settings.deepseek_conn_id:
        return ratelimit.DatabaseGate(connect, -evaluation_id, reports=False)
    key, lock = ratelimit.own_state(candidate.conn_id)
    return ratelimit.DatabaseGate(connect, -evaluation_id, key=key, lock=lock)


def _finish(connect: Callable[[], Any], evaluation_id: int, work: job.Job, stop: job.Stop | None) -> Run:
    counts = work.counts
    with connect() as conn:
        row = store.evaluations.get(conn, evaluation_id)
        assert row is not None
        left = int(row["items"]) - int(row["answered"]) - int(row["failed"])
        if work.watch.first is not None:  # whatever else stopped it, the overspend is said first
            over = max(float(row["spent"]) - float(row["cap"]), 0.0)
            store.evaluations.set_over_cap(conn, evaluation_id, {
                **work.watch.first, "spent": float(row["spent"]), "cap": float(row["cap"]), "over": round(over, 6)})
            money = work.prices.money
            stop = job.Stop("over_cap", f"spent {money(row['spent'])} of a cap of {money(row['cap'])} ({money(over)} "
                                     f"over it): {work.watch.says()}; stopped at once")
        if stop is None and counts.get("failed") and not counts.get("answered"):
            stop = job.Stop("failing", f"every article it tried failed ({counts['failed']}); the last: {work.last_error}")
        if stop is None and left > 0:
            stop = job.Stop("held", f"{left} articles not answered yet (held by another run): run it again to finish")
        failed = stop is not None and stop.kind in FAILING
        note = str(stop) if stop else (f"{row['answered']} answered, {row['failed']} failed" +
                                       (" (run it again to retry those with attempts left)" if row["failed"] else ""))
        store.evaluations.set_status(conn, evaluation_id, "failed" if failed else "stopped" if stop else "done", note,
                                     reason=stop.kind if stop else None)
    log.info("evaluation %s: %s (%s)", evaluation_id, note, ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return Run(evaluation_id, counts, str(stop) if stop else None, failed, stop.kind if stop else None)
