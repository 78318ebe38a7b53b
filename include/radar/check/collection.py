"""The check's lines for WeRSS: reachable, the credentials accepted (one login at most, never retried), its
WeChat login judged from its token and expiry, the subscribed accounts, the message tasks read as WeRSS reads
them, evidence that they ran and reached the accounts subscribed since, the newest article and the bodies."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from include.radar import connections, ingest, werss_rows
from include.radar.check import Line, Mark, Options, fail, ok, reason, warn
from include.radar.check.schedule import LEAD, Task, coverage, next_run, previous_run, suggested_cron, task_of
from include.radar.settings import Settings, SettingsError
from include.radar.slots import SHANGHAI
from include.radar.text import span
from include.radar.werss import WERSS_TZ, WeChatLogin, WeRSSAuthError, WeRSSClient, WeRSSError, WeRSSNotFound

AREA = "WeRSS"
SAMPLE = 10  # the newest articles whose bodies are looked at
DETAILS = 50  # the accounts (newest subscribed first) whose collection time is read
NEWEST_OLD = timedelta(hours=24)
BODY_LAG = timedelta(hours=3)
RUN_GRACE = timedelta(minutes=10)  # a task's run reaches its accounts within this after its time
SCAN = "打开 WeRSS → 扫码授权，用微信扫码并在手机上确认"
APPLY = "在 WeRSS → 消息任务 点「应用」（新建或修改任务、订阅新公众号后都要点一次才生效）"
SUBSCRIBE = "扫码授权后，在 WeRSS → 订阅管理 → 添加订阅 按名称搜索公众号并添加"
BODIES = ("WeRSS 默认分两步取正文（每 59 分钟最多 10 篇）：在 config.yaml 设 gather.content: True（Docker 环境变量 "
          "GATHER.CONTENT=True），或缩短 gather.content_auto_interval")
SCHEDULER = ("WeRSS 的定时采集没有运行：" + APPLY + "；不用 Docker 时 WeRSS 须以 python main.py -job True 启动，"
             "且 config.yaml 的 server.enable_job 为 True")


@dataclass(frozen=True)
class Account:
    id: str
    name: str
    subscribed_at: datetime | None
    synced_at: datetime | None = None  # when WeRSS last started collecting it (None: never, or not read)
    read: bool = False  # its record was read (DETAILS at most)


def werss_lines(settings: Settings, options: Options, connect: Callable[[], Any] | None, *,
                now: datetime | None = None) -> list[Line]:
    now = now or datetime.now(UTC)
    try:
        client = connections.werss_client(settings, timeout=options.timeout, max_retries=0)
    except (connections.ConfigurationError, WeRSSAuthError, SettingsError) as exc:
        return [fail(AREA, "连接配置", reason(exc), f"设置 {settings.werss_conn_id} 连接：host，以及 AK/SK（extra 的 "
                     "access_key、secret_key）或 login/password")]
    lines, rows = _credentials(client, settings)
    if lines[0].mark is Mark.FAIL:  # nothing further: another call would log in again
        return lines
    login = _login(client)
    lines.append(wechat_line(login, client, settings, now))
    accounts = _accounts(rows)
    lines.append(_accounts_line(accounts))
    tasks, task_lines_ = task_lines(client, accounts, settings, now)
    lines.extend(task_lines_)
    if accounts and tasks:
        lines.extend(run_lines(client, accounts, tasks, login, now, options))
    lines.extend(article_lines(client, connect, now))
    return lines


def _credentials(client: WeRSSClient, settings: Settings) -> tuple[list[Line], list[Any]]:
    """The first call (the account list): it logs in once, or sends the AK/SK. A refusal is never retried."""
    how = "AK/SK 已接受" if client.uses_keys else f"账号 {client.username!r} 登录成功"
    try:
        rows = client.accounts()
    except WeRSSAuthError as exc:
        refused = reason(exc, 300).split(": check", 1)[0]  # the client's own advice is said below
        fix = (f"在 WeRSS → Access Key 新建一对密钥，填入 {settings.werss_conn_id} 连接的 extra.access_key / "
               "extra.secret_key" if client.uses_keys else
               f"改正 {settings.werss_conn_id} 连接的 login/password；不会重试：WeRSS 连续 5 次登录失败会锁定账号，直到它重启")
        return [fail(AREA, "凭据", refused, fix)], []
    except WeRSSError as exc:
        return [fail(AREA, "可达", reason(exc), f"启动 WeRSS，或改正 {settings.werss_conn_id} 连接的 host"
                     f"（{client.base_url}）")], []
    return [ok(AREA, "可达", f"{client.base_url}，{how}")], rows


def _login(client: WeRSSClient) -> WeChatLogin | WeRSSError:
    try:
        return client.wechat_login()
    except WeRSSError as exc:
        return exc


def _qr_waiting(client: WeRSSClient) -> bool:
    try:
        status = client.qr_status()
    except WeRSSError:
        return False
    return bool(status and status.get("qr_code") is True)


def wechat_line(login: WeChatLogin | WeRSSError, client: WeRSSClient, settings: Settings, now: datetime) -> Line:
    """WeRSS's WeChat login, from its token and expiry: the ``login`` flag alone is true on a fresh WeRSS."""
    name = "微信登录"
    if isinstance(login, WeRSSError):
        return warn(AREA, name, f"sys/info 失败：{reason(login, 160)}", "查看 WeRSS 自己的日志")
    if not login.reported:
        return warn(AREA, name, f"WeRSS 没有报告微信登录状态（{login.note}）", "升级 WeRSS 到 v1.4.9 或更新；"
                    "在此之前，登录过期只能从采集停止看出")
    if not login.scanned:
        waiting = "；二维码已生成，正等待扫码" if _qr_waiting(client) else ""
        return fail(AREA, name, f"WeRSS 还没有扫码登录微信（sys/info 的 token 为空）：它采集不到任何文章{waiting}", SCAN)
    if login.expired(now):
        when = f"于 {login.expires_at.astimezone(SHANGHAI):%m-%d %H:%M} " if login.expires_at else ""
        return fail(AREA, name, f"已{when}过期：WeRSS 停止了采集", SCAN + "（微信登录每两三天过期一次）")
    if login.expires_at is None:
        return warn(AREA, name, "已登录，但 WeRSS 没有给出到期时间：过期前无法提醒",
                    "在 WeRSS → 扫码授权 重新扫码一次，WeRSS 会记下到期时间")
    left = (login.expires_at - now).total_seconds()
    text = f"有效至 {login.expires_at.astimezone(SHANGHAI):%m-%d %H:%M}（北京时间，还剩 {span(left)}）"
    if left <= settings.wechat_login_warn_hours * 3600:
        return warn(AREA, name, text, "到期前 " + SCAN)
    return ok(AREA, name, text)


def _accounts(rows: list[Any]) -> list[Account]:
    found = []
    for row in rows:
        if isinstance(row, dict) and row.get("id"):
            found.append(Account(str(row["id"]), str(row.get("mp_name") or row["id"])[:20],
                                 werss_rows.local_moment(row.get("created_at"), WERSS_TZ)))
    return found


def _accounts_line(accounts: list[Account]) -> Line:
    if not accounts:
        return fail(AREA, "公众号", "还没有订阅任何公众号：WeRSS 没有可采集的", SUBSCRIBE)
    return ok(AREA, "公众号", f"已订阅 {len(accounts)} 个")


def _make_task(settings: Settings) -> str:
    cron = suggested_cron(settings.schedule_slots)
    return (f"在 WeRSS → 消息任务 新建任务：类型 Message，cron 表达式 {cron}（每个时段前 30 分钟），公众号全选，"
            "启用；保存后点「应用」")


def task_lines(client: WeRSSClient, accounts: list[Account], settings: Settings,
               now: datetime) -> tuple[list[Task], list[Line]]:
    """The message tasks as WeRSS's scheduler reads them: those it cannot load, whether one runs, whether every
    account is in one, and whether they fire before each slot. Returns the tasks that run, and the lines."""
    name = "采集任务"
    try:
        tasks = [t for t in (task_of(row, WERSS_TZ) for row in client.message_tasks()) if t is not None]
    except WeRSSNotFound:
        return [], [warn(AREA, name, "这个 WeRSS 没有 message_tasks 接口", "升级 WeRSS 到 v1.4.9 或更新")]
    except WeRSSError as exc:
        return [], [warn(AREA, name, f"读取任务列表失败：{reason(exc, 160)}", "查看 WeRSS 自己的日志")]
    lines = [fail(AREA, name, f"任务「{t.name or t.id}」无法加载：{t.problem}；它在时「应用」会失败（HTTP 500），"
                  "其他任务也可能加载不上", "在 WeRSS → 消息任务 编辑该任务，重新选择公众号（或全选）并保存，再点「应用」")
             for t in tasks if t.active and t.problem]
    running = [t for t in tasks if t.runs]
    if not running:
        idle = f"（{len(tasks)} 个停用、cron 无效或无法加载）" if tasks else ""
        return [], lines + [fail(AREA, name, f"没有会运行的采集任务{idle}：WeRSS 不会采集新文章，只有添加公众号时的那些",
                                 _make_task(settings))]
    ids = {a.id for a in accounts}
    covered: set[str] = set().union(*(t.covers(ids) for t in running))
    missing = [a.name for a in accounts if a.id not in covered]
    if missing:
        lines.append(warn(AREA, name, f"{len(missing)} 个公众号不在任何任务里：{'、'.join(missing[:5])}",
                          "在 WeRSS → 消息任务 把它们加进任务的公众号（或全选），保存后点「应用」"))
    lines.append(_timing_line(running, settings, now))
    return running, lines


def _timing_line(running: list[Task], settings: Settings, now: datetime) -> Line:
    cover = coverage([t.cron for t in running], settings.schedule_slots, now, WERSS_TZ)
    named = "、".join(f"「{t.name or t.id}」（{t.cron}）" for t in running[:3])
    if cover.missed:
        return warn(AREA, "采集任务", f"{named}：时段 {'、'.join(cover.missed)} 之前 {span(LEAD.total_seconds())}内"
                    "没有采集", _make_task(settings))
    nxt = cover.next_run.astimezone(SHANGHAI) if cover.next_run else None
    when = f"；下次 {nxt:%H:%M}，在 {cover.next_slot} 时段之前" if nxt else ""
    return ok(AREA, "采集任务", f"{named}在每个时段之前采集{when}")


def run_lines(client: WeRSSClient, accounts: list[Account], tasks: list[Task], login: WeChatLogin | WeRSSError,
              now: datetime, options: Options) -> list[Line]:
    """Did the tasks run at their last time, and reach the accounts subscribed since? Read from each account's
    last collection (its record's ``sync_time``): WeRSS's API says nothing of which tasks are loaded."""
    name = "任务运行"
    if isinstance(login, WeChatLogin) and login.reported and login.expired(now):
        return [warn(AREA, name, "无法判断：微信未登录时 WeRSS 不采集", "先完成上面的微信登录")]
    read = _read_syncs(client, accounts, now, options)
    if not any(a.read for a in read):
        return [warn(AREA, name, "读不到公众号的采集时间（mps/{id} 的 sync_time）：无法判断任务是否运行",
                     "升级 WeRSS 到 v1.4.9 或更新")]
    crons = [t.cron for t in tasks]
    local = now.astimezone(WERSS_TZ)
    due = previous_run(crons, local - RUN_GRACE)
    if due is None:
        return []
    reached = [a for a in read if a.synced_at and a.synced_at >= due]
    saved = max((t.saved_at for t in tasks if t.saved_at), default=None)
    if not reached:
        if saved and saved > due:
            upcoming = next_run(crons, local)
            return [warn(AREA, name, f"任务保存于 {saved.astimezone(SHANGHAI):%m-%d %H:%M}，之后还没到过计划时间",
                         f"确认已点「应用」，{upcoming.astimezone(SHANGHAI):%H:%M} 之后再运行一次 check")]
        return [fail(AREA, name, f"上一次计划采集（{due.astimezone(SHANGHAI):%m-%d %H:%M}）没有运行：之后没有公众号被采集",
                     SCHEDULER)]
    lines = [ok(AREA, name, f"上一次计划采集（{due.astimezone(SHANGHAI):%m-%d %H:%M}）已运行："
                f"{len(reached)}/{sum(a.read for a in read)} 个公众号在其后被采集")]
    lines.extend(_new_accounts_line(read, crons, local))
    return lines


def _read_syncs(client: WeRSSClient, accounts: list[Account], now: datetime, options: Options) -> list[Account]:
    """The newest-subscribed accounts with their last collection time, within twice the check's timeout."""
    budget = time.monotonic() + 2 * options.timeout
    found = []
    for account in accounts[:DETAILS]:
        if time.monotonic() > budget:
            break
        try:
            row = client.account(account.id)
        except WeRSSError:
            continue
        if "sync_time" in row:
            found.append(Account(account.id, account.name, account.subscribed_at, werss_rows.synced_at(row, now), True))
    return found


def _new_accounts_line(read: list[Account], crons: list[str], local: datetime) -> list[Line]:
    """Accounts a task run should have reached since they were subscribed, and did not: 「全部公众号」 is
    expanded when the tasks are applied, so an account subscribed later waits for the next 「应用」."""
    missed = []
    for account in read:
        if account.subscribed_at is None:
            continue
        first = next_run(crons, account.subscribed_at.astimezone(WERSS_TZ))
        if first and first + RUN_GRACE <= local and not (account.synced_at and account.synced_at >= first):
            missed.append(account.name)
    if not missed:
        return []
    return [warn(AREA, "新订阅", f"{len(missed)} 个公众号订阅后还没被任务采集过：{'、'.join(missed[:5])}；"
                 "「全部公众号」只包括上次点「应用」时已订阅的", APPLY)]


def article_lines(client: WeRSSClient, connect: Callable[[], Any] | None, now: datetime) -> list[Line]:
    """The newest article's age, and of the newest few how many wait for their body (and the radar's own)."""
    name = "最新文章"
    try:
        rows = [r for r in client.newest_articles(SAMPLE) if isinstance(r, dict)]
    except WeRSSError as exc:
        return [warn(AREA, name, f"读取文章列表失败：{reason(exc, 160)}", "查看 WeRSS 自己的日志")]
    if not rows:
        return [warn(AREA, name, "WeRSS 里还没有任何文章", "扫码授权后让采集任务运行一次（WeRSS → 消息任务 → 执行），"
                     "或等它的 cron")]
    times = [t for t in (_published(r, now) for r in rows) if t is not None]
    age = (now - max(times)).total_seconds() if times else None
    if age is None:
        line = warn(AREA, name, "没有可信的发布时间（publish_time）", "在 WeRSS 的文章列表里看一看")
    elif age > NEWEST_OLD.total_seconds():
        line = warn(AREA, name, f"{span(age)}前发布", "检查上面的微信登录与采集任务")
    else:
        line = ok(AREA, name, f"{span(age)}前发布")
    return [line, _bodies_line(client, rows, connect, now)]


def _published(row: dict[str, Any], now: datetime) -> datetime | None:
    try:
        return datetime.fromtimestamp(werss_rows.publish_seconds(row.get("publish_time"), now), UTC)
    except ValueError:
        return None


def _bodies_line(client: WeRSSClient, rows: list[dict[str, Any]], connect: Callable[[], Any] | None,
                 now: datetime) -> Line:
    waiting = 0
    for row in rows:
        try:
            if ingest.read_body(client.article(str(row["id"]))) == (None, None):
                waiting += 1
        except WeRSSError:
            continue
    text = f"最新 {len(rows)} 篇中有 {waiting} 篇还没有正文"
    oldest = None
    if connect is not None:
        with connect() as conn:
            held = conn.execute("SELECT count(*) AS n, min(created_at) AS oldest FROM content_item "
                                "WHERE body_status = 0").fetchone()
        oldest = held["oldest"]
        text += f"；雷达有 {held['n']} 篇在等正文" + (f"（最早的已等 {span((now - oldest).total_seconds())}）"
                                                  if oldest else "")
    if oldest is not None and now - oldest > BODY_LAG:
        return warn(AREA, "正文", text, BODIES)
    return ok(AREA, "正文", text)
