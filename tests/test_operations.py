"""Operator alerts (one per cause and day, none on a rerun, never a secret), a cost that matches
DeepSeek's bill (prices at the time of each call, cache hits, peak hours) and a daily budget.

Rooms: alerts.py, seam/callbacks.py (failure callback, Deadline Alert), pricing.py, spending.py, ratelimit.py,
watch.py, steps/open_slot.py (missed slots).
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import psycopg
import pytest

from include.radar import store
from include.radar.analysis.llm import FIELD_ORDER, JSON_ONLY
from include.radar.core import db, pricing
from include.radar.core.clock import FixedClock
from include.radar.core.pricing import Usage
from include.radar.core.settings import load_settings
from include.radar.seam import callbacks
from include.radar_demo.fakes import api_error, completion
from tests.conftest import connect
from tests.slotrun import answer, article, run_slot, shanghai

SLOT = shanghai(2026, 1, 8, 14)
DAY = SLOT.date()
SECRETS = ("secret", "sk-test", "test-link-secret")


def _accounts(fakes, *mps: tuple[str, str]) -> None:
    """A WeRSS collecting these accounts: each was last collected before the day's first slot (without it, the
    slots' collection watcher rightly alerts that WeRSS is not collecting)."""
    fakes.werss.accounts = [{"id": mp, "mp_name": name} for mp, name in mps or (("MP_WXS_1", "研究所"),)]
    collected = int(shanghai(2026, 1, 8, 6, 30).timestamp())
    fakes.werss.synced.update({str(a["id"]): collected for a in fakes.werss.accounts})


def _articles(fakes, *numbers: int, at: datetime = SLOT) -> None:
    _accounts(fakes)
    fakes.werss.articles = [article(n, at - timedelta(hours=n), title=f"文章{n}") for n in numbers]
    fakes.at(at)


def _alerts(fakes) -> list[dict]:
    return fakes.ops.received


def _no_secret_in(messages: list[dict], *more: str) -> None:
    for message in messages:
        text = json.dumps(message, ensure_ascii=False)
        for secret in (*SECRETS, *more):
            assert secret not in text, f"{secret!r} leaked into an alert"


def _row(sql: str, *args) -> dict:
    with connect() as conn:
        return conn.execute(sql, args).fetchone()


# ------------------------------------------------------------------------------------------------ prices


def test_the_price_table_prices_each_call_at_its_time_with_the_cache_split():
    table = load_settings(lambda n: None).price_table()  # deepseek-v4-pro in USD, the published defaults
    assert table.currency == "USD" and not table.estimated
    peak = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)  # 10:00 Beijing, a Monday
    off_peak = datetime(2026, 11, 23, 5, 0, tzinfo=UTC)  # 13:00 Beijing
    before_peak_pricing = datetime(2026, 8, 10, 2, 0, tzinfo=UTC)  # 10:00 Beijing, before 2026-08-16
    million = {"cache_hit": 1_000_000, "cache_miss": 1_000_000, "output": 1_000_000}
    assert table.cost(peak, **million) == pytest.approx(0.044 + 1.32 + 3.96)
    assert table.cost(off_peak, **million) == pytest.approx(0.022 + 0.66 + 1.98)
    assert table.cost(before_peak_pricing, **million) == pytest.approx(0.022 + 0.66 + 1.98)
    # the windows are 09:00-12:00 and 14:00-18:00 Beijing, start inclusive, end exclusive
    assert table.is_peak(datetime(2026, 11, 23, 1, 0, tzinfo=UTC))  # 09:00
    assert not table.is_peak(datetime(2026, 11, 23, 4, 0, tzinfo=UTC))  # 12:00
    assert table.is_peak(datetime(2026, 11, 23, 9, 59, tzinfo=UTC))  # 17:59
    assert not table.is_peak(datetime(2026, 11, 23, 10, 0, tzinfo=UTC))  # 18:00
    # a cache hit costs a thirtieth of a miss: the split matters
    assert table.cost(off_peak, cache_hit=1000, cache_miss=0, output=0) * 30 == pytest.approx(
        table.cost(off_peak, cache_hit=0, cache_miss=1000, output=0))
    # a ladder of two calls, one in each period, each at its own price
    usage = Usage()
    usage.add({"prompt_tokens": 1200, "prompt_cache_hit_tokens": 200, "prompt_cache_miss_tokens": 1000,
               "completion_tokens": 500}, peak)
    usage.add({"prompt_tokens": 1200, "completion_tokens": 500}, off_peak)  # no split: all misses
    expected = (200 * 0.044 + 1000 * 1.32 + 500 * 3.96 + 1200 * 0.66 + 500 * 1.98) / 1e6
    assert usage.cost(table) == pytest.approx(expected, abs=1e-6) and usage.peak_calls(table) == 1


def test_prices_follow_the_model_currency_and_overrides():
    cny = load_settings({"deepseek_currency": "CNY"}.get).price_table()
    assert cny.rates_at(datetime(2026, 11, 23, 2, 0, tzinfo=UTC)) == pricing.Rates(0.30, 9.0, 27.0)
    flash = load_settings({"deepseek_model": "deepseek-flash"}.get).price_table()
    assert flash.off_peak == pricing.Rates(0.003, 0.15, 0.60)
    own = load_settings({"deepseek_prices": '{"cache_hit": 0.01, "cache_miss": 0.5, "output": 1}',
                         "deepseek_peak_weekdays_only": "true"}.get).price_table()
    saturday_peak_hour = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
    assert own.rates_at(saturday_peak_hour) == pricing.Rates(0.01, 0.5, 1.0)
    assert own.rates_at(saturday_peak_hour + timedelta(days=2)) == pricing.Rates(0.02, 1.0, 2.0)
    unknown = load_settings({"deepseek_model": "deepseek-v5"}.get).price_table()
    assert unknown.estimated and unknown.off_peak == pricing.DEFAULT_OFF_PEAK[("deepseek-v4-pro", "USD")]
    with pytest.raises(Exception, match="deepseek_prices"):
        load_settings({"deepseek_prices": '{"cache_hit": -1, "cache_miss": 1, "output": 1}'}.get)
    with pytest.raises(Exception, match="deepseek_price_output.*gone"):
        load_settings({"deepseek_price_output": "0.42"}.get)


def test_every_call_caps_its_tokens_and_the_stored_cost_is_the_bill_failed_rungs_included(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_PEAK_HOURS", "00:00-24:00")  # every call at peak rates
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_PEAK_SINCE", "2026-01-01T00:00:00+00:00")  # the calls are the slot's
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_TOKENS", "8192")
    _articles(fakes, 1)
    fakes.deepseek.script = [completion("not json")]  # a paid rung that failed
    fakes.deepseek.responder = lambda body: answer(72)
    run_slot(SLOT)
    assert [r["max_tokens"] for r in fakes.deepseek.requests] == [8192, 8192]
    per_call = (256 * 0.044 + 944 * 1.32 + 400 * 3.96) / 1e6  # completion(): 1200 in (256 cached), 400 out
    spend = _row("SELECT count(*) AS n, sum(cost) AS cost, max(peak_calls) AS peak, max(currency) AS cur "
                 "FROM llm_spend WHERE purpose = 'analysis'")
    assert spend["n"] == 1 and float(spend["cost"]) == pytest.approx(2 * per_call, abs=1e-6)
    assert (spend["peak"], spend["cur"]) == (2, "USD")
    analysis = _row("SELECT cost, currency FROM analysis_result")
    assert float(analysis["cost"]) == pytest.approx(2 * per_call, abs=1e-6) and analysis["currency"] == "USD"


def test_a_failed_ladder_is_still_on_the_bill(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "1")
    _articles(fakes, 1)
    fakes.deepseek.responder = lambda body: completion("oops")
    run_slot(SLOT)
    spend = _row("SELECT calls, answered, cost FROM llm_spend")
    assert (spend["calls"], spend["answered"]) == (2, 2) and float(spend["cost"]) > 0
    assert _row("SELECT count(*) AS n FROM analysis_result")["n"] == 0


# ------------------------------------------------------------------------------------------------ budget


def test_a_budget_reached_at_14_defers_the_rest_and_the_22_report_counts_them(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DAILY_BUDGET", "0.0001")  # one analysis (~$0.002) reaches it
    _articles(fakes, 1, 2, 3)
    fakes.deepseek.responder = lambda body: answer(70)
    result = run_slot(SLOT)
    assert len(fakes.deepseek.requests) == 1
    assert [o["status"] for o in result["outcomes"]] == ["analysed", "deferred", "deferred"]
    assert all("budget" in o["error"] for o in result["outcomes"][1:])
    assert result["closed"]["status"] == "success"  # deferred is not failed
    slot = _row("SELECT budget_deferred, failed_count FROM slot_run")
    assert (slot["budget_deferred"], slot["failed_count"]) == (2, 0)
    assert _row("SELECT count(*) AS n FROM content_item WHERE analyzed_status = 0")["n"] == 2  # not dropped
    [alert] = _alerts(fakes)
    assert alert["title"] == "今日 LLM 预算已用尽" and "顺延" in alert["message"]

    # 18:00 and 22:00: nothing more is paid for analyses; the 22:00 report counts the two, once each
    run_slot(shanghai(2026, 1, 8, 18))
    daily = run_slot(shanghai(2026, 1, 8, 22))
    analysis_calls = [r for r in fakes.deepseek.requests if "<<<DATA_START>>>" not in json.dumps(r, ensure_ascii=False)]
    assert len(analysis_calls) == 1
    report = _row("SELECT stats, digest_md, error FROM daily_report")
    assert report["stats"]["budget_deferred"] == 2 and "budget: 当日 LLM 预算用尽，2 篇顺延到次日分析" in report["error"]
    push = fakes.sink.received[-1]
    assert "预算用尽，2 篇顺延到次日分析" in push["message"], push
    assert daily["closed"]["status"] == "success"
    assert len(_alerts(fakes)) == 1  # the budget alert went out once that day

    # the next day the budget starts again and the deferred articles are analysed
    fakes.at(shanghai(2026, 1, 9, 7))
    run_slot(shanghai(2026, 1, 9, 7))
    assert _row("SELECT count(*) AS n FROM analysis_result")["n"] >= 2


# ------------------------------------------------------------------------------------------------ alerts


def test_a_refused_werss_login_alerts_once_without_the_password(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", json.dumps({
        "conn_type": "http", "host": fakes.base, "login": "admin", "password": "Wr0ng-pa55word-xyz",
        "extra": {"backoff_seconds": 0, "max_retries": 0}}))
    _articles(fakes, 1)
    run_slot(SLOT)
    run_slot(SLOT, run_type="manual")  # a rerun: the same cause, the same day
    run_slot(shanghai(2026, 1, 8, 18))  # another slot that day
    [alert] = _alerts(fakes)
    assert alert["title"] == "WeRSS 授权失效" and "拒绝登录" in alert["message"]
    _no_secret_in(_alerts(fakes), "Wr0ng-pa55word-xyz")
    assert not any("授权" in m["title"] for m in fakes.sink.received)  # the reader is not paged
    row = _row("SELECT occurrences, delivered FROM operator_alert WHERE cause = 'werss_auth'")
    assert row["occurrences"] >= 2 and row["delivered"]


def test_a_401_that_a_fresh_login_does_not_cure_alerts_at_once(fakes):
    _accounts(fakes, ("MP_WXS_1", "研究所"), ("MP_WXS_2", "前哨站"))
    fakes.werss.failing_accounts = {"MP_WXS_1": 401}
    fakes.at(SLOT)
    run_slot(SLOT)
    run_slot(SLOT, run_type="manual")
    [alert] = _alerts(fakes)
    assert alert["title"] == "WeRSS 授权失效" and "401" in alert["message"]


def test_two_slots_that_ingest_nothing_while_werss_says_its_session_expired_are_an_auth_stall(fakes):
    _accounts(fakes, ("MP_WXS_1", "研究所"), ("MP_WXS_2", "前哨站"))
    fakes.werss.failing_accounts = {"MP_WXS_1": 406, "MP_WXS_2": 406}
    fakes.werss.failing_message = "微信登录已过期，请重新扫码授权 ({status})"
    fakes.at(SLOT)
    run_slot(shanghai(2026, 1, 8, 12))
    run_slot(shanghai(2026, 1, 8, 12), run_type="manual")  # a rerun of the same slot counts once
    assert _alerts(fakes) == []
    run_slot(SLOT)
    [alert] = _alerts(fakes)
    assert alert["title"] == "WeRSS 授权失效" and "连续 2 个时段" in alert["message"]
    run_slot(shanghai(2026, 1, 8, 18))
    assert len(_alerts(fakes)) == 1
    state = _row("SELECT value FROM service_state WHERE key = 'werss:status'")["value"]
    assert state["last_status"] == "failed" and state["auth_stalled_slots"] == 3


def test_an_account_silent_for_three_times_its_cadence_is_reported(fakes):
    _accounts(fakes, ("MP_WXS_1", "研究所"), ("MP_WXS_2", "前哨站"))
    fakes.werss.articles = [article(n, SLOT - timedelta(hours=46 + 6 * n), title=f"旧文{n}") for n in range(4)]
    fakes.werss.articles += [article(10 + n, SLOT - timedelta(hours=1 + 6 * n), mp="MP_WXS_2", title=f"新文{n}")
                             for n in range(4)]
    fakes.at(SLOT)
    fakes.deepseek.responder = lambda body: answer(30)
    run_slot(SLOT)
    run_slot(SLOT, run_type="manual")
    [alert] = _alerts(fakes)
    assert alert["title"] == "公众号长时间没有新文章"
    assert "研究所" in alert["message"] and "前哨站" not in alert["message"]


def test_a_429_streak_waits_costs_no_rung_throttles_the_slot_and_alerts_once(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_RATE_LIMIT_WAIT_SECONDS", "30")
    _articles(fakes, 1, 2)
    limited = (*api_error(429, "Rate limit reached for requests", "rate_limit_error"), {"Retry-After": "0.05"})
    fakes.deepseek.script = [limited, limited, limited]
    fakes.deepseek.responder = lambda body: answer(70)
    result = run_slot(SLOT)
    assert [o["status"] for o in result["outcomes"]] == ["analysed", "analysed"]
    users = fakes.deepseek.user_messages()
    assert len(users) == 5 and users[3] == users[0]  # the answer came on the first rung: nothing burnt
    assert not users[3].endswith((JSON_ONLY, FIELD_ORDER))
    assert _row("SELECT max(attempts) AS n FROM content_item")["n"] == 1
    state = _row("SELECT value FROM service_state WHERE key = 'deepseek:status'")["value"]
    assert state["throttled_slot_run_id"] == result["slot"]["slot_run_id"] and state["streak"] == 0
    assert state["last_status"] == "ok"
    [alert] = _alerts(fakes)
    assert alert["title"] == "DeepSeek 调用异常" and "429" in alert["message"]
    assert _row("SELECT sum(rate_limited) AS n FROM llm_spend")["n"] == 3  # waited, on the bill's record


def test_a_rate_limit_that_never_lifts_ends_in_a_failed_ladder_not_a_loop(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_RATE_LIMIT_WAIT_SECONDS", "0.2")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "1")
    _articles(fakes, 1)
    limited = (*api_error(429, "Rate limit reached", "rate_limit_error"), {"Retry-After": "0.05"})
    fakes.deepseek.responder = lambda body: limited
    result = run_slot(SLOT)
    assert result["outcomes"][0]["status"] == "failed"
    assert 2 < len(fakes.deepseek.requests) <= 2 + 4 + 1  # a few free waits, then the two rungs
    assert len(_alerts(fakes)) == 1


def test_a_rejected_deepseek_key_alerts_once_without_the_key(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_DEEPSEEK_DEFAULT", json.dumps({
        "conn_type": "http", "host": f"{fakes.base}/deepseek", "password": "sk-wrongkey0123456789",
        "extra": {"backoff_seconds": 0}}))
    _articles(fakes, 1, 2)
    run_slot(SLOT)
    run_slot(SLOT, run_type="manual")
    [alert] = _alerts(fakes)
    assert alert["title"] == "DeepSeek 调用异常" and "401" in alert["message"]
    _no_secret_in(_alerts(fakes), "sk-wrongkey0123456789")


def test_more_than_half_of_a_slots_analyses_failing_alerts(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "0")
    _articles(fakes, 1, 2, 3)
    fakes.deepseek.script = [completion("oops"), completion("oops")]
    fakes.deepseek.responder = lambda body: answer(40)
    run_slot(SLOT)
    [alert] = _alerts(fakes)
    assert alert["title"] == "DeepSeek 调用异常" and "3 篇分析中 2 篇失败" in alert["message"]


def test_one_failed_analysis_of_two_is_not_an_alert(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "0")
    _articles(fakes, 1, 2)
    fakes.deepseek.script = [completion("oops")]
    fakes.deepseek.responder = lambda body: answer(40)
    run_slot(SLOT)
    assert _alerts(fakes) == []


def test_a_daily_report_that_cannot_be_delivered_alerts_once(fakes, monkeypatch):
    _articles(fakes, 1, at=shanghai(2026, 1, 8, 22))
    fakes.deepseek.responder = lambda body: answer(40)
    fakes.sink.fail_next = fakes.sink2.fail_next = 100
    first = run_slot(shanghai(2026, 1, 8, 22))
    assert "push_daily_report" in first["closed"]["error"]
    run_slot(shanghai(2026, 1, 8, 22), run_type="manual", params={"push_mode": "force"})
    [alert] = _alerts(fakes)
    assert alert["title"] == "22:00 日报未按时送达" and "2026-01-08" in alert["message"]
    _no_secret_in(_alerts(fakes))


def test_slots_that_never_ran_are_alerted_at_the_next_run(fakes):
    _accounts(fakes)
    fakes.at(SLOT)
    run_slot(shanghai(2026, 1, 8, 7))
    assert _alerts(fakes) == []  # the radar's first slot: nothing before it was due
    run_slot(shanghai(2026, 1, 8, 18))
    [alert] = _alerts(fakes)
    assert alert["title"] == "有时段没有运行" and "01-08 12:00、01-08 14:00" in alert["message"]
    run_slot(shanghai(2026, 1, 8, 18), run_type="manual")
    run_slot(shanghai(2026, 1, 8, 22))
    run_slot(shanghai(2026, 1, 9, 7))  # the next day's first slot does not report yesterday's miss again
    assert len(_alerts(fakes)) == 1
    assert _row("SELECT count(*) AS n FROM operator_alert")["n"] == 1


def test_the_daily_runs_deadline_alert_tells_the_operator_when_the_report_is_not_out(fakes):
    context = {"dag_run": {"logical_date": "2026-01-08T14:00:00Z", "dag_run_id": "scheduled__2026-01-08T14:00:00+00:00"}}
    assert callbacks._daily_deadline_missed({"dag_run": {"logical_date": "2026-01-08T06:00:00Z"}}) is None
    # a backfill of a past day's 22:00 pushes nothing: its deadline (long past) is not a missed report
    backfill = {"dag_run": {"logical_date": "2026-01-08T14:00:00Z", "run_type": "backfill",
                            "dag_run_id": "backfill__2026-01-08T14:00:00+00:00"}}
    assert callbacks._daily_deadline_missed(backfill) is None and _alerts(fakes) == []
    asyncio.run(callbacks.daily_deadline_missed(context=context))
    assert callbacks._daily_deadline_missed(context) == "already"
    [alert] = _alerts(fakes)
    # a run working to a later deadline (daily_push_deadline_minutes set as a Variable) is not late yet
    from include.radar.steps.open_slot import open_slot
    from include.radar.steps.runtime import Runtime

    rt = Runtime.load(FixedClock(shanghai(2026, 1, 9, 22, 1)))
    slot = open_slot(rt, run_after=shanghai(2026, 1, 9, 22), run_type="scheduled", dag_id="d",
                              dag_run_id="r", params={})
    with connect() as conn:
        conn.execute("UPDATE slot_run SET deadline_at = now() + interval '20 minutes' WHERE id = %s",
                     (slot["slot_run_id"],))
    assert callbacks._daily_deadline_missed({"dag_run": {"logical_date": "2026-01-09T14:00:00Z"}}) is None
    assert alert["title"] == "22:00 日报未按时送达" and "仍未送达" in alert["message"]


def test_the_deadline_alert_is_wired_on_the_dag(monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    from include.radar import DAG_ID
    from tests.conftest import REPO

    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DAILY_DEADLINE_ALERT", "true")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DAILY_PUSH_DEADLINE_MINUTES", "12")
    dag = DagBag(dag_folder=str(REPO / "dags")).dags[DAG_ID]
    [alert] = dag.deadline
    assert alert.interval == timedelta(minutes=13)
    assert "daily_deadline_missed" in str(alert.callback.path)
    for task in dag.tasks:
        hooks = task.on_failure_callback if isinstance(task.on_failure_callback, list) else [task.on_failure_callback]
        assert any(isinstance(c, callbacks.AlertNotifier) for c in hooks), task.task_id


# --- `airflow dags test` with the Deadline Alert on (apache/airflow#73428) --------------------------------


def _without_the_alert_switch() -> dict[str, str]:
    """This process's environment (the fakes' connections included) with daily_deadline_alert at its default."""
    import os

    return {k: v for k, v in os.environ.items() if k != "AIRFLOW_VAR_RADAR_DAILY_DEADLINE_ALERT"}


def _deadlines_of(run_id: str) -> list[tuple[datetime, str]]:
    """(deadline time, callback) of each deadline Airflow made for the run, from its metadata database."""
    from airflow import settings
    from airflow.models import DagRun
    from airflow.models.deadline import Deadline
    from sqlalchemy import select

    session = settings.Session()
    try:
        found = session.scalars(select(Deadline).join(DagRun).where(DagRun.run_id == run_id))
        return [(d.deadline_time, str(d.callback)) for d in found]
    finally:
        session.close()


@pytest.mark.e2e
def test_airflow_dags_test_runs_a_slot_of_the_dag_with_its_deadline_alert(fakes):
    """The first command many run on a new DAG, on the default settings: the run succeeds and the command
    says so (Airflow 3.3.2 alone ends it with "'dict' object has no attribute 'hex'" and exit 1)."""
    import re

    from include.radar import DAG_ID
    from include.radar_demo.waiting import run

    _articles(fakes, 1)
    fakes.deepseek.responder = lambda b: answer(40)
    env = {**_without_the_alert_switch(), "AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES": str(366 * 24 * 60)}
    done = run(["airflow", "dags", "test", DAG_ID, SLOT.isoformat()], env=env)  # as long as it works, under any load
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "no attribute 'hex'" not in out and "Traceback" not in out
    finished = re.search(r"DagRun Finished: dag_id=opportunity_radar_slots, .*?run_id=(\S+), .*?state=(\w+)", out)
    assert finished and finished.group(2) == "success", out[-4000:]
    # the alert was live in this run: Airflow gave it a deadline at the slot's time plus the deadline and a minute
    [(due, callback)] = _deadlines_of(finished.group(1).rstrip(","))
    assert due == SLOT + timedelta(minutes=11) and "daily_deadline_missed" in callback
    assert _row("SELECT status FROM slot_run")["status"] == store.common.SUCCESS


@pytest.mark.e2e
def test_the_dag_the_scheduler_reads_still_carries_the_deadline_alert():
    """What the dag-processor stores for the scheduler (the serialised DAG and its deadline_alert rows), read
    back with Airflow's own lookup, unpatched: the workaround of `dags test` takes nothing from it."""
    from airflow.models.deadline_alert import DeadlineAlert as DeadlineAlertModel
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.serialization.definitions.deadline import SerializedReferenceModels

    from include.radar import DAG_ID
    from include.radar_demo.waiting import run

    done = run(["airflow", "dags", "reserialize"], env=_without_the_alert_switch())
    assert done.returncode == 0, done.stderr[-4000:]
    scheduler_dag = SerializedDagModel.get_dag(DAG_ID)
    assert scheduler_dag is not None and len(scheduler_dag.deadline) == 1
    assert DeadlineAlertModel.get_by_id.__module__ == "airflow.models.deadline_alert"
    alert = DeadlineAlertModel.get_by_id(scheduler_dag.deadline[0])
    assert alert.reference_class in SerializedReferenceModels.TYPES.DAGRUN
    assert alert.interval["__data__"] == 11 * 60
    assert alert.callback_def["__data__"]["path"] == "include.radar.seam.callbacks.daily_deadline_missed"


@pytest.mark.e2e
def test_airflow_still_needs_the_dags_test_mend(dag, fakes):
    """Airflow's own DAG.test() still fails on a successful run of a DAG with a Deadline Alert. When this test
    fails, the pinned Airflow has the fix of apache/airflow#73428: remove callbacks.mend_dag_test."""
    from airflow import settings

    assert dag.deadline, "the DAG is parsed with its deadline alert"
    _accounts(fakes)
    fakes.at(SLOT)
    at = SLOT + timedelta(seconds=7)  # a run of its own: it is left unfinished
    try:
        with pytest.raises(Exception, match="no attribute 'hex'"):
            type(dag).test(dag, logical_date=at, run_after=at)
    finally:
        settings.Session.remove()
    # and the same run through the DAG's own test() (what `airflow dags test` calls) ends
    run = dag.test(logical_date=at + timedelta(seconds=1), run_after=at + timedelta(seconds=1))
    assert str(run.state) == "success"
    # Airflow's lookup is its own again once test() returns
    from airflow.models.deadline_alert import DeadlineAlert as DeadlineAlertModel

    assert DeadlineAlertModel.get_by_id.__module__ == "airflow.models.deadline_alert"


def test_the_failure_notifier_names_the_cause_and_never_the_secret(fakes):
    fakes.werss.accounts = []

    def ti(task_id: str):
        return SimpleNamespace(task_id=task_id, dag_id="opportunity_radar_slots", run_id="scheduled__x",
                               map_index=-1, log_url=None, xcom_pull=lambda task_ids: None)

    notifier = callbacks.AlertNotifier()
    notifier.notify({"ti": ti("ingest"), "exception": RuntimeError("WeRSSAuthError: refused password=hunter2hunter2")})
    notifier.notify({"ti": ti("push_daily_report"), "exception": RuntimeError("PushFailed: json://x")})
    notifier.notify({"ti": ti("summarise"), "exception": ValueError("boom")})
    notifier.notify({"ti": ti("close_slot"), "exception": ValueError("boom again")})
    titles = [m["title"] for m in _alerts(fakes)]
    assert titles == ["WeRSS 授权失效", "22:00 日报未按时送达", "任务失败"]
    _no_secret_in(_alerts(fakes), "hunter2hunter2")


def test_alerts_go_to_the_readers_channels_marked_when_no_operator_channel_is_set(fakes, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_RADAR_OPS_PUSH")
    _accounts(fakes)
    fakes.at(SLOT)
    run_slot(shanghai(2026, 1, 8, 7))
    run_slot(shanghai(2026, 1, 8, 18))
    alerts = [m for m in fakes.sink.received if m["title"].startswith("【运维】")]
    assert [a["title"] for a in alerts] == ["【运维】有时段没有运行"]


def test_alerts_on_the_readers_channel_carry_none_of_what_the_pages_hide(fakes, monkeypatch):
    """Without an operator channel an alert reaches whoever reads the reader's pushes (a family chat, a forward):
    it says what is wrong and what to do, never its detail (a rule's text, the day's spend), which the overview
    shows an Airflow login only. With an operator channel the detail goes there."""
    from include.radar.steps.runtime import Runtime

    details = {"rules_slow": "switched off !/秘密规则[ab]*a[ab]{150}c/ (900 ms)", "budget": "spent 12.3456 of 12.00 USD"}
    ops = os.environ["AIRFLOW_CONN_RADAR_OPS_PUSH"]
    monkeypatch.delenv("AIRFLOW_CONN_RADAR_OPS_PUSH")
    rt = Runtime.load()
    assert [rt.alert(cause, detail) for cause, detail in details.items()] == ["sent", "sent"]
    shared = json.dumps(fakes.sink.received, ensure_ascii=False)
    assert [m["title"] for m in fakes.sink.received] == ["【运维】读者的正则规则太慢", "【运维】今日 LLM 预算已用尽"]
    assert "秘密规则" not in shared and "12.3456" not in shared and "处理：" in shared and "登录 Airflow" in shared
    with connect() as conn:  # recorded whole, for the overview's Airflow login
        kept = [r["detail"] for r in conn.execute("SELECT detail FROM operator_alert ORDER BY id")]
    assert kept == list(details.values())
    monkeypatch.setenv("AIRFLOW_CONN_RADAR_OPS_PUSH", ops)
    rt = Runtime.load()
    assert rt.alert("deepseek", "HTTP 401 for deepseek-flash") == "sent"
    assert "HTTP 401 for deepseek-flash" in json.dumps(fakes.ops.received, ensure_ascii=False)


@pytest.mark.e2e
def test_a_task_that_fails_for_good_alerts_through_airflows_failure_callback(dag, fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES", str(366 * 24 * 60))
    _articles(fakes, 1)
    fakes.deepseek.responder = lambda b: answer(40)

    def crash(conn, record, *args, **kwargs):
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(store.analyses, "insert_analysis", crash)
    run = dag.test(logical_date=SLOT, run_after=SLOT)
    assert str(run.state) == "failed"
    titles = [m["title"] for m in _alerts(fakes)]
    assert titles == ["任务失败"]  # analyse (after its retry) and close_slot failed: one cause, one alert
    assert "analyse" in _alerts(fakes)[0]["message"] or "close_slot" in _alerts(fakes)[0]["message"]
    assert _row("SELECT occurrences FROM operator_alert WHERE cause = 'task_failed'")["occurrences"] >= 2


def test_alerting_never_fails_the_step_that_raised_it(fakes, monkeypatch):
    from include.radar.steps.runtime import Runtime

    monkeypatch.setenv("AIRFLOW_CONN_RADAR_OPS_PUSH", json.dumps({"conn_type": "generic", "extra": {"urls": []}}))
    monkeypatch.setenv("AIRFLOW_CONN_RADAR_PUSH", json.dumps({"conn_type": "generic", "extra": {"urls": []}}))
    rt = Runtime.load()
    assert rt.alert("budget", "no channel anywhere") == "failed"
    row = _row("SELECT delivered, delivery_error FROM operator_alert")
    assert not row["delivered"] and "no push channel" in row["delivery_error"]


def test_a_throttled_slot_has_one_call_in_flight_at_a_time(db_url):
    import threading
    import time as clock

    from include.radar.analysis.ratelimit import DatabaseGate

    def connect():
        return db.connect(db_url)

    with db.connect(db_url) as conn:
        store.operations.update_status(conn, "deepseek:status", lambda s: {**s, "throttled_slot_run_id": 7})
    inside, overlaps, lock = [0], [0], threading.Lock()

    def call(slot_run_id: int) -> None:
        gate = DatabaseGate(connect, slot_run_id)
        gate.wait(30)
        with gate.in_flight(30):
            with lock:
                inside[0] += 1
                overlaps[0] = max(overlaps[0], inside[0])
            clock.sleep(0.3)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=call, args=(7,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps[0] == 1  # the throttled slot's calls went one at a time
    overlaps[0] = 0
    threads = [threading.Thread(target=call, args=(8,)) for _ in range(3)]  # another slot is not throttled
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps[0] >= 2  # not serialised (thread timing decides how many overlap)


def test_an_evaluation_s_calls_never_speak_for_the_slots_deepseek(db_url):
    # on the slots' connection the candidate shares their cool-down but its outcomes are not the slots' (the
    # overview shows that state); on a connection of its own it has a state and a lock of its own
    from include.radar.analysis import ratelimit
    from include.radar.evaluation import shadow

    def connect():
        return db.connect(db_url)

    settings = load_settings(use_airflow=False)
    with db.connect(db_url) as conn:
        store.operations.update_status(conn, ratelimit.KEY, lambda s: {**s, "last_status": "ok", "streak": 0})
    shared = shadow.gate_of(connect, settings, shadow.Candidate(model="m"), 5)
    shared.failed("candidate's own failure")
    shared.limited(30, "429 from the candidate")
    with db.connect(db_url) as conn:
        state = store.operations.status(conn, ratelimit.KEY)
    assert state["last_status"] == "ok" and "last_error" not in state  # not shown as the slots' failure
    assert state["streak"] == 1 and state["cool_down_until"]  # the limit is the endpoint's: shared
    own = shadow.gate_of(connect, settings, shadow.Candidate(model="m", conn_id="other_llm"), 5)
    assert (own.key, own.lock) == ratelimit.own_state("other_llm") and own.lock != shared.lock
    own.limited(60, "429 from another endpoint")
    own.failed("boom")
    with db.connect(db_url) as conn:
        assert store.operations.status(conn, ratelimit.KEY)["streak"] == 1  # the slots' state untouched
        assert store.operations.status(conn, "deepseek:status:other_llm")["last_status"] == "failed"


def test_the_rate_limit_wait_bounds_every_sleep_of_a_ladder_cool_downs_included(fakes, db_url):
    from include.radar.analysis.llm import LLMClient, LLMExhausted, LLMOptions
    from include.radar.analysis.ratelimit import DatabaseGate
    from include.radar.analysis.schemas import ArticleAnalysis

    fakes.deepseek.responder = lambda body: (*api_error(429, "Rate limit reached", "rate_limit_error"),
                                             {"Retry-After": "600"})
    slept: list[float] = []

    class Recording(FixedClock):
        def sleep(self, seconds: float) -> None:  # the ladder's waits and the gate's cool-downs, none for real
            slept.append(seconds)

    clock = Recording(datetime.now(UTC))
    client = LLMClient(base_url=f"{fakes.base}/deepseek", api_key="sk-test", model="deepseek-v4-pro",
                       options=LLMOptions(max_retries=2, backoff_seconds=0, rate_limit_wait=5), clock=clock,
                       gate=DatabaseGate(lambda: db.connect(db_url), 1, clock=clock))
    with pytest.raises(LLMExhausted):
        client.complete_json("system json", "user", ArticleAnalysis)
    assert sum(slept) <= 5  # DeepSeek asked for 600 s; the ladder waited no more than its allowance
    assert len(fakes.deepseek.requests) == 3  # each 429 past the allowance spent a rung
