"""Command line for set-up and operations: ``python -m include.radar.cli {db-url,migrate,airflow-db-url}``."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from include.radar import db, store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="radar", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("db-url", help="print the radar database URL, starting the embedded PostgreSQL if needed")
    sub.add_parser("migrate", help="apply the schema migrations not applied yet")
    sub.add_parser("airflow-db-url", help="create (if missing) a database for Airflow's metadata on the radar's "
                   "PostgreSQL server and print its SQLAlchemy URL")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "db-url":
            print(db.database_url())
        elif args.command == "airflow-db-url":
            print(db.airflow_metadata_url(db.database_url(), os.environ.get("RADAR_AIRFLOW_DB_NAME", "airflow")))
        elif args.command == "migrate":
            url = db.database_url()
            applied = db.migrate(url)
            print(f"radar schema at {db.redact(url)}: " + (f"applied {', '.join(applied)}" if applied else "up to date"))
            with db.connect(url) as conn:  # articles stored before search existed get their lexemes once
                indexed = store.index_missing(conn)
            if indexed:
                print(f"search: indexed {indexed} articles stored before search existed")
    except db.DatabaseUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
