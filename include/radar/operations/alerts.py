"""Operator alerts: what is wrong with the radar, told once per cause and day, never with a secret.

Alerts go to the ``radar_ops_push`` connection's channels (without it, to the reader's, titled 「运维」, without
their detail). Each cause is recorded in ``operator_alert`` (unique per Shanghai day and cause) and delivered
through the notification log (``push_type='alert'``), so reruns, retries and other workers send nothing more; a failed
delivery is retried by the next occurrence; raising never fails the step. Causes are raised where they are
seen: in the steps (a refused WeRSS login, a 429 streak, failed analyses, the budget, a slot that never ran),
by the ``AlertNotifier`` on task failures and by the daily run's Deadline Alert.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from include.radar import store
from include.radar.core import redact
from include.radar.core.slots import SHANGHAI
from include.radar.pushes import push
from include.radar.pushes.message import Message

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Cause:
    title: str
    action: str  # what the operator should do, one line


CAUSES: dict[str, Cause] = {
    "werss_auth": Cause(
        "WeRSS 授权失效", "登录 WeRSS 检查账号密码或 AK/SK，必要时重新扫码授权公众号；修好后清除失败的 ingest 任务重跑"),
    "wechat_login_expiring": Cause(
        "WeRSS 的微信登录即将过期", "到期前在 WeRSS 后台扫码重新登录微信公众平台；过期后 WeRSS 会静默停止采集"),
    "wechat_login_expired": Cause(
        "WeRSS 的微信登录已过期", "在 WeRSS 后台扫码重新登录微信公众平台；过期期间的新文章要等登录后 WeRSS 补采，72 小时内的雷达照常分析"),
    "wechat_not_scanned": Cause(
        "WeRSS 还没有扫码登录微信", "打开 WeRSS → 扫码授权，用微信扫码并在手机上确认；登录之前 WeRSS 采集不到任何文章"),
    "werss_not_collecting": Cause(
        "WeRSS 没有在采集", "运行 python -m include.radar.cli check：它逐项检查微信登录、采集任务（含「应用」）与 WeRSS 的定时"
        "采集是否运行"),
    "werss_stale": Cause(
        "公众号长时间没有新文章", "在 WeRSS 中检查这些公众号的抓取状态（授权、限流、被封），或确认它们确实停更"),
    "deepseek": Cause(
        "DeepSeek 调用异常", "查看 DeepSeek 控制台的余额、限流和模型名（deepseek_model）；失败的文章会在后续时段重试"),
    "budget": Cause(
        "今日 LLM 预算已用尽", "其余文章顺延到次日分析；如需今天完成，提高 daily_budget 后重跑本时段"),
    "daily_undelivered": Cause(
        "22:00 日报未按时送达", "查看 push_daily_report 的日志与推送通道；修好后清除该任务重推（不会重复发送）"),
    "scheduler_silent": Cause(
        "有时段没有运行", "检查 Airflow 调度器与 DAG 是否暂停；需要时用 run_date + slot 手动补跑"),
    "market_data": Cause(
        "行情数据源请求失败", "战绩的行情次日自动重试；连续几天失败时检查网络与 akshare 版本（其接口随网页改版而变）"),
    "task_failed": Cause(
        "任务失败", "打开链接中的 Airflow 运行查看任务日志；修好原因后清除失败的任务"),
    "push_unknown": Cause(
        "推送结果未知", "发送已开始但发送进程中断，没有记录结果，系统不会自动重发：到对应通道确认是否收到；"
        "没收到可用「强制推送」重推该时段"),
    "rules_slow": Cause(
        "读者的正则规则太慢", "超出时间预算的文章留给下个时段（规则检查前不分析）：在关注设置中删去或简化详情里所说的正则规则"
        "（保存时会重新测量）"),
    "push_undelivered": Cause(
        "推送未能补发", "发送进程中断后补发失败或无法补发（见详情）：检查推送通道配置；需要时用「强制推送」重推该时段"),
}


SHARED_DETAIL = "详情只发往运维通道（radar_ops_push，未配置）：登录 Airflow 后在机会雷达的总览页查看"


def operator_channels(ops: list[push.Channel], reader: list[push.Channel]) -> tuple[list[push.Channel], bool]:
    """The channels alerts go to, and whether they are the reader's (then titles say 运维)."""
    return (ops, False) if ops else (reader, True)


def raise_alert(
    connect: Callable[[], Any],
    channels: Callable[[], tuple[list[push.Channel], bool]],
    *,
    cause: str,
    detail: str,
    link: str,
    slot_run_id: int | None = None,
    dag_run_id: str | None = None,
    now: datetime,
) -> str:
    """Record ``cause`` for today and deliver it unless it already was. Returns what happened:
    ``sent``, ``already`` (this cause was delivered today), ``pending`` (another run is sending it right now),
    ``failed`` (delivery failed: recorded, retried by the next occurrence) or ``unrecorded`` (the database is
    unreachable: logged only). Never raises."""
    info = CAUSES[cause]
    day = now.astimezone(SHANGHAI).date()
    detail = redact.scrub(" ".join(str(detail).split()))[:600]
    try:
        with connect() as conn:
            alert = store.operations.record_alert(conn, day=day, cause=cause, title=info.title, detail=detail,
                                       slot_run_id=slot_run_id, dag_run_id=dag_run_id)
    except Exception:  # alerting must not fail the step that raised it
        log.exception("operator alert %s could not be recorded: %s", cause, detail)
        return "unrecorded"
    if alert["delivered"]:
        log.info("operator alert %s already sent today (occurrence %d): %s", cause, alert["occurrences"], detail)
        return "already"
    try:
        targets, shared = channels()
        # the reader's channel reaches whoever reads the pushes (a family chat, a forward): no detail there, as
        # the pages show it (a rule's text, the day's spend) to an Airflow login only
        message = Message(
            title=f"{'【运维】' if shared else ''}{info.title}",
            lines=[SHARED_DETAIL if shared else alert["detail"] or detail, f"处理：{info.action}"],
            link=link,
        )
        report = push.deliver(connect, targets, message, push.Occasion(day, "ops", "alert", link, slot_run_id,
                                                                       identity=cause))
        error = "; ".join(report.failed) or None
        # a channel another raiser is sending to right now is not delivered yet: its outcome decides
        delivered = error is None and not report.pending
    except Exception as exc:  # no channel, a broken channel URL: recorded, shown on the page
        error, delivered = redact.scrub(f"{exc.__class__.__name__}: {exc}"), False
    try:
        with connect() as conn:
            store.operations.finish_alert(conn, alert["id"], error, delivered=delivered)
    except Exception:
        log.exception("operator alert %s: its delivery could not be recorded", cause)
    if error:
        log.warning("operator alert %s could not be delivered (%s): %s", cause, error, detail)
        return "failed"
    if not delivered:
        log.info("operator alert %s is being sent by another run: %s", cause, detail)
        return "pending"
    log.warning("operator alert %s sent: %s", cause, detail)
    return "sent"


def day_of(at: datetime) -> date:
    return at.astimezone(SHANGHAI).date()
