"""`make compose-day` (tools/compose_day.py): its fast part run for real where the Docker engine can start,
and what the whole day relies on held offline: the guide's commands it runs, the day's slots at every hour,
the stand-ins' compose file and build files (nothing of this machine's in a user's build)."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import date, datetime
from pathlib import Path

import pytest
import yaml

from include.radar.core.slots import SHANGHAI
from tools import compose_day, compose_engine

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "deployment.md"
STANDINS = REPO / "deploy" / "standins"


def test_the_env_is_made_by_the_guides_own_commands() -> None:
    """The target makes `.env` with docs/deployment.md's commands as printed there, not a version of them."""
    guide = GUIDE.read_text(encoding="utf-8")
    for command in compose_engine.GUIDE_ENV:
        assert command in guide, command


@pytest.mark.parametrize(("now", "day", "slots"), [
    ((2026, 11, 27, 12, 5), date(2026, 11, 27), ["09:55", "10:55", "11:55"]),
    ((2026, 11, 27, 3, 0), date(2026, 11, 27), ["00:50", "01:50", "02:50"]),
    ((2026, 11, 27, 2, 5), date(2026, 11, 26), ["21:55", "22:55", "23:55"]),
    ((2026, 11, 28, 0, 5), date(2026, 11, 27), ["21:55", "22:55", "23:55"]),
    ((2026, 11, 27, 23, 59), date(2026, 11, 27), ["21:49", "22:49", "23:49"]),
])
def test_the_days_slots_have_passed_and_share_a_day(now: tuple[int, ...], day: date, slots: list[str]) -> None:
    """Three slots an hour apart on one day, the last ten minutes before the start: every hour works,
    midnight too."""
    assert compose_day.day_slots(datetime(*now, tzinfo=SHANGHAI)) == (day, slots)


def test_werss_collects_a_quarter_of_an_hour_before_each_slot() -> None:
    assert compose_day.collection_cron(["00:01", "01:01", "02:01"]) == "46 23,0,1 * * *"
    assert compose_day.collection_cron(["19:29", "20:29", "21:29"]) == "14 19,20,21 * * *"


def test_the_standins_sit_on_the_networks_of_what_they_stand_for() -> None:
    """WeRSS's stand-in only on `werss` (its place in docker-compose.werss.yaml, whose networks it keeps);
    DeepSeek's and the push channel's on the compose network, where the workers reach the internet."""
    standins = yaml.safe_load((STANDINS / "docker-compose.standins.yaml").read_text())["services"]
    werss = yaml.safe_load((REPO / "docker-compose.werss.yaml").read_text())["services"]["werss"]
    assert "networks" not in standins["werss"] and werss["networks"] == ["werss"]
    assert "ports" not in standins["deepseek-standin"] and "networks" not in standins["push-standin"]
    assert set(standins) == {"werss", "deepseek-standin", "push-standin", "airflow-scheduler"}
    # the day's runs are its own, dated at their slots: the scheduler makes none
    assert standins["airflow-scheduler"] == {"environment": {"AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False"}}


def test_a_users_build_gets_nothing_of_this_machine() -> None:
    """PIP_CERT is a build argument, empty unless given (and then unset for pip); no file of ours is copied."""
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r'^ARG PIP_CERT=""$', dockerfile, re.MULTILINE)
    assert 'if [ -z "${PIP_CERT}" ]; then unset PIP_CERT; fi' in dockerfile
    assert "build-host-ca" not in dockerfile and "/etc/ssl" not in dockerfile
    compose = (REPO / "docker-compose.yaml").read_text()
    assert "PIP_CERT" not in compose and "standin" not in compose


def test_the_build_context_holds_only_what_the_dockerfiles_copy() -> None:
    """.dockerignore keeps .venv, .local, logs and .env out of every build's context."""
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ignored[ignored.index("*") + 1:] == ["!requirements.txt", "!requirements.lock", "!deploy/standins/"]
    copied = set()
    for dockerfile in [REPO / "Dockerfile", *STANDINS.glob("*/Dockerfile")]:
        for line in dockerfile.read_text().splitlines():
            if line.startswith("COPY ") and "--from" not in line:
                copied.update(word for word in line.split()[1:-1] if not word.startswith("--"))
    assert copied == {"requirements.txt", "requirements.lock", "deploy/standins/airflow/entrypoint.sh",
                      "deploy/standins/postgres/docker-entrypoint.sh", "deploy/standins/redis/docker-entrypoint.sh"}


def test_each_standin_is_built_for_the_tag_our_files_name() -> None:
    compose = (REPO / "docker-compose.yaml").read_text()
    assert "image: postgres:16.13-bookworm" in compose and "image: redis:7.2.12-bookworm" in compose
    assert (REPO / "Dockerfile").read_text().count("FROM apache/airflow:3.3.2-python3.11") == 1
    assert set(compose_engine.IMAGES) == {"postgres:16.13-bookworm", "redis:7.2.12-bookworm",
                                          "apache/airflow:3.3.2-python3.11"}
    assert all(path.exists() for path in compose_engine.IMAGES.values())


@pytest.mark.parametrize("script", ["airflow/entrypoint.sh", "postgres/docker-entrypoint.sh",
                                    "redis/docker-entrypoint.sh"])
def test_the_standins_entrypoints_are_valid_bash(script: str) -> None:
    done = subprocess.run(["bash", "-n", str(STANDINS / script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_fast_part_runs_where_the_engine_can_start(tmp_path: Path) -> None:
    """`make compose-day ARGS=--fast` for real: the engine, the PostgreSQL and Redis images, `.env` by the guide,
    `docker compose config`, postgres and redis up and healthy with their passwords. Skips where it cannot."""
    reason = compose_engine.engine_unavailable()
    if reason:
        pytest.skip(reason)
    done = subprocess.run([sys.executable, "-m", "tools.compose_day", "--fast"], capture_output=True,
                          text=True, timeout=1500, cwd=REPO)
    transcript = done.stdout
    if done.returncode == 2 and "SKIP:" in transcript:
        pytest.skip(transcript.split("SKIP:", 1)[1].strip().splitlines()[0])
    assert done.returncode == 0, transcript + done.stderr[-3000:]
    for line in ("✓ docker compose config", "✓ postgres and redis healthy", "✓ redis: PONG with REDIS_PASSWORD",
                 "✓ postgres: a wrong password is refused"):
        assert line in transcript, transcript
    assert "✗" not in transcript


def test_the_shells_variables_never_reach_the_stack() -> None:
    """Compose takes a variable from the shell before `.env`: every one our compose files read is dropped
    from the make target's environment (make's bootstrap exports RADAR_DATABASE_URL, the embedded server's)."""
    names = set()
    for path in [*REPO.glob("docker-compose*.yaml"), STANDINS / "docker-compose.standins.yaml"]:
        text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        names.update(re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)", text))  # $${...} is the shell's
    assert {"RADAR_DATABASE_URL", "REDIS_PASSWORD", "STANDIN_SLOTS", "WERSS_PASSWORD"} <= names
    assert not [name for name in names if not name.startswith(compose_engine.COMPOSE_READS)]
