"""The check's lines for DeepSeek (the key, the model offered, its prices, the budget), the push channels
(parsed by apprise; one test message each on request), the signed links and the market-data source."""

from __future__ import annotations

import ipaddress
import logging
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from include.radar import store
from include.radar.analysis.llm import LLMError, LLMUnreachable
from include.radar.check import Line, Options, bounded, fail, ok, reason, warn
from include.radar.core.settings import MIN_LINK_SECRET_BYTES, Settings, SettingsError
from include.radar.core.slots import SHANGHAI
from include.radar.operations import connections
from include.radar.pushes import push
from include.radar.report import track_record

DEEPSEEK = "DeepSeek"
PUSH = "推送"
LINKS = "链接"
MARKET = "行情数据"
GENERATE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
MODEL_FIX = "把 AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL（或 Variable radar_deepseek_model）设为列表里的一个"
# what a failed delivery's error says when no HTTP answer came back (the channel was never asked)
UNREACHED = re.compile(r"connection|connect|refused|timed? ?out|name or service|resolve|unreachable|ssl|"
                       r"max retries|remote end closed", re.IGNORECASE)
# apprise's captured log line: "2026-11-27 10:00:00,123 - WARNING - message"
LOG_PREFIX = re.compile(r"^\S+ \S+ - [A-Z]+ - ")


class _Pong(BaseModel):
    ok: bool


def deepseek_lines(settings: Settings, options: Options, connect: Callable[[], Any] | None) -> list[Line]:
    conn_id = settings.deepseek_conn_id
    not_made = [warn(DEEPSEEK, "付费调用", "没有调用：上面的检查没有通过", "先修好上面的问题")] if options.llm_call else []
    try:
        client = connections.llm_client(settings, timeout=options.timeout, connections=1)
        models = client.models(options.timeout)
    except LLMUnreachable as exc:
        return [fail(DEEPSEEK, "可达", reason(exc), f"检查本机到该地址的网络（代理、防火墙、DNS），或改正 {conn_id} "
                     "连接的 host（默认 https://api.deepseek.com）"), *not_made]
    except (connections.ConfigurationError, SettingsError) as exc:
        return [fail(DEEPSEEK, "连接配置", reason(exc), f"设置 {conn_id} 连接：host https://api.deepseek.com，password "
                     "是 API key"), *not_made]
    except LLMError as exc:
        return [fail(DEEPSEEK, "密钥", reason(exc), f"改正 {conn_id} 连接的 password（即 API key）；402 是余额不足，"
                     "到 platform.deepseek.com 充值"), *not_made]
    model = settings.deepseek_model
    lines = [ok(DEEPSEEK, "密钥", f"已接受；可用模型 {len(models)} 个")]
    if model not in models:
        lines.append(fail(DEEPSEEK, "模型", f"{model!r} 不在可用列表里（可用：{', '.join(sorted(models)[:6])}）："
                          "每次分析都会失败", MODEL_FIX))
    else:
        lines.append(ok(DEEPSEEK, "模型", f"{model} 可用"))
    lines.append(_prices_line(settings))
    lines.append(_budget_line(settings, connect))
    if options.llm_call:
        lines.append(_paid_call(client, settings, options) if model in models else not_made[0])
    return lines


def _prices_line(settings: Settings) -> Line:
    table = settings.price_table()
    r = table.off_peak
    text = (f"每百万 token（{table.currency}，闲时）：缓存命中 {r.cache_hit:g}，未命中 {r.cache_miss:g}，输出 "
            f"{r.output:g}；高峰 ×{settings.deepseek_peak_multiplier:g}（北京时间 {settings.deepseek_peak_hours}）")
    if table.estimated:
        return warn(DEEPSEEK, "价格", f"{settings.deepseek_model} 没有公布的价格：按已知最贵的模型估算",
                    "把它的闲时价格（JSON）写进 AIRFLOW_VAR_RADAR_DEEPSEEK_PRICES")
    return ok(DEEPSEEK, "价格", text)


def _budget_line(settings: Settings, connect: Callable[[], Any] | None) -> Line:
    spent = ""
    if connect is not None:
        with connect() as conn:
            today = store.day_spend(conn, datetime.now(SHANGHAI).date(), settings.deepseek_currency)
        spent = f"；今天已花 {push_money(today, settings)}"
    if not settings.daily_budget:
        text = f"没有每日预算（daily_budget = 0）：分析从不因花费停下{spent}"
        if settings.demo_mode:
            return ok(DEEPSEEK, "每日预算", text + "（演示：替身不收费）")
        return warn(DEEPSEEK, "每日预算", text, "设置 AIRFLOW_VAR_RADAR_DAILY_BUDGET（单位同 deepseek_currency）")
    return ok(DEEPSEEK, "每日预算", f"每天 {push_money(settings.daily_budget, settings)}{spent}")


def push_money(amount: float, settings: Settings) -> str:
    return settings.price_table().money(amount)


def _paid_call(client: Any, settings: Settings, options: Options) -> Line:
    """One small completion (``--llm-call``): the model answers JSON as the analyses ask it to."""
    started = time.monotonic()
    try:
        answer = client.complete_json("Answer in json only.", 'Reply with the json {"ok": true}.', _Pong,
                                      deadline=started + options.timeout * 3)
    except LLMError as exc:
        return fail(DEEPSEEK, "付费调用", reason(exc), "看上面 DeepSeek 的错误；HTTP 402 是余额不足")
    cost = answer.usage.cost(settings.price_table())
    return ok(DEEPSEEK, "付费调用", f"{time.monotonic() - started:.1f} 秒内答出 JSON，花费 {push_money(cost, settings)}")


# ------------------------------------------------------------------------------------------------ push


def push_lines(settings: Settings, options: Options) -> list[Line]:
    reader = connections.channels(settings.push_conn_id)
    ops = connections.channels(settings.ops_push_conn_id)
    lines: list[Line] = []
    if not reader:
        lines.append(fail(PUSH, "读者通道", f"没有：连接 {settings.push_conn_id!r} 不存在或没有 URL",
                          f"在 {settings.push_conn_id} 连接的 extra.urls 里填 apprise URL"))
    if not ops:
        text = f"没有（{settings.ops_push_conn_id}）：运维告警发到读者的通道，标题带「运维」"
        lines.append(ok(PUSH, "运维通道", text) if settings.demo_mode else
                     warn(PUSH, "运维通道", text, f"在 {settings.ops_push_conn_id} 连接的 extra.urls 里填 apprise URL，"
                          "把告警和读者的推送分开"))
    for who, found in (("读者", reader), ("运维", ops)):
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
        return fail(PUSH, name, "不是有效的 apprise URL", "改正它（https://github.com/caronc/apprise/wiki 列出每种服务"
                    "的 URL 写法）")
    if not options.send_test:
        return ok(PUSH, name, "apprise 能解析（加 --send-test 发一条测试消息）")
    at = datetime.now(SHANGHAI)
    error = push.send_one(channel, "机会雷达：连接测试", f"cli check 于 {at:%Y-%m-%d %H:%M} 发送的测试消息，无需处理。")
    if error:
        said = delivery_error(error, channel.label)
        if UNREACHED.search(said):
            return fail(PUSH, name, f"测试消息没有送达，连不上该服务：{said}", "检查本机到该服务的网络（代理、防火墙、DNS）")
        return fail(PUSH, name, f"测试消息没有送达：{said}", "该服务拒绝了消息：核对 URL 里的 token / key 与服务的说明")
    return ok(PUSH, name, "测试消息已送达")


def delivery_error(error: str, label: str) -> str:
    """A failed delivery in one short line: apprise's last log message, without its time and level prefix."""
    lines = [LOG_PREFIX.sub("", part.strip()) for part in error.removeprefix(f"{label}: ").split(" / ")]
    said = next((x for x in reversed(lines) if x), "delivery failed")
    return reason(Exception(said), 200)


# ----------------------------------------------------------------------------------------------- links


def link_lines(settings: Settings, problems: dict[str, SettingsError]) -> list[Line]:
    """The link secret and the base URL (each of ``problems`` when the settings refused it), the lifetime."""
    secret, base = problems.get("link_secret"), problems.get("report_base_url")
    if secret is not None:
        lines = [fail(LINKS, "签名密钥", reason(secret, 400).split(": ", 1)[-1], f"把 AIRFLOW_VAR_RADAR_LINK_SECRET "
                      f"设为至少 {MIN_LINK_SECRET_BYTES} 字节的随机串：{GENERATE}")]
    elif settings.link_secret is None:
        lines = [warn(LINKS, "签名密钥", "没有设置：推送的链接要先登录 Airflow 才能打开",
                      f"设置 AIRFLOW_VAR_RADAR_LINK_SECRET：{GENERATE}")]
    else:
        size = len(settings.link_secret.get_secret_value().encode())
        lines = [ok(LINKS, "签名密钥", f"{size} 字节（至少 {MIN_LINK_SECRET_BYTES}）")]
    if base is not None:
        lines.append(fail(LINKS, "report_base_url", reason(base, 300).split(": ", 1)[-1], BASE_URL_FIX))
    else:
        lines.append(_base_url_line(settings.report_base_url, settings.demo_mode))
    session = (f"；头 24 小时内链接还会开一个 {settings.link_session_minutes} 分钟的只读会话（只能看，不能投票）"
               if settings.link_session_minutes else "；链接只打开它自己那一页（没有只读会话）")
    lines.append(ok(LINKS, "有效期", f"签名链接 {settings.remember_me_days} 天内有效{session}"))
    return lines


BASE_URL_FIX = ("用 https 反向代理对外提供页面（见部署指南的 TLS 一节），把 AIRFLOW_VAR_RADAR_REPORT_BASE_URL 设为手机能打开的 "
                "https 地址，如 https://radar.example.com/radar")


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _base_url_line(url: str, demo: bool) -> Line:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme != "https" and not _loopback(host):
        return fail(LINKS, "report_base_url", f"{url} 是明文 http，且不在本机：签名链接（凭据）会明文传输", BASE_URL_FIX)
    if _loopback(host):
        text = f"{url} 是本机地址：推送里的链接只在这台机器上能打开，手机打不开"
        if demo:
            return ok(LINKS, "report_base_url", text + "（演示）")
        return warn(LINKS, "report_base_url", text, BASE_URL_FIX)
    return ok(LINKS, "report_base_url", url)


# ---------------------------------------------------------------------------------------------- market


def market_lines(settings: Settings, options: Options) -> list[Line]:
    if settings.market_data_source == "recorded":
        text = f"录制的回答（{settings.market_data_recorded_dir or '没有目录'}）：不是真实行情"
        if not settings.market_data_recorded_dir:
            return [fail(MARKET, "来源", text, "设置 market_data_recorded_dir，或 market_data_source=akshare")]
        if settings.demo_mode:
            return [ok(MARKET, "来源", text + "（演示数据）")]
        return [warn(MARKET, "来源", text, "设置 AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE=akshare 取真实行情")]
    quick = settings.model_copy(update={"market_data_timeout_seconds": options.timeout})
    started = time.monotonic()
    try:
        days = bounded(lambda: track_record.source_from(quick)().calendar(), options.timeout + 1, "akshare")
    except Exception as exc:  # only the track record needs it, and it retries the next day: a warning
        return [warn(MARKET, "akshare", f"没有回答：{reason(exc, 160)}；只影响战绩，次日自动重试",
                     "检查本机到 akshare 数据源（新浪、东方财富）的网络")]
    last = max(days).isoformat() if days else "无"
    return [ok(MARKET, "akshare", f"{time.monotonic() - started:.1f} 秒读到交易日历（{len(days)} 天，最后一天 {last}）")]
