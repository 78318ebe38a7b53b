"""The slot decision and the push, exactly once, against a real local JSON webhook.

Rooms: decide.py (message ids, push or not), push.py, store/pushes.py, steps/push_opportunity.py.
"""

from __future__ import annotations

from datetime import date, timedelta
from urllib.parse import parse_qs, urlparse

from hypothesis import assume, given
from hypothesis import strategies as st

from include.radar.core import signing
from include.radar.pushes import decide, push
from include.radar.pushes.decide import msg_uuid
from include.radar.pushes.message import Message
from tests.conftest import connect
from tests.slotrun import answer, article, run_slot, shanghai

SLOT = shanghai(2026, 1, 8, 14)


def _articles(fakes, scores: dict[int, int], when=SLOT):
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    for n in scores:
        fakes.werss.articles.append(article(n, when - timedelta(minutes=30 + n), title=f"文章{n}"))
    fakes.at(when)
    fakes.deepseek.responder = lambda body: answer(
        next(s for n, s in scores.items() if f"文章{n}\n" in body["messages"][1]["content"]),
        summary=f"第{next(n for n in scores if f'文章{n}' in body['messages'][1]['content'])}篇的结论。其余细节",
    )


def _decisions():
    with connect() as conn:
        return conn.execute("SELECT decision, detail FROM push_decision ORDER BY id").fetchall()


def test_slot_below_threshold_sends_nothing_and_records_why(fakes):
    _articles(fakes, {1: 40, 2: 55})
    result = run_slot(SLOT)
    assert result["branch"] == decide.SKIP_PUSH
    assert fakes.sink.received == [] and fakes.sink2.received == []
    [row] = _decisions()
    assert row["decision"] == "silent" and "best score 55 < threshold 60" in row["detail"]["reason"]
    assert row["detail"]["analysed"] == 2


def test_slot_above_threshold_sends_one_message_for_its_own_best_analysis(fakes):
    _articles(fakes, {1: 95}, when=shanghai(2026, 1, 8, 12))
    run_slot(shanghai(2026, 1, 8, 12))  # an earlier slot with a higher score
    fakes.sink.received.clear()
    fakes.sink2.received.clear()
    _articles(fakes, {2: 70, 3: 82, 4: 30})
    run_slot(SLOT)
    assert len(fakes.sink.received) == 1 and len(fakes.sink2.received) == 1
    message = fakes.sink.received[0]
    assert message["title"] == "【机会提醒】14:00 发现 2 条（最高分 82）"
    with connect() as conn:
        top = conn.execute("SELECT a.id FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id "
                           "WHERE c.title = '文章3'").fetchone()["id"]
    link = message["message"].splitlines()[-1]
    assert link.startswith(f"https://radar.example.com/radar/analysis/{top}?")
    query = parse_qs(urlparse(link).query)
    assert signing.verify(f"/analysis/{top}", query["exp"][0], query["sig"][0], "test-link-secret-0123456789abcdef01",
                          SLOT + timedelta(hours=1))  # clicked an hour after the slot pushed it
    assert message["message"].splitlines()[0] == "第3篇的结论。"


def test_rerunning_the_slot_sends_nothing_new(fakes):
    _articles(fakes, {1: 75})
    run_slot(SLOT)
    run_slot(SLOT, run_type="manual")
    run_slot(SLOT, dag_run_id="another-trigger")
    assert len(fakes.sink.received) == 1 and len(fakes.sink2.received) == 1
    with connect() as conn:
        assert conn.execute("SELECT count(*) AS n FROM notification_log").fetchone()["n"] == 2


def test_failing_channel_gets_exactly_one_message_after_the_retry_and_the_healthy_one_exactly_one(fakes):
    _articles(fakes, {1: 75})
    fakes.sink.fail_next = 1
    first = run_slot(SLOT)
    assert "push" in first["errors"] and "PushFailed" in first["errors"]["push"]
    assert fakes.sink.received == [] and len(fakes.sink2.received) == 1
    second = run_slot(SLOT)  # the Airflow retry / a cleared task
    assert "push" not in second["errors"]
    assert len(fakes.sink.received) == 1 and len(fakes.sink2.received) == 1
    with connect() as conn:
        rows = conn.execute("SELECT channel, status, attempts FROM notification_log ORDER BY id").fetchall()
    assert [(r["status"], r["attempts"]) for r in rows] == [(1, 2), (1, 1)]
    assert all(r["channel"] == "json://" + fakes.base.split("://", 1)[1] for r in rows)  # a label, not the URL


def test_backfill_sends_nothing_and_force_sends(fakes):
    _articles(fakes, {1: 75})
    result = run_slot(SLOT, run_type="backfill")
    assert fakes.sink.received == []
    assert "would have pushed" in _decisions()[-1]["detail"]["reason"]
    assert result["closed"]["status"] == "success"
    run_slot(SLOT, run_type="manual", params={"push_mode": "force"}, dag_run_id="manual-force")
    assert len(fakes.sink.received) == 1


def test_late_daytime_slot_does_not_send_a_stale_alert(fakes):
    _articles(fakes, {1: 75})
    run_slot(SLOT, now=SLOT + timedelta(hours=3))
    assert fakes.sink.received == []
    assert "late" in _decisions()[-1]["detail"]["reason"]


def test_suppress_param_keeps_a_manual_run_silent(fakes):
    _articles(fakes, {1: 90})
    run_slot(SLOT, run_type="manual", params={"push_mode": "suppress"})
    assert fakes.sink.received == []


def test_no_channel_configured_is_a_clear_error(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_RADAR_PUSH", '{"conn_type": "generic", "extra": {"urls": []}}')
    _articles(fakes, {1: 90})
    result = run_slot(SLOT)
    assert "no push channel configured" in result["errors"]["push"]


def test_message_fits_channel_limits_and_keeps_the_link():
    [wecom, schan] = push.channels_from(["wecombot://abcdefghijk", "schan://sendkey123456"])
    message = Message(title="【日报】2026-01-08：3 条机会（最高分 88）以及很长很长的标题" * 2,
                           lines=["摘要" * 5000], link="https://radar.example.com/radar/daily/2026-01-08?exp=1&sig=ab")
    title, body = push.fit(message, wecom)
    assert len((title + body).encode()) <= 4096 and body.endswith(message.link)
    title, _ = push.fit(message, schan)
    assert len(title) <= 32
    assert "abcdefghijk" not in wecom.label and "sendkey123456" not in schan.label


def test_errors_from_channels_are_redacted_and_kept_out_of_the_log(caplog):
    # a closed local port: the delivery fails, and neither the error nor the log may echo the password
    [channel] = push.channels_from(["json://robot:SECRETTOKENXYZ@127.0.0.1:9/hook"])
    error = push.send_one(channel, "t", "b")
    assert error is not None and error.startswith("json://127.0.0.1")
    assert "SECRETTOKENXYZ" not in error
    assert "SECRETTOKENXYZ" not in caplog.text


texts = st.text(min_size=0, max_size=20)


@given(st.tuples(st.dates(), texts, texts, texts, texts), st.integers(0, 4), texts)
def test_msg_uuid_differs_when_any_input_differs(inputs, index, replacement):
    changed = list(inputs)
    changed[index] = inputs[0] + timedelta(days=1) if index == 0 else replacement
    assume(tuple(changed) != inputs)
    assert msg_uuid(*changed) != msg_uuid(*inputs)


def test_msg_uuid_is_the_sha1_the_notification_log_already_holds():
    """The keys of messages already sent are in the notification log: a key that changed would send them again."""
    assert msg_uuid(date(2026, 1, 8), "14:00", "opportunity", "https://x/analysis/1") == (
        "fa625bd150576501c3ca5cd8934240ce97671f7c")
    assert msg_uuid(date(2026, 1, 8), "22:00", "daily", "https://x/daily/2026-01-08", "c0ffee") == (
        "012c56a2330204306074624cdd17153528e241c6")
    assert msg_uuid("2026-01-08", "22:00", "daily", "https://x/daily/2026-01-08", "c0ffee", "force-1") == (
        "37677711b96a546a020208983e9114e3855f852d")


def test_a_repost_of_an_already_pushed_article_is_not_pushed_again(fakes):
    body = "<p>同一篇稿件：铜矿供给收缩，冶炼厂加工费下滑，铜价中枢上移。</p>"
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}, {"id": "MP_WXS_2", "mp_name": "前哨站"}]
    fakes.werss.articles.append(article(1, shanghai(2026, 1, 8, 11), body=body, title="文章1"))
    fakes.at(shanghai(2026, 1, 8, 12))
    fakes.deepseek.responder = lambda b: answer(80, evidence=("铜矿供给收缩",))
    run_slot(shanghai(2026, 1, 8, 12))
    fakes.werss.articles.append(article(2, SLOT - timedelta(minutes=30), body=body, title="文章2", mp="MP_WXS_2"))
    fakes.at(SLOT)
    result = run_slot(SLOT)
    assert result["summary"]["analysed"] == 1 and result["summary"]["above_threshold"] == 0
    assert len(fakes.sink.received) == 1 and len(fakes.deepseek.requests) == 1


def test_a_slot_named_on_time_pushes_by_the_usual_rules_once(fakes):
    _articles(fakes, {1: 90})
    soon = SLOT + timedelta(minutes=10)
    run_slot(soon, run_type="manual", params={"slot": "14:00"}, now=soon, dag_run_id="manual__1")
    assert len(fakes.sink.received) == 1 and "最高分 90" in fakes.sink.received[0]["title"]
    again = soon + timedelta(minutes=5)
    run_slot(again, run_type="manual", params={"slot": "14:00"}, now=again, dag_run_id="manual__2")
    assert len(fakes.sink.received) == 1  # one alert per slot, whoever triggers it


def test_a_slot_named_long_after_its_time_sends_no_stale_alert_even_if_it_first_ran_on_time(fakes):
    _articles(fakes, {1: 40})
    run_slot(SLOT)  # on time, nothing to push
    fakes.werss.articles.append(article(2, SLOT - timedelta(minutes=5), title="文章2"))
    fakes.deepseek.responder = lambda body: answer(90)
    later = SLOT + timedelta(hours=6)
    run_slot(later, run_type="manual", params={"slot": "14:00"}, now=later)
    assert fakes.sink.received == []
    assert "started late" in _decisions()[-1]["detail"]["reason"]


def test_a_redo_of_a_slot_never_pushes(fakes):
    _articles(fakes, {1: 90})
    soon = SLOT + timedelta(minutes=10)
    run_slot(soon, run_type="manual", params={"action": "redo", "slot": "14:00"}, now=soon)
    assert fakes.sink.received == []
    assert "suppressed" in _decisions()[-1]["detail"]["reason"]


def test_a_backfill_analyses_only_what_its_own_ingest_stored(fakes):
    from include.radar.steps.ingest import ingest
    from include.radar.steps.open_slot import open_slot
    from include.radar.steps.runtime import Runtime
    from include.radar.steps.select_articles import articles_to_analyse

    _articles(fakes, {1: 90})
    # today's 14:00 ingest stored article 1, but its analysis has not run yet (pending)
    rt = Runtime.load()
    today = open_slot(rt, run_after=SLOT, run_type="scheduled", dag_id="d", dag_run_id="x", params={})
    ingest(rt, today)
    result = run_slot(shanghai(2026, 1, 5, 14), run_type="backfill")
    assert result["outcomes"] == [] and fakes.deepseek.requests == []  # not the backfill's business
    assert articles_to_analyse(rt, today) != []  # still waiting for its own slot
