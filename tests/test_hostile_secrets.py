"""Secrets never leave their box. A malformed secret is refused without being quoted, stored
and shown errors are scrubbed, apprise's log lines carry no channel token, the link secret is long enough,
and two processes migrating at once both succeed.

Rooms: settings.py (secrets checked unquoted), redact.py, push.py (apprise's log lines), signing.py and the link
secret, db.py (two migrators).
"""

from __future__ import annotations

import io
import json
import logging
import threading
import uuid
from datetime import timedelta

import psycopg
import pytest

from include.radar import store
from include.radar.core import db, redact
from include.radar.core.clock import FixedClock
from include.radar.core.settings import SettingsError, load_settings
from include.radar.pushes import push
from include.radar_demo.fakes import api_error
from tests.conftest import connect
from tests.slotrun import article, run_slot, shanghai

pytestmark = pytest.mark.hostile

SLOT = shanghai(2026, 1, 8, 14)
GOOD_SECRET = "a-link-secret-that-is-long-enough-0123"


@pytest.mark.parametrize("bad, problem", [
    (GOOD_SECRET + "\n", "line break"), (GOOD_SECRET[:10] + " " + GOOD_SECRET[10:], "space"),
    (GOOD_SECRET + "密钥", "non-ASCII"), ("\t" + GOOD_SECRET, "control character"),
])
def test_a_malformed_link_secret_is_refused_by_name_never_by_value(bad, problem):
    with pytest.raises(SettingsError) as info:
        load_settings({"link_secret": bad}.get)
    message = str(info.value)
    assert "link_secret" in message and problem in message
    assert GOOD_SECRET[:10] not in message and "<secret>" in message


def test_a_short_link_secret_is_refused_with_how_to_make_one():
    with pytest.raises(SettingsError, match=r"at least 32 bytes.*secrets\.token_urlsafe\(32\)"):
        load_settings({"link_secret": "too-short-secret"}.get)
    assert load_settings({"link_secret": GOOD_SECRET}.get).link_secret is not None
    assert load_settings({"link_secret": ""}.get).link_secret is None  # empty means "not set"


def test_a_deepseek_key_with_a_newline_fails_clearly_without_quoting_it(fakes, monkeypatch):
    key = "sk-pasted-with-a-newline-0123456789"
    monkeypatch.setenv("AIRFLOW_CONN_DEEPSEEK_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"{fakes.base}/deepseek", "password": key + "\n"}))
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1))]
    fakes.at(SLOT)
    result = run_slot(SLOT)
    error = result["errors"]["analyse:1"]
    assert "DeepSeek API key" in error and "line break" in error and key[:12] not in error
    with connect() as conn:
        stored = conn.execute("SELECT error, step_errors::text AS s FROM slot_run").fetchone()
        item = conn.execute("SELECT analyzed_status, attempts FROM content_item").fetchone()
    assert key[:12] not in stored["error"] and key[:12] not in stored["s"]
    assert (item["analyzed_status"], item["attempts"]) == (store.common.PENDING, 0)  # no claim, nothing counted
    assert fakes.deepseek.requests == []


def test_a_werss_password_with_a_newline_fails_the_ingest_by_name(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": fakes.base, "login": "admin", "password": "hunter2-secret\n"}))
    result = run_slot(SLOT)
    assert "password" in result["errors"]["ingest"] and "line break" in result["errors"]["ingest"]
    assert "hunter2" not in result["errors"]["ingest"] and fakes.werss.login_attempts == 0


def test_errors_that_echo_credentials_are_scrubbed_before_they_are_stored(fakes):
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1))]
    fakes.at(SLOT)
    # a proxy or a buggy server that echoes the request's credentials in its error message
    fakes.deepseek.responder = lambda b: api_error(400, "bad request; Authorization: Bearer sk-test; "
                                                        "db=postgresql://radar:pg-pass-1234@db/radar password=hunter22")
    run_slot(SLOT)
    with connect() as conn:
        texts = [r["t"] for r in conn.execute(
            "SELECT last_error AS t FROM content_item UNION ALL SELECT error FROM analysis_attempt")]
    assert texts and all(t for t in texts)
    for text in texts:
        assert "sk-test" not in text and "pg-pass-1234" not in text and "hunter22" not in text, text
        assert "***" in text


@pytest.mark.parametrize("text, leaked", [
    ("Authorization: Bearer abc.def-123456", "abc.def-123456"),
    ('{"access_token": "tok-0123456789"}', "tok-0123456789"),
    ("AK-SK ak0123456:sk9876543", "ak0123456"),
    ("postgresql://radar:s3cr3t-pw@host:5432/radar", "s3cr3t-pw"),
    ("host=db password='it is secret' dbname=radar", "it is secret"),
    ("https://radar.example.com/radar/daily/2026-01-08?exp=1&sig=" + "a" * 64, "a" * 64),
    ("key sk-0123456789abcdef rejected", "sk-0123456789abcdef"),
])
def test_secret_shaped_text_is_scrubbed_whatever_its_value(text, leaked):
    assert leaked not in redact.scrub(text)


def test_registered_secrets_are_scrubbed_wherever_they_appear():
    redact.register("a-registered-channel-token-42")
    assert redact.scrub("failed: https://x/a-registered-channel-token-42/send") == "failed: https://x/***/send"
    redact.register("short")  # too short to be told from a word: ignored
    assert redact.scrub("a short text") == "a short text"


def test_pages_scrub_errors_written_before_scrubbing_existed(fakes):
    from fastapi.testclient import TestClient

    from include.radar.core.slots import slot_at
    from include.radar.web.app import create_app
    from include.radar.web.auth import may_read_radar

    with connect() as conn:
        run = store.slot_runs.open_slot_run(conn, slot_at(SLOT.date(), "14:00"), run_type="scheduled", dag_id="d", dag_run_id="r")
        conn.execute("UPDATE slot_run SET status = 2, error = 'ingest: Authorization: Bearer leaked-token-999' "
                     "WHERE id = %s", (run["id"],))
    app = create_app(lambda: load_settings({"link_secret": GOOD_SECRET}.get), db.database_url(),
                     clock=FixedClock(SLOT + timedelta(hours=1)))
    from airflow.api_fastapi.core_api.security import get_user

    app.dependency_overrides[get_user] = lambda: object()
    app.dependency_overrides[may_read_radar] = lambda user: True
    html = TestClient(app).get("/daily/2026-01-08").text
    assert "leaked-token-999" not in html and "Authorization: ***" in html


def test_apprise_and_urllib3_log_no_channel_token(fakes, caplog):
    hostport = fakes.base.split("://", 1)[1]
    token = "channel-token-0123456789abcdef"
    channels = push.channels_from([f"json://bot:{token}@{hostport}/push/one", f"json://{hostport}/push/{token}"])
    for channel in channels:
        redact.register(*push.secret_parts(channel, min_chars=10))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.DEBUG)
    handler.addFilter(lambda record: record.name != "werkzeug")  # the stand-in server's own access log
    watched = [logging.getLogger(), logging.getLogger("apprise")]  # apprise's lines may not propagate
    levels = {name: logging.getLogger(name).level for name in ("apprise", "urllib3", "urllib3.connectionpool")}
    for logger in watched:
        logger.addHandler(handler)
    for name in levels:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG):
            errors = [push.send_one(c, "标题", "正文") for c in channels]
    finally:
        for logger in watched:
            logger.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    logged = stream.getvalue() + "\n".join(r.getMessage() for r in caplog.records if r.name != "werkzeug")
    assert "POST /push/***" in logged  # the lines are there, scrubbed
    assert errors[0] is None  # delivered (the sink ignores auth) ...
    assert token not in logged and all(token not in (e or "") for e in errors)  # ... and no token anywhere


def _fresh_database() -> str:
    server = db.database_url()
    name = f"radar_migrate_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(server)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info), name


def _migrate_at_once(url: str, processes: int) -> list[object]:
    """``processes`` migrations of ``url`` released at the same instant; what each returned or raised."""
    barrier = threading.Barrier(processes)
    outcomes: list[object] = []

    def migrate() -> None:
        barrier.wait()
        try:
            outcomes.append(db.migrate(url))
        except Exception as exc:  # the assertion reports it
            outcomes.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(processes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def test_two_processes_migrating_at_once_both_succeed(db_url):
    for _ in range(4):
        url, name = _fresh_database()
        outcomes = _migrate_at_once(url, 3)
        try:
            assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
            assert sorted(len(o) for o in outcomes) == [0, 0, len(db.migration_files())]  # applied exactly once
        finally:
            with psycopg.connect(db.database_url(), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
