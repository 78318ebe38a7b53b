"""DeepSeek through the openai SDK: one JSON answer, validated, with the retry ladder of seed 7.3.

The ladder: the first call, then a plain retry, then a retry with the "JSON only" reminder, then one asking
for the example's field order with empty values for what is missing. It is walked on 429/5xx, timeouts,
blank content, ``finish_reason == "length"``, JSON that does not parse and schema failures. 401/402/422 and
an unknown-model 400 are configuration problems: they fail at once with a message naming the cause. Any
other 400 (e.g. DeepSeek's content-risk refusal) is about this input: that article fails, without retries. The SDK's own retries are
off (``max_retries=0``) so that its retries, this ladder and Airflow's task retries do not multiply.
``reasoning_content`` is never sent back: every call sends only the system and user messages.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import openai
from pydantic import BaseModel, ValidationError

log = logging.getLogger(__name__)

PROMPTS = Path(__file__).with_name("prompts")
JSON_ONLY = "务必只输出 JSON，不要输出任何其它字符。"
FIELD_ORDER = "请严格按照示例中的字段顺序输出完整的 JSON 对象，缺少的字段请补空值（字符串为 \"\"，数组为 []，数字为 0，布尔为 false）。"
RUNG_SUFFIX = {0: "", 1: "", 2: JSON_ONLY, 3: FIELD_ORDER}

M = TypeVar("M", bound=BaseModel)


class LLMConfigError(RuntimeError):
    """Not retryable: unknown model, bad key, no balance, bad parameter. Fix the configuration."""


class LLMRejected(RuntimeError):
    """Not retryable, and about this input rather than the configuration (e.g. a content-risk 400):
    the article fails with the message, the others go on."""


class LLMExhausted(RuntimeError):
    """Every rung of the ladder failed; ``attempts`` lists why, rung by rung."""

    def __init__(self, attempts: list[str]) -> None:
        super().__init__(f"LLM answer unusable after {len(attempts)} calls: {' | '.join(attempts)}")
        self.attempts = attempts


class _Retryable(Exception):
    pass


@dataclass(frozen=True)
class Prompt:
    """A versioned prompt: ``<name>_<version>.system.txt`` and ``.user.txt`` under prompts/."""

    name: str
    version: str

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"

    def system(self) -> str:
        return (PROMPTS / f"{self.name}_{self.version}.system.txt").read_text(encoding="utf-8")

    def user(self, **values: str) -> str:
        template = (PROMPTS / f"{self.name}_{self.version}.user.txt").read_text(encoding="utf-8")
        return template.format(**values)


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cache_hit_tokens: int = 0
    cache_miss_tokens: int = 0
    calls: int = 0
    latency_ms: int = 0

    def add(self, usage: Any) -> None:
        if usage is None:
            return
        get = usage.get if isinstance(usage, dict) else lambda k, d=None: getattr(usage, k, d)
        self.prompt_tokens += int(get("prompt_tokens", 0) or 0)
        self.completion_tokens += int(get("completion_tokens", 0) or 0)
        self.cache_hit_tokens += int(get("prompt_cache_hit_tokens", 0) or 0)
        self.cache_miss_tokens += int(get("prompt_cache_miss_tokens", 0) or 0)
        details = get("completion_tokens_details", None)
        if details is not None:
            reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else getattr(details, "reasoning_tokens", 0)
            self.reasoning_tokens += int(reasoning or 0)

    def cost_usd(self, price_hit: float, price_miss: float, price_out: float) -> float:
        miss = self.cache_miss_tokens or max(self.prompt_tokens - self.cache_hit_tokens, 0)
        return round((self.cache_hit_tokens * price_hit + miss * price_miss + self.completion_tokens * price_out) / 1e6, 6)


@dataclass
class JsonAnswer:
    value: BaseModel
    usage: Usage
    model: str
    failures: list[str] = field(default_factory=list)


class LLMClient:
    """A DeepSeek (OpenAI-compatible) chat client that returns validated JSON answers."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        thinking: bool = True,
        reasoning_effort: str | None = "high",
        timeout: float = 180.0,
        max_retries: int = 3,
        backoff_seconds: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not api_key:
            raise LLMConfigError("no DeepSeek API key: set the password of the deepseek_default connection")
        self.model = model
        self.thinking = thinking
        self.reasoning_effort = reasoning_effort
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self.sleep = sleep
        self.base_url, self.api_key, self.timeout = base_url, api_key, timeout
        self._calls = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="deepseek")

    def _extra_body(self) -> dict[str, Any]:
        if not self.thinking:
            return {"thinking": {"type": "disabled"}}
        body: dict[str, Any] = {"thinking": {"type": "enabled"}}
        if self.reasoning_effort:
            body["reasoning_effort"] = self.reasoning_effort
        return body

    def complete_json(self, system: str, user: str, schema: type[M]) -> JsonAnswer:
        """Walk the ladder until an answer validates against ``schema``; raise LLMExhausted otherwise."""
        usage = Usage()
        failures: list[str] = []
        for attempt in range(self.max_retries + 1):
            rung = min(attempt, 3)
            content = user if not RUNG_SUFFIX[rung] else f"{user}\n\n{RUNG_SUFFIX[rung]}"
            started = time.monotonic()
            try:
                value = self._call_once(system, content, schema, usage)
            except _Retryable as exc:
                failures.append(f"call {attempt + 1}: {exc}")
                log.warning("LLM call %d/%d failed: %s", attempt + 1, self.max_retries + 1, exc)
                if attempt < self.max_retries and self.backoff_seconds:
                    self.sleep(self.backoff_seconds * 2**attempt)
                continue
            finally:
                usage.calls += 1
                usage.latency_ms += int((time.monotonic() - started) * 1000)
            return JsonAnswer(value=value, usage=usage, model=self.model, failures=failures)
        raise LLMExhausted(failures)

    def _request(self, system: str, user: str) -> Any:
        """One chat completion within a wall-clock deadline.

        The SDK's timeout is per read and restarts with every byte; under load DeepSeek keeps a request open
        for up to 10 minutes with blank keep-alive lines. The deadline caps the whole call: past it the
        client is closed (which ends the request) and the rung counts as a timeout.
        """
        client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout, max_retries=0)
        future = self._calls.submit(
            client.chat.completions.create,
            model=self.model,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            response_format={"type": "json_object"},
            extra_body=self._extra_body(),
        )
        try:
            return future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            raise _Retryable(f"no complete answer within {self.timeout:g}s") from None
        finally:
            if not future.done():
                client.close()

    def _call_once(self, system: str, user: str, schema: type[M], usage: Usage) -> M:
        try:
            response = self._request(system, user)
        except openai.APIStatusError as exc:
            raise _classify(exc, self.model) from None
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise _Retryable(f"connection failed: {exc.__class__.__name__}") from None
        usage.add(getattr(response, "usage", None))
        if not response.choices:
            raise _Retryable("answer has no choices")
        choice = response.choices[0]
        content = choice.message.content or ""
        if choice.finish_reason == "length":
            raise _Retryable("answer truncated (finish_reason=length)")
        if not content.strip():
            raise _Retryable("blank content")
        try:
            data = json.loads(_strip_fence(content))
        except json.JSONDecodeError as exc:
            raise _Retryable(f"not JSON ({exc.msg} at {exc.pos}): {content[:80]!r}") from None
        if not isinstance(data, dict):
            raise _Retryable(f"JSON is a {type(data).__name__}, not an object")
        try:
            return schema.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:4])
            raise _Retryable(f"schema: {problems}") from None


def _strip_fence(content: str) -> str:
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


def _classify(exc: openai.APIStatusError, model: str) -> Exception:
    status = exc.status_code
    message = _error_message(exc)
    if status in (429, 408, 409) or status >= 500:
        return _Retryable(f"HTTP {status}: {message}")
    if status == 401:
        return LLMConfigError(f"DeepSeek rejected the API key (401: {message}): check the deepseek_default connection")
    if status == 402:
        return LLMConfigError(f"DeepSeek account has insufficient balance (402: {message}): top up the account")
    if status == 422:
        return LLMConfigError(f"DeepSeek rejected a request parameter (422: {message}): check the deepseek settings")
    if status in (400, 404) and "model" in message.lower():
        return LLMConfigError(
            f"DeepSeek does not know the model {model!r} ({status}: {message}): set AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL "
            "to a current model such as deepseek-v4-pro or deepseek-flash"
        )
    if status in (403, 404):
        return LLMConfigError(f"DeepSeek refused the request ({status}: {message}): check the deepseek_default connection")
    return LLMRejected(f"DeepSeek rejected this request (HTTP {status}: {message}); not retried")


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(exc.message)[:300]
