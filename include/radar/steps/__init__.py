"""The steps of one slot, one module per stage, named after the DAG task that runs it, and the step function the
task runs named after it too (:data:`STEPS` maps each step function to its module; docs/architecture.md names the
modules).

Each step takes the :class:`~include.radar.steps.runtime.Runtime` and the small ``slot`` dict ``open_slot`` returns
(ids and flags, never bodies). Steps import the domain rooms below them and the runtime, never Airflow nor the
seam to it (seam/support.py), which imports them one step module at a time, by name, through :func:`load`,
so a task process imports only what its own step needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# step function -> the module (of this package) that holds it
STEPS = {
    "open_slot": "open_slot",
    "ingest": "ingest",
    "articles_to_analyse": "select_articles",
    "select_articles": "select_articles",
    "analyse": "analyse",
    "analyse_article": "analyse",
    "summarise": "summarise",
    "choose_path": "summarise",
    "push_opportunity": "push_opportunity",
    "skip_push": "push_opportunity",
    "build_daily_report": "daily_report",
    "push_daily_report": "daily_report",
    "catch_up_daily_report": "daily_report",
    "weekly_summary": "weekly_summary",
    "track_record": "track_record",
    "retention": "retention",
    "close_slot": "close_slot",
    "evaluate": "evaluate",  # the evaluation DAG's task (dags/radar_evaluation.py), not a slot's
}


def load(name: str) -> Callable[..., Any]:
    """The step function ``name``, importing its module (and only its module) on first use."""
    module = importlib.import_module(f"{__name__}.{STEPS[name]}")
    func: Callable[..., Any] = getattr(module, name)
    return func
