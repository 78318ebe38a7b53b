"""The market data's line of the check: one bounded read of the trading calendar from akshare."""

from __future__ import annotations

from include.radar.check import Line, Options, bounded, fail, ok, reason, warn
from include.radar.core.settings import Settings
from include.radar.report import track_record

MARKET = "行情数据"


def market_lines(settings: Settings, options: Options) -> list[Line]:
    if settings.market_data_source == "recorded":
        text = f"录制的回答（{settings.market_data_recorded_dir or '没有目录'}）：不是真实行情"
        if not settings.market_data_recorded_dir:
            return [fail(MARKET, "来源", text, "设置 market_data_recorded_dir，或 market_data_source=akshare")]
        if settings.demo_mode:
            return [ok(MARKET, "来源", text + "（演示数据）")]
        return [warn(MARKET, "来源", text, "设置 AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE=akshare 取真实行情")]
    quick = settings.model_copy(update={"market_data_timeout_seconds": options.timeout})
    started = options.clock.monotonic()
    try:
        days = bounded(lambda: track_record.source_from(quick)().calendar(), options.timeout + 1, "akshare")
    except Exception as exc:  # only the track record needs it, and it retries the next day: a warning
        return [warn(MARKET, "akshare", f"没有回答：{reason(exc, 160)}；只影响战绩，次日自动重试",
                     "检查本机到 akshare 数据源（新浪、东方财富）的网络")]
    last = max(days).isoformat() if days else "无"
    return [ok(MARKET, "akshare", f"{options.clock.monotonic() - started:.1f} 秒读到交易日历（{len(days)} 天，最后一天 {last}）")]
