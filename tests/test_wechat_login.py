"""WeRSS's WeChat login lapses every two to three days and collection then stops silently. When
WeRSS reports its login (``sys/info``), the operator is warned before it lapses (once a day) and alerted once
when it has; the overview shows it; the WeChat session's token and cookie never reach the radar's store or
pages.

Rooms: werss.py (``wechat_login``), watch.py, the overview (web/views/health.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from include.radar.collect.werss import Credentials, WeRSSClient, judged, wechat_login
from tests.conftest import connect
from tests.slotrun import article, read_page, run_slot, shanghai, slot_clock

SLOT = shanghai(2026, 1, 8, 12)
WECHAT_SECRETS = ("WECHAT_SESSION_SECRET", "1234567890", "fp0123456789")


def _slot(fakes, when):
    fakes.at(when)
    return run_slot(when, clock=slot_clock(when))


def _alerts(fakes, title: str) -> list[dict]:
    return [m for m in fakes.ops.received if m["title"] == title]


def _state() -> dict:
    with connect() as conn:
        row = conn.execute("SELECT value FROM service_state WHERE key = 'werss:wechat'").fetchone()
    return row["value"] if row else {}


def _setup(fakes, expires_at: datetime | None, *, login: bool | None = True) -> None:
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(1, SLOT - timedelta(hours=1))]
    fakes.werss.wechat_login = login
    fakes.werss.wechat_expires_at = int(expires_at.timestamp()) if expires_at else None


# -------------------------------------------------------------------------------------------- reading it


NOW_AT = datetime(2026, 1, 8, 12, 0, tzinfo=UTC)  # when these sys/info answers are read


def test_sys_info_is_read_for_the_login_and_its_expiry_and_nothing_else():
    expires = datetime(2026, 1, 10, 15, 23, 48, tzinfo=UTC)
    data = {"wx": {"token": "1234567890", "expiry_time": "2026-01-10 23:23:48", "login": True,
                   "info": {"token": "1234567890", "cookie": "slave_sid=WECHAT_SESSION_SECRET",
                            "expiry": {"expiry_timestamp": expires.timestamp(), "remaining_seconds": 1,
                                       "expiry_time": "2026-01-10 23:23:48"}}}}
    login = wechat_login(data, NOW_AT)
    assert (login.reported, login.logged_in, login.expires_at) == (True, True, expires)
    assert not any(s in repr(login) for s in WECHAT_SECRETS)
    # an older stored login without the timestamp: its local-time text (WeRSS runs in Asia/Shanghai)
    data["wx"]["info"]["expiry"] = {"expiry_time": "2026-01-10 23:23:48", "remaining_seconds": 99}
    assert wechat_login(data, NOW_AT).expires_at == expires
    # lapsed: WeRSS says login false and blanks expiry_time, the stored login keeps its expiry
    data["wx"].update(login=False, expiry_time="")
    lapsed = wechat_login(data, NOW_AT)
    assert lapsed.reported and not lapsed.logged_in and lapsed.expired(expires - timedelta(days=1))


@pytest.mark.parametrize("data", [
    {"os": {"name": "Linux"}, "api_version": "1.0"},  # a WeRSS before the wx block
    {"wx": "yes"}, {"wx": {"login": "true"}}, [], None,
])
def test_a_werss_that_does_not_say_is_not_reported(data):
    assert not wechat_login(data, NOW_AT).reported


@pytest.mark.parametrize("expiry", [{"expiry_timestamp": "soon"}, {"expiry_timestamp": 10**20},
                                    {"expiry_timestamp": True}, {"expiry_time": "tomorrow"},
                                    {"expiry_time": "1970-01-01 00:00:00"}, {"expiry_time": "x" * 10_000}])
def test_an_expiry_that_makes_no_sense_is_left_unknown(expiry):
    login = wechat_login({"wx": {"token": "1234567890", "login": True, "info": {"expiry": expiry}}}, NOW_AT)
    assert login.reported and login.logged_in and login.expires_at is None


def test_an_older_werss_whose_sys_info_refuses_keys_does_not_fail_the_ingest(fakes):
    fakes.werss.access_key, fakes.werss.secret_key = "AK1", "SK1"
    fakes.werss.sys_info_takes_keys = False
    fakes.at(SLOT)
    client = WeRSSClient(fakes.base, Credentials(access_key="AK1", secret_key="SK1"), backoff_seconds=0)
    login = client.wechat_login()
    assert not login.reported and "AK/SK" in login.note
    fakes.werss.sys_info_takes_keys = True
    assert client.wechat_login().reported


def test_a_failing_sys_info_is_asked_once_per_slot_and_fails_nothing(fakes):
    _setup(fakes, SLOT + timedelta(days=2))
    fakes.werss.sys_info_status = 503
    result = _slot(fakes, SLOT)
    assert fakes.werss.sys_info_calls == 1  # no retry (the connection allows 2): the next slot asks again
    assert result["closed"]["status"] == "success" and _state() == {}
    fakes.werss.sys_info_status = None
    _slot(fakes, shanghai(2026, 1, 8, 14))
    assert _state()["logged_in"] is True


# ------------------------------------------------------------------------------------------- the alerts


def test_a_login_lapsing_within_a_day_warns_the_operator_once_a_day(fakes):
    _setup(fakes, SLOT + timedelta(hours=20))
    _slot(fakes, SLOT)
    _slot(fakes, shanghai(2026, 1, 8, 14))
    [warning] = _alerts(fakes, "WeRSS 的微信登录即将过期")
    assert "01-09 08:00" in warning["message"] and "还剩 20 小时" in warning["message"]
    _slot(fakes, shanghai(2026, 1, 9, 7))  # a new day, still lapsing: one more warning
    assert len(_alerts(fakes, "WeRSS 的微信登录即将过期")) == 2
    assert _alerts(fakes, "WeRSS 的微信登录已过期") == []


def test_a_login_far_from_lapsing_alerts_nothing(fakes, monkeypatch):
    _setup(fakes, SLOT + timedelta(hours=30))
    _slot(fakes, SLOT)
    assert fakes.ops.received == [] and _state()["logged_in"] is True
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_WECHAT_LOGIN_WARN_HOURS", "36")
    _slot(fakes, shanghai(2026, 1, 8, 14))
    assert len(_alerts(fakes, "WeRSS 的微信登录即将过期")) == 1


def test_a_lapsed_login_alerts_once_and_again_only_after_the_next_lapse(fakes):
    _setup(fakes, SLOT - timedelta(hours=2))
    _slot(fakes, SLOT)
    [alert] = _alerts(fakes, "WeRSS 的微信登录已过期")
    assert "01-08 10:00 过期" in alert["message"]
    _slot(fakes, shanghai(2026, 1, 8, 14))
    _slot(fakes, shanghai(2026, 1, 9, 7))  # the next day, still lapsed: told once is enough
    assert len(_alerts(fakes, "WeRSS 的微信登录已过期")) == 1
    # a new scan on day 2, which lapses on day 3: alerted again
    fakes.werss.wechat_expires_at = int(shanghai(2026, 1, 10, 9).timestamp())
    _slot(fakes, shanghai(2026, 1, 9, 12))
    assert _state()["expired"] is False and "expired_alerted" not in _state()
    _slot(fakes, shanghai(2026, 1, 10, 12))
    assert len(_alerts(fakes, "WeRSS 的微信登录已过期")) == 2


@pytest.mark.parametrize("token", [1234567890, "1234567890", "abc"])
def test_a_token_is_a_login_as_a_number_too(token):
    """WeRSS's config reads an all-digit value as a number, and WeChat's token is digits: sys/info then answers
    ``"token": 1234567890`` (seen on v1.4.9). A login all the same."""
    login = wechat_login({"wx": {"token": token, "expiry_time": "2026-01-10 23:23:48", "login": True, "info": None}}, NOW_AT)
    assert (login.reported, login.scanned, login.logged_in) == (True, True, True)


@pytest.mark.parametrize("token", [0, True, False, None, [], {}, 1.5])
def test_a_token_that_is_no_token_shows_no_login(token):
    assert wechat_login({"wx": {"token": token, "login": True}}, NOW_AT).scanned is None


@pytest.mark.parametrize("wx", [
    {"token": "", "expiry_time": "", "info": None, "login": True},  # v1.4.9, scanned or not, after a restart
    {"token": "   ", "login": True, "info": {"expiry": {"expiry_timestamp": 1893456000}}},
    {"login": True},
])
def test_no_token_shown_is_no_verdict_until_the_collections_give_one(wx):
    """v1.4.9 keeps a scan's token where sys/info does not read it (data/wx.lic's token_data): an empty token
    says nothing. A collection does: WeRSS starts one only with a token, and sets the account's sync_time."""
    login = wechat_login({"wx": wx}, NOW_AT)
    assert (login.reported, login.scanned, login.logged_in) == (True, None, True)
    assert not login.expired(datetime(2026, 1, 8, tzinfo=UTC))
    never = judged(login, None)
    assert (never.scanned, never.logged_in) == (False, False) and never.expired(datetime(2026, 1, 8, tzinfo=UTC))
    collected = datetime(2026, 1, 8, 6, 30, tzinfo=UTC)
    scanned = judged(login, collected)
    assert (scanned.scanned, scanned.logged_in, scanned.collected_at, scanned.expires_at) == (True, True, collected, None)


def test_a_login_flag_false_is_a_lapse_whatever_the_token_shows():
    """v1.4.9 sets login false when WeChat answers 「Invalid Session」: the lapse, seen by its next collection."""
    login = judged(wechat_login({"wx": {"token": "", "expiry_time": "", "info": None, "login": False}}, NOW_AT),
                   datetime(2026, 1, 8, tzinfo=UTC))
    assert login.scanned and login.expired(datetime(2026, 1, 8, tzinfo=UTC))


def test_a_werss_never_scanned_is_told_to_scan_not_that_a_login_lapsed(fakes):
    _setup(fakes, None)
    fakes.werss.wechat_scanned = False
    fakes.werss.articles = []  # WeRSS stores articles only from collections, which need the login
    _slot(fakes, SLOT)
    [alert] = _alerts(fakes, "WeRSS 还没有扫码登录微信")
    assert "从未扫码" in alert["message"]
    assert _alerts(fakes, "WeRSS 的微信登录已过期") == [] and _state()["scanned"] is False
    assert "WeRSS 还没有扫码登录微信" in read_page("/", SLOT + timedelta(minutes=5))


def test_a_werss_restarted_since_its_scan_reads_as_scanned_from_its_collections(fakes):
    """v1.4.9 after a restart answers sys/info as if never scanned; its stored articles prove the login."""
    _setup(fakes, None)
    fakes.werss.wechat_restarted = True
    _slot(fakes, SLOT)
    assert _alerts(fakes, "WeRSS 还没有扫码登录微信") == [] and _state()["scanned"] is True
    page = read_page("/", SLOT + timedelta(minutes=5))
    assert "微信已登录（WeRSS 未给出到期时间）" in page and "还没有扫码" not in page


def test_a_failed_delivery_is_retried_by_the_next_slot(fakes):
    _setup(fakes, SLOT - timedelta(hours=2))
    fakes.ops.fail_next = 10  # apprise retries a failed webhook a few times itself
    _slot(fakes, SLOT)
    assert "expired_alerted" not in _state()
    fakes.ops.fail_next = 0
    _slot(fakes, shanghai(2026, 1, 8, 14))
    assert len(_alerts(fakes, "WeRSS 的微信登录已过期")) == 1 and _state()["expired_alerted"]


# --------------------------------------------------------------------------------------- the overview


def test_the_overview_shows_the_login_and_never_its_secrets(fakes):
    _setup(fakes, SLOT + timedelta(days=2))
    _slot(fakes, SLOT)
    page = read_page("/", SLOT + timedelta(minutes=5))
    assert "微信登录有效至 01-10 12:00" in page
    stored = json.dumps(_state(), ensure_ascii=False)
    for secret in WECHAT_SECRETS:
        assert secret not in stored and secret not in page
    # the reported expiry passes before the next check: the page says so at once
    page = read_page("/", SLOT + timedelta(days=2, minutes=1))
    assert "微信登录已过期" in page and "WeRSS 已停止采集" in page


def test_a_werss_that_does_not_report_its_login_says_so_on_the_overview(fakes):
    _setup(fakes, None, login=None)
    _slot(fakes, SLOT)
    assert _state()["reported"] is False and fakes.ops.received == []
    assert "WeRSS 未报告微信登录状态" in read_page("/", SLOT + timedelta(minutes=5))
