"""DAG integrity, slot derivation, migrations, settings, concurrent slot openers.

Rooms: dags/opportunity_radar.py, slots.py, steps/open_slot.py, db.py and migrations/, settings.py, decide.py
(the trigger form's actions), steps/__init__.py (lazy step imports).
"""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from include.radar import store
from include.radar.core import db
from include.radar.core.settings import SettingsError, env_name, load_settings
from include.radar.core.slots import SHANGHAI, slot_at, slot_for, window

REPO = Path(__file__).resolve().parents[1]
SLOTS = ("07:00", "12:00", "14:00", "18:00", "22:00")


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    return bag.dags["opportunity_radar_slots"]


def test_dag_has_retries_tags_docs_and_one_active_run(dag):
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    assert {"opportunity-radar"} <= set(dag.tags)
    assert dag.doc_md and "open_slot" in dag.doc_md
    for task in dag.tasks:
        if task.task_id not in ("choose_path", "close_slot"):
            assert task.retries >= 1, task.task_id
    assert dag.default_args["retries"] >= 2
    assert dag.default_args["retry_exponential_backoff"] is True


def test_dag_reads_like_the_slot_flow(dag):
    ids = {t.task_id for t in dag.tasks}
    assert ids == {"open_slot", "ingest", "select_articles", "analyse", "summarise", "choose_path",
                   "push_opportunity", "skip_push", "build_daily_report", "push_daily_report",
                   "weekly_summary", "track_record", "retention", "catch_up_daily_report", "close_slot"}
    assert dag.get_task("open_slot").is_setup and dag.get_task("close_slot").is_teardown
    assert dag.get_task("close_slot").trigger_rule == "all_done_setup_success"
    assert dag.get_task("push_daily_report").trigger_rule == "none_skipped"
    assert dag.get_task("summarise").trigger_rule == "all_done"
    # the week's summary comes after the daily push, whatever became of it
    assert dag.get_task("weekly_summary").upstream_task_ids == {"push_daily_report"}
    assert dag.get_task("weekly_summary").trigger_rule == "all_done"
    # the track record too: after the daily push (never before it), with a deadline of its own
    assert dag.get_task("track_record").upstream_task_ids == {"push_daily_report"}
    assert dag.get_task("track_record").trigger_rule == "all_done"
    assert dag.get_task("track_record").execution_timeout.total_seconds() <= 30 * 60
    # retention too, bounded (the step stops pruning after five minutes, the task times out at ten)
    assert dag.get_task("retention").upstream_task_ids == {"push_daily_report"}
    assert dag.get_task("retention").trigger_rule == "all_done"
    assert dag.get_task("retention").execution_timeout.total_seconds() <= 10 * 60
    assert "retention" in dag.get_task("close_slot").upstream_task_ids


def test_dag_serialises(dag):
    from airflow.serialization.serialized_objects import DagSerialization

    data = DagSerialization.to_dict(dag)
    again = DagSerialization.from_dict(data)
    assert again.dag_id == dag.dag_id
    assert {t.task_id for t in again.tasks} == {t.task_id for t in dag.tasks}


def test_schedule_fires_exactly_at_the_five_shanghai_slots(dag):
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.timetables.base import DataInterval, TimeRestriction

    timetable = DagSerialization.from_dict(DagSerialization.to_dict(dag)).timetable  # the scheduler's view
    start = datetime(2026, 1, 8, 0, 0, tzinfo=SHANGHAI)
    restriction = TimeRestriction(earliest=start.astimezone(UTC), latest=None, catchup=True)
    last: DataInterval | None = None
    fired = []
    for _ in range(7):
        info = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)
        fired.append(info.run_after.astimezone(SHANGHAI))
        last = info.data_interval
    assert [f.strftime("%m-%d %H:%M") for f in fired] == [
        "01-08 07:00", "01-08 12:00", "01-08 14:00", "01-08 18:00", "01-08 22:00", "01-09 07:00", "01-09 12:00"]


@pytest.mark.parametrize("slot", SLOTS)
def test_scheduled_run_maps_to_its_own_slot(slot):
    tick = slot_at(date(2026, 1, 8), slot).scheduled_at
    key = slot_for(tick, SLOTS)
    assert (key.run_date, key.slot) == (date(2026, 1, 8), slot)


def test_seven_oclock_run_is_on_the_previous_utc_day_but_the_shanghai_date():
    tick = datetime(2026, 1, 7, 23, 0, tzinfo=UTC)  # 07:00 Shanghai on Jan 8
    key = slot_for(tick, SLOTS)
    assert (key.run_date, key.slot) == (date(2026, 1, 8), "07:00")


def test_manual_run_without_logical_date_maps_to_the_latest_slot_before_it():
    assert slot_for(datetime(2026, 1, 8, 15, 30, tzinfo=SHANGHAI), SLOTS).slot == "14:00"
    early = slot_for(datetime(2026, 1, 8, 6, 0, tzinfo=SHANGHAI), SLOTS)
    assert (early.run_date, early.slot) == (date(2026, 1, 7), "22:00")


@given(st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC)))
def test_slot_for_is_never_after_the_moment_and_less_than_a_day_before(moment):
    key = slot_for(moment, SLOTS)
    assert key.scheduled_at <= moment
    assert moment - key.scheduled_at < timedelta(hours=10)


def test_window_ends_at_the_scheduled_time_not_the_wall_clock():
    key = slot_at(date(2026, 1, 8), "07:00")
    start, end = window(key, 3)
    assert end == key.scheduled_at and end - start == timedelta(days=3)


def test_migrations_apply_twice_as_a_no_op(db_url):
    assert db.migrate(db_url) == []
    with db.connect(db_url) as conn:
        versions = [r["version"] for r in conn.execute("SELECT version FROM schema_migration ORDER BY 1")]
    assert versions[0] == "0001_initial.sql"


def test_failed_migration_leaves_the_ledger_unchanged(db_url, tmp_path):
    for f in db.migration_files():
        (tmp_path / f.name).write_text(f.read_text())
    (tmp_path / "0099_broken.sql").write_text("CREATE TABLE broken_probe (id int); SELECT no_such_function();")
    with pytest.raises(psycopg.Error):
        db.migrate(db_url, tmp_path)
    with db.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) AS n FROM schema_migration WHERE version = '0099_broken.sql'").fetchone()["n"] == 0
        assert conn.execute("SELECT to_regclass('broken_probe') AS t").fetchone()["t"] is None


def test_settings_defaults_follow_the_seed():
    s = load_settings({}.get)
    assert (s.window_days, s.push_score_threshold, s.max_articles_per_slot) == (3, 60, 50)
    assert s.schedule_slots == SLOTS and s.daily_slot == "22:00"
    assert (s.deepseek_max_retries, s.deepseek_content_truncate_chars, s.llm_concurrency, s.remember_me_days) == (3, 16000, 16, 7)  # links: 7 days
    assert s.cron == "0 7,12,14,18,22 * * *"


@pytest.mark.parametrize(("name", "value"), [
    ("push_score_threshold", "150"), ("schedule_slots", "07:00,25:00"), ("window_days", "-1"),
    ("max_articles_per_slot", "many"),
])
def test_bad_setting_names_the_setting_and_the_value(name, value):
    with pytest.raises(SettingsError) as err:
        load_settings({name: value}.get)
    assert name in str(err.value) and value in str(err.value)


def test_database_unreachable_is_a_clear_error():
    with pytest.raises(db.DatabaseUnavailable, match="cannot reach the radar database"):
        with db.connect("postgresql://nobody:pw@127.0.0.1:1/nowhere"):
            pass


def test_concurrent_openers_of_one_slot_share_one_row(db_url):
    key = slot_at(date(2026, 1, 8), "14:00")
    rows, errors = [], []
    barrier = threading.Barrier(6)

    def opener(i: int) -> None:
        try:
            barrier.wait()
            with db.connect(db_url) as conn:
                rows.append(store.slot_runs.open_slot_run(conn, key, run_type="manual", dag_id="d", dag_run_id=f"r{i}"))
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len({r["id"] for r in rows}) == 1
    with db.connect(db_url) as conn:
        row = conn.execute("SELECT count(*) AS n, max(attempts) AS a FROM slot_run").fetchone()
    assert row["n"] == 1 and row["a"] == 6


def test_manual_params_name_the_slot_and_bad_params_are_clear_errors():
    from include.radar.operations.connections import ConfigurationError
    from include.radar.steps.open_slot import resolve_slot

    settings = load_settings({}.get)
    triggered = datetime(2026, 1, 12, 10, 30, tzinfo=SHANGHAI)
    key, explicit = resolve_slot(triggered, settings, {"run_date": "2026-01-08"})
    assert (key.run_date, key.slot, explicit) == (date(2026, 1, 8), "22:00", True)  # rebuild that day's report
    key, explicit = resolve_slot(triggered, settings, {"slot": "07:00"})
    assert (key.run_date, key.slot, explicit) == (date(2026, 1, 12), "07:00", True)
    key, _ = resolve_slot(triggered, settings, {"slot": "22:00"})  # never today's 22:00 in the morning
    assert (key.run_date, key.slot) == (date(2026, 1, 11), "22:00")
    with pytest.raises(ConfigurationError, match="still in the future"):
        resolve_slot(triggered, settings, {"run_date": "2026-01-12", "slot": "22:00"})
    key, _ = resolve_slot(triggered, settings, {})
    assert (key.run_date, key.slot) == (date(2026, 1, 12), "07:00")
    with pytest.raises(ConfigurationError, match="slot='09:00'"):
        resolve_slot(triggered, settings, {"slot": "09:00"})
    with pytest.raises(ConfigurationError, match="run_date='yesterday'"):
        resolve_slot(triggered, settings, {"run_date": "yesterday"})


def test_radar_db_connection_with_special_characters_in_the_password(monkeypatch):
    import psycopg

    monkeypatch.delenv("RADAR_DATABASE_URL", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_RADAR_DB", '{"conn_type": "postgres", "host": "db.internal", "port": 6432, '
                                                '"login": "radar", "password": "p@ss/w#rd:1", "schema": "radar"}')
    info = psycopg.conninfo.conninfo_to_dict(db.database_url())
    assert (info["host"], info["port"], info["user"], info["password"], info["dbname"]) == (
        "db.internal", "6432", "radar", "p@ss/w#rd:1", "radar")
    assert "p@ss" not in db.redact(db.database_url())
    assert db.redact("postgresql://radar:secret@h/db") == "postgresql://radar:***@h/db"


def _airflow_connections(monkeypatch, answer):
    """Airflow's connection lookup answering ``answer`` (a connection, or an exception it raises)."""
    from airflow.sdk import BaseHook

    def get_connection(conn_id):
        if isinstance(answer, BaseException):
            raise answer
        return answer

    monkeypatch.setattr(BaseHook, "get_connection", staticmethod(get_connection))


def test_a_connection_in_the_environment_wins_over_airflows(monkeypatch):
    from airflow.sdk import Connection

    from include.radar.core.connection_info import get_connection

    monkeypatch.setenv("AIRFLOW_CONN_RADAR_X", '{"conn_type": "http", "host": "from-env", "login": "env"}')
    _airflow_connections(monkeypatch, Connection(conn_id="radar_x", conn_type="http", host="from-airflow"))
    assert (get_connection("radar_x").host, get_connection("radar_x").login) == ("from-env", "env")
    monkeypatch.delenv("AIRFLOW_CONN_RADAR_X")
    assert get_connection("radar_x").host == "from-airflow"


def test_a_connection_airflow_does_not_have_is_not_set_but_an_airflow_error_raises(monkeypatch):
    from airflow.sdk.exceptions import AirflowNotFoundException

    from include.radar.core.connection_info import get_connection

    monkeypatch.delenv("AIRFLOW_CONN_RADAR_X", raising=False)
    _airflow_connections(monkeypatch, AirflowNotFoundException("The conn_id `radar_x` isn't defined"))
    assert get_connection("radar_x") is None
    _airflow_connections(monkeypatch, ConnectionError("the Execution API is down"))
    with pytest.raises(ConnectionError, match="Execution API is down"):
        get_connection("radar_x")


def test_parsing_the_dag_and_starting_a_task_import_nothing_heavy():
    """Every task process and the scheduler's parse loop import the DAG file: the openai SDK, apprise, bs4 (with
    lxml), jieba and scipy are imported only when a step uses them, not by importing any step
    module — every step module imports the runtime, and through it ingest.py and cleaning.py."""
    import subprocess
    import sys

    heavy = ("openai", "apprise", "bs4", "lxml", "jieba", "rjieba", "sklearn", "numpy", "scipy")
    probe = ("import sys, {module}; print(','.join(m for m in {heavy!r} if m in sys.modules))")
    from include.radar.steps import STEPS

    every_step = ", ".join(f"include.radar.steps.{m}" for m in sorted(set(STEPS.values())))
    for module in ("dags.opportunity_radar", every_step):
        out = subprocess.run([sys.executable, "-c", probe.format(module=module, heavy=heavy)], capture_output=True,
                             text=True, timeout=300, check=True)
        loaded = set(filter(None, out.stdout.strip().split(",")))
        assert not loaded, f"importing {module} loads {sorted(loaded)}"


def test_inside_a_task_settings_read_only_the_radar_variables_that_exist(monkeypatch):
    """One listing call, then one call per stored radar_ Variable (not one per setting: about 0.25 s a task);
    with a secrets backend of one's own, which the listing cannot see, every setting is asked for."""
    import airflow.sdk

    from include.radar.core import settings as settings_module

    for name in settings_module.SETTING_NAMES:
        monkeypatch.delenv(env_name(name), raising=False)
    asked: list[str] = []

    class FakeVariable:
        @staticmethod
        def keys(prefix=None):
            assert prefix == "radar_"
            return ["radar_push_score_threshold", "radar_unrelated"]

        @staticmethod
        def get(key, default=None):
            asked.append(key)
            return "72" if key == "radar_push_score_threshold" else default

    monkeypatch.setattr(airflow.sdk, "Variable", FakeVariable)
    monkeypatch.setattr(airflow.sdk, "get_current_context", lambda: {})
    assert load_settings().push_score_threshold == 72
    assert asked == ["radar_push_score_threshold"]

    asked.clear()
    monkeypatch.setattr(settings_module, "_custom_secrets_backend", lambda: True)
    assert load_settings().push_score_threshold == 72
    assert len(asked) == len(settings_module.SETTING_NAMES)


def test_the_product_package_imports_no_test_double():
    """The stand-ins (include/radar_demo: fakes, the demo) sit beside the product, never inside it."""
    from pathlib import Path

    product = Path(__file__).parents[1] / "include" / "radar"
    importers = [str(p) for p in product.rglob("*.py") if "radar_demo" in p.read_text(encoding="utf-8")]
    assert importers == []
    assert not (product / "fakes.py").exists() and not (product / "demo").exists()


def test_the_trigger_form_labels_every_param_and_every_choice():
    """Titles and descriptions for every param, no bare "null" among the slot's choices."""
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder="dags/").get_dag("opportunity_radar_slots")
    assert set(dag.params) == {"action", "run_date", "slot", "retry_failed"}  # one choice, no raw flags
    for name in dag.params:
        param = dag.params.get_param(name)
        assert param.schema.get("title") and param.description, name
        if "enum" in param.schema:
            assert set(param.schema["values_display"]) == set(param.schema["enum"]), name
    assert dag.params.get_param("slot").schema["values_display"][None].startswith("默认")
    assert dag.params.get_param("action").value == "run"
    for name in ("run_date", "slot", "retry_failed"):  # optional: the form submits without them
        assert dag.params.get_param(name).description.startswith("可不"), name


@pytest.mark.parametrize("params, expected", [
    ({}, {"push_mode": None, "slot": None}),
    ({"action": "force"}, {"push_mode": "force", "slot": None}),
    ({"action": "silent"}, {"push_mode": "suppress", "slot": None}),
    ({"action": "rebuild", "run_date": "2026-01-05"}, {"push_mode": "suppress", "slot": "22:00"}),
    ({"action": "redo", "slot": "12:00"}, {"push_mode": "suppress", "slot": "12:00"}),
    ({"action": "run", "slot": "12:00"}, {"push_mode": None, "slot": "12:00"}),  # the usual rules
    ({"push_mode": "force"}, {"push_mode": "force", "slot": None}),  # an API caller's raw flag still works
])
def test_the_forms_action_becomes_the_raw_params(params, expected):
    from include.radar.pushes.decide import apply_action

    out = apply_action(params, "22:00")
    assert {k: out.get(k) for k in expected} == expected


def test_an_action_that_cannot_be_carried_out_says_why():
    from include.radar.pushes.decide import ActionError, apply_action

    with pytest.raises(ActionError, match="redo needs the slot"):
        apply_action({"action": "redo"}, "22:00")
    with pytest.raises(ActionError, match="not one of"):
        apply_action({"action": "delete"}, "22:00")


def test_settings_are_read_in_the_one_documented_order(monkeypatch):
    """The environment first, then the process's Variables (here the api-server's), then the default; the DAG
    file at parse time reads only its few settings, from the environment alone."""
    from include.radar.core import settings as settings_module
    from include.radar.core.settings import load_settings, parse_time_lookup, server_lookup

    class Variables:
        stored = {"radar_window_days": "5", "radar_push_score_threshold": "70"}

        @classmethod
        def get(cls, key, default_var=None):
            return cls.stored.get(key, default_var)

    monkeypatch.setattr(settings_module, "_server_variable", lambda: Variables)
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_PUSH_SCORE_THRESHOLD", "80")
    monkeypatch.delenv("AIRFLOW_VAR_RADAR_WINDOW_DAYS", raising=False)
    monkeypatch.delenv("AIRFLOW_VAR_RADAR_MAX_ARTICLES_PER_SLOT", raising=False)
    server = load_settings(server_lookup)
    assert (server.push_score_threshold, server.window_days, server.max_articles_per_slot) == (80, 5, 50)
    parsed = load_settings(parse_time_lookup(("schedule_slots",)))
    assert parsed.push_score_threshold == 60  # set in the environment, but not a parse-time setting
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_SCHEDULE_SLOTS", "08:00,21:00")
    assert load_settings(parse_time_lookup(("schedule_slots",))).schedule_slots == ("08:00", "21:00")


def test_where_the_database_is_comes_from_the_environment_when_asked(monkeypatch, tmp_path):
    from include.radar.core.settings import deployment

    monkeypatch.setenv("RADAR_PGDATA", str(tmp_path / "pg"))
    assert db.embedded_pgdata() == tmp_path / "pg"  # read when asked, not when db.py was imported
    monkeypatch.setenv("RADAR_PAGES_DATABASE_URL", "postgresql://pages@h/radar")
    assert db.pages_database_url() == "postgresql://pages@h/radar"
    monkeypatch.setenv("RADAR_PAGES_DATABASE_URL", "")
    monkeypatch.setenv("RADAR_DATABASE_URL", "postgresql://tasks@h/radar")
    assert db.pages_database_url() == "postgresql://tasks@h/radar"  # an empty value is unset
    with pytest.raises(KeyError, match="RADAR_SECRET"):
        deployment("RADAR_SECRET")


# ------------------------------------------------------------------------------------ one way in: the cli


def test_the_cli_migrates_the_database_the_changed_db_conn_id_names_as_the_tasks_do(database_url, monkeypatch, capsys):
    """`cli migrate` (db-url, backup, restore, grant-pages alike) reaches the database the tasks use: with
    ``db_conn_id`` changed, the connection it names, not ``radar_db`` (here a dead port: migrating it fails)."""
    import json

    from include.radar import cli
    from include.radar.steps.runtime import Runtime

    info = psycopg.conninfo.conninfo_to_dict(database_url)
    name = f"{info['dbname']}_conn_id"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        monkeypatch.delenv("RADAR_DATABASE_URL")
        monkeypatch.setenv(env_name("db_conn_id"), "radar_other_db")
        monkeypatch.setenv("AIRFLOW_CONN_RADAR_OTHER_DB", json.dumps({
            "conn_type": "postgres", "host": info.get("host") or "127.0.0.1", "port": int(info.get("port") or 5432),
            "login": info.get("user"), "password": info.get("password"), "schema": name}))
        monkeypatch.setenv("AIRFLOW_CONN_RADAR_DB", json.dumps({"conn_type": "postgres", "host": "127.0.0.1", "port": 1}))
        assert cli.main(["migrate"]) == 0, capsys.readouterr()
        with psycopg.connect(psycopg.conninfo.make_conninfo(**{**info, "dbname": name})) as other:
            applied = other.execute("SELECT count(*) FROM schema_migration").fetchone()[0]
        assert applied == len(db.migration_files())
        capsys.readouterr()
        assert cli.main(["db-url"]) == 0
        printed = capsys.readouterr().out.strip()
        assert f"dbname={name}" in printed and printed == Runtime.load().database_url  # the tasks' database
    finally:
        db.close_pools()
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
