"""Everything has a deadline. Total deadlines on WeRSS and DeepSeek calls (a trickling server
cannot stretch them), bounded database sessions, an execution timeout on every task, the 22:00 report pushed
by its deadline whatever else is happening, and a failed open_slot that fails the run at once.

Rooms: werss.py, llm.py, db.py (statement and lock timeouts), deadlines.py, runtime.py (``DeadlinePassed``), the
DAG's execution timeouts, steps/open_slot.py, steps/daily_report.py.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from include.radar import store
from include.radar.analysis.llm import LLMClient, LLMDeadline, LLMExhausted, LLMOptions
from include.radar.analysis.schemas import ArticleAnalysis
from include.radar.collect.werss import Credentials, WeRSSClient, WeRSSDeadline, WeRSSError
from include.radar.core import db
from include.radar.core.deadlines import daily_deadlines, retry_is_pointless
from include.radar.operations.connections import ConfigurationError
from include.radar.steps.open_slot import open_slot
from include.radar.steps.runtime import Runtime
from include.radar_demo.fakes import FakeDeepSeek, FakeWeRSS, serve
from tests.conftest import connect
from tests.slotrun import answer, run_slot, shanghai, task_states

pytestmark = pytest.mark.hostile

DAILY = shanghai(2026, 1, 8, 22)


# ------------------------------------------------------------------------------------ total deadlines


def _trickling_werss() -> str:
    werss = FakeWeRSS(accounts=[{"id": "MP_WXS_1", "mp_name": "研究所"}], trickle_seconds_per_byte=0.2)
    return "http://" + serve(werss.handle)


def test_a_werss_that_trickles_one_byte_at_a_time_is_cut_at_the_request_timeout():
    client = WeRSSClient(_trickling_werss(), Credentials("admin", "secret"), timeout=1.0, max_retries=0)
    started = time.monotonic()
    with pytest.raises(WeRSSError, match="no complete answer within 1s"):
        client.accounts()
    assert time.monotonic() - started < 2.5  # a per-read timeout would wait for every byte: about 30 s


def test_werss_retries_stop_at_the_callers_deadline():
    client = WeRSSClient(_trickling_werss(), Credentials("admin", "secret"), timeout=1.0, max_retries=5,
                         backoff_seconds=0.1, deadline=time.monotonic() + 2.5)
    started = time.monotonic()
    with pytest.raises(WeRSSDeadline):
        client.accounts()
    assert time.monotonic() - started < 3.5


def _slow_deepseek(seconds: float) -> str:
    return "http://" + serve(FakeDeepSeek(responder=lambda b: answer(70), delay_seconds=seconds).handle)


def test_a_deepseek_holding_the_line_with_keepalives_is_cut_at_the_call_timeout():
    client = LLMClient(base_url=_slow_deepseek(30), api_key="sk-test", model="deepseek-v4-pro",
                       options=LLMOptions(timeout=1.0, max_retries=1, backoff_seconds=0))
    started = time.monotonic()
    with pytest.raises(LLMExhausted, match="no complete answer within 1s"):
        client.complete_json("s", "u", ArticleAnalysis)
    assert time.monotonic() - started < 3.5  # two calls of ~1 s each


def test_the_ladder_stops_at_the_callers_deadline_and_says_so():
    client = LLMClient(base_url=_slow_deepseek(30), api_key="sk-test", model="deepseek-v4-pro",
                       options=LLMOptions(timeout=60.0, max_retries=3, backoff_seconds=0))
    started = time.monotonic()
    with pytest.raises(LLMDeadline, match="deadline reached after 1 calls") as info:
        client.complete_json("s", "u", ArticleAnalysis, deadline=time.monotonic() + 7)
    assert time.monotonic() - started < 8.5
    assert info.value.usage.calls == 1  # what it cost is known to the caller


# ------------------------------------------------------------------------------------- the database


def test_radar_sessions_bound_statements_and_lock_waits(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DB_STATEMENT_TIMEOUT_SECONDS", "1")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DB_LOCK_TIMEOUT_SECONDS", "0.5")
    rt = Runtime.load()
    with rt.connect() as conn:
        assert conn.execute("SHOW statement_timeout").fetchone()["statement_timeout"] == "1s"
        assert conn.execute("SHOW lock_timeout").fetchone()["lock_timeout"] == "500ms"
    started = time.monotonic()
    with pytest.raises(psycopg.errors.QueryCanceled), rt.connect() as conn:
        conn.execute("SELECT pg_sleep(5)")
    assert time.monotonic() - started < 3
    with connect() as holder:  # another session holds the slot_run table
        holder.execute("LOCK TABLE slot_run IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        with pytest.raises(psycopg.errors.LockNotAvailable), rt.connect() as conn:
            conn.execute("SELECT count(*) FROM slot_run")
        assert time.monotonic() - started < 3


def test_every_task_of_the_dag_has_an_execution_timeout(dag):
    for task in dag.tasks:
        assert task.execution_timeout is not None, task.task_id
        assert task.execution_timeout <= timedelta(minutes=45), task.task_id
    # a live analysis keeps its claims: their lease is renewed several times within it
    assert store.claims.HEARTBEAT * 4 <= store.claims.LEASE


# ----------------------------------------------------------------------------- the daily deadline


def test_the_phases_share_the_budget_and_a_late_run_gets_its_own():
    scheduled = datetime(2026, 1, 8, 14, tzinfo=UTC)
    on_time = daily_deadlines(scheduled, scheduled + timedelta(seconds=20), 10)
    assert on_time.push == scheduled + timedelta(minutes=10)
    assert on_time.phases["ingest"] < on_time.phases["analysis"] < on_time.phases["report"] < on_time.push
    late = daily_deadlines(scheduled, scheduled + timedelta(hours=9), 10)
    assert late.push == scheduled + timedelta(hours=9, minutes=10)
    assert retry_is_pointless("ingest", on_time, on_time.phases["ingest"] - timedelta(seconds=30))
    assert not retry_is_pointless("ingest", on_time, scheduled)
    assert not retry_is_pointless("push_daily_report", on_time, on_time.push)  # a late push beats none


def _open(fakes, when, **params):
    rt = Runtime.load()
    return open_slot(rt, run_after=when, run_type=params.pop("run_type", "scheduled"), dag_id="d",
                              dag_run_id=f"r-{when}", params=params)


def test_only_the_run_that_delivers_the_days_report_is_bound_by_the_deadline(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES", str(366 * 24 * 60))
    assert _open(fakes, shanghai(2026, 1, 8, 14))["deadlines"] == {}  # daytime slots: the steps' own limits
    assert _open(fakes, DAILY, run_type="backfill")["deadlines"] == {}  # nobody waits for a backfill
    assert set(_open(fakes, DAILY)["deadlines"]) == {"ingest", "analysis", "report", "push"}
    with connect() as conn:  # once the day's report is out, reruns run on their own limits
        conn.execute(
            "INSERT INTO notification_log (msg_uuid, report_date, slot, push_type, target_url, channel, status) "
            "VALUES ('x', '2026-01-08', '22:00', 'daily', 'u', 'json://', 1)"
        )
    assert _open(fakes, DAILY)["deadlines"] == {}


def _pending_articles(n: int) -> None:
    with connect() as conn:
        account = store.articles.upsert_account(conn, "MP_WXS_1", "研究所")
        for i in range(n):
            store.articles.insert_content_item(conn, {
                "external_id": f"1-{i}", "account_id": account["id"], "mp_id": "MP_WXS_1", "title": f"待分析文章{i}",
                "url": f"https://mp.weixin.qq.com/s/{i}", "published_at": DAILY - timedelta(hours=i + 1),
                "raw_html_size": 100, "clean_text": f"正文{i}：某储能龙头订单增长。", "content_hash": f"h{i}",
                "body_status": store.common.BODY_READY, "last_error": None, "slot_run_id": None,
            })


def test_the_daily_report_goes_out_by_its_deadline_with_a_slow_llm_and_a_trickling_werss(fakes, monkeypatch):
    """Scaled down (a 15 s deadline, an LLM that answers after a minute, a WeRSS dripping 4 bytes a second):
    the report is built from what is done, lists the pending analyses, and its push is on time."""
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DAILY_PUSH_DEADLINE_MINUTES", "0.25")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES", str(366 * 24 * 60))
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    werss_at = serve(FakeWeRSS(accounts=fakes.werss.accounts, trickle_seconds_per_byte=0.25).handle)
    deepseek = FakeDeepSeek(responder=lambda b: answer(80), delay_seconds=60)
    deepseek_at = serve(deepseek.handle)
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"http://{werss_at}", "login": "admin", "password": "secret",
        "extra": {"backoff_seconds": 0, "max_retries": 2}}))
    monkeypatch.setenv("AIRFLOW_CONN_DEEPSEEK_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"http://{deepseek_at}", "password": "sk-test", "extra": {"backoff_seconds": 0}}))
    _pending_articles(2)
    pushed_at: list[float] = []
    fakes.sink.on_message = lambda message: pushed_at.append(time.monotonic())
    started = time.monotonic()
    result = run_slot(DAILY)
    assert pushed_at and pushed_at[0] - started <= 15 + 1.5, pushed_at[0] - started  # on time
    report = _report()
    assert report["status"] == store.common.REPORT_PARTIAL and report["digest_json"]["source"] == "fallback"
    assert report["stats"]["pending"] == 2
    assert {p["title"] for p in report["digest_json"]["pending"]} == {"待分析文章0", "待分析文章1"}
    [message] = fakes.sink.received
    assert "待分析 2 篇" in message["message"] and "部分结果" in message["message"]
    assert "日报生成失败" not in message["message"]
    assert "ingest" in result["errors"]  # WeRSS could not be read in time: a visible failure of the slot
    with connect() as conn:
        outcomes = [r["outcome"] for r in conn.execute("SELECT outcome FROM analysis_attempt ORDER BY id")]
        slot = conn.execute("SELECT deferred_count, status FROM slot_run").fetchone()
        items = conn.execute("SELECT analyzed_status, attempts FROM content_item ORDER BY id").fetchall()
    assert outcomes == ["interrupted"]  # the one call that fit was cut; the other article was never started
    assert slot["deferred_count"] == 2 and slot["status"] == store.common.SLOT_FAILED
    assert [i["analyzed_status"] for i in items] == [store.common.PENDING, store.common.PENDING]  # the next slots take them


def _report():
    with connect() as conn:
        return store.reports.get_daily_report(conn, DAILY.date())


# --------------------------------------------------------------------------------- a failed open_slot


@pytest.mark.e2e
@pytest.mark.parametrize("cause", ["run_date in the future", "database down"])
def test_a_failed_open_slot_fails_the_run_at_once_and_nothing_else_runs(dag, fakes, monkeypatch, cause):
    from airflow.sdk import DagRunState

    params = {}
    if cause == "run_date in the future":  # (an impossible date never gets this far: the trigger form refuses it)
        params = {"run_date": "2099-01-01"}
    else:
        monkeypatch.setenv("RADAR_DATABASE_URL", "postgresql://postgres@127.0.0.1:1/none?connect_timeout=1")
    started = time.monotonic()
    run = dag.test(logical_date=shanghai(2026, 1, 8, 14), run_after=shanghai(2026, 1, 8, 14), run_conf=params)
    states = task_states(run)
    assert run.state == DagRunState.FAILED and states.pop("open_slot") == ["failed"]
    assert set(sum(states.values(), [])) == {"upstream_failed"}, states  # no task ran, none retried
    assert time.monotonic() - started < 60


def test_open_slot_says_clearly_why_it_failed(fakes):
    rt = Runtime.load()
    with pytest.raises(ConfigurationError, match=r"run_date='2026-02-30' is not a YYYY-MM-DD date"):
        open_slot(rt, run_after=DAILY, run_type="manual", dag_id="d", dag_run_id="r",
                           params={"run_date": "2026-02-30"})
    down = Runtime(settings=rt.settings, database_url="postgresql://postgres:pw@127.0.0.1:1/none")
    with pytest.raises(db.DatabaseUnavailable, match=r"cannot reach the radar database at .*:\*\*\*@127.0.0.1:1"):
        open_slot(down, run_after=DAILY, run_type="scheduled", dag_id="d", dag_run_id="r", params={})
