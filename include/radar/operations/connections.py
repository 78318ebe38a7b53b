"""The outside world built from the Airflow connections: the WeRSS client, the DeepSeek client, the push channels.

One reader for the slot's steps (through runtime.py) and for ``cli check`` alike, so that what ``check`` tries
is what the tasks will use: the same connection ids, the same secret checks, the same base URLs. Every secret
read here is registered with redact.py before anything can print it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from include.radar.core import redact
from include.radar.core.clock import SYSTEM, Clock
from include.radar.core.connection_info import ConnectionInfo, get_connection
from include.radar.core.settings import Settings, check_secret
from include.radar.operations import alerts
from include.radar.pushes import push

if TYPE_CHECKING:
    from include.radar.analysis.llm import LLMClient, RateGate
    from include.radar.collect.werss import TokenCache, WeRSSClient

DEEPSEEK_URL = "https://api.deepseek.com"


class ConfigurationError(RuntimeError):
    """A connection or parameter is missing or wrong; retrying cannot help."""


def werss_client(settings: Settings, *, token_cache: TokenCache | None = None, timeout: float | None = None,
                 max_retries: int | None = None, clock: Clock = SYSTEM) -> WeRSSClient:
    """The WeRSS client of the connection ``werss_conn_id``: AK/SK from its extra when set, else its login.
    ``timeout`` and ``max_retries`` override the settings' and the connection's (``check`` tries once)."""
    from include.radar.collect.werss import Credentials, WeRSSClient

    conn = required(settings.werss_conn_id, "WeRSS")
    extra = conn.extra or {}
    where = f"connection {settings.werss_conn_id!r}:"
    password = check_secret(conn.password, f"{where} password", header=False)
    access_key = check_secret(extra.get("access_key"), f"{where} extra access_key")
    secret_key = check_secret(extra.get("secret_key"), f"{where} extra secret_key")
    redact.register(password, access_key, secret_key)
    return WeRSSClient(
        base_url(conn),
        Credentials(conn.login, password, access_key, secret_key),
        timeout=settings.werss_timeout_seconds if timeout is None else timeout,
        max_retries=int(extra.get("max_retries", 3)) if max_retries is None else max_retries,
        backoff_seconds=float(extra.get("backoff_seconds", 1.0)),
        token_cache=token_cache,
        clock=clock,
    )


@dataclass(frozen=True)
class Setup:
    """Who answers and how: a model on an OpenAI-compatible connection (the slots' from the settings, an
    evaluation's from its candidate). ``whose``, ``name`` and ``model_fix`` are what the errors say: whose
    connection, whose endpoint, and which option chooses the model."""

    conn_id: str
    model: str
    thinking: bool
    reasoning_effort: str | None
    whose: str = "DeepSeek"
    name: str = "DeepSeek"
    model_fix: str = ("set AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL (or the Variable radar_deepseek_model) to a current "
                      "model such as deepseek-v4-pro or deepseek-flash")
    # https only, but on this machine's loopback: a candidate's endpoint is any host a user typed; the slots' own
    # may be a proxy on a private network (compose's), which the deployment chose
    https_only: bool = False


def configured(settings: Settings) -> Setup:
    """The set-up the slots analyse with."""
    return Setup(settings.deepseek_conn_id, settings.deepseek_model, settings.deepseek_thinking,
                 settings.deepseek_reasoning_effort)


def llm_client(settings: Settings, gate: RateGate | None = None, *, connections: int = 20,
               timeout: float | None = None, setup: Setup | None = None, clock: Clock = SYSTEM) -> LLMClient:
    """The client of ``setup`` (the configured one by default) on its connection (its password, or extra
    ``api_key``); a host without a scheme is https (http on loopback); no host is DeepSeek's for the slots' own
    connection only, refused for any other."""
    from include.radar.analysis.llm import LLMClient, LLMOptions

    s, use = settings, setup or configured(settings)
    conn = get_connection(use.conn_id)
    if conn is None:
        raise ConfigurationError(f"the {use.whose} connection {use.conn_id!r} is missing")
    extra = conn.extra or {}
    api_key = check_secret(conn.password or extra.get("api_key"), f"the {use.whose} API key (connection {use.conn_id!r})")
    redact.register(api_key)
    options = LLMOptions(
        thinking=use.thinking,
        reasoning_effort=use.reasoning_effort if use.thinking else None,
        timeout=s.deepseek_timeout_seconds if timeout is None else timeout,
        max_retries=s.deepseek_max_retries,
        backoff_seconds=float(extra.get("backoff_seconds", 2.0)),
        max_tokens=s.deepseek_max_tokens,
        rate_limit_wait=s.deepseek_rate_limit_wait_seconds,
        max_connections=connections,
        conn_id=use.conn_id,
        name=use.name,
        model_fix=use.model_fix,
    )
    if not conn.host and use.conn_id != s.deepseek_conn_id:  # DeepSeek by default: the slots' own connection only
        raise ConfigurationError(f"the {use.whose} connection {use.conn_id!r} names no host: its key is sent to "
                                 "none but the host it names (https://api.deepseek.com for DeepSeek)")
    base_url = llm_url(conn, use.conn_id, https_only=use.https_only) if conn.host else DEEPSEEK_URL
    return LLMClient(base_url=base_url, api_key=api_key or "", model=use.model, options=options, gate=gate, clock=clock)


def llm_url(conn: ConnectionInfo, conn_id: str, *, https_only: bool = True) -> str:
    """The base URL of an LLM connection, which carries its API key: a host without a scheme is https (http on
    loopback); any scheme but http(s) refused, and with ``https_only`` plain http to anything but loopback."""
    host = (conn.host or "").strip().rstrip("/")
    if "://" not in host:
        host = f"{'http' if _loopback(host.split('/', 1)[0].rsplit(':', 1)[0]) else 'https'}://{host}"
    parts = urlsplit(host)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigurationError(f"the connection {conn_id!r}: host {conn.host!r} is not an https URL")
    if https_only and parts.scheme == "http" and not _loopback(parts.hostname):
        raise ConfigurationError(f"the connection {conn_id!r}: http://{parts.hostname} would send the API key in "
                                 "clear; use https (plain http is only for a stand-in on this machine's loopback)")
    if conn.port and parts.port is None:
        host = f"{host.split('://', 1)[0]}://{parts.netloc}:{conn.port}{parts.path}"
    return host


def _loopback(hostname: str) -> bool:
    name = hostname.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


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
