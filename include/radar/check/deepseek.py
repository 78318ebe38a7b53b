"""DeepSeek's lines of the check: the key, the model offered, its prices, the budget, one paid call on request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from include.radar import store
from include.radar.analysis.llm import LLMError, LLMNotTheApi, LLMUnreachable
from include.radar.check import Line, Options, fail, ok, reason, warn
from include.radar.core.settings import Settings, SettingsError
from include.radar.operations import connections

DEEPSEEK = "DeepSeek"
MODEL_FIX = "把 AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL（或 Variable radar_deepseek_model）设为列表里的一个"


class _Pong(BaseModel):
    ok: bool


def deepseek_lines(settings: Settings, options: Options, connect: Callable[[], Any] | None) -> list[Line]:
    conn_id = settings.deepseek_conn_id
    not_made = [warn(DEEPSEEK, "付费调用", "没有调用：上面的检查没有通过", "先修好上面的问题")] if options.llm_call else []
    try:
        client = connections.llm_client(settings, timeout=options.timeout, connections=1, clock=options.clock)
        models = client.models(options.timeout)
    except LLMUnreachable as exc:
        return [fail(DEEPSEEK, "可达", reason(exc), f"检查本机到该地址的网络（代理、防火墙、DNS），或改正 {conn_id} "
                     "连接的 host（默认 https://api.deepseek.com）"), *not_made]
    except LLMNotTheApi as exc:
        return [fail(DEEPSEEK, "可达", reason(exc), f"该地址有回答，但不是 DeepSeek 的 API：改正 {conn_id} 连接的 host"
                     "（默认 https://api.deepseek.com；自建的兼容服务写到它的 API 根，常以 /v1 结尾）"), *not_made]
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
    lines.append(_budget_line(settings, connect, options))
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


def _budget_line(settings: Settings, connect: Callable[[], Any] | None, options: Options) -> Line:
    spent = ""
    if connect is not None:
        with connect() as conn:
            today = store.operations.day_spend(conn, options.clock.today(), settings.deepseek_currency)
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
    started = options.clock.monotonic()
    try:
        answer = client.complete_json("Answer in json only.", 'Reply with the json {"ok": true}.', _Pong,
                                      deadline=started + options.timeout * 3)
    except LLMError as exc:
        return fail(DEEPSEEK, "付费调用", reason(exc), "看上面 DeepSeek 的错误；HTTP 402 是余额不足")
    cost = answer.usage.cost(settings.price_table())
    return ok(DEEPSEEK, "付费调用", f"{options.clock.monotonic() - started:.1f} 秒内答出 JSON，花费 {push_money(cost, settings)}")
