"""Ingest from a fake WeRSS that speaks the real API (envelopes, 401/202 bodies, page size 5).

Rooms: steps/ingest.py, ingest.py (window, new-only detail fetches, account backoff), werss.py, cleaning.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from include.radar import store
from include.radar.collect.listing import backoff_for
from include.radar.collect.werss import Credentials, WeRSSAuthError, WeRSSClient
from include.radar.steps.ingest import ingest
from include.radar.steps.open_slot import open_slot
from include.radar.steps.runtime import Runtime
from tests.conftest import connect
from tests.slotrun import article, run_slot, shanghai, slot_clock

ACCOUNTS = [{"id": "MP_WXS_1", "mp_name": "研究所"}, {"id": "MP_WXS_2", "mp_name": "前哨站"},
            {"id": "MP_WXS_3", "mp_name": "宏观"}]
SLOT = shanghai(2026, 1, 8, 14)


def _ingest(fakes, when=SLOT, **params):
    fakes.at(when)
    rt = Runtime.load()
    slot = open_slot(rt, run_after=when, run_type="scheduled", dag_id="d", dag_run_id="r", params=params)
    return rt, slot, ingest(rt, slot)


def _count(sql: str, *args) -> int:
    with connect() as conn:
        return conn.execute(sql, args).fetchone()["n"]


def test_paging_stops_at_the_window_edge_and_repeated_rows_are_stored_once(fakes):
    fakes.werss.accounts = ACCOUNTS[:1]
    # 12 articles inside the 72 h window, 30 older ones that must never be paged through
    fakes.werss.articles = [article(i, SLOT - timedelta(hours=5 * i + 1)) for i in range(12)]
    fakes.werss.articles += [article(100 + i, SLOT - timedelta(days=4, hours=i)) for i in range(30)]
    page_size = 5
    fakes.werss.articles.append(fakes.werss.articles[4])  # the same row served twice (no tie-breaker)
    import os
    os.environ["AIRFLOW_VAR_RADAR_WERSS_PAGE_SIZE"] = str(page_size)
    try:
        _, _, summary = _ingest(fakes)
    finally:
        del os.environ["AIRFLOW_VAR_RADAR_WERSS_PAGE_SIZE"]
    assert summary["in_window"] == 12 and summary["new"] == 12
    assert _count("SELECT count(*) AS n FROM content_item") == 12
    offsets = [int(c["offset"]) for c in fakes.werss.list_calls]
    assert max(offsets) < 20, offsets  # stopped at the first page reaching before window_start
    assert all(c["limit"] == str(page_size) for c in fakes.werss.list_calls)
    assert all("has_content" not in c for c in fakes.werss.list_calls)


def test_rerunning_a_slot_makes_no_second_detail_call_and_stores_nothing_twice(fakes):
    fakes.werss.accounts = ACCOUNTS[:1]
    fakes.werss.articles = [article(i, SLOT - timedelta(hours=i + 1)) for i in range(3)]
    _ingest(fakes)
    _, _, again = _ingest(fakes)
    assert again["new"] == 0
    assert set(fakes.werss.detail_calls.values()) == {1}
    assert _count("SELECT count(*) AS n FROM content_item") == 3
    assert _count("SELECT count(*) AS n FROM slot_run") == 1


def test_token_expiring_mid_slot_recovers_with_exactly_one_relogin(fakes):
    fakes.werss.accounts = ACCOUNTS[:2]
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1)), article(2, SLOT - timedelta(hours=2), mp="MP_WXS_2")]
    fakes.at(SLOT)
    client = WeRSSClient(fakes.base, Credentials("admin", "secret"), backoff_seconds=0)
    client.accounts()
    fakes.werss.expire_tokens()  # the server forgets the token (restart, expiry)
    rows = client.article_page("MP_WXS_1", 0, 10)
    assert [r["id"] for r in rows] == ["1-1"]
    assert client.login_count == 2 and fakes.werss.login_attempts == 2


def test_wrong_password_fails_fast_after_exactly_one_login_attempt(fakes):
    fakes.werss.password = "something-else"
    fakes.werss.accounts = ACCOUNTS[:1]
    with pytest.raises(WeRSSAuthError, match="check the WeRSS credentials"):
        _ingest(fakes)
    assert fakes.werss.login_attempts == 1


def test_one_failing_account_leaves_the_others_ingested_and_is_counted(fakes):
    fakes.werss.accounts = ACCOUNTS
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1)), article(2, SLOT - timedelta(hours=1), mp="MP_WXS_2"),
                            article(3, SLOT - timedelta(hours=1), mp="MP_WXS_3")]
    fakes.werss.failing_accounts = {"MP_WXS_2": 429}
    _, _, summary = _ingest(fakes)
    assert summary["new"] == 2 and summary["accounts_failed"] == 1
    with connect() as conn:
        accounts = {a["mp_id"]: a for a in store.articles.accounts(conn)}
    failed = accounts["MP_WXS_2"]
    assert failed["consecutive_failures"] == 1 and "429" in failed["last_error"]
    assert failed["backoff_until"] is not None  # visible in the database
    assert accounts["MP_WXS_1"]["consecutive_failures"] == 0 and accounts["MP_WXS_1"]["hit_count"] == 1
    assert accounts["MP_WXS_1"]["last_article_at"] is not None


def test_a_backed_off_account_is_left_alone_until_its_backoff_ends(fakes):
    fakes.werss.accounts = ACCOUNTS[:1]
    fakes.werss.failing_accounts = {"MP_WXS_1": 403}
    with pytest.raises(Exception, match="all 1 accounts"):
        _ingest(fakes)
    fakes.werss.failing_accounts = {}
    calls = len(fakes.werss.list_calls)
    _, _, summary = _ingest(fakes, SLOT + timedelta(hours=4))
    assert summary["accounts_backed_off"] == 1 and len(fakes.werss.list_calls) == calls


def test_seven_oclock_slot_includes_the_previous_evening_and_backfill_uses_its_own_window(fakes):
    fakes.werss.accounts = ACCOUNTS[:1]
    late_evening = article(1, shanghai(2026, 1, 7, 22, 30))
    fakes.werss.articles = [late_evening, article(2, shanghai(2026, 1, 8, 9, 0))]
    _, _, summary = _ingest(fakes, shanghai(2026, 1, 8, 7))
    assert summary["new"] == 1
    with connect() as conn:
        assert set(store.articles.known_external_ids(conn, ["1-1", "1-2"])) == {"1-1"}
    # a backfill of an earlier slot, run now: its window ends at its own scheduled time
    fakes.werss.articles.append(article(3, shanghai(2026, 1, 3, 10)))
    fakes.at(shanghai(2026, 1, 9, 12))
    rt = Runtime.load()
    slot = open_slot(rt, run_after=shanghai(2026, 1, 4, 7), run_type="backfill", dag_id="d",
                              dag_run_id="b", params={})
    summary = ingest(rt, slot)
    assert summary["new"] == 1  # article 3 only: 1-2 is after the backfilled slot
    with connect() as conn:
        assert "1-2" not in store.articles.known_external_ids(conn, ["1-2"])


def test_empty_body_is_not_analysed_and_a_later_slot_picks_it_up(fakes):
    fakes.werss.accounts = ACCOUNTS[:1]
    waiting = article(1, SLOT - timedelta(hours=1), body="")
    waiting.body_after = int((SLOT + timedelta(hours=2)).timestamp())
    waiting.late_content_html = '<div id="js_content"><p>正文终于抓到了：铜矿供给收缩。</p></div>'
    fakes.werss.articles = [waiting]
    _, _, summary = _ingest(fakes)
    assert summary["waiting"] == 1 and summary["new"] == 0
    with connect() as conn:
        assert store.claims.items_to_analyse(conn, max_attempts=3, limit=10) == []
    _, _, summary = _ingest(fakes, shanghai(2026, 1, 8, 18))
    assert summary["new"] == 1
    with connect() as conn:
        [item] = store.claims.items_to_analyse(conn, max_attempts=3, limit=10)
        assert "铜矿供给收缩" in store.articles.get_item(conn, item["id"])["clean_text"]


def test_at_most_max_articles_per_slot_newest_first_the_rest_wait(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_MAX_ARTICLES_PER_SLOT", "2")
    fakes.werss.accounts = ACCOUNTS[:1]
    fakes.werss.articles = [article(i, SLOT - timedelta(hours=i + 1)) for i in range(5)]
    _, _, summary = _ingest(fakes)
    assert summary["new"] == 2 and summary["deferred"] == 3
    assert set(fakes.werss.detail_calls) == {"1-0", "1-1"}


def test_malformed_rows_and_millisecond_times_are_handled(fakes):
    fakes.werss.accounts = ACCOUNTS[:1]
    fakes.werss.publish_time_ms = True
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1))]
    _, _, summary = _ingest(fakes)
    assert summary["new"] == 1
    with connect() as conn:
        item = conn.execute("SELECT published_at FROM content_item").fetchone()
    assert item["published_at"] == SLOT - timedelta(hours=1)


def test_werss_down_fails_the_ingest_with_a_clear_error(fakes):
    fakes.werss.down = True
    result = run_slot(SLOT)
    assert "ingest" in result["errors"] and "503" in result["errors"]["ingest"]
    assert result["closed"]["status"] == "failed"


@pytest.mark.parametrize(("status", "message", "hours"), [(429, "", 6), (403, "", 12), (401, "", 0), (None, "rate limited", 6)])
def test_backoff_classes_follow_seed_004(status, message, hours):
    assert backoff_for(status, message, 3) == timedelta(hours=hours)


def test_other_errors_back_off_exponentially_up_to_a_day():
    assert backoff_for(500, "boom", 1) == timedelta(minutes=15)
    assert backoff_for(500, "boom", 3) == timedelta(hours=1)
    assert backoff_for(500, "boom", 30) == timedelta(hours=24)


def test_rerun_after_werss_recovers_closes_the_slot_as_success(fakes):
    fakes.werss.accounts = ACCOUNTS[:1]
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1))]
    fakes.werss.down = True
    fakes.at(SLOT)
    assert run_slot(SLOT)["closed"]["status"] == "failed"
    fakes.werss.down = False
    again = run_slot(SLOT)
    assert again["closed"]["status"] == "success" and again["closed"]["error"] is None
    with connect() as conn:
        row = conn.execute("SELECT status, attempts, new_count FROM slot_run").fetchone()
    assert (row["status"], row["attempts"], row["new_count"]) == (1, 2, 1)


def test_a_body_werss_fetched_by_15_00_for_an_article_first_seen_at_12_00_is_analysed_at_18_00(fakes):
    """A waiting article is rechecked at every slot for its first 24 hours (one detail call
    each), so a body WeRSS has at 15:00 is analysed by the 18:00 slot, not left until 22:00."""
    from tests.slotrun import answer

    fakes.werss.accounts = ACCOUNTS[:1]
    waiting = article(1, shanghai(2026, 1, 8, 11, 40), body="")
    waiting.body_after = int(shanghai(2026, 1, 8, 15).timestamp())
    waiting.late_content_html = article(1, SLOT).content_html
    fakes.werss.articles = [waiting]
    fakes.deepseek.responder = lambda body: answer(72)
    for hour in (12, 14, 18):
        when = shanghai(2026, 1, 8, hour)
        fakes.at(when)
        run_slot(when, clock=slot_clock(when))
    assert fakes.werss.detail_calls["1-1"] == 3  # 12:00 (no body), 14:00 (no body yet), 18:00 (the body)
    with connect() as conn:
        row = conn.execute(
            "SELECT s.slot FROM analysis_result a JOIN slot_run s ON s.id = a.slot_run_id"
        ).fetchone()
    assert row is not None and row["slot"] == "18:00"


@pytest.mark.parametrize(("age_hours", "wait_hours"), [(0, 0), (5, 0), (23.9, 0), (23.99, 6), (24, 6), (29.9, 6), (30, 24),
                                                    (60, 24)])
def test_a_waiting_body_is_due_every_slot_for_a_day_then_after_6h_then_daily(age_hours, wait_hours):
    from include.radar.collect.ingest import next_body_check

    now = SLOT + timedelta(hours=age_hours)
    assert next_body_check(SLOT, now) == now + timedelta(hours=wait_hours)
