"""Analyse one article with the LLM, never paying twice.

Order of checks (seed 000 section 4.1, seed 003 section 4): an item that already has an analysis is
skipped before any call; an item whose clean-text hash was analysed under another external id (a repost)
reuses that analysis; otherwise the LLM is called and the result inserted under the unique key
``analysis_result(content_item_id)``. Status moves 0 → 1 → 2, or → 3 with the error once the ladder fails.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from include.radar import store
from include.radar.llm import LLMClient, LLMConfigError, LLMExhausted, LLMRejected, Prompt, Usage
from include.radar.schemas import ArticleAnalysis
from include.radar.settings import Settings
from include.radar.slots import to_local

log = logging.getLogger(__name__)

ANALYSIS_PROMPT = Prompt("analysis", "v1")
TRUNCATION_NOTICE = "（正文过长已截断，可能缺失关键信息，需核验原文）"
DELIMITERS = ("<<<ARTICLE_START>>>", "<<<ARTICLE_END>>>")


@dataclass(frozen=True)
class Outcome:
    content_item_id: int
    status: str  # analysed | reused | skipped | failed
    analysis_id: int | None = None
    score: int | None = None
    error: str | None = None

    def as_xcom(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def article_prompt(item: dict[str, Any], truncate_chars: int) -> str:
    """The user message: the article as data between delimiters, truncated with the seed's notice."""
    text = _data(item["clean_text"])
    if len(text) > truncate_chars:
        text = text[:truncate_chars] + "\n" + TRUNCATION_NOTICE
    published = to_local(item["published_at"])
    return ANALYSIS_PROMPT.user(
        title=_data(item["title"]).replace("\n", " "),
        mp_name=_data(item.get("mp_name") or item.get("mp_id") or "").replace("\n", " "),
        published_at=published.strftime("%Y-%m-%d %H:%M") if published else "",
        content=text,
    )


def _data(text: str) -> str:
    """Article text cannot close the data block early: the delimiters are removed from it."""
    for marker in DELIMITERS:
        text = text.replace(marker, "")
    return text


def analyse_item(
    connect: Callable[[], Any],
    llm_factory: Callable[[], LLMClient],
    *,
    item_id: int,
    slot_run_id: int,
    settings: Settings,
) -> Outcome:
    """Analyse one content item for this slot run. Raises LLMConfigError (and puts the item back)."""
    with connect() as conn:
        existing = store.analysis_for_item(conn, item_id)
        if existing is not None:
            store.mark_item_done(conn, item_id)
            log.info("item %s already analysed (analysis %s); no call", item_id, existing["id"])
            return Outcome(item_id, "skipped", existing["id"], existing["score"])
        item = store.start_analysis(conn, item_id, slot_run_id)
        if item is None:
            log.info("item %s is done or being analysed by another run; skipped", item_id)
            return Outcome(item_id, "skipped")
        item = store.get_item(conn, item_id)
        twin = store.analysis_for_hash(conn, item["content_hash"], item_id) if item["content_hash"] else None
        if twin is not None:
            analysis_id = _reuse(conn, twin, item_id, slot_run_id)
            log.info("item %s (%s) repeats the text of analysis %s; reused, no call", item_id, item["title"], twin["id"])
            return Outcome(item_id, "reused", analysis_id, twin["score"])

    try:
        llm = llm_factory()
        answer = llm.complete_json(
            ANALYSIS_PROMPT.system(), article_prompt(item, settings.deepseek_content_truncate_chars), ArticleAnalysis
        )
    except LLMConfigError as exc:
        with connect() as conn:
            store.release_item(conn, item_id, str(exc))
        raise
    except (LLMExhausted, LLMRejected) as exc:
        with connect() as conn:
            store.mark_item_failed(conn, item_id, str(exc))
        log.warning("item %s (%s) failed analysis: %s", item_id, item["title"], exc)
        return Outcome(item_id, "failed", error=str(exc))

    result: ArticleAnalysis = answer.value  # type: ignore[assignment]
    record = _record(item_id, slot_run_id, result, answer.usage, answer.model, settings)
    with connect() as conn:
        analysis_id = store.insert_analysis(conn, record, [o.model_dump() for o in result.opportunities])
        if analysis_id is None:  # a concurrent run stored it first: that one stands
            existing = store.analysis_for_item(conn, item_id)
            return Outcome(item_id, "skipped", existing["id"] if existing else None, existing and existing["score"])
    log.info("item %s (%s): score %d, %d opportunities, %d calls, %d ms",
             item_id, item["title"], result.score, len(result.opportunities), answer.usage.calls, answer.usage.latency_ms)
    return Outcome(item_id, "analysed", analysis_id, result.score)


def _record(
    item_id: int, slot_run_id: int, result: ArticleAnalysis, usage: Usage, model: str, settings: Settings
) -> dict[str, Any]:
    return {
        "content_item_id": item_id,
        "slot_run_id": slot_run_id,
        "reused_from_id": None,
        "score": result.score,
        "has_opportunity": result.has_opportunity,
        "top_type": result.top_type,
        "summary": result.summary,
        "result_json": result.model_dump(mode="json"),
        "model": model,
        "prompt_version": ANALYSIS_PROMPT.label,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cache_hit_tokens": usage.cache_hit_tokens,
        "cache_miss_tokens": usage.cache_miss_tokens,
        "cost_usd": usage.cost_usd(
            settings.deepseek_price_input_cache_hit,
            settings.deepseek_price_input_cache_miss,
            settings.deepseek_price_output,
        ),
        "latency_ms": usage.latency_ms,
        "llm_calls": usage.calls,
    }


def _reuse(conn: Any, twin: dict[str, Any], item_id: int, slot_run_id: int) -> int | None:
    """Copy an analysis of the same text onto this item: no LLM call, no tokens, a pointer to the source."""
    record = {
        **{k: twin[k] for k in ("score", "has_opportunity", "top_type", "summary", "result_json", "model",
                                "prompt_version")},
        "content_item_id": item_id,
        "slot_run_id": slot_run_id,
        "reused_from_id": twin["reused_from_id"] or twin["id"],
        "prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0,
        "cache_hit_tokens": 0, "cache_miss_tokens": 0, "cost_usd": 0, "latency_ms": 0, "llm_calls": 0,
    }
    opportunities = twin["result_json"].get("opportunities", []) if isinstance(twin["result_json"], dict) else []
    return store.insert_analysis(conn, record, opportunities)
