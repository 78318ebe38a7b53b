"""The radar's connections come from a pool per process: reused, bounded like a fresh one, replaced when they
break, never shared with a forked child, and a dead server still fails at once with its own reason.

Room: db.py.
"""

from __future__ import annotations

import os
import socket
import time

import psycopg
import pytest

from include.radar.core import db


def _own(db_url: str, name: str) -> str:
    """The tests' database under a pool of its own (the pools are keyed by URL): no test borrows a connection
    another test left in a shared pool, so each passes or fails alone and in any order."""
    return f"{db_url} application_name={name}"


def _backend(url: str, **bounds) -> int:
    with db.connect(url, **bounds) as conn:
        return conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]


def test_a_process_reuses_its_connection_across_transactions(db_url) -> None:
    url = _own(db_url, "reuse-test")  # a pool of its own
    assert _backend(url) == _backend(url) == _backend(url)
    assert _opened(url) == 1
    # other session bounds are another pool: a migration's unbounded session never lends its settings
    assert _backend(url, statement_timeout_s=None, lock_timeout_s=None) != _backend(url)


def test_a_pooled_connection_keeps_its_statement_and_lock_timeouts(db_url) -> None:
    url = _own(db_url, "timeouts-test")
    for _ in range(2):  # the first connection and the same one again
        with db.connect(url, statement_timeout_s=7, lock_timeout_s=3) as conn:
            shown = conn.execute("SELECT current_setting('statement_timeout') AS s, "
                                 "current_setting('lock_timeout') AS l").fetchone()
            assert (shown["s"], shown["l"]) == ("7s", "3s")
            conn.execute("SET LOCAL statement_timeout = '1s'")  # a page's own bound ends with its transaction
    with db.connect(url, statement_timeout_s=7, lock_timeout_s=3) as conn:
        assert conn.execute("SELECT current_setting('statement_timeout') AS s").fetchone()["s"] == "7s"


def test_an_error_rolls_back_and_the_connection_comes_back_clean(db_url, conn) -> None:
    url = _own(db_url, "rollback-test")
    with pytest.raises(RuntimeError), db.connect(url) as first:
        first.execute("INSERT INTO service_state (key, value) VALUES ('pool-test', '{}')")
        raise RuntimeError("the step failed")
    with db.connect(url) as again:
        assert again.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert again.execute("SELECT count(*) AS n FROM service_state WHERE key = 'pool-test'").fetchone()["n"] == 0


def test_a_connection_the_server_ended_is_replaced_not_lent(db_url) -> None:
    url = _own(db_url, "ended-test")  # one connection, the one the server ends: lent without the check, it fails
    killed = _backend(url)
    assert _backend(url) == killed and _opened(url) == 1
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (killed,))
    time.sleep(0.2)
    fresh = _backend(url)  # the pool's check finds the dead one and connects anew
    assert fresh != killed


def _opened(url: str) -> int:
    options = db.session_options(db.STATEMENT_TIMEOUT_S, db.LOCK_TIMEOUT_S)
    return db.pool(url, options).get_stats().get("connections_num", 0)


def test_a_forked_child_opens_its_own_connection(db_url) -> None:
    url = _own(db_url, "fork-test")  # a pool of its own, with one connection
    parents = {_backend(url) for _ in range(4)}
    assert len(parents) == 1
    opened = _opened(url)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            os.write(write, str(_backend(url)).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    in_child = int(os.read(read, 32) or b"0")
    os.close(read)
    assert in_child and in_child not in parents
    # and the parent's connections survived the child's exit: lent again, none opened anew
    assert {_backend(url) for _ in range(4)} == parents and _opened(url) == opened


def test_a_dead_server_fails_at_once_with_its_reason_and_no_password() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://radar:s3cret@127.0.0.1:{port}/radar"
    started = time.monotonic()
    with pytest.raises(db.DatabaseUnavailable) as caught, db.connect(url):
        pass
    assert time.monotonic() - started < 3  # not the pool's 10-second wait
    assert "refused" in str(caught.value) and "s3cret" not in str(caught.value) and "radar:***@" in str(caught.value)


def test_the_analyse_tasks_pool_grows_with_the_llm_concurrency(db_url) -> None:
    url, options = f"{db_url} application_name=size-test", db.session_options(db.STATEMENT_TIMEOUT_S, None)
    assert db.pool(url, options, 4).max_size == 4
    assert db.pool(url, options, 24).max_size == 24  # resized, never shrunk below what a task asked
    assert db.pool(url, options, 4).max_size == 24


def test_a_session_lock_left_held_is_released_before_the_connection_is_lent_again(db_url) -> None:
    with db.connect(_own(db_url, "lock-test")) as conn:
        conn.execute("SELECT pg_advisory_lock(4242)")
    with psycopg.connect(db_url, autocommit=True) as other:  # another session can take it at once
        assert other.execute("SELECT pg_try_advisory_lock(4242)").fetchone()[0] is True


def test_a_connection_whose_borrower_failed_is_rolled_back_released_and_lent_again(db_url) -> None:
    """A borrower's own error ends in a rollback (its writes gone), its session locks released, and the same
    connection, sound, lent to the next borrower (since fd9f27e: not closed)."""
    url = _own(db_url, "failed-borrower-test")
    with pytest.raises(ValueError), db.connect(url) as conn:
        failed = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
        conn.execute("SELECT pg_advisory_lock(4343)")
        conn.execute("INSERT INTO service_state (key, value) VALUES ('failed-borrower', '{}')")
        raise ValueError("mid-transaction")
    with db.connect(url) as again:
        assert again.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"] == failed
        assert again.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS  # its own, fresh
        assert again.execute("SELECT count(*) AS n FROM service_state WHERE key = 'failed-borrower'").fetchone()["n"] == 0
    assert _opened(url) == 1
    with psycopg.connect(db_url, autocommit=True) as other:
        assert other.execute("SELECT pg_try_advisory_lock(4343)").fetchone()[0] is True


def test_what_a_borrower_set_on_the_connection_is_not_lent_on(db_url) -> None:
    url = _own(db_url, "settings-test")
    with db.connect(url) as conn:  # as a backup reads: one read-only snapshot
        conn.commit()
        conn.isolation_level, conn.read_only = psycopg.IsolationLevel.REPEATABLE_READ, True
        conn.execute("SELECT 1")
    with db.connect(url) as conn:
        assert (conn.read_only, conn.isolation_level, conn.autocommit) == (None, None, False)
        conn.execute("CREATE TEMP TABLE probe (id int) ON COMMIT DROP")  # writes: not a read-only transaction


def test_a_malformed_url_fails_at_once_as_before(db_url) -> None:
    started = time.monotonic()
    with pytest.raises(psycopg.ProgrammingError), db.connect("radar-db:5432/radar"):
        pass
    assert time.monotonic() - started < 1


def _upstream(host: str, port: int) -> socket.socket:
    """A connection to the tests' server, over TCP or, for the embedded one, its Unix socket."""
    if host.startswith("/"):
        unix = socket.socket(socket.AF_UNIX)
        unix.connect(f"{host}/.s.PGSQL.{port}")
        return unix
    return socket.create_connection((host, port))


def test_a_server_that_comes_back_is_reached_at_once(db_url) -> None:
    """A failed connect is not retried in the background with doubling waits: the first borrower after the
    server is back connects."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    info = psycopg.conninfo.conninfo_to_dict(db_url)
    url = psycopg.conninfo.make_conninfo(**{**info, "host": "127.0.0.1", "port": port})
    for _ in range(2):  # down, and down again: each borrower is told at once
        started = time.monotonic()
        with pytest.raises(db.DatabaseUnavailable), db.connect(url):
            pass
        assert time.monotonic() - started < 3
    real = int(info.get("port") or 5432)
    with socket.create_server(("127.0.0.1", port)) as relay:  # "the server is back": a relay to the real one
        import threading

        def pipe(a: socket.socket, b: socket.socket) -> None:
            try:
                while data := a.recv(65536):
                    b.sendall(data)
            except OSError:
                pass

        def serve() -> None:
            while True:
                try:
                    client, _ = relay.accept()
                except OSError:
                    return
                upstream = _upstream(info.get("host") or "127.0.0.1", real)
                threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
                threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()
        started = time.monotonic()
        with db.connect(url) as conn:
            assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
        assert time.monotonic() - started < 2


def test_a_borrower_that_swallowed_an_error_ends_in_a_rollback_as_with_psycopg_alone(db_url) -> None:
    url = _own(db_url, "swallow-test")
    with db.connect(url) as conn:
        conn.execute("SELECT pg_advisory_lock(4444)")
        conn.execute("INSERT INTO service_state (key, value) VALUES ('swallowed', '{}')")
        try:
            conn.execute("SELECT 1 / 0")
        except psycopg.errors.DivisionByZero:
            pass  # and carries on, as some callers of psycopg do
    with db.connect(url) as conn:
        assert conn.execute("SELECT count(*) AS n FROM service_state WHERE key = 'swallowed'").fetchone()["n"] == 0
    with psycopg.connect(db_url, autocommit=True) as other:
        assert other.execute("SELECT pg_try_advisory_lock(4444)").fetchone()[0] is True


def test_a_process_whose_connections_are_all_lent_waits_its_timeout_then_says_so(db_url, monkeypatch) -> None:
    """The hanging case: every connection of the pool held (a thread that never gives its back)."""
    monkeypatch.setattr(db, "CONNECT_TIMEOUT_S", 1)
    url = _own(db_url, "exhausted-test")
    with db.connect(url, pool_size=1):
        started = time.monotonic()
        with pytest.raises(db.DatabaseUnavailable) as caught, db.connect(url, pool_size=1):
            pass
        waited = time.monotonic() - started
    assert 0.9 <= waited < 3
    assert "all 1 of this process's connections in use" in str(caught.value)
    with db.connect(url, pool_size=1) as conn:  # given back: lent again
        assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
