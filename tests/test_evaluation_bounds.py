"""The evaluation's bounds against an endpoint and a run that do not behave: an endpoint that reports more than a
call reserved stops the run at once and is not run again unless asked.

As in test_evaluation_money.py the candidate is priced at hand-made prices (``GIVEN``: output only, 1000 a million
tokens) with ``deepseek_max_tokens`` 500: one call at its most reserves 0.5; the over-reporting endpoint says
2000 output tokens for every call (2.0 each).

Rooms: evaluation/job.py (the watch), evaluation/shadow.py, evaluation/commands.py, web/views/evaluation.py.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from include.radar import cli, store
from include.radar.evaluation import shadow
from include.radar_demo.fakes import completion
from tests.conftest import connect
from tests.evaluation_day import FLASH_CALL, LATER, calls_of, demo_day, ledger, settings, start
from tests.slotrun import read_page

GIVEN = '{"cache_hit": 0, "cache_miss": 0, "output": 1000}'
CHEAP = shadow.Candidate(model="deepseek-flash", prices=GIVEN)
REPORTED = 2000  # output tokens the endpoint says each call made, against the 500 asked


def _over_reporting(fakes: Any, monkeypatch: Any, *, seconds: float = 0.0) -> dict[str, int]:
    """The demo day, max_tokens 500, a tiny estimate (the analyses' tokens unknown), and flash's endpoint
    reporting ``REPORTED`` output tokens; how many of its calls were in flight at most."""
    demo_day(fakes, monkeypatch)
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_TOKENS", "500")
    with connect() as conn:
        conn.execute("UPDATE analysis_result SET prompt_tokens = 1, completion_tokens = 1")
    inner, lock, flight = fakes.deepseek.responder, threading.Lock(), {"now": 0, "most": 0}

    def answer(body: dict[str, Any]) -> Any:
        if body["model"] != "deepseek-flash":
            return inner(body)
        with lock:
            flight["now"] += 1
            flight["most"] = max(flight["most"], flight["now"])
        time.sleep(seconds)
        with lock:
            flight["now"] -= 1
        return completion(inner(body), model=body["model"], completion_tokens=REPORTED)

    fakes.deepseek.responder = answer
    return flight


def _over_cap(evaluation_id: int) -> dict[str, Any]:
    with connect() as conn:
        row = store.evaluations.get(conn, evaluation_id)
    assert (row["status"], row["reason"]) == ("failed", "over_cap")
    return row["over_cap"]


def test_an_over_reporting_endpoint_stops_a_run_of_one_thread_at_its_first_call(fakes, monkeypatch, capsys) -> None:
    _over_reporting(fakes, monkeypatch)
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LLM_CONCURRENCY", "1")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_ANALYSIS_TASKS", "1")
    capsys.readouterr()
    assert cli.main(["evaluate", "--model", "deepseek-flash", "--prices", GIVEN, "--cap", "1.5", "--days", "366"]) == 3
    out = [line for line in capsys.readouterr().out.splitlines() if not re.match(r"\d{4}-\d\d-\d\dT", line)]  # no log
    evaluation_id = int(out[0].split("evaluation ", 1)[1].split(":", 1)[0])
    # one call reserved 0.5 and reported 2.0: the ledger passed the cap by 0.5, by that call alone
    assert calls_of(fakes, "deepseek-flash") == 1 and ledger(evaluation_id) == (1, pytest.approx(2.0))
    assert out[1].startswith("failed: spent $2.00 of a cap of $1.50 ($0.5000 over it): a call reported 2000 output "
                             "tokens against the 500 asked")
    assert out[2].startswith("OVER THE CAP by $0.5000: spent $2.00 of a cap of $1.50")  # the summary's first line
    over = _over_cap(evaluation_id)
    assert {k: over[k] for k in ("call", "output_tokens", "max_tokens", "cost", "reserved", "spent", "cap", "over")} == {
        "call": 1, "output_tokens": 2000, "max_tokens": 500, "cost": 2.0, "reserved": 0.5, "spent": 2.0, "cap": 1.5,
        "over": 0.5}
    page = read_page(f"/evaluation/{evaluation_id}", LATER)
    verdict = page.split('<section class="card verdict">', 1)[1].split("</section>", 1)[0]
    first = verdict.split("</h1>", 1)[1].lstrip()  # said first, in red, with the amount
    assert first.startswith('<p class="failure error-text" role="alert"><b>超出费用上限 $0.5000：已花 $2.00，上限 $1.50。'
                            "端点报告一次调用输出 2000 tokens，而请求最多 500")


def test_eight_threads_against_an_over_reporting_endpoint_pass_the_cap_by_the_calls_in_flight_only(
        fakes, monkeypatch) -> None:
    flight = _over_reporting(fakes, monkeypatch, seconds=0.3)
    plan = start(cap=1.5, candidate=CHEAP)
    run = shadow.run(connect, settings(llm_concurrency=8, analysis_tasks=1), plan.evaluation_id)
    assert run.failed and run.reason == "over_cap"
    made = calls_of(fakes, "deepseek-flash")
    # three calls at their most (0.5 each) fit the cap at once; each reported 2.0; no call started after the first
    # of them was seen: every call made was in flight at once, and the ledger is the cap plus what they reported
    assert flight["most"] == made == 3
    lines, spent = ledger(plan.evaluation_id)
    assert lines == made and spent == pytest.approx(made * 2.0) and spent <= 1.5 + flight["most"] * 2.0
    assert _over_cap(plan.evaluation_id)["over"] == pytest.approx(spent - 1.5)
    with connect() as conn:
        held = conn.execute("SELECT coalesce(sum(reserved), 0) AS n FROM evaluation_attempt").fetchone()["n"]
    assert float(held) == 0


def test_a_run_on_an_endpoint_that_over_reported_is_refused_unless_asked(fakes, monkeypatch, capsys) -> None:
    _over_reporting(fakes, monkeypatch)
    plan = start(cap=1.5, candidate=CHEAP)
    shadow.run(connect, settings(llm_concurrency=1, analysis_tasks=1), plan.evaluation_id)
    fakes.deepseek.responder = demo_run_responder()  # the endpoint honours max_tokens again
    capsys.readouterr()
    assert cli.main(["evaluate", "--resume", str(plan.evaluation_id), "--cap", "10"]) == 2
    err = capsys.readouterr().err
    assert "reported more tokens for deepseek-flash than max_tokens allows" in err and "--trust-max-tokens" in err
    with connect() as conn:
        assert float(store.evaluations.get(conn, plan.evaluation_id)["cap"]) == 1.5  # refused before its cap changed
    with pytest.raises(shadow.EvaluationError, match="--trust-max-tokens"):  # a new one on that endpoint too
        shadow.run(connect, settings(), start(cap=1.5, candidate=CHEAP).evaluation_id)
    assert calls_of(fakes, "deepseek-flash") == 1
    assert cli.main(["evaluate", "--resume", str(plan.evaluation_id), "--cap", "10", "--trust-max-tokens"]) == 0
    assert calls_of(fakes, "deepseek-flash") == 1 + 11 + 3  # the other eleven, 手机链's three repairs among them


def demo_run_responder() -> Any:
    from include.radar_demo import run as demo_run

    return demo_run.build_deepseek().responder


# ------------------------------------------------------------------------------------ a run that failed


def test_a_run_whose_endpoint_died_says_so_first_and_judges_no_cost_on_too_few_articles(
        fakes, monkeypatch, capsys) -> None:
    from include.radar.evaluation import summary

    demo_day(fakes, monkeypatch)
    recorded, answered = fakes.deepseek.responder, []

    def dies(body: dict[str, Any]) -> Any:  # the endpoint answers four calls, then is down
        if body["model"] != "deepseek-flash":
            return recorded(body)
        answered.append(1)
        return recorded(body) if len(answered) <= 4 else (503, {"error": {"message": "upstream down"}})

    fakes.deepseek.responder = dies
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LLM_CONCURRENCY", "1")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_ANALYSIS_TASKS", "1")
    capsys.readouterr()
    assert cli.main(["evaluate", "--model", "deepseek-flash", "--cap", "1", "--days", "366"]) == 3
    out = [line for line in capsys.readouterr().out.splitlines() if not re.match(r"\d{4}-\d\d-\d\dT", line)]
    with connect() as conn:
        e = store.evaluations.listing(conn)[0]
        s = summary.load(conn, e["id"], LATER)
    n = int(e["answered"])
    assert 1 <= n <= 4 and (e["status"], e["reason"], e["failed"]) == ("failed", "failing", 3)
    assert out[2] == f"failed after {n} of 12: the endpoint failed"  # the summary's first line
    # the cost per article is of the articles both answered and billed, not the ledger over the failures too
    assert s is not None and s.glance is not None and s.glance.billed == n
    assert s.glance.candidate_per_article == pytest.approx(ledger(e["id"])[1] / n)
    assert s.glance.ratio is None and "the candidate costs — of the current" in "\n".join(out)
    page = read_page(f"/evaluation/{e['id']}", LATER)
    verdict = page.split('<section class="card verdict">', 1)[1].split("</section>", 1)[0]
    reading = verdict.split('<p class="reading"><b>', 1)[1].split("</b>", 1)[0]
    assert reading.startswith(f"失败：12 篇中回答了 {n} 篇后停止（端点接连失败）。只有 {n} 篇两种设置都回答并计费，不足 10 篇")
    assert "便宜" not in reading and "贵" not in reading
    assert "文章接连失败：连续 3 篇文章的每次调用都失败；最后一次：" in verdict  # the reason in Chinese


# ------------------------------------------------------------------------------------ one rate table


def test_the_same_evaluation_at_07_00_and_at_10_00_has_the_same_verdict_at_list_rates(fakes, monkeypatch) -> None:
    from include.radar.core.clock import FixedClock
    from include.radar.evaluation import summary
    from include.radar.web.views import evaluation as views
    from tests.slotrun import shanghai

    demo_day(fakes, monkeypatch)  # the current set-up's analyses, at 22:00 (off-peak)
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_PEAK_MULTIPLIER", "2")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_PEAK_SINCE", "2026-01-01T00:00:00+08:00")
    seen = {}
    for hour in (7, 10):  # off-peak, then inside the peak window (09:00-12:00)
        plan = start()
        shadow.run(connect, settings(), plan.evaluation_id, clock=FixedClock(shanghai(2026, 2, 5, hour)))
        with connect() as conn:
            s = summary.load(conn, plan.evaluation_id, LATER, settings=settings())
        assert s is not None and s.glance is not None
        seen[hour] = (s.glance, views.verdict(s).reading, ledger(plan.evaluation_id)[1])
    (early, early_reading, early_paid), (late, late_reading, late_paid) = seen[7], seen[10]
    # eleven single calls and 手机链's four, each ladder to six places: off-peak, then at the peak's double rates
    assert early_paid == pytest.approx(11 * round(FLASH_CALL, 6) + round(4 * FLASH_CALL, 6))
    assert late_paid == pytest.approx(11 * round(2 * FLASH_CALL, 6) + round(8 * FLASH_CALL, 6))
    assert late_reading == early_reading and early_reading.startswith("候选每篇便宜 66%")
    assert (late.ratio, late.per_article, late.candidate_per_article) == (
        early.ratio, early.per_article, early.candidate_per_article)
    assert late.month(late.candidate_per_article) == early.month(early.candidate_per_article)
    # each side's billed cost beside, and the window named
    assert late.billed_candidate == pytest.approx(late_paid) and late.peak == "09:00-12:00,14:00-18:00 ×2"
    figures = dict(views.verdict(summary_of(plan.evaluation_id)).figures)
    assert figures["价格"].startswith("两种设置都按标准价（非高峰价）比较") and "北京时间 09:00-12:00,14:00-18:00 ×2" in figures["价格"]
    assert f"候选 ${late.billed_candidate:.4f}" in figures["价格"]


def summary_of(evaluation_id: int) -> Any:
    from include.radar.evaluation import summary

    with connect() as conn:
        return summary.load(conn, evaluation_id, LATER, settings=settings())


# ---------------------------------------------------------------------- opportunities as the slots push them


def test_an_evidence_refused_answer_is_no_added_opportunity_and_its_card_says_so(fakes, monkeypatch) -> None:
    from include.radar.evaluation import summary

    demo_day(fakes, monkeypatch)
    plan = start()
    shadow.run(connect, settings(), plan.evaluation_id)
    s = summary_of(plan.evaluation_id)
    # flash calls 手机链 (62) an opportunity the current set-up does not, but its quotes are not in the article
    assert (s.confusion.only_candidate, s.candidate.evidence_refused) == (1, 1)
    assert (s.pushed.both, s.pushed.only_current, s.pushed.only_candidate) == (4, 1, 0)
    phone = next(d for d in s.disagreements if d.title.startswith("手机链"))
    assert phone.candidate["opportunity"] and not phone.candidate["verified"] and phone.current["verified"]
    assert "candidate 62 ✓ sector bullish (evidence refused: never pushed)" in "\n".join(summary.lines(s))
    page = read_page(f"/evaluation/{plan.evaluation_id}", LATER)
    card = page.split("手机链", 1)[1].split("</li>", 1)[0]
    assert "候选 62 分 · 有机会 · 行业 · 看多" in card and "证据未通过核对（不会推送）" in card
    assert "当前的 5 个中候选漏掉 1 个，另多出 0 个" in page


# --------------------------------------------------------------------- the dry run, the resume, the chart


def test_the_dry_run_is_an_upper_bound_of_the_run_and_names_the_cap_that_finishes_it(fakes, monkeypatch, capsys) -> None:
    demo_day(fakes, monkeypatch)
    args = ["evaluate", "--model", "deepseek-flash", "--days", "366"]
    capsys.readouterr()
    assert cli.main([*args, "--cap", "0.05", "--dry-run"]) == 0
    out = capsys.readouterr().out
    # 12 x 0.00042 for one call an article; with every ladder's three repairs, four times that
    assert "12 articles; estimated $0.0050 for one call an article, at most $0.0202 with every ladder's repairs" in out
    finishing = float(re.search(r"a cap of \$(\S+) finishes it whatever it needs", out)[1])
    assert "cap $0.0500: it would start, and may stop on its cap before the end" in out and finishing > 0.05
    plan = start(cap=finishing)
    shadow.run(connect, settings(), plan.evaluation_id)
    spent = ledger(plan.evaluation_id)[1]  # 手机链's ladder of four calls among them
    assert calls_of(fakes, "deepseek-flash") == 15 and spent <= plan.worst <= plan.finishing <= finishing
    assert _status_of(plan.evaluation_id) == "done"  # under the cap it named, the run finished
    assert cli.main([*args, "--cap", "0.001", "--dry-run"]) == 1  # refused: not zero
    assert "refused, estimated $0.0050 for 12 articles is over the cap of $0.0010" in capsys.readouterr().out


def _status_of(evaluation_id: int) -> str:
    with connect() as conn:
        return store.evaluations.get(conn, evaluation_id)["status"]


def test_a_resume_with_another_model_is_refused_and_an_unknown_model_is_checked_before_its_prices(
        fakes, monkeypatch, capsys) -> None:
    demo_day(fakes, monkeypatch)
    plan = start(cap=0.001)  # refused: nothing paid
    capsys.readouterr()
    assert cli.main(["evaluate", "--resume", str(plan.evaluation_id), "--model", "deepseek-v4-pro", "--cap", "1"]) == 2
    assert f"--resume {plan.evaluation_id} evaluates deepseek-flash, not --model deepseek-v4-pro" in capsys.readouterr().err
    with connect() as conn:
        assert float(store.evaluations.get(conn, plan.evaluation_id)["cap"]) == 0.001
    # a model the endpoint does not offer, without prices: the endpoint's word first, not a request for prices
    assert cli.main(["evaluate", "--model", "qwen-max", "--cap", "1", "--days", "366"]) == 2
    err = capsys.readouterr().err
    assert "does not offer 'qwen-max'" in err and "--prices" not in err


def test_a_long_model_name_is_cut_to_fit_the_chart_s_axis_and_kept_whole_in_its_description() -> None:
    from include.radar.web.views import evaluation as views

    model = "vendor/" + "a-very-long-candidate-model-name-" * 3
    chart = str(views.scatter([(50, 60)], title="t", desc=f"候选 {model}", x_label="当前（deepseek-v4-pro）的评分",
                              y_label=f"候选（{model}）的评分"))
    label = re.findall(r'rotate\(-90[^>]*>([^<]*)</text>', chart)[0]
    axis = views.SIZE - views.TOP - views.BOTTOM
    assert "…" in label and label.startswith("候选（vendor/") and label.endswith("）的评分")
    assert views.text_width(label) <= axis < views.text_width(f"候选（{model}）的评分")
    assert model in chart and ">当前（deepseek-v4-pro）的评分</text>" in chart  # a short one is left whole
