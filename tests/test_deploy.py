"""The deployment files (Dockerfile, docker-compose.yaml, .env.example) agree with the code.

Nothing here needs the radar database but the check of the pages' cookies behind a TLS proxy. The checks read the settings and connection ids from
``include.radar.core.settings`` at run time and scan the code for the environment variables it reads, so a
setting, connection or variable added later without a line in ``.env.example`` fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from include.radar.core.settings import SETTING_NAMES, Settings, env_name, load_settings
from tools.compose_engine import COMPOSE_READS

REPO = Path(__file__).resolve().parents[1]
ENV_EXAMPLE = REPO / ".env.example"
COMPOSE = REPO / "docker-compose.yaml"
# The optional WeRSS service has its own file: compose interpolates every file it loads before it applies
# profiles, so a required ${VAR:?} of WeRSS inside docker-compose.yaml would stop every `docker compose up`.
COMPOSE_WERSS = REPO / "docker-compose.werss.yaml"
# Every compose file of the bundle; the guarantees below (no literal secrets, every variable documented,
# pinned images) hold for each, including files added later.
COMPOSE_FILES = sorted(REPO.glob("docker-compose*.yaml"))
DOCKERFILE = REPO / "Dockerfile"
POSTGRES_ENTRYPOINT = REPO / "deploy" / "postgres-entrypoint.sh"
CODE_DIRS = ("include", "dags", "plugins")

# Environment variables the code reads that deliberately have no line in .env.example:
ENV_ALLOWLIST = {
    # data directory of the embedded PostgreSQL (db.py) for local runs without a database server; the
    # deployment always sets RADAR_DATABASE_URL, so the embedded server is never started there
    "RADAR_PGDATA",
    # the test suite's database server (tests/conftest.py, CI); never read by the deployed code
    "RADAR_TEST_DATABASE_URL",
    # set by the Airflow image itself (/opt/airflow), and by docker-compose.yaml (config/airflow.cfg): with either,
    # this process has an Airflow to ask (settings.airflow_here: without one, importing Airflow would write ~/airflow)
    "AIRFLOW_HOME",
    "AIRFLOW_CONFIG",
    # Airflow's own mark of a process that reads its metadata database (its servers set it; the radar's cli sets it
    # for its command, settings.airflow_server_context): never one a deployment sets
    "_AIRFLOW_PROCESS_CONTEXT",
    # `make ui` only (include/radar_demo/ui.py): the local UI's port, and a marker set by
    # scripts/bootstrap.sh when the user gave RADAR_DATABASE_URL; the deployment never runs ui.py
    "RADAR_UI_PORT",
    "RADAR_DATABASE_URL_FROM_USER",
    # `make run` / `make ui` only: the demo push sink's port (include/radar_demo/run.py)
    "RADAR_DEMO_PUSH_PORT",
    # `make bench-slot` / `make celery` only: the name of Airflow's metadata database on the embedded server
    # (include/radar/cli.py, default "airflow"), and which of the two local Celery workers ran a task
    # (include/radar_demo/hostname.py); the deployment runs Airflow on its own database and machines
    "RADAR_AIRFLOW_DB_NAME",
    "RADAR_WORKER_NAME",
    # Airflow's metadata login, which docker-compose.yaml builds from AIRFLOW_DB_USER/PASSWORD (roles.py
    # provisions it); read by `python -m include.radar.cli provision`
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
    # libpq's own defaults, which `provision` reads as libpq does for an admin URL without a user, database
    # or host (operations/roles.py): the guide's socket URL typed as `sudo -u postgres`
    "PGHOST",
    "PGDATABASE",
    "PGUSER",
}
# The radar database is given either as the connection radar_db or as RADAR_DATABASE_URL (db.py reads
# RADAR_DATABASE_URL first); .env.example documents the connection in a comment and sets the URL.
ENV_ALTERNATIVES = {"AIRFLOW_CONN_RADAR_DB": "RADAR_DATABASE_URL"}

AIRFLOW_SERVICES = {
    "airflow-apiserver": "api-server --proxy-headers",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
    "airflow-triggerer": "triggerer",
    "airflow-worker": "celery worker",
    "airflow-init": None,  # runs its own bash script
}
SERVICES = {*AIRFLOW_SERVICES, "postgres", "redis"}
# where the radar's own code runs (tasks, callbacks, the schema's migration), as the radar's owner
RADAR_CODE_SERVICES = ("airflow-worker", "airflow-triggerer", "airflow-dag-processor", "airflow-init", "airflow-cli")

# Each container gets the secrets it needs and no other. What .env holds that a container could
# receive, and who receives it (a password inside a URL counts: it is the login).
# (every Airflow container has the Celery broker's URL, and with it Redis's password)
AIRFLOW_SHARED = {"AIRFLOW_DB_PASSWORD", "AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY",
                  "AIRFLOW__CORE__FERNET_KEY", "REDIS_PASSWORD"}
RADAR_CALLBACKS = {"RADAR_DB_PASSWORD", "AIRFLOW_CONN_RADAR_PUSH", "AIRFLOW_CONN_RADAR_OPS_PUSH"}
TASKS = AIRFLOW_SHARED | RADAR_CALLBACKS | {"AIRFLOW_CONN_WERSS_DEFAULT", "AIRFLOW_CONN_DEEPSEEK_DEFAULT",
                                            "AIRFLOW_VAR_RADAR_LINK_SECRET"}
SECRETS_RECEIVED = {
    "postgres": {"POSTGRES_PASSWORD"},
    "redis": {"REDIS_PASSWORD"},
    "airflow-apiserver": AIRFLOW_SHARED | {"RADAR_PAGES_DB_PASSWORD", "AIRFLOW_VAR_RADAR_LINK_SECRET"},
    "airflow-scheduler": AIRFLOW_SHARED,
    "airflow-dag-processor": AIRFLOW_SHARED | RADAR_CALLBACKS,
    "airflow-triggerer": AIRFLOW_SHARED | RADAR_CALLBACKS,
    "airflow-worker": TASKS,
    "airflow-cli": TASKS | {"RADAR_PAGES_DB_PASSWORD"},  # `cli check` tries the pages' login too
    "airflow-init": AIRFLOW_SHARED | {"POSTGRES_PASSWORD", "RADAR_DB_PASSWORD", "RADAR_PAGES_DB_PASSWORD",
                                      "_AIRFLOW_WWW_USER_PASSWORD", "WERSS_PASSWORD"},  # it refuses a weak one
    "flower": {"AIRFLOW_DB_PASSWORD", "FLOWER_BASIC_AUTH", "REDIS_PASSWORD"},
    "werss": {"WERSS_PASSWORD", "WERSS_SECRET_KEY"},
}
# the services that read the radar's settings (the schedule at parse time, the rest in tasks and pages)
SETTINGS_SERVICES = ("airflow-apiserver", "airflow-worker", "airflow-triggerer", "airflow-dag-processor", "airflow-cli")
# What the WeRSS image reads (github.com/rachelos/we-mp-rss): init_sys.py creates the admin account from
# USERNAME/PASSWORD (os.getenv, defaults admin / admin@123) on first start; config.example.yaml signs the
# login tokens with `secret: ${SECRET_KEY:-we-mp-rss}`, a public default, and an empty value is taken as is.
WERSS_REQUIRED = {"PASSWORD": "WERSS_PASSWORD", "SECRET_KEY": "WERSS_SECRET_KEY"}
# What docker-compose.yaml itself requires of every deployment (${NAME:?...}): the Celery broker's password.
# .env.example leaves it empty; a user's .env has it (the fixture env_filled).
COMPOSE_REQUIRED = {"REDIS_PASSWORD": "a-redis-password-the-user-made"}
# A full version (1.2.3, v1.2.3, 7.2.12-bookworm, 3.3.2-python3.11) or, where upstream publishes no version
# tags, a digest; never a floating tag such as latest, 16 or 7.2-bookworm.
FULL_VERSION = re.compile(r"v?\d+\.\d+\.\d+(?:[-+][A-Za-z0-9][\w.-]*)?")
# PostgreSQL (10 and later) numbers its releases MAJOR.MINOR: 16.13 is a full version, 16 a floating tag.
TWO_PART_VERSION = re.compile(r"\d+\.\d+(?:-[A-Za-z0-9][\w.-]*)?")
TWO_PART_IMAGES = {"postgres"}
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
SECRET_KEY = re.compile(r"(PASSWORD|SECRET|SECRET_KEY|FERNET_KEY|BASIC_AUTH)$")
ENV_READ = re.compile(
    r"""(?:\bos\.getenv\(\s*|\benviron\.get\(\s*|\benviron\[\s*|\bdeployment\(\s*)["']([A-Za-z_][A-Za-z0-9_]*)["']"""
)
AIRFLOW_ENV_NAME = re.compile(r"\bAIRFLOW_(?:CONN|VAR)_[A-Z0-9_]+(?![A-Za-z0-9_<{*])")
# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?err}, ... but not the escaped $${NAME}
INTERPOLATION = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-?+])?")


def _mounts(service: dict) -> dict[str, str]:
    """Target -> source of a service's short-syntax volumes (``source:target[:options]``)."""
    mounts = {}
    for volume in service.get("volumes", []):
        rest, _, target = str(volume).rpartition(":")
        if not target.startswith("/"):  # options such as :ro
            rest, _, target = rest.rpartition(":")
        mounts[target] = rest
    return mounts


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def read_env_example() -> dict[str, str]:
    """The active ``KEY=value`` lines of .env.example (commented lines are documentation only)."""
    values: dict[str, str] = {}
    for number, line in enumerate(ENV_EXAMPLE.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = ENV_LINE.match(stripped)
        assert match, f".env.example:{number}: not a KEY=value line: {line!r}"
        key, value = match.groups()
        assert key not in values, f".env.example:{number}: {key} is set twice"
        values[key] = _unquote(value)
    return values


@pytest.fixture(scope="module")
def env_example() -> dict[str, str]:
    return read_env_example()


@pytest.fixture(scope="module")
def env_filled(env_example: dict[str, str]) -> dict[str, str]:
    """A .env as the user makes it from .env.example: the values it shows, and what compose requires filled in."""
    return {**env_example, **COMPOSE_REQUIRED}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _service(name: str) -> tuple[dict, Path]:
    """The service ``name`` and the compose file that defines it."""
    found = [(services[name], path) for path in COMPOSE_FILES if name in (services := _load(path)["services"])]
    assert len(found) == 1, f"service {name} defined in {[path.name for _, path in found]}"
    return found[0]


class RequiredVariableError(Exception):
    """What `docker compose` reports for an unset or empty ${NAME:?message}."""

    def __init__(self, where: str, name: str, message: str) -> None:
        super().__init__(f"error while interpolating {where}: required variable {name} is missing a value: {message}")
        self.name = name
        self.message = message


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXPANSION = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])(.*))?", re.DOTALL)


def _interpolate(text: str, env: Mapping[str, str], where: str = "") -> str:
    """Compose's interpolation of one value (the forms its documentation lists), for reading the files here.

    ``$$`` is a literal ``$``; ``$NAME`` and ``${NAME}`` take the value or ""; ``${NAME:-d}``/``${NAME-d}`` the
    default when unset or empty/unset; ``${NAME:?m}``/``${NAME?m}`` fail with m; ``${NAME:+r}``/``${NAME+r}``
    give r when set. Nested ${...} in defaults are expanded; anything else after a ``$`` is an error, as in compose.
    """
    out, i = [], 0
    while i < len(text):
        if text[i] != "$":
            out.append(text[i])
            i += 1
        elif text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("${", i):
            depth, j = 1, i + 2
            while depth:
                assert j < len(text), f"{where}: unclosed ${{ in {text!r}"
                if text.startswith("${", j):
                    depth, j = depth + 1, j + 2
                    continue
                depth -= text[j] == "}"
                j += 1
            out.append(_expand(text[i + 2 : j - 1], env, where))
            i = j
        elif match := _NAME.match(text, i + 1):
            out.append(env.get(match.group(0)) or "")
            i = match.end()
        else:
            raise AssertionError(f"{where}: invalid interpolation format in {text!r} (escape $ as $$)")
    return "".join(out)


def _expand(body: str, env: Mapping[str, str], where: str) -> str:
    match = _EXPANSION.fullmatch(body)
    assert match, f"{where}: unsupported interpolation ${{{body}}}"
    name, operator, argument = match.groups()
    value = env.get(name)
    if operator is None:
        return value or ""
    present = bool(value) if operator.startswith(":") else value is not None
    if operator.endswith("-"):
        return value if present else _interpolate(argument, env, where)
    if operator.endswith("+"):
        return _interpolate(argument, env, where) if present else ""
    if not present:
        raise RequiredVariableError(where, name, _interpolate(argument, env, where))
    return value


def _interpolations(path: Path) -> set[tuple[str, str]]:
    """(name, operator) of every ${...} compose interpolates in a file: in its values, not keys or comments."""

    def strings(value: Any) -> list[str]:
        if isinstance(value, dict):
            return [text for item in value.values() for text in strings(item)]
        if isinstance(value, list):
            return [text for item in value for text in strings(item)]
        return [value] if isinstance(value, str) else []

    return {found for text in strings(_load(path)) for found in INTERPOLATION.findall(text)}


def _interpolated(value: Any, env: Mapping[str, str], where: str = "") -> Any:
    """A parsed compose file (or part) with every string value interpolated; keys stay as they are."""
    if isinstance(value, dict):
        return {key: _interpolated(item, env, f"{where}.{key}".lstrip(".")) for key, item in value.items()}
    if isinstance(value, list):
        return [_interpolated(item, env, f"{where}[{index}]") for index, item in enumerate(value)]
    return _interpolate(value, env, where) if isinstance(value, str) else value


# --- (a) every setting, connection and environment variable the code reads is in .env.example ---------


def test_every_setting_has_a_line(env_example: dict[str, str]) -> None:
    missing = [env_name(name) for name in SETTING_NAMES if env_name(name) not in env_example]
    assert not missing, f"settings without a KEY= line in .env.example: {missing}"


def test_setting_lines_show_the_code_defaults(env_example: dict[str, str]) -> None:
    """The values in .env.example are valid and equal the code's defaults (link_secret stays empty)."""
    loaded = load_settings(lambda name: env_example.get(env_name(name)), use_airflow=False)
    defaults = Settings()
    differ = {
        env_name(name): (env_example.get(env_name(name)), getattr(defaults, name))
        for name in SETTING_NAMES
        if name != "link_secret" and getattr(loaded, name) != getattr(defaults, name)
    }
    assert not differ, f".env.example disagrees with the defaults in settings.py (value, default): {differ}"
    assert env_example[env_name("link_secret")] == "", "the link secret must be an empty placeholder"


def test_every_connection_has_a_line(env_example: dict[str, str]) -> None:
    conn_ids = {
        name: field.default for name, field in Settings.model_fields.items() if name.endswith("_conn_id")
    }
    assert {"werss_default", "deepseek_default", "radar_push", "radar_db"} <= set(conn_ids.values())
    missing = []
    for conn_id in conn_ids.values():
        key = f"AIRFLOW_CONN_{conn_id.upper()}"
        if key not in env_example and ENV_ALTERNATIVES.get(key) not in env_example:
            missing.append(key)
    assert not missing, f"connections without a line in .env.example: {missing}"


def _env_vars_read_by_code() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for directory in CODE_DIRS:
        for path in sorted((REPO / directory).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            for name in {*ENV_READ.findall(text), *AIRFLOW_ENV_NAME.findall(text)}:
                found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def test_scanner_finds_what_the_code_reads() -> None:
    """Guards the regexes: the reads known to exist in db.py must be found."""
    found = _env_vars_read_by_code()
    assert "RADAR_DATABASE_URL" in found
    assert "RADAR_PGDATA" in found
    assert not any(name.endswith("_") for name in found), "templates like AIRFLOW_VAR_RADAR_<NAME> are no names"


def test_every_env_var_read_by_the_code_has_a_line(env_example: dict[str, str]) -> None:
    missing = {
        name: sorted(paths)
        for name, paths in _env_vars_read_by_code().items()
        if name not in ENV_ALLOWLIST and name not in env_example and ENV_ALTERNATIVES.get(name) not in env_example
    }
    assert not missing, f"environment variables read by the code but missing from .env.example: {missing}"


def test_connections_are_json_without_secrets(env_example: dict[str, str]) -> None:
    conns = {key: value for key, value in env_example.items() if key.startswith("AIRFLOW_CONN_")}
    assert conns
    for key, value in conns.items():
        conn = json.loads(value)
        assert conn.get("conn_type"), f"{key} has no conn_type"
        assert not conn.get("password"), f"{key} carries a password in .env.example"
        extra = conn.get("extra") or {}
        assert isinstance(extra, dict), f"{key}: extra must be a JSON object"
        secrets = {k: v for k, v in extra.items() if re.search(r"key|secret|token|password", k) and v}
        assert not secrets, f"{key} carries secrets in extra: {sorted(secrets)}"
    assert json.loads(conns["AIRFLOW_CONN_WERSS_DEFAULT"])["host"] == "http://werss:8001"
    assert json.loads(conns["AIRFLOW_CONN_DEEPSEEK_DEFAULT"])["host"] == "https://api.deepseek.com"
    assert isinstance(json.loads(conns["AIRFLOW_CONN_RADAR_PUSH"])["extra"]["urls"], list)


def test_no_secret_values_in_env_example(env_example: dict[str, str]) -> None:
    secrets = sorted(
        key
        for key, value in env_example.items()
        if SECRET_KEY.search(key) and value
    )
    assert not secrets, f".env.example must leave these empty: {secrets}"
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY", "_AIRFLOW_WWW_USER_PASSWORD",
                "POSTGRES_PASSWORD", "AIRFLOW_DB_PASSWORD", "RADAR_DB_PASSWORD", "RADAR_PAGES_DB_PASSWORD",
                "FLOWER_BASIC_AUTH"):
        assert key in env_example, f"{key} placeholder missing from .env.example"


# --- (b) docker-compose.yaml and docker-compose.werss.yaml ------------------------------------------


def test_compose_has_the_services(compose: dict) -> None:
    services = compose["services"]
    assert SERVICES <= set(services), f"missing services: {sorted(SERVICES - set(services))}"
    for name in SERVICES:
        assert not services[name].get("profiles"), f"{name} must start without a profile"
        if name != "airflow-init":
            assert "healthcheck" in services[name], f"{name} lost its healthcheck"
    werss, path = _service("werss")
    # the file is the opt-in: a profile on top would need `--profile werss` as well as `-f`
    assert path == COMPOSE_WERSS and not werss.get("profiles"), "werss runs from docker-compose.werss.yaml"
    assert any(str(p).endswith(":8001") for p in werss["ports"])
    assert _mounts(werss).get("/app/data"), "WeRSS keeps its database and login in /app/data"
    assert "werss-data" in (_load(COMPOSE_WERSS).get("volumes") or {})


def test_airflow_services_are_built_from_the_dockerfile_and_mount_the_bundle(compose: dict) -> None:
    for name, command in AIRFLOW_SERVICES.items():
        service = compose["services"][name]
        build = service.get("build")
        context = build if isinstance(build, str) else (build or {}).get("context")
        dockerfile = "Dockerfile" if isinstance(build, str) else (build or {}).get("dockerfile", "Dockerfile")
        assert context == ".", f"{name} is not built from this directory"
        assert (REPO / context / dockerfile).resolve() == DOCKERFILE
        targets = _mounts(service)
        for folder in ("dags", "plugins", "include", "logs", "config"):
            assert f"/opt/airflow/{folder}" in targets, f"{name} does not mount {folder}/"
            assert targets[f"/opt/airflow/{folder}"].endswith(f"/{folder}")
        if name in RADAR_CODE_SERVICES:  # without it the radar would start an embedded PostgreSQL there
            assert service["environment"]["RADAR_DATABASE_URL"], f"{name} has no RADAR_DATABASE_URL"
        if command:
            assert service["command"] == command
    assert any(str(p).endswith(":8080") for p in compose["services"]["airflow-apiserver"]["ports"])


def test_health_checks_give_airflow_time_to_start_and_answer(compose: dict) -> None:
    """Under `make compose-day` on two busy cores an Airflow component took up to three minutes to answer after
    its container started, and a check that starts Airflow's CLI (`airflow jobs check`, `celery inspect ping`)
    15-40 s: every Airflow check forgives failures for 180 s (the official 30 s left the api-server unhealthy
    and the worker never started), the CLI ones wait 60 s for an answer (the official 10 s kept a working
    triggerer unhealthy), the HTTP ones (curl) 10 s."""
    timings = {}
    for name, service in compose["services"].items():
        check = service.get("healthcheck") or {}
        command = " ".join(check.get("test") or [])
        if name in AIRFLOW_SERVICES and check:
            timings[name] = ("cli" if "airflow jobs check" in command or "celery --app" in command else "curl",
                             check["timeout"], check["interval"], check["retries"], check["start_period"])
    assert timings == {
        "airflow-apiserver": ("curl", "10s", "30s", 5, "180s"), "airflow-scheduler": ("curl", "10s", "30s", 5, "180s"),
        **{name: ("cli", "60s", "30s", 5, "180s")
           for name in ("airflow-dag-processor", "airflow-worker", "airflow-triggerer")}}


def test_a_task_waits_for_a_busy_api_server(compose: dict) -> None:
    """Every Airflow container's tasks wait 30 s for the Execution API, not 5: under `make compose-day` a task's
    first call timed out while the api-server was busy, and the task failed before it ran."""
    for name in AIRFLOW_SERVICES:
        assert compose["services"][name]["environment"]["AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT"] == "30", name


def test_compose_runs_the_workers_as_make_celery_proved(compose: dict) -> None:
    """The executor settings `make celery` (tools/celery_two_workers.py) ran two workers with."""
    from tools import celery_two_workers

    env = compose["services"]["airflow-worker"]["environment"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert int(env["AIRFLOW__CELERY__WORKER_CONCURRENCY"]) == celery_two_workers.WORKER_CONCURRENCY
    assert env["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://")
    assert env["AIRFLOW__CELERY__RESULT_BACKEND"].startswith("db+postgresql://")
    # what make bench-slot measured the slot with (scripts/bootstrap.sh sets the same)
    bootstrap = (REPO / "scripts" / "bootstrap.sh").read_text()
    assert env["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"] == "0.2"
    assert 'AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME="${AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME:-0.2}"' in bootstrap


def test_init_creates_the_pool_and_migrates_the_radar(compose: dict) -> None:
    script = "\n".join(compose["services"]["airflow-init"]["command"])
    assert re.search(r"airflow pools set radar_llm \"\$\$\{AIRFLOW_VAR_RADAR_ANALYSIS_TASKS:-2\}\"", script)
    assert "/entrypoint airflow version" in script  # migrates the metadata database, creates the admin
    # the logins first (Airflow's own migrates the metadata database), then the schema as its owner, then
    # what the pages may do with it
    order = [script.index(step) for step in (
        "python -m include.radar.cli provision", "/entrypoint airflow version",
        "python -m include.radar.cli migrate", "python -m include.radar.cli grant-pages")]
    assert order == sorted(order), order
    env = compose["services"]["airflow-init"]["environment"]
    assert env["_AIRFLOW_DB_MIGRATE"] == "true" and env["_AIRFLOW_WWW_USER_CREATE"] == "true"
    admin = _interpolate(env["RADAR_ADMIN_DATABASE_URL"], {"POSTGRES_USER": "su", "POSTGRES_PASSWORD": "pw"})
    assert admin == "postgresql://su:pw@postgres:5432/postgres"


def _run_guard(env: dict[str, str], tmp_path: Path, *, initialised: bool) -> subprocess.CompletedProcess[str]:
    """deploy/postgres-entrypoint.sh with a stand-in for the image's docker-entrypoint.sh."""
    data = tmp_path / ("old" if initialised else "new")
    data.mkdir(exist_ok=True)
    if initialised:
        (data / "PG_VERSION").write_text("16\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "docker-entrypoint.sh").write_text('#!/bin/sh\necho "official entrypoint: $*"\n')
    (bin_dir / "docker-entrypoint.sh").chmod(0o755)
    return subprocess.run(["bash", str(POSTGRES_ENTRYPOINT), "postgres"], capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "PGDATA": str(data), **env})


@pytest.mark.hostile
def test_postgres_never_initialises_a_new_volume_with_a_default_password(compose: dict, tmp_path: Path) -> None:
    postgres = compose["services"]["postgres"]
    assert postgres["environment"]["POSTGRES_DB"] == "airflow"
    assert postgres["environment"]["POSTGRES_PASSWORD"] == "${POSTGRES_PASSWORD:-}", "no working default"
    target = _mounts(postgres)["/usr/local/bin/radar-postgres-entrypoint.sh"]
    assert (REPO / target).resolve() == POSTGRES_ENTRYPOINT
    assert postgres["entrypoint"] == ["bash", "/usr/local/bin/radar-postgres-entrypoint.sh"]
    assert postgres["command"] == ["postgres"]
    for refused in ("", "airflow", "Airflow", "postgres", "password"):
        done = _run_guard({"POSTGRES_PASSWORD": refused} if refused else {}, tmp_path, initialised=False)
        assert done.returncode == 1 and "POSTGRES_PASSWORD" in done.stderr and "token_urlsafe" in done.stderr, done
        assert "official entrypoint" not in done.stdout
    started = _run_guard({"POSTGRES_PASSWORD": "a-long-random-string"}, tmp_path, initialised=False)
    assert started.returncode == 0 and started.stdout.strip() == "official entrypoint: postgres"
    # an existing volume keeps its password: it starts, and airflow-init is what refuses a default one
    old = _run_guard({"POSTGRES_PASSWORD": "airflow"}, tmp_path, initialised=True)
    assert old.returncode == 0 and "official entrypoint" in old.stdout


def _received(service: dict, env: Mapping[str, str]) -> dict[str, str]:
    """The environment compose gives the container: ${...} interpolated, and a key without a value taken from
    .env (left out when .env has no such line)."""
    resolved = {}
    for key, value in (service.get("environment") or {}).items():
        if value is None:
            if key in env:
                resolved[key] = env[key]
        else:
            resolved[key] = _interpolate(str(value), env, key)
    return resolved


def _all_services() -> dict[str, dict]:
    return {name: service for path in COMPOSE_FILES for name, service in _load(path)["services"].items()}


@pytest.mark.hostile
def test_each_container_receives_only_the_secrets_it_needs(env_example: dict[str, str]) -> None:
    """Every secret .env can hold gets a value of its own; which of them reach which container, through
    `environment` (passed on or inside a URL), is exactly the table above. In particular the api-server never
    receives the WeRSS password or the DeepSeek key, and the workers never the admin or superuser password."""
    services = _all_services()
    assert set(SECRETS_RECEIVED) == set(services), sorted(set(services) ^ set(SECRETS_RECEIVED))
    tracked = set().union(*SECRETS_RECEIVED.values())
    marks = {name: f"secret-{index:02d}-{name.lower()}" for index, name in enumerate(sorted(tracked))}
    env = {**env_example, **marks}
    for name, service in services.items():
        assert "env_file" not in service, f"{name}: env_file hands every line of .env to the container"
        text = json.dumps(_received(service, env))
        got = {secret for secret, mark in marks.items() if mark in text}
        assert got == SECRETS_RECEIVED[name], (
            f"{name}: receives {sorted(got - SECRETS_RECEIVED[name])} it should not, "
            f"lacks {sorted(SECRETS_RECEIVED[name] - got)}")
    api = _received(services["airflow-apiserver"], env)
    assert not {"AIRFLOW_CONN_WERSS_DEFAULT", "AIRFLOW_CONN_DEEPSEEK_DEFAULT", "RADAR_DATABASE_URL"} & set(api)
    assert "_AIRFLOW_WWW_USER_PASSWORD" not in _received(services["airflow-worker"], env)


def test_the_radars_settings_reach_the_services_that_read_them(compose: dict, env_filled: dict[str, str]) -> None:
    """Each setting of settings.py (but the link secret, a secret) reaches the api-server, the workers, the
    triggerer and the dag-processor from .env; a setting deleted from .env is unset there (its Airflow
    Variable or default applies), never an empty string."""
    names = {env_name(name) for name in SETTING_NAMES if name != "link_secret"}
    anchor = {key: value for key, value in compose["x-radar-settings"].items() if key.startswith("AIRFLOW_VAR_RADAR_")}
    assert set(anchor) == names, f"x-radar-settings differs from settings.py: {sorted(set(anchor) ^ names)}"
    assert all(value is None for value in anchor.values()), "settings are passed on from .env, not set here"
    for service in SETTINGS_SERVICES:
        received = _received(compose["services"][service], env_filled)
        assert names <= set(received), f"{service} lacks {sorted(names - set(received))}"
        assert received[env_name("schedule_slots")] == env_filled[env_name("schedule_slots")]
    without = {k: v for k, v in env_filled.items() if k != env_name("window_days")}
    assert env_name("window_days") not in _received(compose["services"]["airflow-worker"], without)
    assert not any(key.startswith("AIRFLOW_VAR_RADAR_") for key in _received(compose["services"]["airflow-scheduler"],
                                                                             env_filled))
    init = _received(compose["services"]["airflow-init"], env_filled)
    assert init[env_name("analysis_tasks")] == env_filled[env_name("analysis_tasks")]


def _published_by_default(service: dict, variable: str, env_example: dict[str, str], port: str) -> None:
    """A port published on 127.0.0.1 with compose's default and .env.example's value; ``variable`` opens it."""
    assert service["ports"]
    for raw in service["ports"]:
        match = re.match(r"\$\{([A-Za-z_][A-Za-z0-9_]*):-127\.0\.0\.1\}:", str(raw))
        assert match and match.group(1) == variable, f"the port must start with ${{{variable}:-127.0.0.1}}: {raw!r}"
        assert variable in env_example, f"{variable} must be documented in .env.example"
        for env in ({}, env_example):
            assert _published(_interpolated(raw, env))[0] == "127.0.0.1", (raw, env.get(variable))
        opened = _published(_interpolated(raw, {**env_example, variable: "0.0.0.0"}))
        assert opened[0] == "0.0.0.0" and opened[2] == port


@pytest.mark.hostile
def test_the_api_server_is_published_on_localhost_and_trusts_only_its_proxy(compose: dict, env_example: dict[str, str],
                                                                           env_filled: dict[str, str]) -> None:
    """The UI, the API and the pages answer on 127.0.0.1 unless AIRFLOW_API_BIND_ADDRESS opens them; uvicorn
    takes X-Forwarded-Proto (https: Secure cookies) only from FORWARDED_ALLOW_IPS, 127.0.0.1 by default."""
    api = compose["services"]["airflow-apiserver"]
    _published_by_default(api, "AIRFLOW_API_BIND_ADDRESS", env_example, "8080")
    assert "--proxy-headers" in api["command"].split()
    for env in (COMPOSE_REQUIRED, env_filled):
        assert _received(api, env)["FORWARDED_ALLOW_IPS"] == "127.0.0.1"
    behind = {**env_filled, "AIRFLOW_API_FORWARDED_ALLOW_IPS": "172.18.0.1"}
    assert _received(api, behind)["FORWARDED_ALLOW_IPS"] == "172.18.0.1"


def test_behind_the_tls_proxy_the_pages_cookies_are_secure(compose: dict, db_url: str, monkeypatch) -> None:
    """What the deployment guide's TLS set-up rests on: Airflow's api-server takes --proxy-headers, uvicorn then trusts
    the addresses in FORWARDED_ALLOW_IPS (the variable docker-compose.yaml sets), and a request a trusted
    proxy forwarded as https gets Secure cookies from the pages; the same headers from anyone else change
    nothing. (Needs the radar database: the page that sets the cookie reads it.)"""
    import uvicorn
    from airflow.api_fastapi.core_api.security import get_user
    from airflow.cli.cli_parser import get_parser
    from fastapi.testclient import TestClient
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    from include.radar.web.app import create_app
    from include.radar.web.auth import may_read_radar

    command = compose["services"]["airflow-apiserver"]["command"].split()
    assert get_parser().parse_args(command).proxy_headers is True
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "172.18.0.1")
    assert uvicorn.Config("airflow.api_fastapi.main:app", proxy_headers=True).forwarded_allow_ips == "172.18.0.1"

    app = create_app(lambda: load_settings(use_airflow=False), db_url)
    app.dependency_overrides[get_user] = lambda: object()
    app.dependency_overrides[may_read_radar] = lambda user: True

    def cookies(trusted: str) -> list[str]:
        client = TestClient(ProxyHeadersMiddleware(app, trusted_hosts=trusted))  # TestClient's peer: "testclient"
        response = client.get("/", headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"})
        assert response.status_code == 200, response.text[:300]
        found = response.headers.get_list("set-cookie")
        assert found, "the overview sets its last-visit cookie"
        return found

    assert all("Secure" in cookie for cookie in cookies("testclient"))
    assert not any("Secure" in cookie for cookie in cookies("172.18.0.1"))


def _flower_script(compose: dict) -> str:
    command = compose["services"]["flower"]["command"]
    assert command[:2] == ["bash", "-c"]
    return _interpolate(command[2], {})  # what the container's bash runs ($$ is $)


@pytest.mark.hostile
@pytest.mark.parametrize("auth", ["", "admin", "admin:", "admin:short", ":a-long-enough-password", "a:b:c,admin:"])
def test_flower_refuses_to_start_without_a_login(compose: dict, tmp_path: Path, auth: str) -> None:
    (tmp_path / "airflow").write_text('#!/bin/sh\necho "airflow $*"\n')
    (tmp_path / "airflow").chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "AIRFLOW__CELERY__FLOWER_BASIC_AUTH": auth}
    done = subprocess.run(["bash", "-c", _flower_script(compose)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and "FLOWER_BASIC_AUTH" in done.stderr and "airflow celery" not in done.stdout
    assert len(auth) < 6 or auth not in done.stderr


def test_flower_starts_with_a_login_on_localhost(compose: dict, tmp_path: Path, env_example: dict[str, str],
                                                env_filled: dict[str, str]) -> None:
    (tmp_path / "airflow").write_text('#!/bin/sh\necho "airflow $*"\n')
    (tmp_path / "airflow").chmod(0o755)
    flower = compose["services"]["flower"]
    auth = "ops:" + "x" * 24 + ",second:" + "y" * 16
    received = _received(flower, {**env_filled, "FLOWER_BASIC_AUTH": auth})
    assert received["AIRFLOW__CELERY__FLOWER_BASIC_AUTH"] == auth
    done = subprocess.run(["bash", "-c", _flower_script(compose)], capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin", **received})
    assert done.returncode == 0 and done.stdout.strip() == "airflow celery flower", done
    _published_by_default(flower, "FLOWER_BIND_ADDRESS", env_example, "5555")
    assert flower["healthcheck"]["test"][-1].endswith("/healthcheck")  # the one page without the login
    assert flower["profiles"] == ["flower"]


@pytest.mark.hostile
def test_compose_has_no_literal_secrets(compose: dict) -> None:
    shared = compose["x-airflow-secrets"]
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY", "AIRFLOW__CORE__FERNET_KEY"):
        assert key in shared and shared[key] is None, f"{key} must be passed on from .env, never set here"
    assert COMPOSE_WERSS in COMPOSE_FILES
    for path in COMPOSE_FILES:
        for name, service in _load(path)["services"].items():
            for key, value in (service.get("environment") or {}).items():
                if SECRET_KEY.search(key) or key.startswith("AIRFLOW_CONN_"):
                    assert value is None or str(value).startswith("${"), f"{path.name}: {name}: {key} must come from .env"
        text = path.read_text(encoding="utf-8")
        while True:  # drop every ${...}, innermost first: what is left of a URL is literal
            stripped = re.sub(r"\$\{[^${}]*\}", "", text)
            if stripped == text:
                break
            text = stripped
        literal = re.search(r"://[^:/@\s]+:[^@\s]+@", text)
        assert not literal, f"{path.name}: a password literal in a URL: {literal.group(0) if literal else ''}"


@pytest.mark.hostile
def test_compose_variables_without_default_are_documented(env_example: dict[str, str]) -> None:
    """A variable without a default, or a required one (${NAME:?...}), has a line in .env.example; so has every
    line a service takes from .env unchanged (a key without a value)."""
    assert COMPOSE_WERSS in COMPOSE_FILES
    for path in COMPOSE_FILES:
        undocumented = sorted(
            {
                name
                for name, operator in _interpolations(path)
                if (not operator or "?" in operator) and name not in env_example
            }
        )
        assert not undocumented, f"{path.name} uses these without default or .env.example line: {undocumented}"
        passed_on = sorted({key for service in _load(path)["services"].values()
                            for key, value in (service.get("environment") or {}).items()
                            if value is None and key not in env_example})
        assert not passed_on, f"{path.name} passes these on from .env, which has no line for them: {passed_on}"


def test_compose_files_interpolate_with_env_example(env_example: dict[str, str]) -> None:
    """Every compose file interpolates with .env.example plus the secrets it leaves to the user."""
    secrets = {**COMPOSE_REQUIRED, **{name: "set-by-the-user" for name in WERSS_REQUIRED.values()}}
    for path in COMPOSE_FILES:
        _interpolated(_load(path), {**env_example, **secrets}, path.name)


# --- deployment secrets -----------------------------------------------------------------


@pytest.mark.hostile
def test_werss_refuses_to_start_without_its_secrets(env_example: dict[str, str]) -> None:
    """WeRSS's admin password and token key are required (${VAR:?message}), with a message that says what to
    set, where, and how to generate it: empty, WeRSS would take an empty password or sign with "" or its
    public default."""
    werss, path = _service("werss")
    env = werss["environment"]
    for key, variable in WERSS_REQUIRED.items():
        value = str(env.get(key, ""))
        match = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\?(.+)\}", value, re.DOTALL)
        assert match and match.group(1) == variable, f"{path.name}: werss {key} must be ${{{variable}:?...}}: {value!r}"
        message = match.group(2)
        assert variable in message and ".env" in message, f"the message names {variable} and .env: {message!r}"
        assert "secrets.token_urlsafe" in message, f"the message says how to generate it: {message!r}"
    assert env.get("USERNAME"), "WeRSS reads its admin account from USERNAME/PASSWORD"
    # what `docker compose -f docker-compose.yaml -f docker-compose.werss.yaml up` says with .env.example as is
    for missing in WERSS_REQUIRED.values():
        given = {name: "set-by-the-user" for name in WERSS_REQUIRED.values() if name != missing}
        with pytest.raises(RequiredVariableError) as raised:
            _interpolated(werss, {**env_example, **given}, "services.werss")
        assert raised.value.name == missing and "secrets.token_urlsafe" in raised.value.message


def _run_init_checks(compose: dict, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """airflow-init's script as compose gives it to bash, up to its first command (provision, a stand-in here)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python").write_text('#!/bin/sh\necho "went on: python $*"\nexit 1\n')
    (bin_dir / "python").chmod(0o755)
    init = compose["services"]["airflow-init"]
    script = _interpolate(init["command"][1], {"POSTGRES_USER": "su", "AIRFLOW_UID": "50000"}, "airflow-init")
    received = _received(init, {**read_env_example(), **COMPOSE_REQUIRED, **env})
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                          env={**received, "PATH": f"{bin_dir}:/usr/bin:/bin"})


FERNET = "Xn1W1Hh3yQO-5Y0l0fJ3d2qB8vC0a4m6r8t0u2w4y6A="


@pytest.mark.hostile
@pytest.mark.parametrize(("env", "refused"), [
    ({"AIRFLOW__CORE__FERNET_KEY": ""}, "AIRFLOW__CORE__FERNET_KEY"),
    ({"AIRFLOW__CORE__FERNET_KEY": "not-a-fernet-key"}, "AIRFLOW__CORE__FERNET_KEY"),
    ({"AIRFLOW__CORE__FERNET_KEY": FERNET[:-2] + "="}, "AIRFLOW__CORE__FERNET_KEY"),  # 31 bytes
    ({"WERSS_PASSWORD": "admin@123"}, "WERSS_PASSWORD"),  # WeRSS's own default
    ({"WERSS_PASSWORD": "x" * 15}, "WERSS_PASSWORD"),
    ({"WERSS_PASSWORD": "administrator-16", "WERSS_USERNAME": "administrator-16"}, "WERSS_PASSWORD"),
    ({}, None),
    ({"AIRFLOW__CORE__FERNET_KEY": f"{FERNET},{FERNET[::-1][1:]}="}, None),  # two while rotating
    ({"WERSS_PASSWORD": "x" * 16}, None),
])
def test_init_refuses_an_empty_fernet_key_and_a_weak_werss_password(compose: dict, tmp_path: Path, env, refused) -> None:
    """Without a fernet key Airflow stores the connections saved in its UI unencrypted, and WeRSS takes any
    non-empty password: airflow-init refuses both by name, before it provisions anything; a good .env goes on."""
    secrets = {"AIRFLOW__API_AUTH__JWT_SECRET": "j" * 32, "AIRFLOW__API__SECRET_KEY": "s" * 32,
               "_AIRFLOW_WWW_USER_PASSWORD": "a" * 32, "AIRFLOW__CORE__FERNET_KEY": FERNET, **env}
    done = _run_init_checks(compose, tmp_path, secrets)
    if refused:
        assert done.returncode == 1 and refused in done.stdout and "went on" not in done.stdout, done
        assert "python3 -c" in done.stdout  # how to make one
    else:
        assert "went on: python -m include.radar.cli provision" in done.stdout, done


def test_werss_waits_for_the_check_of_its_password() -> None:
    """WeRSS makes its admin from WERSS_PASSWORD once, at its first start: it starts after airflow-init's check."""
    werss, _ = _service("werss")
    assert werss["depends_on"]["airflow-init"] == {"condition": "service_completed_successfully"}


@pytest.mark.hostile
def test_users_without_werss_need_no_werss_secrets(compose: dict, env_filled: dict[str, str]) -> None:
    """Compose interpolates a whole file before it drops the services of inactive profiles (docker/compose#11977),
    so a ${VAR:?} of WeRSS in docker-compose.yaml would stop `docker compose up` for everyone. WeRSS and its
    required secrets live in docker-compose.werss.yaml, loaded only by those who run it; docker-compose.yaml
    requires only what every deployment runs with (the broker's password)."""
    assert "werss" not in compose["services"], "werss must not be in docker-compose.yaml"
    assert "werss-data" not in (compose.get("volumes") or {})
    no_werss = {name: value for name, value in env_filled.items() if not name.startswith("WERSS_")}
    _interpolated(compose, no_werss, COMPOSE.name)  # raises RequiredVariableError if anything is required
    required = sorted({name for name, operator in _interpolations(COMPOSE) if "?" in operator})
    assert required == sorted(COMPOSE_REQUIRED), f"docker-compose.yaml requires {required}: every user must set them"


# --- the broker's password, and WeRSS's own network --------------------------------------------------


REDIS_PASSWORD = COMPOSE_REQUIRED["REDIS_PASSWORD"]


@pytest.mark.hostile
def test_compose_refuses_to_start_without_the_brokers_password(compose: dict, env_example: dict[str, str]) -> None:
    """Celery's messages carry Airflow's workload tokens: Redis has a password, and compose stops at once, saying
    what to set and how to make it, while .env leaves it empty (.env.example does) or unset."""
    assert env_example.get("REDIS_PASSWORD") == "", ".env.example has an empty REDIS_PASSWORD line"
    services = compose["services"]
    for env in (env_example, {k: v for k, v in env_example.items() if k != "REDIS_PASSWORD"}):
        for name in ("redis", "airflow-worker", "airflow-scheduler", "flower"):
            with pytest.raises(RequiredVariableError) as raised:
                _received(services[name], env)
            assert raised.value.name == "REDIS_PASSWORD"
            assert ".env" in raised.value.message and "secrets.token_urlsafe" in raised.value.message


def test_the_broker_url_and_the_redis_healthcheck_use_the_password(compose: dict, env_filled: dict[str, str],
                                                                     tmp_path: Path) -> None:
    """Every container that speaks to the broker has the password in its URL; the redis container gets it, and
    its healthcheck is healthy only when Redis answers PONG to that password (not to none, not to another)."""
    services = compose["services"]
    for name, service in services.items():
        url = _received(service, env_filled).get("AIRFLOW__CELERY__BROKER_URL")
        if name in AIRFLOW_SERVICES or name in ("airflow-cli", "flower"):
            assert url == f"redis://:{REDIS_PASSWORD}@redis:6379/0", (name, url)
    redis = services["redis"]
    assert _received(redis, env_filled) == {"REDIS_PASSWORD": REDIS_PASSWORD}
    kind, command = redis["healthcheck"]["test"]
    assert kind == "CMD-SHELL"
    # a redis-cli that answers PONG only to the right password, given as REDISCLI_AUTH (never on a command line)
    (tmp_path / "redis-cli").write_text(
        '#!/bin/sh\n[ "$*" = ping ] || exit 2\n'
        f'if [ "$REDISCLI_AUTH" = "{REDIS_PASSWORD}" ]; then echo PONG; else echo "NOAUTH Authentication required."; fi\n')
    (tmp_path / "redis-cli").chmod(0o755)

    def healthy(password: str | None) -> bool:
        env = {"PATH": f"{tmp_path}:/usr/bin:/bin", **({"REDIS_PASSWORD": password} if password is not None else {})}
        done = subprocess.run(["sh", "-c", _interpolate(command, {})], env=env, capture_output=True, text=True,
                              timeout=30)
        return done.returncode == 0

    assert healthy(REDIS_PASSWORD)
    assert not healthy("another-password-altogether") and not healthy(None)


def _run_redis(compose: dict, tmp_path: Path, password: str | None) -> subprocess.CompletedProcess[str]:
    """The redis service's command, with a stand-in for the image's docker-entrypoint.sh that shows its
    arguments and the configuration redis-server would read on stdin."""
    command = compose["services"]["redis"]["command"]
    assert command[:2] == ["bash", "-c"]
    (tmp_path / "docker-entrypoint.sh").write_text('#!/bin/sh\necho "args: $*"\necho "stdin: $(cat)"\n')
    (tmp_path / "docker-entrypoint.sh").chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", **({"REDIS_PASSWORD": password} if password is not None else {})}
    return subprocess.run(["bash", "-c", _interpolate(command[2], {})], env=env, capture_output=True, text=True,
                          timeout=30)


@pytest.mark.hostile
def test_redis_starts_with_the_password_as_its_configuration(compose: dict, tmp_path: Path) -> None:
    """redis-server reads `requirepass` from stdin through the image's entrypoint (which drops root), so the
    password is on no command line."""
    done = _run_redis(compose, tmp_path, REDIS_PASSWORD)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["args: redis-server -", f"stdin: requirepass {REDIS_PASSWORD}"]


@pytest.mark.hostile
@pytest.mark.parametrize("password", [None, "", "x" * 15, "has a space in it here", "p@ss/word:with#url-chars",
                                      "line\nbreak-in-the-password"])
def test_redis_refuses_a_password_that_cannot_go_into_the_broker_url(compose: dict, tmp_path: Path,
                                                                     password: str | None) -> None:
    """The password goes into AIRFLOW__CELERY__BROKER_URL unescaped and into redis's configuration line: only
    16 or more URL-safe characters (what secrets.token_urlsafe makes) are taken; anything else stops Redis
    with a message naming REDIS_PASSWORD, without quoting it."""
    done = _run_redis(compose, tmp_path, password)
    assert done.returncode == 1 and "REDIS_PASSWORD" in done.stderr and "token_urlsafe" in done.stderr, done
    assert "args:" not in done.stdout
    assert not password or password not in done.stderr


def _networks(service: dict) -> set[str]:
    """The networks a service is attached to; compose puts a service that names none on `default`."""
    networks = service.get("networks")
    if networks is None:
        return {"default"}
    return set(networks)


def _share(a: dict, b: dict) -> bool:
    return bool(_networks(a) & _networks(b))


@pytest.mark.hostile
def test_werss_is_on_a_network_of_its_own_with_only_its_callers() -> None:
    """WeRSS parses hostile WeChat pages: it shares a network with the containers that call it (the workers run
    the tasks; airflow-cli runs `airflow dags test` and `cli check`) and no other — not Redis, whose messages
    carry Airflow's workload tokens, nor PostgreSQL, nor the api-server."""
    services = _all_services()
    werss = services["werss"]
    assert "default" not in _networks(werss), "werss must not be on the compose network with Redis and PostgreSQL"
    neighbours = {name for name, service in services.items() if name != "werss" and _share(service, werss)}
    assert neighbours == {"airflow-worker", "airflow-cli"}, sorted(neighbours)
    for name in ("redis", "postgres", "airflow-apiserver", "airflow-init", "flower"):
        assert not _share(services[name], werss), f"{name} shares a network with werss"
    declared = {name: value or {} for path in COMPOSE_FILES for name, value in (_load(path).get("networks") or {}).items()}
    for network in _networks(werss):
        assert network in declared, f"the network {network} is declared in a compose file"
        assert not declared[network].get("internal"), "WeRSS reaches mp.weixin.qq.com: its network is not internal"


def test_the_workers_reach_werss_on_its_network_and_the_rest_on_theirs() -> None:
    """The tasks need WeRSS, over a network Redis and PostgreSQL are not on, and Redis (the broker), PostgreSQL
    (both databases) and the api-server (the Execution API); so does airflow-cli, which runs them by hand."""
    services = _all_services()
    werss_only = _networks(services["werss"]) - _networks(services["redis"]) - _networks(services["postgres"])
    for name in ("airflow-worker", "airflow-cli"):
        assert _networks(services[name]) & werss_only, f"{name} does not reach werss on a network of its own"
        for other in ("redis", "postgres", "airflow-apiserver"):
            assert _share(services[name], services[other]), f"{name} cannot reach {other}"


def test_werss_fetches_the_bodies_the_radar_analyses(env_example: dict[str, str]) -> None:
    """WeRSS fetches article bodies with each collection (GATHER.CONTENT; off by default in v1.4.9, where bodies
    came only 10 per 59 minutes), and its catch-up of missed bodies runs at an interval WeRSS accepts (1-59)."""
    werss, _ = _service("werss")
    secrets = {name: "set-by-the-user" for name in WERSS_REQUIRED.values()}
    for env in ({**secrets}, {**env_example, **secrets}):
        received = _received(werss, env)
        assert received["GATHER.CONTENT"] == "True"
        assert received["GATHER.CONTENT_AUTO_CHECK"] == "True"
        assert 1 <= int(received["GATHER.CONTENT_AUTO_INTERVAL"]) <= 59
        assert received["TZ"] == "Asia/Shanghai"  # the zone WeRSS reads its collection tasks' crons in


def _published(port: Any) -> tuple[str, str, str]:
    """(host ip, host port, container port) of a resolved ports entry, short or long syntax."""
    if isinstance(port, dict):
        return str(port.get("host_ip", "")), str(port.get("published", "")), str(port["target"])
    parts = str(port).rsplit(":", 2)
    return ("", *parts) if len(parts) == 2 else tuple(parts)  # type: ignore[return-value]


@pytest.mark.hostile
def test_werss_port_is_published_on_localhost_by_default(env_example: dict[str, str]) -> None:
    """The WeRSS UI (QR login, its admin) is only published on 127.0.0.1 unless an explicit variable says
    otherwise; Airflow reaches WeRSS over the compose network (http://werss:8001), not through this port."""
    werss, path = _service("werss")
    secrets = {name: "set-by-the-user" for name in WERSS_REQUIRED.values()}
    assert werss["ports"], "werss publishes its UI"
    for raw in werss["ports"]:
        match = re.match(r"\$\{([A-Za-z_][A-Za-z0-9_]*):-127\.0\.0\.1\}:", str(raw))
        assert match, f"{path.name}: the werss port must start with ${{<VAR>:-127.0.0.1}}: {raw!r}"
        variable = match.group(1)
        assert variable in env_example, f"{variable} must be documented in .env.example"
        for env in ({}, env_example):  # compose's default, and what .env.example sets
            assert _published(_interpolated(raw, {**env, **secrets}))[0] == "127.0.0.1", (raw, env.get(variable))
        # the explicit override opens it, e.g. behind a firewall or a reverse proxy on another host
        opened = _published(_interpolated(raw, {**env_example, variable: "0.0.0.0"}))
        assert opened[0] == "0.0.0.0" and opened[2] == "8001"


def _image_references() -> list[tuple[str, str]]:
    """(where, image) for every image of every compose file (defaults and .env.example resolved) and FROM."""
    found = []
    for path in COMPOSE_FILES:
        for name, service in _load(path)["services"].items():
            if "image" in service:
                for env in ({}, read_env_example()):
                    found.append((f"{path.name}: {name}", _interpolate(str(service["image"]), env)))
    for line in _instructions():
        if line.upper().startswith("FROM "):
            found.append(("Dockerfile", line.split()[1]))
    return found


@pytest.mark.hostile
def test_every_image_is_pinned_to_a_version() -> None:
    """No floating tag (latest, postgres:16, redis:7.2-bookworm): a full version, or a digest where upstream
    publishes no version tags. A floating tag changes the deployment under the user at the next pull."""
    references = _image_references()
    unpinned = []
    for where, image in references:
        name, _, digest = image.partition("@")
        repository, _, tag = name.rsplit("/", 1)[-1].partition(":")  # not the port of a registry host
        version = TWO_PART_VERSION if repository in TWO_PART_IMAGES else FULL_VERSION
        pinned = bool(version.fullmatch(tag)) or bool(DIGEST.fullmatch(digest))
        if not pinned or tag == "latest":
            unpinned.append(f"{where}: {image}")
    assert not unpinned, f"images without a full version: {sorted(set(unpinned))}"
    where = {where for where, _ in references}
    assert {f"{COMPOSE.name}: postgres", f"{COMPOSE.name}: redis", f"{COMPOSE.name}: airflow-worker",
            f"{COMPOSE_WERSS.name}: werss", "Dockerfile"} <= where, sorted(where)


# --- (c) Dockerfile ----------------------------------------------------------------------------------


def _instructions() -> list[str]:
    lines = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def test_dockerfile_extends_the_airflow_image_of_the_lock() -> None:
    instructions = _instructions()
    assert instructions[0].startswith("FROM apache/airflow:3.3.2"), instructions[0]
    pinned = re.search(r"^apache-airflow==(\S+)$", (REPO / "requirements.lock").read_text(), re.MULTILINE)
    assert pinned and instructions[0].split()[1].startswith(f"apache/airflow:{pinned.group(1)}"), (
        "the base image and requirements.lock pin different Airflow versions"
    )
    text = " ".join(instructions)
    assert "requirements.lock" in text and "pip install" in text
    assert "ENV PYTHONPATH=/opt/airflow" in instructions
    users = [line for line in instructions if line.startswith("USER ")]
    assert not users or users[-1] == "USER airflow", "install and run as the airflow user"


# --- (d) docker compose config -------------------------------------------------------------------------


def _compose_command() -> list[str] | None:
    """``docker compose`` (v2 plugin) or a standalone ``docker-compose`` v2; v1 lacks nested ${...}."""
    candidates = []
    if shutil.which("docker"):
        candidates.append(["docker", "compose"])
    if shutil.which("docker-compose"):
        candidates.append(["docker-compose"])
    for command in candidates:
        try:
            result = subprocess.run([*command, "version", "--short"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if result.returncode == 0 and re.match(r"v?([2-9]|\d{2,})\.", result.stdout.strip()):
            return command
    return None


def test_docker_compose_config(tmp_path: Path) -> None:
    """`docker compose config` accepts the files with .env.example as the project's .env.

    Runs in a copy of the deployment files: a developer's real .env must not be read. Checks what the tests
    above read offline: docker-compose.yaml alone needs no WeRSS secret; with docker-compose.werss.yaml,
    compose refuses to start without them and publishes WeRSS on 127.0.0.1; the api-server on 127.0.0.1; the
    lines a service takes from .env unchanged are resolved from it, and only those reach it.
    """
    command = _compose_command()
    if command is None:
        pytest.skip("docker compose v2 is not installed")
    for path in COMPOSE_FILES:
        shutil.copy(path, tmp_path / path.name)
    shutil.copy(DOCKERFILE, tmp_path / "Dockerfile")
    (tmp_path / "deploy").mkdir()
    shutil.copy(POSTGRES_ENTRYPOINT, tmp_path / "deploy" / POSTGRES_ENTRYPOINT.name)
    shutil.copy(ENV_EXAMPLE, tmp_path / ".env")
    # the shell environment wins over --env-file: keep every variable the files read out (the tests' own
    # RADAR_DATABASE_URL, a make target's AIRFLOW__*, a WeRSS of the shell)
    clean = {name: value for name, value in os.environ.items() if not name.startswith(COMPOSE_READS)}

    def config(*files: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                *command, "--project-directory", str(tmp_path),
                *(arg for name in files for arg in ("-f", str(tmp_path / name))),
                "--env-file", str(tmp_path / ".env"), "config",
            ],
            capture_output=True, text=True, timeout=120, env={**clean, **env},
        )

    no_broker_password = config(COMPOSE.name)
    assert no_broker_password.returncode != 0 and "REDIS_PASSWORD" in no_broker_password.stderr
    alone = config(COMPOSE.name, **COMPOSE_REQUIRED)
    assert alone.returncode == 0, alone.stderr
    assert "werss" not in yaml.safe_load(alone.stdout)["services"]
    refused = config(COMPOSE.name, COMPOSE_WERSS.name, **COMPOSE_REQUIRED)
    assert refused.returncode != 0 and "secrets.token_urlsafe" in refused.stderr, refused.stderr
    secrets = {name: "set-by-the-user" for name in WERSS_REQUIRED.values()}
    result = config(COMPOSE.name, COMPOSE_WERSS.name, **COMPOSE_REQUIRED, **secrets)
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)
    assert SERVICES | {"werss"} <= set(resolved["services"])
    assert {port.get("host_ip") for port in resolved["services"]["werss"]["ports"]} == {"127.0.0.1"}
    assert {port.get("host_ip") for port in resolved["services"]["airflow-apiserver"]["ports"]} == {"127.0.0.1"}
    worker = resolved["services"]["airflow-worker"]["environment"]
    assert worker["RADAR_DATABASE_URL"] == "postgresql://radar:@postgres:5432/radar"  # .env.example: no password
    assert json.loads(worker["AIRFLOW_CONN_WERSS_DEFAULT"])["host"] == "http://werss:8001"
    assert worker["AIRFLOW_VAR_RADAR_SCHEDULE_SLOTS"] == "07:00,12:00,14:00,18:00,22:00"
    api = resolved["services"]["airflow-apiserver"]["environment"]
    assert api["RADAR_PAGES_DATABASE_URL"] == "postgresql://radar_pages:@postgres:5432/radar"
    assert "AIRFLOW_CONN_DEEPSEEK_DEFAULT" not in api and "AIRFLOW_CONN_WERSS_DEFAULT" not in api
    # WeRSS's own secrets (set-by-the-user here) reach WeRSS alone
    assert [name for name, service in resolved["services"].items()
            if "set-by-the-user" in json.dumps(service.get("environment") or {})] == ["werss"]
    # WeRSS's network is shared with the workers and airflow-cli only
    on_werss = {name for name, service in resolved["services"].items() if "werss" in (service.get("networks") or {})}
    # (airflow-cli is under a profile: `config` leaves it out)
    assert on_werss == {"werss", "airflow-worker"}, sorted(on_werss)
