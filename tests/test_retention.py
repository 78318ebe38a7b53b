"""Retention. The daily slot prunes article bodies older than ``retention_days`` (titles, analyses,
pushes, feedback and the record kept), bounded, shown on the health panel; a pruned article is never analysed
or paid for again, and reruns prune the same articles."""

from __future__ import annotations

from datetime import timedelta

import pytest

from include.radar import store
from include.radar.core.settings import SettingsError, load_settings
from include.radar.operations import retention
from tests.conftest import connect
from tests.slotrun import answer, article, read_page, run_slot, shanghai

OLD = shanghai(2026, 1, 8, 12)  # the slot that stored the articles
LATER = shanghai(2026, 1, 24, 22)  # a daily slot 16 days later: past a retention of 14 days
BODY_ONLY = "钠离子电池中试线"  # a phrase of the first article's body, in neither its title nor its analysis


def _store_old_articles(fakes, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_RETENTION_DAYS", "14")
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles += [
        article(1, OLD - timedelta(hours=1), title="储能订单回暖",
                body=f"<p>第1篇文章正文：某储能龙头订单同比增长10%，行业景气回升。公司的{BODY_ONLY}已投产。</p>"),
        article(2, OLD - timedelta(hours=2), title="光伏排产回升"),
    ]
    fakes.deepseek.responder = lambda body: answer(72) if "储能订单回暖" in body["messages"][1]["content"] else answer(30)
    fakes.at(OLD)
    run_slot(OLD)


def _items() -> dict[int, dict]:
    with connect() as conn:
        rows = conn.execute("SELECT id, title, clean_text, body_pruned_at, analyzed_status, "
                            "array_length(tsvector_to_array(search_tsv), 1) AS lexemes FROM content_item").fetchall()
    return {r["id"]: r for r in rows}


def test_the_daily_slot_prunes_old_bodies_and_keeps_titles_analyses_pushes_and_feedback(fakes, monkeypatch) -> None:
    _store_old_articles(fakes, monkeypatch)
    before = _items()
    assert all(r["clean_text"] and r["body_pruned_at"] is None for r in before.values())
    with connect() as conn:
        [hot] = [a for a in store.analyses.day_analyses(conn, OLD.date()) if a["score"] == 72]
        assert store.focus.set_feedback(conn, hot["id"], "up", "test") == "recorded"
        pushes = conn.execute("SELECT count(*) AS n FROM notification_log").fetchone()["n"]
        analyses = conn.execute("SELECT count(*) AS n FROM analysis_result").fetchone()["n"]
    assert pushes >= 1 and analyses == 2

    fakes.at(LATER)
    result = run_slot(LATER)
    assert "retention" not in result["errors"]
    after = _items()
    for item_id, row in after.items():
        assert row["clean_text"] == "" and row["body_pruned_at"] is not None, item_id
        assert row["title"] == before[item_id]["title"]
        assert row["lexemes"] < before[item_id]["lexemes"]  # the body's lexemes went with it
    with connect() as conn:
        assert conn.execute("SELECT count(*) AS n FROM analysis_result").fetchone()["n"] == analyses
        assert conn.execute("SELECT count(*) AS n FROM notification_log").fetchone()["n"] >= pushes
        assert store.focus.feedback_of(conn, [hot["id"]]) == {hot["id"]: "up"}
        [opp] = store.analyses.opportunities_of(conn, hot["id"])
        assert opp["evidence"] == ["订单同比增长"]
        status = store.operations.status(conn, retention.STATUS_KEY)
    assert status["retention_days"] == 14 and status["pruned"] == 2 and status["last"]["remaining"] == 0
    assert status["database_bytes"] > 0 and "content_item" in status["tables"]

    # still found by its title and its analysis, no longer by a phrase only its body held
    found = read_page("/search?q=储能订单回暖", LATER)
    assert "储能订单回暖" in found
    gone = read_page(f"/search?q={BODY_ONLY}", LATER)
    assert "储能订单回暖" not in gone
    page = read_page(f"/analysis/{hot['id']}", LATER)
    assert "按保留期清理" in page and "订单同比增长" in page  # the quote and its context stay
    overview = read_page("/", LATER + timedelta(minutes=30))
    assert "正文保留 14 天" in overview and "2 篇正文已按保留期清理" in overview


def test_a_pruned_article_is_never_offered_or_paid_for_again(fakes, monkeypatch) -> None:
    _store_old_articles(fakes, monkeypatch)
    with connect() as conn:  # the 30-point article failed, then retention took its body
        conn.execute("UPDATE content_item SET analyzed_status = 3, attempts = 3 WHERE title = '光伏排产回升'")
        conn.execute("DELETE FROM analysis_result WHERE content_item_id = "
                     "(SELECT id FROM content_item WHERE title = '光伏排产回升')")
    fakes.at(LATER)
    run_slot(LATER)
    calls = len(fakes.deepseek.requests)
    with connect() as conn:
        [failed] = conn.execute("SELECT id FROM content_item WHERE title = '光伏排产回升'").fetchall()
        assert store.claims.reset_failed(conn) == 0  # retry_failed gives a pruned article no fresh attempts
        conn.execute("UPDATE content_item SET attempts = 0, analyzed_status = 0 WHERE id = %s", (failed["id"],))
        assert store.claims.items_to_analyse(conn, max_attempts=3, limit=50) == []
        claim = store.claims.claim_item(conn, failed["id"], slot_run_id=1, claimer="test", max_attempts=3)
    assert claim.state == "pruned"
    run_slot(LATER + timedelta(days=1), params={"retry_failed": True})
    assert len(fakes.deepseek.requests) - calls <= 1  # the next daily slot's digest at most: no analysis


def test_a_rerun_prunes_the_same_articles_and_a_backfill_of_an_old_day_prunes_no_more(fakes, monkeypatch) -> None:
    _store_old_articles(fakes, monkeypatch)
    early = shanghai(2026, 1, 20, 22)  # 12 days after: nothing is old enough yet
    fakes.at(early)
    run_slot(early, run_type="backfill")
    assert all(r["body_pruned_at"] is None for r in _items().values())
    fakes.at(LATER)
    run_slot(LATER)
    first = {i: r["body_pruned_at"] for i, r in _items().items()}
    assert sorted(r["title"] for r in _items().values() if r["body_pruned_at"] is not None) == [
        "储能订单回暖", "光伏排产回升"]  # both old articles pruned by the daily slot
    run_slot(LATER, dag_run_id="manual__rerun")
    assert {i: r["body_pruned_at"] for i, r in _items().items()} == first  # nothing pruned twice


def test_the_step_is_bounded_and_leaves_the_rest_for_tomorrow_with_a_warning(fakes, monkeypatch) -> None:
    _store_old_articles(fakes, monkeypatch)
    fakes.at(LATER)
    slot = run_slot(LATER)["slot"]
    with connect() as conn:  # bodies back, as if retention had never run
        conn.execute("UPDATE content_item SET clean_text = 'x', body_pruned_at = NULL")
    settings = load_settings(use_airflow=False)
    out = retention.daily(connect, settings, slot, LATER, seconds=0)  # no time at all: not one batch
    assert out == {"pruned": 0, "remaining": 2, "database_mb": out["database_mb"]}
    with connect() as conn:
        warnings = conn.execute("SELECT warnings FROM slot_run WHERE id = %s", (slot["slot_run_id"],)).fetchone()
    assert {"step": "retention", "message": "retention: 2 article bodies older than 14 days left for tomorrow "
            "(0 pruned in 0 s)"} in warnings["warnings"]
    overview = read_page("/", LATER + timedelta(minutes=30))
    assert "还有 2 篇超过保留期的正文待清理" in overview
    pruned = retention.prune(connect, keep_days=14, now=LATER, max_attempts=3, batch=1)
    assert (pruned.bodies, pruned.batches, pruned.remaining) == (2, 2, 0)


def test_an_article_still_owed_its_analysis_keeps_its_body_until_analysed(fakes, monkeypatch) -> None:
    # a backfill of an old day stores its articles after today's daily slot pruned by age: its own slot must
    # still find their text
    _store_old_articles(fakes, monkeypatch)
    with connect() as conn:  # one waits for its first analysis, one failed with attempts left, one without
        conn.execute("UPDATE content_item SET analyzed_status = 0, attempts = 0 WHERE title = '储能订单回暖'")
        conn.execute("UPDATE content_item SET analyzed_status = 3, attempts = 1 WHERE title = '光伏排产回升'")
    fakes.werss.articles.append(article(3, OLD - timedelta(hours=3), title="锂价见底"))
    fakes.at(OLD + timedelta(hours=2))
    run_slot(OLD + timedelta(hours=2), run_type="backfill")
    with connect() as conn:
        conn.execute("UPDATE content_item SET analyzed_status = 3, attempts = 3 WHERE title = '锂价见底'")
    pruned = retention.prune(connect, keep_days=14, now=LATER, max_attempts=3)
    kept = {r["title"]: r["body_pruned_at"] is None for r in _items().values()}
    assert kept == {"储能订单回暖": True, "光伏排产回升": True, "锂价见底": False}
    assert (pruned.bodies, pruned.remaining) == (1, 0)  # an owed article is no backlog either
    with connect() as conn:
        offered = store.claims.items_to_analyse(conn, max_attempts=3, limit=10)
    assert sorted(r["title"] for r in offered) == ["储能订单回暖", "光伏排产回升"]


def test_retention_zero_keeps_everything_and_short_retentions_are_refused(fakes, monkeypatch) -> None:
    _store_old_articles(fakes, monkeypatch)
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_RETENTION_DAYS", "0")
    fakes.at(LATER)
    run_slot(LATER)
    assert all(r["clean_text"] and r["body_pruned_at"] is None for r in _items().values())
    assert "全部保留" in read_page("/", LATER + timedelta(minutes=30))
    for days in ("1", "13"):
        monkeypatch.setenv("AIRFLOW_VAR_RADAR_RETENTION_DAYS", days)
        with pytest.raises(SettingsError, match="retention_days"):
            load_settings(use_airflow=False)
