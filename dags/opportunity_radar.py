"""### Opportunity Radar: five slots a day over WeChat articles

At 07:00, 12:00, 14:00, 18:00 and 22:00 (Asia/Shanghai) one run: **open_slot** (the slot's record) →
**ingest** (new WeRSS articles, cleaned) → **select_articles → analyse[]** (batches, DeepSeek) → **summarise** →
**choose_path**: daytime, push the best analysis at or over the threshold, else stay silent; 22:00, build the
daily report and always push its link. After the daily push: **weekly_summary** (Sunday), **track_record**,
**retention**; **catch_up_daily_report** if yesterday's never ran; **close_slot** fails the run if a step failed.

Manual runs take an `action` (run / redo / rebuild the report / force publish / silent), an optional `run_date`
and `slot`, and `retry_failed`. Logic lives in `include/radar/`; see docs/architecture.md.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import (
    AsyncCallback,
    CronTriggerTimetable,
    DeadlineAlert,
    DeadlineReference,
    Param,
    TriggerRule,
    dag,
    get_current_context,
    task,
)

from include.radar import DAG_ID
from include.radar.core.settings import load_settings, parse_time_lookup
from include.radar.core.slots import SHANGHAI
from include.radar.pushes.decide import ACTIONS, BUILD_DAILY, PUSH_OPPORTUNITY, SKIP_PUSH
from include.radar.seam.assets import DAILY_REPORT_ALIAS, OPPORTUNITY_ALIAS, emit
from include.radar.seam.callbacks import AlertNotifier, mend_dag_test
from include.radar.seam.support import branch, failed_tasks, opened_slot, run_step, task_try

# The schedule and the daily deadline are the only settings read at parse time, and only from the
# environment (no Variable.get).
PARSE_TIME = ("schedule_slots", "daily_push_deadline_minutes", "daily_deadline_alert")
SLOTS = load_settings(parse_time_lookup(PARSE_TIME))
ANALYSE_TIMEOUT = timedelta(minutes=45)
BATCH_MARGIN = timedelta(minutes=1)

DEFAULT_ARGS = {
    "retries": 2,
    "retry_delay": timedelta(minutes=1),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=15),
    "execution_timeout": timedelta(minutes=10),  # every task has one; most set their own below
    # a task that failed for good tells the operator (once per cause and day)
    "on_failure_callback": AlertNotifier(),
}


def trigger_form(slots: tuple[str, ...]) -> dict[str, Param]:
    """The form of a manual run (Trigger in the UI): a title, a description and labelled choices for every param."""
    return {
        "action": Param(
            "run", enum=list(ACTIONS), title="操作 / Action",
            description="正常运行：按通常的规则推送（有达到阈值的机会才推送，每个时段至多一次；时段已过 "
                        "late_after_minutes（默认 30 分钟）的不推送，补跑不推送）；重做该时段：重新分析所选时段，不推送；"
                        "重建日报：重建所选日期（默认最近一天）的日报，不推送；强制推送：低于阈值、迟到或补跑也推送；"
                        "运行但不推送：只记录",
            values_display=ACTIONS,
        ),
        "run_date": Param(
            None, type=["null", "string"], format="date", title="日期 / Date",
            description="可不填。留空：触发时刻之前的最近一个时段；填写 YYYY-MM-DD：那一天的时段（默认 22:00）",
        ),
        "slot": Param(
            None, type=["null", "string"], enum=[None, *slots], title="时段 / Slot",
            description="可不选。要运行或重做的时段（正常运行也按通常的规则推送）；不选：触发时刻之前的最近一个时段，"
                        "或给定日期的 22:00",
            values_display={None: "默认（最近的时段）", **{s: s for s in slots}},
        ),
        "retry_failed": Param(
            False, type="boolean", title="重试失败的分析 / Retry failed analyses",
            description="可不勾选。给所有分析失败的文章一组新的尝试次数（例如 DeepSeek 故障之后）",
        ),
    }


def daily_deadline(minutes: int, alert: bool) -> DeadlineAlert | None:
    """The triggerer checks the daily run at its deadline (plus a minute): a report not delivered by then is
    alerted; the run itself bounds its steps (include/radar/core/deadlines.py)."""
    if not alert:
        return None
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_LOGICAL_DATE,
        interval=timedelta(minutes=minutes + 1),
        callback=AsyncCallback("include.radar.seam.callbacks.daily_deadline_missed"),
    )


# ------------------------------------------------------------------------ the tasks: each one call into a step


# open_slot is the run's setup: when it fails (database down, a bad param) every other task is
# upstream_failed at once, whatever its trigger rule, instead of each one failing and retrying on its own
@task(retries=2, retry_delay=timedelta(seconds=15), retry_exponential_backoff=False,
      execution_timeout=timedelta(minutes=2))
def open_slot() -> dict:
    # scheduled and backfill runs: logical_date == run_after == the tick; a manual run may name a
    # logical date (that slot: a past one is a manual backfill, a future one is refused) or none (the
    # latest slot before it was triggered; its run_after is the trigger time)
    ctx = get_current_context()
    run = ctx["dag_run"]
    return run_step(
        "open_slot", run_after=run.logical_date or run.run_after, run_type=str(run.run_type).split(".")[-1].lower(),
        dag_id=run.dag_id, dag_run_id=run.run_id, params=dict(ctx["params"]), triggered_at=run.run_after,
    )


@task(execution_timeout=timedelta(minutes=30))
def ingest(slot: dict) -> dict:
    return run_step("ingest", slot)


# select_articles, summarise, choose_path and push_daily_report run after a failed upstream too (the
# report is pushed every day). They read the slot themselves instead of taking it as an argument: a
# setup's direct downstream tasks must be all_success, and as indirect downstreams they are still
# stopped at once when open_slot fails.
@task(trigger_rule=TriggerRule.ALL_DONE, execution_timeout=timedelta(minutes=5))
def select_articles() -> list[dict]:
    return run_step("select_articles", opened_slot())


# one mapped task per batch of articles (include/radar/analysis/batches.py): a task process per article cost
# seconds of start-up each. A batch runs its articles in threads, each with its own claim, attempts and
# step record; a retry (or a clear) analyses only what is unfinished. The batch ends its calls a minute
# before this timeout (their articles left for a later slot); its claims belong to this task try and are
# renewed while it runs, so a retry never takes over an article a live try still holds
@task(map_index_template="{{ batch_label }}", pool="radar_llm", retries=1, execution_timeout=ANALYSE_TIMEOUT)
def analyse(slot: dict, batch: dict) -> dict:
    get_current_context()["batch_label"] = batch["label"]
    return run_step("analyse", slot, batch, seconds=(ANALYSE_TIMEOUT - BATCH_MARGIN).total_seconds(),
                    attempt=task_try())


@task(trigger_rule=TriggerRule.ALL_DONE, execution_timeout=timedelta(minutes=5))
def summarise() -> dict:
    return run_step("summarise", opened_slot())


@task.branch(trigger_rule=TriggerRule.ALL_DONE, retries=0, execution_timeout=timedelta(minutes=2))
def choose_path() -> str:
    summary = get_current_context()["ti"].xcom_pull(task_ids="summarise")
    return branch(opened_slot(), summary)


# the Assets' events (seam/assets.py): through aliases, so that a try that pushes nothing emits nothing
@task(task_id=PUSH_OPPORTUNITY, execution_timeout=timedelta(minutes=10), outlets=[OPPORTUNITY_ALIAS])
def push_opportunity(slot: dict) -> dict:
    return emit(run_step("push_opportunity", slot))


@task(task_id=SKIP_PUSH, execution_timeout=timedelta(minutes=5))
def skip_push(slot: dict) -> dict:
    return run_step("skip_push", slot)


@task(task_id=BUILD_DAILY, execution_timeout=timedelta(minutes=15))
def build_daily_report(slot: dict) -> dict:
    return run_step("build_daily_report", slot)


# runs after the report step whether it succeeded or failed
@task(trigger_rule=TriggerRule.NONE_SKIPPED, retries=3, execution_timeout=timedelta(minutes=10),
      outlets=[DAILY_REPORT_ALIAS])
def push_daily_report() -> dict:
    return emit(run_step("push_daily_report", opened_slot()))


# after the daily push, whatever became of it (the week's summary never holds the day's report back);
# any slot but Sunday's 22:00 returns at once
@task(trigger_rule=TriggerRule.ALL_DONE, retries=2, execution_timeout=timedelta(minutes=10))
def weekly_summary() -> dict:
    return run_step("weekly_summary", opened_slot())


# after the daily push too (it never delays the report): the picks followed in the market, within its own
# deadline (track_record_minutes); any slot but the daily one returns at once
@task(trigger_rule=TriggerRule.ALL_DONE, retries=1, execution_timeout=timedelta(minutes=30))
def track_record() -> dict:
    return run_step("track_record", opened_slot())


# after the daily push too: article bodies older than retention_days pruned, for five minutes at most (the
# rest tomorrow), and the database's size recorded for the health panel; any slot but the daily one returns
@task(trigger_rule=TriggerRule.ALL_DONE, retries=1, execution_timeout=timedelta(minutes=10))
def retention() -> dict:
    return run_step("retention", opened_slot())


@task(retries=3, execution_timeout=timedelta(minutes=20), outlets=[DAILY_REPORT_ALIAS])
def catch_up_daily_report(slot: dict) -> dict:
    return emit(run_step("catch_up_daily_report", slot))


@task(retries=0, execution_timeout=timedelta(minutes=5))
def close_slot(slot: dict) -> dict:
    outcome = run_step("close_slot", slot, failed_tasks(get_current_context()))
    if outcome["status"] != "success":
        raise RuntimeError(f"slot closed as failed:\n{outcome['error']}")
    return outcome


# --------------------------------------------------------------------------- the slot, as Airflow runs it


@dag(
    dag_id=DAG_ID,
    schedule=CronTriggerTimetable(SLOTS.cron, timezone="Asia/Shanghai"),
    start_date=datetime(2026, 1, 1, tzinfo=SHANGHAI),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    deadline=daily_deadline(SLOTS.daily_push_deadline_minutes, SLOTS.daily_deadline_alert),
    params=trigger_form(SLOTS.schedule_slots),
    doc_md=__doc__,
    tags=["opportunity-radar", "wechat", "deepseek"],
)
def opportunity_radar_slots():
    slot = open_slot().as_setup()
    articles = select_articles()
    ingest(slot) >> articles
    summary = summarise()
    analyse.partial(slot=slot).expand(batch=articles) >> summary
    path = choose_path()
    summary >> path
    pushes = [push_opportunity(slot), skip_push(slot)]
    report = build_daily_report(slot)
    path >> [*pushes, report]
    daily = push_daily_report()
    report >> daily
    after_daily = [weekly_summary(), track_record(), retention()]  # the daily push never waits for them
    daily >> after_daily
    # the teardown: waits for every task of the run, and is cleared with any of them, so a cleared task
    # always reopens and recloses the slot; its failure (a step failed) fails the run
    ends = [*pushes, daily, *after_daily, catch_up_daily_report(slot)]
    ends >> close_slot(slot).as_teardown(setups=slot, on_failure_fail_dagrun=True)


# `airflow dags test` (and dag.test()) of a DAG with a Deadline Alert crash in Airflow 3.3.2 once the run has
# succeeded, apache/airflow#73428: this DAG's test() works around it (seam/callbacks.py); the scheduler is untouched
mend_dag_test(opportunity_radar_slots())
