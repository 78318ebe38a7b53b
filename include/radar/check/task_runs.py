"""The check's evidence that WeRSS's message tasks run: WeRSS's API says nothing of which tasks are loaded, but
each account's record says when a collection last started on it (``mps/{id}``'s ``sync_time``, set as a run
reaches the account, also when its requests then fail). A scheduled run leaves such a time shortly after one
of the tasks' cron times; a manual 「执行」 leaves one at any moment, and proves nothing about the schedule.

A start is not yet a run of *this* task: a task is loaded only at 「应用」, which leaves no trace, and v1.4.9
records no time of a task's saving (``updated_at`` is null). The check remembers when it first saw each task
in its present form (``service_state`` :data:`SEEN_KEY`; an edit is a new form) and counts only a run after
that. Nor is a start a collection: WeRSS records no failed request, so the run counts as collecting only when
an article was stored after it started (WeRSS's ``created_at`` is when it stored the row). A task never seen
running at a time after the check knew it is a ! at first, and a ✗ once it was known before that time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from include.radar import store
from include.radar.check import Line, Options, fail, ok, warn
from include.radar.check.schedule import Task, next_run, previous_run
from include.radar.collect import werss_rows
from include.radar.collect.werss import WERSS_TZ, WeChatLogin, WeRSSClient, WeRSSError
from include.radar.core.slots import SHANGHAI

log = logging.getLogger(__name__)
AREA = "WeRSS"
NAME = "任务运行"
DETAILS = 50  # the accounts whose record is read: the newest and the oldest subscribed, alternately
RUN_GRACE = timedelta(minutes=10)  # a scheduled run starts on its first account within this after its time
RUN_WINDOW = timedelta(minutes=30)  # a collection started this long after a cron time is that time's run
SEEN_KEY = "check:werss_tasks"  # Task.form -> when the check first saw the task in that form (ISO)
APPLY = "在 WeRSS → 消息任务 点「应用」（新建或修改任务、订阅新公众号后都要点一次才生效）"
SCHEDULER = ("WeRSS 的定时采集没有运行：" + APPLY + "；不用 Docker 时 WeRSS 须以 python main.py -job True 启动，"
             "config.yaml 的 server.enable_job 为 True，server.auto_reload 为 False")


@dataclass(frozen=True)
class Account:
    id: str
    name: str
    subscribed_at: datetime | None
    synced_at: datetime | None = None  # when WeRSS last started collecting it (None: never, or not read)
    read: bool = False  # its record was read (DETAILS at most)


def run_lines(read: list[Account], tasks: list[Task], login: WeChatLogin | WeRSSError, now: datetime,
              connect: Callable[[], Any] | None, newest: list[dict[str, Any]]) -> list[Line]:
    """Did the tasks run at their last time, after the check knew them, collect, and reach the accounts
    subscribed since? ``read``: the accounts whose record was read (:func:`read_syncs`); ``newest``: WeRSS's
    newest article rows."""
    seen = _remember(connect, tasks, now)
    if isinstance(login, WeChatLogin) and login.reported and login.expired(now):
        return [warn(AREA, NAME, "无法判断：微信未登录时 WeRSS 不采集", "先完成上面的微信登录")]
    if not read:
        return [warn(AREA, NAME, "读不到公众号的采集时间（mps/{id} 的 sync_time）：无法判断任务是否运行",
                     "升级 WeRSS 到 v1.4.9 或更新")]
    crons = [t.cron for t in tasks]
    local = now.astimezone(WERSS_TZ)
    due = previous_run(crons, local - RUN_GRACE)
    if due is None:
        return []
    when = f"{due.astimezone(SHANGHAI):%m-%d %H:%M}"
    upcoming = next_run(crons, local)
    again = f"{(upcoming + RUN_GRACE).astimezone(SHANGHAI):%H:%M} 之后再运行一次 check（它记得这次见到的任务）"
    known = [t.saved_at or seen.get(t.form) for t in tasks]
    # WeRSS keeps only an account's latest collection start: a run at a later cron time (in its grace, say)
    # overwrites the due one's, and is as much a run of the schedule
    runs = [r for r in (_scheduled_run(a.synced_at, crons, due) for a in read) if r is not None]
    started = bool(runs)
    if runs:
        due = min(runs)
        when = f"{due.astimezone(SHANGHAI):%m-%d %H:%M}"
    if started and not any(k is not None and k <= due for k in known):
        return [warn(AREA, NAME, f"上一次计划采集（{when}）时有公众号开始被采集，但任务是那之后才保存、或 check 那之后才"
                     "第一次见到的：还看不出 WeRSS 加载了它（点过「应用」）", again)]
    if started:
        reached = sum(1 for a in read if a.synced_at and a.synced_at >= due)
        if not any(stored >= due for stored in _stored_times(newest)):
            return [warn(AREA, NAME, f"上一次计划采集（{when}）开始了（{reached}/{len(read)} 个公众号），但没有存下新文章："
                         "公众号那之后都没发文时这正常；WeRSS 不记录失败的请求", "查看 WeRSS 的日志（Request error、"
                         "「环境异常」、Invalid Session）；有公众号发文后再运行一次 check")]
        return [ok(AREA, NAME, f"上一次计划采集（{when}）已运行并存下新文章：{reached}/{len(read)} 个公众号在其后被采集"),
                *_new_accounts_line(read, crons, local)]
    if any(k is not None and k < due for k in known):
        return [fail(AREA, NAME, f"上一次计划采集（{when}）没有运行：那之后 30 分钟内没有公众号开始被采集", SCHEDULER)]
    return [warn(AREA, NAME, f"没有看到上一次计划采集（{when}）运行的迹象：任务若是那之后才建或才点「应用」，这还不算问题",
                 again + "；若任务早就在，" + SCHEDULER)]


def _scheduled_run(synced: datetime | None, crons: list[str], due: datetime) -> datetime | None:
    """The cron time, at or after ``due``, whose run ``synced`` (a collection start) is: within RUN_WINDOW of it."""
    if synced is None or synced < due:
        return None
    fired = previous_run(crons, synced.astimezone(WERSS_TZ) + timedelta(seconds=1))
    return fired if fired is not None and fired >= due and synced - fired <= RUN_WINDOW else None


def _stored_times(rows: list[dict[str, Any]]) -> list[datetime]:
    """When WeRSS stored each of ``rows`` (its ``created_at``, WeRSS's local time; v1.4.9 sets it on insert)."""
    return [t for t in (werss_rows.local_moment(r.get("created_at"), WERSS_TZ) for r in rows) if t is not None]


def _remember(connect: Callable[[], Any] | None, tasks: list[Task], now: datetime) -> dict[str, datetime]:
    """When the check first saw each task in its present form (this run's ``now`` for a new one or a new form),
    kept with the check's result."""
    if connect is None:
        return {}
    try:
        with connect() as conn:
            stored = store.operations.status(conn, SEEN_KEY)
            seen = {k: v for k, v in stored.items() if isinstance(k, str) and isinstance(v, str)}
            for task in tasks:
                seen.setdefault(task.form, now.isoformat())
            store.state.set_state(conn, SEEN_KEY, seen, None)
    except Exception:  # a memory for the next check: without it this one judges as on a first run
        log.warning("the tasks the check saw could not be kept", exc_info=True)
        return {}
    return {k: moment for k, v in seen.items() if (moment := _moment(v)) is not None}


def _moment(value: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else None


def sample(accounts: list[Account], size: int = DETAILS) -> list[Account]:
    """``size`` of ``accounts``, the newest and the oldest subscribed in turn, whatever WeRSS's order: the newest
    tell whether a new subscription was reached, the oldest whether the task ran at all (an account subscribed
    after the last 「应用」 is in no task yet, so the newest alone would read a running task as one that never
    ran). In turn, so a time budget that stops the reading early still leaves both ends."""
    if len(accounts) <= size:
        return list(accounts)
    oldest = datetime.min.replace(tzinfo=UTC)
    accounts = sorted(accounts, key=lambda a: a.subscribed_at or oldest, reverse=True)
    return [accounts[n // 2] if n % 2 == 0 else accounts[-1 - n // 2] for n in range(size)]


def read_syncs(client: WeRSSClient, accounts: list[Account], now: datetime, options: Options) -> list[Account]:
    """The accounts of the :func:`sample` whose record says when WeRSS last started collecting them, read
    within twice the check's timeout."""
    budget = options.clock.monotonic() + 2 * options.timeout
    found = []
    for account in sample(accounts):
        if options.clock.monotonic() > budget:
            break
        try:
            row = client.account(account.id)
        except WeRSSError:
            continue
        if "sync_time" in row:
            found.append(Account(account.id, account.name, account.subscribed_at, werss_rows.synced_at(row, now), True))
    return found


def _new_accounts_line(read: list[Account], crons: list[str], local: datetime) -> list[Line]:
    """Accounts a task run should have reached since they were subscribed, and did not: 「全部公众号」 (公众号
    left empty) is expanded when the tasks are applied, so an account subscribed later waits for the next 「应用」."""
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
                 "公众号留空的任务只包括上次点「应用」时已订阅的", APPLY)]
