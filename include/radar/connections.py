"""The outside world built from the Airflow connections: the WeRSS client, the DeepSeek client, the push channels.

One reader for the slot's steps (through runtime.py) and for ``cli check`` alike, so that what ``check`` tries
is what the tasks will use: the same connection ids, the same secret checks, the same base URLs. Every secret
read here is registered with redact.py before anything can print it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from include.radar import alerts, push, redact
from include.radar.settings import ConnectionInfo, Settings, check_secret, get_connection

if TYPE_CHECKING:
    from include.radar.llm import LLMClient, RateGate
    from include.radar.werss import TokenCache, WeRSSClient

DEEPSEEK_URL = "https://api.deepseek.com"


class ConfigurationError(RuntimeError):
    """A connection or parameter is missing or wrong; retrying cannot help."""


def werss_client(settings: Settings, *, token_cache: TokenCache | None = None, timeout: float | None = None,
                 max_retries: int | None = None) -> WeRSSClient:
    """The WeRSS client of the connection ``werss_conn_id``: AK/SK from its extra when set, else its login.
    ``timeout`` and ``max_retries`` override the settings' and the connection's (``check`` tries once)."""
    from include.radar.werss import WeRSSClient

    conn = required(settings.werss_conn_id, "WeRSS")
    extra = conn.extra or {}
    where = f"connection {settings.werss_conn_id!r}:"
    password = check_secret(conn.password, f"{where} password", header=False)
    access_key = check_secret(extra.get("access_key"), f"{where} extra access_key")
    secret_key = check_secret(extra.get("secret_key"), f"{where} extra secret_key")
    redact.register(password, access_key, secret_key)
    return WeRSSClient(
        base_url(conn),
        username=conn.login,
        password=password,
        access_key=access_key,
        secret_key=secret_key,
        timeout=settings.werss_timeout_seconds if timeout is None else timeout,
        max_retries=int(extra.get("max_retries", 3)) if max_retries is None else max_retries,
        backoff_seconds=float(extra.get("backoff_seconds", 1.0)),
        token_cache=token_cache,
    )


def llm_client(settings: Settings, gate: RateGate | None = None, *, connections: int = 20,
               timeout: float | None = None) -> LLMClient:
    """The DeepSeek client of the connection ``deepseek_conn_id`` (its password, or extra ``api_key``)."""
    from include.radar.llm import LLMClient

    conn = get_connection(settings.deepseek_conn_id)
    if conn is None:
        raise ConfigurationError(f"the DeepSeek connection {settings.deepseek_conn_id!r} is missing")
    extra = conn.extra or {}
    s = settings
    api_key = check_secret(conn.password or extra.get("api_key"), f"the DeepSeek API key (connection {s.deepseek_conn_id!r})")
    redact.register(api_key)
    return LLMClient(
        base_url=base_url(conn) if conn.host else DEEPSEEK_URL,
        api_key=api_key or "",
        model=s.deepseek_model,
        thinking=s.deepseek_thinking,
        reasoning_effort=s.deepseek_reasoning_effort,
        timeout=s.deepseek_timeout_seconds if timeout is None else timeout,
        max_retries=s.deepseek_max_retries,
        backoff_seconds=float(extra.get("backoff_seconds", 2.0)),
        max_tokens=s.deepseek_max_tokens,
        rate_limit_wait=s.deepseek_rate_limit_wait_seconds,
        gate=gate,
        max_connections=connections,
    )


def channels(conn_id: str) -> list[push.Channel]:
    """The apprise URLs of a push connection: extra ``urls``, else its password, else its host; [] without it."""
    conn = get_connection(conn_id)
    if conn is None:
        return []
    urls = push.parse_urls((conn.extra or {}).get("urls")) or push.parse_urls(conn.password) or push.parse_urls(conn.host)
    found = push.channels_from(urls)
    for channel in found:
        redact.register(*push.secret_parts(channel, min_chars=10))
    return found


def operator_channels(settings: Settings) -> tuple[list[push.Channel], bool]:
    """The operator's channels, or the reader's (then True: alerts are prefixed) when none is configured."""
    return alerts.operator_channels(channels(settings.ops_push_conn_id), channels(settings.push_conn_id))


def required(conn_id: str, what: str) -> ConnectionInfo:
    conn = get_connection(conn_id)
    if conn is None or not conn.host:
        raise ConfigurationError(f"the {what} connection {conn_id!r} is missing or has no host")
    return conn


def base_url(conn: ConnectionInfo) -> str:
    host = (conn.host or "").rstrip("/")
    if "://" not in host:
        host = f"http://{host}"
    if conn.port and host.count(":") < 2:
        host = f"{host}:{conn.port}"
    return host
