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

from include.radar.core import db  # noqa: E402
from include.radar.core.clock import FixedClock  # noqa: E402

# the tests never reach a market-data service: the track record replays the recorded answers the demo uses
os.environ.setdefault("AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE", "recorded")
os.environ.setdefault("AIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR", str(REPO / "include" / "radar_demo" / "data" / "market"))
# the pushes' prices since each article (pushes/context.py) only where a test asks for them (test_push_standing)
os.environ.setdefault("AIRFLOW_VAR_RADAR_PUSH_MARKET_CONTEXT", "false")

TABLES = (
    "push_decision, notification_log, daily_report, opportunity, analysis_result, content_item, "
    "slot_run, wechat_account, service_state, operator_alert, llm_spend, feedback, reader_profile, feed_token, "
    "market_bar, market_intraday, market_calendar, market_listing, market_fetch, track_pick, track_outcome, "
    "evaluation, evaluation_item, evaluation_attempt"
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


def connect(**bounds):
    """A connection to the session's test database (``RADAR_DATABASE_URL``, set by ``database_url``)."""
    return db.connect(os.environ["RADAR_DATABASE_URL"], **bounds)


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


# ------------------------------------------------------------------------------- fake services

import json  # noqa: E402
import re  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from datetime import UTC, datetime  # noqa: E402

from include.radar_demo.fakes import FakeDeepSeek, FakeWeRSS, PushSink  # noqa: E402


@dataclass
class Fakes:
    werss: FakeWeRSS
    deepseek: FakeDeepSeek
    sink: PushSink
    sink2: PushSink
    ops: PushSink  # the operator's channel (radar_ops_push): alerts land here, never in the reader's sinks
    base: str
    clock: list[int]

    def at(self, moment: datetime) -> None:
        """Set the fake WeRSS's clock (what is published by then, when tokens expire)."""
        self.clock[0] = int(moment.timestamp())


@pytest.fixture(scope="session")
def make_httpserver():
    """pytest-httpserver's server, but threaded: a slot's analysis batch calls the LLM stand-in several at a
    time, as it calls DeepSeek (a server answering one request at a time would hide that)."""
    from pytest_httpserver import HTTPServer

    server = HTTPServer(host="localhost", port=0, threaded=True)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


@pytest.fixture
def fakes(httpserver, monkeypatch, db_url) -> Fakes:
    """WeRSS, DeepSeek and two push endpoints on one real local HTTP server, wired in as connections."""
    clock = [int(datetime(2026, 1, 8, 6, 0, tzinfo=UTC).timestamp())]
    werss = FakeWeRSS(now=lambda: clock[0])
    deepseek = FakeDeepSeek()
    sink, sink2, ops = PushSink(), PushSink(), PushSink()
    httpserver.expect_request(re.compile(r"^/api/v1/wx/.*")).respond_with_handler(werss.handle)
    httpserver.expect_request(re.compile(r"^/deepseek/.*")).respond_with_handler(deepseek.handle)
    httpserver.expect_request("/push/one").respond_with_handler(sink.handle)
    httpserver.expect_request("/push/two").respond_with_handler(sink2.handle)
    httpserver.expect_request("/push/ops").respond_with_handler(ops.handle)
    base = httpserver.url_for("/").rstrip("/")
    hostport = base.split("://", 1)[1]
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": base, "login": "admin", "password": "secret",
        "extra": {"backoff_seconds": 0, "max_retries": 2}}))
    monkeypatch.setenv("AIRFLOW_CONN_DEEPSEEK_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"{base}/deepseek", "password": "sk-test", "extra": {"backoff_seconds": 0}}))
    monkeypatch.setenv("AIRFLOW_CONN_RADAR_PUSH", json.dumps({
        "conn_type": "generic", "extra": {"urls": [f"json://{hostport}/push/one", f"json://{hostport}/push/two"]}}))
    monkeypatch.setenv("AIRFLOW_CONN_RADAR_OPS_PUSH", json.dumps({
        "conn_type": "generic", "extra": {"urls": [f"json://{hostport}/push/ops"]}}))
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_REPORT_BASE_URL", "https://radar.example.com/radar")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LINK_SECRET", "test-link-secret-0123456789abcdef01")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES", "30")
    return Fakes(werss, deepseek, sink, sink2, ops, base, clock)


@pytest.fixture(scope="module")
def dag():
    """The radar DAG as the scheduler sees it, with its retries kept and the waiting between them dropped."""
    from datetime import timedelta

    from airflow.dag_processing.dagbag import DagBag

    from include.radar import DAG_ID

    dag = DagBag(dag_folder=str(REPO / "dags")).dags[DAG_ID]
    for task in dag.tasks:
        task.retry_delay = timedelta(seconds=0)
        task.retry_exponential_backoff = False
    return dag


# ------------------------------------------------------------------ the deployment's logins (test_roles, the drill)

import secrets  # noqa: E402
from collections.abc import Iterator  # noqa: E402

from psycopg import sql  # noqa: E402

from include.radar.operations import roles  # noqa: E402


@dataclass
class Deployment:
    """A docker compose deployment's logins and databases on the tests' server (named with a random suffix:
    roles belong to the whole server, which other sessions share)."""

    admin: str  # the superuser, on the maintenance database
    owner: str
    pages: str
    metadata: str
    radar_db: str
    metadata_db: str
    users: tuple[str, ...]


def login_url(server: str, user: str, password: str, dbname: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(server)
    info.update(user=user, password=password, dbname=dbname)
    return psycopg.conninfo.make_conninfo(**info)


def _sqlalchemy(url: str) -> str:
    """What docker compose gives Airflow: a SQLAlchemy URL of the same login."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    host = info.get("host") or "localhost"
    if str(host).startswith("/"):
        return f"postgresql+psycopg2://{info['user']}:{info['password']}@/{info['dbname']}?host={host}"
    return f"postgresql+psycopg2://{info['user']}:{info['password']}@{host}:{info.get('port') or 5432}/{info['dbname']}"


@pytest.fixture
def deployment() -> Iterator[Deployment]:
    """The logins and databases of a deployment, not yet created (:func:`set_up_deployment` does what
    airflow-init does); dropped at the end, whatever the test made of them."""
    server = _server_url()
    tag = uuid.uuid4().hex[:8]
    owner, pages, meta = f"radar_owner_{tag}", f"radar_pages_{tag}", f"airflow_meta_{tag}"
    radar_db, metadata_db = f"radar_roles_{tag}", f"airflow_roles_{tag}"
    found = Deployment(
        # a password for the form's sake: init refuses a superuser without one (the local server trusts)
        admin=login_url(server, psycopg.conninfo.conninfo_to_dict(server).get("user") or "postgres",
                        secrets.token_urlsafe(16), "postgres"),
        owner=login_url(server, owner, secrets.token_urlsafe(16), radar_db),
        pages=login_url(server, pages, secrets.token_urlsafe(16), radar_db),
        metadata=_sqlalchemy(login_url(server, meta, secrets.token_urlsafe(16), metadata_db)),
        radar_db=radar_db, metadata_db=metadata_db, users=(owner, pages, meta),
    )
    try:
        yield found
    finally:
        with psycopg.connect(found.admin, autocommit=True) as admin:
            for name in (radar_db, metadata_db):
                admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            for user in found.users:
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(user)))


def set_up_deployment(d: Deployment) -> None:
    """What airflow-init runs: provision (superuser), migrate (owner), grant-pages (owner)."""
    roles.provision(d.admin, d.owner, d.pages, d.metadata)
    db.migrate(d.owner)
    roles.grant_pages(d.owner, d.pages)


# ----------------------------------------------------------------------------- the report pages (tests/pages.py)

from typing import TYPE_CHECKING, Any  # noqa: E402

from tests.pages import NOW, FakeUser, Seeder, airflow_get_user, allow_reading, make_settings  # noqa: E402

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

    from include.radar.core.settings import Settings


@pytest.fixture
def seed(conn: Any) -> Seeder:
    return Seeder(conn)


@pytest.fixture
def make_client(db_url: str):
    """A factory of TestClients; ``user=True`` overrides Airflow's get_user with a fake logged-in user who may
    read the radar DAG (and edit it, unless ``editor=False``)."""

    def factory(
        *, user: bool = True, settings: Settings | None = None, url: str | None = None, editor: bool = True
    ) -> TestClient:
        from fastapi.testclient import TestClient  # the web app is imported by the tests of the pages only

        from include.radar.web.app import create_app

        cfg = settings or make_settings()
        app = create_app(lambda: cfg, url or db_url, clock=FixedClock(NOW))
        if user:
            app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
            allow_reading(app, edit=editor)
        return TestClient(app)

    return factory


@pytest.fixture
def client(make_client) -> TestClient:
    return make_client()


# ------------------------------------------------------------------------------- a shuffled order


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shuffle", metavar="SEED", default=None,
                     help="run the collected tests in an order shuffled by SEED (each test must pass in any order)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seed = config.getoption("--shuffle")
    if seed is not None:
        import random

        random.Random(seed).shuffle(items)


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--shuffle")
    return f"shuffled with --shuffle {seed}" if seed is not None else None


REAL_WERSS = "test_real_werss.py"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The tests against a real WeRSS by name and outcome, so that a log shows they ran and were not skipped."""
    outcomes = [(r.nodeid.split("::")[-1], r.outcome) for kind in ("passed", "failed", "skipped")
                for r in terminalreporter.stats.get(kind, []) if REAL_WERSS in r.nodeid and r.when in ("call", "setup")
                and not (r.when == "setup" and r.outcome == "passed")]
    if outcomes:
        terminalreporter.write_sep("-", "against a real WeRSS")
        for name, outcome in outcomes:
            terminalreporter.write_line(f"{outcome:8} {name}")
