"""One bad WeRSS row never stops the others; a missing body is not refetched every slot; a
listing that never ends is capped.

Rooms: steps/ingest.py, ingest.py (rows skipped, body rechecks, listing caps), werss_rows.py.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from include.radar import store
from include.radar.collect.werss_rows import RowRejected, article_row
from include.radar.steps.ingest import ingest
from include.radar.steps.open_slot import open_slot
from include.radar.steps.runtime import Runtime
from tests.conftest import connect
from tests.slotrun import article, read_page, run_slot, shanghai, slot_clock

pytestmark = pytest.mark.hostile

SLOT = shanghai(2026, 1, 8, 14)
GOOD = [{"id": "MP_WXS_1", "mp_name": "研究所"}, {"id": "MP_WXS_2", "mp_name": "前哨站"}]


def _ingest(fakes, when=SLOT):
    fakes.at(when)
    rt = Runtime.load(slot_clock(when))
    slot = open_slot(rt, run_after=when, run_type="scheduled", dag_id="d", dag_run_id=f"r{when}", params={})
    return slot, ingest(rt, slot)


def _rows(sql: str, *args) -> list[dict]:
    with connect() as conn:
        return conn.execute(sql, args).fetchall()


def _row_text(external_id: str, **fields) -> str:
    """A raw JSON list row: fields given as JSON texts, so 1e400 or a lone surrogate escape go out as-is."""
    base = {"id": json.dumps(external_id), "mp_id": '"MP_WXS_1"', "title": '"标题"', "url": '"https://mp.weixin.qq.com/s/x"',
            "publish_time": str(int((SLOT - timedelta(hours=2)).timestamp()))}
    base.update(fields)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in base.items() if v is not None) + "}"


POISON = {
    "nul in title": {"title": '"好\\u0000标题"'},
    "lone surrogate in url": {"url": '"https://mp.weixin.qq.com/s/\\ud800"'},
    "publish_time 1e400": {"publish_time": "1e400"},
    "negative publish_time": {"publish_time": "-5"},
    "publish_time a string": {"publish_time": '"yesterday"'},
    "publish_time far future": {"publish_time": "9999999999"},  # the year 2286
    "publish_time far future in ms": {"publish_time": "32503680000000"},  # the year 3000
    "publish_time true": {"publish_time": "true"},
    "missing id": {"id": None},
    "id an object": {"id": '{"a": 1}'},
}


def test_poisoned_list_rows_are_skipped_with_reasons_and_every_other_row_is_ingested(fakes):
    fakes.werss.accounts = GOOD
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1)), article(2, SLOT - timedelta(hours=3), mp="MP_WXS_2")]
    fakes.werss.extra_rows = {"MP_WXS_1": [_row_text(f"bad-{i}", **f) for i, f in enumerate(POISON.values())]}
    slot, summary = _ingest(fakes)
    assert summary["new"] == 2 and summary["skipped"] == len(POISON)
    assert {r["external_id"] for r in _rows("SELECT external_id FROM content_item")} == {"1-1", "2-2"}
    [run] = _rows("SELECT skipped_count, warnings, status FROM slot_run WHERE id = %s", slot["slot_run_id"])
    assert run["skipped_count"] == len(POISON)
    reasons = " | ".join(w["message"] for w in run["warnings"])
    for needle in ("NUL character", "lone surrogate", "not a finite number", "before 2000", "not a number",
                   "in the future", "publish_time is True", "id: Field required", "id is dict"):
        assert needle in reasons, needle
    accounts = {a["mp_id"]: a for a in _rows("SELECT * FROM wechat_account")}
    assert accounts["MP_WXS_1"]["rows_skipped"] == len(POISON) and accounts["MP_WXS_1"]["last_skip_reason"]
    assert accounts["MP_WXS_2"]["rows_skipped"] == 0
    assert accounts["MP_WXS_1"]["consecutive_failures"] == 0  # a bad row is not a failing account
    html = read_page("/daily/2026-01-08", SLOT + timedelta(hours=1))  # and the pages show both
    assert f"跳过异常条目 <b>{len(POISON)}</b>" in html and "title contains a NUL character" in html
    assert '<td class="num" title="' in read_page("/", SLOT + timedelta(hours=1))


def test_an_account_row_with_a_poisoned_name_is_skipped_and_the_others_are_ingested(fakes):
    fakes.werss.accounts = [*GOOD, {"id": "MP_WXS_3", "mp_name": "坏\x00名字"}, {"id": "MP_WXS_4", "mp_name": "\ud800"},
                            {"mp_name": "无编号"}, "not an object"]
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1)), article(3, SLOT - timedelta(hours=1), mp="MP_WXS_3")]
    slot, summary = _ingest(fakes)
    assert summary["new"] == 1 and summary["skipped"] == 4 and summary["accounts"] == 2
    assert {a["mp_id"] for a in _rows("SELECT mp_id FROM wechat_account")} == {"MP_WXS_1", "MP_WXS_2"}
    [run] = _rows("SELECT skipped_count FROM slot_run")
    assert run["skipped_count"] == 4


@pytest.mark.parametrize("data", ['{"list": {"0": {"id": "1-9"}}, "total": 1}', '[{"id": "1-9"}]', '"oops"'])
def test_a_page_whose_data_is_the_wrong_shape_skips_that_account_only(fakes, data):
    fakes.werss.accounts = GOOD
    fakes.werss.articles = [article(2, SLOT - timedelta(hours=1), mp="MP_WXS_2")]
    fakes.werss.raw_page_data = {"MP_WXS_1": data}
    slot, summary = _ingest(fakes)
    assert summary["new"] == 1 and summary["accounts_failed"] == 1
    accounts = {a["mp_id"]: a for a in _rows("SELECT * FROM wechat_account")}
    assert "not" in accounts["MP_WXS_1"]["last_error"] and accounts["MP_WXS_1"]["consecutive_failures"] == 1
    [run] = _rows("SELECT warnings FROM slot_run")
    assert any("MP_WXS_1" in w["message"] or "研究所" in w["message"] for w in run["warnings"])


def test_a_poisoned_detail_row_is_skipped_and_counted(fakes):
    fakes.werss.accounts = GOOD[:1]
    bad = article(1, SLOT - timedelta(hours=1))
    bad.raw_detail = json.dumps({"code": 0, "message": "success", "data": {
        "id": "1-1", "mp_id": "MP_WXS_1", "title": "毒\x00标题", "url": "https://mp.weixin.qq.com/s/1",
        "publish_time": bad.publish_time, "content": "<p>正文</p>", "content_html": "<p>正文</p>"}}).encode()
    fakes.werss.articles = [bad, article(2, SLOT - timedelta(hours=2))]
    slot, summary = _ingest(fakes)
    assert summary["new"] == 1 and summary["skipped"] == 1
    assert [r["external_id"] for r in _rows("SELECT external_id FROM content_item")] == ["1-2"]
    [account] = _rows("SELECT rows_skipped, last_skip_reason FROM wechat_account")
    assert account["rows_skipped"] == 1 and "NUL" in account["last_skip_reason"]


def test_a_body_with_nul_bytes_and_invalid_utf8_is_cleaned_not_fatal(fakes):
    fakes.werss.accounts = GOOD[:1]
    dirty = article(1, SLOT - timedelta(hours=1))
    envelope = json.dumps({"code": 0, "message": "success", "data": {
        "id": "1-1", "mp_id": "MP_WXS_1", "title": "脏正文", "url": "https://mp.weixin.qq.com/s/1",
        "publish_time": dirty.publish_time, "content": "", "content_html": "@@BODY@@"}})
    body = "<div id='js_content'><p>宁德\\u0000时代订单\\ud83d增长</p><p>".encode() + b"\xff\xfe\xc3(" + "储能景气回升。</p></div>".encode()
    dirty.raw_detail = envelope.encode().replace(b"@@BODY@@", body)
    fakes.werss.articles = [dirty]
    fakes.deepseek.responder = lambda b: json.dumps({"score": 10, "has_opportunity": False, "top_type": "none",
                                                    "summary": "资讯", "opportunities": []})
    result = run_slot(SLOT)
    [item] = _rows("SELECT clean_text, body_status, analyzed_status FROM content_item")
    assert item["body_status"] == store.common.BODY_READY and item["analyzed_status"] == store.common.DONE
    assert "宁德时代订单" in item["clean_text"] and "储能景气回升" in item["clean_text"]
    assert "\x00" not in item["clean_text"] and result["closed"]["status"] == "success"


def test_a_missing_body_is_rechecked_every_slot_for_a_day_then_after_6h_then_daily(fakes):
    fakes.werss.accounts = GOOD[:1]
    waiting = article(1, shanghai(2026, 1, 8, 6), body="")  # WeRSS answers its conversion-error string
    fakes.werss.articles = [waiting]
    checks = []
    day1 = [shanghai(2026, 1, 8, h) for h in (7, 12, 14, 18, 22)]
    day2 = [shanghai(2026, 1, 9, h) for h in (7, 12, 14, 18, 22)]
    for when in day1 + day2:
        _ingest(fakes, when)
        checks.append(fakes.werss.detail_calls.get("1-1", 0))
    # first seen at 07:00: every slot of its first 24 hours (day 2 07:00 included); then 6 hours later (day 2
    # 14:00), then a day later (day 3 14:00) - not every slot
    assert checks == [1, 2, 3, 4, 5, 6, 6, 7, 7, 7]
    [item] = _rows("SELECT body_status, body_checks, next_body_check_at FROM content_item")
    assert item["body_status"] == store.common.BODY_WAITING and item["body_checks"] == 7
    assert abs((item["next_body_check_at"] - shanghai(2026, 1, 10, 14)).total_seconds()) < 120
    [account] = _rows("SELECT bodies_missing FROM wechat_account")
    assert account["bodies_missing"] == 7  # counted per account, once per check that found no body


def test_a_body_that_arrives_after_the_first_day_is_still_picked_up_at_its_next_check(fakes):
    fakes.werss.accounts = GOOD[:1]
    late = article(1, shanghai(2026, 1, 8, 6), body="")
    late.body_after = int(shanghai(2026, 1, 9, 13).timestamp())
    late.late_content_html = '<div id="js_content"><p>正文终于抓到了：铜矿供给收缩。</p></div>'
    fakes.werss.articles = [late]
    _ingest(fakes, shanghai(2026, 1, 8, 7))
    _, summary = _ingest(fakes, shanghai(2026, 1, 8, 12))
    assert summary["waiting"] == 1
    _, summary = _ingest(fakes, shanghai(2026, 1, 9, 7))  # 24 h after it was first seen: next check 13:01
    _, summary = _ingest(fakes, shanghai(2026, 1, 9, 12))  # not due
    assert summary["new"] == 0 and summary["bodies_backed_off"] == 1
    _, summary = _ingest(fakes, shanghai(2026, 1, 9, 14))
    assert summary["new"] == 1


def test_a_werss_that_ignores_offset_is_listed_once_not_forever(fakes):
    fakes.werss.accounts = GOOD[:1]
    fakes.werss.articles = [article(i, SLOT - timedelta(minutes=i + 1)) for i in range(150)]
    fakes.werss.ignore_offset = True
    slot, summary = _ingest(fakes)
    assert len(fakes.werss.list_calls) == 2  # the second page repeated the first: stop
    assert summary["new"] == 50  # max_articles_per_slot; the rest wait
    [run] = _rows("SELECT warnings FROM slot_run")
    assert any("repeated" in w["message"] for w in run["warnings"])


def test_a_listing_that_never_ends_stops_at_the_page_cap(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_WERSS_MAX_PAGES", "7")
    fakes.werss.accounts = GOOD[:1]
    fakes.werss.endless_accounts = {"MP_WXS_1"}
    slot, summary = _ingest(fakes)
    assert len(fakes.werss.list_calls) == 7
    [run] = _rows("SELECT warnings FROM slot_run")
    assert any("werss_max_pages=7" in w["message"] for w in run["warnings"])


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1, 0, "", "1e400", True, None, [1], 10**30])
def test_absurd_publish_times_are_rejected_with_a_reason(value):
    with pytest.raises(RowRejected, match="publish_time"):
        article_row({"id": "1-1", "publish_time": value}, mp_id="MP_WXS_1", now=SLOT)


def test_plausible_publish_times_in_seconds_milliseconds_or_digits_are_accepted():
    seconds = int((SLOT - timedelta(hours=1)).timestamp())
    for value in (seconds, seconds * 1000, str(seconds), float(seconds)):
        assert article_row({"id": "1-1", "publish_time": value}, mp_id="MP_WXS_1", now=SLOT).publish_time == seconds


def test_a_body_with_one_endless_word_is_stored_and_the_ingest_goes_on(fakes):
    """PostgreSQL refuses a search lexeme over 2047 bytes: the word is left out of the index, never the article."""
    fakes.werss.accounts = GOOD[:1]
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1), body=f"<p>{'a' * 29_000}</p><p>订单同比增长。</p>"),
                            article(2, SLOT - timedelta(hours=2))]
    slot, summary = _ingest(fakes)
    assert summary["new"] == 2
    rows = _rows("SELECT external_id, body_status FROM content_item ORDER BY external_id")
    assert [(r["external_id"], r["body_status"]) for r in rows] == [("1-1", store.common.BODY_READY), ("1-2", store.common.BODY_READY)]
