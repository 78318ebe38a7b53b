"""The database roles of a docker compose deployment (include/radar/operations/roles.py), on the real local PostgreSQL.

Each test makes its own logins and databases (names with a random suffix: roles belong to the whole server,
which other sessions share) and drops them at the end. The boundary under test: the pages' login reads every
radar table and writes only the reader's own data, where ``SET TRANSACTION READ ONLY`` on the owner's login
is undone by the first ``COMMIT`` an injected statement sends.
"""

from __future__ import annotations

import re
import secrets
from datetime import timedelta

import psycopg
import pytest
from psycopg import errors, sql

from include.radar import store
from include.radar.core import db
from include.radar.core.clock import SYSTEM
from include.radar.core.settings import load_settings
from include.radar.operations import roles
from tests.conftest import _server_url, _with_database, login_url, set_up_deployment
from tests.slotrun import answer, article, read_page, run_slot, shanghai

SLOT = shanghai(2026, 1, 8, 14)


def _refused(url: str, statement: str, *args: object) -> None:
    """``statement`` fails on a fresh transaction of ``url`` for lack of privilege (or row security)."""
    with pytest.raises((errors.InsufficientPrivilege, errors.CheckViolation)), db.connect(url) as conn:
        conn.execute(statement, args or None)


def _pages_resources():

    from include.radar.web.resources import AppResources

    return AppResources(lambda: load_settings(use_airflow=False), None, SYSTEM)


# ------------------------------------------------------------------------------------------- the boundary


def test_the_pages_login_reads_everything_and_writes_only_the_readers_own_data(deployment, fakes, monkeypatch):
    d = deployment
    set_up_deployment(d)
    # the tasks run as the owner, no superuser: a whole slot, analyses and a push included
    monkeypatch.setenv("RADAR_DATABASE_URL", d.owner)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(n, SLOT - timedelta(hours=n)) for n in (1, 2)]
    fakes.at(SLOT)
    fakes.deepseek.responder = lambda body: answer(70)
    ran = run_slot(SLOT)
    assert ran["errors"] == {} and ran["closed"]["status"] == "success"
    with db.connect(d.owner) as conn:
        [analysis] = conn.execute("SELECT id FROM analysis_result ORDER BY id LIMIT 1").fetchall()

    # the api-server's pages resolve their own login
    monkeypatch.setenv("RADAR_PAGES_DATABASE_URL", d.pages)
    resources = _pages_resources()
    with resources.connect() as conn:
        assert conn.execute("SELECT current_user AS u").fetchone()["u"] == d.users[1]
        tables = [r["relname"] for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'").fetchall()]
        for table in tables:  # every radar table is readable
            conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
    assert {"slot_run", "content_item", "analysis_result", "feedback", "reader_profile"} <= set(tables)
    # but not the WeRSS login token the tasks cache in service_state (row security, migration 0015)
    with db.connect(d.owner) as conn:
        keys = [r["key"] for r in conn.execute("SELECT key FROM service_state").fetchall()]
    assert any(k.startswith("werss:token:") for k in keys) and "werss:status" in keys
    with resources.connect() as conn:
        seen = [r["key"] for r in conn.execute("SELECT key FROM service_state").fetchall()]
    assert "werss:status" in seen and "web:form_key" in seen
    assert not any(k.startswith("werss:token:") for k in seen)

    # READ ONLY is undone by the first COMMIT of an injected statement: on the owner's login the write lands,
    # on the pages' login the privileges refuse it
    injected = "COMMIT; UPDATE slot_run SET status = 2"
    with db.connect(d.owner) as conn:
        conn.execute("SET TRANSACTION READ ONLY")
        conn.execute(injected)
    with db.connect(d.owner) as conn:
        assert conn.execute("SELECT status FROM slot_run").fetchone()["status"] == 2
        conn.execute("UPDATE slot_run SET status = 1")
    with pytest.raises(errors.InsufficientPrivilege), resources.connect() as conn:
        conn.execute(injected)
    with resources.connect_write() as conn:
        for refused in ("UPDATE analysis_result SET score = 100", "DELETE FROM feedback",
                        "TRUNCATE notification_log", "UPDATE content_item SET title = 'x'",
                        "UPDATE content_item SET analyzed_status = 0"):
            with pytest.raises(errors.InsufficientPrivilege), conn.transaction():
                conn.execute(refused)

    # what the pages do write: a vote and the profile
    with resources.connect_write() as conn:
        assert store.focus.set_feedback(conn, analysis["id"], "up", "link") == "recorded"
        store.focus.save_profile(conn, {"companies": ["宁德时代"], "tickers": [], "sectors": [], "interests": [],
                                  "rules": []}, "reader")
    with db.connect(d.owner) as conn:
        assert conn.execute("SELECT verdict FROM feedback").fetchone()["verdict"] == "up"
        assert conn.execute("SELECT companies FROM reader_profile").fetchone()["companies"] == ["宁德时代"]
    _refused(d.pages, "CREATE TABLE pages_own (id int)")

    # the pages themselves, read through the web app with the pages' login
    monkeypatch.setenv("RADAR_DATABASE_URL", d.pages)  # read_page builds its app on db.database_url()
    day = SLOT.date().isoformat()
    for path in ("/", f"/daily/{day}", f"/analysis/{analysis['id']}", "/search?q=储能", "/profile"):
        assert "<html" in read_page(path, SLOT + timedelta(hours=1))


def test_init_is_idempotent_and_applies_a_changed_password(deployment):
    d = deployment
    set_up_deployment(d)
    again = roles.provision(d.admin, d.owner, d.pages, d.metadata)
    assert not any("handed over" in line or "created" in line for line in again), again
    roles.grant_pages(d.owner, d.pages)  # a second time: the same privileges, no error
    changed = login_url(_server_url(), d.users[1], secrets.token_urlsafe(16), d.radar_db)
    with psycopg.connect(d.admin) as admin:
        before = admin.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (d.users[1],)).fetchone()[0]
    roles.provision(d.admin, d.owner, changed, d.metadata)
    with psycopg.connect(d.admin) as admin:
        after = admin.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (d.users[1],)).fetchone()[0]
        flags = admin.execute("SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = ANY(%s)",
                              (list(d.users),)).fetchall()
    assert before and after and before != after
    assert flags and all(not any(row) for row in flags)
    # of the deployment's two databases, each login connects to its own only
    owner, pages, meta = d.users
    for user, dbname in ((pages, d.metadata_db), (owner, d.metadata_db), (meta, d.radar_db)):
        with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
            psycopg.connect(login_url(_server_url(), user, "x", dbname)).close()


def test_an_old_volume_is_handed_over_from_the_superuser_to_its_owners(deployment, tmp_path):
    """Before the roles, the superuser owned both databases and everything in them: init hands them over,
    and the owner can then change its schema (what a later migration does)."""
    d = deployment
    with psycopg.connect(d.admin, autocommit=True) as admin:
        for name in (d.radar_db, d.metadata_db):
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    as_superuser = _with_database(_server_url(), d.radar_db)
    db.migrate(as_superuser)
    with psycopg.connect(_with_database(_server_url(), d.metadata_db), autocommit=True) as meta:
        meta.execute("CREATE TYPE run_state AS ENUM ('queued', 'running')")
        meta.execute("CREATE DOMAIN positive AS integer CHECK (VALUE > 0)")
        meta.execute("CREATE TYPE pair AS (a integer, b integer)")
        meta.execute("CREATE SEQUENCE loose_seq")
        meta.execute("CREATE TABLE dag_run (id serial PRIMARY KEY, state run_state, tries positive)")
        meta.execute("CREATE TABLE task (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run int REFERENCES dag_run)")
        meta.execute("CREATE VIEW running AS SELECT id FROM dag_run WHERE state = 'running'")
        meta.execute("CREATE MATERIALIZED VIEW run_count AS SELECT count(*) FROM dag_run")
        meta.execute("CREATE FUNCTION next_try(integer) RETURNS integer LANGUAGE sql AS 'SELECT $1 + 1'")

    done = roles.provision(d.admin, d.owner, d.pages, d.metadata)
    assert any(f"database {d.radar_db}: " in line and "handed over" in line for line in done), done
    owner, _, meta_user = d.users
    for dbname, user in ((d.radar_db, owner), (d.metadata_db, meta_user)):
        with psycopg.connect(_with_database(_server_url(), dbname)) as conn:
            left = conn.execute(
                "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace"
                " AND pg_get_userbyid(c.relowner) <> %s UNION ALL"
                " SELECT t.typname FROM pg_type t WHERE t.typnamespace = 'public'::regnamespace AND t.typarray <> 0"
                " AND pg_get_userbyid(t.typowner) <> %s UNION ALL"
                " SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace"
                " AND pg_get_userbyid(p.proowner) <> %s UNION ALL"
                " SELECT datname FROM pg_database WHERE datname = current_database()"
                " AND pg_get_userbyid(datdba) <> %s", (user, user, user, user)).fetchall()
            assert left == [], f"{dbname}: still owned by another role: {left}"
    # the owner evolves its schema, and the pages get what they need of the new table
    later = tmp_path / "migrations"
    later.mkdir()
    for path in db.migration_files():
        (later / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    (later / "9999_later.sql").write_text("ALTER TABLE slot_run ADD COLUMN later text;\n"
                                          "CREATE TABLE later_table (id bigserial PRIMARY KEY);\n", encoding="utf-8")
    assert db.migrate(d.owner, later) == ["9999_later.sql"]
    roles.grant_pages(d.owner, d.pages)
    with db.connect(d.pages) as conn:
        assert conn.execute("SELECT count(*) AS n FROM later_table").fetchone()["n"] == 0
    _refused(d.pages, "INSERT INTO later_table DEFAULT VALUES")


# ---------------------------------------------------------------------------------------------- refusals


def _login(user: str, password: str, dbname: str = "radar") -> str:
    return f"postgresql://{user}:{password}@127.0.0.1:1/{dbname}"


@pytest.mark.hostile
# "<RADAR_DB_PASSWORD>": an env file of the one-host guide (deploy/systemd/*.env.example) not filled in yet
@pytest.mark.parametrize("password", ["", "airflow", "AIRFLOW", "postgres", "radar", "<RADAR_DB_PASSWORD>"])
def test_init_refuses_an_empty_or_default_password_before_it_connects(password):
    """Port 1 has no server: a refusal that came after a connection attempt would be an OperationalError."""
    strong = secrets.token_urlsafe(16)
    cases = {
        "POSTGRES_PASSWORD": (_login("airflow", password, "postgres"), _login("radar", strong), None),
        "RADAR_DB_PASSWORD": (_login("airflow", strong, "postgres"), _login("radar", password), None),
        "RADAR_PAGES_DB_PASSWORD": (_login("airflow", strong, "postgres"), _login("radar", strong),
                                    _login("radar_pages", password)),
    }
    for variable, (admin, owner, pages) in cases.items():
        with pytest.raises(roles.ProvisionError) as refused:
            roles.provision(admin, owner, pages)
        message = str(refused.value)
        assert variable in message and ".env" in message and "secrets.token_urlsafe" in message, message


@pytest.mark.hostile
def test_init_refuses_logins_that_would_undo_the_boundary(deployment):
    strong = secrets.token_urlsafe(16)
    admin, owner = _login("airflow", strong, "postgres"), _login("radar", strong)
    for pages, says in ((_login("radar", strong), "role of their own"),
                        (_login("radar_pages", strong, "other"), "another database"),
                        ("postgresql://radar_pages:" + strong + "@elsewhere:5432/radar", "another database")):
        with pytest.raises(roles.ProvisionError, match=says):
            roles.provision(admin, owner, pages)
    with pytest.raises(roles.ProvisionError, match="must differ"):
        roles.provision(admin, owner, None, f"postgresql+psycopg2://airflow_meta:{strong}@127.0.0.1:1/radar")
    # a role of the deployment may not be the superuser itself (init would strip its own rights)
    superuser = psycopg.conninfo.conninfo_to_dict(deployment.admin).get("user") or "postgres"
    d = deployment
    with pytest.raises(roles.ProvisionError, match="superuser"):
        roles.provision(d.admin, login_url(_server_url(), superuser, strong, d.radar_db))


def test_the_cli_says_what_to_set_and_never_prints_a_password(monkeypatch, capsys):
    from include.radar import cli

    strong = secrets.token_urlsafe(16)
    monkeypatch.setenv("RADAR_ADMIN_DATABASE_URL", _login("airflow", "airflow", "postgres"))
    monkeypatch.setenv("RADAR_DATABASE_URL", _login("radar", strong))
    monkeypatch.delenv("RADAR_PAGES_DATABASE_URL", raising=False)
    monkeypatch.delenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", raising=False)
    assert cli.main(["provision"]) == 2
    assert "POSTGRES_PASSWORD" in capsys.readouterr().err
    monkeypatch.setenv("RADAR_ADMIN_DATABASE_URL", _login("airflow", strong, "postgres"))
    assert cli.main(["provision"]) == 2  # nothing listens on port 1
    out = capsys.readouterr()
    assert "error:" in out.err and strong not in out.err + out.out


def test_the_pages_fall_back_to_the_radars_login_without_a_url_of_their_own(monkeypatch):
    monkeypatch.setenv("RADAR_DATABASE_URL", "postgresql://radar@db.example:5432/radar")
    monkeypatch.delenv("RADAR_PAGES_DATABASE_URL", raising=False)
    assert db.pages_database_url() == "postgresql://radar@db.example:5432/radar"
    monkeypatch.setenv("RADAR_PAGES_DATABASE_URL", "postgresql://radar_pages@db.example:5432/radar")
    assert db.pages_database_url() == "postgresql://radar_pages@db.example:5432/radar"


# ----------------------------------------------------------------------------------- the profile form's key


def test_the_profile_form_works_on_the_pages_login_without_a_link_secret(deployment):
    """The default .env leaves AIRFLOW_VAR_RADAR_LINK_SECRET empty: the form's key is then the radar's own
    (service_state ``web:form_key``), made by init as the owner; the pages' login only reads it."""
    from fastapi.testclient import TestClient

    from tests.pages import FakeUser, make_settings
    from tests.test_trust_web import _editor_client, _hostile_form

    d = deployment
    set_up_deployment(d)
    client = _editor_client(d.pages, FakeUser(), settings=make_settings(link_secret=None))
    client = TestClient(client.app, raise_server_exceptions=False)
    page = client.get("/profile")
    assert page.status_code == 200, page.text[-2000:]
    token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    form = {**_hostile_form(token), "rules": "!直播", "interests": "储能"}
    saved = client.post("/profile", data=form, follow_redirects=False)
    assert saved.status_code == 303, saved.text[-2000:]
    with db.connect(d.owner) as conn:
        assert conn.execute("SELECT rules FROM reader_profile").fetchone()["rules"] == ["!直播"]
    _refused(d.pages, "INSERT INTO service_state (key, value) VALUES ('x', '1')")


def test_without_the_form_key_and_the_right_to_make_it_the_profile_says_so_never_500(deployment):
    """A radar database whose init has not run since (the key row deleted by hand, a restore without it):
    the pages' login cannot make the key; the profile is shown read-only with the reason, a save is a 503
    page that says what to run, and nothing else is affected."""
    from fastapi.testclient import TestClient

    from tests.pages import FakeUser, make_settings
    from tests.test_trust_web import _editor_client, _hostile_form

    d = deployment
    set_up_deployment(d)
    with db.connect(d.owner) as conn:
        conn.execute("DELETE FROM service_state WHERE key = 'web:form_key'")
    client = _editor_client(d.pages, FakeUser(), settings=make_settings(link_secret=None))
    client = TestClient(client.app, raise_server_exceptions=False)
    page = client.get("/profile")
    assert page.status_code == 200 and "只能查看" in page.text and "grant-pages" in page.text
    assert 'name="csrf"' not in page.text
    refused = client.post("/profile", data=_hostile_form("1.ab"), follow_redirects=False)
    assert refused.status_code == 503 and "grant-pages" in refused.text
    # init run again (grant-pages, as the owner) makes it, and the form works
    roles.grant_pages(d.owner, d.pages)
    again = _editor_client(d.pages, FakeUser(), settings=make_settings(link_secret=None))
    assert 'name="csrf"' in again.get("/profile").text


def test_a_refused_password_names_the_url_the_user_set_and_compose_s_line_beside_it():
    with pytest.raises(roles.ProvisionError) as refused:
        roles.check_password(roles.Login.of("postgresql://postgres@db.example:5432/postgres", "RADAR_ADMIN_DATABASE_URL"))
    assert str(refused.value).startswith("the password of the database role 'postgres' in RADAR_ADMIN_DATABASE_URL "
                                         "(with docker compose: POSTGRES_PASSWORD in .env) is empty")
    assert "give the superuser's password" in str(refused.value) and "host=/var/run/postgresql" in str(refused.value)
    assert "set it to a long random string" not in str(refused.value)  # outside compose, not ours to change


def test_a_superuser_on_the_local_socket_needs_no_password_a_role_over_tcp_does():
    """Debian's PostgreSQL: ``sudo -u postgres`` through the socket (peer authentication), no password at all."""
    roles.check_password(roles.Login.of("postgresql:///postgres?host=/var/run/postgresql&user=postgres",
                                        "RADAR_ADMIN_DATABASE_URL"))
    with pytest.raises(roles.ProvisionError, match="RADAR_DATABASE_URL"):
        roles.check_password(roles.Login.of("postgresql:///radar?host=/var/run/postgresql&user=radar",
                                            "RADAR_DATABASE_URL"))


def test_a_url_without_a_user_is_the_os_user_as_libpq_takes_it(monkeypatch):
    import os
    import pwd

    monkeypatch.delenv("PGUSER", raising=False)
    monkeypatch.delenv("PGDATABASE", raising=False)
    monkeypatch.delenv("PGHOST", raising=False)
    admin = roles.Login.of("postgresql:///postgres?host=/var/run/postgresql", "RADAR_ADMIN_DATABASE_URL",
                           libpq_defaults=True)
    assert (admin.user, admin.dbname, admin.host) == (pwd.getpwuid(os.geteuid()).pw_name, "postgres",
                                                      "/var/run/postgresql")
    bare = roles.Login.of("postgresql://", "RADAR_ADMIN_DATABASE_URL", libpq_defaults=True)
    assert bare.dbname == bare.user and bare.on_socket
    roles.check_password(bare)  # the local socket: no password travels
    with pytest.raises(roles.ProvisionError, match="must name a user and a database"):
        roles.Login.of("postgresql:///radar?host=127.0.0.1", "RADAR_DATABASE_URL")


def _socket_admin() -> str:
    """The superuser of the tests' server on its Unix socket, as ``sudo -u postgres`` reaches Debian's."""
    server = psycopg.conninfo.conninfo_to_dict(_server_url())
    host = str(server.get("host") or "")
    with psycopg.connect(_server_url(), autocommit=True) as conn:
        sockets, port = conn.execute("SELECT current_setting('unix_socket_directories'),"
                                     " current_setting('port')").fetchone()
    if host.startswith("/") or not sockets:
        pytest.skip("the tests' server is reached on its socket already, or has none")
    return psycopg.conninfo.make_conninfo(host=sockets.split(",")[0].strip(), port=port, dbname="postgres",
                                          user=server.get("user") or "postgres")


def test_the_superuser_on_the_socket_and_the_logins_on_tcp_are_one_server(deployment):
    """The guide's one-host provision: the superuser through /var/run/postgresql, the three logins on
    127.0.0.1. The servers are asked who they are: the roles and databases are created, a second run
    finds them."""
    d = deployment
    admin = _socket_admin()
    first = roles.provision(admin, d.owner, d.pages, d.metadata)
    assert f"role {d.users[0]}: created" in first and f"database {d.radar_db} (owner {d.users[0]}): created" in first
    assert not any("set up there" in line for line in first), first
    again = roles.provision(admin, d.owner, d.pages, d.metadata)
    assert f"database {d.radar_db} (owner {d.users[0]}): exists" in again, again


def test_a_server_that_is_not_the_superusers_is_named_with_what_to_change(deployment):
    d = deployment
    elsewhere = login_url("postgresql://127.0.0.1:1/x", d.users[0], secrets.token_urlsafe(16), d.radar_db)
    done = roles.provision(d.admin, elsewhere, None)
    assert done[-1].startswith("the radar database is on 127.0.0.1:1, another server than the one "
                               "RADAR_ADMIN_DATABASE_URL reaches (system identifier "), done
    assert "point RADAR_ADMIN_DATABASE_URL at that server" in done[-1]
