"""The deployment files (Dockerfile, docker-compose.yaml, .env.example) agree with the code.

Nothing here needs the radar database. The checks read the settings and connection ids from
``include.radar.settings`` at run time and scan the code for the environment variables it reads, so a
setting, connection or variable added later without a line in ``.env.example`` fails here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from include.radar.settings import SETTING_NAMES, Settings, env_name, load_settings

REPO = Path(__file__).resolve().parents[1]
ENV_EXAMPLE = REPO / ".env.example"
COMPOSE = REPO / "docker-compose.yaml"
DOCKERFILE = REPO / "Dockerfile"
POSTGRES_INIT = REPO / "deploy" / "postgres-init"
CODE_DIRS = ("include", "dags", "plugins")

# Environment variables the code reads that deliberately have no line in .env.example:
ENV_ALLOWLIST = {
    # data directory of the embedded PostgreSQL (db.py) for local runs without a database server; the
    # deployment always sets RADAR_DATABASE_URL, so the embedded server is never started there
    "RADAR_PGDATA",
    # the test suite's database server (tests/conftest.py, CI); never read by the deployed code
    "RADAR_TEST_DATABASE_URL",
    # set by the Airflow image itself (/opt/airflow)
    "AIRFLOW_HOME",
    # `make ui` only (include/radar/demo/ui.py): the local UI's port, and a marker set by
    # scripts/bootstrap.sh when the user gave RADAR_DATABASE_URL; the deployment never runs ui.py
    "RADAR_UI_PORT",
    "RADAR_DATABASE_URL_FROM_USER",
}
# The radar database is given either as the connection radar_db or as RADAR_DATABASE_URL (db.py reads
# RADAR_DATABASE_URL first); .env.example documents the connection in a comment and sets the URL.
ENV_ALTERNATIVES = {"AIRFLOW_CONN_RADAR_DB": "RADAR_DATABASE_URL"}

AIRFLOW_SERVICES = {
    "airflow-apiserver": "api-server",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
    "airflow-triggerer": "triggerer",
    "airflow-worker": "celery worker",
    "airflow-init": None,  # runs its own bash script
}
SERVICES = {*AIRFLOW_SERVICES, "postgres", "redis", "werss"}

ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
SECRET_KEY = re.compile(r"(PASSWORD|SECRET|SECRET_KEY|FERNET_KEY)$")
# official defaults of the bundled, local PostgreSQL (not reachable from outside the compose network)
SECRET_DEFAULTS = {"POSTGRES_PASSWORD": "airflow"}
ENV_READ = re.compile(
    r"""(?:\bos\.getenv\(\s*|\benviron\.get\(\s*|\benviron\[\s*)["']([A-Za-z_][A-Za-z0-9_]*)["']"""
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
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


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
        if SECRET_KEY.search(key) and value and value != SECRET_DEFAULTS.get(key)
    )
    assert not secrets, f".env.example must leave these empty: {secrets}"
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY", "_AIRFLOW_WWW_USER_PASSWORD"):
        assert key in env_example, f"{key} placeholder missing from .env.example"


# --- (b) docker-compose.yaml -------------------------------------------------------------------------


def test_compose_has_the_services(compose: dict) -> None:
    services = compose["services"]
    assert SERVICES <= set(services), f"missing services: {sorted(SERVICES - set(services))}"
    assert "werss" in services["werss"].get("profiles", []), "werss must be optional (profile werss)"
    assert services["werss"]["image"] == "rachelos/we-mp-rss:latest"
    assert any(str(p).endswith(":8001") for p in services["werss"]["ports"])
    for name in SERVICES - {"werss"}:
        assert not services[name].get("profiles"), f"{name} must start without a profile"
        if name != "airflow-init":
            assert "healthcheck" in services[name], f"{name} lost its healthcheck"


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
        assert ".env" in service.get("env_file", []), f"{name} does not read .env"
        assert service["environment"]["RADAR_DATABASE_URL"], f"{name} has no RADAR_DATABASE_URL"
        if command:
            assert service["command"] == command
    assert any(str(p).endswith(":8080") for p in compose["services"]["airflow-apiserver"]["ports"])


def test_init_creates_the_pool_and_migrates_the_radar(compose: dict) -> None:
    script = "\n".join(compose["services"]["airflow-init"]["command"])
    assert re.search(r"airflow pools set radar_llm \"\$\$\{AIRFLOW_VAR_RADAR_LLM_CONCURRENCY:-2\}\"", script)
    assert "python -m include.radar.cli migrate" in script
    assert "/entrypoint airflow version" in script  # migrates the metadata database, creates the admin
    env = compose["services"]["airflow-init"]["environment"]
    assert env["_AIRFLOW_DB_MIGRATE"] == "true" and env["_AIRFLOW_WWW_USER_CREATE"] == "true"


def test_postgres_creates_the_radar_database(compose: dict) -> None:
    postgres = compose["services"]["postgres"]
    source = _mounts(postgres).get("/docker-entrypoint-initdb.d")
    assert source and (REPO / source).resolve() == POSTGRES_INIT
    scripts = [p for p in POSTGRES_INIT.iterdir() if p.suffix in (".sql", ".sh")]
    assert scripts and any("CREATE DATABASE" in p.read_text(encoding="utf-8") for p in scripts)
    assert postgres["environment"]["POSTGRES_DB"] == "airflow"


def test_compose_has_no_literal_secrets(compose: dict) -> None:
    common_env = compose["x-airflow-common"]["environment"]
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY", "AIRFLOW__CORE__FERNET_KEY"):
        # a key under `environment` would override the value from .env
        assert key not in common_env, f"{key} must come from .env only"
    for name, service in compose["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if SECRET_KEY.search(key):
                assert str(value).startswith("${"), f"{name}: {key} must come from .env, not a literal"
    text = COMPOSE.read_text(encoding="utf-8")
    while True:  # drop every ${...}, innermost first: what is left of a URL is literal
        stripped = re.sub(r"\$\{[^${}]*\}", "", text)
        if stripped == text:
            break
        text = stripped
    literal = re.search(r"://[^:/@\s]+:[^@\s]+@", text)
    assert not literal, f"a password literal in a URL: {literal.group(0) if literal else ''}"


def test_compose_variables_without_default_are_documented(env_example: dict[str, str]) -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    undocumented = sorted(
        {name for name, operator in INTERPOLATION.findall(text) if not operator and name not in env_example}
    )
    assert not undocumented, f"docker-compose.yaml uses these without default or .env.example line: {undocumented}"


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
    """`docker compose config` accepts the file with .env.example as the project's .env.

    Runs in a copy of the deployment files: `env_file: .env` needs a .env beside the compose file, and a
    developer's real .env must not be read. The copy serves as both --env-file and the env_file.
    """
    command = _compose_command()
    if command is None:
        pytest.skip("docker compose v2 is not installed")
    shutil.copy(COMPOSE, tmp_path / "docker-compose.yaml")
    shutil.copy(DOCKERFILE, tmp_path / "Dockerfile")
    shutil.copytree(POSTGRES_INIT, tmp_path / "deploy" / "postgres-init")
    shutil.copy(ENV_EXAMPLE, tmp_path / ".env")
    result = subprocess.run(
        [
            *command, "--project-directory", str(tmp_path), "-f", str(tmp_path / "docker-compose.yaml"),
            "--env-file", str(tmp_path / ".env"), "--profile", "werss", "config",
        ],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)
    assert SERVICES <= set(resolved["services"])
    worker = resolved["services"]["airflow-worker"]["environment"]
    assert worker["RADAR_DATABASE_URL"] == "postgresql://airflow:airflow@postgres:5432/radar"
    assert json.loads(worker["AIRFLOW_CONN_WERSS_DEFAULT"])["host"] == "http://werss:8001"
    assert worker["AIRFLOW_VAR_RADAR_SCHEDULE_SLOTS"] == "07:00,12:00,14:00,18:00,22:00"
