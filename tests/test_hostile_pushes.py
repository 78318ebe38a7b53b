"""Every push is accounted for, even when its sender dies — between its claim and its send (the
message is delivered later, once) or between the send and its record (delivery unknown: never resent, the
operator told once, the overview says so).

Rooms: push.py (the sweep), store/pushes.py, runtime.py (``sweep_pushes``), steps/push_opportunity.py,
steps/daily_report.py, steps/close_slot.py, the overview's push status.
"""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime, timedelta

import pytest

from include.radar import store
from include.radar.pushes import push
from include.radar.pushes.message import Message
from include.radar.steps.close_slot import close_slot
from include.radar.steps.daily_report import push_daily_report
from include.radar.steps.runtime import Runtime
from tests.conftest import connect
from tests.slotrun import answer, article, read_page, run_slot, shanghai

pytestmark = pytest.mark.hostile

DAY = date(2026, 1, 8)
DAILY = shanghai(2026, 1, 8, 22)
CHANNELS = push.channels_from(["json://one.example/hook", "json://two.example/hook"])
MESSAGE = Message(title="【日报】2026-01-08：1 条机会（最高分 80）", lines=["分析 1 篇"],
                       link="https://radar.example.com/radar/daily/2026-01-08")


class Killed(BaseException):
    """The sender's process dies here: no handler runs."""


class Channel:
    """A fake channel: what it accepted, per channel key."""

    def __init__(self) -> None:
        self.accepted: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, channel: push.Channel, title: str, body: str) -> str | None:
        with self.lock:
            self.accepted.append((channel.key, title, body))
        return None

    def per_channel(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for key, _, _ in self.accepted:
            counts[key] = counts.get(key, 0) + 1
        return counts


def _deliver(sender, push_type: str = "daily", channels=CHANNELS) -> push.DeliveryReport:
    return push.deliver(connect, channels, MESSAGE, push.Occasion(
        DAY, "22:00", push_type, "https://radar.example.com/radar/daily/2026-01-08", None), sender=sender)


def _killed_before_the_send(monkeypatch, push_type: str = "daily") -> None:
    """A sender that claims its first channel and dies before starting the send."""
    real = store.pushes.start_send

    def die(conn, msg_uuid):
        raise Killed()

    monkeypatch.setattr(store.pushes, "start_send", die)
    with pytest.raises(Killed):
        _deliver(Channel(), push_type)
    monkeypatch.setattr(store.pushes, "start_send", real)


def _age(minutes: int, **where: str) -> None:
    """Move the log's clock back: the rows were claimed (and started) ``minutes`` ago."""
    condition = " AND ".join(f"{k} = %({k})s" for k in where) or "true"
    with connect() as conn:
        conn.execute(
            f"UPDATE notification_log SET updated_at = updated_at - make_interval(mins => %(m)s), "
            f"send_started_at = send_started_at - make_interval(mins => %(m)s) WHERE {condition}",
            {"m": minutes, **where},
        )


def _rows() -> list[dict]:
    with connect() as conn:
        return conn.execute("SELECT * FROM notification_log ORDER BY id").fetchall()


def test_a_sender_killed_between_its_claim_and_its_send_is_delivered_once_by_the_retry(fakes, monkeypatch):
    _killed_before_the_send(monkeypatch)
    [row] = _rows()  # the first channel's claim: pending, never started
    assert (row["status"], row["send_started_at"]) == (store.common.NOTE_PENDING, None)
    channel = Channel()
    report = _deliver(channel)  # the push task's retry: before, it skipped the pending row for good
    assert sorted(report.sent) == sorted(c.label for c in CHANNELS)
    _deliver(channel)
    assert channel.per_channel() == {c.key: 1 for c in CHANNELS}
    assert {r["status"] for r in _rows()} == {store.common.NOTE_SENT}


def test_a_sender_killed_between_its_claim_and_its_send_is_delivered_once_by_the_sweep(fakes, monkeypatch):
    _killed_before_the_send(monkeypatch)
    channel = Channel()
    assert not push.sweep(connect, CHANNELS, stale_after=timedelta(minutes=30), now=datetime.now(UTC), sender=channel)  # too fresh
    _age(6)
    report = push.sweep(connect, CHANNELS, stale_after=timedelta(minutes=30), now=datetime.now(UTC), sender=channel)
    assert len(report.sent) == 1 and not report.failed and not report.unknown
    push.sweep(connect, CHANNELS, stale_after=timedelta(minutes=30), now=datetime.now(UTC), sender=channel)
    _deliver(channel)  # a later retry sends the other channel only
    assert channel.per_channel() == {c.key: 1 for c in CHANNELS}


def test_senders_racing_for_a_row_whose_sender_died_deliver_it_once(fakes, monkeypatch):
    _killed_before_the_send(monkeypatch)
    _age(6)
    channel = Channel()
    barrier = threading.Barrier(6)

    def sweeper() -> None:
        barrier.wait()
        push.sweep(connect, CHANNELS, stale_after=timedelta(minutes=30), now=datetime.now(UTC), sender=channel)

    def retry() -> None:
        barrier.wait()
        _deliver(channel)

    threads = [threading.Thread(target=f) for f in (sweeper, sweeper, sweeper, retry, retry, retry)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert channel.per_channel() == {c.key: 1 for c in CHANNELS}


def test_a_stale_opportunity_alert_left_unsent_is_marked_failed_not_sent_late(fakes, monkeypatch):
    _killed_before_the_send(monkeypatch, "opportunity")
    _age(120)
    channel = Channel()
    report = push.sweep(connect, CHANNELS, stale_after=timedelta(minutes=30), now=datetime.now(UTC), sender=channel)
    assert channel.accepted == [] and len(report.failed) == 1
    [row] = _rows()
    assert row["status"] == store.common.NOTE_FAILED and "120 minutes late is stale" in row["error"]


def test_a_row_whose_channel_is_gone_is_marked_failed(fakes, monkeypatch):
    _killed_before_the_send(monkeypatch)
    _age(6)
    report = push.sweep(connect, CHANNELS[1:], stale_after=timedelta(minutes=30), now=datetime.now(UTC), sender=Channel())
    assert len(report.failed) == 1 and "no longer configured" in _rows()[0]["error"]


def test_a_pending_row_from_before_sends_were_recorded_is_unknown_never_resent(fakes):
    with connect() as conn:  # claimed by the code before this issue: no key, no text, no send start
        conn.execute(
            "INSERT INTO notification_log (msg_uuid, report_date, slot, push_type, target_url, channel, status, "
            "updated_at) VALUES ('old', %s, '22:00', 'daily', 'u', 'json://one.example', 0, now() - interval '1 day')",
            (DAY,),
        )
    channel = Channel()
    report = push.sweep(connect, CHANNELS, stale_after=timedelta(minutes=30), now=datetime.now(UTC), sender=channel)
    assert len(report.unknown) == 1 and channel.accepted == [] and _rows()[0]["status"] == store.common.NOTE_UNKNOWN


# ----------------------------------------------------- through the pipeline: the daily push, killed


def _daily_day(fakes) -> None:
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles.append(article(1, shanghai(2026, 1, 8, 9), title="文章1"))
    fakes.deepseek.responder = lambda body: answer(80)
    fakes.at(DAILY)


def _alerts(fakes, title: str) -> list[dict]:
    return [m for m in fakes.ops.received if title in m["title"]]


def test_a_daily_push_killed_between_send_and_record_is_never_resent_and_the_operator_is_told_once(
        fakes, monkeypatch):
    _daily_day(fakes)
    real = store.pushes.finish_notification

    def killed_after_the_send(conn, msg_uuid, error):
        if store.pushes.notification(conn, msg_uuid)["push_type"] == "daily":
            raise RuntimeError("the worker was lost")  # the channels accepted; nothing is recorded
        return real(conn, msg_uuid, error)

    monkeypatch.setattr(store.pushes, "finish_notification", killed_after_the_send)
    result = run_slot(DAILY)
    monkeypatch.setattr(store.pushes, "finish_notification", real)
    assert len(fakes.sink.received) == 1 and fakes.sink2.received == []  # it died at the first channel
    slot, rt = result["slot"], Runtime.load()
    push_daily_report(rt, slot)  # Airflow's retry: the second channel now, the first not again
    assert len(fakes.sink.received) == 1 and len(fakes.sink2.received) == 1
    close_slot(rt, slot, [])  # too fresh for the sweep
    assert [r["status"] for r in _rows() if r["push_type"] == "daily"] == [store.common.NOTE_PENDING, store.common.NOTE_SENT]
    _age(6, push_type="daily")
    close_slot(rt, slot, [])  # the sweep: delivery unknown, the operator told
    push_daily_report(rt, slot)
    close_slot(rt, slot, [])
    run_slot(shanghai(2026, 1, 9, 7))  # the next slot's steps sweep too
    assert len(fakes.sink.received) == 1 and len(fakes.sink2.received) == 1  # never twice
    unknown, sent = [r for r in _rows() if r["push_type"] == "daily"]
    assert (unknown["status"], sent["status"]) == (store.common.NOTE_UNKNOWN, store.common.NOTE_SENT)
    assert "delivery unknown" in unknown["error"]
    [alert] = _alerts(fakes, "推送结果未知")
    assert "daily" in alert["message"] and "强制推送" in alert["message"]
    html = read_page("/", DAILY + timedelta(minutes=20))
    push_card = html.split("日报推送 <span", 1)[1].split("</section>", 1)[0]
    assert "结果未知" in push_card and "不会自动重发" in push_card


def test_a_daily_push_killed_before_its_send_goes_out_with_the_tasks_retry(fakes, monkeypatch):
    _daily_day(fakes)
    real = store.pushes.start_send

    def killed_before_the_send(conn, msg_uuid):
        raise RuntimeError("the worker was lost")

    monkeypatch.setattr(store.pushes, "start_send", killed_before_the_send)
    result = run_slot(DAILY)
    monkeypatch.setattr(store.pushes, "start_send", real)
    assert fakes.sink.received == [] and "push_daily_report" in (result["closed"]["error"] or "")
    push_daily_report(Runtime.load(), result["slot"])  # the retry
    push_daily_report(Runtime.load(), result["slot"])
    assert len(fakes.sink.received) == 1 and len(fakes.sink2.received) == 1
    assert _alerts(fakes, "推送结果未知") == []


def test_a_push_the_sweep_cannot_deliver_is_told_to_the_operator_once(fakes, monkeypatch):
    """An opportunity push whose sender died after its claim, found by the sweep two hours later: too late to
    go out (marked failed, not sent), and the operator is told once, not again by later sweeps or a rerun."""
    afternoon = shanghai(2026, 1, 8, 14)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles.append(article(1, shanghai(2026, 1, 8, 13), title="文章1"))
    fakes.deepseek.responder = lambda body: answer(80)
    fakes.at(afternoon)
    real = store.pushes.start_send

    def killed_before_the_send(conn, msg_uuid):
        if store.pushes.notification(conn, msg_uuid)["push_type"] == "opportunity":
            raise RuntimeError("the worker was lost")  # claimed, never started
        return real(conn, msg_uuid)

    monkeypatch.setattr(store.pushes, "start_send", killed_before_the_send)
    result = run_slot(afternoon)
    monkeypatch.setattr(store.pushes, "start_send", real)
    assert "push" in result["errors"] and fakes.sink.received == [] and fakes.sink2.received == []
    assert [r["status"] for r in _rows()] == [store.common.NOTE_PENDING]
    assert _alerts(fakes, "推送未能补发") == []  # too fresh for the sweep
    _age(120, push_type="opportunity")
    slot, rt = result["slot"], Runtime.load()
    close_slot(rt, slot, [])  # the sweep: two hours late, marked failed
    [row] = [r for r in _rows() if r["push_type"] == "opportunity"]
    assert row["status"] == store.common.NOTE_FAILED and "late is stale" in row["error"]
    [alert] = _alerts(fakes, "推送未能补发")
    assert "opportunity「【机会提醒】14:00" in alert["message"] and "late is stale" in alert["message"]
    close_slot(rt, slot, [])  # a rerun of close_slot, and the next slot's own sweeps: nothing more
    run_slot(shanghai(2026, 1, 8, 18))
    assert len(_alerts(fakes, "推送未能补发")) == 1
    assert fakes.sink.received == [] and fakes.sink2.received == []  # never sent late
