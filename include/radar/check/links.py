"""The signed links' lines of the check: the link secret, the base URL a phone opens, the links' lifetime."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from include.radar.check import Line, fail, ok, reason, warn
from include.radar.core.settings import MIN_LINK_SECRET_BYTES, Settings, SettingsError

LINKS = "链接"
GENERATE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


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


def _example(host: str) -> bool:
    """A name reserved for documentation (RFC 2606, 6761): an example file's value left as it was."""
    return host in ("example.com", "example.net", "example.org") or host.endswith(
        (".example.com", ".example.net", ".example.org", ".example", ".test", ".invalid"))


def _base_url_line(url: str, demo: bool) -> Line:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme != "https" and not _loopback(host):
        return fail(LINKS, "report_base_url", f"{url} 是明文 http，且不在本机：签名链接（凭据）会明文传输", BASE_URL_FIX)
    if _example(host):
        return warn(LINKS, "report_base_url", f"{url} 是示例地址（{host} 留作文档之用，不会解析到你的主机）：推送里的链接"
                    "谁也打不开", BASE_URL_FIX.replace("，如 https://radar.example.com/radar", "（你自己的域名）"))
    if _loopback(host):
        text = f"{url} 是本机地址：推送里的链接只在这台机器上能打开，手机打不开"
        if demo:
            return ok(LINKS, "report_base_url", text + "（演示）")
        return warn(LINKS, "report_base_url", text, BASE_URL_FIX)
    return ok(LINKS, "report_base_url", url)
