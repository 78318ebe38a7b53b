"""The evaluation's money and failures: a cap no set of concurrent calls passes, the candidate priced by its own
prices, the slots' daily budget untouched by it, a dead or unsafe endpoint found before anything is recorded, a run
whose articles keep failing stopped as failed, the dry run, and a refused evaluation resumed with a new cap.

Most cases price the candidate at hand-made prices (``GIVEN``: output only, 1000 a million tokens) with
``deepseek_max_tokens`` 500: a stand-in call (400 output tokens) costs 0.4, and one call at its most 0.5.

Rooms: evaluation.py, spending.py (the cap), connections.py (the endpoint's URL), evaluation/commands.py.
"""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import datetime
from typing import Any

import pytest

from include.radar import cli, store
from include.radar.analysis import llm, spending
from include.radar.core import db, signing
from include.radar.core.clock import FixedClock
from include.radar.core.connection_info import ConnectionInfo
from include.radar.core.settings import load_settings
from include.radar.evaluation import shadow
from include.radar.operations import connections
from include.radar_demo.fakes import FakeArticle
from tests.conftest import connect
from tests.evaluation_day import DAY, FLASH, FLASH_CALL, LATER, calls_of, demo_day, ledger, rows_in, settings, start
from tests.slotrun import read_page, run_slot, shanghai

GIVEN = '{"cache_hit": 0, "cache_miss": 0, "output": 1000}'
CHEAP = shadow.Candidate(model="deepseek-flash", prices=GIVEN)


SECRET = "test-link-secret-0123456789abcdef01"  # the fakes' link secret


def _client(now: datetime) -> Any:
    from fastapi.testclient import TestClient

    from include.radar.web.app import create_app

    return TestClient(create_app(lambda: load_settings(use_airflow=False), db.database_url(), clock=FixedClock(now)))


def _capped(monkeypatch: Any) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_TOKENS", "500")


def _status(evaluation_id: int) -> tuple[str, str | None]:
    with connect() as conn:
        row = store.evaluations.get(conn, evaluation_id)
    return row["status"], row["reason"]


# ---------------------------------------------------------------------------------------------------- the cap


def test_eight_threads_never_take_the_ledger_past_a_cap_below_one_article_s_cost(fakes, monkeypatch) -> None:
    demo_day(fakes, monkeypatch)
    _capped(monkeypatch)
    with connect() as conn:  # stored analyses that say nothing of their tokens: the estimate is no guard
        conn.execute("UPDATE analysis_result SET prompt_tokens = 1, completion_tokens = 1")
    plan = start(cap=10.0, candidate=CHEAP)
    assert plan.estimate == pytest.approx(12 * 0.001)
    inner, lock = fakes.deepseek.responder, threading.Lock()
    flight = {"now": 0, "most": 0}

    def slow(body: dict[str, Any]) -> Any:  # every call in flight for a while: eight threads race for the cap
        with lock:
            flight["now"] += 1
            flight["most"] = max(flight["most"], flight["now"])
        time.sleep(0.3)
        with lock:
            flight["now"] -= 1
        return inner(body)

    fakes.deepseek.responder = slow
    reserving: set[int] = set()
    reserve = store.evaluations.reserve

    def counted(*args: Any, **kwargs: Any) -> Any:
        reserving.add(threading.get_ident())
        return reserve(*args, **kwargs)

    monkeypatch.setattr(store.evaluations, "reserve", counted)
    eight = settings(llm_concurrency=8, analysis_tasks=1)
    # 0.3: less than one article (0.4) and one call at its most (0.5): eight threads, no call
    assert shadow.new_cap(connect, eight, plan.evaluation_id, 0.3) is None
    first = shadow.run(connect, eight, plan.evaluation_id)
    assert ledger(plan.evaluation_id) == (0, 0.0) and calls_of(fakes, "deepseek-flash") == 0 and reserving
    assert first.stopped is not None and "cap" in first.stopped and _status(plan.evaluation_id) == ("stopped", "cap")
    # 1.2: two calls at their most fit at once, never a third; the two paid (0.8), a third no longer fits
    shadow.new_cap(connect, eight, plan.evaluation_id, 1.2)
    reserving.clear()
    second = shadow.run(connect, eight, plan.evaluation_id)
    assert ledger(plan.evaluation_id) == (2, pytest.approx(0.8)) and second.counts["answered"] == 2
    assert flight["most"] == 2 and calls_of(fakes, "deepseek-flash") == 2
    assert len(reserving) == 8  # every thread was there, waiting for the cap while two calls were in flight
    with connect() as conn:
        held = conn.execute("SELECT coalesce(sum(reserved), 0) AS n FROM evaluation_attempt").fetchone()["n"]
    assert float(held) == 0  # every reservation released once its ladder was in the ledger


def test_a_ladder_whose_repair_does_not_fit_is_refused_at_once_not_left_waiting_for_another(fakes, monkeypatch) -> None:
    # two ladders, each holding its first call's reservation, each wanting a repair the cap fits only once the
    # other's is released: waiting, each would wait for the other until the deadline
    demo_day(fakes, monkeypatch)
    plan = start(cap=1.0, candidate=CHEAP)
    with connect() as conn:
        items = [r["content_item_id"] for r in conn.execute(
            "SELECT content_item_id FROM evaluation_item WHERE evaluation_id = %s ORDER BY 1 LIMIT 2",
            (plan.evaluation_id,)).fetchall()]
        first, second = (store.evaluations.claim(conn, plan.evaluation_id, item, claimer=f"test:{item}",
                                                 max_attempts=3).attempt_id for item in items)
        conn.commit()

    class NoWait(FixedClock):
        def sleep(self, seconds: float) -> None:
            raise AssertionError(f"waited {seconds} s for a reservation that would never be released")

    cap = spending.Cap(connect, plan.evaluation_id, settings().price_table(), clock=NoWait(shanghai(2026, 2, 4, 22, 30)))
    cap.reserve(first, 0.4)
    cap.reserve(second, 0.4)
    with pytest.raises(llm.LLMBudget, match="cap leaves too little"):
        cap.reserve(first, 0.8)  # 0.4 + 0.8 > 1.0 while the other holds 0.4
    with connect() as conn:
        asked = store.evaluations.reserve(conn, plan.evaluation_id, second, 0.8)
    assert (asked.taken, asked.others, asked.held) == (False, pytest.approx(0.4), pytest.approx(0.4))
    with pytest.raises(AssertionError, match="waited"):  # a first call (holding nothing) waits while others hold
        cap.reserve(0, 0.4)


def test_the_cap_stops_a_run_and_a_resumed_run_pays_for_no_article_twice(fakes, monkeypatch) -> None:
    demo_day(fakes, monkeypatch)
    _capped(monkeypatch)
    plan = start(cap=4.8, candidate=CHEAP)  # exactly the estimate: 12 x 0.4
    assert (plan.estimate, plan.most_per_call, plan.refused) == (pytest.approx(4.8), pytest.approx(0.5), None)
    one_at_a_time = settings(llm_concurrency=1, analysis_tasks=1)
    first = shadow.run(connect, one_at_a_time, plan.evaluation_id)
    # by id: ten single-call answers (4.0); 手机链's first call fits (4.5), its repair would not (5.0): its answer
    # stands as it is (4.4); 设备's call would pass the cap (4.9): released, not counted, the run stopped
    assert first.stopped is not None and "cap" in first.stopped
    assert first.counts == {"answered": 11, "released": 1} and calls_of(fakes, "deepseek-flash") == 11
    assert ledger(plan.evaluation_id) == (11, pytest.approx(4.4))
    with connect() as conn:
        row = conn.execute("SELECT i.attempts, i.status FROM evaluation_item i JOIN content_item c "
                           "ON c.id = i.content_item_id WHERE c.title LIKE '设备%%'").fetchone()
    assert (row["attempts"], row["status"]) == (0, store.evaluations.PENDING)
    shadow.new_cap(connect, one_at_a_time, plan.evaluation_id, 10.0)
    again = shadow.run(connect, one_at_a_time, plan.evaluation_id)
    assert again.stopped is None and again.counts == {"answered": 1} and calls_of(fakes, "deepseek-flash") == 12
    assert ledger(plan.evaluation_id) == (12, pytest.approx(4.8))
    assert shadow.run(connect, one_at_a_time, plan.evaluation_id).counts == {}  # nothing left to pay for
    assert calls_of(fakes, "deepseek-flash") == 12


def test_the_cap_has_an_upper_bound(fakes, monkeypatch) -> None:
    demo_day(fakes, monkeypatch)
    with pytest.raises(shadow.EvaluationError, match=r"--cap: from 0 to \$50"):
        start(cap=50.01)
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_CURRENCY", "CNY")
    with pytest.raises(shadow.EvaluationError, match="--cap: from 0 to ¥350"):
        start(cap=351, candidate=CHEAP)
    assert rows_in("evaluation") == {"evaluation": 0}


# ------------------------------------------------------------------------------------------ the right prices


def test_the_candidate_is_priced_by_its_own_prices_and_a_model_without_known_prices_needs_them(fakes, monkeypatch) -> None:
    demo_day(fakes, monkeypatch)
    # the deployment prices its own model (v4-pro) by hand: flash is still priced by flash's published prices
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_PRICES", '{"cache_hit": 1, "cache_miss": 10, "output": 30}')
    plan = start()
    assert plan.source == "published" and plan.prices.off_peak.output == 0.60
    shadow.run(connect, settings(), plan.evaluation_id)
    # 11 single-call answers and 手机链's four calls, at flash's rates (not 10 / 30 a million tokens)
    assert ledger(plan.evaluation_id) == (12, pytest.approx(11 * round(FLASH_CALL, 6) + round(4 * FLASH_CALL, 6)))
    pro = start(candidate=shadow.Candidate(model="deepseek-v4-pro"))
    assert pro.source == "deployment" and pro.prices.off_peak.output == 30
    # in CNY DeepSeek publishes v4-pro's prices only: flash is refused before anything is recorded, unless given
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_CURRENCY", "CNY")
    monkeypatch.delenv("AIRFLOW_VAR_RADAR_DEEPSEEK_PRICES")
    before = rows_in("evaluation", "evaluation_item")
    with pytest.raises(shadow.EvaluationError, match="no published CNY prices for deepseek-flash.*--prices"):
        start()
    assert rows_in("evaluation", "evaluation_item") == before
    given = start(candidate=shadow.Candidate(model="deepseek-flash", prices='{"cache_hit": 0.02, "cache_miss": '
                                                 '1, "output": 4}'))
    assert given.source == "given" and given.prices.currency == "CNY"
    with connect() as conn:
        row = store.evaluations.get(conn, given.evaluation_id)
    assert row["prices"] == {"cache_hit": 0.02, "cache_miss": 1.0, "output": 4.0, "source": "given"}
    assert shadow.prices_of(row, settings()).off_peak == given.prices.off_peak


# ------------------------------------------------------------------------------------- the slots' budget


def test_an_evaluation_spends_from_its_own_cap_and_never_holds_back_a_reader_s_article(fakes, monkeypatch) -> None:
    demo_day(fakes, monkeypatch)  # the slot spent 12 analyses and the digest, 13 x 0.001421 = 0.018473, today
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DAILY_BUDGET", "0.02")
    plan = start()
    evening = FixedClock(shanghai(2026, 2, 4, 22, 30))  # the evaluation runs the evening of the demo's slot
    run = shadow.run(connect, settings(), plan.evaluation_id, clock=evening)
    assert run.stopped is None and run.counts == {"answered": 12}  # past the day's budget: its own cap decides
    with connect() as conn:
        today = evening.today()
        assert store.operations.day_spend(conn, today, "USD") == pytest.approx(0.018473)
        assert store.operations.day_spend(conn, today, "USD", evaluations=True) == pytest.approx(0.005731)
        assert spending.budget_reached(conn, settings(), evening) is None  # 0.0242 in all, the slots' 0.0185 < 0.02
    # the next morning's article is analysed, not left for the next day
    morning = shanghai(2026, 2, 5, 7)
    fakes.werss.articles.append(FakeArticle(
        id="late-1", mp_id=fakes.werss.articles[0].mp_id, title="早间快讯：一则新消息",
        publish_time=int(shanghai(2026, 2, 5, 6, 30).timestamp()), content_html="<p>" + "早间快讯正文。" * 40 + "</p>"))
    fakes.at(morning)
    assert not run_slot(morning)["errors"]
    with connect() as conn:
        slot = conn.execute("SELECT budget_deferred FROM slot_run WHERE slot = '07:00'").fetchone()
        analysed = conn.execute("SELECT count(*) AS n FROM analysis_result a JOIN content_item c ON c.id = "
                                "a.content_item_id WHERE c.title = '早间快讯：一则新消息'").fetchone()["n"]
    assert slot["budget_deferred"] == 0 and analysed == 1
    # its spend is shown apart: the day's tile and the overview's spend are the slots'; a pushed link sees neither
    daily = read_page(f"/daily/{DAY}", LATER)
    # the slots' of that day: 12 analyses and the digest, 13 x 0.001421 = 0.018473 (the morning's new article is
    # the next day's spend)
    assert '<div class="k">LLM 花费</div><div class="v cost">$0.0185</div>' in daily
    assert '模型评估（另计，不占预算）</div><div class="v cost">$0.0057</div>' in daily
    assert "模型评估另计：今日 $0，近 30 天 $0.0057（不占预算，不在上图）" in read_page("/", LATER)
    link = _client(LATER).get(f"/daily/{DAY}", params=signing.sign(f"/daily/{DAY}", SECRET, LATER, 1))
    assert link.status_code == 200 and "LLM 花费" not in link.text and "模型评估" not in link.text  # no spend at all


# --------------------------------------------------------------------------------------------- the endpoint


@pytest.mark.parametrize(("host", "expected"), [
    ("api.example.com", "https://api.example.com"),
    ("https://api.example.com/v1/", "https://api.example.com/v1"),
    ("127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("http://localhost:9/deepseek", "http://localhost:9/deepseek"),
    ("http://[::1]:9", "http://[::1]:9"),
])
def test_an_llm_connection_is_https_unless_it_is_this_machine_s_loopback(host: str, expected: str) -> None:
    assert connections.llm_url(ConnectionInfo("c", host=host), "c") == expected


@pytest.mark.parametrize(("host", "refusal"), [
    ("http://10.0.0.5:8000", "would send the API key in clear"),
    ("http://api.example.com", "would send the API key in clear"),
    ("ftp://127.0.0.1:21", "is not an https URL"),
])
def test_an_llm_connection_that_would_send_its_key_in_clear_or_elsewhere_is_refused(host: str, refusal: str) -> None:
    with pytest.raises(connections.ConfigurationError, match=refusal):
        connections.llm_url(ConnectionInfo("c", host=host), "c")


def test_the_slots_own_connection_may_be_a_plain_http_proxy_of_the_deployment_the_candidates_may_not() -> None:
    """compose's DeepSeek may be reached through a proxy on its private network; a candidate's endpoint is
    any host a user typed into a form."""
    conn = ConnectionInfo("deepseek_default", host="http://llm-proxy:8000/v1")
    assert connections.llm_url(conn, "deepseek_default", https_only=False) == "http://llm-proxy:8000/v1"
    assert connections.Setup("deepseek_default", "deepseek-v4-pro", True, "high").https_only is False
    with pytest.raises(connections.ConfigurationError, match="would send the API key in clear"):
        connections.llm_url(conn, "eval", https_only=True)
    with pytest.raises(connections.ConfigurationError, match="is not an https URL"):
        connections.llm_url(ConnectionInfo("deepseek_default", host="ftp://x"), "deepseek_default", https_only=False)


def _connection(monkeypatch: Any, conn_id: str, host: str, password: str = "sk-test") -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({
        "conn_type": "http", "host": host, "password": password, "extra": {"backoff_seconds": 0}}))


@pytest.mark.parametrize(("conn_id", "host", "password", "said"), [
    ("radar_llm_down", "http://127.0.0.1:1", "sk-test", "'radar_llm_down' .*does not answer.*unreachable"),
    ("radar_llm_ftp", "ftp://127.0.0.1:1", "sk-test", "'radar_llm_ftp'.*not an https URL"),
    ("radar_llm_plain", "http://192.0.2.1:8000", "sk-test", "'radar_llm_plain'.*in clear"),
    ("radar_llm_bad", None, "sk-wrong-key-0123", "rejected the API key .*check the radar_llm_bad connection"),
    ("radar_llm_nowhere", None, None, "connection 'radar_llm_nowhere' is missing"),
])
def test_a_dead_unsafe_or_missing_endpoint_is_refused_before_anything_is_recorded(
        fakes, monkeypatch, conn_id, host, password, said) -> None:
    demo_day(fakes, monkeypatch)
    if password is not None:
        _connection(monkeypatch, conn_id, host or f"{fakes.base}/deepseek", password)
    before = rows_in("evaluation", "evaluation_item", "llm_spend")
    with pytest.raises(shadow.EvaluationError, match=said):
        start(candidate=shadow.Candidate(model="deepseek-flash", conn_id=conn_id))
    assert rows_in("evaluation", "evaluation_item", "llm_spend") == before
    assert calls_of(fakes, "deepseek-flash") == 0


def _elsewhere(httpserver: Any) -> list[str]:
    """The Authorization header of each request that reaches /elsewhere/ on the fakes' server (a model list)."""
    from werkzeug import Response

    seen: list[str] = []

    def handle(request: Any) -> Response:
        seen.append(request.headers.get("Authorization", ""))
        return Response(json.dumps({"object": "list", "data": [{"id": "deepseek-flash", "object": "model"}]}),
                        content_type="application/json")

    httpserver.expect_request(re.compile(r"^/elsewhere/.*")).respond_with_handler(handle)
    return seen


@pytest.mark.parametrize("conn_id", ["other_team", "deepseek_default_copy", "radar_llmx"])
def test_an_evaluation_runs_only_on_a_connection_named_for_the_radars_llm_use(
        fakes, monkeypatch, httpserver, conn_id) -> None:
    """The trigger form's 连接 is any text: another team's connection would send its password to the candidate's
    endpoint (api.deepseek.com when it names no host) as the API key."""
    from include.radar.operations.connections import ConfigurationError
    from include.radar.steps import evaluate
    from include.radar.steps.runtime import Runtime

    demo_day(fakes, monkeypatch)
    seen = _elsewhere(httpserver)
    _connection(monkeypatch, conn_id, f"{fakes.base}/elsewhere", "sk-other-team-0123")
    before = rows_in("evaluation", "evaluation_item", "llm_spend")
    with pytest.raises(shadow.EvaluationError, match=f"--conn '{conn_id}'.*deepseek_default.*radar_llm_"):
        start(candidate=shadow.Candidate(model="deepseek-flash", conn_id=conn_id))
    with pytest.raises(ConfigurationError, match=f"'{conn_id}'.*radar_llm_"):
        evaluate.evaluate(Runtime.load(), {"model": "deepseek-flash", "connection": conn_id, "cap": 1.0, "days": 366,
                                           "dry_run": True})
    assert seen == [] and rows_in("evaluation", "evaluation_item", "llm_spend") == before


def test_an_evaluation_stored_on_another_connection_is_not_run(fakes, monkeypatch, httpserver) -> None:
    demo_day(fakes, monkeypatch)
    seen = _elsewhere(httpserver)
    _connection(monkeypatch, "other_team", f"{fakes.base}/elsewhere", "sk-other-team-0123")
    plan = start()
    with connect() as conn:  # as a version that took any connection stored it
        conn.execute("UPDATE evaluation SET conn_id = 'other_team' WHERE id = %s", (plan.evaluation_id,))
    with pytest.raises(shadow.EvaluationError, match="'other_team'.*radar_llm_"):
        shadow.run(connect, settings(), plan.evaluation_id, clock=FixedClock(LATER))
    assert seen == [] and calls_of(fakes, "deepseek-flash") == 0


def test_a_candidate_connection_without_a_host_sends_its_key_nowhere(fakes, monkeypatch, httpserver) -> None:
    """Without a host the key went to DeepSeek's URL: a host the connection does not name. Only the slots' own
    connection, the deployment's, still means DeepSeek without one."""
    demo_day(fakes, monkeypatch)
    seen = _elsewhere(httpserver)
    monkeypatch.setattr(connections, "DEEPSEEK_URL", f"{fakes.base}/elsewhere")  # where such a key went
    monkeypatch.setenv("AIRFLOW_CONN_RADAR_LLM_BARE", json.dumps({"conn_type": "http", "password": "sk-bare-0123"}))
    with pytest.raises(shadow.EvaluationError, match="'radar_llm_bare'.*names no host"):
        start(candidate=shadow.Candidate(model="deepseek-flash", conn_id="radar_llm_bare"))
    assert seen == []
    monkeypatch.setenv("AIRFLOW_CONN_DEEPSEEK_DEFAULT", json.dumps({"conn_type": "http", "password": "sk-test"}))
    assert connections.llm_client(settings()).models(5.0) and seen == ["Bearer sk-test"]


def test_a_model_the_endpoint_does_not_offer_is_refused_naming_the_option(fakes, monkeypatch, capsys) -> None:
    demo_day(fakes, monkeypatch)
    assert cli.main(["evaluate", "--model", "deepseek-chat", "--cap", "1", "--days", "366", "--prices",
                     '{"cache_hit": 0.1, "cache_miss": 1, "output": 2}']) == 2
    err = capsys.readouterr().err
    assert "does not offer 'deepseek-chat'" in err and "--model" in err and "deepseek_default" in err
    assert rows_in("evaluation") == {"evaluation": 0}


def test_articles_failing_one_after_another_stop_the_run_as_failed_with_the_reason(fakes, monkeypatch, capsys) -> None:
    demo_day(fakes, monkeypatch)
    recorded = fakes.deepseek.responder
    fakes.deepseek.responder = lambda body: ((503, {"error": {"message": "upstream down"}})
                                             if body["model"] == "deepseek-flash" else recorded(body))
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LLM_CONCURRENCY", "1")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_ANALYSIS_TASKS", "1")
    assert cli.main(["evaluate", "--model", "deepseek-flash", "--cap", "1", "--days", "366"]) == 3
    out = capsys.readouterr().out
    assert "failed: 3 articles in a row failed; the last: " in out and "HTTP 503: upstream down" in out
    assert calls_of(fakes, "deepseek-flash") == 3 * 4  # three ladders of four calls, then nothing more
    with connect() as conn:
        e = store.evaluations.listing(conn)[0]
        statuses = [r["status"] for r in store.evaluations.pairs(conn, e["id"])]
    assert (e["status"], e["reason"], e["failed"], e["answered"]) == ("failed", "failing", 3, 0)
    assert statuses.count(store.evaluations.PENDING) == 9 and ledger(e["id"]) == (0, 0.0)
    page = read_page(f"/evaluation/{e['id']}", LATER)  # the reason on the page, in its first card
    verdict = page.split('<section class="card verdict">', 1)[1].split("</section>", 1)[0]
    assert "文章接连失败：连续 3 篇文章的每次调用都失败；最后一次：" in verdict and "HTTP 503: upstream down" in verdict
    assert "失败（已停止，可续跑） · 0/12 篇已回答，3 篇失败" in verdict
    # two articles, both failed: fewer than three in a row, but every article it tried failed
    plan = start(size=2)
    run = shadow.run(connect, settings(), plan.evaluation_id)
    assert run.failed and run.stopped is not None and run.stopped.startswith("every article it tried failed (2)")
    assert _status(plan.evaluation_id) == ("failed", "failing")


# -------------------------------------------------------------------------------- the dry run, the resumed


def test_a_dry_run_prints_the_estimate_and_records_nothing(fakes, monkeypatch, capsys) -> None:
    demo_day(fakes, monkeypatch)
    before = rows_in("evaluation", "evaluation_item", "evaluation_attempt", "llm_spend")
    listed = fakes.deepseek.model_list_calls
    assert cli.main(["evaluate", "--model", "deepseek-flash", "--cap", "1", "--days", "366", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "nothing recorded, no call made" in out and "12 articles; estimated $0.0050 for one call an article" in out
    assert "deepseek-flash's published prices" in out and "output 0.6 USD" in out and "it would start" in out
    assert rows_in("evaluation", "evaluation_item", "evaluation_attempt", "llm_spend") == before
    assert calls_of(fakes, "deepseek-flash") == 0 and fakes.deepseek.model_list_calls == listed + 1


def test_a_refused_evaluation_is_resumed_with_a_new_cap(fakes, monkeypatch, capsys) -> None:
    demo_day(fakes, monkeypatch)
    assert cli.main(["evaluate", "--model", "deepseek-flash", "--cap", "0.001", "--days", "366"]) == 1
    out = capsys.readouterr().out
    evaluation_id = int(out.split("evaluation ", 1)[1].split(":", 1)[0])
    assert "over the cap of $0.0010" in out and f"--resume {evaluation_id} --cap" in out
    assert cli.main(["evaluate", "--resume", str(evaluation_id), "--cap", "0.002"]) == 1
    assert "over the cap of $0.0020: no call made" in capsys.readouterr().out  # the new cap, not the old one
    assert calls_of(fakes, "deepseek-flash") == 0
    assert cli.main(["evaluate", "--resume", str(evaluation_id), "--cap", "0.05"]) == 0
    assert "12 answered, 0 failed" in capsys.readouterr().out and _status(evaluation_id) == ("done", None)
    assert ledger(evaluation_id)[0] == 12


def test_the_most_a_call_may_cost_is_every_byte_a_token_and_a_full_answer(fakes, monkeypatch) -> None:
    demo_day(fakes, monkeypatch)
    _capped(monkeypatch)
    plan, rows = shadow.preview(connect, settings(), CHEAP, shadow.Sample(days=14), 1.0, clock=FixedClock(LATER))
    assert plan.evaluation_id is None and plan.most_per_call == pytest.approx(0.5)  # the prompt costs nothing here
    flash, _ = shadow.preview(connect, settings(), FLASH, shadow.Sample(days=14), 1.0, clock=FixedClock(LATER))
    longest = max(len(r["clean_text"].encode()) for r in rows)
    # at flash's rates: at least the longest article's bytes and 500 output tokens, a call at the most
    assert flash.most_per_call > (longest * 0.15 + 500 * 0.60) / 1e6


def test_an_article_that_crashes_fails_the_evaluation_with_its_reason_and_exit_status(fakes, monkeypatch, capsys) -> None:
    demo_day(fakes, monkeypatch)

    def broken(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("disk full")

    monkeypatch.setattr(store.evaluations, "store_answer", broken)
    assert cli.main(["evaluate", "--model", "deepseek-flash", "--cap", "1", "--days", "366", "--size", "2"]) == 3
    assert "failed: 2 of 2 articles crashed" in capsys.readouterr().out
    with connect() as conn:
        e = store.evaluations.listing(conn)[0]
        outcomes = [r["outcome"] for r in conn.execute("SELECT outcome FROM evaluation_attempt").fetchall()]
    assert (e["status"], e["reason"]) == ("failed", "crashed") and outcomes == ["crashed", "crashed"]
    assert ledger(e["id"])[0] == 2  # what the two answers cost is in the ledger all the same


def test_the_docs_table_of_how_a_run_ends_is_the_code_s() -> None:
    from include.radar.evaluation import commands
    from include.radar.web.views import evaluation as views
    from tests.conftest import REPO

    doc = (REPO / "docs" / "evaluation.md").read_text(encoding="utf-8")
    table = doc.split("| status | why | exit | what to do |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `(\w+)`(?: · `(\w+)`)? \| .*? \| (\d) \|", table, re.MULTILINE)
    exits = {"done": commands.DONE, "stopped": commands.STOPPED, "refused": commands.STOPPED,
             "failed": commands.FAILED}
    assert {reason for _, reason, _ in rows if reason} == set(views.REASONS)
    assert all(int(code) == exits[status] for status, _, code in rows)
    assert {status for status, _, _ in rows} | {"planned", "running"} == set(views.STATUS)
    assert {reason for status, reason, _ in rows if status == "failed"} == set(shadow.FAILING)
