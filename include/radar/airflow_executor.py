"""The LocalExecutor with what every task process imports loaded once, before its workers fork.

Each task runs in a process forked from a LocalExecutor worker, and its first act is to import Airflow's task
runner (2.5 s cold) and then the radar's runtime: a slot is about eight tasks in sequence, so those imports
were most of its fixed part (``make bench-slot``). Imported here, in the scheduler before the workers fork,
every task process inherits them. Only what every step needs: the HTML parser stays with the task that cleans
(tests/test_memory.py). ``make ui``, ``make run`` and the benchmarks use it (scripts/bootstrap.sh); compose runs
Celery workers, which this does not touch.
"""

from __future__ import annotations

import importlib
import logging
import time

from airflow.executors.local_executor import LocalExecutor

log = logging.getLogger(__name__)

# the steps' modules but ingest's, whose cleaning loads the HTML parser
PRELOADED = (
    "airflow.sdk.execution_time.task_runner",
    "include.radar.airflow_support",
    "openai",  # the analyse tasks and the daily report call DeepSeek through it
    *(f"include.radar.steps.{module}" for module in ("open_slot", "select_articles", "analyse", "summarise",
                                                      "push_opportunity", "daily_report", "close_slot")),
)


def preload(modules: tuple[str, ...] = PRELOADED) -> list[str]:
    """Import ``modules``; the ones that fail are logged and left to the tasks (which then fail clearly)."""
    loaded = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # a task importing it reports the error where it belongs
            log.warning("could not preload %s for the task processes", name, exc_info=True)
        else:
            loaded.append(name)
    return loaded


class PreloadingLocalExecutor(LocalExecutor):
    """``AIRFLOW__CORE__EXECUTOR=include.radar.airflow_executor.PreloadingLocalExecutor``."""

    def start(self) -> None:
        started = time.monotonic()
        loaded = preload()
        log.info("preloaded %s for the task processes in %.1f s", ", ".join(loaded), time.monotonic() - started)
        super().start()
