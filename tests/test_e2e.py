"""End-to-end: the real DAG through ``dag.test()`` against the WeRSS, DeepSeek and push fakes."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from include.radar import store
from tests.conftest import connect
from tests.slotrun import answer, article, shanghai
from tests.slotrun import task_states as _states

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _never_late(fakes, monkeypatch):
    """These runs replay January 2026 slots now; lateness is tested in test_push / test_daily."""
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES", str(366 * 24 * 60))


def _rows(sql: str) -> list[dict]:
    with connect() as conn:
        return conn.execute(sql).fetchall()


def test_daytime_slot_maps_one_task_per_article_and_pushes_the_best(dag, fakes):
    when = shanghai(2026, 1, 8, 14)
    fakes.at(when)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(i, when - timedelta(hours=i + 1), title=f"文章{i}") for i in range(3)]
    scores = {"文章0": 40, "文章1": 77, "文章2": 64}
    fakes.deepseek.responder = lambda b: answer(next(s for t, s in scores.items() if f"{t}\n" in b["messages"][1]["content"]))
    run = dag.test(logical_date=when, run_after=when)
    states = _states(run)
    assert str(run.state) == "success"
    # one mapped task per batch: the three articles in analysis_tasks (2) batches, labelled for the grid
    assert states["analyse"] == ["success"] * 2
    labels = sorted(ti.rendered_map_index for ti in run.get_task_instances() if ti.task_id == "analyse")
    assert labels == ["1/2 · 文章2", "2/2 · 文章1 等 2 篇"]  # oldest first
    assert states["push_opportunity"] == ["success"] and states["skip_push"] == ["skipped"]
    assert states["build_daily_report"] == ["skipped"] and states["push_daily_report"] == ["skipped"]
    [slot] = _rows("SELECT * FROM slot_run")
    assert (str(slot["run_date"]), slot["slot"], slot["status"]) == ("2026-01-08", "14:00", 1)
    assert (slot["new_count"], slot["analysed_count"], slot["opportunity_count"], slot["pushed_count"]) == (3, 3, 2, 2)
    assert len(_rows("SELECT * FROM analysis_result")) == 3
    [message] = fakes.sink.received
    top = _rows("SELECT a.id FROM analysis_result a ORDER BY score DESC LIMIT 1")[0]["id"]
    assert message["title"] == "【机会提醒】14:00 发现 2 条（最高分 77）"
    assert f"https://radar.example.com/radar/analysis/{top}?" in message["message"]
    assert fakes.sink2.received == [message]


def test_slot_with_nothing_new_skips_the_mapped_task_and_closes_green(dag, fakes):
    when = shanghai(2026, 1, 8, 12)
    fakes.at(when)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    run = dag.test(logical_date=when, run_after=when)
    states = _states(run)
    assert str(run.state) == "success"
    assert states["analyse"] == ["skipped"] and states["skip_push"] == ["success"]
    assert _rows("SELECT status FROM slot_run")[0]["status"] == 1
    assert fakes.deepseek.requests == [] and fakes.sink.received == []


def test_daily_slot_with_werss_and_deepseek_down_still_pushes_the_report_once(dag, fakes):
    when = shanghai(2026, 1, 8, 22)
    fakes.at(when)
    fakes.werss.down = True
    fakes.deepseek.responder = lambda b: (500, {"error": {"message": "down"}})
    run = dag.test(logical_date=when, run_after=when)
    states = _states(run)
    assert states["ingest"] == ["failed"]
    assert states["build_daily_report"] == ["success"] and states["push_daily_report"] == ["success"]
    assert str(run.state) == "failed"  # the failure stays visible in the run history
    [report] = _rows("SELECT * FROM daily_report")
    assert report["status"] == store.common.REPORT_PARTIAL and "ingest" in report["error"]
    assert [m["title"] for m in fakes.sink.received] == ["【日报】2026-01-08：今日无投资机会"]
    assert _rows("SELECT status, error FROM slot_run")[0]["status"] == 2
    json.dumps(report["stats"])


# ------------------------------------------------------------------- manual triggers with a logical date


def test_a_manual_trigger_dated_in_the_past_is_a_backfill_of_that_slot_and_pushes_nothing(dag, fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES", "30")
    when = shanghai(2026, 1, 8, 14)
    fakes.at(when)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(1, when - timedelta(hours=1), title="文章1")]
    fakes.deepseek.responder = lambda b: answer(90)
    run = dag.test(logical_date=when)  # triggered now (run_after), for a slot of January: a past date
    states = _states(run)
    assert str(run.state) == "success" and states["analyse"] == ["success"]
    assert states["push_opportunity"] == ["skipped"] and states["skip_push"] == ["success"]
    [slot] = _rows("SELECT * FROM slot_run")
    assert (str(slot["run_date"]), slot["slot"], slot["run_type"]) == ("2026-01-08", "14:00", "manual")
    [decision] = _rows("SELECT * FROM push_decision")
    # a slot named by its past date pushes by the usual rules, and those send no stale alert
    assert slot["decision"] == "silent" and "slot started late: a stale alert is not sent" in decision["detail"]["reason"]
    assert fakes.sink.received == []
    # "force publish" on the same past slot does push
    run = dag.test(logical_date=when + timedelta(seconds=1), run_conf={"push_mode": "force"})
    assert str(run.state) == "success" and len(fakes.sink.received) == 1


def test_a_manual_trigger_dated_in_the_past_rebuilds_that_days_report_without_pushing(dag, fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES", "30")
    when = shanghai(2026, 1, 8, 22)
    fakes.at(when)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.deepseek.responder = lambda b: answer(30)
    run = dag.test(logical_date=when, run_conf={"push_mode": "auto"})  # dag.test keeps an earlier run's conf
    assert str(run.state) == "success" and _states(run)["build_daily_report"] == ["success"]
    assert len(_rows("SELECT * FROM daily_report")) == 1 and fakes.sink.received == []


def test_a_manual_trigger_dated_in_the_future_fails_at_once_with_the_reason(dag, fakes):
    from datetime import UTC, datetime

    future = datetime.now(UTC) + timedelta(days=2)
    run = dag.test(logical_date=future)
    states = _states(run)
    assert str(run.state) == "failed" and states["open_slot"] == ["failed"]
    assert states["ingest"] == ["upstream_failed"] and states["push_daily_report"] == ["upstream_failed"]
    assert _rows("SELECT * FROM slot_run") == []  # nothing was opened, nothing ran
    assert fakes.deepseek.requests == [] and fakes.sink.received == []
