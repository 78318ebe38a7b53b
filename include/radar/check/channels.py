"""The push channels' lines of the check: each parsed by apprise, one test message each on request."""

from __future__ import annotations

import logging
import re

from include.radar.check import Line, Options, fail, ok, reason, warn
from include.radar.core.settings import Settings
from include.radar.operations import connections
from include.radar.pushes import push

PUSH = "推送"
# what a failed delivery's error says when no HTTP answer came back (the channel was never asked)
UNREACHED = re.compile(r"connection|connect|refused|timed? ?out|name or service|resolve|unreachable|ssl|"
                       r"max retries|remote end closed", re.IGNORECASE)
# apprise's captured log line: "2026-11-27 10:00:00,123 - WARNING - message"
LOG_PREFIX = re.compile(r"^\S+ \S+ - [A-Z]+ - ")


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
    at = options.clock.shanghai()
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
