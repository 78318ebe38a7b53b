"""The day's report and each pushed opportunity as Airflow Asset events (seam/assets.py), through the real DAG's
``dag.test()``: an event when a push reached a channel, none when a run pushes nothing. The downstream DAG
under ``airflow standalone``: tests/test_local_airflow.py (``make asset-check``).

Rooms: seam/assets.py, dags/opportunity_radar.py, steps/daily_report.py, steps/push_opportunity.py.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.slotrun import answer, article, shanghai
from tests.slotrun import task_states as _states

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _never_late(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES", str(366 * 24 * 60))


def _events(uri: str) -> list[dict[str, Any]]:
    """The extras of the Asset's events in Airflow's metadata, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(AssetEvent.extra).join(AssetModel, AssetModel.id == AssetEvent.asset_id)
                               .where(AssetModel.uri == uri).order_by(AssetEvent.id)).all()
    return [dict(r[0] or {}) for r in rows]


def test_a_pushed_daily_report_is_one_event_and_a_rerun_that_pushes_nothing_none(dag, fakes) -> None:
    before = len(_events("radar://daily-report/"))
    when = shanghai(2026, 1, 8, 22)
    fakes.at(when)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(1, when - timedelta(hours=1), title="文章1")]
    fakes.deepseek.responder = lambda b: answer(80)
    run = dag.test(logical_date=when, run_after=when)
    assert str(run.state) == "success" and _states(run)["push_daily_report"] == ["success"]
    assert len(fakes.sink.received) == 1
    events = _events("radar://daily-report/")[before:]
    assert len(events) == 1
    assert events[0] | {"link": ""} == {"day": "2026-01-08", "analysed": 1, "opportunities": 1, "failed": 0,
                                        "max_score": 80, "late": False, "link": ""}
    assert events[0]["link"] == "https://radar.example.com/radar/daily/2026-01-08"  # no signature in Airflow's metadata
    # the same slot again: the report was pushed, nothing is sent, no event
    run = dag.test(logical_date=when + timedelta(seconds=1), run_after=when + timedelta(seconds=1))
    assert str(run.state) == "success" and len(fakes.sink.received) == 1
    assert len(_events("radar://daily-report/")) == before + 1


def test_each_pushed_opportunity_is_an_event_and_a_silent_slot_emits_none(dag, fakes) -> None:
    before = len(_events("radar://opportunity/"))
    when = shanghai(2026, 1, 8, 14)
    fakes.at(when)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(i, when - timedelta(hours=i + 1), title=f"文章{i}") for i in range(3)]
    scores = {"文章0": 40, "文章1": 77, "文章2": 64}
    fakes.deepseek.responder = lambda b: answer(next(s for t, s in scores.items() if f"{t}\n" in b["messages"][1]["content"]))
    run = dag.test(logical_date=when, run_after=when)
    assert str(run.state) == "success" and _states(run)["push_opportunity"] == ["success"]
    events = _events("radar://opportunity/")[before:]
    assert sorted(e["score"] for e in events) == [64, 77]  # the two the push told of, not the 40
    assert all(e["day"] == "2026-01-08" and e["slot"] == "14:00" and e["account"] == "研究所" for e in events)
    assert all(e["link"] == f"https://radar.example.com/radar/analysis/{e['analysis_id']}" for e in events)
    run = dag.test(logical_date=when + timedelta(seconds=1), run_after=when + timedelta(seconds=1))
    assert str(run.state) == "success" and len(fakes.sink.received) == 1  # nothing new: silent
    assert len(_events("radar://opportunity/")) == before + 2
