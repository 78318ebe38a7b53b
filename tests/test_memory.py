"""Whatever the radar loads that a process does not need is not loaded there (`make bench-memory`
measures what each Airflow process holds; docs/benchmarks.md, *What it takes to run*).

Each check imports in a fresh interpreter what one Airflow process imports of the radar and reads
``sys.modules`` after it: a task process loads its own step's module by name (``steps.load``), the triggerer
the Deadline Alert's callback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from include.radar import steps
from tests.conftest import REPO

# bs4 and lxml, through cleaning.py: 13 MB and 0.2 s that only the task that cleans HTML needs
HTML = {"bs4", "lxml", "include.radar.collect.cleaning"}


def loaded_after(code: str, watch: set[str]) -> subprocess.Popen:
    """A fresh interpreter running ``code``; it prints which modules of ``watch`` it has loaded then."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in {sorted(watch)!r} if m in sys.modules)))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env={**env, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(proc: subprocess.Popen) -> set[str]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    return set(json.loads(out.strip().splitlines()[-1]))


def test_only_the_ingest_task_loads_the_html_parser() -> None:
    """Every step imported runtime.py, which imported ingest.py for the WeRSS token cache: every task process
    (and the triggerer, below) loaded bs4 and lxml to clean HTML it never sees."""
    first = {module: next(f for f, m in steps.STEPS.items() if m == module) for module in set(steps.STEPS.values())}
    procs = {module: loaded_after(f"from include.radar import steps\nsteps.load({func!r})", HTML)
             for module, func in first.items()}
    loaded = {module: result(proc) for module, proc in procs.items()}
    # the check sees them where they are needed: the ingest step's module loads cleaning.py, which loads bs4 and
    # lxml when it first cleans a body
    assert loaded.pop("ingest") == {"include.radar.collect.cleaning"}
    assert {m: found for m, found in loaded.items() if found} == {}


def test_the_deadline_callback_loads_no_html_parser_into_the_triggerer() -> None:
    """The Deadline Alert's callback runs in the triggerer, which lives as long as Airflow does: what it imports
    stays there."""
    code = ("from include.radar.seam.callbacks import _daily_deadline_missed\n"
            "_daily_deadline_missed({})  # imports what it needs, then finds no run")
    assert result(loaded_after(code, HTML)) == set()


def test_the_executor_preloads_the_task_runner_and_the_steps_but_no_html_parser() -> None:
    """What the scheduler imports before its LocalExecutor workers fork is in every task process after them."""
    code = ("from include.radar.seam.executor import PRELOADED, preload, warm\n"
            "assert preload() == list(PRELOADED), preload()\n"
            "assert warm() == ['word_dictionary', 'apprise_plugins', 'grouping'], warm()")
    watch = HTML | {"airflow.sdk.execution_time.task_runner", "include.radar.steps.analyse", "openai", "rjieba",
                    "scipy.sparse", "jieba"}  # jieba itself cuts the pages' queries only
    assert result(loaded_after(code, watch)) == {"airflow.sdk.execution_time.task_runner",
                                                 "include.radar.steps.analyse", "openai", "rjieba", "scipy.sparse"}


def test_the_executor_preloads_every_step_module_but_ingests_and_follows_a_new_one() -> None:
    """PRELOADED is read from the steps' table, not kept by hand: every step module is in it but ingest's (its
    cleaning loads the HTML parser), the weekly summary, the track record, retention and evaluate among them, and
    a step module added to the table is preloaded without a second list to keep."""
    from include.radar.seam import executor

    step_modules = {name for name in executor.PRELOADED if name.startswith("include.radar.steps.")}
    files = {p.stem for p in (REPO / "include" / "radar" / "steps").glob("*.py")} - {"__init__", "runtime"}
    assert step_modules == {f"include.radar.steps.{m}" for m in files - {"ingest"}}
    assert {"include.radar.steps.weekly_summary", "include.radar.steps.track_record", "include.radar.steps.retention",
            "include.radar.steps.evaluate"} <= step_modules
    assert executor.step_modules([*steps.STEPS.values(), "new_stage"]) == tuple(
        sorted([*step_modules, "include.radar.steps.new_stage"]))


def test_a_module_that_fails_to_preload_is_left_to_its_task(monkeypatch) -> None:
    from include.radar.seam import executor
    from include.radar.seam.executor import PreloadingLocalExecutor, preload

    warned: list[str] = []
    monkeypatch.setattr(executor.log, "warning", lambda text, *args, **_: warned.append(text % args))
    assert preload(("json", "include.radar.no_such_room")) == ["json"]
    assert warned == ["could not preload include.radar.no_such_room for the task processes"]

    def _broken() -> None:
        raise OSError("no dictionary")

    assert executor.warm((executor._apprise_plugins, _broken)) == ["apprise_plugins"]
    assert warned[-1] == "could not warm _broken for the task processes"
    assert PreloadingLocalExecutor.is_local  # `airflow standalone` keeps it rather than forcing its own


def test_the_executor_make_ui_and_the_benchmarks_name_is_this_one() -> None:
    from bench import memory
    from include.radar.seam import executor

    bootstrap = (REPO / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")
    named = memory.PRELOADING
    assert f'"${{RADAR_EXECUTOR:-{named}}}"' in bootstrap
    module, cls = named.rsplit(".", 1)
    assert module == executor.__name__ and getattr(executor, cls).is_local
