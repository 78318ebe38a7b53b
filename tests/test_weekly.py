"""The weekly summary — Sunday 22:00, one digest call, pushed once, with a fallback.

Rooms: weekly.py, steps/weekly_summary.py, store/weekly.py, web/routes/history.py.
"""

from __future__ import annotations

import json
import time
from datetime import date, timedelta

import pytest

from include.radar import store
from include.radar.core import db
from include.radar.core.clock import FixedClock
from include.radar.report import weekly
from tests.conftest import connect
from tests.slotrun import answer, article, read_page, run_slot, shanghai

MONDAY = date(2026, 1, 5)
THURSDAY = shanghai(2026, 1, 8, 14)
SUNDAY = shanghai(2026, 1, 11, 22)
XSS = "<script>alert(1)</script>"


def _weekly_calls(fakes) -> int:
    return sum(1 for r in fakes.deepseek.requests if "一周的文章分析结果" in r["messages"][1]["content"])


def _setup(fakes, weekly_answer=None) -> None:
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles += [article(1, THURSDAY - timedelta(hours=1), title="储能订单回暖"),
                             article(2, SUNDAY - timedelta(hours=1), title="光伏排产回升")]

    def respond(body):
        user = body["messages"][1]["content"]
        if "<<<DATA_START>>>" in user:
            ids = [a["analysis_id"] for a in json.loads(
                user.split("<<<DATA_START>>>")[1].split("<<<DATA_END>>>")[0])["analyses"]]
            if "一周的文章分析结果" in user and weekly_answer is not None:
                return weekly_answer(ids)
            return json.dumps({"has_opportunity": True, "top_opportunities": [
                {"analysis_id": ids[0], "title": "本周机会", "reason": "催化明确"}],
                "digest_md": "## 要点\n- 储能", "watchlist": ["储能"], "stats": {}}, ensure_ascii=False)
        return answer(72)

    fakes.deepseek.responder = respond


def _weekly_pushes(fakes) -> list[dict]:
    return [m for m in fakes.sink.received if "【周报】" in json.dumps(m, ensure_ascii=False)]


def test_sunday_22_pushes_the_week_once_and_a_rerun_neither_pays_nor_pushes_again(fakes) -> None:
    _setup(fakes)
    fakes.at(THURSDAY)
    run_slot(THURSDAY)
    fakes.at(SUNDAY)
    result = run_slot(SUNDAY)
    assert "weekly" not in result["errors"]
    assert _weekly_calls(fakes) == 1
    [pushed] = _weekly_pushes(fakes)
    text = json.dumps(pushed, ensure_ascii=False)
    assert "【周报】1/5–1/11" in text and "/weekly/2026-01-05" in text and "本周分析 2 篇" in text
    with connect() as conn:
        row = store.weekly.get_weekly_report(conn, MONDAY)
    assert row["status"] == store.common.REPORT_OK and row["digest_json"]["source"] == "llm"
    # the daily push went out first, in the same run
    titles = [json.dumps(m, ensure_ascii=False) for m in fakes.sink.received]
    assert [i for i, t in enumerate(titles) if "【日报】" in t][0] < [i for i, t in enumerate(titles) if "【周报】" in t][0]
    run_slot(SUNDAY)  # a rerun, and a manual rerun of the same slot
    run_slot(SUNDAY, run_type="manual")
    assert _weekly_calls(fakes) == 1 and len(_weekly_pushes(fakes)) == 1


def test_a_weekday_22_builds_and_pushes_no_weekly(fakes) -> None:
    _setup(fakes)
    fakes.at(THURSDAY)
    run_slot(THURSDAY)
    run_slot(shanghai(2026, 1, 8, 22))
    assert _weekly_calls(fakes) == 0 and _weekly_pushes(fakes) == []
    with connect() as conn:
        assert store.weekly.get_weekly_report(conn, MONDAY) is None


def test_an_invalid_weekly_answer_falls_back_and_is_still_pushed_once(fakes) -> None:
    _setup(fakes, weekly_answer=lambda ids: "这不是 JSON")
    fakes.at(SUNDAY)
    result = run_slot(SUNDAY)
    assert "weekly" not in result["errors"]  # a handled failure: the fallback stands in
    with connect() as conn:
        row = store.weekly.get_weekly_report(conn, MONDAY)
    assert row["status"] == store.common.REPORT_PARTIAL and row["digest_json"]["source"] == "fallback"
    assert "光伏排产回升" in row["digest_md"]
    [pushed] = _weekly_pushes(fakes)
    assert "摘要由系统根据本周的分析生成" in json.dumps(pushed, ensure_ascii=False)
    run_slot(SUNDAY)
    assert len(_weekly_pushes(fakes)) == 1
    page = read_page("/weekly/2026-01-05", SUNDAY + timedelta(hours=1))
    assert "部分结果" in page and "光伏排产回升" in page


def test_a_weekly_digest_call_that_hangs_is_cut_at_its_deadline_and_the_fallback_is_pushed(fakes, monkeypatch) -> None:
    import include.radar.steps.weekly_summary as weekly_step

    monkeypatch.setattr(weekly_step, "WEEKLY_DIGEST_SECONDS", 7)  # 5 minutes in production

    def hang(ids):
        time.sleep(40)  # a DeepSeek that never answers the week's call in time
        return "{}"

    _setup(fakes, weekly_answer=hang)
    fakes.at(SUNDAY)
    started = time.monotonic()
    result = run_slot(SUNDAY)
    assert time.monotonic() - started < 30  # the slot did not wait for the hanging call
    assert "weekly" not in result["errors"]
    with connect() as conn:
        row = store.weekly.get_weekly_report(conn, MONDAY)
    assert row["digest_json"]["source"] == "fallback" and "deadline" in row["error"]
    assert len(_weekly_pushes(fakes)) == 1


def test_the_weekly_page_escapes_hostile_llm_text_and_refuses_other_days(fakes) -> None:
    def hostile(ids):
        return json.dumps({"has_opportunity": True, "top_opportunities": [
            {"analysis_id": ids[0], "title": XSS, "reason": XSS}], "digest_md": f"## 回顾\n{XSS}\n[x](javascript:alert(1))",
            "watchlist": [XSS], "stats": {}}, ensure_ascii=False)

    _setup(fakes, weekly_answer=hostile)
    fakes.at(SUNDAY)
    run_slot(SUNDAY)
    page = read_page("/weekly/2026-01-05", SUNDAY + timedelta(hours=1))
    assert XSS not in page and "&lt;script&gt;" in page and "href=\"javascript:" not in page
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from include.radar.web.app import create_app
    from include.radar.web.auth import may_read_radar
    from tests.pages import make_settings

    app = create_app(lambda: make_settings(), db.database_url(), clock=FixedClock(SUNDAY + timedelta(hours=1)))
    app.dependency_overrides[get_user] = lambda: object()
    app.dependency_overrides[may_read_radar] = lambda user: True
    client = TestClient(app)
    assert client.get("/weekly/2026-01-06").status_code == 404  # a Tuesday
    moved = client.get("/weekly", follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == "/weekly/2026-01-05"
    assert "本周周报" in client.get("/daily/2026-01-08").text


def test_the_week_of_a_day_is_monday_to_sunday() -> None:
    assert weekly.week_of(date(2026, 1, 11)) == (MONDAY, date(2026, 1, 11))
    assert weekly.week_of(MONDAY) == (MONDAY, date(2026, 1, 11))
    assert weekly.is_weekly_slot(date(2026, 1, 11), True) and not weekly.is_weekly_slot(date(2026, 1, 10), True)
    assert not weekly.is_weekly_slot(date(2026, 1, 11), False)


@pytest.mark.browser
def test_the_weekly_page_on_a_phone(fakes, db_url: str) -> None:
    from include.radar.web.app import create_app
    from tests.browser import PHONE, chromium, screenshot, serve
    from tests.pages import FakeUser, airflow_get_user, allow_reading, make_settings

    _setup(fakes)
    fakes.at(THURSDAY)
    run_slot(THURSDAY)
    fakes.at(SUNDAY)
    run_slot(SUNDAY)
    app = create_app(lambda: make_settings(demo_mode=True), db_url, clock=FixedClock(SUNDAY + timedelta(hours=1)))
    app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
    allow_reading(app)
    with serve(app) as base, chromium() as browser:
        page = browser.new_page(viewport=PHONE, is_mobile=True)
        assert page.goto(base + "/weekly").status == 200
        assert page.url.endswith("/weekly/2026-01-05") and "本周重点机会" in page.content()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        screenshot(page, "weekly.png")
