#!/usr/bin/env bash
# The stand-in image's /entrypoint: what the official Airflow image's entrypoint does that our compose file
# relies on, written afresh (docs/deployment.md, "Stand-in images"). In order:
#   - refuses a group other than 0 (a uid of 50000 with another group only warns); umask 0002;
#   - an arbitrary uid gets an /etc/passwd line and HOME=/home/airflow;
#   - waits for the metadata database (`airflow db check`), CONNECTION_CHECK_MAX_COUNT tries (0: no wait)
#     CONNECTION_CHECK_SLEEP_TIME seconds apart;
#   - _AIRFLOW_DB_MIGRATE: `airflow db migrate`; _AIRFLOW_WWW_USER_CREATE: the admin from _AIRFLOW_WWW_USER_*;
#   - `bash ...` and `python ...` run as such; anything else is an airflow command (a leading "airflow"
#     dropped), the scheduler and Celery's commands after a wait for the broker.
# dumb-init runs it (DUMB_INIT_SETSID=1: a signal reaches the whole process group; 0 for Celery's warm shutdown).
AIRFLOW_COMMAND="${1:-}"
set -euo pipefail

if [[ "$(id -g)" != "0" ]]; then
  if [[ "$(id -u)" == "50000" ]]; then
    echo "WARNING! Run the image with group 0 (you started it as $(id -u):$(id -g))." >&2
  else
    echo "ERROR! Run the image with group 0, whatever the user id (you started it as $(id -u):$(id -g))." >&2
    exit 1
  fi
fi
umask 0002

CONNECTION_CHECK_MAX_COUNT="${CONNECTION_CHECK_MAX_COUNT:-20}"
CONNECTION_CHECK_SLEEP_TIME="${CONNECTION_CHECK_SLEEP_TIME:-3}"

if ! whoami >/dev/null 2>&1; then
  if [[ -w /etc/passwd ]]; then
    echo "${USER_NAME:-default}:x:$(id -u):0:${USER_NAME:-default} user:${AIRFLOW_USER_HOME_DIR}:/sbin/nologin" >> /etc/passwd
  fi
  export HOME="${AIRFLOW_USER_HOME_DIR}"
fi

retry() {  # retry "what" command...: until it succeeds, CONNECTION_CHECK_MAX_COUNT times at most
  local what="$1" left="${CONNECTION_CHECK_MAX_COUNT}" output
  shift
  until output="$("$@" 2>&1)"; do
    left=$((left - 1))
    if (( left <= 0 )); then
      echo
      echo "ERROR! ${what}: no answer after ${CONNECTION_CHECK_MAX_COUNT} tries. The last one said:" >&2
      echo "${output}" >&2
      exit 1
    fi
    echo -n "."
    sleep "${CONNECTION_CHECK_SLEEP_TIME}"
  done
  echo
}

reachable() {  # reachable URL: its host answers on its port (a scheme's default port when it names none)
  local host port
  read -r host port < <(python - "$1" <<'PY'
import socket, sys
from urllib.parse import urlsplit
url = urlsplit(sys.argv[1])
defaults = {"postgres": 5432, "postgresql": 5432, "mysql": 3306, "redis": 6379, "rediss": 6379, "amqp": 5672}
port = url.port or next((p for s, p in defaults.items() if url.scheme.startswith(s)), 0)
print(socket.gethostbyname(url.hostname or "localhost"), port)
PY
  )
  nc -z -w 5 "${host}" "${port}"
}

if (( CONNECTION_CHECK_MAX_COUNT > 0 )); then
  retry "the metadata database" airflow db check
fi
if [[ -n "${_AIRFLOW_DB_MIGRATE:-}" || -n "${_AIRFLOW_DB_UPGRADE:-}" ]]; then
  airflow db migrate || true
fi
if [[ -n "${_AIRFLOW_WWW_USER_CREATE:-}" ]]; then
  password="${_AIRFLOW_WWW_USER_PASSWORD:-}"
  if [[ -n "${_AIRFLOW_WWW_USER_PASSWORD_CMD:-}" ]]; then
    password="$(eval "${_AIRFLOW_WWW_USER_PASSWORD_CMD}")"
  fi
  unset _AIRFLOW_WWW_USER_PASSWORD _AIRFLOW_WWW_USER_PASSWORD_CMD
  if [[ -z "${password}" ]]; then
    echo "ERROR! No admin password: set _AIRFLOW_WWW_USER_PASSWORD." >&2
    exit 1
  fi
  # an existing user is left as it is (the command fails, which is not an error here)
  airflow users create --username "${_AIRFLOW_WWW_USER_USERNAME:-admin}" \
    --firstname "${_AIRFLOW_WWW_USER_FIRSTNAME:-Airflow}" --lastname "${_AIRFLOW_WWW_USER_LASTNAME:-Admin}" \
    --email "${_AIRFLOW_WWW_USER_EMAIL:-airflowadmin@example.com}" --role "${_AIRFLOW_WWW_USER_ROLE:-Admin}" \
    --password "${password}" || true
  unset password
fi

case "${AIRFLOW_COMMAND}" in
  bash) shift; exec /bin/bash "$@" ;;
  python) shift; exec python "$@" ;;
  airflow) shift; AIRFLOW_COMMAND="${1:-}" ;;
esac
if [[ "${AIRFLOW_COMMAND}" =~ ^(scheduler|celery)$ ]] && (( CONNECTION_CHECK_MAX_COUNT > 0 )); then
  if [[ "$(airflow config get-value core executor)" == "CeleryExecutor" ]]; then
    retry "the Celery broker" reachable "$(airflow config get-value celery broker_url)"
  fi
fi
exec airflow "$@"
