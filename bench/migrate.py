"""How long does a year of data take to migrate from the previous release's schema to today's?

Creates a throw-away database on the server named by ``RADAR_TEST_DATABASE_URL`` (or the embedded
PostgreSQL in ``.local/pgdata-bench``), migrates it to the previous release (``year.PREVIOUS_RELEASE``, or
``--from``), bulk-loads a year of radar data there (the page benchmark's seeder: 365 days x 5 slots, ~10
articles a day with analyses, opportunities, reports, notifications and verdicts) and indexes it for search
when that schema has search (as the slots would have). Then it does what ``cli migrate`` does at an upgrade:
applies each later migration under the migration lock, in its own transaction, timing each, then indexes
what is missing from search; prints the times and the total, and checks that every row and every value of
the earlier schema is still there.

    make bench-migrate                                   # from the previous release
    make bench-migrate ARGS="--from 0003_operations.sql" # from an older schema: more migrations to time

The database is dropped at the end unless ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime
from pathlib import Path

from include.radar import store
from include.radar.core import db
from include.radar.core.slots import SHANGHAI
from include.radar_demo import year

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--from", dest="release", default=year.PREVIOUS_RELEASE,
                        help=f"the last migration of the schema the data is seeded on (default "
                             f"{year.PREVIOUS_RELEASE}; the oldest the seeder can write is {year.OLDEST_SEEDABLE})")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()
    names = [path.name for path in db.migration_files()]
    if args.release not in names or names.index(args.release) < names.index(year.OLDEST_SEEDABLE):
        parser.error(f"--from must be one of {', '.join(names[names.index(year.OLDEST_SEEDABLE):])}")
    pending = names[names.index(args.release) + 1:]

    started = time.perf_counter()
    today = datetime.now(UTC).astimezone(SHANGHAI).date()
    with year.scratch_database(year.bench_server_url(), keep=args.keep, until=args.release) as url:
        t0 = time.perf_counter()
        seeded = year.seed(url, today, args.days, random.Random(42))
        print(f"seeded {args.days} days on the schema of {args.release} in {time.perf_counter() - t0:.1f} s: "
              + ", ".join(f"{table} {n}" for table, n in seeded["counts"].items()))
        columns = year.table_columns(url)
        if "search_tsv" in columns["content_item"]:  # the slots index what they store: so would this year
            t0 = time.perf_counter()
            with db.connect(url) as conn:
                indexed = store.searching.index_missing(conn, batch=1000)
            print(f"indexed {indexed} articles for search in {time.perf_counter() - t0:.1f} s, as the slots did")
        kept = {table: names for table, names in columns.items() if table != "schema_migration"}
        before = year.fingerprint(url, kept)

        if not pending:
            print(f"\nnothing to migrate: {args.release} is the newest migration "
                  f"(time older ones with --from {year.OLDEST_SEEDABLE})")
        else:
            print(f"\nmigrating {len(pending)} migration(s), each under the migration lock in its own transaction:")
        total = 0.0
        for name in pending:
            t0 = time.perf_counter()
            applied = db.migrate(url, until=name)
            took = time.perf_counter() - t0
            assert applied == [name], applied
            total += took
            print(f"  {name:<34} {took:>8.2f} s")
        t0 = time.perf_counter()
        with db.connect(url) as conn:  # what `cli migrate` does next: lexemes of articles stored before search
            indexed = store.searching.index_missing(conn, batch=1000)
        took = time.perf_counter() - t0
        total += took
        print(f"  {'search index (cli migrate)':<34} {took:>8.2f} s   ({indexed} articles indexed)")
        print(f"  {'total':<34} {total:>8.2f} s")

        after = year.fingerprint(url, kept)
        rows = sum(n for n, _ in before.values())
        intact = after == before
        print(f"\ndata {'intact' if intact else 'CHANGED'}: {len(before)} tables, {rows} rows of {args.release}'s "
              "schema compared value for value" + ("" if intact else ": " + ", ".join(
                  table for table in before if after.get(table) != before[table])))
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0 if intact else 1


if __name__ == "__main__":
    raise SystemExit(main())
