"""The LocalExecutor with what the slot's task processes load done once, in the scheduler, before its workers fork.

A task runs in a process forked from a LocalExecutor worker and first imports Airflow's task runner (2.5 s
cold), then its step, then loads what the step uses once (the words' dictionary, apprise's plugins): a slot is
about eight tasks in sequence, so those loads were most of its fixed part (``make bench-slot``). Done here,
every task process inherits them. The HTML parser is left to the one task that cleans (tests/test_memory.py).
``make ui`` and the benchmarks run it (scripts/bootstrap.sh); compose's Celery workers are untouched.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable

from airflow.executors.local_executor import LocalExecutor

from include.radar.core.clock import SYSTEM
from include.radar.steps import STEPS

log = logging.getLogger(__name__)

# ingest's step module is left to its task: its cleaning loads the HTML parser
NOT_PRELOADED = frozenset({"ingest"})


def step_modules(modules: Iterable[str]) -> tuple[str, ...]:
    """The step modules to preload, of the steps' table (``steps.STEPS``' modules): all but ingest's."""
    return tuple(f"include.radar.steps.{module}" for module in sorted(set(modules) - NOT_PRELOADED))


PRELOADED = (
    "airflow.sdk.execution_time.task_runner",
    "include.radar.seam.support",
    "openai",  # the analyse tasks and the daily report call DeepSeek through it
    *step_modules(STEPS.values()),
)


def _word_dictionary() -> None:  # 0.1 s in each task that stores articles or analyses (their search words)
    from include.radar.core import search

    search.words("预热")


def _apprise_plugins() -> None:  # 0.2 s in each task that pushes: apprise finds its plugins on first use
    import apprise

    apprise.Apprise().add("json://localhost")


def _grouping() -> None:  # 0.3 s in summarise, which groups the slot's analyses into events
    import numpy  # noqa: F401
    import scipy.sparse  # noqa: F401


# what the steps do once per process, done once here instead (its memory shared by the forks)
WARMED = (_word_dictionary, _apprise_plugins, _grouping)


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


def warm(steps: tuple[Callable[[], None], ...] = WARMED) -> list[str]:
    """Run each warm-up; one that fails is logged and left to the tasks, like a module that fails to load."""
    done = []
    for each in steps:
        try:
            each()
        except Exception:
            log.warning("could not warm %s for the task processes", each.__name__, exc_info=True)
        else:
            done.append(each.__name__.lstrip("_"))
    return done


class PreloadingLocalExecutor(LocalExecutor):
    """``AIRFLOW__CORE__EXECUTOR=include.radar.seam.executor.PreloadingLocalExecutor``."""

    def start(self) -> None:
        started = SYSTEM.monotonic()
        loaded = preload() + warm()
        log.info("preloaded %s for the task processes in %.1f s", ", ".join(loaded), SYSTEM.monotonic() - started)
        super().start()
