"""Analysis batches: how a slot's articles are split over mapped tasks, and what one batch task guarantees."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from include.radar import store
from include.radar.analysis import batches
from include.radar.analysis.llm import MIN_CALL_SECONDS, LLMConfigError
from include.radar.core.clock import FixedClock
from include.radar.steps.analyse import analyse
from include.radar.steps.ingest import ingest
from include.radar.steps.open_slot import open_slot
from include.radar.steps.runtime import Runtime
from include.radar.steps.select_articles import select_articles
from tests.conftest import connect
from tests.slotrun import answer, article, shanghai

SLOT = shanghai(2026, 1, 8, 14)


def _articles(n: int) -> list[dict]:
    return [{"item_id": i, "title": f"文章{i}"} for i in range(1, n + 1)]


@pytest.mark.parametrize(("n", "tasks", "expected"), [
    (1, 2, [1]), (3, 2, [1, 2]), (50, 2, [25, 25]), (51, 2, [25, 26]), (101, 2, [25, 25, 25, 26]),
    (200, 2, [50, 50, 50, 50]), (200, 3, [33, 33, 34, 33, 33, 34]), (7, 4, [1, 2, 2, 2]), (1000, 1, [50] * 20),
])
def test_the_plan_covers_every_article_once_in_full_waves_of_at_most_max_batch(n, tasks, expected):
    plan = batches.plan(_articles(n), tasks)
    assert [len(b["articles"]) for b in plan] == expected
    assert [a["item_id"] for b in plan for a in b["articles"]] == list(range(1, n + 1))  # contiguous, in order
    assert all(b["of"] == len(plan) and len(b["articles"]) <= batches.MAX_BATCH for b in plan)
    assert len(plan) % tasks == 0 or len(plan) == n  # full waves, unless there are fewer articles than tasks


def _rounds(sizes: list[int], threads: int, tasks: int) -> int:
    """Rounds of LLM calls the slot waits for: each wave of ``tasks`` batches as long as its longest batch."""
    waves = [sizes[i:i + tasks] for i in range(0, len(sizes), tasks)]
    return sum(max(-(-size // threads) for size in wave) for wave in waves)


@pytest.mark.parametrize(("n", "threads", "expected"), [
    (200, 8, [48, 48, 48, 56]), (100, 8, [48, 52]), (50, 4, [24, 26]), (17, 8, [8, 9]), (3, 8, [1, 2]),
])
def test_batches_hold_whole_rounds_of_their_threads_so_the_slot_waits_no_extra_round(n, threads, expected):
    plan = batches.plan(_articles(n), 2, threads)
    sizes = [len(b["articles"]) for b in plan]
    assert sizes == expected
    assert [a["item_id"] for b in plan for a in b["articles"]] == list(range(1, n + 1))
    assert _rounds(sizes, threads, 2) == -(-n // (2 * threads))  # the ideal: ceil(N / C) rounds
    # the near-equal split of the same articles waited a round more at 200 articles in 8 threads
    if n == 200:
        assert _rounds([50, 50, 50, 50], threads, 2) == 14 and _rounds(sizes, threads, 2) == 13


def test_an_empty_slot_maps_nothing_and_labels_name_the_first_article():
    assert batches.plan([], 2) == []
    plan = batches.plan(_articles(3), 2)
    assert [b["label"] for b in plan] == ["1/2 · 文章1", "2/2 · 文章2 等 2 篇"]


def test_width_shares_the_slot_concurrency_between_the_tasks():
    assert [batches.width(c, t) for c, t in [(16, 2), (15, 2), (8, 2), (1, 2), (128, 1), (3, 4)]] == [8, 8, 4, 1, 128, 1]


def test_a_batch_runs_threads_at_a_time_and_one_crash_costs_only_its_article():
    active, peak, seen = [0], [0], []
    lock = threading.Lock()

    def analyse(a: dict) -> dict:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            seen.append(a["item_id"])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        if a["item_id"] == 4:
            raise RuntimeError("validated, then crashed")
        return {"content_item_id": a["item_id"], "status": "analysed"}

    with pytest.raises(batches.BatchFailed, match=r"1 of 12 articles crashed: 4 《文章4》: RuntimeError: validated"):
        batches.run(_articles(12), analyse, threads=3, stop_on=(LLMConfigError,))
    assert peak[0] == 3 and sorted(seen) == list(range(1, 13))  # the crash stopped no neighbour


def test_a_configuration_error_stops_the_batch_and_leaves_the_rest_unclaimed():
    called = []

    def analyse(a: dict) -> dict:
        called.append(a["item_id"])
        raise LLMConfigError("401: wrong key")

    with pytest.raises(LLMConfigError, match="401"):
        batches.run(_articles(10), analyse, threads=1, stop_on=(LLMConfigError,))
    assert called == [1]


def _slow_fake(fakes, count: int, seconds: float) -> list[int]:
    """``count`` articles for SLOT, and a DeepSeek stand-in taking ``seconds`` per call; returns [peak in flight]."""
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(i, SLOT - timedelta(minutes=i)) for i in range(1, count + 1)]
    fakes.at(SLOT)
    active, peak = [0], [0]
    lock = threading.Lock()

    def slow(body: dict) -> str:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(seconds)
        with lock:
            active[0] -= 1
        return answer(70)

    fakes.deepseek.responder = slow
    return peak


def _ingested(run_id: str) -> tuple[Runtime, dict]:
    """The slot at SLOT opened and its articles ingested, as open_slot and ingest leave them."""
    rt = Runtime.load(FixedClock(SLOT + timedelta(minutes=1)))
    slot = open_slot(rt, run_after=SLOT, run_type="scheduled", dag_id="d", dag_run_id=run_id, params={})
    ingest(rt, slot)
    return rt, slot


def _pending(item_id: int) -> bool:
    with connect() as conn:
        row = conn.execute("SELECT analyzed_status FROM content_item WHERE id = %s", (item_id,)).fetchone()
    return row["analyzed_status"] == store.common.PENDING


def test_a_wide_batch_has_a_connection_per_thread(fakes, monkeypatch):
    """30 threads share one SDK client: every call is in flight at once, none waits for a pooled connection
    (the HTTP client's default pool holds 20, and the wait would eat the call's own deadline)."""
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LLM_CONCURRENCY", "30")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_ANALYSIS_TASKS", "1")
    peak = _slow_fake(fakes, 30, 1.0)
    rt, slot = _ingested("scheduled__w")
    [batch] = select_articles(rt, slot)
    result = analyse(rt, slot, batch, seconds=600)
    assert result["counts"] == {"analysed": 30} and peak[0] == 30


def test_a_slot_batch_keeps_the_calls_in_flight_at_its_width_and_calls_once_per_article(fakes, monkeypatch):
    """Through analyse: llm_concurrency 6 over analysis_tasks 2 = 3 calls in flight per batch;
    every article analysed once with its own attempt; a rerun of the batch (a clear) calls nothing."""
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LLM_CONCURRENCY", "6")
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_ANALYSIS_TASKS", "2")
    peak = _slow_fake(fakes, 12, 0.2)
    rt, slot = _ingested("scheduled__x")
    plan = select_articles(rt, slot)
    assert [len(b["articles"]) for b in plan] == [6, 6]
    result = analyse(rt, slot, plan[0], seconds=600)
    assert result["counts"] == {"analysed": 6} and peak[0] == 3  # three at a time, not one by one
    assert len(fakes.deepseek.requests) == 6
    again = analyse(rt, slot, plan[0], seconds=600)  # Airflow's retry or an operator's clear
    assert again["counts"] == {"skipped": 6} and len(fakes.deepseek.requests) == 6
    with connect() as conn:
        rows = conn.execute("SELECT content_item_id, count(*) AS n FROM analysis_attempt GROUP BY 1").fetchall()
    assert sorted(r["content_item_id"] for r in rows) == sorted(a["item_id"] for a in plan[0]["articles"])
    assert {r["n"] for r in rows} == {1}


def test_a_batch_whose_time_runs_out_leaves_its_articles_for_a_later_slot(fakes):
    _slow_fake(fakes, 3, 0)
    rt, slot = _ingested("scheduled__y")
    [first, _] = select_articles(rt, slot)
    result = analyse(rt, slot, first, seconds=0)
    assert result["counts"] == {"deferred": 1} and fakes.deepseek.requests == []
    with connect() as conn:
        assert conn.execute("SELECT deferred_count FROM slot_run").fetchone()["deferred_count"] == 1
    assert _pending(first["articles"][0]["item_id"])


def test_a_call_still_running_when_the_batch_time_ends_is_cut_and_its_article_waits(fakes):
    """The hanging case: DeepSeek holds the call far past the batch's time; the batch ends at its time
    (not at the call's own 180 s cap), the attempt is closed as interrupted and the article is pending."""
    _slow_fake(fakes, 1, 30.0)
    rt, slot = _ingested("scheduled__z")
    [batch] = select_articles(rt, slot)
    started = time.monotonic()
    result = analyse(rt, slot, batch, seconds=MIN_CALL_SECONDS + 1)
    assert result["counts"] == {"interrupted": 1}
    assert time.monotonic() - started < 20  # cut at the batch's time, long before the stand-in answers
    assert _pending(batch["articles"][0]["item_id"])
    with connect() as conn:
        assert [r["outcome"] for r in conn.execute("SELECT outcome FROM analysis_attempt")] == ["interrupted"]
