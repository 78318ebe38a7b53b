"""Command line for set-up and operations:
``python -m include.radar.cli {db-url,migrate,airflow-db-url,provision,grant-pages,backup,restore,check,exec,mcp}``, and
the shadow evaluations' ``evaluate`` / ``evaluation`` (evaluation/commands.py). ``--env-file`` (before the command, once
per file) reads the one-host deployment's environment files as its systemd units do. Every command that reaches the radar
database reaches the one the tasks use: the settings' ``db_conn_id`` through the one loader (loader.py)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

import psycopg

from include.radar import store
from include.radar.core import db, loader, settings
from include.radar.evaluation import commands, shadow
from include.radar.operations import backup, env_file, roles


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="radar", description=__doc__)
    parser.add_argument("--env-file", action="append", default=[], type=Path, metavar="FILE",
                        help="read FILE's variables as a systemd EnvironmentFile= does (values taken literally: "
                        "JSON needs no quoting), before the command; once per file, a later file wins; - is the "
                        "standard input (what a user who may not read the files is given through a pipe)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("db-url", help="print the radar database URL, starting the embedded PostgreSQL if needed")
    sub.add_parser("migrate", help="apply the schema migrations not applied yet")
    sub.add_parser("airflow-db-url", help="create (if missing) a database for Airflow's metadata on the radar's "
                   "PostgreSQL server and print its SQLAlchemy URL")
    sub.add_parser("provision", help="as the PostgreSQL superuser (RADAR_ADMIN_DATABASE_URL): create or repair the "
                   "logins and databases of RADAR_DATABASE_URL, RADAR_PAGES_DATABASE_URL and Airflow's metadata "
                   "(docker compose's airflow-init)")
    sub.add_parser("grant-pages", help="as the radar's owner, after migrate: what the pages' login "
                   "(RADAR_PAGES_DATABASE_URL) may read and write")
    dump = sub.add_parser("backup", help="dump the radar database (pg_dump -Fc) with a manifest beside it")
    dump.add_argument("--out", help="the dump file, or a directory for a dated name (default: a dated name here)")
    load = sub.add_parser("restore", help="restore a backup into an empty database, check its row counts, migrate it")
    load.add_argument("file", help="the dump written by `backup` (its manifest beside it)")
    load.add_argument("--into", help="the target database URL (default: the radar database)")
    load.add_argument("--replace", action="store_true", help="replace the tables of a non-empty target (one transaction)")
    check = sub.add_parser("check", help="will this deployment work? tries each setting and connection with a real, "
                           "cheap call, one line each (✓ / ! / ✗); exits 1 when a check fails")
    check.add_argument("--send-test", action="store_true", help="send one test message to each push channel")
    check.add_argument("--llm-call", action="store_true", help="make one small paid DeepSeek call")
    check.add_argument("--timeout", type=float, default=10.0, help="seconds each call may take (default 10)")
    run = sub.add_parser("exec", help="run a command (e.g. /opt/radar/venv/bin/airflow dags test …) with the "
                         "--env-file variables, as the units give them to the services")
    run.add_argument("argv", nargs=argparse.REMAINDER, help="the command and its arguments")
    mcp = sub.add_parser("mcp", help="the read-only MCP server over the radar for an AI assistant (docs/mcp.md): "
                         "stdio, the client's token in RADAR_MCP_TOKEN; --http for streamable HTTP")
    mcp.add_argument("--http", action="store_true", help="streamable HTTP (a bearer token per request) instead of stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="with --http: the address to listen on (default 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=8765, help="with --http: the port (default 8765)")
    commands.add_parsers(sub)
    return parser


def _check(args: argparse.Namespace) -> int:
    from include.radar.check import Options
    from include.radar.check.run import main as check

    # the system's clock, as the loader gives it; not through loader.load(), which would raise for a missing
    # database or a refused setting that check reports as its own lines
    return check(Options(timeout=args.timeout, send_test=args.send_test, llm_call=args.llm_call))


def _database_url() -> str:
    """The tasks' database: ``RADAR_DATABASE_URL``, else the connection the settings' ``db_conn_id`` names."""
    return loader.load().database_url


def _migrate(args: argparse.Namespace) -> int:
    url = _database_url()
    applied = db.migrate(url)
    print(f"radar schema at {db.redact(url)}: " + (f"applied {', '.join(applied)}" if applied else "up to date"))
    with db.connect(url) as conn:  # articles stored before search existed get their lexemes once
        indexed = store.searching.index_missing(conn)
    if indexed:
        print(f"search: indexed {indexed} articles stored before search existed")
    return 0


def _provision(args: argparse.Namespace) -> int:
    # Airflow's own setting: the metadata login provision repairs, when this process is given it
    metadata = os.environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN") or None
    for line in roles.provision(_required("RADAR_ADMIN_DATABASE_URL"), _required("RADAR_DATABASE_URL"),
                                settings.deployment("RADAR_PAGES_DATABASE_URL"), metadata):
        print(line)
    return 0


def _grant_pages(args: argparse.Namespace) -> int:
    pages = settings.deployment("RADAR_PAGES_DATABASE_URL")
    if not pages:
        print("RADAR_PAGES_DATABASE_URL is not set: the pages use the radar's own login")
        return 0
    for line in roles.grant_pages(_database_url(), pages):
        print(line)
    return 0


def _exec(args: argparse.Namespace) -> int:
    if not args.argv:
        raise roles.ProvisionError("exec: name the command to run")
    os.execvp(args.argv[0], args.argv)  # replaces this process: the command's exit status is the caller's


def _mcp(args: argparse.Namespace) -> int:
    from include.radar.web import mcp_server  # the SDK and the pages' views: only for this command

    try:
        return mcp_server.main(args.http, args.host, args.port)
    except mcp_server.TokenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _printed(value: str) -> int:
    print(value)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "db-url": lambda args: _printed(_database_url()),
    "airflow-db-url": lambda args: _printed(db.airflow_metadata_url(
        _database_url(), settings.deployment("RADAR_AIRFLOW_DB_NAME") or "airflow")),
    "migrate": _migrate,
    "provision": _provision,
    "grant-pages": _grant_pages,
    "exec": _exec,
    "mcp": _mcp,
    "backup": lambda args: backup.run_backup(_database_url(), args.out),
    "restore": lambda args: backup.run_restore(args.file, args.into or _database_url(), replace=args.replace),
    **{name: commands.handle for name in commands.COMMANDS},
}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        for path in args.env_file:
            # the open pipe itself: /dev/stdin would open it anew, which its owner's mode refuses to another user
            given = env_file.parse(sys.stdin.read(), "standard input") if str(path) == "-" else env_file.read(path)
            os.environ.update(given)
    except (OSError, env_file.EnvFileError) as exc:
        print(f"error: --env-file: {exc}", file=sys.stderr)
        return 2
    if args.command == "exec":  # the command it runs reads Airflow its own way
        return _run(args)
    with settings.airflow_server_context():  # connections and Variables kept in Airflow's metadata database too
        if args.command == "check":
            return _check(args)  # its transcript is its output: no logging set up
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        return COMMANDS[args.command](args) or 0
    except (db.DatabaseUnavailable, roles.ProvisionError, backup.BackupError, shadow.EvaluationError,
            settings.SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except psycopg.Error as exc:  # provisioning connects by itself; a URL's password is never printed
        print(f"error: {type(exc).__name__}: {db.redact(str(exc))}", file=sys.stderr)
        return 2


def _required(name: str) -> str:
    value = settings.deployment(name)
    if not value:
        raise roles.ProvisionError(f"{name} is not set")
    return value


if __name__ == "__main__":
    sys.exit(main())
