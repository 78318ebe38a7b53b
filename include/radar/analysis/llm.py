"""DeepSeek through the openai SDK: one JSON answer, validated, with its retry ladder (docs/architecture.md).

The ladder (a plain retry, then "JSON only", then the example's field order) is walked on 5xx, timeouts, blank,
truncated or unparsable answers and schema failures. A 429 spends no rung: it is waited out (``Retry-After``,
shared through a ``RateGate``) within ``rate_limit_wait`` and ``MAX_RATE_LIMIT_WAITS``. 401/402/422 and an
unknown model are configuration errors, raised at once; any other 400 (a content-risk refusal) fails that
article only. The SDK's own retries are off so that they, the ladder and Airflow's retries do not multiply.
Each call has a total deadline and a decoded-size cap (http.py), its usage is kept per call to be priced at
its time (pricing.py), and a malformed answer is a failed rung, never a crash after it was paid for.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from include.radar.core import http
from include.radar.core.clock import SYSTEM, Clock
from include.radar.core.pricing import Usage, most_prompt_tokens
from include.radar.core.text import storable_json

if TYPE_CHECKING:
    import openai


def _sdk() -> Any:
    """The openai SDK, imported when a client is made: over a second of imports that only the tasks calling
    DeepSeek pay, not every task process parsing the DAG."""
    import openai

    return openai

log = logging.getLogger(__name__)

JSON_ONLY = "务必只输出 JSON，不要输出任何其它字符。"
FIELD_ORDER = "请严格按照示例中的字段顺序输出完整的 JSON 对象，缺少的字段请补空值（字符串为 \"\"，数组为 []，数字为 0，布尔为 false）。"
RUNG_SUFFIX = {0: "", 1: "", 2: JSON_ONLY, 3: FIELD_ORDER}
# a rung is not started with less than this left before the caller's deadline
MIN_CALL_SECONDS = 5.0
MAX_ANSWER_BYTES = 5_000_000
# 429 answers waited out per ladder without spending a rung (each waits Retry-After, at least a second)
MAX_RATE_LIMIT_WAITS = 10

M = TypeVar("M", bound=BaseModel)


class LLMError(RuntimeError):
    """A call or ladder that produced no usable answer; ``usage`` is what it cost so far."""

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage = usage or Usage()


class LLMConfigError(LLMError):
    """Not retryable: unknown model, bad key, no balance, bad parameter. Fix the configuration."""


class LLMRejected(LLMError):
    """Not retryable, and about this input rather than the configuration (e.g. a content-risk 400):
    the article fails with the message, the others go on."""


class LLMExhausted(LLMError):
    """Every rung of the ladder failed; ``attempts`` lists why, rung by rung."""

    def __init__(self, attempts: list[str], usage: Usage | None = None) -> None:
        super().__init__(f"LLM answer unusable after {len(attempts)} calls: {' | '.join(attempts)}", usage)
        self.attempts = attempts


class LLMDeadline(LLMError):
    """The caller's deadline came before a usable answer; the work is left for later, not failed."""


class LLMBudget(LLMError):
    """The caller's money refused the next call (an evaluation's cap): the work is left for later, not failed."""


class _Retryable(Exception):
    pass


class _RateLimited(_Retryable):
    """HTTP 429: DeepSeek asks for fewer calls; waiting it out costs no rung (within rate_limit_wait)."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateGate:
    """How the calls of one slot share DeepSeek's rate limit. This one shares nothing (one process, tests);
    include/radar/analysis/ratelimit.py keeps the state in PostgreSQL, so every worker of the slot backs off."""

    def wait(self, left: float | None) -> float:
        """Sleep out a cool-down announced by another call, at most ``left`` seconds; return the seconds slept."""
        return 0.0

    def in_flight(self, left: float) -> Any:
        """A context held while the call is in flight (limits how many run at once while throttled)."""
        return contextlib.nullcontext()

    def limited(self, pause: float, error: str) -> None:
        """A 429 answer: ``pause`` seconds of cool-down for every call."""

    def failed(self, error: str) -> None:
        """A call failed for another reason."""

    def answered(self) -> None:
        """A usable answer: the rate-limit streak is over."""


@dataclass
class JsonAnswer:
    value: BaseModel
    usage: Usage
    model: str
    failures: list[str] = field(default_factory=list)
    unsettled: str | None = None  # what check() still questions in the answer returned


class LLMUnreachable(LLMError):
    """No HTTP answer at all (refused, unknown host, timed out, TLS): the key was never looked at."""


class LLMNotTheApi(LLMError):
    """An HTTP answer that is not the API's (a web page, a proxy's login page, another service): the host is wrong."""


def _answered(response: Any, limit: int = 80) -> str:
    """What a host answered, in one line: ``HTTP 200 text/html: '<html>…'``."""
    body = " ".join(str(getattr(response, "text", "") or "").split())
    kind = response.headers.get("content-type", "no content type") if hasattr(response, "headers") else "?"
    return f"HTTP {getattr(response, 'status_code', '?')} {kind}: {body[:limit]!r}" + ("…" if len(body) > limit else "")


def _cause(exc: BaseException) -> str:
    """What lies under the SDK's "Connection error.": the innermost error that says something."""
    seen: list[BaseException] = [exc]
    while (inner := seen[-1].__cause__ or seen[-1].__context__) is not None and len(seen) < 8:
        seen.append(inner)
    said = [f"{e.__class__.__name__}: {e}" for e in reversed(seen) if str(e).strip()]
    return (said[0] if said else exc.__class__.__name__)[:300]


@dataclass(frozen=True)
class LLMOptions:
    """How a client calls beyond its endpoint and model: thinking (at ``reasoning_effort``) or not; each call's
    ``timeout`` and most tokens; ``max_retries`` rungs after the first, ``backoff_seconds`` (doubling) between
    them, ``rate_limit_wait`` seconds of 429s waited out per ladder; its pool of ``max_connections``; and what its
    errors name: the connection ``conn_id``, the endpoint ``name``, and ``model_fix``, which option chooses the
    model."""

    thinking: bool = True
    reasoning_effort: str | None = "high"
    timeout: float = 180.0
    max_retries: int = 3
    backoff_seconds: float = 2.0
    max_tokens: int | None = None
    rate_limit_wait: float = 300.0
    max_connections: int = 20
    conn_id: str = "deepseek_default"
    name: str = "DeepSeek"
    model_fix: str = "set AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL to a current model such as deepseek-v4-pro or deepseek-flash"


class LLMClient:
    """A DeepSeek (OpenAI-compatible) chat client that returns validated JSON answers."""

    def __init__(self, *, base_url: str, api_key: str, model: str, options: LLMOptions = LLMOptions(),
                 gate: RateGate | None = None, clock: Clock = SYSTEM) -> None:
        if not api_key:
            raise LLMConfigError(f"no API key for {options.name}: set the password of the {options.conn_id} connection")
        self.model = model
        self.options = options
        self.clock = clock  # the backoffs' waits and the deadlines' seconds
        self.gate = gate or RateGate()
        # one client (one connection pool) for every call of this task, shared by a batch's threads (so as
        # many connections as threads: a call must not spend its deadline waiting for one); its requests
        # honour http.limits
        self._client = _sdk().OpenAI(
            base_url=base_url, api_key=api_key, timeout=options.timeout, max_retries=0,
            http_client=http.client(options.timeout, max_connections=options.max_connections),
        )

    def with_gate(self, gate: RateGate) -> LLMClient:
        """The same client (its connection pool shared, which is thread-safe) behind another rate gate."""
        twin = copy.copy(self)
        twin.gate = gate
        return twin

    def _classify(self, exc: openai.APIStatusError) -> Exception:
        """An error answer as retryable or not; a configuration error names the connection or the option to fix."""
        status, message = exc.status_code, _error_message(exc)
        name, conn_id = self.options.name, self.options.conn_id
        if status == 429:
            return _RateLimited(f"HTTP 429: {message}", _retry_after(exc))
        if status in (408, 409) or status >= 500:
            return _Retryable(f"HTTP {status}: {message}")
        if status == 401:
            return LLMConfigError(f"{name} rejected the API key (401: {message}): check the {conn_id} connection")
        if status == 402:
            return LLMConfigError(f"the account of {name} has insufficient balance (402: {message}): top it up")
        if status == 422:
            return LLMConfigError(f"{name} rejected a request parameter (422: {message}): check the deepseek settings")
        if status in (400, 404) and "model" in message.lower():
            return LLMConfigError(f"{name} does not know the model {self.model!r} ({status}: {message}): "
                                  f"{self.options.model_fix}")
        if status in (403, 404):
            return LLMConfigError(f"{name} refused the request ({status}: {message}): check the {conn_id} connection")
        return LLMRejected(f"{name} rejected this request (HTTP {status}: {message}); not retried")

    def _extra_body(self) -> dict[str, Any]:
        if not self.options.thinking:
            return {"thinking": {"type": "disabled"}}
        body: dict[str, Any] = {"thinking": {"type": "enabled"}}
        if self.options.reasoning_effort:
            body["reasoning_effort"] = self.options.reasoning_effort
        return body

    def models(self, timeout: float) -> list[str]:
        """The ids of the models this key may call (``GET /models``: free); raises LLMConfigError or LLMError
        (LLMUnreachable: no answer; LLMNotTheApi: an answer that is no model list, a web page say)."""
        try:
            with http.limits(timeout, MAX_ANSWER_BYTES):
                raw = self._client.models.with_raw_response.list(timeout=timeout)
        except _sdk().APIStatusError as exc:
            raise (e if isinstance(e := self._classify(exc), LLMError) else LLMError(str(e))) from None
        except _sdk().APIError as exc:
            raise LLMUnreachable(f"{self.options.name} unreachable at {self._client.base_url}: {_cause(exc)}") from None
        try:  # the SDK reads a page that is not JSON as a string, and stumbles on it (AttributeError, ValueError)
            page = raw.parse()
            return [str(m.id) for m in getattr(page, "data", None) or [] if getattr(m, "id", None)]
        except (AttributeError, TypeError, ValueError) as exc:
            raise LLMNotTheApi(f"{self.options.name} at {self._client.base_url} answered GET /models with no model list: "
                               f"{_answered(raw.http_response)}") from exc

    def complete_json(
        self, system: str, user: str, schema: type[M], *, deadline: float | None = None,
        check: Callable[[Any], str | None] | None = None, usage: Usage | None = None,
        reserve: Callable[[int, int], None] | None = None,
    ) -> JsonAnswer:
        """Walk the ladder until an answer validates against ``schema``.

        ``check`` looks at a valid answer: an instruction it returns (the evidence is not in the article, the
        score contradicts the flag) spends the next rung asking again with it; when no rung is left, or the
        later rungs fail, the last valid answer stands (``JsonAnswer.unsettled`` says why it was questioned).
        ``usage`` (the caller's, so that what was paid is known even when the task dies mid-ladder) collects
        every call; ``reserve(prompt, output)`` is told each call's most tokens before it is made and raises
        LLMBudget (with this usage) to refuse it. Raises LLMExhausted when every rung failed, LLMDeadline when ``deadline``
        (``clock.monotonic()``) came first, LLMConfigError / LLMRejected / LLMBudget when retrying cannot help
        (unless a questioned but valid answer is at hand: then it stands); each carries the usage so far.
        """
        ladder = _Ladder(usage if usage is not None else Usage(), deadline, reserve)
        while ladder.attempt <= self.options.max_retries:
            budget = self._wait_turn(ladder)
            if budget is None:
                if ladder.kept is not None:
                    return self._kept_answer(ladder)
                raise LLMDeadline(f"deadline reached after {ladder.usage.calls} calls" +
                                  (f": {' | '.join(ladder.failures)}" if ladder.failures else ""), ladder.usage)
            try:
                value = self._rung(system, user, schema, ladder, budget)
            except LLMError as exc:
                if ladder.kept is not None:  # the repair call was refused: the valid answer already paid for stands
                    log.warning("LLM repair call failed (%s); the earlier valid answer stands", exc)
                    return self._kept_answer(ladder)
                raise
            if value is None:  # the rung failed, or a rate limit was waited out
                continue
            instruction = check(value) if check else None
            if instruction is None or ladder.attempt >= self.options.max_retries:
                return JsonAnswer(value=value, usage=ladder.usage, model=self.model, failures=ladder.failures,
                                  unsettled=instruction)
            log.warning("LLM call %d/%d: a valid answer that needs another look: %s", ladder.attempt + 1,
                        self.options.max_retries + 1, instruction[:80])
            ladder.failures.append(f"call {ladder.attempt + 1}: questioned: {instruction[:60]}")
            ladder.kept, ladder.repair = value, instruction
            ladder.attempt += 1
        if ladder.kept is not None:  # the rungs after a questioned answer failed: that answer stands
            return self._kept_answer(ladder)
        raise LLMExhausted(ladder.failures, ladder.usage)

    def _kept_answer(self, ladder: _Ladder) -> JsonAnswer:
        assert ladder.kept is not None
        return JsonAnswer(value=ladder.kept, usage=ladder.usage, model=self.model, failures=ladder.failures,
                          unsettled=ladder.repair)

    def _wait_turn(self, ladder: _Ladder) -> float | None:
        """Wait out a cool-down another call of the slot was told (within what is left of this ladder's wait
        allowance); the seconds the next call may take, None when the deadline leaves no room for one."""
        left = self._left(ladder.deadline)
        allowance = self.options.rate_limit_wait - ladder.waited
        ladder.waited += self.gate.wait(allowance if left is None else min(left, allowance))
        return self._budget(ladder.deadline)

    def _rung(self, system: str, user: str, schema: type[M], ladder: _Ladder, budget: float) -> M | None:
        """One call of the ladder: the valid answer, or None when the call failed in a way worth retrying
        (the rung spent, or a rate limit waited out). Raises LLMError when retrying cannot help."""
        suffix = ladder.repair or RUNG_SUFFIX[min(ladder.attempt, 3)]
        content = user if not suffix else f"{user}\n\n{suffix}"
        if ladder.reserve is not None:  # before the call: a refusal (LLMBudget) costs nothing and no rung
            assert self.options.max_tokens, "a call under a cap is bounded by max_tokens"
            ladder.reserve(most_prompt_tokens(system, content), self.options.max_tokens)
        started = self.clock.monotonic()
        try:
            with self.gate.in_flight(self._left(ladder.deadline) or budget):
                value = self._call_once(system, content, schema, ladder.usage, budget)
        except _RateLimited as exc:
            self._rate_limited(exc, ladder)
            return None
        except _Retryable as exc:
            self._retryable(exc, ladder)
            return None
        except LLMError as exc:
            self.gate.failed(str(exc))
            exc.usage = ladder.usage
            raise
        finally:  # the waits above count in the call's latency
            ladder.usage.calls += 1
            ladder.usage.latency_ms += int((self.clock.monotonic() - started) * 1000)
        self.gate.answered()
        return value

    def _rate_limited(self, exc: _RateLimited, ladder: _Ladder) -> None:
        """A 429: wait it out without spending a rung while the ladder's wait allowance lasts, else spend one."""
        usage = ladder.usage
        usage.rate_limited += 1
        pause = exc.retry_after or max(self.options.backoff_seconds * 2 ** min(usage.rate_limited - 1, 5), 1.0)
        self.gate.limited(pause, str(exc))
        left = self._left(ladder.deadline)
        if (usage.rate_limited <= MAX_RATE_LIMIT_WAITS and ladder.waited + pause <= self.options.rate_limit_wait
                and (left is None or left - pause >= MIN_CALL_SECONDS)):
            log.warning("LLM rate-limited (%s); waiting %.1fs, no attempt spent", exc, pause)
            ladder.waited += pause
            self.clock.sleep(pause)
            return
        ladder.failures.append(f"call {ladder.attempt + 1}: {exc} "
                               f"(rate-limit wait of {self.options.rate_limit_wait:g}s used up)")
        ladder.attempt += 1

    def _retryable(self, exc: _Retryable, ladder: _Ladder) -> None:
        """A failed call worth retrying: the rung is spent, and the next waits an exponential backoff."""
        self.gate.failed(str(exc))
        ladder.failures.append(f"call {ladder.attempt + 1}: {exc}")
        log.warning("LLM call %d/%d failed: %s", ladder.attempt + 1, self.options.max_retries + 1, exc)
        if ladder.attempt < self.options.max_retries and self.options.backoff_seconds:
            pause = self.options.backoff_seconds * 2**ladder.attempt
            if ladder.deadline is not None:
                pause = min(pause, max(ladder.deadline - self.clock.monotonic(), 0))
            self.clock.sleep(pause)
        ladder.attempt += 1

    def _left(self, deadline: float | None) -> float | None:
        return None if deadline is None else deadline - self.clock.monotonic()

    def _budget(self, deadline: float | None) -> float | None:
        """Seconds this call may take: the per-call timeout, cut to what is left before ``deadline``."""
        if deadline is None:
            return self.options.timeout
        left = deadline - self.clock.monotonic()
        return None if left < MIN_CALL_SECONDS else min(self.options.timeout, left)

    def _call_once(self, system: str, user: str, schema: type[M], usage: Usage, budget: float) -> M:
        response = self._request(system, user, budget)
        usage.answered += 1
        try:
            usage.add(getattr(response, "usage", None), self.clock.now())
            content, finish_reason = _content(response)
        except (TypeError, AttributeError, ValueError, RecursionError) as exc:
            raise _Retryable(f"malformed answer ({exc.__class__.__name__})") from None
        if finish_reason == "length":
            raise _Retryable("answer truncated (finish_reason=length)")
        return _parse(content, schema)

    def _request(self, system: str, user: str, budget: float) -> Any:
        """One chat completion within ``budget`` seconds; a failure raised as retryable or not."""
        openai = _sdk()
        try:
            with http.limits(budget, MAX_ANSWER_BYTES):
                return self._client.chat.completions.create(
                    model=self.model,
                    messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                    response_format={"type": "json_object"},
                    extra_body=self._extra_body(),
                    timeout=budget,
                    **({"max_tokens": self.options.max_tokens} if self.options.max_tokens else {}),
                )
        except openai.APIStatusError as exc:
            raise self._classify(exc) from None
        except openai.APITimeoutError:
            raise _Retryable(f"no complete answer within {budget:.3g}s") from None
        except openai.APIConnectionError as exc:  # the SDK's message says nothing: name what httpx raised
            cause = exc.__cause__
            detail = f"{cause.__class__.__name__}: {str(cause)[:200]}" if cause is not None and str(cause) else (
                exc.__class__.__name__)
            raise _Retryable(f"connection failed: {detail}") from None
        except openai.APIError as exc:  # an answer the SDK could not read
            raise _Retryable(f"unreadable answer: {exc.__class__.__name__}") from None
        except json.JSONDecodeError as exc:  # a body sent as JSON that is none
            raise _Retryable(f"unreadable answer: not JSON ({exc.__class__.__name__})") from None


@dataclass
class _Ladder:
    """Where one ``complete_json`` stands: what it paid, why rungs failed, a valid answer check() questioned."""

    usage: Usage
    deadline: float | None
    reserve: Callable[[int, int], None] | None = None
    failures: list[str] = field(default_factory=list)
    attempt: int = 0
    waited: float = 0.0  # seconds spent waiting out rate limits (no rung spent, capped by rate_limit_wait)
    kept: BaseModel | None = None  # a valid answer that check() questioned
    repair: str | None = None  # what check() asked of it


def _parse(content: str, schema: type[M]) -> M:
    """The answer's text as a valid ``schema`` object; anything else is retryable."""
    if not content.strip():
        raise _Retryable("blank content")
    try:
        data = json.loads(_strip_fence(content))
    except json.JSONDecodeError as exc:
        raise _Retryable(f"not JSON ({exc.msg} at {exc.pos}): {content[:80]!r}") from None
    except RecursionError:
        raise _Retryable("JSON nested too deep") from None
    if not isinstance(data, dict):
        raise _Retryable(f"JSON is a {type(data).__name__}, not an object")
    try:
        return schema.model_validate(storable_json(data))
    except RecursionError:
        raise _Retryable("JSON nested too deep") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:4])
        raise _Retryable(f"schema: {problems}") from None


def _content(response: Any) -> tuple[str, str | None]:
    """The text and finish reason of the first choice; a missing part is a malformed answer (retryable)."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise _Retryable("answer has no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise _Retryable("answer has no message")
    content = getattr(message, "content", None)
    if content is not None and not isinstance(content, str):
        raise _Retryable(f"content is {type(content).__name__}, not text")
    finish_reason = getattr(choice, "finish_reason", None)
    return content or "", finish_reason if isinstance(finish_reason, str) else None


def _strip_fence(content: str) -> str:
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(exc.message)[:300]


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """Seconds from a ``Retry-After`` header (a number; an HTTP date is ignored), capped at 10 minutes."""
    try:
        value = float(exc.response.headers.get("retry-after", ""))
    except (AttributeError, TypeError, ValueError):
        return None
    return min(value, 600.0) if value == value and value > 0 else None
