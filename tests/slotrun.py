"""Run one slot's pipeline in-process, in the DAG's order, without Airflow (fast; the e2e tests cover the
Airflow wiring). Failures of a step are recorded on the slot run exactly as in the DAG."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from include.radar.core.clock import Clock, ClockAt, FixedClock
from include.radar.core.slots import SHANGHAI
from include.radar.pushes import decide
from include.radar.steps.analyse import analyse_article
from include.radar.steps.close_slot import close_slot
from include.radar.steps.daily_report import build_daily_report, catch_up_daily_report, push_daily_report
from include.radar.steps.ingest import ingest
from include.radar.steps.open_slot import open_slot
from include.radar.steps.push_opportunity import push_opportunity, skip_push
from include.radar.steps.retention import retention
from include.radar.steps.runtime import Runtime
from include.radar.steps.select_articles import articles_to_analyse
from include.radar.steps.summarise import choose_path, summarise
from include.radar.steps.track_record import track_record
from include.radar.steps.weekly_summary import weekly_summary
from include.radar_demo.fakes import FakeArticle


def shanghai(y: int, m: int, d: int, hh: int, mm: int = 0) -> datetime:
    return datetime(y, m, d, hh, mm, tzinfo=SHANGHAI)


def article(n: int, published: datetime, *, mp: str = "MP_WXS_1", title: str | None = None,
            body: str | None = None) -> FakeArticle:
    text = body if body is not None else f"<p>第{n}篇文章正文：某储能龙头订单同比增长{n}0%，行业景气回升。</p>"
    return FakeArticle(id=f"{mp[-1]}-{n}", mp_id=mp, title=title or f"文章{n}", publish_time=int(published.timestamp()),
                       content_html=f'<div class="rich_media_content" id="js_content">{text}</div>' if text else "",
                       url=f"https://mp.weixin.qq.com/s/{n}")


def answer(score: int, summary: str = "储能订单回暖，龙头受益。建议关注。", *,
           evidence: tuple[str, ...] = ("订单同比增长",), **extra: Any) -> str:
    """An analysis answer; its evidence quotes the default article body (see ``article``)."""
    return json.dumps({
        "score": score, "has_opportunity": score >= 60, "top_type": "sector" if score >= 60 else "none",
        "summary": summary,
        "opportunities": [{"name": "储能龙头", "type": "sector", "targets": ["储能"], "direction": "bullish",
                           "horizon": "1-3个月", "catalyst": "集采放量", "risks": ["价格战"],
                           "evidence": list(evidence), "confidence": 0.7}] if score >= 60 else [],
        **extra,
    }, ensure_ascii=False)


def slot_clock(when: datetime) -> FixedClock:
    """The clock of a slot's run a minute after ``when``: it stands still, and a backoff moves it on instead of
    waiting, so a retry costs a test no real time."""
    return FixedClock(when + timedelta(minutes=1), step=0.0)


def run_slot(when: datetime, *, run_type: str = "scheduled", params: dict[str, Any] | None = None,
             now: datetime | None = None, dag_run_id: str | None = None, clock: Clock | None = None) -> dict[str, Any]:
    """A slot's steps in the DAG's order, on ``clock`` (default: the system's, set to ``now``, else a minute
    after ``when``)."""
    rt = Runtime.load(clock or ClockAt(now or when + timedelta(minutes=1)))
    errors: dict[str, str] = {}
    slot = open_slot(rt, run_after=when, run_type=run_type, dag_id="opportunity_radar_slots",
                              dag_run_id=dag_run_id or f"{run_type}__{when.isoformat()}", params=params or {})

    def attempt(name: str, func: Any, *args: Any) -> Any:
        try:
            return func(rt, slot, *args)
        except Exception as exc:  # mirrors Airflow: the task fails, the DAG goes on
            errors[name] = f"{exc.__class__.__name__}: {exc}"
            return None

    attempt("ingest", ingest)
    articles = attempt("select", articles_to_analyse) or []
    outcomes = [attempt(f"analyse:{a['item_id']}", analyse_article, a) for a in articles]
    summary = attempt("summarise", summarise)
    branch = choose_path(slot, summary).branch
    if branch == decide.PUSH_OPPORTUNITY:
        attempt("push", push_opportunity)
    elif branch == decide.SKIP_PUSH:
        attempt("skip", skip_push)
    else:
        attempt("daily_report", build_daily_report)
        attempt("daily_push", push_daily_report)
        attempt("weekly", weekly_summary)
        attempt("track_record", track_record)
        attempt("retention", retention)
    attempt("catch_up", catch_up_daily_report)
    closed = close_slot(rt, slot, [])
    return {"slot": slot, "branch": branch, "summary": summary, "outcomes": outcomes, "errors": errors,
            "closed": closed}


def task_states(dag_run: Any) -> dict[str, list[str]]:
    """task id -> the states of its task instances (one per map index) after a ``dag.test()`` run."""
    states: dict[str, list[str]] = {}
    for ti in dag_run.get_task_instances():
        states.setdefault(ti.task_id, []).append(str(ti.state))
    return states


def read_page(path: str, now: datetime) -> str:
    """A report page as a reader with access to the radar sees it, ``now`` being the clock of the pages."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from include.radar.core import db
    from include.radar.core.settings import load_settings
    from include.radar.web.app import create_app
    from include.radar.web.auth import may_read_radar

    app = create_app(lambda: load_settings(use_airflow=False), db.database_url(), clock=FixedClock(now))
    app.dependency_overrides[get_user] = lambda: object()
    app.dependency_overrides[may_read_radar] = lambda user: True
    response = TestClient(app).get(path)
    assert response.status_code == 200, response.text[:500]
    return response.text
