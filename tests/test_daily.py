"""The 22:00 daily report: always built, always pushed, never twice.

Rooms: steps/daily_report.py (build, push, catch up), digest.py (the report, its fallback, pending list),
decide.py (the daily push's text), the daily page.
"""

from __future__ import annotations

import json
from datetime import date, timedelta

from include.radar import store
from include.radar.core.clock import FixedClock
from include.radar_demo.fakes import api_error
from tests.conftest import connect
from tests.slotrun import answer, article, read_page, run_slot, shanghai

DAY = date(2026, 1, 8)
DAILY = shanghai(2026, 1, 8, 22)


def _digest(ids: list[int], **extra) -> str:
    return json.dumps({
        "has_opportunity": bool(ids),
        "top_opportunities": [{"analysis_id": i, "title": f"机会{i}", "reason": "催化明确"} for i in ids],
        "digest_md": "## 今日要点\n- 储能集采放量", "watchlist": ["储能集采节奏"],
        "stats": {"analysed": 999, "opportunities": 999, "failed": 999}, **extra,
    }, ensure_ascii=False)


def _responder(scores: dict[str, int], digest_ids=None):
    def respond(body):
        user = body["messages"][1]["content"]
        if "<<<DATA_START>>>" in user:
            ids = digest_ids if digest_ids is not None else [
                a["analysis_id"] for a in json.loads(user.split("<<<DATA_START>>>")[1].split("<<<DATA_END>>>")[0])["analyses"]
                if a["score"] >= 60]
            return _digest(ids)
        return answer(next(s for t, s in scores.items() if f"{t}\n" in user))
    return respond


def _setup(fakes, items: dict[int, tuple], scores: dict[str, int], digest_ids=None):
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    for n, published in items.items():
        fakes.werss.articles.append(article(n, published, title=f"文章{n}"))
    fakes.deepseek.responder = _responder(scores, digest_ids)


def _report(day=DAY):
    with connect() as conn:
        return store.reports.get_daily_report(conn, day)


def test_normal_day_with_two_opportunities_gives_one_report_and_one_push(fakes):
    _setup(fakes, {1: shanghai(2026, 1, 8, 9), 2: shanghai(2026, 1, 8, 15), 3: shanghai(2026, 1, 8, 20)},
           {"文章1": 80, "文章2": 66, "文章3": 20})
    fakes.at(DAILY)
    result = run_slot(DAILY)
    assert result["branch"] == "build_daily_report" and result["errors"] == {}
    report = _report()
    assert report["status"] == store.common.REPORT_OK
    assert report["stats"]["analysed"] == 3 and report["stats"]["opportunities"] == 2  # from the DB, not the LLM's 999
    assert report["stats"]["max_score"] == 80 and len(report["digest_json"]["top_opportunities"]) == 2
    assert report["slots_done"] == ["22:00"]  # brought up to date when the 22:00 slot closes
    [message] = fakes.sink.received
    assert message["title"] == "【日报】2026-01-08：2 条机会（最高分 80）"
    assert message["message"].splitlines()[-1].startswith("https://radar.example.com/radar/daily/2026-01-08?exp=")


def test_day_without_opportunities_pushes_no_opportunity_title(fakes):
    _setup(fakes, {1: shanghai(2026, 1, 8, 9)}, {"文章1": 30})
    fakes.at(DAILY)
    run_slot(DAILY)
    assert fakes.sink.received[0]["title"] == "【日报】2026-01-08：今日无投资机会"


def test_werss_down_for_the_whole_daily_run_still_pushes_once_with_a_partial_report(fakes):
    fakes.werss.down = True
    fakes.at(DAILY)
    result = run_slot(DAILY)
    report = _report()
    # built from what was done (nothing), with the reason: "generation failed" only when nothing was built
    assert report["status"] == store.common.REPORT_PARTIAL and "ingest" in report["error"] and "503" in report["error"]
    assert len(fakes.sink.received) == 1 and len(fakes.sink2.received) == 1
    assert "日报生成失败" not in fakes.sink.received[0]["message"]
    assert "部分结果：本时段部分步骤出错" in fakes.sink.received[0]["message"]
    assert result["closed"]["status"] == "failed"
    run_slot(DAILY)
    assert len(fakes.sink.received) == 1


def test_deepseek_down_gives_a_fallback_digest_and_the_push(fakes):
    _setup(fakes, {1: shanghai(2026, 1, 8, 9)}, {})
    fakes.deepseek.responder = lambda body: api_error(500, "Internal Server Error", "server_error")
    fakes.at(DAILY)
    run_slot(DAILY)
    report = _report()
    assert report["status"] == store.common.REPORT_PARTIAL and report["digest_json"]["source"] == "fallback"
    assert "分析失败" in report["digest_md"] and "文章1" in report["digest_md"]
    assert report["stats"]["failed"] == 1
    assert fakes.sink.received[0]["title"] == "【日报】2026-01-08：今日无投资机会"


def test_the_fallback_report_page_agrees_on_the_slots_done_and_says_why_in_chinese(fakes):
    _setup(fakes, {1: shanghai(2026, 1, 8, 9)}, {})
    fakes.deepseek.responder = lambda body: api_error(500, "Internal Server Error", "server_error")
    fakes.at(DAILY)
    run_slot(DAILY)
    html = read_page("/daily/2026-01-08", DAILY + timedelta(hours=1))
    assert "已完成时段：22:00" in html and "已完成时段：无" not in html  # one list, the page's, live
    assert "分析：当日 1 篇分析全部失败" in html and "analyses of the day failed" not in html


def test_digest_citing_a_made_up_analysis_id_drops_that_entry(fakes):
    _setup(fakes, {1: shanghai(2026, 1, 8, 9)}, {"文章1": 90}, digest_ids=[1, 424242])
    fakes.at(DAILY)
    run_slot(DAILY)
    report = _report()
    assert [t["analysis_id"] for t in report["digest_json"]["top_opportunities"]] == [1]
    assert report["digest_json"]["dropped_analysis_ids"] == [424242]


def test_rerunning_the_daily_slot_updates_the_report_and_sends_no_second_push(fakes):
    _setup(fakes, {1: shanghai(2026, 1, 8, 9)}, {"文章1": 70, "文章2": 85})
    fakes.at(DAILY)
    run_slot(DAILY)
    first = _report()
    fakes.werss.articles.append(article(2, shanghai(2026, 1, 8, 21, 30), title="文章2"))
    run_slot(DAILY, run_type="manual")
    second = _report()
    assert second["id"] == first["id"] and second["stats"]["analysed"] == 2
    assert len(fakes.sink.received) == 1
    with connect() as conn:
        assert conn.execute("SELECT count(*) AS n FROM daily_report").fetchone()["n"] == 1


def _digest_calls(fakes) -> int:
    return sum("<<<DATA_START>>>" in r["messages"][1]["content"] for r in fakes.deepseek.requests)


def test_a_rerun_over_the_same_analyses_keeps_the_digest_and_pays_for_no_second_call(fakes):
    """Nothing is paid for twice: the digest of the day's analyses is kept while they stay the same (a rerun, a
    rebuild, a verdict since); an article analysed since is something new to say, a failed digest is asked
    again (the one call a plain rerun may pay)."""
    _setup(fakes, {1: shanghai(2026, 1, 8, 9), 3: shanghai(2026, 1, 8, 10)}, {"文章1": 70, "文章2": 85, "文章3": 30})
    fakes.at(DAILY)
    run_slot(DAILY)
    first = _report()
    assert _digest_calls(fakes) == 1 and first["digest_json"]["source"] == "llm"
    with connect() as conn:
        spent = conn.execute("SELECT count(*) AS n FROM llm_spend").fetchone()["n"]
        low = conn.execute("SELECT id FROM analysis_result WHERE score = 30").fetchone()["id"]
        store.focus.set_feedback(conn, low, "up", "user:reader")  # the rank changes, the facts do not
    run_slot(DAILY, run_type="manual", dag_run_id="rerun-1")
    later = shanghai(2026, 1, 12, 10)
    run_slot(later, run_type="manual", params={"run_date": "2026-01-08"}, now=later, dag_run_id="rebuild-1")
    kept = _report()
    assert _digest_calls(fakes) == 1
    with connect() as conn:
        assert conn.execute("SELECT count(*) AS n FROM llm_spend").fetchone()["n"] == spent
    assert kept["status"] == store.common.REPORT_OK and kept["digest_md"] == first["digest_md"]
    assert kept["digest_json"]["top_opportunities"] == first["digest_json"]["top_opportunities"]
    assert (kept["model"], kept["prompt_version"]) == (first["model"], first["prompt_version"])

    fakes.werss.articles.append(article(2, shanghai(2026, 1, 8, 21, 30), title="文章2"))
    run_slot(DAILY, run_type="manual", dag_run_id="rerun-2")  # analyses article 2: the digest is written again
    assert _digest_calls(fakes) == 2 and _report()["stats"]["analysed"] == 3

    fakes.deepseek.responder = lambda body: api_error(500, "Internal Server Error", "server_error")
    with connect() as conn:  # a digest that failed, on a day whose facts change no more
        conn.execute("UPDATE daily_report SET digest_json = digest_json || '{\"source\": \"fallback\"}'")
    calls = len(fakes.deepseek.requests)
    run_slot(DAILY, run_type="manual", dag_run_id="rerun-3")
    assert len(fakes.deepseek.requests) > calls and _report()["digest_json"]["source"] == "fallback"
    assert len(fakes.sink.received) == 1  # and never a second push


def test_articles_count_toward_the_shanghai_day_their_slot_ran(fakes):
    _setup(fakes, {1: shanghai(2026, 1, 8, 21, 50), 2: shanghai(2026, 1, 8, 23, 30)}, {"文章1": 50, "文章2": 50})
    fakes.at(DAILY)
    run_slot(DAILY)  # sees 21:50 only
    fakes.at(shanghai(2026, 1, 9, 7))
    run_slot(shanghai(2026, 1, 9, 7))  # sees 23:30 of day D
    fakes.at(shanghai(2026, 1, 9, 22))
    run_slot(shanghai(2026, 1, 9, 22))
    assert _report(DAY)["stats"]["analysed"] == 1
    assert _report(date(2026, 1, 9))["stats"]["analysed"] == 1
    with connect() as conn:
        day9 = store.analyses.day_analyses(conn, date(2026, 1, 9))
    assert [a["title"] for a in day9] == ["文章2"]


def test_late_daily_run_still_pushes_marked_late_and_backfill_pushes_nothing(fakes):
    _setup(fakes, {1: shanghai(2026, 1, 8, 9)}, {"文章1": 30})
    fakes.at(DAILY + timedelta(hours=10))
    run_slot(DAILY, now=DAILY + timedelta(hours=10))
    assert fakes.sink.received[0]["title"] == "【日报】2026-01-08：今日无投资机会（延迟发送）"
    fakes.sink.received.clear()
    run_slot(shanghai(2026, 1, 5, 22), run_type="backfill")
    assert fakes.sink.received == [] and _report(date(2026, 1, 5)) is not None


def test_rebuild_of_a_past_day_pushes_only_when_asked(fakes):
    _setup(fakes, {1: shanghai(2026, 1, 8, 9)}, {"文章1": 75})
    fakes.at(DAILY)
    run_slot(DAILY)
    assert len(fakes.sink.received) == 1
    later = shanghai(2026, 1, 12, 10)
    run_slot(later, run_type="manual", params={"run_date": "2026-01-08"}, now=later, dag_run_id="rebuild-1")
    assert len(fakes.sink.received) == 1  # rebuilt, not pushed
    run_slot(later, run_type="manual", params={"run_date": "2026-01-08", "push_mode": "force"}, now=later,
             dag_run_id="rebuild-2")
    assert len(fakes.sink.received) == 2
    assert fakes.sink.received[1]["title"].startswith("【日报】2026-01-08：1 条机会（最高分 75）")


def test_an_earlier_slots_hiccup_is_a_warning_not_a_failed_report(fakes):
    _setup(fakes, {1: shanghai(2026, 1, 8, 9)}, {"文章1": 70})
    fakes.werss.down = True
    fakes.at(shanghai(2026, 1, 8, 7))
    assert run_slot(shanghai(2026, 1, 8, 7))["closed"]["status"] == "failed"
    fakes.werss.down = False
    fakes.at(DAILY)
    run_slot(DAILY)
    report = _report()
    assert report["status"] == store.common.REPORT_OK and report["error"] is None
    assert any("07:00" in w and "503" in w for w in report["digest_json"]["warnings"])
    assert "日报生成失败" not in fakes.sink.received[0]["message"]
    # the page lists the warning without calling the day failed (a signed link: no Airflow login needed)
    from fastapi.testclient import TestClient

    from include.radar.web.app import create_app
    link = fakes.sink.received[0]["message"].splitlines()[-1].removeprefix("https://radar.example.com/radar")
    page = TestClient(create_app(clock=FixedClock(DAILY + timedelta(minutes=5)))).get(link)  # read that evening
    assert page.status_code == 200 and "后续时段已补上" in page.text and "日报生成失败" not in page.text


def test_a_report_that_succeeds_on_retry_is_not_failed_by_its_own_first_try(fakes):
    from include.radar.steps.daily_report import build_daily_report
    from include.radar.steps.open_slot import open_slot
    from include.radar.steps.runtime import Runtime

    _setup(fakes, {1: shanghai(2026, 1, 8, 9)}, {"文章1": 70})
    fakes.at(DAILY)
    rt = Runtime.load()
    slot = open_slot(rt, run_after=DAILY, run_type="scheduled", dag_id="d", dag_run_id="r", params={})
    with connect() as conn:  # its first try died (e.g. the database blinked)
        store.slot_runs.record_step(conn, slot["slot_run_id"], "build_daily_report", "OperationalError: connection lost")
    build_daily_report(rt, slot)
    assert _report()["status"] == store.common.REPORT_OK


def test_a_daily_slot_that_never_ran_is_made_up_by_the_next_mornings_first_run(fakes):
    _setup(fakes, {1: shanghai(2026, 1, 8, 9)}, {"文章1": 75})
    fakes.at(shanghai(2026, 1, 8, 12))
    run_slot(shanghai(2026, 1, 8, 12))  # day D runs until the scheduler dies before 22:00
    fakes.sink.received.clear()
    fakes.at(shanghai(2026, 1, 9, 12))
    run_slot(shanghai(2026, 1, 9, 12))  # unpaused at 12:30 on D+1: Airflow runs only the latest tick
    titles = [m["title"] for m in fakes.sink.received]
    assert titles == ["【日报】2026-01-08：1 条机会（最高分 75）（延迟发送）"]
    assert _report(DAY) is not None
    run_slot(shanghai(2026, 1, 9, 14))
    assert len(fakes.sink.received) == 1  # made up once


def test_no_catch_up_for_a_day_the_radar_did_not_run(fakes):
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.at(shanghai(2026, 1, 9, 7))
    run_slot(shanghai(2026, 1, 9, 7))  # the very first run after installing
    assert fakes.sink.received == [] and _report(DAY) is None
