"""The steps of one slot, one function per DAG task. Plain Python: the DAG file only wires them.

Each step takes the small ``slot`` dict that ``open_slot`` returns (ids and flags, never bodies) and
records its outcome on the slot run (``slot_run.step_errors``), so ``close_slot`` can tell how the slot
went from the database alone.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar

from include.radar import (
    alerts,
    analyst,
    batches,
    db,
    decide,
    digest,
    events,
    focus,
    ingest,
    push,
    ranking,
    ratelimit,
    redact,
    signing,
    spending,
    store,
    track_record,
    watch,
    weekly,
)
from include.radar.deadlines import NONE, SlotDeadlines, daily_deadlines, retry_is_pointless
from include.radar.llm import LLMClient, LLMConfigError, RateGate
from include.radar.settings import ConnectionInfo, Settings, check_secret, get_connection, load_settings
from include.radar.slots import SHANGHAI, SlotKey, is_late, slot_at, slot_for
from include.radar.werss import WeRSSAuthError, WeRSSClient, WeRSSError

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


class ConfigurationError(RuntimeError):
    """A connection or parameter is missing or wrong; retrying cannot help."""


class DeadlinePassed(RuntimeError):
    """A step failed after its phase of the daily deadline: a retry would only delay the report."""


@dataclass
class Runtime:
    """What a step needs, resolved inside the task (never at DAG parse time)."""

    settings: Settings
    database_url: str

    @classmethod
    def load(cls) -> Runtime:
        settings = load_settings()
        url = db.database_url(settings.db_conn_id)
        redact.register(db.password_of(url))
        return cls(settings=settings, database_url=url)

    def connect(self) -> Any:
        return db.connect(self.database_url, statement_timeout_s=self.settings.db_statement_timeout_seconds,
                          lock_timeout_s=self.settings.db_lock_timeout_seconds)

    def werss(self) -> WeRSSClient:
        conn = _required(self.settings.werss_conn_id, "WeRSS")
        extra = conn.extra or {}
        where = f"connection {self.settings.werss_conn_id!r}:"
        password = check_secret(conn.password, f"{where} password", header=False)
        access_key = check_secret(extra.get("access_key"), f"{where} extra access_key")
        secret_key = check_secret(extra.get("secret_key"), f"{where} extra secret_key")
        redact.register(password, access_key, secret_key)
        return WeRSSClient(
            _base_url(conn),
            username=conn.login,
            password=password,
            access_key=access_key,
            secret_key=secret_key,
            timeout=self.settings.werss_timeout_seconds,
            max_retries=int(extra.get("max_retries", 3)),
            backoff_seconds=float(extra.get("backoff_seconds", 1.0)),
            token_cache=ingest.db_token_cache(self.connect, f"werss:token:{_base_url(conn)}:{conn.login}"),
        )

    def llm(self, gate: RateGate | None = None, *, connections: int = 20) -> LLMClient:
        conn = get_connection(self.settings.deepseek_conn_id)
        if conn is None:
            raise ConfigurationError(f"the DeepSeek connection {self.settings.deepseek_conn_id!r} is missing")
        extra = conn.extra or {}
        s = self.settings
        api_key = check_secret(conn.password or extra.get("api_key"), f"the DeepSeek API key (connection {s.deepseek_conn_id!r})")
        redact.register(api_key)
        return LLMClient(
            base_url=_base_url(conn) if conn.host else "https://api.deepseek.com",
            api_key=api_key or "",
            model=s.deepseek_model,
            thinking=s.deepseek_thinking,
            reasoning_effort=s.deepseek_reasoning_effort,
            timeout=s.deepseek_timeout_seconds,
            max_retries=s.deepseek_max_retries,
            backoff_seconds=float(extra.get("backoff_seconds", 2.0)),
            max_tokens=s.deepseek_max_tokens,
            rate_limit_wait=s.deepseek_rate_limit_wait_seconds,
            gate=gate,
            max_connections=connections,
        )

    def channels(self, conn_id: str | None = None) -> list[push.Channel]:
        conn = get_connection(conn_id or self.settings.push_conn_id)
        if conn is None:
            return []
        urls = push.parse_urls((conn.extra or {}).get("urls")) or push.parse_urls(conn.password) or push.parse_urls(conn.host)
        channels = push.channels_from(urls)
        for channel in channels:
            redact.register(*push.secret_parts(channel, min_chars=10))
        return channels

    def operator_channels(self) -> tuple[list[push.Channel], bool]:
        return alerts.operator_channels(self.channels(self.settings.ops_push_conn_id), self.channels())

    def alert(self, cause: str, detail: str, slot: dict[str, Any] | None = None, *, day_of: datetime | None = None) -> str:
        """Tell the operator (once per cause and day, the day of ``day_of``, default now; never raises)."""
        return alerts.raise_alert(
            self.connect, self.operator_channels, cause=cause, detail=detail, link=self.canonical_url("/"),
            slot_run_id=(slot or {}).get("slot_run_id"), dag_run_id=(slot or {}).get("dag_run_id"), now=day_of,
        )

    def page_url(self, path: str, now: datetime | None = None) -> str:
        secret = self.settings.link_secret.get_secret_value() if self.settings.link_secret else None
        return signing.page_url(
            self.settings.report_base_url, path, secret, now or datetime.now(UTC), self.settings.remember_me_days
        )

    def canonical_url(self, path: str) -> str:
        return self.settings.report_base_url + path


def _required(conn_id: str, what: str) -> ConnectionInfo:
    conn = get_connection(conn_id)
    if conn is None or not conn.host:
        raise ConfigurationError(f"the {what} connection {conn_id!r} is missing or has no host")
    return conn


def _base_url(conn: ConnectionInfo) -> str:
    host = (conn.host or "").rstrip("/")
    if "://" not in host:
        host = f"http://{host}"
    if conn.port and host.count(":") < 2:
        host = f"{host}:{conn.port}"
    return host


def step(name: str | Callable[..., str]) -> Callable[[F], F]:
    """Record a step's outcome on the slot run: its error when it raises, cleared when it succeeds.

    The step name is the DAG task id (``analyse:<item id>`` for the mapped task), so close_slot can tell a
    failure a step recorded from one Airflow saw without a record.
    """

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def run(rt: Runtime, slot: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            label = name(*args, **kwargs) if callable(name) else name
            try:
                result = func(rt, slot, *args, **kwargs)
            except Exception as exc:
                try:
                    with rt.connect() as conn:
                        store.record_step(conn, slot["slot_run_id"], label, f"{exc.__class__.__name__}: {exc}",
                                          dag_run_id=slot.get("dag_run_id"))
                except Exception:  # noqa: BLE001 - the database may be what failed; keep the original error
                    log.exception("could not record the failure of step %s", label)
                if retry_is_pointless(label, deadlines(slot), datetime.now(UTC)):
                    raise DeadlinePassed(
                        f"{label} failed at the end of its share of the daily deadline ({exc.__class__.__name__}: "
                        f"{exc}); not retried, so that the daily report goes out on time"
                    ) from exc
                raise
            with rt.connect() as conn:
                store.record_step(conn, slot["slot_run_id"], label, None)
            return result

        return run  # type: ignore[return-value]

    return wrap


# ------------------------------------------------------------------------------------------------ steps


def resolve_slot(run_after: datetime, settings: Settings, params: dict[str, Any]) -> tuple[SlotKey, bool]:
    """The slot this run stands for, and whether the operator named it explicitly.

    Scheduled and backfill runs fire exactly on a slot. A manual run may name ``run_date`` and/or ``slot``
    (to redo a slot or rebuild a past day's report); a named slot without a date is its latest occurrence
    at or before the trigger, never a slot still in the future. Without params a manual run stands for the
    latest slot at or before it.
    """
    slot_param = (params.get("slot") or "").strip()
    date_param = (params.get("run_date") or "").strip()
    if slot_param and slot_param not in settings.schedule_slots:
        raise ConfigurationError(f"param slot={slot_param!r} is not one of {list(settings.schedule_slots)}")
    if date_param:
        try:
            day = date.fromisoformat(date_param)
        except ValueError:
            raise ConfigurationError(f"param run_date={date_param!r} is not a YYYY-MM-DD date") from None
        key = slot_at(day, slot_param or settings.daily_slot)
        if key.scheduled_at > run_after:
            raise ConfigurationError(f"param run_date={date_param!r} slot {key.slot} is still in the future")
        return key, True
    if slot_param:
        key = slot_at(run_after.astimezone(SHANGHAI).date(), slot_param)
        if key.scheduled_at > run_after:
            key = slot_at(key.run_date - timedelta(days=1), slot_param)
        return key, True
    return slot_for(run_after, settings.schedule_slots), False


# a manual run's logical date may be this far ahead of its trigger (clocks, a form filled in slowly)
FUTURE_TOLERANCE = timedelta(minutes=1)


def dated_in_the_past(run_type: str, run_after: datetime, triggered_at: datetime | None, settings: Settings) -> bool:
    """Whether a manual run names a past slot by its logical date: a manual backfill of that slot.

    A manual run whose logical date is more than ``late_after_minutes`` before its trigger is the operator
    redoing that slot, not the slot happening now: like a backfill it pushes nothing unless "force publish"
    is chosen. A logical date in the future is refused at once: a slot cannot run before its time (Airflow
    would keep the run queued until then).
    """
    if run_type != "manual" or triggered_at is None:
        return False
    if run_after > triggered_at + FUTURE_TOLERANCE:
        raise ConfigurationError(
            f"the run's logical date {run_after.astimezone(SHANGHAI):%Y-%m-%d %H:%M} (Asia/Shanghai) is in the "
            f"future (triggered at {triggered_at.astimezone(SHANGHAI):%Y-%m-%d %H:%M}): a slot cannot run before its "
            "time; trigger without a logical date to run the latest slot, or pick a past date to redo that slot")
    return triggered_at - run_after > timedelta(minutes=settings.late_after_minutes)


def open_slot(
    rt: Runtime, *, run_after: datetime, run_type: str, dag_id: str | None, dag_run_id: str | None,
    params: dict[str, Any], now: datetime | None = None, triggered_at: datetime | None = None,
) -> dict[str, Any]:
    """``run_after``: the moment the run stands for (its logical date, else when it may run);
    ``triggered_at``: when a manual run was triggered (Airflow's ``run_after``), to tell a past-dated one."""
    try:
        params = decide.apply_action(params, rt.settings.daily_slot)  # the form's one choice, as raw params
    except decide.ActionError as exc:
        raise ConfigurationError(str(exc)) from None
    push_mode = params.get("push_mode") or "auto"
    if push_mode not in decide.PUSH_MODES:
        raise ConfigurationError(f"param push_mode={push_mode!r} is not one of {list(decide.PUSH_MODES)}")
    past_dated = dated_in_the_past(run_type, run_after, triggered_at, rt.settings)
    key, explicit = resolve_slot(run_after, rt.settings, params)
    explicit = explicit or past_dated
    opened_at = datetime.now(UTC)
    is_daily = key.slot == rt.settings.daily_slot
    with rt.connect() as conn:
        started = store.get_slot_started_at(conn, key.run_date, key.slot)
        late = is_late(key, (started or opened_at) if now is None else now, rt.settings.late_after_minutes)
        plan = {"push_mode": push_mode, "run_type": run_type, "explicit": explicit, "late": late}
        # the daily deadline binds the one run that delivers the day's report on time
        bound = is_daily and daily_push_plan(plan)[0] and not store.daily_push_sent(conn, key.run_date)
        phases = daily_deadlines(key.scheduled_at, opened_at, rt.settings.daily_push_deadline_minutes) if bound else NONE
        row = store.open_slot_run(conn, key, run_type=run_type, dag_id=dag_id, dag_run_id=dag_run_id,
                                  deadline_at=phases.push)
        missed = watch.missed_slots(conn, rt.settings, key, opened_at) if run_type == "scheduled" and row["created"] else []
    log.info("slot %s %s: run record %s %s (%s run%s)%s", key.run_date, key.slot, row["id"],
             "opened" if row["created"] else f"reopened (attempt {row['attempts']})", run_type, ", late" if late else "",
             f"; the report is due by {phases.push.astimezone(SHANGHAI):%H:%M:%S}" if phases.push else "")
    if missed:
        rt.alert("scheduler_silent", f"应运行但没有运行记录的时段：{'、'.join(missed)}（发现于 {key.label} 开始时）",
                 {"slot_run_id": row["id"], "dag_run_id": dag_run_id})
    return {
        "slot_run_id": row["id"],
        "run_date": key.run_date.isoformat(),
        "slot": key.slot,
        "scheduled_at": key.scheduled_at.isoformat(),
        "is_daily": is_daily,
        "run_type": run_type,
        "late": late,
        "push_mode": push_mode,
        "explicit": explicit,
        "past_dated": past_dated,
        "retry_failed": bool(params.get("retry_failed")),
        "dag_run_id": dag_run_id,
        "deadlines": phases.as_xcom(),
    }


def deadlines(slot: dict[str, Any]) -> SlotDeadlines:
    return SlotDeadlines.from_xcom(slot.get("deadlines"))


def step_deadline(slot: dict[str, Any], step_name: str) -> float | None:
    """The end of ``step_name``'s phase as a ``time.monotonic()`` value (what the clients count in), or None."""
    at = deadlines(slot).for_step(step_name)
    if at is None:
        return None
    return time.monotonic() + (at - datetime.now(UTC)).total_seconds()


def _key(slot: dict[str, Any]) -> SlotKey:
    return SlotKey(date.fromisoformat(slot["run_date"]), slot["slot"], datetime.fromisoformat(slot["scheduled_at"]))


@step("ingest")
def ingest_articles(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    client = rt.werss()
    client.deadline = step_deadline(slot, "ingest")
    summary = ingest.IngestSummary(slot=slot["slot"])
    try:
        ingest.ingest_slot(
            rt.connect, client, slot_run_id=slot["slot_run_id"], key=_key(slot),
            window_days=rt.settings.window_days, max_articles=rt.settings.max_articles_per_slot,
            page_size=rt.settings.werss_page_size, max_pages=rt.settings.werss_max_pages, summary=summary,
        )
    except WeRSSAuthError as exc:  # a refused login, or a 401 that a fresh login did not cure
        watch.werss_outcome(rt, slot, summary, failed=str(exc))
        rt.alert("werss_auth", f"WeRSS 拒绝登录或授权：{exc}", slot)
        raise
    except WeRSSError as exc:
        watch.werss_outcome(rt, slot, summary, failed=str(exc))
        raise
    watch.werss_outcome(rt, slot, summary, failed=None)
    watch.wechat_login(rt, slot, client)
    watch.silent_accounts(rt, slot, _key(slot).scheduled_at)
    return summary.as_xcom()


def own_articles(key: SlotKey, settings: Settings) -> tuple[datetime, datetime]:
    """(start, end] of the publication times a backfill or a redo of ``key`` analyses: after the planned
    slot before it, up to its own time. Each article has exactly one such slot, so backfill runs going at
    once, or out of order, never take each other's articles; older ones wait for the next live slot."""
    previous = slot_for(key.scheduled_at - timedelta(seconds=1), settings.schedule_slots)
    return previous.scheduled_at, key.scheduled_at


@step("select_articles")
def articles_to_analyse(rt: Runtime, slot: dict[str, Any]) -> list[dict[str, Any]]:
    """Pending articles and earlier failures under the attempt limit, oldest first, within the slot's cap."""
    with rt.connect() as conn:
        expired = store.expire_leases(conn)
        if expired:
            log.warning("%d analyses whose worker was lost (lease expired) are failed, the attempt counted", expired)
        if slot.get("retry_failed"):
            log.info("slot %s: retry_failed requested: %d failed articles get fresh attempts",
                     slot["slot"], store.reset_failed(conn))
        profile = focus.from_row(store.get_profile(conn))
        reopened = store.recheck_excluded(conn, _key(slot).scheduled_at - timedelta(hours=focus.RECHECK_HOURS),
                                          profile.exclusion, focus.MATCH_CHARS)
        if reopened:
            log.info("slot %s: the reader's changed rules give back %d excluded articles", slot["slot"], reopened)
        # a backfill or a redo takes only its own slot's articles, whatever order its runs go in
        own_only = slot["run_type"] == "backfill" or slot["explicit"]
        rows = store.items_to_analyse(
            conn, max_attempts=rt.settings.max_analysis_attempts, limit=rt.settings.max_articles_per_slot,
            published_between=own_articles(_key(slot), rt.settings) if own_only else None,
        )
        rows = _without_excluded(conn, slot, profile, rows)
        spent = spending.budget_reached(conn, rt.settings)
        budget_note = None
        if rows and spent is not None:
            store.defer_for_budget(conn, slot["slot_run_id"], [r["id"] for r in rows], spending.today())
            store.add_slot_warnings(conn, slot["slot_run_id"], "select_articles", [
                f"budget: {len(rows)} analyses left for the next day (the day's LLM budget is reached)"])
            budget_note = (f"今日已花费 {rt.settings.price_table().money(spent)}，达到预算 "
                      f"{rt.settings.price_table().money(rt.settings.daily_budget)}；{len(rows)} 篇顺延到次日")
            log.warning("slot %s: %s", slot["slot"], budget_note)
            rows = []
        left = step_deadline(slot, "select_articles")
        if rows and left is not None and left - time.monotonic() < analyst.MIN_CALL_SECONDS:
            store.add_deferred(conn, slot["slot_run_id"], len(rows))
            store.add_slot_warnings(conn, slot["slot_run_id"], "select_articles", [
                f"deadline: {len(rows)} analyses left for later slots (the daily report is due first)"])
            log.warning("slot %s: the analysis deadline has passed; %d articles wait for later slots",
                        slot["slot"], len(rows))
            return []
    if budget_note:
        rt.alert("budget", budget_note, slot)
    retries = sum(1 for r in rows if r["analyzed_status"] == store.FAILED)
    log.info("slot %s: %d articles to analyse (%d retries of earlier failures)", slot["slot"], len(rows), retries)
    return [{"item_id": r["id"], "title": r["title"][:80]} for r in rows]


def _without_excluded(conn: Any, slot: dict[str, Any], profile: focus.Profile,
                      rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows the reader's rules (focus.py) let through; the others are marked excluded and counted on the
    slot, before anything is paid for them."""
    if not rows or not profile.rules:
        return rows
    texts = store.texts_of(conn, [r["id"] for r in rows], focus.MATCH_CHARS)
    reasons = {}
    for r in rows:
        text = texts.get(r["id"])
        reason = profile.exclusion(text["title"], text["text"]) if text else None
        if reason:
            reasons[r["id"]] = reason
    if reasons:
        marked = store.exclude_items(conn, slot["slot_run_id"], reasons)
        log.info("slot %s: %d articles excluded by the reader's rules, not sent to the LLM", slot["slot"], marked)
    return [r for r in rows if r["id"] not in reasons]


def analysis_batches(rt: Runtime, slot: dict[str, Any]) -> list[dict[str, Any]]:
    """The articles to analyse, split into the batches the mapped analyse task runs (include/radar/batches.py)."""
    return batches.plan(articles_to_analyse(rt, slot), rt.settings.analysis_tasks)


# how long past the batch's own time its claims stay renewed (storing the last answers)
CLAIM_GRACE_SECONDS = 120


def analyse_batch(rt: Runtime, slot: dict[str, Any], batch: dict[str, Any], *,
                  seconds: float | None = None, attempt: tuple[str, int, int] | None = None) -> dict[str, Any]:
    """One mapped task: its batch's articles, ``ceil(llm_concurrency / analysis_tasks)`` at a time, each with
    its own claim, attempts and step record. ``seconds``: the batch's time (within its task's timeout); a
    call still running then is interrupted and its article, like those not started, left for a later slot.
    ``attempt``: (task id, map index, try number) of this task try, which owns the claims (by default the
    running task instance's); their leases are renewed while the batch runs."""
    from include.radar.airflow_support import not_retryable, task_try  # noqa: PLC0415 - Airflow's types

    until = None if seconds is None else time.monotonic() + seconds
    owner = claimer(slot, attempt or task_try())
    threads = batches.width(rt.settings.llm_concurrency, rt.settings.analysis_tasks)
    try:  # one SDK client (one connection per thread) for the batch; a bad key surfaces in each article instead
        shared: LLMClient | None = rt.llm(connections=threads)
    except Exception:  # noqa: BLE001
        shared = None
    with analyst.ClaimKeeper(rt.connect, owner, until=None if until is None else until + CLAIM_GRACE_SECONDS):
        return batches.run(
            batch["articles"],
            lambda article: analyse_article(rt, slot, article, llm=shared, until=until, owner=owner),
            threads=threads, stop_on=not_retryable(),
        )


@step(lambda article, **_: f"analyse:{article['item_id']}")
def analyse_article(rt: Runtime, slot: dict[str, Any], article: dict[str, Any], *, llm: LLMClient | None = None,
                    until: float | None = None, owner: str | None = None) -> dict[str, Any]:
    def streak(count: int, error: str) -> None:
        rt.alert("deepseek", f"DeepSeek 连续 {count} 次限流（429）：{error}；本时段改为逐篇调用", slot)

    gate = ratelimit.DatabaseGate(rt.connect, slot["slot_run_id"], on_streak=streak)
    try:
        outcome = analyst.analyse_item(
            rt.connect, (lambda: llm.with_gate(gate)) if llm else (lambda: rt.llm(gate)),
            item_id=article["item_id"], slot_run_id=slot["slot_run_id"],
            claimer=owner or claimer(slot), settings=rt.settings,
            deadline=min((d for d in (step_deadline(slot, "analyse"), until) if d is not None), default=None),
            on_budget=lambda reason: rt.alert("budget", reason, slot),
        )
    except LLMConfigError as exc:
        rt.alert("deepseek", f"DeepSeek 配置或账户问题：{exc}", slot)
        raise
    return outcome.as_xcom()


def claimer(slot: dict[str, Any], attempt: tuple[str, int, int] | None = None) -> str:
    """Who holds an article's claim: the task try ``attempt`` (task id, map index, try number) of the DAG run,
    so a retry never takes over the claim of a try that still lives; the DAG run alone outside a task."""
    run = slot.get("dag_run_id") or f"slot_run:{slot['slot_run_id']}"
    return store.claim_owner(run, *attempt) if attempt else run


def _slot_summary(rt: Runtime, slot: dict[str, Any]) -> decide.SlotSummary:
    with rt.connect() as conn:
        analyses = store.slot_analyses(conn, slot["slot_run_id"])
        failed = store.slot_failed_count(conn, slot["slot_run_id"])
        event_ids = sorted({events.event_of(a) for a in analyses})
        others = store.event_members(conn, event_ids)
        reported = store.pushed_events(conn, event_ids, slot["slot_run_id"])
        weights = ranking.learn(store.feedback_for_ranking(conn, datetime.now(UTC)),
                                store.outcome_means(conn, ranking.OUTCOME_HORIZON), rt.settings.outcome_min_picks)
    analyses = ranking.annotate(analyses, weights)  # the reader's watchlist and feedback order the candidates
    return decide.summarise(analyses, failed, rt.settings.push_score_threshold,
                            [o for o in others if o["slot_run_id"] != slot["slot_run_id"]], reported)


@step("summarise")
def summarise_slot(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    error = None
    try:
        grouped = events.group_new(rt.connect)  # one entry per real-world event, before the push decision
    except Exception as exc:  # noqa: BLE001 - recorded (the slot fails, visibly); the push goes on ungrouped
        log.exception("grouping the new analyses into events failed; this slot decides on them one by one")
        grouped, error = 0, f"{type(exc).__name__}: {exc}"
    with rt.connect() as conn:  # a rerun that groups cleanly clears an earlier run's error
        store.record_step(conn, slot["slot_run_id"], "group_events", error, dag_run_id=slot.get("dag_run_id"))
    summary = _slot_summary(rt, slot)
    if grouped:
        log.info("grouped %d new analyses into events; this slot: %d folded into another's entry, %d events "
                 "already reported by an earlier slot", grouped, summary.grouped, summary.already_reported)
    if summary.unverified:
        with rt.connect() as conn:
            store.add_slot_warnings(conn, slot["slot_run_id"], "summarise", [
                f"evidence: {summary.unverified} analyses had unverifiable evidence (not pushed)"])
    if summary.failed >= 2 and summary.failed * 2 > summary.failed + summary.analysed:
        rt.alert("deepseek", f"本时段 {summary.failed + summary.analysed} 篇分析中 {summary.failed} 篇失败", slot)
    log.info("slot %s: %d analysed, %d failed, %d ≥ %d, best %s (analysis %s)", slot["slot"], summary.analysed,
             summary.failed, summary.above_threshold, summary.threshold, summary.max_score, summary.top_analysis_id)
    return summary.as_xcom()


def choose_path(slot: dict[str, Any], summary: dict[str, Any] | None) -> decide.Decision:
    """Pure: needs no database, so the daily path is taken even when everything before failed."""
    return decide.decide(
        decide.SlotSummary(**summary) if summary else None,
        is_daily=slot["is_daily"], run_type=slot["run_type"], push_mode=slot["push_mode"], late=slot["late"],
        explicit=slot["explicit"],
    )


def sweep_pushes(rt: Runtime, slot: dict[str, Any]) -> push.SweepReport | None:
    """Account for the pushes whose sender died (push.sweep): delivered, failed, or delivery unknown — then
    tell the operator, once per cause and day, of any that could not be delivered or whose delivery is unknown.
    Run by every slot's push step and by close_slot; never raises (it must not cost the slot its push)."""
    try:
        channels = [*rt.channels(), *rt.channels(rt.settings.ops_push_conn_id)]
        report = push.sweep(rt.connect, channels, stale_after=timedelta(minutes=rt.settings.late_after_minutes))
    except Exception:  # noqa: BLE001 - the next push step or close tries again
        log.exception("sweeping the pending pushes failed")
        return None

    def listed(rows: list[dict[str, Any]]) -> str:
        return "；".join(f"{r['report_date']} {r['slot']} {r['push_type']}「{r['title']}」→ {r['channel']}"
                        + (f"（{r['error']}）" if r.get("error") and r["status"] != store.NOTE_UNKNOWN else "")
                        for r in rows[:5]) + (f" 等 {len(rows)} 条" if len(rows) > 5 else "")

    if report.unknown:
        rt.alert("push_unknown", f"发送已开始、结果未记录的推送：{listed(report.unknown)}", slot)
    if report.failed:
        rt.alert("push_undelivered", f"发送进程中断后未能送达的推送：{listed(report.failed)}", slot)
    return report


@step("push_opportunity")
def push_opportunity(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    sweep_pushes(rt, slot)
    summary = _slot_summary(rt, slot).as_xcom()
    decision = choose_path(slot, summary)
    with rt.connect() as conn:
        store.set_slot_decision(conn, slot["slot_run_id"], "push", {"reason": decision.reason, **decision.detail})
    count = summary["above_threshold"] or 1
    path = f"/analysis/{summary['top_analysis_id']}"
    unverified = not summary.get("top_verified", True)  # only a forced push gets here
    message = push.Message(
        title=decide.opportunity_title(slot["slot"], count, summary["max_score"]),
        lines=[decide.first_sentence(summary["top_summary"]) + ("（证据未核实）" if unverified else ""),
               *decide.watch_line(summary.get("top_watch") or []),
               *decide.sources_line(summary.get("top_sources") or [])],
        link=rt.page_url(path),
    )
    forced = slot["push_mode"] == "force"
    report = push.deliver(
        rt.connect, rt.channels(), message, report_date=date.fromisoformat(slot["run_date"]), slot=slot["slot"],
        push_type="opportunity", target_url=rt.canonical_url(path), slot_run_id=slot["slot_run_id"],
        nonce=(slot["dag_run_id"] or "") if forced else "", identity="",  # one alert per slot, whatever its top
    )
    if report.failed:
        raise push.PushFailed(f"push failed for {', '.join(report.failed)}; a retry resends only to those")
    return report.as_xcom()


@step("skip_push")
def record_skip(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    sweep_pushes(rt, slot)
    decision = choose_path(slot, _slot_summary(rt, slot).as_xcom())
    with rt.connect() as conn:
        store.set_slot_decision(conn, slot["slot_run_id"], "silent", {"reason": decision.reason, **decision.detail})
    log.info("slot %s: no push: %s", slot["slot"], decision.reason)
    return {"reason": decision.reason}


REPORT_STEPS = ("build_daily_report", "push_daily_report", "weekly_summary", "track_record")
# the weekly digest call's own bound: it runs after the daily push, so no daily phase bounds it; the task
# times out at 10 minutes, and this leaves the push its share of them
WEEKLY_DIGEST_SECONDS = 5 * 60


def _upstream_errors(rt: Runtime, slot: dict[str, Any]) -> list[str]:
    """The errors of this slot's steps before the report (not the report's own earlier tries)."""
    with rt.connect() as conn:
        row = store.get_slot_run(conn, slot["slot_run_id"])
    errors = (row["step_errors"] or {}) if row else {}
    return [f"{slot['slot']} {k}: {v}" for k, v in sorted(errors.items()) if k not in REPORT_STEPS]


@step("build_daily_report")
def build_daily_report(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    return digest.build_report(
        rt.connect, rt.llm, day=date.fromisoformat(slot["run_date"]), slot_run_id=slot["slot_run_id"],
        settings=rt.settings, analysis_url=lambda i: rt.canonical_url(f"/analysis/{i}"),
        upstream_errors=_upstream_errors(rt, slot), deadline=step_deadline(slot, "build_daily_report"),
    )


def daily_push_plan(slot: dict[str, Any]) -> tuple[bool, str]:
    """Pure: whether the daily report is pushed by this run, and why."""
    if slot["push_mode"] == "suppress":
        return False, "push suppressed by the trigger's push_mode=suppress"
    if slot["run_type"] == "backfill":
        return False, "backfill runs build reports and push nothing"
    if slot["push_mode"] == "force":
        return True, "push forced by the trigger's push_mode=force"
    if slot["explicit"]:
        return False, "slot named by the operator (rebuild): pushed only with push_mode=force"
    return True, "the daily report is always pushed" + (" (late)" if slot["late"] else "")


@step("push_daily_report")
def push_daily_report(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    """Push the /daily/{date} link whatever happened before; the stats come from the database."""
    if not slot["is_daily"]:  # reached only when the branch itself failed in a daytime slot
        return {"reason": "not the daily slot"}
    sweep_pushes(rt, slot)
    should_push, reason = daily_push_plan(slot)
    with rt.connect() as conn:
        report = store.get_daily_report(conn, date.fromisoformat(slot["run_date"]))
        store.set_slot_decision(conn, slot["slot_run_id"], "daily_push" if should_push else "silent",
                                {"reason": reason, "report_status": report["status"] if report else None})
    if not should_push:
        log.info("daily report %s: not pushed: %s", slot["run_date"], reason)
        return {"reason": reason}
    forced = slot["push_mode"] == "force"
    return _push_daily(rt, date.fromisoformat(slot["run_date"]), slot, late=slot["late"],
                       nonce=(slot["dag_run_id"] or "") if forced else "")


def _push_daily(rt: Runtime, day: date, slot: dict[str, Any], *, late: bool, nonce: str = "") -> dict[str, Any]:
    """Send the daily message of ``day`` through the notification log (its msg_uuid does not depend on which
    run sends it, so a catch-up and the real 22:00 can never both deliver)."""
    with rt.connect() as conn:
        report = _report_to_push(conn, day, slot)
    stats = report["stats"] or _stats_from_database(rt, day)
    path = f"/daily/{day.isoformat()}"
    lines = [f"分析 {stats.get('analysed', 0)} 篇，机会 {stats.get('opportunities', 0)} 条，失败 {stats.get('failed', 0)} 篇"
             + (f"，待分析 {stats['pending']} 篇" if stats.get("pending") else "")]
    if stats.get("budget_deferred"):
        lines.append(f"今日 LLM 预算用尽，{stats['budget_deferred']} 篇顺延到次日分析")
    lines += decide.coverage_line(stats)
    lines += decide.top_lines(report["digest_json"])
    lines += decide.daily_notes(built=report["status"] != store.REPORT_FAILED,
                                partial=report["status"] == store.REPORT_PARTIAL, digest_json=report["digest_json"])
    message = push.Message(
        title=decide.daily_title(day, stats.get("opportunities", 0), stats.get("max_score"), late=late),
        lines=lines, link=rt.page_url(path),
    )
    delivery = push.deliver(
        rt.connect, rt.channels(), message, report_date=day, slot=rt.settings.daily_slot, push_type="daily",
        target_url=rt.canonical_url(path), slot_run_id=slot["slot_run_id"], nonce=nonce,
    )
    if delivery.failed:
        raise push.PushFailed(f"daily push failed for {', '.join(delivery.failed)}; a retry resends only to those")
    return delivery.as_xcom()


@step("weekly_summary")
def weekly_summary(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    """Sunday's 22:00, after the daily push: the week's summary (weekly.py), pushed once by the daily rules.
    Any other slot returns at once. A failure here is this step's (recorded, the run fails), never the daily
    push's: that one has gone out before."""
    day = date.fromisoformat(slot["run_date"])
    if not weekly.is_weekly_slot(day, slot["is_daily"]):
        return {"reason": "the weekly summary is built at Sunday's daily slot"}
    monday, _ = weekly.week_of(day)
    row = weekly.build(rt.connect, rt.llm, monday=monday, slot_run_id=slot["slot_run_id"], settings=rt.settings,
                       analysis_url=lambda i: rt.canonical_url(f"/analysis/{i}"),
                       deadline=time.monotonic() + WEEKLY_DIGEST_SECONDS)
    should_push, reason = daily_push_plan(slot)
    if not should_push:
        log.info("weekly summary %s: not pushed: %s", monday, reason)
        return {"week_start": monday.isoformat(), "reason": reason}
    path = f"/weekly/{monday.isoformat()}"
    message = push.Message(title=weekly.title(monday, row["stats"] or {}), lines=weekly.lines(row),
                           link=rt.page_url(path))
    forced = slot["push_mode"] == "force"
    delivery = push.deliver(
        rt.connect, rt.channels(), message, report_date=day, slot=rt.settings.daily_slot, push_type="weekly",
        target_url=rt.canonical_url(path), slot_run_id=slot["slot_run_id"],
        nonce=(slot["dag_run_id"] or "") if forced else "",
    )
    if delivery.failed:
        raise push.PushFailed(f"weekly push failed for {', '.join(delivery.failed)}; a retry resends only to those")
    return {"week_start": monday.isoformat(), **delivery.as_xcom()}


@step("track_record")
def follow_picks(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    """After the daily push, whatever became of it: the picks followed in the market (track_record.py). A
    failing price source is a warning and one operator alert a day; the next day's run retries."""
    return track_record.daily(rt.connect, rt.settings, slot, lambda detail: rt.alert("market_data", detail, slot))


def _stats_from_database(rt: Runtime, day: date) -> dict[str, Any]:
    """The day's counts when the report step failed; none at all when even they cannot be had (the push
    still goes out: it is the one message the reader gets every day)."""
    try:
        with rt.connect() as conn:
            return digest.gather(conn, day, rt.settings.push_score_threshold, rt.settings.deepseek_currency).stats
    except Exception:  # noqa: BLE001 - whatever broke the report must not also stop its push
        log.exception("the day's counts could not be gathered for the daily push; pushing without them")
        return {}


def _report_to_push(conn: Any, day: date, slot: dict[str, Any]) -> dict[str, Any]:
    """The report row the push describes. When this run's build step failed, the row says so (status
    failed, with the error) so the page and the push agree: "generation failed" only when nothing was built.
    """
    report = store.get_daily_report(conn, day)
    run = store.get_slot_run(conn, slot["slot_run_id"]) if slot.get("slot_run_id") else None
    build_error = ((run or {}).get("step_errors") or {}).get("build_daily_report")
    if report is not None and not build_error:
        return report
    return store.mark_report_failed(conn, day, build_error or "the daily report was not built", slot.get("slot_run_id"))


@step("catch_up_daily_report")
def catch_up_daily_report(rt: Runtime, slot: dict[str, Any]) -> dict[str, Any]:
    """Make up for a daily slot that never ran (scheduler down across 22:00, DAG unpaused the next morning).

    With catchup off Airflow runs only the latest missed tick, so yesterday's report could be skipped for
    good. The first run of the next day that finds yesterday's slots but no daily slot run builds that
    report and pushes it, marked late. A day with no runs at all (the radar was off) is left alone.
    """
    if slot["run_type"] == "backfill" or slot["explicit"] or slot["push_mode"] == "suppress":
        return {"reason": "not for backfills, redos or suppressed runs"}
    yesterday = date.fromisoformat(slot["run_date"]) - timedelta(days=1)
    with rt.connect() as conn:
        runs = {r["slot"] for r in store.slot_runs_for_day(conn, yesterday)}
        report = store.get_daily_report(conn, yesterday)
    if not runs or rt.settings.daily_slot in runs:
        return {"reason": "nothing to make up"}
    log.warning("the %s slot of %s never ran: building and pushing its report now, marked late",
                rt.settings.daily_slot, yesterday)
    if report is None:
        digest.build_report(
            rt.connect, rt.llm, day=yesterday, slot_run_id=None, settings=rt.settings,
            analysis_url=lambda i: rt.canonical_url(f"/analysis/{i}"),
        )
    return _push_daily(rt, yesterday, slot, late=True)


# a report rebuilt by a late-closing backfill slot gets this long for its digest call (else the database summary)
REBUILD_DIGEST_SECONDS = 120


def _account_for_late_slot(rt: Runtime, slot: dict[str, Any]) -> None:
    """A backfill or redo of a daytime slot that analysed something after its day's report was built (backfill
    runs going at once, or out of order) rebuilds that report, without a push, so it accounts for the slot."""
    if slot["is_daily"] or not (slot["run_type"] == "backfill" or slot["explicit"]):
        return
    day = date.fromisoformat(slot["run_date"])
    with rt.connect() as conn:
        stale = store.report_predates_slot(conn, day, slot["slot_run_id"])
    if not stale:
        return
    log.info("the %s report was built before this %s slot finished: rebuilding it (no push)", day, slot["slot"])
    error = None
    try:
        digest.build_report(rt.connect, rt.llm, day=day, slot_run_id=slot["slot_run_id"], settings=rt.settings,
                            analysis_url=lambda i: rt.canonical_url(f"/analysis/{i}"),
                            deadline=time.monotonic() + REBUILD_DIGEST_SECONDS)
    except Exception as exc:  # noqa: BLE001 - recorded on the slot (it fails), the close goes on
        log.exception("rebuilding the %s report failed", day)
        error = f"{type(exc).__name__}: {exc}"
    with rt.connect() as conn:  # a clean rebuild clears an earlier run's error
        store.record_step(conn, slot["slot_run_id"], "rebuild_daily_report", error, dag_run_id=slot.get("dag_run_id"))


def close_slot(rt: Runtime, slot: dict[str, Any], failed_tasks: list[str]) -> dict[str, Any]:
    """Write the slot's outcome. Task failures Airflow saw but no step recorded count too. Pushes whose sender
    died are accounted for first (sweep_pushes)."""
    sweep_pushes(rt, slot)
    _account_for_late_slot(rt, slot)
    with rt.connect() as conn:
        # every analyse task of this run has ended: a claim any of its tries still holds was killed mid-call
        reaped = store.reap_claims(conn, claimer(slot))
        if reaped:
            log.warning("%d analyses of this run ended without finishing (killed or timed out): failed, counted",
                        reaped)
        recorded = {k.split(":")[0] for k in (store.get_slot_run(conn, slot["slot_run_id"])["step_errors"] or {})}
        for task_id in failed_tasks:
            if task_id not in recorded:  # killed before it could record (timeout, lost worker)
                store.record_step(conn, slot["slot_run_id"], task_id, "failed in Airflow",
                                  dag_run_id=slot.get("dag_run_id"))
        row = store.close_slot_run(conn, slot["slot_run_id"], rt.settings.push_score_threshold)
        store.refresh_slots_done(conn, row["run_date"])
        undelivered = (slot["is_daily"] and daily_push_plan(slot)[0]
                       and not store.daily_push_sent(conn, date.fromisoformat(slot["run_date"])))
    if undelivered:
        errors = (row["step_errors"] or {})
        why = errors.get("push_daily_report") or errors.get("build_daily_report") or "the push step did not run"
        rt.alert("daily_undelivered", f"{slot['run_date']} 的日报没有送达：{why}", slot,
                 day_of=datetime.fromisoformat(slot["scheduled_at"]))  # the report's day, even after midnight
    outcome = "success" if row["status"] == store.SUCCESS else "failed"
    log.info("slot %s %s closed as %s: %d new, %d analysed, %d failed, %d opportunities, %d pushed%s",
             slot["run_date"], slot["slot"], outcome, row["new_count"], row["analysed_count"], row["failed_count"],
             row["opportunity_count"], row["pushed_count"], f"; errors: {row['error']}" if row["error"] else "")
    return {"status": outcome, "error": row["error"]}
