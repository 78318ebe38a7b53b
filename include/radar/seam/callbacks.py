"""The operator alerts that Airflow itself raises: a notifier on every task's ``on_failure_callback``
(runs in the worker when a task has failed for good, its retries spent) and the callback of the daily
run's Deadline Alert (runs in the triggerer when the 22:00 run has not finished by its deadline).

Both end in ``alerts.raise_alert``: one alert per cause and day, whatever else raised the same cause. This
module is imported by the DAG file, so it imports nothing heavy at module level.

``mend_dag_test`` keeps ``airflow dags test`` working on the DAG that carries the Deadline Alert (Airflow 3.3.2,
apache/airflow#73428).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from typing import Any

from airflow.sdk import BaseNotifier

log = logging.getLogger(__name__)

# a task failure's cause, from the task and the exception the radar raised
CAUSE_BY_ERROR = (("WeRSSAuthError", "werss_auth"), ("LLMConfigError", "deepseek"))


def cause_for(task_id: str, error: str) -> str:
    if task_id == "push_daily_report":
        return "daily_undelivered"
    for marker, cause in CAUSE_BY_ERROR:
        if marker in error:
            return cause
    return "task_failed"


class AlertNotifier(BaseNotifier):
    """``on_failure_callback`` of every radar task: tells the operator, once per cause and day."""

    def notify(self, context: Any) -> None:
        try:
            self._notify(context)
        except Exception:  # a callback must never mask the task's own failure
            log.exception("the operator alert for a failed task could not be raised")

    def _notify(self, context: Any) -> None:
        from include.radar.steps.runtime import Runtime

        ti = context["ti"]
        exc = context.get("exception")
        error = f"{exc.__class__.__name__}: {exc}" if exc is not None else "failed"
        task_id = ti.task_id
        slot = None
        try:
            slot = ti.xcom_pull(task_ids="open_slot")
        except Exception:  # open_slot itself may be what failed
            log.debug("no slot for the alert", exc_info=True)
        where = f"{ti.dag_id} · {ti.run_id} · {task_id}" + (f"[{ti.map_index}]" if getattr(ti, "map_index", -1) >= 0 else "")
        log_url = getattr(ti, "log_url", None)
        detail = f"{where} 失败：{error}" + (f"（日志：{log_url}）" if log_url else "")
        Runtime.load().alert(cause_for(task_id, error), detail, slot if isinstance(slot, dict) else None)


async def daily_deadline_missed(context: dict[str, Any] | None = None, **_: Any) -> None:
    """Deadline Alert callback (triggerer): the run of the daily slot is still going at its deadline. When
    the day's report has not reached any channel, the operator is told (once a day)."""
    await asyncio.to_thread(_daily_deadline_missed, context or {})


def _daily_deadline_missed(context: dict[str, Any]) -> str | None:
    from include.radar import store
    from include.radar.core.slots import SHANGHAI
    from include.radar.steps.runtime import Runtime

    run = context.get("dag_run") or {}
    logical = run.get("logical_date")
    if not logical:
        return None
    if str(run.get("run_type") or "").split(".")[-1].lower() == "backfill" or str(
            run.get("dag_run_id") or run.get("run_id") or "").startswith("backfill__"):
        return None  # a backfill builds a past day's report and pushes nothing: no deadline to miss
    at = datetime.fromisoformat(str(logical).replace("Z", "+00:00")).astimezone(SHANGHAI)
    rt = Runtime.load()
    if at.strftime("%H:%M") != rt.settings.daily_slot:
        return None  # a daytime slot running long: its own deadlines bound it
    day: date = at.date()
    with rt.connect() as conn:
        if store.pushes.daily_push_sent(conn, day):
            return None
        own = next((r for r in store.slot_runs.slot_runs_for_day(conn, day) if r["slot"] == rt.settings.daily_slot), None)
    # the deadline the run itself works to (daily_push_deadline_minutes as the task read it, perhaps from a
    # Variable) may be later than the one this alert was parsed with: not due yet, not late yet
    due = own["deadline_at"] if own else None
    if due is not None and rt.clock.now() < due:
        return None
    if own is not None and due is None and own["run_type"] != "scheduled":
        return None  # opened by a run that does not deliver the report on time (a redo, a past-dated trigger)
    return rt.alert(
        "daily_undelivered",
        f"{day} 的日报在截止时间（{rt.settings.daily_slot} 后 {rt.settings.daily_push_deadline_minutes:g} 分钟）仍未送达，"
        f"运行 {run.get('dag_run_id') or run.get('run_id') or '?'} 尚未结束",
        day_of=at,
    )


# ------------------------------------------------------------------------- `airflow dags test` and the alert

# Airflow 3.3.2 cannot end a successful `airflow dags test` (or `dag.test()`) run of a DAG with a Deadline Alert:
# DAG.test() runs on an in-memory serialised copy of the DAG whose `deadline` holds the encoded alerts, where
# the scheduler's copy holds the ids of their `deadline_alert` rows, and DagRun.update_state() passes each to
# DeadlineAlertModel.get_by_id(), which fails with "'dict' object has no attribute 'hex'" (the run itself
# succeeded). Reported upstream as https://github.com/apache/airflow/issues/73428; the fix proposed there
# (https://github.com/apache/airflow/pull/73430) decodes such entries instead of looking them up, which is
# what get_by_id does below, only while this DAG's test() runs. The scheduler never calls test(), so it keeps
# the alert as it is. Remove this once the pinned Airflow carries the fix
# (tests/test_operations.py::test_airflow_still_needs_the_dags_test_mend fails then).


def mend_dag_test(dag: Any) -> Any:
    """Make ``dag.test()`` (what ``airflow dags test`` calls) survive apache/airflow#73428; returns ``dag``.

    A partial, not a closure: ``copy.deepcopy(dag)`` copies it with the DAG it belongs to."""
    dag.test = functools.partial(_test_reading_encoded_alerts, dag)
    return dag


def _test_reading_encoded_alerts(dag: Any, *args: Any, **kwargs: Any) -> Any:
    with encoded_deadline_alerts_readable():
        return type(dag).test(dag, *args, **kwargs)


@contextmanager
def encoded_deadline_alerts_readable() -> Iterator[None]:
    """While it lasts, ``DeadlineAlertModel.get_by_id`` takes an encoded alert (a dict) too, as an unsaved row
    built from it; an id goes to Airflow's own lookup unchanged."""
    from airflow.models.deadline_alert import DeadlineAlert as DeadlineAlertModel
    from airflow.serialization.definitions.deadline import DeadlineAlertFields
    from airflow.serialization.enums import Encoding

    original = DeadlineAlertModel.__dict__["get_by_id"]

    def get_by_id(cls: type[DeadlineAlertModel], deadline_alert_id: Any, **kwargs: Any) -> DeadlineAlertModel:
        if isinstance(deadline_alert_id, dict):
            data = deadline_alert_id.get(Encoding.VAR, deadline_alert_id)
            return cls(reference=data[DeadlineAlertFields.REFERENCE], interval=data[DeadlineAlertFields.INTERVAL],
                       callback_def=data[DeadlineAlertFields.CALLBACK])
        return original.__func__(cls, deadline_alert_id, **kwargs)

    DeadlineAlertModel.get_by_id = classmethod(get_by_id)
    try:
        yield
    finally:
        DeadlineAlertModel.get_by_id = original
