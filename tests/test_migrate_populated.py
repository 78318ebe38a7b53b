"""Migrations on a populated database. Data seeded on the schema of an earlier release migrates
to today's schema under the migration lock, every row and value intact, while two migrators race.

"The previous release" is ``year.PREVIOUS_RELEASE`` (the last migration this round of work started from):
whatever migrations come after it are applied here, so each new migration is tried on data before it
ships. The oldest schema the seeder can write (``year.OLDEST_SEEDABLE``) runs too, so that migrations that
rewrite populated tables (0005 groups every analysis, 0006 re-checks every article's status, 0007/0008 build
indexes) are exercised whatever is pending today. `make bench-migrate` times the same on a full year.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime

import psycopg
import pytest

from include.radar.core import db
from include.radar.core.clock import FixedClock
from include.radar_demo import year

DAYS = 30  # a month is enough to catch a migration that loses or rewrites rows; the benchmark runs a year
# Columns of an earlier schema that a later migration rewrites on purpose (table -> columns), left out of the
# "every value intact" comparison. Name a column here together with the migration that rewrites it.
REWRITTEN: dict[str, set[str]] = {}


def _after(release: str) -> list[str]:
    names = [path.name for path in db.migration_files()]
    return names[names.index(release) + 1:]


def _waiting_for_the_lock(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()[0]


def _read_pages(url: str, day: date, analysis_id: int) -> dict[str, str]:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from include.radar.core.settings import load_settings
    from include.radar.web.app import create_app
    from include.radar.web.auth import may_read_radar

    app = create_app(lambda: load_settings({}.get, use_airflow=False), url,
                     clock=FixedClock(datetime.combine(day, datetime.min.time(), UTC)))
    app.dependency_overrides[get_user] = lambda: {"username": "reader"}
    app.dependency_overrides[may_read_radar] = lambda _user: True
    with TestClient(app) as client:
        pages = {path: client.get(path) for path in ("/", f"/daily/{day}", f"/analysis/{analysis_id}")}
    assert {path: r.status_code for path, r in pages.items()} == dict.fromkeys(pages, 200)
    return {path: r.text for path, r in pages.items()}


@pytest.mark.parametrize("release", [year.PREVIOUS_RELEASE, year.OLDEST_SEEDABLE])
def test_data_of_an_earlier_release_migrates_intact_while_two_migrators_race(database_url, release):
    today = date(2026, 1, 8)
    with year.scratch_database(database_url, until=release) as url:
        seeded = year.seed(url, today, DAYS, random.Random(26))
        columns = year.table_columns(url)
        if "reader_profile" in columns:  # the reader's profile came with 0006
            with psycopg.connect(url) as conn:
                conn.execute("INSERT INTO reader_profile (companies, rules) VALUES ('{宁德时代}', '{!广告}')")
        kept = {table: [c for c in names if c not in REWRITTEN.get(table, set())]
                for table, names in columns.items() if table != "schema_migration"}  # the ledger: checked below
        before = year.fingerprint(url, kept)
        assert before["content_item"][0] == seeded["counts"]["content_item"] > 0

        # a migrator holds the lock (say, half-way through a long migration) when two more start
        with psycopg.connect(url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (db._MIGRATION_LOCK,))
            with ThreadPoolExecutor(2) as pool:
                racers = [pool.submit(db.migrate, url) for _ in range(2)]
                deadline = time.monotonic() + 30
                while _waiting_for_the_lock(url) < 2 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert _waiting_for_the_lock(url) == 2 and not any(r.done() for r in racers)
                holder.execute("SELECT pg_advisory_unlock(%s)", (db._MIGRATION_LOCK,))
                results = [r.result(timeout=300) for r in racers]  # neither raises

        pending = _after(release)
        assert sorted(results, key=len) == [[], pending]  # one applied them all, the other found it up to date
        with psycopg.connect(url) as conn:
            ledger = [r[0] for r in conn.execute("SELECT version FROM schema_migration ORDER BY version")]
        assert ledger == [path.name for path in db.migration_files()]
        assert year.fingerprint(url, kept) == before  # every row, every value of the earlier schema
        assert db.migrate(url) == []

        # and the pages read the migrated year
        pages = _read_pages(url, today, seeded["analysis_id"])
        with psycopg.connect(url) as conn:
            title = conn.execute("SELECT c.title FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id "
                                 "WHERE a.id = %s", (seeded["analysis_id"],)).fetchone()[0]
        assert title in pages[f"/analysis/{seeded['analysis_id']}"]


def test_the_previous_release_is_a_migration_that_exists_and_the_seeder_can_write_it():
    names = [path.name for path in db.migration_files()]
    assert year.OLDEST_SEEDABLE in names and year.PREVIOUS_RELEASE in names
    assert names.index(year.OLDEST_SEEDABLE) <= names.index(year.PREVIOUS_RELEASE)
    with pytest.raises(ValueError, match="no migration '0999_nothing.sql'"):
        db.migrate("postgresql://unused", until="0999_nothing.sql")
