#!/usr/bin/env bash
# Creates the radar's own database (default "radar") beside Airflow's metadata database "airflow", owned by
# the same user. The postgres image runs the scripts in /docker-entrypoint-initdb.d only when it
# initialises an EMPTY data volume; for a volume created before this script existed, the airflow-init
# service of docker-compose.yaml creates the database when it is missing. The radar's tables are created
# by `python -m include.radar.cli migrate` (also run by airflow-init), not here.
set -eo pipefail

radar_db="${RADAR_DB_NAME:-radar}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    --set=radar_db="$radar_db" --set=owner="$POSTGRES_USER" <<'SQL'
SELECT format('CREATE DATABASE %I OWNER %I', :'radar_db', :'owner')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'radar_db')\gexec
SQL
