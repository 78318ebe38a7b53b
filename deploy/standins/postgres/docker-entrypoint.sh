#!/usr/bin/env bash
# The stand-in PostgreSQL's entrypoint: what the official image's does that docker-compose.yaml relies on,
# written afresh. Started as root, it makes PGDATA the postgres user's and runs itself again as that user.
# A new (empty) PGDATA is initialised with the superuser POSTGRES_USER (default postgres) and
# POSTGRES_PASSWORD (required; scram-sha-256 for connections from other hosts, trust on the local socket),
# then POSTGRES_DB (default: the user's name) is created and /docker-entrypoint-initdb.d/*.sql|*.sh run.
# An existing PGDATA starts as it is. Then the server runs in the foreground, listening on every address.
set -Eeuo pipefail

if [[ "${1:-}" == -* ]]; then
  set -- postgres "$@"
fi
if [[ "${1:-}" != "postgres" ]]; then
  exec "$@"
fi

if [[ "$(id -u)" == "0" ]]; then
  mkdir -p "${PGDATA}"
  chown postgres:postgres "${PGDATA}"
  chmod 700 "${PGDATA}"
  exec gosu postgres "$0" "$@"
fi

if [[ ! -s "${PGDATA}/PG_VERSION" ]]; then
  if [[ -z "${POSTGRES_PASSWORD:-}" ]]; then
    echo "Error: Database is uninitialized and superuser password is not specified." >&2
    echo "       Set POSTGRES_PASSWORD." >&2
    exit 1
  fi
  user="${POSTGRES_USER:-postgres}"
  db="${POSTGRES_DB:-${user}}"
  initdb --username="${user}" --pwfile=<(printf '%s\n' "${POSTGRES_PASSWORD}") --auth-local=trust \
    --auth-host=scram-sha-256 -D "${PGDATA}" ${POSTGRES_INITDB_ARGS:-}
  printf '\nhost all all all scram-sha-256\n' >> "${PGDATA}/pg_hba.conf"
  # a server on the socket only while the databases are made, as the official image does
  pg_ctl -D "${PGDATA}" -o "-c listen_addresses='' -p 5432" -w start
  if [[ "${db}" != "postgres" ]]; then
    psql -v ON_ERROR_STOP=1 --username "${user}" --dbname postgres -q \
      --set db="${db}" <<<'CREATE DATABASE :"db";'
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "${f}" in
      *.sh) echo "running ${f}"; . "${f}" ;;
      *.sql) echo "running ${f}"; psql -v ON_ERROR_STOP=1 --username "${user}" --dbname "${db}" -f "${f}" ;;
      *) ;;
    esac
  done
  pg_ctl -D "${PGDATA}" -m fast -w stop
  echo "PostgreSQL init process complete; ready for start up."
fi
exec postgres -c listen_addresses='*' "${@:2}"
