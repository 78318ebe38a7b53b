"""Shared fixtures: a real PostgreSQL database per test session, emptied between tests.

The server is ``RADAR_TEST_DATABASE_URL`` (CI points it at 127.0.0.1:5432/test) when set, otherwise an
embedded PostgreSQL from PyPI in ``.local/pgdata-test``. Each session creates its own database on that
server, migrates it, and drops it at the end, so runs never see each other's rows.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from include.radar import db  # noqa: E402

TABLES = (
    "push_decision, notification_log, daily_report, opportunity, analysis_result, content_item, "
    "slot_run, wechat_account, service_state"
)


def _server_url() -> str:
    url = os.environ.get("RADAR_TEST_DATABASE_URL")
    if url:
        return url
    return db.embedded_url(REPO / ".local" / "pgdata-test")


def _with_database(url: str, name: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)


@pytest.fixture(scope="session")
def database_url() -> str:
    server = _server_url()
    name = f"radar_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = _with_database(server, name)
    db.migrate(url)
    previous = os.environ.get("RADAR_DATABASE_URL")
    os.environ["RADAR_DATABASE_URL"] = url
    yield url
    if previous is None:
        os.environ.pop("RADAR_DATABASE_URL", None)
    else:
        os.environ["RADAR_DATABASE_URL"] = previous
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db_url(database_url: str) -> str:
    """A migrated, empty radar database."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
    return database_url


@pytest.fixture
def conn(db_url: str):
    with db.connect(db_url) as connection:
        yield connection
