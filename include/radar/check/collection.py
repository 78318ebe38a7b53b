"""The check's lines for WeRSS: reachable, the credentials accepted (one login at most, never retried), its
WeChat login, the subscribed accounts, the message tasks that make it collect before the radar's slots, the
bodies still missing and the age of the newest article."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from include.radar import connections, ingest, werss_rows
from include.radar.check import Line, Mark, Options, fail, ok, reason, span, warn
from include.radar.check.schedule import LEAD, Task, coverage, task_of
from include.radar.settings import Settings, SettingsError
from include.radar.slots import SHANGHAI
from include.radar.werss import WERSS_TZ, WeRSSAuthError, WeRSSClient, WeRSSError, WeRSSNotFound

AREA = "WeRSS"
SAMPLE = 10  # the newest articles whose bodies are looked at
NEWEST_OLD = timedelta(hours=24)
BODY_LAG = timedelta(hours=3)
SUBSCRIBE = ("in WeRSS's UI scan the QR code with WeChat (授权登录), then search each account by name and add it "
             "(公众号 → 添加订阅); or POST /api/v1/wx/mps/by_article with one of its articles' URL")
BODIES = ("WeRSS fetches bodies in a second stage, at most 10 per run every 59 min by default: set GATHER.CONTENT=True "
          "(bodies with the lists) or a shorter gather.content_auto_interval")


def suggested_cron(slots: tuple[str, ...], before: int = 15) -> str:
    """A cron firing ``before`` minutes ahead of every slot (slots sharing their minute, as the DAG's do)."""
    moments = sorted({(int(s[:2]) * 60 + int(s[3:]) - before) % 1440 for s in slots})
    minutes = sorted({m % 60 for m in moments})
    if len(minutes) == 1:
        return f"{minutes[0]} {','.join(str(m // 60) for m in moments)} * * *"
    return "*/30 * * * *"


def werss_lines(settings: Settings, options: Options, connect: Callable[[], Any] | None, *,
                now: datetime | None = None) -> list[Line]:
    now = now or datetime.now(UTC)
    try:
        client = connections.werss_client(settings, timeout=options.timeout, max_retries=0)
    except (connections.ConfigurationError, WeRSSAuthError, SettingsError) as exc:
        return [fail(AREA, "connection", reason(exc), f"set the {settings.werss_conn_id} connection: host, and "
                     "login/password or extra access_key/secret_key")]
    lines, accounts = _credentials(client, settings)
    if lines[0].mark is Mark.FAIL:  # nothing further: another call would log in again
        return lines
    lines.append(wechat_line(client, settings, now))
    lines.append(_accounts_line(accounts))
    lines.extend(task_lines(client, accounts, settings, now))
    lines.extend(article_lines(client, connect, now))
    return lines


def _credentials(client: WeRSSClient, settings: Settings) -> tuple[list[Line], list[dict[str, Any]]]:
    """The first call (the account list): it logs in once, or sends the AK/SK. A refusal is never retried."""
    how = "AK/SK" if client.uses_keys else f"login {client.username!r}"
    try:
        rows = client.accounts()
    except WeRSSAuthError as exc:
        refused = reason(exc, 300).split(": check", 1)[0]  # the client's own advice is said below, in full
        return [fail(AREA, "credentials", refused,
                     f"correct the {settings.werss_conn_id} connection; not retried: WeRSS locks the account after "
                     "5 failed logins until it restarts")], []
    except WeRSSError as exc:
        return [fail(AREA, "reachable", reason(exc), f"start WeRSS or correct the host of {settings.werss_conn_id} "
                     f"({client.base_url})")], []
    accounts = [r for r in rows if isinstance(r, dict) and r.get("id")]
    return [ok(AREA, "reachable", f"{client.base_url}, {how} accepted")], accounts


def wechat_line(client: WeRSSClient, settings: Settings, now: datetime) -> Line:
    try:
        login = client.wechat_login()
    except WeRSSError as exc:
        return warn(AREA, "WeChat login", f"sys/info failed: {reason(exc, 160)}", "look at WeRSS's own log")
    scan = "open WeRSS and scan its QR code with WeChat (the login lapses every two to three days)"
    if not login.reported:
        return warn(AREA, "WeChat login", f"not reported ({login.note})", "upgrade WeRSS to v1.4.9 or newer, "
                    "or watch for collection stopping")
    if login.expired(now):
        when = f" at {login.expires_at.astimezone(SHANGHAI):%m-%d %H:%M}" if login.expires_at else ""
        return fail(AREA, "WeChat login", f"lapsed{when}: WeRSS collects nothing", scan)
    if login.expires_at is None:
        return ok(AREA, "WeChat login", "logged in (WeRSS gives no expiry)")
    left = (login.expires_at - now).total_seconds()
    text = f"valid until {login.expires_at.astimezone(SHANGHAI):%m-%d %H:%M} Asia/Shanghai ({span(left)} left)"
    if left <= settings.wechat_login_warn_hours * 3600:
        return warn(AREA, "WeChat login", text, "scan again before it lapses: " + scan)
    return ok(AREA, "WeChat login", text)


def _accounts_line(accounts: list[dict[str, Any]]) -> Line:
    if not accounts:
        return fail(AREA, "accounts", "no account subscribed: WeRSS has nothing to collect", SUBSCRIBE)
    return ok(AREA, "accounts", f"{len(accounts)} subscribed")


def task_lines(client: WeRSSClient, accounts: list[dict[str, Any]], settings: Settings, now: datetime) -> list[Line]:
    """Is there an active message task, does it cover every account, does it run before each slot?"""
    cron = suggested_cron(settings.schedule_slots)
    make = (f"in WeRSS: 消息任务 → add a task, cron {cron!r} (15 min before each slot), accounts left empty (all), "
            "status on; PUT /api/v1/wx/message_tasks/job/fresh reloads the tasks")
    try:
        tasks = [t for t in map(task_of, client.message_tasks()) if t is not None]
    except WeRSSNotFound:
        return [warn(AREA, "collection task", "this WeRSS has no message_tasks route", "upgrade WeRSS to v1.4.9 or newer")]
    except WeRSSError as exc:
        return [warn(AREA, "collection task", f"the task list failed: {reason(exc, 160)}", "look at WeRSS's own log")]
    active = [t for t in tasks if t.active and t.valid_cron]
    if not active:
        idle = f" ({len(tasks)} inactive or without a valid cron)" if tasks else ""
        return [fail(AREA, "collection task", f"no active collection task{idle}: WeRSS collects nothing new, only "
                     "what it had when each account was added", make)]
    ids = {str(a["id"]) for a in accounts}
    covered: set[str] = set().union(*(t.covers(ids) for t in active))
    lines = []
    if ids - covered:
        names = [str(a.get("mp_name") or a["id"])[:20] for a in accounts if str(a["id"]) not in covered]
        lines.append(warn(AREA, "collection task", f"{len(names)} account(s) in no active task: {', '.join(names[:5])}",
                          "add them to a task's accounts, or leave its accounts empty (all)"))
    lines.append(_timing_line(active, settings, now, make))
    return lines


def _timing_line(active: list[Task], settings: Settings, now: datetime, make: str) -> Line:
    cover = coverage([t.cron for t in active], settings.schedule_slots, now, WERSS_TZ)
    named = ", ".join(f"{t.name or t.id} ({t.cron})" for t in active[:3])
    if cover.missed:
        return warn(AREA, "collection task", f"{named}: no collection within {span(LEAD.total_seconds())} before "
                    f"the slot(s) {', '.join(cover.missed)}", make)
    nxt = cover.next_run.astimezone(SHANGHAI) if cover.next_run else None
    when = f"; next run {nxt:%H:%M}, before the {cover.next_slot} slot" if nxt else ""
    return ok(AREA, "collection task", f"{named} runs before every slot{when}")


def article_lines(client: WeRSSClient, connect: Callable[[], Any] | None, now: datetime) -> list[Line]:
    """The newest article's age, and of the newest few how many wait for their body (and the radar's own)."""
    try:
        rows = [r for r in client.newest_articles(SAMPLE) if isinstance(r, dict)]
    except WeRSSError as exc:
        return [warn(AREA, "articles", f"the article list failed: {reason(exc, 160)}", "look at WeRSS's own log")]
    if not rows:
        return [warn(AREA, "articles", "no article yet", "run the collection task once (GET /api/v1/wx/"
                     "message_tasks/{id}/run) or wait for its cron")]
    times = [t for t in (_published(r, now) for r in rows) if t is not None]
    age = (now - max(times)).total_seconds() if times else None
    if age is None:
        line = warn(AREA, "newest article", "no plausible publish_time", "look at WeRSS's article list")
    elif age > NEWEST_OLD.total_seconds():
        line = warn(AREA, "newest article", f"{span(age)} old", "check the WeChat login and the collection task")
    else:
        line = ok(AREA, "newest article", f"{span(age)} old")
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
    text = f"{waiting} of the newest {len(rows)} wait for their body"
    oldest = None
    if connect is not None:
        with connect() as conn:
            held = conn.execute("SELECT count(*) AS n, min(created_at) AS oldest FROM content_item "
                                "WHERE body_status = 0").fetchone()
        oldest = held["oldest"]
        text += f"; the radar holds {held['n']} waiting" + (f" (the oldest {span((now - oldest).total_seconds())})"
                                                             if oldest else "")
    if oldest is not None and now - oldest > BODY_LAG:
        return warn(AREA, "bodies", text, BODIES)
    return ok(AREA, "bodies", text)
