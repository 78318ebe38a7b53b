#!/usr/bin/env bash
# The bundled PostgreSQL's entrypoint (docker-compose.yaml): the official one, after one check. A NEW volume is
# never initialised with an empty or well-known superuser password: once initialised, a volume keeps the
# password it was made with whatever .env says later, and every database login of the deployment would sit
# behind it. An existing volume starts as before; airflow-init refuses its password if it is a default one.
# The roles and databases themselves are airflow-init's (include/radar/operations/roles.py), for new and old volumes alike.
set -euo pipefail

if [ ! -s "${PGDATA:-/var/lib/postgresql/data}/PG_VERSION" ]; then
  case "${POSTGRES_PASSWORD:-}" in
    "" | [Aa][Ii][Rr][Ff][Ll][Oo][Ww] | [Pp][Oo][Ss][Tt][Gg][Rr][Ee][Ss] | [Pp][Aa][Ss][Ss][Ww][Oo][Rr][Dd])
      echo "ERROR: POSTGRES_PASSWORD in .env is empty or a well-known default; this new database volume is not" >&2
      echo "initialised with it. Set it to a long random string (URL-safe characters), e.g. the output of" >&2
      echo "python3 -c 'import secrets; print(secrets.token_urlsafe(32))', then run docker compose up -d again." >&2
      exit 1
      ;;
  esac
fi
exec docker-entrypoint.sh "$@"
