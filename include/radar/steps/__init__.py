"""The steps of one slot, one module per stage, named after the DAG task that runs it.

| DAG task | step function | module |
|---|---|---|
| ``open_slot`` (setup) | ``open_slot`` | ``open_slot.py`` |
| ``ingest`` | ``ingest_articles`` | ``ingest.py`` |
| ``select_articles`` | ``analysis_batches`` (``articles_to_analyse``) | ``select_articles.py`` |
| ``analyse`` (mapped) | ``analyse_batch`` (``analyse_article`` each) | ``analyse.py`` |
| ``summarise``, ``choose_path`` | ``summarise_slot``, ``choose_path`` | ``summarise.py`` |
| ``push_opportunity``, ``skip_push`` | ``push_opportunity``, ``record_skip`` | ``push_opportunity.py`` |
| ``build_daily_report``, ``push_daily_report``, ``catch_up_daily_report`` | same names | ``daily_report.py`` |
| ``weekly_summary`` | ``weekly_summary`` | ``weekly_summary.py`` |
| ``track_record`` | ``follow_picks`` | ``track_record.py`` |
| ``retention`` | ``apply_retention`` | ``retention.py`` |
| ``close_slot`` (teardown) | ``close_slot`` | ``close_slot.py`` |

Each step takes the :class:`~include.radar.runtime.Runtime` and the small ``slot`` dict ``open_slot`` returns
(ids and flags, never bodies). Steps import the domain rooms below them and the runtime; never Airflow, never
the seam to it (airflow_support.py), which imports them — one step module at a time, by name, through
:func:`load`, so a task process imports only what its own step needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# step function -> the module (of this package) that holds it
STEPS = {
    "open_slot": "open_slot",
    "ingest_articles": "ingest",
    "articles_to_analyse": "select_articles",
    "analysis_batches": "select_articles",
    "analyse_batch": "analyse",
    "analyse_article": "analyse",
    "summarise_slot": "summarise",
    "choose_path": "summarise",
    "push_opportunity": "push_opportunity",
    "record_skip": "push_opportunity",
    "build_daily_report": "daily_report",
    "push_daily_report": "daily_report",
    "catch_up_daily_report": "daily_report",
    "weekly_summary": "weekly_summary",
    "follow_picks": "track_record",
    "apply_retention": "retention",
    "close_slot": "close_slot",
    "evaluate": "evaluate",  # the evaluation DAG's task (dags/radar_evaluation.py), not a slot's
}


def load(name: str) -> Callable[..., Any]:
    """The step function ``name``, importing its module (and only its module) on first use."""
    module = importlib.import_module(f"{__name__}.{STEPS[name]}")
    func: Callable[..., Any] = getattr(module, name)
    return func
