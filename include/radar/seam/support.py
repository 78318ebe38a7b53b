"""The little the DAG needs from Airflow at run time: turning configuration errors into failures that
Airflow does not retry (retrying a wrong password locks the WeRSS account), and reading the run's state.

Imported by the DAG file, so it imports nothing of the steps at module level: every task process and the
scheduler's parse loop read the DAG file, and only the task that runs a step needs that step's modules. The
steps never import this module (include/radar/steps/: the seam imports the steps, never the reverse)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

log = logging.getLogger(__name__)


def run_step(step: str, *args: Any, **kwargs: Any) -> Any:
    """Run the step function named ``step`` (include/radar/steps/, loaded by name: a task imports only its own
    step's module) with the settings and connections resolved inside the task; fail fast, without retries, on
    bad configuration."""
    from include.radar import steps  # only the task that runs a step imports it
    from include.radar.steps import runtime

    func: Callable[..., Any] = steps.load(step)
    try:
        return func(runtime.Runtime.load(), *args, **kwargs)
    except runtime.not_retryable() as exc:
        raise AirflowFailException(f"{exc.__class__.__name__}: {exc}") from exc


def task_try() -> tuple[str, int, int] | None:
    """(task id, map index, try number) of the running task instance, which owns the claims its analyses
    take; None outside a task (tests, scripts)."""
    from airflow.sdk import get_current_context

    try:
        ti = get_current_context()["ti"]
        return str(ti.task_id), int(ti.map_index if ti.map_index is not None else -1), int(ti.try_number)
    except Exception:  # no task running here
        return None


def branch(slot: dict[str, Any], summary: dict[str, Any] | None) -> str:
    """The task id the slot's branch follows (pure: needs no database)."""
    from include.radar.steps.summarise import choose_path

    return choose_path(slot, summary).branch


def opened_slot() -> dict[str, Any]:
    """The slot this run opened (open_slot's XCom), for the tasks that must not take it as an argument."""
    from airflow.sdk import get_current_context

    slot = get_current_context()["ti"].xcom_pull(task_ids="open_slot")
    if not isinstance(slot, dict):
        raise AirflowFailException("open_slot left no slot record: nothing to do (see open_slot's log)")
    return slot


def failed_tasks(context: dict[str, Any]) -> list[str]:
    """Task ids of this DAG run that Airflow marked failed or upstream_failed (best effort)."""
    ti = context["ti"]
    try:
        states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id])
    except Exception:  # older API or in-process test runner: the step records suffice
        log.debug("task states unavailable", exc_info=True)
        return []
    per_run = states.get(ti.run_id, states) if isinstance(states, dict) else {}
    # a mapped task's instances come back as "<task_id>_<map_index>"
    return sorted({
        re.sub(r"_\d+$", "", task_id) for task_id, state in per_run.items()
        if str(state) in ("failed", "upstream_failed") and task_id != ti.task_id
    })
