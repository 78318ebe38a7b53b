"""The check's lines for DeepSeek (the key, the model offered, its prices, the budget), the push channels
(parsed by apprise; one test message each on request), the signed links and the market-data source."""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from include.radar import connections, push, store, track_record
from include.radar.check import Line, Options, bounded, fail, ok, reason, warn
from include.radar.llm import LLMError
from include.radar.settings import MIN_LINK_SECRET_BYTES, Settings, SettingsError
from include.radar.slots import SHANGHAI

DEEPSEEK = "DeepSeek"
PUSH = "push"
LINKS = "links"
MARKET = "market data"
GENERATE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
MODEL_FIX = "set AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL (or the Variable radar_deepseek_model) to one the list offers"


class _Pong(BaseModel):
    ok: bool


def deepseek_lines(settings: Settings, options: Options, connect: Callable[[], Any] | None) -> list[Line]:
    try:
        client = connections.llm_client(settings, timeout=options.timeout, connections=1)
        models = client.models(options.timeout)
    except (connections.ConfigurationError, SettingsError, LLMError) as exc:
        return [fail(DEEPSEEK, "key", reason(exc), f"check the {settings.deepseek_conn_id} connection (its password "
                     "is the API key) and DeepSeek's status")]
    model = settings.deepseek_model
    lines = [ok(DEEPSEEK, "key", f"accepted; {len(models)} model(s) offered")]
    if model not in models:
        lines.append(fail(DEEPSEEK, "model", f"{model!r} is not offered (offered: {', '.join(sorted(models)[:6])}): "
                          "every analysis would fail", MODEL_FIX))
    else:
        lines.append(ok(DEEPSEEK, "model", f"{model} offered"))
    lines.append(_prices_line(settings))
    lines.append(_budget_line(settings, connect))
    if options.llm_call and model in models:
        lines.append(_paid_call(client, settings, options))
    return lines


def _prices_line(settings: Settings) -> Line:
    table = settings.price_table()
    r = table.off_peak
    text = (f"{table.currency} per million tokens off-peak: cache hit {r.cache_hit:g}, miss {r.cache_miss:g}, output "
            f"{r.output:g}; peak ×{settings.deepseek_peak_multiplier:g} ({settings.deepseek_peak_hours} Beijing)")
    if table.estimated:
        return warn(DEEPSEEK, "prices", f"no published price for {settings.deepseek_model}: estimated as the dearest "
                    "known model", "set AIRFLOW_VAR_RADAR_DEEPSEEK_PRICES to its off-peak prices (JSON)")
    return ok(DEEPSEEK, "prices", text)


def _budget_line(settings: Settings, connect: Callable[[], Any] | None) -> Line:
    spent = ""
    if connect is not None:
        with connect() as conn:
            today = store.day_spend(conn, datetime.now(SHANGHAI).date(), settings.deepseek_currency)
        spent = f"; spent today {push_money(today, settings)}"
    if not settings.daily_budget:
        text = f"no daily budget (daily_budget = 0): analyses never stop for cost{spent}"
        if settings.demo_mode:
            return ok(DEEPSEEK, "daily budget", text + " (demo: the stand-in costs nothing)")
        return warn(DEEPSEEK, "daily budget", text, "set AIRFLOW_VAR_RADAR_DAILY_BUDGET (in deepseek_currency)")
    return ok(DEEPSEEK, "daily budget", f"{push_money(settings.daily_budget, settings)} a day{spent}")


def push_money(amount: float, settings: Settings) -> str:
    return settings.price_table().money(amount)


def _paid_call(client: Any, settings: Settings, options: Options) -> Line:
    """One small completion (``--llm-call``): the model answers JSON as the analyses ask it to."""
    started = time.monotonic()
    try:
        answer = client.complete_json("Answer in json only.", 'Reply with the json {"ok": true}.', _Pong,
                                      deadline=started + options.timeout * 3)
    except LLMError as exc:
        return fail(DEEPSEEK, "paid call", reason(exc), "see DeepSeek's error above; check the balance (HTTP 402)")
    cost = answer.usage.cost(settings.price_table())
    return ok(DEEPSEEK, "paid call", f"answered JSON in {time.monotonic() - started:.1f}s for "
              f"{push_money(cost, settings)}")


# ------------------------------------------------------------------------------------------------ push


def push_lines(settings: Settings, options: Options) -> list[Line]:
    reader = connections.channels(settings.push_conn_id)
    ops = connections.channels(settings.ops_push_conn_id)
    lines: list[Line] = []
    if not reader:
        lines.append(fail(PUSH, "reader's channels", f"none: the connection {settings.push_conn_id!r} is missing or "
                          "holds no URL", f"add apprise URLs to {settings.push_conn_id} (extra.urls)"))
    if not ops:
        text = f"none ({settings.ops_push_conn_id}): alerts go to the reader's channels, titled 运维"
        lines.append(ok(PUSH, "operator's channels", text) if settings.demo_mode else
                     warn(PUSH, "operator's channels", text, f"add apprise URLs to {settings.ops_push_conn_id} "
                          "(extra.urls) to keep alerts apart"))
    for who, found in (("reader", reader), ("operator", ops)):
        for channel in found:
            lines.append(_channel_line(who, channel, options))
    return lines


def _parses(channel: push.Channel) -> bool:
    import apprise

    with apprise.LogCapture(level=logging.INFO):  # its lines name the URL: kept out of the output
        return apprise.Apprise.instantiate(channel.url, suppress_exceptions=True) is not None


def _channel_line(who: str, channel: push.Channel, options: Options) -> Line:
    name = f"{who} {channel.label}"
    if not _parses(channel):
        return fail(PUSH, name, "not a valid apprise URL", "correct it (https://github.com/caronc/apprise/wiki "
                    "lists each service's URL form)")
    if not options.send_test:
        return ok(PUSH, name, "parsed by apprise (--send-test sends one test message)")
    at = datetime.now(SHANGHAI)
    error = push.send_one(channel, "机会雷达：连接测试", f"cli check 于 {at:%Y-%m-%d %H:%M} 发送的测试消息，无需处理。")
    if error:
        return fail(PUSH, name, f"test message not delivered: {reason(Exception(error))}",
                    "check the URL's token and the service's answer")
    return ok(PUSH, name, "test message delivered")


# ----------------------------------------------------------------------------------------------- links


def link_lines(settings: Settings, problem: SettingsError | None) -> list[Line]:
    """The link secret (``problem``: the settings refused it), the base URL, the links' lifetime."""
    if problem is not None:
        lines = [fail(LINKS, "link secret strength", reason(problem, 400).split(": ", 1)[-1], f"set AIRFLOW_VAR_RADAR_LINK_SECRET "
                      f"to at least {MIN_LINK_SECRET_BYTES} random bytes: {GENERATE}")]
    elif settings.link_secret is None:
        lines = [warn(LINKS, "link secret strength", "not set: pushed links open only after an Airflow login",
                      f"set AIRFLOW_VAR_RADAR_LINK_SECRET: {GENERATE}")]
    else:
        size = len(settings.link_secret.get_secret_value().encode())
        lines = [ok(LINKS, "link secret strength", f"{size} bytes (at least {MIN_LINK_SECRET_BYTES})")]
    lines.append(_base_url_line(settings.report_base_url))
    session = (f"; in its first 24 h a link also opens a {settings.link_session_minutes}-min read session (reading "
               "only, no votes)" if settings.link_session_minutes else "; a link opens its own page only (no read session)")
    lines.append(ok(LINKS, "lifetime", f"signed links are valid {settings.remember_me_days} days{session}"))
    return lines


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _base_url_line(url: str) -> Line:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme != "https" and not _loopback(host):
        return fail(LINKS, "report_base_url", f"{url} is plain http on a host other than this machine: signed links "
                    "(bearer credentials) would travel in clear", "serve the pages over https and set "
                    "AIRFLOW_VAR_RADAR_REPORT_BASE_URL to the https address")
    note = "" if parts.scheme == "https" else " (loopback: reachable from this machine only)"
    return ok(LINKS, "report_base_url", url + note)


# ---------------------------------------------------------------------------------------------- market


def market_lines(settings: Settings, options: Options) -> list[Line]:
    if settings.market_data_source == "recorded":
        text = f"recorded answers from {settings.market_data_recorded_dir or '(no directory)'}: not the market"
        if not settings.market_data_recorded_dir:
            return [fail(MARKET, "source", text, "set market_data_recorded_dir, or market_data_source=akshare")]
        if settings.demo_mode:
            return [ok(MARKET, "source", text + " (demo data)")]
        return [warn(MARKET, "source", text, "set AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE=akshare for real prices")]
    quick = settings.model_copy(update={"market_data_timeout_seconds": options.timeout})
    started = time.monotonic()
    try:
        days = bounded(lambda: track_record.source_from(quick)().calendar(), options.timeout + 1, "akshare")
    except Exception as exc:
        return [fail(MARKET, "akshare", f"no answer: {reason(exc, 160)}", "check this host's access to the "
                     "akshare sources (Sina, East Money); the track record retries the next day")]
    last = max(days).isoformat() if days else "none"
    return [ok(MARKET, "akshare", f"trading calendar read in {time.monotonic() - started:.1f}s "
               f"({len(days)} days, the last {last})")]
