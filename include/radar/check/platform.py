"""The check's lines for what the radar runs on: its PostgreSQL (reachable, migrated, the pages' login kept
read-mostly) and Airflow's metadata (the pool, the DAG parsed, paused or not)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from include.radar import DAG_ID, db, roles
from include.radar.check import Line, Options, bounded, fail, ok, reason, warn
from include.radar.settings import Settings

DB = "radar database"
AIRFLOW = "Airflow"
POOL = "radar_llm"
DAG_FILE = "opportunity_radar.py"
MIGRATE = "python -m include.radar.cli migrate (docker compose: airflow-init runs it at every start)"


def database_lines(url: str, settings: Settings, options: Options) -> tuple[list[Line], bool]:
    """The radar database's lines, and whether it was reachable."""
    try:
        with db.connect(url, statement_timeout_s=options.timeout, lock_timeout_s=options.timeout) as conn:
            version = conn.execute("SHOW server_version").fetchone()["server_version"]
            lines = [ok(DB, "reachable", f"PostgreSQL {version.split()[0]} at {db.redact(url)}"), _schema(conn)]
    except (db.DatabaseUnavailable, psycopg.Error) as exc:
        return [fail(DB, "reachable", reason(exc), "start PostgreSQL or correct RADAR_DATABASE_URL / the radar_db "
                     "connection")], False
    lines.append(pages_line(os.environ.get("RADAR_PAGES_DATABASE_URL"), url, settings, options))
    return lines, True


def _schema(conn: psycopg.Connection) -> Line:
    files = {p.name: hashlib.sha256(p.read_text(encoding="utf-8").encode()).hexdigest() for p in db.migration_files()}
    exists = conn.execute("SELECT to_regclass('schema_migration') IS NOT NULL AS e").fetchone()["e"]
    done = {r["version"]: r["checksum"] for r in conn.execute("SELECT version, checksum FROM schema_migration")} \
        if exists else {}
    pending = sorted(set(files) - set(done))
    changed = sorted(v for v in set(files) & set(done) if files[v] != done[v])
    unknown = sorted(set(done) - set(files))
    if changed:
        return fail(DB, "schema", f"applied migration(s) changed since: {', '.join(changed)}",
                    "restore the migration files of the release that applied them (migrations are append-only)")
    if unknown:
        return fail(DB, "schema", f"the database has migrations this code does not know: {', '.join(unknown)}",
                    "deploy the release that wrote them (this code is older than its database)")
    if pending:
        return fail(DB, "schema", f"{len(pending)} migration(s) pending: {', '.join(pending)}", f"run {MIGRATE}")
    return ok(DB, "schema", f"migrated: {len(done)} migrations applied, none pending")


def pages_line(pages: str | None, owner_url: str, settings: Settings, options: Options) -> Line:
    """The pages' login: separate from the owner, not a superuser, writing only the reader's own tables, and
    able to read the check's result (row security hides only the WeRSS token from it)."""
    if not pages:
        text = "RADAR_PAGES_DATABASE_URL is not set: the report pages use the radar's own login"
        if settings.demo_mode:
            return ok(DB, "pages' login", text + " (one login: the demo and make run)")
        return warn(DB, "pages' login", text, "set RADAR_PAGES_DATABASE_URL to a login of its own and run cli "
                    "provision + grant-pages (docker compose does both)")
    try:
        with db.connect(pages, statement_timeout_s=options.timeout, lock_timeout_s=options.timeout) as conn:
            facts = _pages_facts(conn)
    except (db.DatabaseUnavailable, psycopg.Error) as exc:
        return fail(DB, "pages' login", reason(exc), "correct RADAR_PAGES_DATABASE_URL, then run cli provision + grant-pages")
    owner = psycopg.conninfo.conninfo_to_dict(owner_url).get("user")
    grant = "run python -m include.radar.cli grant-pages as the radar's owner (docker compose: airflow-init)"
    if facts["user"] == owner or facts["superuser"]:
        return fail(DB, "pages' login", f"the pages log in as {facts['user']!r}, "
                    + ("a superuser" if facts["superuser"] else "the radar's owner"),
                    "give RADAR_PAGES_DATABASE_URL a login of its own (cli provision)")
    if facts["writes"]:
        return fail(DB, "pages' login", f"{facts['user']} may write {', '.join(facts['writes'][:5])}", grant)
    if not facts["reads"]:
        return fail(DB, "pages' login", f"{facts['user']} cannot read service_state (the health panel)", grant)
    return ok(DB, "pages' login", f"{facts['user']}: reads everything, writes only "
              f"{', '.join(roles.PAGES_WRITE_TABLES)}; the WeRSS token row hidden from it")


def _pages_facts(conn: psycopg.Connection) -> dict[str, Any]:
    me = conn.execute("SELECT current_user AS u, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS s"
                      ).fetchone()
    writes = [r["relname"] for r in conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relkind IN ('r', 'p') AND c.relnamespace = 'public'::regnamespace"
        " AND NOT (c.relname = ANY(%s)) AND has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')"
        " ORDER BY c.relname", (list(roles.PAGES_WRITE_TABLES),))]
    reads = conn.execute("SELECT has_table_privilege('service_state', 'SELECT') AS r").fetchone()["r"]
    return {"user": me["u"], "superuser": bool(me["s"]), "writes": writes, "reads": bool(reads)}


# ---------------------------------------------------------------------------------------------- Airflow


@dataclass(frozen=True)
class AirflowFacts:
    """What Airflow's metadata database says of the radar."""

    pool_slots: int | None  # None: no pool radar_llm
    dag_known: bool
    paused: bool = False
    stale: bool = False
    import_error: str | None = None  # the first line of the DAG file's import error, when it has one


def read_airflow() -> AirflowFacts:
    """Ask Airflow's own metadata database (read only) about the pool, the DAG and its file's import errors."""
    from airflow.models.dag import DagModel
    from airflow.models.errors import ParseImportError
    from airflow.models.pool import Pool
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        pool = session.scalar(select(Pool).where(Pool.pool == POOL))
        dag = session.get(DagModel, DAG_ID)
        error = session.scalar(select(ParseImportError).where(ParseImportError.filename.like(f"%{DAG_FILE}")))
        return AirflowFacts(
            pool_slots=pool.slots if pool is not None else None, dag_known=dag is not None,
            paused=bool(dag and dag.is_paused), stale=bool(dag and dag.is_stale),
            import_error=(error.stacktrace or "import error").strip().splitlines()[-1][:300] if error else None)


def parses_here() -> str | None:
    """Parse the DAG file in this process (nothing is written): its import error, or None."""
    from airflow.dag_processing.dagbag import DagBag

    with contextlib.redirect_stdout(io.StringIO()):  # its progress lines are not the check's
        bag = DagBag(dag_folder=str(db.REPO_ROOT / "dags"))
    if bag.import_errors:
        return str(next(iter(bag.import_errors.values()))).strip().splitlines()[-1][:300]
    return None if DAG_ID in bag.dags else f"the DAG file defines no DAG {DAG_ID}"


def airflow_lines(settings: Settings, options: Options, *, facts: Callable[[], AirflowFacts] = read_airflow,
                  parse: Callable[[], str | None] = parses_here) -> list[Line]:
    try:
        found = bounded(facts, options.timeout, "Airflow's metadata database")
    except Exception as exc:
        return [fail(AIRFLOW, "metadata database", f"not reachable ({reason(exc)})",
                     "run the check where Airflow runs (docker compose run --rm airflow-cli …), or start its database; "
                     "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN must be that of the deployment")]
    return [_pool_line(found, settings), _dag_line(found, settings, options, parse)]


def _pool_line(found: AirflowFacts, settings: Settings) -> Line:
    make = f"airflow pools set {POOL} {settings.analysis_tasks} 'Opportunity Radar: analysis tasks at once'"
    if found.pool_slots is None:
        return fail(AIRFLOW, f"pool {POOL}", "missing: the analysis tasks would wait forever", f"run {make}")
    if found.pool_slots != settings.analysis_tasks:
        return warn(AIRFLOW, f"pool {POOL}", f"{found.pool_slots} slots, analysis_tasks is {settings.analysis_tasks}",
                    f"run {make} (or change analysis_tasks)")
    return ok(AIRFLOW, f"pool {POOL}", f"{found.pool_slots} slots (analysis_tasks = {settings.analysis_tasks})")


def _dag_line(found: AirflowFacts, settings: Settings, options: Options, parse: Callable[[], str | None]) -> Line:
    name = f"DAG {DAG_ID}"
    if found.import_error:
        return fail(AIRFLOW, name, f"import error: {reason(Exception(found.import_error))}",
                    f"fix dags/{DAG_FILE} (airflow dags list-import-errors shows the whole trace)")
    if not found.dag_known:
        try:  # in this thread: Airflow bounds a parse itself (dagbag_import_timeout, a signal: main thread only)
            error = parse()
        except Exception as exc:
            error = reason(exc)
        if error:
            return fail(AIRFLOW, name, f"does not parse here: {reason(Exception(error))}", f"fix dags/{DAG_FILE}")
        text = "parses without import errors; Airflow has not registered it yet"
        if settings.demo_mode:
            return ok(AIRFLOW, name, text + " (demo: make run or make ui registers it)")
        return warn(AIRFLOW, name, text, "start the dag-processor (docker compose up) or run airflow dags reserialize")
    if found.stale:
        return warn(AIRFLOW, name, "registered, but stale (its file was not seen at the last parse)",
                    "check the DAG bundle's folder (AIRFLOW__CORE__DAGS_FOLDER) and the dag-processor")
    if found.paused:
        text = "parsed without import errors, paused"
        if settings.demo_mode:
            return ok(AIRFLOW, name, text + " (demo: unpause it in make ui to run the slots on schedule)")
        return warn(AIRFLOW, name, text + ": no slot runs on schedule", f"airflow dags unpause {DAG_ID}")
    return ok(AIRFLOW, name, "parsed without import errors, not paused")
