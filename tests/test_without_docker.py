"""The ways to run the radar without Docker, held to what the guide says (docs/deployment.md, 二 and 三):
`make ui` and every make target stop at their first failure with its own message, listen on loopback only and
leave one metadata database per AIRFLOW_HOME in its airflow.cfg; no radar command writes ~/airflow; the systemd
units of deploy/systemd verify and keep the secrets where the guide puts them; the package registers the plugin.

Rooms: scripts/bootstrap.sh, scripts/airflow_cfg.py, include/radar_demo/ui.py, deploy/systemd/, pyproject.toml.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

REPO = Path(__file__).resolve().parents[1]
UNITS = REPO / "deploy" / "systemd"
sys.path.insert(0, str(REPO / "scripts"))

from airflow_cfg import set_values  # noqa: E402

from include.radar_demo.waiting import run  # noqa: E402
from tests.conftest import _server_url as _server  # noqa: E402
from tests.conftest import _with_database as _database  # noqa: E402


def _unit(name: str) -> str:
    return (UNITS / name).read_text(encoding="utf-8")


def _clean_env(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "RADAR_"))}
    return {**keep, **extra}


# ------------------------------------------------------------------------------------------ airflow.cfg


def test_set_values_replaces_a_multi_line_value_keeps_comments_and_adds_what_is_missing() -> None:
    cfg = ("[core]\n# the executor\nexecutor = SequentialExecutor\n\n[dag_processor]\n# bundles\n"
           "dag_bundle_config_list = [\n    {\n      \"name\": \"dags-folder\"\n    }\n  ]\nrefresh_interval = 300\n")
    done = set_values(cfg, {("core", "executor"): "LocalExecutor", ("core", "load_examples"): "False",
                            ("dag_processor", "dag_bundle_config_list"): '[{"name": "radar"}]',
                            ("api", "host"): "127.0.0.1"})
    assert done == ("[core]\n# the executor\nexecutor = LocalExecutor\nload_examples = False\n\n[dag_processor]\n"
                    "# bundles\ndag_bundle_config_list = [{\"name\": \"radar\"}]\nrefresh_interval = 300\n\n[api]\n"
                    "host = 127.0.0.1\n")
    parsed = configparser.ConfigParser(interpolation=None)
    parsed.read_string(done)
    assert json.loads(parsed["dag_processor"]["dag_bundle_config_list"]) == [{"name": "radar"}]


def test_the_tests_airflow_home_names_this_bundle_and_loopback_in_its_airflow_cfg() -> None:
    """scripts/bootstrap.sh wrote it: a plain `airflow …` with this AIRFLOW_HOME sees what make test sees."""
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(Path(os.environ["AIRFLOW_HOME"]) / "airflow.cfg", encoding="utf-8")
    assert cfg["core"]["dags_folder"] == str(REPO / "dags")
    assert cfg["core"]["plugins_folder"] == str(REPO / "plugins")
    assert (cfg["core"]["load_examples"], cfg["api"]["host"]) == ("False", "127.0.0.1")


def test_bootstrap_stops_at_its_first_failure_with_its_own_message(tmp_path: Path) -> None:
    """The guide's radar login may not create databases: make ui must say so and stop, not go on to a
    traceback of Airflow's about an empty URL."""
    server, role, name = _server(), f"nocreate_{uuid.uuid4().hex[:8]}", f"radar_boot_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN NOCREATEDB')
        admin.execute(f'CREATE DATABASE "{name}" OWNER "{role}"')
    info = psycopg.conninfo.conninfo_to_dict(server)
    info.update(user=role, dbname=name)
    try:
        done = run(  # as long as bootstrap works (Airflow's migration included), however loaded the machine
            ["bash", "scripts/bootstrap.sh", "echo", "went-on"], cwd=REPO,
            env=_clean_env(RADAR_DATABASE_URL=psycopg.conninfo.make_conninfo(**info), RADAR_AIRFLOW_ON_POSTGRES="1",
                           AIRFLOW_HOME=str(tmp_path / "home"), PATH=os.environ["PATH"]))
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')
    assert done.returncode != 0 and "went-on" not in done.stdout
    # "create" on a server without an `airflow` database, "use" where one exists that the login does not own
    assert re.search(f"cannot (create|use) Airflow's metadata database 'airflow' as '{role}'", done.stderr), \
        done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "ValueError" not in done.stderr


def test_make_ui_and_make_run_leave_one_metadata_database_in_airflow_cfg(tmp_path: Path) -> None:
    """After bootstrap on PostgreSQL, `airflow config get-value` in that AIRFLOW_HOME, from a shell without any
    of bootstrap's variables, names the PostgreSQL database: not a second, SQLite one."""
    from include.radar.core import db

    server, radar, metadata = _server(), f"radar_boot_{uuid.uuid4().hex[:8]}", f"airflow_boot_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{radar}"')
    home = tmp_path / "home"
    try:
        done = run(
            ["bash", "scripts/bootstrap.sh", "true"], cwd=REPO,
            env=_clean_env(RADAR_DATABASE_URL=_database(server, radar), RADAR_AIRFLOW_ON_POSTGRES="1",
                           RADAR_AIRFLOW_DB_NAME=metadata, AIRFLOW_HOME=str(home), PATH=os.environ["PATH"]))
        assert done.returncode == 0, done.stderr[-3000:]
        said = run([str(REPO / ".venv" / "bin" / "airflow"), "config", "get-value", "database", "sql_alchemy_conn"],
                   env=_clean_env(AIRFLOW_HOME=str(home), PATH=os.environ["PATH"]))
        assert said.returncode == 0, said.stderr[-2000:]
        assert said.stdout.strip() == db.airflow_metadata_url(_database(server, radar), metadata)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            for name in (radar, metadata):
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_no_radar_command_writes_a_home_airflow_where_no_airflow_is_configured(tmp_path: Path) -> None:
    """A plain shell, connections in its environment (JSON and URI), no AIRFLOW_HOME: check reads them all and
    never imports Airflow, which would write ~/airflow."""
    conns = {"AIRFLOW_CONN_WERSS_DEFAULT": json.dumps({"conn_type": "http", "host": "http://127.0.0.1:9",
                                                       "extra": {"access_key": "AK1", "secret_key": "SK1"}}),
             "AIRFLOW_CONN_RADAR_PUSH": "generic://?urls=json%3A%2F%2F127.0.0.1%3A9%2Fpush"}
    done = subprocess.run(
        [sys.executable, "-m", "include.radar.cli", "check", "--timeout", "1"], cwd=REPO, capture_output=True,
        text=True, timeout=300, env=_clean_env(HOME=str(tmp_path), RADAR_DATABASE_URL=_server(), PYTHONPATH=str(REPO),
                                               PATH=os.environ["PATH"], **conns))
    assert "! Airflow · 元数据库: 这里没有 Airflow：AIRFLOW_HOME 没有设置，~/airflow 也不存在" in done.stdout, done.stdout
    assert "✗ WeRSS · 可达: WeRSS unreachable at http://127.0.0.1:9" in done.stdout  # the connection was read
    assert not (tmp_path / "airflow").exists()


@pytest.mark.parametrize("raw", [
    json.dumps({"conn_type": "http", "host": "https://api.deepseek.com", "password": "sk-a:b@c/d", "port": "8443",
                "extra": {"urls": ["json://x/y"]}}),
    json.dumps({"conn_type": "generic", "extra": json.dumps({"urls": ["tgram://t/c"]})}),
    "postgres://radar:p%40ss%3Aw%2Frd@db.example:5433/radar?sslmode=require",
    "generic://?__extra__=%7B%22urls%22%3A+%5B%22json%3A%2F%2Fh%2Fp%22%5D%7D",
])
def test_a_connection_in_the_environment_reads_as_airflows_own_parser_reads_it(raw, monkeypatch, tmp_path) -> None:
    from airflow.models.connection import Connection

    from include.radar.core import connection_info

    ours = connection_info._from_env("x", raw)
    if raw.startswith("{"):
        theirs = Connection.from_json(raw, conn_id="x")
    else:
        theirs = Connection(conn_id="x", uri=raw)
        monkeypatch.delenv("AIRFLOW_HOME", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path))  # no Airflow here: the standard reading, not Airflow's
        assert connection_info._from_env("x", raw) == ours
    assert (ours.host, ours.login, ours.password, ours.port, ours.schema, ours.extra) == (
        theirs.host, theirs.login, theirs.password, theirs.port, theirs.schema, theirs.extra_dejson)


# ----------------------------------------------------------------------------------------------- make ui


def test_make_ui_listens_on_loopback_and_refuses_a_taken_port(monkeypatch, capsys) -> None:
    from include.radar_demo import ui

    assert ui.HOST == "127.0.0.1"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        monkeypatch.setattr(ui, "PORT", port)
        assert ui.main() == 1
    err = capsys.readouterr().err
    assert f"error: port {port} on 127.0.0.1 is in use" in err and "RADAR_UI_PORT" in err


def _standalone(log: Path, returncode: int | None = None):
    """airflow standalone as make ui watches it: alive (None) or exited with ``returncode``."""
    from types import SimpleNamespace

    return SimpleNamespace(pid=100, args=["airflow", "standalone"], log=log, returncode=returncode,
                           poll=lambda: returncode)


def _table(api_cpu: int | None, scheduler_cpu: int = 0) -> list:
    """airflow standalone's processes: itself, a scheduler, and an api-server with a worker (unless None); the
    api-server retitles itself once it has run a while."""
    from include.radar_demo.waiting import Proc

    argv = ("python", "airflow", "api-server") if (api_cpu or 0) < 20 else ("airflow api_server -- port:8080",)
    api = [Proc(101, 100, argv, api_cpu), Proc(102, 101, ("python", "-c", "spawn"), 3)]
    return [Proc(100, 1, ("python", "airflow", "standalone"), 9), Proc(103, 100, ("python", "airflow", "scheduler"),
                                                                      scheduler_cpu), *(api if api_cpu is not None else [])]


def test_make_ui_waits_for_a_slow_start_and_says_which_process_stopped_or_stood_still(tmp_path: Path) -> None:
    """No deadline: an api-server that works (spends CPU) for twice the quiet bound is waited for; one that stands
    still is given up after it, however busy the scheduler; its exit, or standalone's, at once; each named."""
    from datetime import UTC, datetime

    from include.radar.core.clock import FixedClock
    from include.radar_demo import ui
    from include.radar_demo.waiting import GaveUp

    clock = FixedClock(datetime(2026, 1, 5, tzinfo=UTC), step=0)  # a poll's sleep moves it; nothing waits
    log = tmp_path / "standalone.log"
    log.write_text("standalone | Starting Airflow Standalone\napi-server | Traceback: port in use\n")
    begun = clock.monotonic()

    def since() -> int:
        return int(clock.monotonic() - begun)

    loaded = ui.StandaloneStart(_standalone(log), table=lambda _: _table(api_cpu=since() // 10), clock=clock,
                                probe=lambda: 200 if since() > 2 * ui.QUIET else "ConnectionRefusedError")
    loaded.wait()
    assert since() > 2 * ui.QUIET
    begun = clock.monotonic()
    stuck = ui.StandaloneStart(_standalone(log), table=lambda _: _table(api_cpu=7, scheduler_cpu=since()),
                               probe=lambda: "ConnectionRefusedError", clock=clock)
    with pytest.raises(GaveUp, match=f"api-server to answer on port {ui.PORT}.*: nothing moved for {ui.QUIET} s"):
        stuck.wait()
    assert ui.QUIET <= since() <= ui.QUIET + 2
    tables = iter([_table(api_cpu=1), _table(api_cpu=2), _table(api_cpu=None)])
    died = ui.StandaloneStart(_standalone(log), table=lambda _: next(tables), probe=lambda: "timeout", clock=clock)
    with pytest.raises(GaveUp, match="its api-server exited") as gone:
        died.wait()
    assert "Traceback: port in use" in str(gone.value)
    with pytest.raises(GaveUp, match=r"airflow standalone exited \(1\) while waiting for the api-server") as ended:
        ui.StandaloneStart(_standalone(log, 1), table=lambda _: [], probe=lambda: "timeout", clock=clock).wait()
    assert "Starting Airflow Standalone" in str(ended.value)


# ------------------------------------------------------------------------------------ systemd and config


def test_the_systemd_units_verify(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here")
    airflow = REPO / ".venv" / "bin" / "airflow"
    for unit in UNITS.glob("*.service"):
        text = unit.read_text(encoding="utf-8").replace("/opt/radar/venv/bin/airflow", str(airflow))
        (tmp_path / unit.name).write_text(text.replace("/opt/we-mp-rss/venv/bin/python", sys.executable))
    shutil.copy(UNITS / "opportunity-radar.target", tmp_path)
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", *sorted(str(p) for p in tmp_path.iterdir())],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr


def test_the_units_give_each_process_what_the_guide_says_and_no_more() -> None:
    api = _unit("radar-api-server.service")
    assert "EnvironmentFile=/etc/opportunity-radar/pages.env" in api and "tasks.env" not in api
    assert "--proxy-headers" in api and "0.0.0.0" not in api
    for name in ("scheduler", "dag-processor", "triggerer"):
        unit = _unit(f"radar-{name}.service")
        assert "EnvironmentFile=/etc/opportunity-radar/tasks.env" in unit and "pages.env" not in unit
        assert f"ExecStart=/opt/radar/venv/bin/airflow {name}" in unit
    target = _unit("opportunity-radar.target")
    assert set(re.findall(r"radar-[\w-]+\.service", target)) == {p.name for p in UNITS.glob("radar-*.service")}
    pages = _unit("pages.env.example")
    assert "AIRFLOW_CONN_" not in pages and "RADAR_PAGES_DATABASE_URL=" in pages and "RADAR_DATABASE_URL=" not in pages
    tasks = _unit("tasks.env.example")
    assert all(f"{name}=" in tasks for name in ("RADAR_DATABASE_URL", "AIRFLOW_CONN_WERSS_DEFAULT",
                                                "AIRFLOW_CONN_DEEPSEEK_DEFAULT", "AIRFLOW_CONN_RADAR_PUSH"))


def _service_lines(name: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in _unit(name).splitlines():
        key, equals, value = line.partition("=")
        if equals and not line.startswith("#"):
            found.setdefault(key, []).append(value)
    return found


@pytest.mark.hostile
def test_the_api_server_runs_as_a_user_of_its_own_that_cannot_read_the_tasks_secrets() -> None:
    """The internet-facing process: its own user and group (the pages' role's name, so peer authentication
    gives it that role only), no supplementary group; the tasks' processes run as radar. The env files and
    their directory are the group radar's, which the guide never gives radar_pages; AIRFLOW_HOME is the group
    radar_pages's (read, not written), and so are the task logs Airflow makes in it."""
    api = _service_lines("radar-api-server.service")
    assert (api["User"], api["Group"]) == (["radar_pages"], ["radar_pages"]) and "SupplementaryGroups" not in api
    assert "ReadWritePaths" not in api  # it writes nothing of the radar's
    for name in ("scheduler", "dag-processor", "triggerer"):
        unit = _service_lines(f"radar-{name}.service")
        assert (unit["User"], unit["Group"]) == (["radar"], ["radar"])
    guide = (REPO / "docs" / "deployment.md").read_text(encoding="utf-8")
    [pages_user] = re.findall(r"^sudo useradd .* radar_pages$", guide, re.M)
    assert not re.search(r"\s(-G|--groups|-g|--gid)\s", pages_user), pages_user
    assert "sudo install -d -m 750 -o root -g radar /etc/opportunity-radar\n" in guide
    assert re.search(r"sudo install -m 640 -o root -g radar /opt/radar/deploy/systemd/\$f\.env\.example", guide)
    assert "sudo install -d -m 2750 -o radar -g radar_pages /var/lib/radar/airflow\n" in guide
    assert "sudo chmod 640 /var/lib/radar/airflow/airflow.cfg\n" in guide  # Airflow makes it 0600
    for env in ("airflow", "metadata", "tasks", "pages"):
        assert "(root:radar, 0640" in " ".join(_unit(f"{env}.env.example").split()), env
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(UNITS / "airflow.cfg.radar", encoding="utf-8")
    assert (cfg["logging"]["file_task_handler_new_folder_permissions"],
            cfg["logging"]["file_task_handler_new_file_permissions"]) == ("0o750", "0o640")


@pytest.mark.hostile
def test_no_airflow_process_of_the_one_host_units_serves_logs_on_every_interface() -> None:
    """Airflow's log servers (8793 the scheduler's, 8794 the triggerer's) bind every interface, and no setting
    of Airflow 3.3 binds them to loopback (airflow.utils.serve_logs passes host=""): the units start none, the
    api-server reads the logs on this machine's disk."""
    from airflow.utils.serve_logs import core

    assert 'host="",' in Path(core.__file__).read_text(encoding="utf-8")  # the day a setting comes, use it
    for name in ("scheduler", "triggerer"):
        assert _service_lines(f"radar-{name}.service")["ExecStart"] == [
            f"/opt/radar/venv/bin/airflow {name} --skip-serve-logs"]
    assert _service_lines("radar-dag-processor.service")["ExecStart"] == ["/opt/radar/venv/bin/airflow dag-processor"]
    guide = (REPO / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert "--skip-serve-logs" in guide and "8793" in guide and "8794" in guide


def test_werss_runs_natively_with_its_scheduler_in_shanghai_time() -> None:
    werss = _unit("werss.service")
    assert "main.py -job True" in werss and "Environment=TZ=Asia/Shanghai" in werss


def test_the_airflow_cfg_lines_of_the_guide() -> None:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(UNITS / "airflow.cfg.radar", encoding="utf-8")
    assert cfg["core"]["executor"] == "LocalExecutor"
    assert cfg["core"]["auth_manager"] == "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
    assert cfg["database"]["sql_alchemy_conn"] == "<AIRFLOW__DATABASE__SQL_ALCHEMY_CONN>"  # metadata.env's
    metadata = _unit("metadata.env.example")
    assert "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=postgresql+psycopg2://airflow:<AIRFLOW_DB_PASSWORD>@" in metadata
    assert (cfg["api"]["host"], cfg["api"]["port"]) == ("127.0.0.1", "8080")
    assert cfg["core"]["execution_api_server_url"] == "http://127.0.0.1:8080/execution/"
    [bundle] = json.loads(cfg["dag_processor"]["dag_bundle_config_list"])
    assert bundle["classpath"] == "airflow.dag_processing.bundles.local.LocalDagBundle"
    assert bundle["kwargs"]["path"] == "/opt/radar/dags"
    from airflow.providers.fab.auth_manager.fab_auth_manager import FabAuthManager  # installed (requirements.txt)

    assert FabAuthManager.__name__ == "FabAuthManager"


def test_the_guides_airflow_cfg_command_writes_the_files_keys_into_airflows_own(tmp_path: Path) -> None:
    """二.4: ``airflow_cfg.py --from airflow.cfg.radar`` on a home with no airflow.cfg: Airflow's defaults (its
    fernet key and JWT secret kept), the file's keys over them, the metadata URL filled from the environment; without
    the variable it refuses, naming it, and writes nothing."""
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    command = [sys.executable, str(REPO / "scripts" / "airflow_cfg.py"), "--from", str(UNITS / "airflow.cfg.radar")]
    env.pop("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", None)
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in refused.stderr
    assert not (tmp_path / "airflow.cfg").exists()
    url = "postgresql+psycopg2://airflow:s3cret-x@127.0.0.1:5432/airflow"
    done = subprocess.run(command, env={**env, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "database.sql_alchemy_conn" in done.stdout and "s3cret-x" not in done.stdout
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(tmp_path / "airflow.cfg", encoding="utf-8")
    assert cfg["database"]["sql_alchemy_conn"] == "postgresql+psycopg2://airflow:s3cret-x@127.0.0.1:5432/airflow"
    assert cfg["api"]["base_url"] == "http://127.0.0.1:8080" and cfg["core"]["executor"] == "LocalExecutor"
    assert len(cfg["core"]["fernet_key"]) == 44 and cfg["api_auth"]["jwt_secret"]


# --------------------------------------------------------------------------------------------- the package


def test_the_package_registers_the_plugin_through_airflows_entry_point() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    [(name, target)] = project["project"]["entry-points"]["airflow.plugins"].items()
    module, _, attribute = target.partition(":")
    plugin = getattr(__import__(module, fromlist=[attribute]), attribute)
    assert name == plugin.name == "opportunity_radar"
    assert plugin.fastapi_apps[0]["url_prefix"] == "/radar"
    data = project["tool"]["setuptools"]["package-data"]["include.radar"]
    for pattern in data:  # every kind of file the library reads at run time is shipped
        assert list((REPO / "include" / "radar").glob(pattern)), pattern


def test_a_radar_installed_without_a_checkout_refuses_to_start_a_database_in_site_packages(monkeypatch, tmp_path) -> None:
    from include.radar.core import db

    monkeypatch.delenv("RADAR_PGDATA", raising=False)
    monkeypatch.setattr(db, "REPO_ROOT", tmp_path / "site-packages")
    with pytest.raises(db.DatabaseUnavailable, match="set RADAR_DATABASE_URL"):
        db.embedded_pgdata()


# ----------------------------------------------------------------------------------- the environment files


def test_env_files_read_as_systemd_reads_them_json_unquoted_and_quoted(tmp_path: Path) -> None:
    """What `cli --env-file` gives a command typed by hand is what the unit gets: `. tasks.env` in sh would
    strip the JSON's quotes and read `<` as a redirection."""
    from include.radar.operations import env_file

    path = tmp_path / "tasks.env"
    path.write_text('# a comment\n; another\n\nAIRFLOW_CONN_X={"conn_type":"http","extra":{"k":"<AK>"}}\n'
                    "  SPACED = 'a b'  \nDOUBLE=\"x\\\"y\\$z\\q\"\nCONTINUED=foo\\\nbar   \nEMPTY=\n"
                    "AIRFLOW_CONN_X=later\n", encoding="utf-8")
    assert env_file.read(path) == {"AIRFLOW_CONN_X": "later", "SPACED": "a b", "DOUBLE": 'x"y$z\\q',
                                   "CONTINUED": "foobar", "EMPTY": ""}
    tasks = env_file.read(UNITS / "tasks.env.example")
    assert json.loads(tasks["AIRFLOW_CONN_WERSS_DEFAULT"])["extra"] == {"access_key": "<AK>", "secret_key": "<SK>"}
    path.write_text("export A=1\n", encoding="utf-8")
    with pytest.raises(env_file.EnvFileError, match="line 1: not KEY=VALUE"):
        env_file.read(path)


def test_cli_exec_runs_a_command_with_the_env_files_variables(tmp_path: Path) -> None:
    env = tmp_path / "a.env"
    env.write_text('AIRFLOW_CONN_X={"a":"b c"}\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "include.radar.cli", "--env-file", str(env), "exec", "sh", "-c",
                           'printf %s "$AIRFLOW_CONN_X"'], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=_clean_env(PYTHONPATH=str(REPO)))
    assert (done.returncode, done.stdout) == (0, '{"a":"b c"}'), done.stderr
    missing = subprocess.run([sys.executable, "-m", "include.radar.cli", "--env-file", str(tmp_path / "no.env"),
                              "check"], cwd=REPO, capture_output=True, text=True, timeout=120,
                             env=_clean_env(PYTHONPATH=str(REPO)))
    assert missing.returncode == 2 and "error: --env-file:" in missing.stderr


def test_env_files_given_through_a_pipe_are_read_from_the_standard_input(tmp_path: Path) -> None:
    """The guide's provision (二.3): root reads the env files, the postgres user gets them through a pipe as
    `--env-file -`; /dev/stdin would reopen the pipe, which its owner's mode refuses to another user."""
    env = tmp_path / "a.env"
    env.write_text('AIRFLOW_CONN_X={"a":"b c"}\nB=1\n', encoding="utf-8")
    command = [sys.executable, "-m", "include.radar.cli", "--env-file", "-", "exec", "sh", "-c",
               'printf %s "$AIRFLOW_CONN_X $B"']
    with env.open() as given:
        done = subprocess.run(command, cwd=REPO, stdin=given, capture_output=True, text=True, timeout=120,
                              env=_clean_env(PYTHONPATH=str(REPO)))
    assert (done.returncode, done.stdout) == (0, '{"a":"b c"} 1'), done.stderr
    said = subprocess.run(command, cwd=REPO, input="export A=1\n", capture_output=True, text=True, timeout=120,
                          env=_clean_env(PYTHONPATH=str(REPO)))
    assert said.returncode == 2 and "standard input, line 1: not KEY=VALUE" in said.stderr, said.stderr


def test_the_installed_package_and_an_astro_projects_own_include_are_both_importable(tmp_path: Path) -> None:
    """The wheel ships include/ as a namespace package (no __init__.py): an Astro project, whose root is on the
    path with its own include/ of helpers, imports its helpers and the radar side by side, whichever comes
    first on the path (a regular ``include`` package would hide the one or the other)."""
    import zipfile

    done = subprocess.run([str(REPO / ".venv" / "bin" / "uv"), "build", "--wheel", "--out-dir", str(tmp_path / "dist"),
                           str(REPO)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    [wheel] = (tmp_path / "dist").glob("opportunity_radar-*.whl")
    site = tmp_path / "site-packages"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(site)
    assert "include/__init__.py" not in names and "include/radar/__init__.py" in names
    assert not [n for n in names if n.startswith("include/radar_demo")]  # the demo is not the library
    project = tmp_path / "astro"
    (project / "include").mkdir(parents=True)
    (project / "include" / "helpers.py").write_text("ANSWER = 42\n", encoding="utf-8")
    code = ("import include.helpers, include.radar.core.slots as slots; "
            f"print(include.helpers.ANSWER, slots.__file__.startswith({str(site)!r}))")
    for path in (f"{project}:{site}", f"{site}:{project}"):
        ran = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                             env=_clean_env(PYTHONPATH=path))
        assert (ran.returncode, ran.stdout.strip()) == (0, "42 True"), ran.stderr[-2000:]
