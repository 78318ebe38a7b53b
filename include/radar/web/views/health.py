"""Health at a glance: the view models of the overview's opening section (what it costs is
web/costs.py's).

:func:`gather` is the one function here that reads (the database, through read-only store queries, into
:class:`HealthFacts`); every other function is pure, like the views. What came from outside — alert details,
service errors, step names — is scrubbed through :func:`error_text` and left for Jinja to escape, never marked
safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg

from include.radar import DAG_ID, store
from include.radar.collect import watch
from include.radar.collect.coverage import SILENT_FACTOR, Coverage
from include.radar.core.slots import slot_at, slots_between
from include.radar.core.text import span
from include.radar.web.costs import SPEND_DAYS, SpendView, spend_view
from include.radar.web.views.common import (
    SLOT_FAILED,
    SLOT_LATE,
    SLOT_PENDING,
    Links,
    PageContext,
    Row,
    error_text,
    short,
)
from include.radar.web.views.slots import SlotView, missing_slot_view, slot_view

RECENT_SLOTS = 5
MISSED_LOOKBACK_DAYS = 7  # how far back a slot that never ran is looked for (the list shows five anyway)
THROTTLE_AFTER = 2  # ratelimit.THROTTLE_AFTER (not imported: it loads the LLM client into the api-server)
NO_RECORD = "暂无记录"
STORAGE_STATUS = "retention:status"  # retention.STATUS_KEY (not imported: the pages need none of the step)
CHECK_STATUS = "check:last"  # check.STATE_KEY (not imported: the pages need none of the check's clients)


# ------------------------------------------------------------------------------------------------ helpers


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _at(value: Any) -> datetime | None:
    """An ISO timestamp out of a jsonb status (any other value: None)."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _when(moment: datetime | None, now: datetime, tz: ZoneInfo) -> str:
    """``14:05`` today, ``昨天 22:01``, else ``01-06 22:01``."""
    if moment is None:
        return ""
    local, today = moment.astimezone(tz), now.astimezone(tz).date()
    if local.date() == today:
        return local.strftime("%H:%M")
    if local.date() == today - timedelta(days=1):
        return local.strftime("昨天 %H:%M")
    return local.strftime("%m-%d %H:%M")


# ------------------------------------------------------------------------------------------------ slots


@dataclass(frozen=True)
class RecentSlot:
    day: date
    when: str  # "01-08 14:00"
    daily_url: str
    view: SlotView


@dataclass(frozen=True)
class NextSlot:
    label: str  # "22:00" or "明天 07:00"
    eta: str  # "1 小时 30 分后"


def recent_slots(runs: Iterable[Row], missed: Iterable[tuple[date, str]], page: PageContext,
                 spend: Mapping[int, float]) -> list[RecentSlot]:
    """The last ``RECENT_SLOTS`` slots across days, newest first: the runs, slots that should have run and have
    no run (late, linked to the DAG), and a slot whose time has come but is still within its grace period."""
    now, tz, links, settings = page.now, page.tz, page.links, page.settings
    entries: dict[tuple[date, str], SlotView] = {}
    for run in runs:
        entries[(run["run_date"], run["slot"])] = slot_view(
            run, now=now, tz=tz, links=links, spend=spend, currency=settings.deepseek_currency)
    for day, slot in missed:
        entries.setdefault((day, slot), missing_slot_view(day, slot, SLOT_LATE, links))
    grace = timedelta(minutes=settings.late_after_minutes)
    for key in slots_between(now - grace, now, tuple(settings.schedule_slots), tz):
        if (key.run_date, key.slot) not in entries:
            view = missing_slot_view(key.run_date, key.slot, SLOT_PENDING, links)
            entries[(key.run_date, key.slot)] = SlotView(slot=view.slot, state=view.state, label="等待调度",
                                                         run_date=view.run_date)
    newest = sorted(entries, reverse=True)[:RECENT_SLOTS]
    return [RecentSlot(day=d, when=f"{d:%m-%d} {s}", daily_url=f"{links.daily(d)}#slots", view=entries[(d, s)])
            for d, s in newest]


def next_slot(now: datetime, schedule: Sequence[str], tz: ZoneInfo) -> NextSlot | None:
    """The next planned slot after ``now``, and how long until it."""
    today = now.astimezone(tz).date()
    for offset in (0, 1, 2):
        day = today + timedelta(days=offset)
        for slot in sorted(schedule):
            at = slot_at(day, slot, tz).scheduled_at
            if at > now:
                seconds = (at - now).total_seconds()
                minutes = -(-int(seconds) // 60)  # rounded up: "in 1 minute", never "in 0 minutes"
                eta = "即将开始" if seconds < 60 else f"{span(minutes * 60)}后"
                prefix = {0: "", 1: "明天 "}.get(offset, f"{day:%m-%d} ")
                return NextSlot(label=f"{prefix}{slot}", eta=eta)
    return None


def expected_slots(page: PageContext) -> list[tuple[date, str]]:
    """The planned slots of the last week that should have a run by now (their grace period is over)."""
    end = page.now - timedelta(minutes=page.settings.late_after_minutes)
    keys = slots_between(end - timedelta(days=MISSED_LOOKBACK_DAYS), end, tuple(page.settings.schedule_slots), page.tz)
    return [(k.run_date, k.slot) for k in keys]


# ----------------------------------------------------------------------------------------------- alerts


@dataclass(frozen=True)
class AlertView:
    title: str
    detail: str
    action: str
    occurrences: int
    delivered: bool
    delivery: str  # "已送达", "发送失败：…", "未送达"
    when: str
    run_url: str | None


def alert_views(rows: Iterable[Row], *, now: datetime, tz: ZoneInfo, links: Links) -> list[AlertView]:
    """Operator alerts (store.operations.alerts_between), newest first, with what to do about each."""
    rows = list(rows)
    actions: dict[str, str] = {}
    if rows:  # alerts.py loads the push channels (apprise): only when there is something to explain
        from include.radar.operations.alerts import CAUSES

        actions = {cause: info.action for cause, info in CAUSES.items()}
    out = []
    for r in rows:
        occurrences = _int(r.get("occurrences")) or 1
        first, last = r.get("first_at"), r.get("last_at")
        when = _when(first, now, tz)
        if occurrences > 1 and last is not None and _when(last, now, tz) != when:
            when = f"{when}–{_when(last, now, tz)}"
        if r.get("delivered"):
            delivery = "已送达"
        elif r.get("delivery_error"):
            delivery = f"发送失败：{error_text(r['delivery_error'], 300)}"
        else:
            delivery = "未送达"
        out.append(AlertView(
            title=short(str(r.get("title") or r.get("cause") or "告警"), 80),
            detail=error_text(r.get("detail"), 600),
            action=actions.get(str(r.get("cause")), ""),
            occurrences=occurrences,
            delivered=bool(r.get("delivered")),
            delivery=delivery,
            when=when,
            run_url=links.dag_run(DAG_ID, r.get("dag_run_id")),
        ))
    return out


# --------------------------------------------------------------------------------------------- services


@dataclass(frozen=True)
class ServiceView:
    name: str
    recorded: bool
    state: str  # a badge class: done, late, failed, pending
    label: str
    when: str
    facts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.state in ("done", "pending") and not self.warnings


_WERSS_STATES = {"ok": ("done", "正常"), "partial": ("late", "部分失败"), "failed": ("failed", "失败")}
_DEEPSEEK_STATES = {"ok": ("done", "正常"), "rate_limited": ("late", "限流（429）"), "failed": ("failed", "调用失败")}


def werss_view(status: Mapping[str, Any], *, now: datetime, tz: ZoneInfo, wechat: Mapping[str, Any] | None = None,
               warn_hours: float = 24, collection: Coverage | None = None, collection_day: str = "今天") -> ServiceView:
    """WeRSS from the last ingest (service_state ``werss:status``), its WeChat login as WeRSS last reported
    it (``werss:wechat``: never scanned, lapsed, lapsing within ``warn_hours``, or valid until when), and the
    day's ``collection``: how many accounts show that WeRSS is collecting them (coverage.py)."""
    if not status:
        return ServiceView("WeRSS", False, "pending", NO_RECORD, "")
    state, label = _WERSS_STATES.get(str(status.get("last_status")), ("pending", "未知"))
    facts, warnings = [], []
    new = _int(status.get("last_new"))
    if new is not None:
        facts.append(f"上次抓到 {new} 篇新文章")
    stalled = _int(status.get("auth_stalled_slots")) or 0
    if stalled:
        warnings.append(f"连续 {stalled} 个时段没有新文章且提示会话过期：可能需要重新扫码授权")
    login = wechat_login_view(wechat or {}, now=now, tz=tz, warn_hours=warn_hours)
    if login.state == "unscanned":
        state, label = "failed", "微信未登录"
    elif login.state == "expired":
        state, label = "failed", "微信登录已过期"
    elif login.state == "expiring" and state == "done":
        state, label = "late", "微信登录即将过期"
    (warnings if login.warning else facts).extend([login.text] if login.text else [])
    if collection is not None and collection.active:
        if collection.covered < collection.active:
            warnings.append(f"{collection_day}：{collection.line()}")
        else:
            facts.append(f"{collection_day} {collection.covered}/{collection.active} 个公众号都有采集到的迹象")
        if collection.nothing_collected and state == "done":
            state, label = "failed", "没有在采集"
    raw = status.get("last_errors")
    errors = [error_text(e, 200) for e in (raw if isinstance(raw, list) else [raw]) if isinstance(e, str) and e]
    return ServiceView("WeRSS", True, state, label, _when(_at(status.get("last_ingest_at")), now, tz),
                       facts, warnings, errors[:3])


def _megabytes(value: Any) -> str:
    size = (_int(value) or 0) / 2**20
    return f"{size / 1024:.1f} GB" if size >= 1024 else f"{size:.0f} MB"


def storage_view(status: Mapping[str, Any], *, retention_days: int, now: datetime, tz: ZoneInfo) -> ServiceView:
    """The radar's database as the daily slot's retention step last saw it (service_state ``retention:status``,
    retention.py): its size and largest table, how many article bodies are pruned, and a backlog the step's time
    bound left (or a step that stopped running)."""
    label = f"正文保留 {retention_days} 天" if retention_days else "全部保留（retention_days = 0）"
    if not status:
        return ServiceView("数据库", False, "pending", label, "", ["日报时段运行后显示占用与清理情况"])
    tables = status.get("tables") if isinstance(status.get("tables"), dict) else {}
    biggest = max(tables.items(), key=lambda kv: _int(kv[1]) or 0, default=None)
    facts = [f"占用 {_megabytes(status.get('database_bytes'))}"
             + (f"（最大的表 {error_text(str(biggest[0]), 40)} {_megabytes(biggest[1])}）" if biggest else "")]
    articles, pruned = _int(status.get("articles")) or 0, _int(status.get("pruned")) or 0
    facts.append(f"文章 {articles:,} 篇，其中 {pruned:,} 篇正文已按保留期清理" if pruned else f"文章 {articles:,} 篇")
    warnings = []
    last = status.get("last") if isinstance(status.get("last"), dict) else {}
    remaining = _int(last.get("remaining")) or 0
    if remaining:
        warnings.append(f"还有 {remaining:,} 篇超过保留期的正文待清理（每天清理 5 分钟，明日继续）")
    elif last:
        facts.append(f"上次清理 {_int(last.get('bodies')) or 0:,} 篇正文，用时 {float(last.get('seconds') or 0):.1f} 秒")
    at = _at(status.get("at"))
    if at is not None and now - at > timedelta(hours=48):
        warnings.append(f"保留期清理 {span((now - at).total_seconds())}没有运行（日报时段之后运行）")
    return ServiceView("数据库", True, "late" if warnings else "done", label, _when(at, now, tz), facts, warnings)


@dataclass(frozen=True)
class LoginView:
    state: str  # ok, expiring, expired, unscanned, unknown (WeRSS does not report it), none (not checked yet)
    text: str
    warning: bool = False


def wechat_login_view(status: Mapping[str, Any], *, now: datetime, tz: ZoneInfo, warn_hours: float) -> LoginView:
    """WeRSS's WeChat login (service_state ``werss:wechat``, watch.wechat_login) as of ``now``: a login
    whose reported expiry has passed since the last check counts as lapsed."""
    if not status:
        return LoginView("none", "")
    checked = _when(_at(status.get("checked_at")), now, tz)
    if not status.get("reported"):
        return LoginView("unknown", "WeRSS 未报告微信登录状态（旧版本）：登录失效只能从采集停止看出"
                         + (f"（{checked} 查询）" if checked else ""))
    if status.get("scanned") is False:
        return LoginView("unscanned", "WeRSS 还没有扫码登录微信：它采集不到任何文章，请到 WeRSS → 扫码授权", True)
    expires = _at(status.get("expires_at"))
    until = _when(expires, now, tz)
    if not status.get("logged_in") or (expires is not None and expires <= now):
        since = f"（{until} 过期）" if expires is not None and expires <= now else ""
        return LoginView("expired", f"微信登录已失效{since}：WeRSS 已停止采集，请到 WeRSS 扫码重新登录", True)
    if expires is None:
        return LoginView("ok", "微信已登录（WeRSS 未给出到期时间）")
    left = (expires - now).total_seconds()
    if left <= warn_hours * 3600:
        return LoginView("expiring", f"微信登录将于 {until} 过期（还剩 {span(left)}）：请在到期前到 WeRSS 扫码续期",
                         True)
    return LoginView("ok", f"微信登录有效至 {until}（还剩 {span(left)}）")


def deepseek_view(
    status: Mapping[str, Any], *, now: datetime, tz: ZoneInfo, slot_names: Mapping[int, str] | None = None
) -> ServiceView:
    """DeepSeek from the last call (service_state ``deepseek:status``): its outcome, a 429 streak, the
    cool-down every call waits out, and the slot throttled to one call at a time."""
    if not status:
        return ServiceView("DeepSeek", False, "pending", NO_RECORD, "")
    last = str(status.get("last_status"))
    state, label = _DEEPSEEK_STATES.get(last, ("pending", "未知"))
    ok_at, error_at = _at(status.get("last_ok_at")), _at(status.get("last_error_at"))
    when = ok_at if last == "ok" else error_at
    facts, warnings, errors = [], [], []
    if ok_at is not None and last != "ok":
        facts.append(f"上次成功 {_when(ok_at, now, tz)}")
    streak = _int(status.get("streak")) or 0
    if streak:
        warnings.append(f"连续 {streak} 次 429 限流")
    until = _at(status.get("cool_down_until"))
    if until is not None and until > now:
        warnings.append(f"冷却中：{_when(until, now, tz)} 前暂停调用")
    throttled = _int(status.get("throttled_slot_run_id"))
    if throttled is not None and streak >= THROTTLE_AFTER:
        name = (slot_names or {}).get(throttled, f"#{throttled}")
        warnings.append(f"时段 {name} 已降为单并发")
    if status.get("last_error"):
        prefix = "" if last != "ok" else f"上次错误（{_when(error_at, now, tz)}）：" if error_at else "上次错误："
        errors.append(prefix + error_text(str(status["last_error"]), 300))
    return ServiceView("DeepSeek", True, state, label, _when(when, now, tz), facts, warnings, errors)


@dataclass(frozen=True)
class CheckView:
    """The last ``cli check`` (service_state ``check:last``): when, its counts, the lines that failed."""

    recorded: bool
    when: str = ""
    passed: int = 0
    warnings: int = 0
    failures: int = 0
    failing: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        return "failed" if self.failures else "late" if self.warnings else "done"


def check_view(status: Mapping[str, Any], *, now: datetime, tz: ZoneInfo) -> CheckView:
    """The check's result as stored; its lines were scrubbed when stored and are scrubbed again, and Jinja escapes
    them (a line quotes what WeRSS or DeepSeek answered)."""
    if not status:
        return CheckView(False)
    raw = status.get("failing")
    failing = [error_text(line, 300) for line in (raw if isinstance(raw, list) else []) if isinstance(line, str)]
    return CheckView(True, _when(_at(status.get("at")), now, tz), _int(status.get("ok")) or 0,
                     _int(status.get("warnings")) or 0, _int(status.get("failures")) or 0, failing[:10])


# ----------------------------------------------------------------------------------------------- health


@dataclass(frozen=True)
class HealthView:
    slots: list[RecentSlot]
    next_slot: NextSlot | None
    alerts: list[AlertView]
    werss: ServiceView
    deepseek: ServiceView
    spend: SpendView
    storage: ServiceView
    silent: dict[str, str]  # mp_id -> why the account counts as quiet
    issues: list[str]  # one line per thing that needs a look, for the section's headline
    check: CheckView = CheckView(False)
    private_issues: list[str] = field(default_factory=list)  # such lines an Airflow login only sees (the spend)
    collection: Coverage | None = None  # the accounts' coverage of the day the WeRSS line speaks of

    @property
    def services(self) -> list[ServiceView]:
        return [self.werss, self.deepseek]


@dataclass(frozen=True)
class HealthFacts:
    """What the health section reads (:func:`gather`): the recent runs and what they cost, the planned slots
    that never ran, today's alerts, the services' last states (service_state), the spend, the quiet accounts,
    and the coverage of ``collection_day`` (its label: 今天, or the date)."""

    recent_runs: Sequence[Row]
    missed: Sequence[tuple[date, str]]
    run_spend: Mapping[int, float]
    alerts: Sequence[Row]
    werss: Mapping[str, Any]
    wechat: Mapping[str, Any]
    deepseek: Mapping[str, Any]
    spent_today: float
    spend_by_day: Mapping[date, float]
    evaluation_spend: tuple[float, float]
    silent_accounts: Sequence[Row]
    storage: Mapping[str, Any]
    check: Mapping[str, Any]
    collection: Coverage | None
    collection_day: str


def health_view(page: PageContext, facts: HealthFacts) -> HealthView:
    now, tz, settings = page.now, page.tz, page.settings
    slots = recent_slots(facts.recent_runs, facts.missed, page, facts.run_spend)
    names = {r["id"]: f"{r['run_date']:%m-%d} {r['slot']}" for r in facts.recent_runs}
    werss_v = werss_view(facts.werss, now=now, tz=tz, wechat=facts.wechat, warn_hours=settings.wechat_login_warn_hours,
                         collection=facts.collection, collection_day=facts.collection_day)
    deepseek_v = deepseek_view(facts.deepseek, now=now, tz=tz, slot_names=names)
    alert_list = alert_views(facts.alerts, now=now, tz=tz, links=page.links)
    spend = spend_view(facts.spent_today, facts.spend_by_day, today=page.today, budget=settings.daily_budget,
                       currency=settings.deepseek_currency, estimated=settings.price_table().estimated,
                       evaluations=facts.evaluation_spend)
    silent = {}
    for a in facts.silent_accounts:
        quiet = (now - a["last_article_at"]).total_seconds() if a.get("last_article_at") else 0
        cadence = a["cadence"].total_seconds() if isinstance(a.get("cadence"), timedelta) else 0
        silent[str(a["mp_id"])] = f"已 {span(quiet)}没有新文章（通常每 {span(cadence)}一篇）"
    issues = [f"{s.when} {s.view.label}" for s in slots if s.view.state in (SLOT_FAILED, SLOT_LATE)]
    if alert_list:
        issues.append(f"今日告警 {len(alert_list)} 条")
    issues += [f"{v.name} {v.label}" for v in (werss_v, deepseek_v) if v.recorded and not v.ok]

    if silent:
        issues.append(f"{len(silent)} 个公众号久未发文")
    storage_v = storage_view(facts.storage, retention_days=settings.retention_days, now=now, tz=tz)
    issues += [f"{storage_v.name}：{w}" for w in storage_v.warnings]
    private = ["今日预算已用尽"] if spend.reached else []
    check_v = check_view(facts.check, now=now, tz=tz)
    if check_v.failures:
        issues.append(f"部署检查 {check_v.failures} 项未通过")
    return HealthView(slots=slots, next_slot=next_slot(now, settings.schedule_slots, tz), alerts=alert_list,
                      werss=werss_v, deepseek=deepseek_v, spend=spend, storage=storage_v, silent=silent, issues=issues,
                      check=check_v, private_issues=private, collection=facts.collection)


def gather(conn: psycopg.Connection, page: PageContext, *, spend_by_day: Mapping[date, float]) -> HealthView:
    """Read what the health section shows (read-only queries on the page's connection) and build it.
    ``spend_by_day`` covers at least the last ``SPEND_DAYS`` days (the overview reads it once for both)."""
    now, tz, today = page.now, page.tz, page.today
    currency = page.settings.deepseek_currency
    runs = store.reports.recent_slot_runs(conn, RECENT_SLOTS)
    # the coverage of the latest day a slot ran (before today's first slot, yesterday's as of its end): a day
    # whose accounts no slot has listed yet would read as a WeRSS collecting nothing, every night
    day = min(today, runs[0]["run_date"]) if runs else today
    missed = store.operations.missed_slots(conn, expected_slots(page), tz)
    return health_view(page, HealthFacts(
        recent_runs=runs,
        missed=missed,
        run_spend=store.operations.slot_spend(conn, [r["id"] for r in runs]),
        alerts=store.operations.alerts_between(conn, today, today),
        werss=store.operations.status(conn, "werss:status"),
        wechat=store.operations.status(conn, "werss:wechat"),
        deepseek=store.operations.status(conn, "deepseek:status"),
        spent_today=store.operations.day_spend(conn, today, currency),
        spend_by_day=spend_by_day,
        evaluation_spend=(store.operations.day_spend(conn, today, currency, evaluations=True), sum(store.operations.spend_by_day(
            conn, today - timedelta(days=SPEND_DAYS - 1), today, currency, evaluations=True).values())),
        silent_accounts=store.articles.silent_accounts(conn, now, SILENT_FACTOR),
        storage=store.operations.status(conn, STORAGE_STATUS),
        check=store.operations.status(conn, CHECK_STATUS),
        collection=watch.coverage_of(conn, day, now),
        collection_day="今天" if day == today else f"{day:%m-%d}",
    ))
