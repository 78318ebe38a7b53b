"""``cli check``: one line per setting and connection, tried against the stand-ins that speak the real APIs
(conftest's ``fakes``, answering as WeRSS v1.4.9 does), in a good set-up and in the broken ones an operator meets —
each broken one pinned to its exact ✗ or ! line, its advice and the exit status, never ✓; no secret in the
output; the result kept for the health panel."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from include.radar import cli, store
from include.radar.check import STATE_KEY, Mark, Options, airflow_facts, platform, run
from include.radar.check.airflow_facts import AirflowFacts
from include.radar.check.schedule import coverage, task_of
from include.radar.core import redact
from include.radar.core.settings import load_settings
from include.radar.core.slots import SHANGHAI
from include.radar_demo.fakes import FakeArticle, collection_task
from tests.conftest import connect
from tests.pages import XSS, XSS_ESCAPED
from tests.test_health_page import health_html, page

SLOTS = ("07:00", "12:00", "14:00", "18:00", "22:00")
CRON = "30 6,11,13,17,21 * * *"  # the guide's: half an hour before each slot
ACCOUNTS = [{"id": "MP_WXS_1001", "mp_name": "澄观产业研究", "status": 1},
            {"id": "MP_WXS_1002", "mp_name": "产业前哨站", "status": 1}]


@pytest.fixture
def good(fakes, monkeypatch) -> Any:
    """A deployment that works: two accounts collected before every slot, a fresh article, a budget."""
    now = int(time.time())
    fakes.clock[0] = now
    fakes.werss.accounts = [{**a, "created_at": "2026-01-01T08:00:00"} for a in ACCOUNTS]
    fakes.werss.message_tasks = [collection_task(CRON)]
    fakes.werss.scheduler_running = True  # applied, and WeRSS's scheduler runs it at its times
    fakes.werss.apply()
    fakes.werss.articles = [  # stored by the last run (a minute ago)
        FakeArticle(id="1001-1", mp_id="MP_WXS_1001", title="订单拐点", publish_time=now - 1800,
                    content_html="<p>" + "国产设备订单持续增长。" * 40 + "</p>", stored_at=now - 60),
        FakeArticle(id="1002-1", mp_id="MP_WXS_1002", title="正文未到", publish_time=now - 3600, content_html="",
                    stored_at=now - 60),
    ]
    # conftest's WeRSS password is "secret": registered as a secret (for the whole process, by earlier tests too),
    # the word would be masked in every line
    monkeypatch.setattr(redact, "_secrets", set())
    fakes.werss.password = "werss-pass-5150"
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": fakes.base, "login": "admin", "password": "werss-pass-5150"}))
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DAILY_BUDGET", "5")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEMO_MODE", "true")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_REPORT_BASE_URL", "https://radar.zhang-home.cn/radar")
    monkeypatch.setattr(run, "airflow_lines", lambda s, o: platform.airflow_lines(
        s, o, facts=lambda: AirflowFacts(pool_slots=2, dag_known=True)))
    _seen_long_ago(fakes.werss.message_tasks[0])  # an earlier check knew the task before its last run
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


def test_a_radar_database_not_made_yet_says_to_run_provision(database_url) -> None:
    """The server answers, the database is not on it: the fix is ``provision`` (which makes it and its logins)."""
    from psycopg.conninfo import make_conninfo

    from include.radar.core import db

    missing = make_conninfo(database_url, dbname="radar_never_made")
    [found], usable = platform.database_lines(missing, load_settings(use_airflow=False), Options(timeout=3))
    assert not usable and found.mark == Mark.FAIL and found.name == "可连接"
    assert 'database "radar_never_made" does not exist' in found.text
    assert "python -m include.radar.cli provision" in found.fix
    with pytest.raises(db.DatabaseMissing, match=r"does not exist: create the radar's database and logins with "
                       r"`python -m include.radar.cli provision`"):
        with db.connect(missing):
            pass


def test_a_working_deployment_is_all_ticks_and_exits_0(good) -> None:
    code, lines = check()
    assert code == 0, [x for x in lines if not x.startswith("✓")]
    assert [x for x in lines if not x.startswith("✓")] == []
    assert len(lines) == 23
    assert line(lines, "✓ WeRSS · 可达").endswith("，账号 'admin' 登录成功")
    assert line(lines, "✓ WeRSS · 公众号") == "✓ WeRSS · 公众号: 已订阅 2 个"
    assert "（30 6,11,13,17,21 * * *）安排在每个时段之前；下次" in line(lines, "✓ WeRSS · 采集任务")
    assert line(lines, "✓ WeRSS · 任务运行").endswith("已运行并存下新文章：2/2 个公众号在其后被采集")
    assert line(lines, "✓ WeRSS · 正文") == "✓ WeRSS · 正文: 最新 2 篇中有 1 篇还没有正文；雷达有 0 篇在等正文"
    assert line(lines, "✓ WeRSS · 最新文章") == "✓ WeRSS · 最新文章: 30 分钟前发布"
    assert line(lines, "✓ DeepSeek · 模型") == "✓ DeepSeek · 模型: deepseek-v4-pro 可用"
    assert line(lines, "✓ DeepSeek · 每日预算") == "✓ DeepSeek · 每日预算: 每天 $5.00；今天已花 $0"
    assert good.werss.login_attempts == 1
    assert good.deepseek.requests == []  # the model list only: nothing paid
    assert good.deepseek.model_list_calls == 1
    assert good.sink.received == [] and good.sink2.received == []


def test_outside_demo_mode_a_single_login_and_recorded_prices_are_warnings_that_do_not_fail(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEMO_MODE", "false")
    code, lines = check()
    assert code == 0
    assert [x.split(":")[0] for x in lines if x.startswith("!")] == ["! 雷达数据库 · 页面登录", "! 行情数据 · 来源"]


# ------------------------------------------------------------------------------------------- WeRSS


def test_a_database_never_migrated_is_a_failed_line_not_a_traceback(good, monkeypatch) -> None:
    import uuid

    import psycopg

    from tests.conftest import _server_url, _with_database

    name = f"radar_test_empty_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_server_url(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        monkeypatch.setenv("RADAR_DATABASE_URL", _with_database(_server_url(), name))
        code, lines = check()
        assert code == 1
        assert re.match(r"✗ 雷达数据库 · 表结构: \d+ 个迁移未应用：0001_initial.sql, ", line(lines, "✗ 雷达数据库 · 表结构"))
        assert line(lines, "✓ WeRSS · 可达")  # the checks that need no radar table still run
    finally:
        with psycopg.connect(_server_url(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_wrong_werss_password_is_one_login_never_retried(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": good.base, "login": "admin", "password": "wrong-password-7f3a9"}))
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ WeRSS") == (
        "✗ WeRSS · 凭据: WeRSS refused the login for user 'admin' (用户名或密码错误) → 改正 werss_default 连接的 "
        "login/password；不会重试：WeRSS 连续 5 次登录失败会锁定账号，直到它重启")
    assert [x for x in lines if x.startswith("✓ WeRSS") or x.startswith("! WeRSS")] == []
    assert good.werss.login_attempts == 1


def test_a_wrong_access_key_is_told_where_keys_are_made_not_about_lockouts(good, monkeypatch) -> None:
    good.werss.access_key, good.werss.secret_key = "AK-right", "SK-right"
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": good.base, "extra": {"access_key": "AK-wrong", "secret_key": "SK-wrong-77"}}))
    code, lines = check()
    assert code == 1
    found = line(lines, "✗ WeRSS · 凭据")
    assert found.endswith("→ 在 WeRSS → Access Key 新建一对密钥，填入 werss_default 连接的 extra.access_key / "
                          "extra.secret_key")
    assert "锁定" not in found and "SK-wrong-77" not in "\n".join(lines)


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
    from include.radar.check.werss import werss_lines

    started = time.monotonic()
    lines = [x.render() for x in werss_lines(load_settings(), Options(timeout=1), None)]
    took = time.monotonic() - started
    hole.close()
    assert took < 4
    assert lines == [f"✗ WeRSS · 可达: WeRSS unreachable at http://127.0.0.1:{port}: no complete answer within 1s "
                     f"→ 启动 WeRSS，或改正 werss_default 连接的 host（http://127.0.0.1:{port}）"]


def test_a_werss_never_scanned_is_no_login_whatever_its_login_flag_says(good) -> None:
    """A fresh v1.4.9 answers ``login: true`` with an empty token, as it does once restarted after a scan: what
    tells them apart is that no account was ever collected (WeRSS collects only with the login)."""
    good.werss.wechat_scanned = False
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ WeRSS · 微信登录") == (
        "✗ WeRSS · 微信登录: WeRSS 还没有扫码登录微信：没有一个公众号被采集过（WeRSS 只在有微信登录时采集） → 打开 "
        "WeRSS → 右上角头像菜单 → 扫码授权，用微信扫码并在手机上确认；已扫过码的话，让采集任务运行一次（WeRSS → 消息任务 → "
        "执行）再 check")
    # and nothing downstream says ✓ for a collection that cannot happen
    assert line(lines, "! WeRSS · 任务运行") == ("! WeRSS · 任务运行: 无法判断：微信未登录时 WeRSS 不采集 → "
                                             "先完成上面的微信登录")
    assert not [x for x in lines if x.startswith("✓ WeRSS · 任务运行") or x.startswith("✓ WeRSS · 新订阅")]


def test_a_qr_code_waiting_for_its_scan_is_said(good) -> None:
    good.werss.wechat_scanned = False
    good.werss.qr_waiting = True
    _, lines = check()
    assert "（WeRSS 只在有微信登录时采集）；二维码已生成，正等待扫码 →" in line(lines, "✗ WeRSS · 微信登录")


def test_an_expired_wechat_login_fails(good) -> None:
    good.werss.wechat_expires_at = good.clock[0] - 3600
    code, lines = check()
    assert code == 1
    from datetime import UTC, datetime

    lapsed = datetime.fromtimestamp(good.clock[0] - 3600, UTC).astimezone(SHANGHAI)
    assert line(lines, "✗ WeRSS · 微信登录") == (
        f"✗ WeRSS · 微信登录: 已于 {lapsed:%m-%d %H:%M} 过期：WeRSS 停止了采集 → 打开 WeRSS → 右上角头像菜单 → 扫码授权，"
        "用微信扫码并在手机上确认（微信登录每两三天过期一次）")


def test_a_login_with_a_token_but_no_expiry_is_a_warning_not_a_tick(good, monkeypatch) -> None:
    from include.radar.check import werss as werss_check
    from include.radar.collect.werss import WeChatLogin

    monkeypatch.setattr(werss_check, "_login", lambda client: WeChatLogin(True, True, None))
    _, lines = check()
    assert line(lines, "! WeRSS · 微信登录") == (
        "! WeRSS · 微信登录: 已登录，但 WeRSS 没有给出到期时间：过期前无法提醒 → 在 WeRSS → 扫码授权 重新扫码一次：WeRSS "
        "会给出到期时间（v1.4.9 只到它重启为止）")


def test_a_werss_restarted_since_its_scan_reads_as_scanned_from_its_collections(good) -> None:
    """v1.4.9 after a restart answers sys/info as if never scanned; the accounts' collection times prove it."""
    good.werss.wechat_restarted = True
    code, lines = check()
    assert code == 0
    assert "已登录（" in line(lines, "! WeRSS · 微信登录") and "的采集用着它），但 WeRSS 没有给出到期时间" in line(
        lines, "! WeRSS · 微信登录")
    assert line(lines, "✓ WeRSS · 任务运行")


def test_zero_subscribed_accounts_says_how_to_subscribe(good) -> None:
    good.werss.accounts = []
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ WeRSS · 公众号") == (
        "✗ WeRSS · 公众号: 还没有订阅任何公众号：WeRSS 没有可采集的 → 扫码授权后，在 WeRSS → 订阅管理 → 订阅 → 添加公众号 "
        "按名称搜索公众号并添加")


def test_no_collection_task_fails_with_the_cron_to_add(good) -> None:
    good.werss.message_tasks = [collection_task(CRON, status=0)]
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ WeRSS · 采集任务") == (
        "✗ WeRSS · 采集任务: 没有会运行的采集任务（1 个停用、cron 无效或无法加载）：WeRSS 不会采集新文章，只有添加公众号时"
        "的那些 → 在 WeRSS → 消息任务 新建任务：任务名称（如 雷达采集），类型 Message，cron 表达式 30 6,11,13,17,21 * * *"
        "（每个时段前 30 分钟），公众号留空（对所有公众号生效），启用；保存后点「应用」")


def test_a_task_whose_mps_id_werss_cannot_read_fails_as_it_fails_in_werss(good) -> None:
    """``mps_id = ""`` is accepted by WeRSS's API, but its scheduler cannot load it: never "all accounts"."""
    broken = {**collection_task(CRON), "mps_id": "", "name": "采集"}
    good.werss.message_tasks = [broken]
    assert good.werss.apply() is False  # what 「应用」 meets: HTTP 500
    code, lines = check()
    assert code == 1
    assert [x for x in lines if x.startswith("✗ WeRSS · 采集任务")] == [
        "✗ WeRSS · 采集任务: 任务「采集」无法加载：mps_id 不是 JSON（Expecting value: line 1 column 1 (char 0)）；有它在时"
        "「应用」会失败（HTTP 500），WeRSS 重启后一个任务也不会加载 → 在 WeRSS → 消息任务 编辑该任务，公众号留空（或重新"
        "选择）后保存，或删掉它；再点「应用」",
        "✗ WeRSS · 采集任务: 没有会运行的采集任务（1 个停用、cron 无效或无法加载）：WeRSS 不会采集新文章，只有添加公众号时"
        "的那些 → 在 WeRSS → 消息任务 新建任务：任务名称（如 雷达采集），类型 Message，cron 表达式 30 6,11,13,17,21 * * *"
        "（每个时段前 30 分钟），公众号留空（对所有公众号生效），启用；保存后点「应用」"]
    assert not [x for x in lines if x.startswith("✓ WeRSS · 采集任务")]


@pytest.mark.parametrize(("mps_id", "why"), [
    ("[]", ""), ('[{"id": "MP_WXS_1001", "mp_name": "x"}]', ""),
    ("", "mps_id 不是 JSON（Expecting value: line 1 column 1 (char 0)）"),
    ("{}", "mps_id 不是 JSON 列表"), ('["MP_WXS_1001"]', "mps_id 的每一项都应是带 id 的对象"),
    ('[{"mp_name": "x"}]', "mps_id 的每一项都应是带 id 的对象"), ('[{"id": 5}]', "mps_id 的每一项都应是带 id 的对象"),
    (None, "mps_id 不是 JSON 列表"),
])
def test_mps_id_is_read_as_werss_reads_it(mps_id, why) -> None:
    from include.radar.check.schedule import accounts_of

    assert accounts_of(mps_id)[1] == why


def test_a_task_that_misses_slots_or_accounts_is_a_warning(good) -> None:
    good.werss.message_tasks = [collection_task("0 8 * * *", ACCOUNTS[:1], name="早间")]
    good.werss.apply()
    code, lines = check()
    assert code == 0
    assert line(lines, "! WeRSS · 采集任务: 1 个") == (
        "! WeRSS · 采集任务: 1 个公众号不在任何任务里：产业前哨站 → 在 WeRSS → 消息任务 编辑任务：公众号留空（对所有公众号"
        "生效）或把它们加进去，保存后点「应用」")
    assert line(lines, "! WeRSS · 采集任务: 「早间」").startswith(
        "! WeRSS · 采集任务: 「早间」（0 8 * * *）：时段 07:00、12:00、14:00、18:00、22:00 之前 1 小时内没有采集 → "
        "在 WeRSS → 消息任务")


def _seen_long_ago(task: dict[str, Any]) -> None:
    """What an earlier check kept: this task, in this form, seen two days ago."""
    from datetime import UTC, datetime, timedelta

    from include.radar.check.task_runs import SEEN_KEY

    with connect() as conn:
        store.state.set_state(conn, SEEN_KEY, {task_of(task).form: (datetime.now(UTC) - timedelta(days=2)).isoformat()}, None)


def test_a_task_never_applied_is_a_warning_first_and_a_failure_once_it_was_known_before_its_time(good, conn) -> None:
    """v1.4.9 records no creation time: a task seen for the first time may be new, so no run at its last time is
    a ! with the time to look again; a task the check already knew before that time did not run: ✗."""

    from include.radar.check.task_runs import SEEN_KEY

    good.werss.applied = None  # saved, never applied: WeRSS's scheduler runs nothing

    with connect() as fresh:
        store.state.set_state(fresh, SEEN_KEY, {}, None)  # the first check that sees it
    code, lines = check()
    assert code == 0 and not [x for x in lines if x.startswith("✓ WeRSS · 任务运行")]
    assert "没有看到上一次计划采集（" in line(lines, "! WeRSS · 任务运行")
    # and its timing, however right, is no tick before a run shows WeRSS loaded it
    assert "安排在每个时段之前" in line(lines, "! WeRSS · 采集任务")
    form = task_of(good.werss.message_tasks[0]).form
    assert set(store.operations.status(conn, SEEN_KEY)) == {form}  # remembered for the next check
    _seen_long_ago(good.werss.message_tasks[0])
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ WeRSS · 任务运行").endswith(
        "没有运行：那之后 30 分钟内没有公众号开始被采集 → WeRSS 的定时采集没有运行：在 WeRSS → 消息任务 点「应用」（新建或"
        "修改任务、订阅新公众号后都要点一次才生效）；不用 Docker 时 WeRSS 须以 python main.py -job True 启动，config.yaml 的 "
        "server.enable_job 为 True，server.auto_reload 为 False")


def test_a_run_that_stored_nothing_or_came_before_the_task_was_known_is_no_tick(good) -> None:
    """A collection's start is not a collection: v1.4.9 records no failed request, so only an article stored
    after the run began shows it collected; and a run before the check first saw the task (in its present form:
    an edit needs 「应用」) may be another version's."""
    from include.radar.check.task_runs import SEEN_KEY

    for article in good.werss.articles:  # stored two days ago: every request of the last run failed
        article.stored_at = good.clock[0] - 2 * 86400
    _, lines = check()
    assert "开始了（2/2 个公众号），但没有存下新文章" in line(lines, "! WeRSS · 任务运行")
    assert not [x for x in lines if x.startswith(("✓ WeRSS · 任务运行", "✓ WeRSS · 采集任务"))]
    for article in good.werss.articles:
        article.stored_at = good.clock[0] - 60
    good.werss.message_tasks = [{**good.werss.message_tasks[0], "cron_exp": "30 6,11,13,17,21 * * *",
                                 "mps_id": '[{"id": "MP_WXS_1001", "mp_name": "澄观产业研究"}]'}]  # edited
    _, lines = check()
    assert "但任务是那之后才保存、或 check 那之后才第一次见到的" in line(lines, "! WeRSS · 任务运行")
    with connect() as conn:
        assert len(store.operations.status(conn, SEEN_KEY)) == 2  # the old form and the new one


def test_a_manual_run_is_not_taken_for_the_schedule(good, conn) -> None:
    """「执行」 sets every account's sync_time now, whatever the schedule: only a collection that starts within
    half an hour of a cron time is that time's run."""
    from datetime import datetime, timedelta


    two_hours_ago = datetime.now(SHANGHAI) - timedelta(hours=2)
    task = collection_task(f"{two_hours_ago.minute} {two_hours_ago.hour} * * *")
    good.werss.message_tasks = [task]
    good.werss.applied = None
    _seen_long_ago(task)
    good.werss.synced = {a["id"]: int(time.time()) - 60 for a in good.werss.accounts}  # 执行, a minute ago
    code, lines = check()
    assert code == 1 and line(lines, "✗ WeRSS · 任务运行")
    # the same collection at the task's own time is its run
    good.werss.synced = {a["id"]: int(two_hours_ago.timestamp()) + 120 for a in good.werss.accounts}
    _, lines = check()
    assert line(lines, "✓ WeRSS · 任务运行").endswith("已运行并存下新文章：2/2 个公众号在其后被采集")


def test_a_task_saved_since_its_last_time_is_not_judged_yet(good) -> None:
    """A WeRSS that records when a task was saved (newer than v1.4.9): saved after its last time, not judged."""
    from datetime import UTC, datetime

    saved = datetime.fromtimestamp(good.clock[0] - 60, UTC).astimezone(SHANGHAI)
    good.werss.message_tasks = [{**collection_task(CRON), "updated_at": f"{saved:%Y-%m-%d %H:%M:%S}"}]
    good.werss.applied = None
    _, lines = check()
    assert line(lines, "! WeRSS · 任务运行").startswith("! WeRSS · 任务运行: 没有看到上一次计划采集（")


def test_an_account_subscribed_after_the_tasks_were_applied_is_named_with_the_fix(good) -> None:
    """「全部公众号」 is expanded at 「应用」: an account subscribed later is in no task until the next one."""
    from datetime import UTC, datetime

    later = datetime.fromtimestamp(good.clock[0] - 2 * 86400, UTC).astimezone(SHANGHAI)
    good.werss.accounts.append({"id": "MP_WXS_1003", "mp_name": "新订阅号", "status": 1,
                                "created_at": f"{later:%Y-%m-%dT%H:%M:%S}"})
    code, lines = check()
    assert code == 0
    assert line(lines, "! WeRSS · 新订阅") == (
        "! WeRSS · 新订阅: 1 个公众号订阅后还没被任务采集过：新订阅号；公众号留空的任务只包括上次点「应用」时已订阅的 → "
        "在 WeRSS → 消息任务 点「应用」（新建或修改任务、订阅新公众号后都要点一次才生效）")
    good.werss.apply()  # 「应用」: the next runs cover it, and the line goes
    _, lines = check()
    assert not [x for x in lines if "新订阅" in x]


def test_many_accounts_subscribed_since_the_last_apply_do_not_hide_that_the_task_runs(good) -> None:
    """More new subscriptions than the check reads records of: it reads the oldest too, which the task covers."""
    from datetime import UTC, datetime

    later = datetime.fromtimestamp(good.clock[0] - 2 * 86400, UTC).astimezone(SHANGHAI)
    good.werss.accounts[:0] = [{"id": f"MP_WXS_2{n:03}", "mp_name": f"新号{n}", "status": 1,
                                "created_at": f"{later:%Y-%m-%dT%H:%M:%S}"} for n in range(60)]  # listed first
    code, lines = check()
    assert code == 0
    assert line(lines, "✓ WeRSS · 任务运行").endswith("：2/50 个公众号在其后被采集")
    assert line(lines, "! WeRSS · 新订阅").startswith("! WeRSS · 新订阅: 48 个公众号订阅后还没被任务采集过：")


def test_no_article_yet_is_a_warning_with_the_way_to_collect(good) -> None:
    good.werss.articles = []
    code, lines = check()
    assert line(lines, "! WeRSS · 最新文章") == (
        "! WeRSS · 最新文章: WeRSS 里还没有任何文章 → 扫码授权后让采集任务运行一次（WeRSS → 消息任务 → 执行），或等它的 "
        "cron")
    assert not [x for x in lines if x.startswith("✓ WeRSS · 最新文章") or x.startswith("✓ WeRSS · 正文")]


def test_a_werss_of_day_one_never_says_tick_where_it_cannot_collect(good) -> None:
    """The stranger's day one: never scanned, the task stored with mps_id "", an account added later, no
    article: every one of those lines is ✗ or !, and so is the check."""
    good.werss.wechat_scanned = False
    good.werss.message_tasks = [{**collection_task(CRON), "mps_id": ""}]
    good.werss.applied = None
    good.werss.articles = []
    code, lines = check()
    assert code == 1
    werss = [x for x in lines if " WeRSS · " in x]
    assert [x.split(":")[0] for x in werss] == [
        "✓ WeRSS · 可达", "✗ WeRSS · 微信登录", "✓ WeRSS · 公众号", "✗ WeRSS · 采集任务", "✗ WeRSS · 采集任务",
        "! WeRSS · 最新文章"]


def test_a_task_werss_cannot_load_takes_the_tick_from_the_good_ones(good) -> None:
    """One task with mps_id "" stops WeRSS loading the others after a restart: their timing is no tick then."""
    good.werss.message_tasks = [collection_task(CRON), {**collection_task(CRON), "mps_id": "", "name": "坏任务"}]
    code, lines = check()
    assert code == 1 and line(lines, "✗ WeRSS · 采集任务").startswith("✗ WeRSS · 采集任务: 任务「坏任务」无法加载")
    assert not [x for x in lines if x.startswith("✓ WeRSS · 采集任务")]


def test_a_locked_werss_account_is_told_to_restart_werss(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": good.base, "login": "admin", "password": "werss-pass-5150"}))
    good.werss.failed_logins = 5  # locked: even the right password is refused until WeRSS restarts
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ WeRSS · 凭据").endswith(
        "→ WeRSS 已锁住这个账号（连续 5 次登录失败）：重启 WeRSS 解锁（compose：docker compose restart werss；原生："
        "systemctl restart werss），改正密码后再试；建议改用 AK/SK（账号锁住时 AK/SK 照常可用）")


# ---------------------------------------------------------------------------------------- DeepSeek


def test_a_retired_model_fails_before_any_paid_call(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL", "deepseek-reasoner")
    code, lines = check(llm_call=True)
    assert code == 1
    assert line(lines, "✗ DeepSeek · 模型") == (
        "✗ DeepSeek · 模型: 'deepseek-reasoner' 不在可用列表里（可用：deepseek-flash, deepseek-v4-pro）：每次分析都会失败 → "
        "把 AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL（或 Variable radar_deepseek_model）设为列表里的一个")
    assert line(lines, "! DeepSeek · 付费调用") == "! DeepSeek · 付费调用: 没有调用：上面的检查没有通过 → 先修好上面的问题"
    assert good.deepseek.requests == []


def test_a_refused_deepseek_key_fails_and_says_the_paid_call_was_not_made(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_DEEPSEEK_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"{good.base}/deepseek", "password": "sk-wrongkey123456"}))
    code, lines = check(llm_call=True)
    assert code == 1
    assert line(lines, "✗ DeepSeek · 密钥").startswith("✗ DeepSeek · 密钥: DeepSeek rejected the API key (401: "
                                                     "Authentication Fails, Your api key is invalid)")
    assert line(lines, "! DeepSeek · 付费调用")
    assert "sk-wrongkey123456" not in "\n".join(lines)


def test_an_unreachable_deepseek_names_the_host_and_the_cause_not_the_key(good, monkeypatch) -> None:
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    port = hole.getsockname()[1]  # bound, not listening: connections are refused
    monkeypatch.setenv("AIRFLOW_CONN_DEEPSEEK_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"http://127.0.0.1:{port}", "password": "sk-test-0000"}))
    code, lines = check()
    hole.close()
    assert code == 1
    assert line(lines, "✗ DeepSeek · 可达") == (
        f"✗ DeepSeek · 可达: DeepSeek unreachable at http://127.0.0.1:{port}: ConnectionRefusedError: [Errno 111] "
        "Connection refused → 检查本机到该地址的网络（代理、防火墙、DNS），或改正 deepseek_default 连接的 host（默认 "
        "https://api.deepseek.com）")
    assert not [x for x in lines if x.startswith("✗ DeepSeek · 密钥")]


def test_llm_call_makes_exactly_one_paid_call(good) -> None:
    good.deepseek.responder = lambda body: '{"ok": true}'
    code, lines = check(llm_call=True)
    assert code == 0
    assert "秒内答出 JSON，花费 " in line(lines, "✓ DeepSeek · 付费调用")
    assert len(good.deepseek.requests) == 1


@pytest.mark.parametrize("content_type", ["text/html", "application/json"])
def test_a_deepseek_host_answering_a_web_page_is_a_line_naming_what_it_answered(good, monkeypatch, content_type) -> None:
    """A host that is not the API (a web page, a proxy's login page): a ✗ that quotes the answer, not the check's
    own crash (「请报告这个问题」)."""
    import http.server
    import threading

    body = b"<html><body>Welcome to nginx!</body></html>"

    class WebPage(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), WebPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AIRFLOW_CONN_DEEPSEEK_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"http://127.0.0.1:{server.server_port}", "password": "sk-test-0000"}))
    try:
        code, lines = check(llm_call=True)
    finally:
        server.shutdown()
    assert code == 1
    found = line(lines, "✗ DeepSeek · 可达")
    assert f"answered GET /models with no model list: HTTP 200 {content_type}: " \
           "'<html><body>Welcome to nginx!</body></html>' → 该地址有回答，但不是 DeepSeek 的 API" in found
    assert line(lines, "! DeepSeek · 付费调用") and not [x for x in lines if "请报告这个问题" in x]


# -------------------------------------------------------------------------------------------- push


def test_a_bad_apprise_url_fails_by_channel(good, monkeypatch) -> None:
    hostport = good.base.split("://", 1)[1]
    monkeypatch.setenv("AIRFLOW_CONN_RADAR_PUSH", json.dumps({
        "conn_type": "generic", "extra": {"urls": ["nosuchservice://tok3n-abcdef123456", f"json://{hostport}/push/one"]}}))
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ 推送") == (
        "✗ 推送 · 读者 nosuchservice://: 不是有效的 apprise URL → 改正它（https://github.com/caronc/apprise/wiki 列出每种"
        "服务的 URL 写法）")
    assert "tok3n-abcdef123456" not in "\n".join(lines)


def test_a_channel_that_cannot_be_reached_is_not_blamed_on_its_token(good, monkeypatch) -> None:
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    port = hole.getsockname()[1]
    monkeypatch.setenv("AIRFLOW_CONN_RADAR_PUSH", json.dumps({
        "conn_type": "generic", "extra": {"urls": [f"json://127.0.0.1:{port}/hook-token-9f8e7d"]}}))
    code, lines = check(send_test=True)
    hole.close()
    found = line(lines, "✗ 推送 · 读者")
    assert code == 1
    assert "测试消息没有送达，连不上该服务：" in found and found.endswith("→ 检查本机到该服务的网络（代理、防火墙、DNS）")
    assert " - WARNING - " not in found and " - ERROR - " not in found  # apprise's log prefix is not the reader's
    assert "hook-token-9f8e7d" not in "\n".join(lines)


def test_a_channel_that_refuses_the_message_is_told_to_check_its_token(good) -> None:
    good.sink.fail_next = 10  # the channel answers every attempt with an error status
    code, lines = check(send_test=True)
    assert code == 1
    found = next(x for x in lines if x.startswith("✗ 推送 · 读者"))
    assert "测试消息没有送达：" in found and found.endswith("→ 该服务拒绝了消息：核对 URL 里的 token / key 与服务的说明")


def test_send_test_delivers_one_message_per_channel_reported_one_by_one(good) -> None:
    code, lines = check(send_test=True)
    assert code == 0
    assert (len(good.sink.received), len(good.sink2.received), len(good.ops.received)) == (1, 1, 1)
    assert good.sink.received[0]["title"] == "机会雷达：连接测试"
    hostport = good.base.split("://", 1)[1]
    delivered = [x for x in lines if x.endswith(": 测试消息已送达")]
    assert [x.split(" · ")[1].rsplit(": 测试", 1)[0] for x in delivered] == [f"读者 json://{hostport}"] * 2 + [
        f"运维 json://{hostport}"]


# ------------------------------------------------------------------------------------------- links


def test_a_weak_link_secret_fails_and_the_other_checks_still_run(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LINK_SECRET", "short-secret")
    code, lines = check()
    assert code == 1
    assert line(lines, "✗") == (
        "✗ 链接 · 签名密钥: must be at least 32 bytes (it signs the links in pushes); make one with python3 -c "
        "'import secrets; print(secrets.token_urlsafe(32))' → 把 AIRFLOW_VAR_RADAR_LINK_SECRET 设为至少 32 字节的随机串："
        "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'")
    assert line(lines, "✓ WeRSS · 公众号")  # one bad setting does not hide the rest
    assert "short-secret" not in "\n".join(lines)


def test_an_example_files_base_url_left_as_it_was_is_no_tick(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_REPORT_BASE_URL", "https://radar.example.com/radar")  # the env files' value
    _, lines = check()
    assert line(lines, "! 链接 · report_base_url").startswith(
        "! 链接 · report_base_url: https://radar.example.com/radar 是示例地址（radar.example.com 留作文档之用")


def test_plain_http_links_on_a_public_host_fail(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_REPORT_BASE_URL", "http://radar.example.com/radar")
    code, lines = check()
    assert code == 1
    assert line(lines, "✗ 链接 · report_base_url").startswith(
        "✗ 链接 · report_base_url: http://radar.example.com/radar 是明文 http，且不在本机：签名链接（凭据）会明文传输 → "
        "用 https 反向代理")


def test_an_unset_report_base_url_is_a_warning_phones_cannot_open_it(good, monkeypatch) -> None:
    monkeypatch.delenv("AIRFLOW_VAR_RADAR_REPORT_BASE_URL")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEMO_MODE", "false")
    _, lines = check()
    assert line(lines, "! 链接 · report_base_url").startswith(
        "! 链接 · report_base_url: http://localhost:8080/radar 是本机地址：推送里的链接只在这台机器上能打开，手机打不开 → ")


def test_an_invalid_report_base_url_is_one_failure_and_no_tick_for_the_default(good, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_REPORT_BASE_URL", "radar.example.com/radar")
    code, lines = check()
    assert code == 1
    assert [x.split(":")[0] for x in lines if "report_base_url" in x] == ["✗ 链接 · report_base_url"]


def test_the_lifetime_line_says_what_a_link_and_its_session_open(good, monkeypatch) -> None:
    _, lines = check()
    assert line(lines, "✓ 链接 · 有效期") == (
        "✓ 链接 · 有效期: 签名链接 7 天内有效；头 24 小时内链接还会开一个 30 分钟的只读会话（只能看，不能投票）")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LINK_SESSION_MINUTES", "0")
    _, lines = check()
    assert line(lines, "✓ 链接 · 有效期") == "✓ 链接 · 有效期: 签名链接 7 天内有效；链接只打开它自己那一页（没有只读会话）"


# ------------------------------------------------------------------------------------ market data


def test_an_unreachable_market_source_is_a_warning_only_the_record_needs_it(good, monkeypatch) -> None:
    from include.radar.report import track_record

    def dead(settings: Any) -> Any:
        raise ConnectionError("no route to the market data source")

    monkeypatch.setenv("AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE", "akshare")
    monkeypatch.setattr(track_record, "source_from", dead)
    code, lines = check()
    assert code == 0
    assert line(lines, "! 行情数据 · akshare") == (
        "! 行情数据 · akshare: 没有回答：no route to the market data source；只影响战绩，次日自动重试 → 检查本机到 akshare "
        "数据源（新浪、东方财富）的网络")


# --------------------------------------------------------------------------------- secrets, result


def test_no_secret_reaches_the_output_or_the_stored_result(good, monkeypatch, conn) -> None:
    secrets = ["werss-password-Q9x7", "sk-deepseek-Z8y6w5", "test-link-secret-0123456789abcdef01"]
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": good.base, "login": "admin", "password": secrets[0]}))
    monkeypatch.setenv("AIRFLOW_CONN_DEEPSEEK_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"{good.base}/deepseek", "password": secrets[1]}))
    out: list[str] = []
    code = run.main(Options(timeout=3, send_test=True), out.append)
    stored = json.dumps(store.operations.status(conn, STATE_KEY), ensure_ascii=False)
    transcript = "\n".join(out)
    assert code == 1  # the refused login and key are reported...
    assert "✗ WeRSS · 凭据" in transcript and "✗ DeepSeek · 密钥" in transcript
    for secret in secrets:  # ...without their values
        assert secret not in transcript and secret not in stored


def test_the_result_is_stored_and_the_health_panel_shows_it_escaped(good, monkeypatch, db_url, conn) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MODEL", XSS)
    code, _ = check()
    assert code == 1
    stored = store.operations.status(conn, STATE_KEY)
    assert stored["failures"] == 1 and stored["ok"] >= 15
    assert stored["failing"][0].startswith(f"✗ DeepSeek · 模型: '{XSS}' 不在可用列表里")
    html = health_html(page(db_url))
    assert "部署检查" in html and f"✗ {stored['failures']}" in html
    assert f"✗ DeepSeek · 模型: &#39;{XSS_ESCAPED}&#39; 不在可用列表里" in html
    assert XSS not in html


def test_the_health_panel_says_when_no_check_has_run(db_url) -> None:
    html = health_html(page(db_url))
    assert "还没有运行过：python -m include.radar.cli check" in html


# ----------------------------------------------------------------------------------------- Airflow


def test_an_unreachable_airflow_metadata_database_is_a_failure_with_its_fix() -> None:
    def dead() -> AirflowFacts:
        time.sleep(30)
        raise AssertionError("never reached")

    started = time.monotonic()
    lines = [x.render() for x in platform.airflow_lines(load_settings(), Options(timeout=1), facts=dead)]
    assert time.monotonic() - started < 3
    assert lines == ["✗ Airflow · 元数据库: 连不上（Airflow 的元数据库 在 1 秒内没有回答） → 在 Airflow 运行的地方运行 "
                     "check（docker compose run --rm airflow-cli …），或启动它的数据库；AIRFLOW__DATABASE__SQL_ALCHEMY_CONN "
                     "必须是这套部署的"]


def test_airflow_is_read_from_its_own_metadata_database() -> None:
    """The tests' AIRFLOW_HOME was migrated by scripts/bootstrap.sh, which creates the pool."""
    facts = airflow_facts.read_airflow()
    assert facts.pool_slots == 2
    lines = [x.render() for x in platform.airflow_lines(load_settings(), Options(), facts=lambda: facts)]
    assert lines[0] == "✓ Airflow · 资源池 radar_llm: 2 个槽位（analysis_tasks = 2）"


def test_a_missing_pool_and_a_dag_import_error_fail() -> None:
    facts = AirflowFacts(pool_slots=None, dag_known=False, import_error="NameError: name 'x' is not defined")
    lines = [x.render() for x in platform.airflow_lines(load_settings(), Options(), facts=lambda: facts)]
    assert lines == [
        "✗ Airflow · 资源池 radar_llm: 不存在：分析任务会一直等下去 → 运行 airflow pools set radar_llm 2 "
        "'Opportunity Radar: analysis tasks at once'",
        "✗ Airflow · DAG opportunity_radar_slots: 导入错误：NameError: name 'x' is not defined → 修好 "
        "dags/opportunity_radar.py（airflow dags list-import-errors 显示完整的错误）"]


# ------------------------------------------------------------------------------------------- pure


def test_coverage_finds_the_slots_a_cron_does_not_serve() -> None:
    from datetime import datetime

    now = datetime(2026, 1, 8, 9, 0, tzinfo=SHANGHAI)
    assert coverage([CRON], SLOTS, now, SHANGHAI).missed == ()
    assert coverage(["0 7,12,14,18,22 * * *"], SLOTS, now, SHANGHAI).missed == SLOTS  # at the slot is too late
    assert coverage(["30 11 * * *"], SLOTS, now, SHANGHAI).missed == ("07:00", "14:00", "18:00", "22:00")
    found = coverage(["*/20 * * * *"], SLOTS, now, SHANGHAI)
    assert (found.missed, found.next_run, found.next_slot) == ((), datetime(2026, 1, 8, 9, 20, tzinfo=SHANGHAI), "12:00")


def test_the_suggested_cron_is_the_guides_half_an_hour_before_each_slot() -> None:
    from include.radar.check.schedule import suggested_cron

    assert suggested_cron(SLOTS) == "30 6,11,13,17,21 * * *"
    assert suggested_cron(("00:00", "07:00")) == "30 6,23 * * *"  # the slot at midnight: the evening before
    assert suggested_cron(("07:15", "12:00")) == "*/30 * * * *"


def test_every_line_is_typed_and_a_warning_does_not_fail() -> None:
    from include.radar.check import Report, fail, ok, warn

    report = Report([ok("a", "b", "c"), warn("a", "d", "e", "f")], datetime(2026, 1, 8, tzinfo=UTC))
    assert report.exit_code == 0 and report.lines[1].mark is Mark.WARN
    assert report.lines[1].render() == "! a · d: e → f"
    assert report.summary() == "1 ✓，1 !，0 ✗：这套部署可以工作，有几处要看一看"
    report.lines.append(fail("a", "g", "h", "i"))
    assert report.exit_code == 1 and report.as_state()["failing"] == ["✗ a · g: h → i"]
    assert report.summary() == "1 ✓，1 !，1 ✗：这套部署按现在的配置不能工作"


@pytest.mark.parametrize(("synced", "expected"), [
    ("2026-01-08 21:35", "2026-01-08 21:30"),  # the due run itself
    ("2026-01-09 00:03", "2026-01-09 00:00"),  # a later run, past midnight, overwrote the due one's start
    ("2026-01-08 22:10", None),  # 40 minutes after a cron time: a manual 「执行」, not the schedule
    ("2026-01-08 21:20", None),  # before the due run
])
def test_a_collection_start_is_read_as_the_scheduled_run_it_belongs_to(synced, expected) -> None:
    """WeRSS keeps only an account's latest collection start: any cron time from the due one on whose run it
    is (within half an hour) shows the schedule runs, across midnight too."""
    from datetime import datetime

    from include.radar.check.task_runs import _scheduled_run
    from include.radar.collect.werss import WERSS_TZ

    def at(text: str) -> datetime:
        return datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=WERSS_TZ)

    found = _scheduled_run(at(synced), ["30 21 * * *", "0 0 * * *"], at("2026-01-08 21:30"))
    assert found == (at(expected) if expected else None)


def test_the_cli_reads_connections_and_variables_kept_in_airflows_metadata_database(monkeypatch, capsys) -> None:
    """`airflow connections add` and `airflow variables set` (the guide's 三.5 and 三.6) keep them in Airflow's
    metadata database, which a process outside a task does not read: the cli reads it as Airflow's own commands
    do, and the tasks' order elsewhere is unchanged."""
    from airflow.models.connection import Connection
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session

    from include.radar.core import connection_info
    from include.radar.core import settings as radar_settings

    with create_session() as session:
        session.add(Connection(conn_id="radar_kept_werss", conn_type="http", host="http://werss.test", login="u",
                               password="kept-secret"))
        session.add(Connection(conn_id="radar_kept_db", conn_type="postgres", host="db.kept.test", login="radar",
                               password="kept-db-secret", port=5432, schema="radar"))
    Variable.set("radar_report_base_url", "https://radar.kept.test")
    Variable.set("radar_db_conn_id", "radar_kept_db")
    try:
        assert connection_info.get_connection("radar_kept_werss") is None  # outside a task: the environment only
        assert radar_settings.task_lookup()("report_base_url") is None
        with radar_settings.airflow_server_context():
            kept = connection_info.get_connection("radar_kept_werss")
            assert (kept.host, kept.password) == ("http://werss.test", "kept-secret")
            assert radar_settings.task_lookup()("report_base_url") == "https://radar.kept.test"
            assert radar_settings.load_settings().report_base_url == "https://radar.kept.test"
        assert "_AIRFLOW_PROCESS_CONTEXT" not in os.environ
        monkeypatch.delenv("RADAR_DATABASE_URL", raising=False)
        assert cli.main(["db-url"]) == 0  # the cli's own commands: the Variable names the connection kept there
        printed = capsys.readouterr().out
        assert "host=db.kept.test" in printed and "dbname=radar" in printed
        assert "_AIRFLOW_PROCESS_CONTEXT" not in os.environ
    finally:
        Variable.delete("radar_report_base_url")
        Variable.delete("radar_db_conn_id")
        with create_session() as session:
            session.query(Connection).filter(Connection.conn_id.in_(["radar_kept_werss", "radar_kept_db"])).delete()


def test_no_radar_database_configured_is_a_line_and_the_other_checks_still_run(monkeypatch) -> None:
    """An installed radar with neither RADAR_DATABASE_URL nor a radar_db connection refuses to start a database
    of its own: check says so in its ✗ line (not a traceback) and goes on with the other areas."""
    from include.radar.core import db

    def unconfigured(conn_id: str = "radar_db") -> str:
        raise db.DatabaseUnavailable("no radar database configured: set RADAR_DATABASE_URL or the radar_db connection")

    monkeypatch.setattr(db, "database_url", unconfigured)
    out: list[str] = []
    code = run.main(Options(timeout=3), out.append)
    text = "\n".join(out)
    assert code == 1 and "✗ 雷达数据库 · 可连接: no radar database configured" in text
    assert "在 worker 的环境里设置 RADAR_DATABASE_URL" in text and "Traceback" not in text
    assert "WeRSS · " in text and "推送 · " in text  # the other areas were checked
    assert cli.main(["check", "--timeout", "3"]) == 1  # and so through the cli, which loads nothing first
