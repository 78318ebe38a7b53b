"""``cli check``: one line per setting and connection, tried against the stand-ins that speak the real APIs
(conftest's ``fakes``), in a good set-up and in the broken ones an operator meets — each broken one pinned to its
exact ✗ line, its advice and the exit status; no secret in the output; the result kept for the health panel."""

from __future__ import annotations

import json
import logging
import socket
import time
from typing import Any

import pytest

from include.radar import redact, store
from include.radar.check import STATE_KEY, Mark, Options, platform, run
from include.radar.check.platform import AirflowFacts
from include.radar.check.schedule import coverage
from include.radar.settings import load_settings
from include.radar.slots import SHANGHAI
from include.radar_demo.fakes import FakeArticle, collection_task
from tests.pages import XSS, XSS_ESCAPED
from tests.test_health_page import health_html, page

SLOTS = ("07:00", "12:00", "14:00", "18:00", "22:00")
ACCOUNTS = [{"id": "MP_WXS_1001", "mp_name": "澄观产业研究", "status": 1},
            {"id": "MP_WXS_1002", "mp_name": "产业前哨站", "status": 1}]


@pytest.fixture
def good(fakes, monkeypatch) -> Any:
    """A deployment that works: two accounts collected before every slot, a fresh article, a budget."""
    now = int(time.time())
    fakes.clock[0] = now
    fakes.werss.accounts = list(ACCOUNTS)
    fakes.werss.message_tasks = [collection_task("45 6,11,13,17,21 * * *")]
    fakes.werss.articles = [
        FakeArticle(id="1001-1", mp_id="MP_WXS_1001", title="订单拐点", publish_time=now - 1800,
                    content_html="<p>" + "国产设备订单持续增长。" * 40 + "</p>"),
        FakeArticle(id="1002-1", mp_id="MP_WXS_1002", title="正文未到", publish_time=now - 3600, content_html=""),
    ]
    # conftest's WeRSS password is "secret": registered as a secret (for the whole process, by earlier tests too),
    # the word would be masked in every line
    monkeypatch.setattr(redact, "_secrets", set())
    fakes.werss.password = "werss-pass-5150"
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": fakes.base, "login": "admin", "password": "werss-pass-5150"}))
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DAILY_BUDGET", "5")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEMO_MODE", "true")
    monkeypatch.setattr(run, "airflow_lines", lambda s, o: platform.airflow_lines(
        s, o, facts=lambda: AirflowFacts(pool_slots=2, dag_known=True)))
    yield fakes
    logging.disable(logging.NOTSET)


def check(**flags: Any) -> tuple[int, list[str]]:
    out: list[str] = []
    code = run.main(Options(timeout=3, **flags), out.append)
    return code, [line for line in out if line[:1] in ("✓", "!", "✗")]


def line(lines: list[str], start: str) -> str:
    found = [text for text in lines if text.startswith(start)]
    assert len(found) == 1, (start, lines)
    return found[0]


def test_a_working_deployment_is_all_ticks_and_exits_0(good) -> None:
    code, lines = check()
    assert code == 0
    assert [x for x in lines if not x.startswith("✓")] == []
    assert len(lines) == 22
    assert line(lines, "✓ WeRSS · reachable").endswith(", login 'admin' accepted")
    assert line(lines, "✓ WeRSS · accounts") == "✓ WeRSS · accounts: 2 subscribed"
    assert "runs before every slot; next run" in line(lines, "✓ WeRSS · collection task")
    assert line(lines, "✓ WeRSS · bodies") == ("✓ WeRSS · bodies: 1 of the newest 2 wait for their body; the radar "
                                              "holds 0 waiting")
    assert line(lines, "✓ WeRSS · newest article") == "✓ WeRSS · newest article: 30 min old"
    assert line(lines, "✓ DeepSeek · model") == "✓ DeepSeek · model: deepseek-v4-pro offered"
    assert line(lines, "✓ DeepSeek · daily budget") == "✓ DeepSeek · daily budget: $5.00 a day; spent today $0"
    assert good.werss.login_attempts == 1
    assert good.deepseek.requests == []  # the model list only: nothing paid
    assert good.deepseek.model_list_calls == 1
    assert good.sink.received == [] and good.sink2.received == []


def test_outside_demo_mode_a_single_login_and_recorded_prices_are_warnings_that_do_not_fail(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEMO_MODE", "false")
    code, lines = check()
    assert code == 0
    assert [x.split(":")[0] for x in lines if x.startswith("!")] == ["! radar database · pages' login",
                                                                     "! market data · source"]


def test_a_wrong_werss_password_is_one_login_never_retried(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": good.base, "login": "admin", "password": "wrong-password-7f3a9"}))
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ WeRSS") == (
        "✗ WeRSS · credentials: WeRSS refused the login for user 'admin' (用户名或密码错误) → correct the werss_default connection; not retried: WeRSS locks the account after 5 failed logins until "
        "it restarts")
    assert [x for x in lines if x.startswith("✓ WeRSS") or x.startswith("! WeRSS")] == []
    assert good.werss.login_attempts == 1


def _blackhole() -> socket.socket:
    """A port that accepts connections and never answers (a hung host)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def test_an_unreachable_werss_costs_the_timeout_not_minutes(good, monkeypatch) -> None:
    hole = _blackhole()
    port = hole.getsockname()[1]
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"http://127.0.0.1:{port}", "login": "admin", "password": "secret",
        "extra": {"max_retries": 5}}))
    from include.radar.check.collection import werss_lines

    started = time.monotonic()
    lines = [x.render() for x in werss_lines(load_settings(), Options(timeout=1), None)]
    took = time.monotonic() - started
    hole.close()
    assert took < 4
    assert lines == [f"✗ WeRSS · reachable: WeRSS unreachable at http://127.0.0.1:{port}: no complete answer within 1s "
                     f"→ start WeRSS or correct the host of werss_default (http://127.0.0.1:{port})"]


def test_zero_subscribed_accounts_says_how_to_subscribe(good) -> None:
    good.werss.accounts = []
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ WeRSS · accounts") == (
        "✗ WeRSS · accounts: no account subscribed: WeRSS has nothing to collect → in WeRSS's UI scan the QR code "
        "with WeChat (授权登录), then search each account by name and add it (公众号 → 添加订阅); or POST "
        "/api/v1/wx/mps/by_article with one of its articles' URL")


def test_no_collection_task_fails_with_the_cron_to_add(good) -> None:
    good.werss.message_tasks = [collection_task("45 6,11,13,17,21 * * *", status=0)]
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ WeRSS · collection task") == (
        "✗ WeRSS · collection task: no active collection task (1 inactive or without a valid cron): WeRSS collects "
        "nothing new, only what it had when each account was added → in WeRSS: 消息任务 → add a task, cron "
        "'45 6,11,13,17,21 * * *' (15 min before each slot), accounts left empty (all), status on; PUT "
        "/api/v1/wx/message_tasks/job/fresh reloads the tasks")


def test_a_task_that_misses_slots_or_accounts_is_a_warning(good) -> None:
    good.werss.message_tasks = [collection_task("0 8 * * *", ACCOUNTS[:1], name="早间")]
    code, lines = check()
    assert code == 0
    assert line(lines, "! WeRSS · collection task: 1 account(s)") == (
        "! WeRSS · collection task: 1 account(s) in no active task: 产业前哨站 → add them to a task's accounts, or "
        "leave its accounts empty (all)")
    assert line(lines, "! WeRSS · collection task: 早间").startswith(
        "! WeRSS · collection task: 早间 (0 8 * * *): no collection within 1 h before the slot(s) 07:00, 12:00, "
        "14:00, 18:00, 22:00 → in WeRSS: 消息任务")


def test_an_expired_wechat_login_fails(good) -> None:
    good.werss.wechat_expires_at = good.clock[0] - 3600
    code, lines = check()
    assert code == 1
    from datetime import UTC, datetime

    lapsed = datetime.fromtimestamp(good.clock[0] - 3600, UTC).astimezone(SHANGHAI)
    assert line(lines, "✗ WeRSS · WeChat login") == (
        f"✗ WeRSS · WeChat login: lapsed at {lapsed:%m-%d %H:%M}: WeRSS collects nothing → open WeRSS and scan its "
        "QR code with WeChat (the login lapses every two to three days)")


def test_a_retired_model_fails_before_any_paid_call(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL", "deepseek-reasoner")
    code, lines = check(llm_call=True)
    assert code == 1
    assert line(lines, "✗ DeepSeek · model") == (
        "✗ DeepSeek · model: 'deepseek-reasoner' is not offered (offered: deepseek-flash, deepseek-v4-pro): every "
        "analysis would fail → set AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL (or the Variable radar_deepseek_model) to one "
        "the list offers")
    assert good.deepseek.requests == []


def test_a_refused_deepseek_key_fails(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_DEEPSEEK_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"{good.base}/deepseek", "password": "sk-wrongkey123456"}))
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ DeepSeek · key").startswith("✗ DeepSeek · key: DeepSeek rejected the API key (401: "
                                                       "Authentication Fails, Your api key is invalid)")
    assert "sk-wrongkey123456" not in "\n".join(lines)


def test_llm_call_makes_exactly_one_paid_call(good) -> None:
    good.deepseek.responder = lambda body: '{"ok": true}'
    code, lines = check(llm_call=True)
    assert code == 0
    assert line(lines, "✓ DeepSeek · paid call").startswith("✓ DeepSeek · paid call: answered JSON in ")
    assert len(good.deepseek.requests) == 1


def test_a_bad_apprise_url_fails_by_channel(good, monkeypatch) -> None:
    hostport = good.base.split("://", 1)[1]
    monkeypatch.setenv("AIRFLOW_CONN_RADAR_PUSH", json.dumps({
        "conn_type": "generic", "extra": {"urls": ["nosuchservice://tok3n-abcdef123456", f"json://{hostport}/push/one"]}}))
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ push") == (
        "✗ push · reader nosuchservice://: not a valid apprise URL → correct it (https://github.com/caronc/apprise/"
        "wiki lists each service's URL form)")
    assert "tok3n-abcdef123456" not in "\n".join(lines)


def test_a_weak_link_secret_fails_and_the_other_checks_still_run(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LINK_SECRET", "short-secret")
    code, lines = check()
    assert code == 1
    assert line(lines, "✗") == (
        "✗ links · link secret strength: must be at least 32 bytes (it signs the links in pushes); make one with python3 -c "
        "'import secrets; print(secrets.token_urlsafe(32))' → set AIRFLOW_VAR_RADAR_LINK_SECRET to at least 32 "
        "random bytes: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'")
    assert line(lines, "✓ WeRSS · accounts")  # one bad setting does not hide the rest
    assert "short-secret" not in "\n".join(lines)


def test_plain_http_links_on_a_public_host_fail(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_REPORT_BASE_URL", "http://radar.example.com/radar")
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ links · report_base_url").startswith(
        "✗ links · report_base_url: http://radar.example.com/radar is plain http on a host other than this machine")


def test_the_lifetime_line_says_what_a_link_and_its_session_open(good, monkeypatch) -> None:
    _, lines = check()
    assert line(lines, "✓ links · lifetime") == (
        "✓ links · lifetime: signed links are valid 7 days; in its first 24 h a link also opens a 30-min read session "
        "(reading only, no votes)")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LINK_SESSION_MINUTES", "0")
    _, lines = check()
    assert line(lines, "✓ links · lifetime") == (
        "✓ links · lifetime: signed links are valid 7 days; a link opens its own page only (no read session)")


def test_no_secret_reaches_the_output_or_the_stored_result(good, monkeypatch, conn) -> None:
    secrets = ["werss-password-Q9x7", "sk-deepseek-Z8y6w5", "test-link-secret-0123456789abcdef01"]
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": good.base, "login": "admin", "password": secrets[0]}))
    monkeypatch.setenv("AIRFLOW_CONN_DEEPSEEK_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"{good.base}/deepseek", "password": secrets[1]}))
    out: list[str] = []
    code = run.main(Options(timeout=3, send_test=True), out.append)
    stored = json.dumps(store.status(conn, STATE_KEY), ensure_ascii=False)
    transcript = "\n".join(out)
    assert code == 1  # the refused login and key are reported...
    assert "✗ WeRSS · credentials" in transcript and "✗ DeepSeek · key" in transcript
    for secret in secrets:  # ...without their values
        assert secret not in transcript and secret not in stored


def test_send_test_delivers_one_message_per_channel_reported_one_by_one(good) -> None:
    code, lines = check(send_test=True)
    assert code == 0
    assert (len(good.sink.received), len(good.sink2.received), len(good.ops.received)) == (1, 1, 1)
    assert good.sink.received[0]["title"] == "机会雷达：连接测试"
    hostport = good.base.split("://", 1)[1]
    delivered = [x for x in lines if x.endswith(": test message delivered")]
    assert [x.split(" · ")[1].rsplit(": test", 1)[0] for x in delivered] == [f"reader json://{hostport}"] * 2 + [
        f"operator json://{hostport}"]


def test_the_result_is_stored_and_the_health_panel_shows_it_escaped(good, monkeypatch, db_url, conn) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL", XSS)
    code, _ = check()
    assert code == 1
    stored = store.status(conn, STATE_KEY)
    assert stored["failures"] == 1 and stored["ok"] >= 15
    assert stored["failing"][0].startswith(f"✗ DeepSeek · model: '{XSS}' is not offered")
    html = health_html(page(db_url))
    assert "部署检查" in html and f"✗ {stored['failures']}" in html
    assert f"✗ DeepSeek · model: &#39;{XSS_ESCAPED}&#39; is not offered" in html
    assert XSS not in html


def test_the_health_panel_says_when_no_check_has_run(db_url) -> None:
    html = health_html(page(db_url))
    assert "还没有运行过：python -m include.radar.cli check" in html


def test_an_unreachable_airflow_metadata_database_is_a_failure_with_its_fix() -> None:
    def dead() -> AirflowFacts:
        time.sleep(30)
        raise AssertionError("never reached")

    started = time.monotonic()
    lines = [x.render() for x in platform.airflow_lines(load_settings(), Options(timeout=1), facts=dead)]
    assert time.monotonic() - started < 3
    assert lines == ["✗ Airflow · metadata database: not reachable (Airflow's metadata database gave no answer within "
                     "1s) → run the check where Airflow runs (docker compose run --rm airflow-cli …), or start its "
                     "database; AIRFLOW__DATABASE__SQL_ALCHEMY_CONN must be that of the deployment"]


def test_airflow_is_read_from_its_own_metadata_database() -> None:
    """The tests' AIRFLOW_HOME was migrated by scripts/bootstrap.sh, which creates the pool."""
    facts = platform.read_airflow()
    assert facts.pool_slots == 2
    lines = [x.render() for x in platform.airflow_lines(load_settings(), Options(), facts=lambda: facts)]
    assert lines[0] == "✓ Airflow · pool radar_llm: 2 slots (analysis_tasks = 2)"


def test_a_missing_pool_and_a_dag_import_error_fail() -> None:
    facts = AirflowFacts(pool_slots=None, dag_known=False, import_error="NameError: name 'x' is not defined")
    lines = [x.render() for x in platform.airflow_lines(load_settings(), Options(), facts=lambda: facts)]
    assert lines == [
        "✗ Airflow · pool radar_llm: missing: the analysis tasks would wait forever → run airflow pools set radar_llm 2 "
        "'Opportunity Radar: analysis tasks at once'",
        "✗ Airflow · DAG opportunity_radar_slots: import error: NameError: name 'x' is not defined → fix "
        "dags/opportunity_radar.py (airflow dags list-import-errors shows the whole trace)"]


def test_coverage_finds_the_slots_a_cron_does_not_serve() -> None:
    from datetime import datetime

    now = datetime(2026, 1, 8, 9, 0, tzinfo=SHANGHAI)
    assert coverage(["45 6,11,13,17,21 * * *"], SLOTS, now, SHANGHAI).missed == ()
    assert coverage(["0 7,12,14,18,22 * * *"], SLOTS, now, SHANGHAI).missed == SLOTS  # at the slot is too late
    assert coverage(["30 11 * * *"], SLOTS, now, SHANGHAI).missed == ("07:00", "14:00", "18:00", "22:00")
    found = coverage(["*/20 * * * *"], SLOTS, now, SHANGHAI)
    assert (found.missed, found.next_run, found.next_slot) == ((), datetime(2026, 1, 8, 9, 20, tzinfo=SHANGHAI), "12:00")


def test_every_line_is_typed_and_a_warning_does_not_fail() -> None:
    from include.radar.check import Report, fail, ok, warn

    report = Report([ok("a", "b", "c"), warn("a", "d", "e", "f")])
    assert report.exit_code == 0 and report.lines[1].mark is Mark.WARN
    assert report.lines[1].render() == "! a · d: e → f"
    report.lines.append(fail("a", "g", "h", "i"))
    assert report.exit_code == 1 and report.as_state()["failing"] == ["✗ a · g: h → i"]
