"""Reruns never change what a slot was, overlapping runs lose no step errors, and a slot
alerts at most once whatever a rerun finds.

Rooms: store/slot_runs.py, runtime.py (the step recorder), steps/close_slot.py, alerts.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from include.radar import store
from include.radar.steps.close_slot import close_slot
from include.radar.steps.ingest import ingest
from include.radar.steps.open_slot import open_slot
from include.radar.steps.runtime import Runtime
from include.radar_demo.fakes import completion
from tests.conftest import connect
from tests.slotrun import answer, article, run_slot, shanghai

pytestmark = pytest.mark.hostile

SLOT = shanghai(2026, 1, 8, 14)


def _slot_row() -> dict:
    with connect() as conn:
        return conn.execute("SELECT * FROM slot_run").fetchone()


def _by_title(scores: dict[str, object]):
    def respond(body):
        user = body["messages"][1]["content"]
        return next(v for t, v in scores.items() if f"{t}\n" in user)
    return respond


def test_a_rerun_adds_to_the_slots_counts_and_errors_never_writes_over_them(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "0")
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(i, SLOT - timedelta(hours=i), title=f"文章{i}") for i in (1, 2, 3)]
    fakes.at(SLOT)
    fakes.deepseek.responder = _by_title({"文章1": answer(40), "文章2": answer(45), "文章3": completion("oops")})
    first = run_slot(SLOT)
    assert (first["closed"]["status"], _slot_row()["new_count"]) == ("success", 3)
    row = _slot_row()
    assert (row["analysed_count"], row["failed_count"]) == (2, 1)
    # the rerun: WeRSS is down now (a step error), the failed article is retried and analysed
    fakes.werss.down = True
    fakes.deepseek.responder = _by_title({"文章3": answer(50)})
    again = run_slot(SLOT, run_type="manual")
    row = _slot_row()
    assert row["new_count"] == 3  # the first run's new articles stay counted (the rerun found none)
    assert (row["analysed_count"], row["failed_count"]) == (3, 1)  # one more analysis; the failure stays on record
    assert again["closed"]["status"] == "failed" and "ingest" in row["error"] and row["attempts"] == 2
    fakes.werss.down = False
    run_slot(SLOT, run_type="manual")  # a third run fixes ingest: green again, the history kept
    row = _slot_row()
    assert row["status"] == store.common.SUCCESS and row["new_count"] == 3
    assert [e["step"] for e in row["error_log"]] == ["ingest"]


def test_overlapping_runs_of_one_slot_lose_no_step_errors(fakes):
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.at(SLOT)
    rt = Runtime.load()
    run_a = open_slot(rt, run_after=SLOT, run_type="scheduled", dag_id="d", dag_run_id="a", params={})
    fakes.werss.down = True
    with pytest.raises(Exception, match="503"):
        ingest(rt, run_a)  # run A's ingest fails and records it
    run_b = open_slot(rt, run_after=SLOT, run_type="manual", dag_id="d", dag_run_id="b", params={})
    assert run_b["slot_run_id"] == run_a["slot_run_id"]
    closed_b = close_slot(rt, run_b, [])  # B opened while A was running: A's error is not forgotten
    assert closed_b["status"] == "failed" and "ingest" in closed_b["error"]
    closed_a = close_slot(rt, run_a, [])
    assert closed_a["status"] == "failed" and "503" in closed_a["error"]
    assert [e["dag_run_id"] for e in _slot_row()["error_log"]] == ["a"]


def test_a_slot_alerts_once_even_when_a_rerun_finds_a_better_top(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "0")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES", str(366 * 24 * 60))
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1), title="文章1"),
                            article(2, SLOT - timedelta(hours=2), title="文章2")]
    fakes.at(SLOT)
    fakes.deepseek.responder = _by_title({"文章1": answer(70), "文章2": completion("oops")})
    run_slot(SLOT)
    assert len(fakes.sink.received) == 1 and "最高分 70" in fakes.sink.received[0]["title"]
    fakes.deepseek.responder = _by_title({"文章2": answer(95)})
    again = run_slot(SLOT, run_type="manual")  # the retried article now outscores the slot's earlier top
    assert again["summary"]["max_score"] == 95
    assert len(fakes.sink.received) == 1 and len(fakes.sink2.received) == 1  # nothing more
    with connect() as conn:
        sent = conn.execute("SELECT count(*) AS n FROM notification_log WHERE push_type = 'opportunity'").fetchone()
    assert sent["n"] == 2  # one row per channel, for the slot
