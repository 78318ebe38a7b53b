"""The database roles of a deployment: which login may do what, on which database.

One PostgreSQL holds Airflow's metadata and the radar's data; its superuser is used by airflow-init alone to
keep three logins in shape: the radar's owner (``RADAR_DATABASE_URL``: owns the schema, runs the migrations,
what the tasks connect as); the pages' login (``RADAR_PAGES_DATABASE_URL``, the api-server: reads every radar
table, writes only the reader's profile and feedback; privileges are the boundary, since ``READ ONLY`` on an
owner's session can be undone); and Airflow's. Idempotent: a fresh volume gets roles and databases, an older
one has its objects handed to their owners, a changed password is applied. ``make run`` and the tests keep
one login and never call this.
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Iterable
from dataclasses import dataclass

import psycopg
from psycopg import sql

from include.radar import store

# what init refuses as a password: empty, Airflow's and PostgreSQL's well-known defaults
KNOWN_DEFAULTS = frozenset({"airflow", "postgres", "password", "radar"})
GENERATE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
# the pages write the reader's own tables, nothing else
PAGES_WRITE_TABLES = ("reader_profile", "feedback", "feed_token")
_RELATION_KIND = {"r": "TABLE", "p": "TABLE", "v": "VIEW", "m": "MATERIALIZED VIEW", "f": "FOREIGN TABLE",
                  "c": "TYPE", "S": "SEQUENCE"}


class ProvisionError(RuntimeError):
    """A role or database cannot be set up as configured; the message says which variable to change."""


@dataclass(frozen=True)
class Login:
    """A login on a PostgreSQL server, read from a libpq URL or a SQLAlchemy one (``postgresql+psycopg2://``)."""

    user: str
    password: str | None
    host: str
    port: int
    dbname: str
    variable: str  # where it came from, for messages

    @classmethod
    def of(cls, url: str, variable: str, *, libpq_defaults: bool = False) -> Login:
        """With ``libpq_defaults`` (the superuser's URL, which is only connected with), a missing user, database or
        host is what libpq takes: ``PGUSER`` or the OS user, ``PGDATABASE`` or the user, ``PGHOST`` or the local
        socket (host ``""``). The logins provision creates must name their user and database."""
        plain = _libpq(url)
        try:
            info = psycopg.conninfo.conninfo_to_dict(plain)
        except psycopg.ProgrammingError as exc:
            raise ProvisionError(f"{variable} is not a PostgreSQL URL") from exc
        user, dbname, host = info.get("user"), info.get("dbname"), info.get("host")
        if libpq_defaults:
            user = user or os.environ.get("PGUSER") or pwd.getpwuid(os.geteuid()).pw_name
            dbname = dbname or os.environ.get("PGDATABASE") or user
            host = host or os.environ.get("PGHOST") or ""
        if not user or not dbname:
            raise ProvisionError(f"{variable} must name a user and a database")
        return cls(user=str(user), password=info.get("password") or None,
                   host=str("localhost" if host is None else host), port=int(info.get("port") or 5432),
                   dbname=str(dbname), variable=variable)

    @property
    def on_socket(self) -> bool:
        return self.host == "" or self.host.startswith(("/", "@"))

    def same_server(self, other: Login) -> bool:
        """The same address: what two URLs of one deployment share. Whether two addresses reach one server is
        asked of the servers themselves (``_same_server``)."""
        return (self.host, self.port) == (other.host, other.port)

    def where(self) -> str:
        return f"{self.host or 'the local socket'}:{self.port}"


def _libpq(url: str) -> str:
    """A SQLAlchemy URL (``postgresql+psycopg2://``) as the libpq URL it wraps."""
    return re.sub(r"^postgres(?:ql)?\+[a-z0-9_]+://", "postgresql://", url.strip())


# the .env line that makes each URL in docker compose (the messages name it beside the URL's own variable)
COMPOSE_SECRET = {"RADAR_ADMIN_DATABASE_URL": "POSTGRES_PASSWORD", "RADAR_DATABASE_URL": "RADAR_DB_PASSWORD",
                  "RADAR_PAGES_DATABASE_URL": "RADAR_PAGES_DB_PASSWORD",
                  "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "AIRFLOW_DB_PASSWORD"}


def check_password(login: Login) -> None:
    """Refuse an empty or well-known password (or an example's ``<…>``), naming the variable to set and how to
    make one. A superuser reached through a local socket without one (peer authentication, as Debian's
    PostgreSQL sets it up) is let through: no password travels there."""
    password = login.password or ""
    if not password and login.variable == "RADAR_ADMIN_DATABASE_URL" and login.on_socket:
        return
    if not password:
        problem = "is empty"
    elif password.lower() in KNOWN_DEFAULTS or password == login.user:
        problem = "is a well-known default"
    elif password.startswith("<") and password.endswith(">"):  # an env file's example, not yet filled in
        problem = "is still the example's placeholder"
    else:
        return
    if login.variable == "RADAR_ADMIN_DATABASE_URL" and not password:  # the server's superuser, not one we make
        raise ProvisionError(
            f"the password of the database role {login.user!r} in {login.variable} (with docker compose: "
            f"{COMPOSE_SECRET[login.variable]} in .env) {problem}: give the superuser's password in the URL (with "
            f"docker compose, set {COMPOSE_SECRET[login.variable]} to a long random string, e.g. the output of "
            f"{GENERATE}); a server that asks for none is reached on its socket instead, as the operating-system user "
            "of that role (postgresql:///postgres?host=/var/run/postgresql)")
    raise ProvisionError(
        f"the password of the database role {login.user!r} in {login.variable} (with docker compose: "
        f"{COMPOSE_SECRET[login.variable]} in .env) {problem}: set it to a long random string (URL-safe characters, "
        f"it goes into database URLs), e.g. the output of {GENERATE}"
    )


# --------------------------------------------------------------------------------------- as the superuser


def ensure_login(admin: psycopg.Connection, login: Login) -> str:
    """Create the role ``login.user`` (LOGIN, no superuser, no CREATEDB/CREATEROLE) or bring it back to that,
    with the password of ``login``; returns what was done."""
    if login.user == _current_user(admin):
        raise ProvisionError(f"{login.variable} uses the superuser {login.user!r}: give it a role of its own")
    row = admin.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (login.user,)).fetchone()
    if row is not None and row[0]:
        raise ProvisionError(f"{login.variable}: the role {login.user!r} is a superuser; choose another role name")
    verb = "CREATE" if row is None else "ALTER"
    admin.execute(sql.SQL("{} ROLE {} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD {}").format(
        sql.SQL(verb), sql.Identifier(login.user), sql.Literal(login.password)))
    return f"role {login.user}: {'created' if row is None else 'up to date'}"


def ensure_database(admin: psycopg.Connection, name: str, owner: str) -> str:
    """The database ``name`` exists, belongs to ``owner`` and lets no other role connect by default."""
    row = admin.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", (name,)).fetchone()
    if row is None:
        admin.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(owner)))
        done = "created"
    elif row[0] != owner:
        admin.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(name), sql.Identifier(owner)))
        done = f"handed over from {row[0]}"
    else:
        done = "exists"
    admin.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(name)))
    return f"database {name} (owner {owner}): {done}"


def hand_over(conn: psycopg.Connection, old: str, new: str) -> int:
    """Give ``new`` every object ``old`` owns in this database's own schemas (not the system's, not an
    extension's members): what a volume made before the roles existed, when the superuser owned it all.
    Returns how many objects changed owner."""
    done = 0
    target = sql.Identifier(new)
    outside = "n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND n.nspname NOT LIKE 'pg_temp%%'"
    not_extension = "NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = {oid} AND d.deptype = 'e')"
    for (schema,) in conn.execute(
            f"SELECT n.nspname FROM pg_namespace n WHERE pg_get_userbyid(n.nspowner) = %s AND {outside}"
            f" AND {not_extension.format(oid='n.oid')}", (old,)).fetchall():
        conn.execute(sql.SQL("ALTER SCHEMA {} OWNER TO {}").format(sql.Identifier(schema), target))
        done += 1
    # tables first: a table takes its indexes and the sequences of its serial columns along
    for kinds in (("r", "p", "v", "m", "f", "c"), ("S",)):
        for schema, name, kind in conn.execute(
                "SELECT n.nspname, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                f" WHERE pg_get_userbyid(c.relowner) = %s AND c.relkind = ANY(%s) AND {outside}"
                f" AND {not_extension.format(oid='c.oid')} ORDER BY c.oid", (old, list(kinds))).fetchall():
            conn.execute(sql.SQL("ALTER {} {} OWNER TO {}").format(
                sql.SQL(_RELATION_KIND[kind]), sql.Identifier(schema, name), target))
            done += 1
    # enums, domains and ranges (a range takes its multirange along; composite types were relations above)
    for schema, name, kind in conn.execute(
            "SELECT n.nspname, t.typname, t.typtype FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
            f" WHERE pg_get_userbyid(t.typowner) = %s AND t.typtype IN ('e', 'd', 'r')"
            f" AND {outside} AND {not_extension.format(oid='t.oid')}", (old,)).fetchall():
        conn.execute(sql.SQL("ALTER {} {} OWNER TO {}").format(
            sql.SQL("DOMAIN" if kind == "d" else "TYPE"), sql.Identifier(schema, name), target))
        done += 1
    for (signature,) in conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            f" WHERE pg_get_userbyid(p.proowner) = %s AND {outside} AND {not_extension.format(oid='p.oid')}",
            (old,)).fetchall():
        conn.execute(sql.SQL("ALTER ROUTINE {} OWNER TO {}").format(sql.SQL(signature), target))
        done += 1
    return done


def provision(admin_url: str, owner_url: str, pages_url: str | None = None,
              metadata_url: str | None = None) -> list[str]:
    """Set up the logins and databases of the URLs that live on the superuser's server (``admin_url``):
    check their passwords, create or repair the roles, the databases and their ownership. A URL on another
    server is its operator's to set up; the pages' URL must name the radar's database. One server reached two
    ways (the superuser on the socket, the others on 127.0.0.1) is one server: the servers are asked who they
    are (``_same_server``), the URLs are not compared as strings. Returns what was done."""
    admin_login = Login.of(admin_url, "RADAR_ADMIN_DATABASE_URL", libpq_defaults=True)
    owner = Login.of(owner_url, "RADAR_DATABASE_URL")
    pages = Login.of(pages_url, "RADAR_PAGES_DATABASE_URL") if pages_url else None
    metadata = Login.of(metadata_url, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN") if metadata_url else None
    if pages is not None and (not pages.same_server(owner) or pages.dbname != owner.dbname):
        raise ProvisionError("RADAR_PAGES_DATABASE_URL names another database than RADAR_DATABASE_URL: with the radar "
                             "on another server, set both to it (the pages' login and the owner's)")
    if pages is not None and pages.user == owner.user:
        raise ProvisionError("RADAR_PAGES_DATABASE_URL logs in as the radar's owner: give the pages a role of their own")
    if metadata is not None and metadata.same_server(owner) and metadata.dbname == owner.dbname:
        raise ProvisionError("the radar's database and Airflow's metadata database must differ (RADAR_DB_NAME)")
    check_password(admin_login)
    logins = [login for login in (metadata, owner, pages) if login is not None]
    for login in logins:
        if login.same_server(admin_login):  # refused before any connection
            check_password(login)
    done: list[str] = []
    with psycopg.connect(_libpq(admin_url), autocommit=True, connect_timeout=10) as admin:
        superuser = _current_user(admin)
        local = [login for login in logins if _same_server(admin, admin_url, login)]
        for login in local:
            check_password(login)
        for login in local:
            done.append(ensure_login(admin, login))
        for login in (metadata, owner):
            if login is None or login not in local:
                continue
            done.append(ensure_database(admin, login.dbname, login.user))
            into = psycopg.conninfo.make_conninfo(_libpq(admin_url), dbname=login.dbname)
            with psycopg.connect(into, autocommit=True, connect_timeout=10) as conn:
                moved = hand_over(conn, superuser, login.user)
            if moved:
                done.append(f"database {login.dbname}: {moved} objects handed over from {superuser} to {login.user}")
        if pages is not None and pages in local:
            admin.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(pages.dbname), sql.Identifier(pages.user)))
        if owner not in local:
            done.append(f"the radar database is on {owner.where()}, another server than the one "
                        f"RADAR_ADMIN_DATABASE_URL reaches ({_identity_text(admin)}): its roles are set up there "
                        "(docs/deployment.md, Database logins), or point RADAR_ADMIN_DATABASE_URL at that server")
    return done


_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def _identity(conn: psycopg.Connection) -> tuple[int, int]:
    """What tells one PostgreSQL server from another: its cluster's system identifier (made by initdb) and
    its port (two copies of one cluster on one host differ there). Any login may ask."""
    row = conn.execute("SELECT (SELECT system_identifier FROM pg_control_system()), current_setting('port')::int"
                       ).fetchone()
    return int(row[0]), int(row[1])


def _identity_text(conn: psycopg.Connection) -> str:
    system, port = _identity(conn)
    return f"system identifier {system}, port {port}"


def _same_server(admin: psycopg.Connection, admin_url: str, login: Login) -> bool:
    """Does ``login``'s address reach the superuser's server? The same address does. Otherwise the server at
    that address is asked who it is, as the login itself (a second run) or as the superuser (trust, or a
    password that holds there too); a server that lets neither in is the superuser's when the superuser is
    local and its server listens on that loopback address or socket directory at that port: nothing else can
    hold that address."""
    admin_login = Login.of(admin_url, "RADAR_ADMIN_DATABASE_URL", libpq_defaults=True)
    if login.same_server(admin_login):
        return True
    address = {"host": login.host, "port": login.port, "connect_timeout": 5}
    for user, password in ((login.user, login.password), (admin_login.user, admin_login.password)):
        try:
            with psycopg.connect(dbname=admin_login.dbname if user == admin_login.user else login.dbname,
                                 user=user, password=password, autocommit=True, **address) as there:
                return _identity(there) == _identity(admin)
        except psycopg.Error:
            continue
    if not (admin_login.on_socket or admin_login.host in _LOOPBACK):
        return False
    listens, port, sockets = admin.execute(
        "SELECT current_setting('listen_addresses'), current_setting('port')::int,"
        " current_setting('unix_socket_directories')").fetchone()
    if login.port != port:
        return False
    if login.on_socket:
        return login.host in [d.strip() for d in sockets.split(",")]
    return login.host in _LOOPBACK and bool({a.strip() for a in listens.split(",")} & {"*", "0.0.0.0", "::", *_LOOPBACK})


# ------------------------------------------------------------------------------------------- as the owner


def grant_pages(owner_url: str, pages_url: str) -> list[str]:
    """As the radar's owner, after the migrations: the pages' login may read every table (those of later
    migrations too) and write the reader's own data only. Idempotent, and it narrows: any other write
    privilege the login holds on the radar's tables is revoked. It also makes what the pages would otherwise
    have to write for themselves: the profile form's key (service_state ``web:form_key``)."""
    owner = Login.of(owner_url, "RADAR_DATABASE_URL")
    pages = Login.of(pages_url, "RADAR_PAGES_DATABASE_URL")
    if pages.user == owner.user:
        return [f"the pages log in as the owner {owner.user!r}: nothing to grant"]
    # a GRANT waits for the tasks' transactions on its tables, never for ever
    with psycopg.connect(owner_url, autocommit=False, connect_timeout=10, options="-c lock_timeout=60000") as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY 1").fetchall()]
        missing = sorted(set(PAGES_WRITE_TABLES) - set(tables))
        if missing:
            raise ProvisionError(f"the radar schema lacks {missing}: run `python -m include.radar.cli migrate` first")
        for statement in _pages_grants(pages.user, pages.dbname, tables):
            conn.execute(statement)
        # the profile form's key (without a link_secret, web/csrf.py): made here, as the owner, the pages read it
        store.state.make_form_key(conn)
        conn.commit()
    return [f"role {pages.user}: reads {len(tables)} tables, writes {', '.join(PAGES_WRITE_TABLES)}; "
            f"the profile form's key is in service_state"]


def _pages_grants(user: str, dbname: str, tables: Iterable[str]) -> list[sql.Composable]:
    who = sql.Identifier(user)
    every = sql.SQL(", ").join(sql.Identifier(t) for t in tables)
    writes = sql.SQL(", ").join(sql.Identifier(t) for t in PAGES_WRITE_TABLES)
    return [
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(dbname), who),
        sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(who),
        # revoking a table's privileges revokes its columns' too: what was granted before is gone
        sql.SQL("REVOKE ALL ON {} FROM {}").format(every, who),
        sql.SQL("GRANT SELECT ON {} TO {}").format(every, who),
        sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {}").format(who),
        sql.SQL("GRANT INSERT, UPDATE ON {} TO {}").format(writes, who),
    ]


def _current_user(conn: psycopg.Connection) -> str:
    return str(conn.execute("SELECT current_user").fetchone()[0])
