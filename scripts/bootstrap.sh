#!/usr/bin/env bash
# Set-up shared by `make run`, `make test`, `make ui` and the other targets: `scripts/bootstrap.sh COMMAND...`
# sets up what is missing, reuses what exists, then runs COMMAND in that environment; the first failure stops it
# with its own message. It makes the virtual environment (from requirements.lock), a project-local AIRFLOW_HOME
# whose airflow.cfg names its metadata database (SQLite for `make test`, PostgreSQL for `make run` and `make ui`,
# so a plain `airflow ...` with that AIRFLOW_HOME uses the same one), and the radar's PostgreSQL
# (RADAR_DATABASE_URL when set, else an embedded one from PyPI in .local/pgdata) with its schema.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3.11}"
VENV="$REPO/.venv"
UV_VERSION="0.13.9"

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "error: $PYTHON not found; Python 3.11 is required (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi

lock_sum="$(sha256sum "$REPO/requirements.lock" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.lock-sha256" 2>/dev/null)" != "$lock_sum" ]; then
  echo "==> installing the pinned environment into .venv (requirements.lock)"
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
  # compiled once here: every Airflow task is a fresh process, and where PYTHONDONTWRITEBYTECODE is set
  # (CI machines, containers) nothing compiled at import time is kept, so each task would compile again
  "$VENV/bin/uv" pip install --quiet --compile-bytecode --python "$VENV/bin/python" -r "$REPO/requirements.lock"
  echo "$lock_sum" > "$VENV/.lock-sha256"
fi
# the bundle's own modules too (only what changed since the last run is compiled again)
"$VENV/bin/python" -m compileall -q -j 0 "$REPO/include" "$REPO/dags" "$REPO/plugins" >/dev/null

export PATH="$VENV/bin:$PATH"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export AIRFLOW_HOME="${AIRFLOW_HOME:-$REPO/.local/airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$REPO/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$REPO/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
# the scheduler looks for the next task every 0.2 s instead of every second when idle: a slot is eight tasks
# in sequence (docs/benchmarks.md, Slot time)
export AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME="${AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME:-0.2}"
export AIRFLOW__CORE__UNIT_TEST_MODE="${AIRFLOW__CORE__UNIT_TEST_MODE:-False}"
export AIRFLOW__LOGGING__LOGGING_LEVEL="${AIRFLOW__LOGGING__LOGGING_LEVEL:-INFO}"
export NO_PROXY="*" no_proxy="*"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$REPO/.local/run}"
mkdir -p "$XDG_RUNTIME_DIR"
mkdir -p "$AIRFLOW_HOME"

if [ -n "${RADAR_DATABASE_URL:-}" ]; then
  export RADAR_DATABASE_URL_FROM_USER=1
else
  echo "==> starting (or reusing) the embedded PostgreSQL in ${RADAR_PGDATA:-.local/pgdata}"
  started="$(python -m include.radar.cli db-url 2>"$XDG_RUNTIME_DIR/db-url.log")" \
    || { tail -5 "$XDG_RUNTIME_DIR/db-url.log" >&2; echo "error: the embedded PostgreSQL did not start" >&2; exit 1; }
  RADAR_DATABASE_URL="$(grep -E '^postgres(ql)?://' <<<"$started" | tail -n 1)"
  [ -n "$RADAR_DATABASE_URL" ] || { echo "error: the embedded PostgreSQL gave no URL" >&2; exit 1; }
  export RADAR_DATABASE_URL
fi
python -m include.radar.cli migrate

# Airflow's metadata: SQLite in AIRFLOW_HOME (the tests run `dag.test()` alone), or, with
# RADAR_AIRFLOW_ON_POSTGRES=1 (`make run`, `make ui`), a second database "airflow" on the radar's PostgreSQL server
# with the LocalExecutor, so the demo day, the scheduler, the api-server and backfills share one history.
metadata="sqlite"
cfg=("core.dags_folder=$AIRFLOW__CORE__DAGS_FOLDER" "core.plugins_folder=$AIRFLOW__CORE__PLUGINS_FOLDER"
     "core.load_examples=False" "api.host=${AIRFLOW__API__HOST:-127.0.0.1}")
if [ "${RADAR_AIRFLOW_ON_POSTGRES:-}" = "1" ]; then
  AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="$(python -m include.radar.cli airflow-db-url | tail -n 1)" || exit 1
  # the LocalExecutor whose workers fork with the task runner already imported (include/radar/seam/executor.py);
  # RADAR_EXECUTOR=LocalExecutor runs Airflow's own
  AIRFLOW__CORE__EXECUTOR="${RADAR_EXECUTOR:-include.radar.seam.executor.PreloadingLocalExecutor}"
  export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN AIRFLOW__CORE__EXECUTOR
  cfg+=("database.sql_alchemy_conn=$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" "core.executor=$AIRFLOW__CORE__EXECUTOR")
  metadata="postgres"
fi
python "$REPO/scripts/airflow_cfg.py" "${cfg[@]}" >/dev/null
# the stamp covers the lock, the metadata database and the analysis pool size: a change of any is applied
stamp="$lock_sum $metadata analysis_tasks=${AIRFLOW_VAR_RADAR_ANALYSIS_TASKS:-2}"
if [ ! -f "$AIRFLOW_HOME/.migrated" ] || [ "$(cat "$AIRFLOW_HOME/.migrated")" != "$stamp" ]; then
  echo "==> migrating Airflow's metadata database ($metadata)"
  airflow db migrate >"$AIRFLOW_HOME/migrate.log" 2>&1 || { tail -30 "$AIRFLOW_HOME/migrate.log" >&2; exit 1; }
  airflow pools set radar_llm "${AIRFLOW_VAR_RADAR_ANALYSIS_TASKS:-2}" "Opportunity Radar: analysis tasks at once" >>"$AIRFLOW_HOME/migrate.log" 2>&1
  echo "$stamp" > "$AIRFLOW_HOME/.migrated"
fi

exec "$@"
