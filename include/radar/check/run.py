"""``cli check``'s run: the settings as the tasks load them, every area's lines in order, the result kept for
the health panel, the transcript printed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from include.radar import store
from include.radar.check import STATE_KEY, Line, Options, Report, fail, reason
from include.radar.check.channels import push_lines
from include.radar.check.deepseek import deepseek_lines
from include.radar.check.links import link_lines
from include.radar.check.market import market_lines
from include.radar.check.platform import DB, airflow_lines, database_lines
from include.radar.check.werss import werss_lines
from include.radar.core import db, loader, redact
from include.radar.core.settings import Lookup, Settings, SettingsError, load_settings, task_lookup

SETTINGS = "设置"
LINK_SETTINGS = ("link_secret", "report_base_url")  # reported on the links' lines


def load(lookup: Lookup | None = None) -> tuple[Settings, list[SettingsError]]:
    """The settings the tasks would load, read the tasks' way (settings.task_lookup); a refused value is reported
    and its default stands in, so that the other checks still run (a weak link secret must not hide a dead WeRSS)."""
    overrides: dict[str, Any] = {}
    problems: list[SettingsError] = []
    while True:
        try:
            return load_settings(lookup or task_lookup(), **overrides), problems
        except SettingsError as exc:
            if exc.setting is None or exc.setting in overrides:
                raise
            problems.append(exc)
            overrides[exc.setting] = Settings.model_fields[exc.setting].default


def _guarded(area: str, produce: Callable[[], list[Line]]) -> list[Line]:
    """An area's lines; an unexpected error becomes its ✗ line instead of ending the check."""
    try:
        return produce()
    except Exception as exc:
        return [fail(area, "检查", f"{exc.__class__.__name__}: {reason(exc)}", "请报告这个问题：检查本身出错了")]


def run(options: Options, lookup: Lookup | None = None) -> Report:
    read = lookup or task_lookup()
    try:
        settings, problems = load(read)
    except SettingsError as exc:
        return Report([fail(SETTINGS, "读取", reason(exc, 400), "改正它说的那个设置")], options.clock.now())
    lines = [fail(SETTINGS, p.setting or "?", reason(p, 400), "在设置它的地方改正")
             for p in problems if p.setting not in LINK_SETTINGS]
    redact.register(read("link_secret"))  # as typed, even when refused: never printed
    try:
        url = loader.load(settings=settings).database_url  # the tasks' database, its password registered
    except db.DatabaseUnavailable as exc:
        url = None
        lines.append(fail(DB, "可连接", reason(exc, 300), "在 worker 的环境里设置 RADAR_DATABASE_URL（或 radar_db 连接）"))
    found, reachable = database_lines(url, settings, options) if url else ([], False)
    lines += found

    def connect() -> Any:
        return db.connect(url, statement_timeout_s=options.timeout, lock_timeout_s=options.timeout)

    reads = connect if reachable else None
    link_problems = {p.setting: p for p in problems if p.setting in LINK_SETTINGS}
    lines += _guarded("Airflow", lambda: airflow_lines(settings, options))
    lines += _guarded("WeRSS", lambda: werss_lines(settings, options, reads))
    lines += _guarded("DeepSeek", lambda: deepseek_lines(settings, options, reads))
    lines += _guarded("推送", lambda: push_lines(settings, options))
    lines += _guarded("链接", lambda: link_lines(settings, link_problems))
    lines += _guarded("行情数据", lambda: market_lines(settings, options))
    report = Report(lines, options.clock.now())
    if reachable:
        record(connect, report)
    return report


def record(connect: Callable[[], Any], report: Report) -> None:
    """Keep the result for the health panel (service_state, which the pages' login reads)."""
    with connect() as conn:
        store.state.set_state(conn, STATE_KEY, report.as_state(), None)


def main(options: Options, out: Callable[[str], None] = print) -> int:
    # the transcript is the output: the clients' and Airflow's INFO lines (a login, a request) are not
    logging.disable(logging.INFO)
    started = options.clock.shanghai()
    out(f"机会雷达 · 部署检查 {started:%Y-%m-%d %H:%M:%S}（北京时间；每次调用最多 {options.timeout:g} 秒）")
    report = run(options)
    area = None
    for line in report.lines:
        if line.area != area:
            area = line.area
            out("")
        out(line.render())
    out("")
    out(report.summary())
    return report.exit_code
