"""The check's lines for WeRSS: reachable, the credentials accepted (one login at most, never retried), its
WeChat login judged from its token and expiry where sys/info shows them, else from its collections, the
subscribed accounts, the message tasks read as WeRSS reads
them, evidence that they ran and reached the accounts subscribed since, the newest article and the bodies."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from include.radar.check import Line, Mark, Options, fail, ok, reason, task_runs, warn
from include.radar.check.schedule import LEAD, Task, coverage, suggested_cron, task_of
from include.radar.check.task_runs import Account
from include.radar.collect import ingest, werss_rows
from include.radar.collect.werss import (
    WERSS_TZ,
    WeChatLogin,
    WeRSSAuthError,
    WeRSSClient,
    WeRSSError,
    WeRSSNotFound,
    judged,
)
from include.radar.core.settings import Settings, SettingsError
from include.radar.core.slots import SHANGHAI
from include.radar.core.text import span
from include.radar.operations import connections

AREA = "WeRSS"
SAMPLE = 10  # the newest articles whose bodies are looked at
NEWEST_OLD = timedelta(hours=24)
BODY_LAG = timedelta(hours=3)
SCAN = "打开 WeRSS → 右上角头像菜单 → 扫码授权，用微信扫码并在手机上确认"
SUBSCRIBE = "扫码授权后，在 WeRSS → 订阅管理 → 订阅 → 添加公众号 按名称搜索公众号并添加"
BODIES = ("让正文随列表一起抓：WeRSS 的 config.yaml 里 gather.content: True（Docker：环境变量 GATHER.CONTENT=True）；"
          "补抓缺正文的文章是 gather.content_auto_check（默认 True，每 gather.content_auto_interval 分钟最多 10 篇，"
          "只在以 python main.py 启动的 WeRSS 里运行）")
LOCKED = ("WeRSS 已锁住这个账号（连续 5 次登录失败）：重启 WeRSS 解锁（compose：docker compose restart werss；原生："
          "systemctl restart werss），改正密码后再试；建议改用 AK/SK（账号锁住时 AK/SK 照常可用）")

def werss_lines(settings: Settings, options: Options, connect: Callable[[], Any] | None) -> list[Line]:
    now = options.clock.now()
    try:
        client = connections.werss_client(settings, timeout=options.timeout, max_retries=0, clock=options.clock)
    except (connections.ConfigurationError, WeRSSAuthError, SettingsError) as exc:
        return [fail(AREA, "连接配置", reason(exc), f"设置 {settings.werss_conn_id} 连接：host，以及 AK/SK（extra 的 "
                     "access_key、secret_key）或 login/password")]
    lines, rows = _credentials(client, settings)
    if lines[0].mark is Mark.FAIL:  # nothing further: another call would log in again
        return lines
    accounts = _accounts(rows)
    read = task_runs.read_syncs(client, accounts, now, options)
    login = _login(client)
    if isinstance(login, WeChatLogin) and read:
        login = judged(login, max((a.synced_at for a in read if a.synced_at), default=None))
    lines.append(wechat_line(login, client, settings, now))
    lines.append(_accounts_line(accounts))
    tasks, task_lines_ = task_lines(client, accounts, settings, now)
    newest = _newest(client)
    runs = task_runs.run_lines(read, tasks, login, now, connect,
                               newest if isinstance(newest, list) else []) if accounts and tasks else []
    if not any(x.mark is Mark.OK and x.name == task_runs.NAME for x in runs):
        task_lines_ = [_unproven(x) for x in task_lines_]
    lines.extend(task_lines_)
    lines.extend(runs)
    lines.extend(article_lines(client, newest, connect, now))
    return lines


def _credentials(client: WeRSSClient, settings: Settings) -> tuple[list[Line], list[Any]]:
    """The first call (the account list): it logs in once, or sends the AK/SK. A refusal is never retried."""
    keys = client.credentials.uses_keys
    how = "AK/SK 已接受" if keys else f"账号 {client.credentials.username!r} 登录成功"
    try:
        rows = client.accounts()
    except WeRSSAuthError as exc:
        refused = reason(exc, 300).split(": check", 1)[0]  # the client's own advice is said below
        fix = (f"在 WeRSS → Access Key 新建一对密钥，填入 {settings.werss_conn_id} 连接的 extra.access_key / "
               "extra.secret_key" if keys else LOCKED if "锁定" in refused else
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


def _newest(client: WeRSSClient) -> list[dict[str, Any]] | WeRSSError:
    try:
        return [r for r in client.newest_articles(SAMPLE) if isinstance(r, dict)]
    except WeRSSError as exc:
        return exc


def _unproven(line: Line) -> Line:
    """A task's timing is no ✓ before a run shows WeRSS loaded it: a task saved and never 「应用」'd runs never."""
    if line.mark is not Mark.OK or line.name != "采集任务":
        return line
    return warn(AREA, line.name, line.text + "；还没有看到它在 check 认识它之后按时运行并存下文章（见「任务运行」那一行）",
                "照「任务运行」那一行说的做；WeRSS 只在点「应用」后加载新建或改过的任务")


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
    if login.scanned is None:
        return warn(AREA, name, "无法判断：sys/info 不显示 WeRSS 是否持有微信登录（v1.4.9 在 WeRSS 重启后就不显示），"
                    "也读不到公众号的采集时间", "查看 WeRSS → 扫码授权；若已扫码，让采集任务运行一次（WeRSS → 消息任务 → 执行）")
    if not login.scanned:
        waiting = "；二维码已生成，正等待扫码" if _qr_waiting(client) else ""
        return fail(AREA, name, f"WeRSS 还没有扫码登录微信：没有一个公众号被采集过（WeRSS 只在有微信登录时采集）{waiting}",
                    SCAN + "；已扫过码的话，让采集任务运行一次（WeRSS → 消息任务 → 执行）再 check")
    if login.expired(now):
        when = f"于 {login.expires_at.astimezone(SHANGHAI):%m-%d %H:%M} " if login.expires_at else ""
        return fail(AREA, name, f"已{when}过期：WeRSS 停止了采集", SCAN + "（微信登录每两三天过期一次）")
    if login.expires_at is None:
        since = (f"（{login.collected_at.astimezone(SHANGHAI):%m-%d %H:%M} 的采集用着它）" if login.collected_at else "")
        return warn(AREA, name, f"已登录{since}，但 WeRSS 没有给出到期时间：过期前无法提醒",
                    "在 WeRSS → 扫码授权 重新扫码一次：WeRSS 会给出到期时间（v1.4.9 只到它重启为止）")
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
    return (f"在 WeRSS → 消息任务 新建任务：任务名称（如 雷达采集），类型 Message，cron 表达式 {cron}（每个时段前 30 "
            "分钟），公众号留空（对所有公众号生效），启用；保存后点「应用」")


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
    broken = [fail(AREA, name, f"任务「{t.name or t.id}」无法加载：{t.problem}；有它在时「应用」会失败（HTTP 500），"
                   "WeRSS 重启后一个任务也不会加载", "在 WeRSS → 消息任务 编辑该任务，公众号留空（或重新选择）后保存，或删掉"
                   "它；再点「应用」") for t in tasks if t.active and t.problem]
    lines = list(broken)
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
                          "在 WeRSS → 消息任务 编辑任务：公众号留空（对所有公众号生效）或把它们加进去，保存后点「应用」"))
    if not broken:  # a task WeRSS cannot load stops the others loading: nothing to say of their timing then
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
    return ok(AREA, "采集任务", f"{named}安排在每个时段之前{when}")


def article_lines(client: WeRSSClient, rows: list[dict[str, Any]] | WeRSSError, connect: Callable[[], Any] | None,
                  now: datetime) -> list[Line]:
    """The newest article's age, and of the newest few (``rows``) how many wait for their body (and the
    radar's own)."""
    name = "最新文章"
    if isinstance(rows, WeRSSError):
        return [warn(AREA, name, f"读取文章列表失败：{reason(rows, 160)}", "查看 WeRSS 自己的日志")]
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
