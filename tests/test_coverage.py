"""The 22:00 report says what share of the accounts the day covered: accounts whose article list was read
that day and that show WeRSS collecting them (an article within their rhythm, or a collection of WeRSS's in the
last day) while WeRSS holds a WeChat login, out of the accounts WeRSS listed that day. A WeRSS that collects
nothing never looks complete: never scanned, no task, a new account with no article.

Rooms: coverage.py (the rules, pure), watch.py (``coverage_of``: the day read for them; the alert), digest.py
(the report's line), decide.py (the daily push's line), listing.py (WeRSS's record of each account's collection).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from include.radar.collect.coverage import LOGIN_LAPSED, LOGIN_OK, LOGIN_UNSCANNED, Coverage, login_state, summarise
from include.radar.pushes import decide
from tests.conftest import connect
from tests.slotrun import answer, article, read_page, run_slot, shanghai, slot_clock

DAY = shanghai(2026, 1, 8, 22).date()
ACCOUNTS = [{"id": "MP_WXS_1", "mp_name": "研究所"}, {"id": "MP_WXS_2", "mp_name": "前哨站"},
            {"id": "MP_WXS_3", "mp_name": "宏观"}]


def _slot(fakes, when):
    fakes.at(when)
    return run_slot(when, clock=slot_clock(when))


def _report() -> dict:
    with connect() as conn:
        return conn.execute("SELECT status, stats, error FROM daily_report").fetchone()


# ------------------------------------------------------------------------------------------------- pure

AT = shanghai(2026, 1, 8, 22)


def _acc(i: int, name: str, *, read: bool = True, article_h: float | None = 2, cadence_h: float | None = None,
         synced_h: float | None = None) -> dict:
    """An account as coverage reads it: its newest article and its last collection ``*_h`` hours before AT."""
    return {"id": i, "name": name, "read": read,
            "last_article_at": AT - timedelta(hours=article_h) if article_h is not None else None,
            "cadence": timedelta(hours=cadence_h) if cadence_h else None,
            "synced_at": AT - timedelta(hours=synced_h) if synced_h is not None else None}


def test_covered_needs_evidence_of_collection_out_of_the_accounts_listed():
    rows = [_acc(1, "研究所"), _acc(2, "前哨站", read=False), _acc(3, "宏观", article_h=46, cadence_h=6),
            _acc(4, "快讯", article_h=None), _acc(5, "周刊", article_h=100, cadence_h=48)]
    found = summarise(rows, at=AT)
    assert (found.active, found.covered, found.share) == (5, 2, 40)
    assert found.unread == ["前哨站"] and found.stalled == ["宏观"] and found.uncollected == ["快讯"]
    assert found.line() == "公众号覆盖 2/5（40%）：1 个未能读取（前哨站）；1 个尚未采集到文章（快讯）；1 个久未发文（宏观）"
    lapsed = summarise(rows, at=AT, login=LOGIN_LAPSED)
    assert lapsed.covered == 0 and "微信登录已过期" in lapsed.line()
    assert summarise(rows[:1], at=AT).line() == "公众号覆盖 1/1（100%）"
    # 2 of 3 is 66 %, never rounded up to look better
    assert summarise([rows[0], rows[2], rows[4]], at=AT).share == 66


def test_a_quiet_account_that_werss_collected_in_the_last_day_is_covered():
    quiet = _acc(1, "宏观", article_h=46, cadence_h=6)
    assert summarise([quiet], at=AT).covered == 0
    assert summarise([{**quiet, "synced_at": AT - timedelta(hours=3)}], at=AT).covered == 1
    # a collection two days ago, or one "after" the moment judged (a backfill of a day gone by), is no evidence
    assert summarise([{**quiet, "synced_at": AT - timedelta(hours=30)}], at=AT).covered == 0
    assert summarise([{**quiet, "synced_at": AT + timedelta(hours=1)}], at=AT).covered == 0


@pytest.mark.parametrize(("article_h", "cadence_h", "covered"), [
    (70, None, 1), (74, None, 0),  # no known interval yet: within the radar's 72 h window, and a little
    (23, 1, 1), (25, 1, 0),  # a frequent writer is still given a day
    (140, 48, 1), (146, 48, 0),  # three times its interval
])
def test_an_article_counts_within_the_accounts_rhythm(article_h, cadence_h, covered):
    assert summarise([_acc(1, "号", article_h=article_h, cadence_h=cadence_h)], at=AT).covered == covered


def test_a_werss_never_scanned_covers_nothing_and_says_so():
    found = summarise([_acc(1, "研究所"), _acc(2, "快讯", article_h=None)], at=AT, login=LOGIN_UNSCANNED)
    assert (found.covered, found.unscanned, found.nothing_collected) == (0, True, False)  # the login says why
    assert found.line() == "公众号覆盖 0/2（0%）：WeRSS 还没有扫码登录微信，采集不到文章；1 个尚未采集到文章（快讯）"


def test_a_werss_that_never_collected_says_nothing_was_collected():
    """No task, or never applied: the accounts were read (their lists are empty) and nothing shows collection."""
    found = summarise([_acc(1, "研究所", article_h=None)], at=AT)
    assert found.line() == "公众号覆盖 0/1（0%）：WeRSS 没有在采集：没有任何公众号有采集到的迹象；1 个尚未采集到文章（研究所）"


def test_a_day_without_an_account_list_covers_none_of_the_week_before():
    found = summarise([_acc(1, "研究所", read=False)], at=AT, listed=False)
    assert (found.active, found.covered) == (1, 0) and "未能读取 WeRSS 的公众号列表" in found.line()


@pytest.mark.parametrize(("status", "state"), [
    ({}, LOGIN_OK), ({"reported": False, "checked_at": AT.isoformat()}, LOGIN_OK),
    ({"reported": True, "scanned": False, "checked_at": AT.isoformat()}, LOGIN_UNSCANNED),
    ({"reported": True, "logged_in": False, "checked_at": AT.isoformat()}, LOGIN_LAPSED),
    ({"reported": True, "logged_in": True, "expires_at": (AT - timedelta(hours=1)).isoformat(),
      "checked_at": (AT - timedelta(hours=2)).isoformat()}, LOGIN_LAPSED),
    ({"reported": True, "logged_in": True, "checked_at": (AT - timedelta(days=2)).isoformat()}, LOGIN_OK),
])
def test_the_login_state_of_the_day(status, state):
    assert login_state(status, AT - timedelta(hours=22), AT) == state


@pytest.mark.parametrize("stored", [None, "x", {}, {"active": "3", "covered": 1}, {"active": 2, "covered": 3},
                                    {"active": True, "covered": 0}, {"active": -1, "covered": 0}])
def test_a_stored_coverage_that_makes_no_sense_is_not_shown(stored):
    assert Coverage.from_stats(stored) is None
    assert decide.coverage_line({"coverage": stored}) == []


def test_a_stored_coverage_round_trips_with_its_names_capped():
    names = [f"号{i:02d}" for i in range(25)]
    found = summarise([_acc(i, n, read=i % 2 == 0, article_h=None) for i, n in enumerate(names)], at=AT,
                      login=LOGIN_UNSCANNED)
    back = Coverage.from_stats(found.as_stats())
    assert back is not None and back.unread_count == 12 and len(back.unread) == 10 and back.uncollected_count == 13
    assert back.line() == found.line() == (
        "公众号覆盖 0/25（0%）：WeRSS 还没有扫码登录微信，采集不到文章；12 个未能读取（号01、号03、号05 等）；13 个尚未采集到"
        "文章（号00、号02、号04 等）")
    # a report stored before these fields existed reads as it did
    old = {"active": 2, "covered": 1, "unread": ["A"], "stalled": [], "login_lapsed": False, "listed": True}
    assert Coverage.from_stats(old).line() == "公众号覆盖 1/2（50%）：1 个未能读取（A）"


# ----------------------------------------------------------------------------------------- the report


def test_the_22_00_report_states_the_share_of_accounts_covered(fakes):
    fakes.werss.accounts = ACCOUNTS
    at = shanghai(2026, 1, 8, 22)
    # 研究所 used to write every 6 hours and has been quiet for 46 hours: stalled; 前哨站's list fails all day
    fakes.werss.articles = [article(n, at - timedelta(hours=46 + 6 * n)) for n in range(4)]
    fakes.werss.articles += [article(10 + n, at - timedelta(hours=1 + 5 * n), mp="MP_WXS_3") for n in range(2)]
    fakes.werss.failing_accounts = {"MP_WXS_2": 500}
    fakes.deepseek.responder = lambda body: answer(72)
    _slot(fakes, shanghai(2026, 1, 8, 18))
    _slot(fakes, at)
    stats = _report()["stats"]["coverage"]
    assert (stats["active"], stats["covered"], stats["share"]) == (3, 1, 33)
    assert stats["unread"] == ["前哨站"] and stats["stalled"] == ["研究所"] and stats["login_lapsed"] is False
    line = "公众号覆盖 1/3（33%）：1 个未能读取（前哨站）；1 个久未发文（研究所）"
    [daily] = [m for m in fakes.sink.received if m["title"].startswith("【日报】")]
    assert line in daily["message"]
    page = read_page(f"/daily/{DAY}", at + timedelta(minutes=15))
    assert "公众号覆盖" in page and "（33%）" in page and line in page


def test_an_account_read_at_any_slot_of_the_day_is_covered(fakes):
    fakes.werss.accounts = ACCOUNTS[:2]
    fakes.werss.articles = [article(1, shanghai(2026, 1, 8, 11)), article(2, shanghai(2026, 1, 8, 11), mp="MP_WXS_2")]
    fakes.deepseek.responder = lambda body: answer(30)
    _slot(fakes, shanghai(2026, 1, 8, 12))
    fakes.werss.failing_accounts = {"MP_WXS_2": 500}  # fails at 22:00 only: it was read at 12:00
    _slot(fakes, shanghai(2026, 1, 8, 22))
    stats = _report()["stats"]["coverage"]
    assert (stats["active"], stats["covered"]) == (2, 2)


def test_a_lapsed_wechat_login_covers_no_account_and_marks_the_report_partial(fakes):
    fakes.werss.accounts = ACCOUNTS[:2]
    fakes.werss.articles = [article(1, shanghai(2026, 1, 8, 11))]
    fakes.werss.wechat_expires_at = int(shanghai(2026, 1, 8, 20).timestamp())
    fakes.deepseek.responder = lambda body: answer(30)
    _slot(fakes, shanghai(2026, 1, 8, 22))
    report = _report()
    assert report["stats"]["coverage"]["covered"] == 0 and report["stats"]["coverage"]["login_lapsed"] is True
    assert report["status"] == 3 and "werss: 微信登录已过期" in report["error"]
    [daily] = [m for m in fakes.sink.received if m["title"].startswith("【日报】")]
    assert "公众号覆盖 0/2（0%）：WeRSS 的微信登录已过期，采集已停止" in daily["message"]


def test_a_day_werss_was_down_counts_the_accounts_of_the_days_before_as_not_covered(fakes):
    fakes.werss.accounts = ACCOUNTS[:2]
    _slot(fakes, shanghai(2026, 1, 7, 22))
    fakes.werss.down = True
    before = len(_alerts(fakes, "WeRSS 没有在采集"))  # the day before: listed, nothing collected yet
    _slot(fakes, shanghai(2026, 1, 8, 22))
    with connect() as conn:
        stats = conn.execute("SELECT stats FROM daily_report WHERE report_date = %s", (DAY,)).fetchone()["stats"]
    assert (stats["coverage"]["active"], stats["coverage"]["covered"], stats["coverage"]["listed"]) == (2, 0, False)
    # WeRSS unreachable is said as such: not as a WeRSS that collects nothing (nor alerted as one)
    line = Coverage.from_stats(stats["coverage"]).line()
    assert "今日未能读取 WeRSS 的公众号列表" in line and "没有在采集" not in line
    assert len(_alerts(fakes, "WeRSS 没有在采集")) == before


# ------------------------------------------------------------------------- WeRSS that does not collect


def _alerts(fakes, title: str) -> list[dict]:
    return [m for m in fakes.ops.received if title in m["title"]]


def test_a_werss_never_scanned_reports_nothing_covered_and_the_operator_hears_of_it(fakes):
    """v1.4.9 never scanned: ``login`` true, an empty token; the accounts added have no article."""
    fakes.werss.accounts = ACCOUNTS[:1]
    fakes.werss.wechat_scanned = False
    fakes.deepseek.responder = lambda body: answer(30)
    _slot(fakes, shanghai(2026, 1, 8, 22))
    report = _report()
    assert report["stats"]["coverage"]["covered"] == 0 and report["stats"]["coverage"]["unscanned"] is True
    assert report["status"] == 3 and "werss: 还没有扫码登录微信" in report["error"]
    [daily] = [m for m in fakes.sink.received if m["title"].startswith("【日报】")]
    assert "公众号覆盖 0/1（0%）：WeRSS 还没有扫码登录微信，采集不到文章；1 个尚未采集到文章（研究所）" in daily["message"]
    [alert] = _alerts(fakes, "WeRSS 还没有扫码登录微信")
    assert "扫码授权" in alert["message"]
    assert _alerts(fakes, "WeRSS 没有在采集") == []  # one alert for one cause
    page = read_page("/", shanghai(2026, 1, 8, 22, 15))
    assert "微信未登录" in page and "WeRSS 还没有扫码登录微信" in page and "公众号覆盖 0/1（0%）" in page


def test_a_werss_without_a_task_collects_nothing_and_never_looks_complete(fakes):
    """Scanned, an account subscribed, no message task: its list stays empty, WeRSS's record says never."""
    fakes.werss.accounts = ACCOUNTS[:1]
    _slot(fakes, shanghai(2026, 1, 8, 12))
    _slot(fakes, shanghai(2026, 1, 8, 22))
    coverage = _report()["stats"]["coverage"]
    assert (coverage["covered"], coverage["uncollected"]) == (0, ["研究所"])
    assert len(_alerts(fakes, "WeRSS 没有在采集")) == 1  # once a day, not once a slot
    page = read_page("/", shanghai(2026, 1, 8, 22, 15))
    assert "WeRSS 公众号状态 · 全部正常" not in page  # the account answers every check, and nothing is collected
    assert '<span class="badnum">采集覆盖 0/1（0%）</span>' in page


def test_the_accounts_headline_is_an_all_clear_only_for_what_was_seen():
    from include.radar.web.views.overview import AccountsHeadline, AccountView, accounts_headline

    def account(mp_id, checked="01-08 22:00", healthy=True):
        return AccountView(mp_id, mp_id, "—", checked, 0 if healthy else 2, "", "", healthy)

    seen = [account("a"), account("b")]
    assert accounts_headline(seen, {}, Coverage(2, 2)).text == "全部正常"
    assert accounts_headline(seen, {}, Coverage(2, 1)).text == "采集覆盖 1/2（50%）"
    assert accounts_headline(seen, {}, None).text == "采集情况未知"
    assert accounts_headline([*seen, account("c", checked="—")], {}, Coverage(3, 3)).text == "1 个尚未检查"
    assert accounts_headline([*seen, account("c", healthy=False)], {"a": "久未发文"}, Coverage(3, 3)).text == "2 个异常"
    assert accounts_headline([], {}, Coverage(0, 0)) == AccountsHeadline("暂无记录", False)
    assert all(accounts_headline(seen, {}, c).alarm for c in (Coverage(2, 0), Coverage(0, 0), None))


def test_a_new_account_not_yet_collected_is_named_while_the_others_are_covered(fakes):
    fakes.werss.accounts = ACCOUNTS[:2]
    fakes.werss.articles = [article(1, shanghai(2026, 1, 8, 11))]  # 前哨站: subscribed, nothing collected yet
    fakes.deepseek.responder = lambda body: answer(30)
    _slot(fakes, shanghai(2026, 1, 8, 22))
    coverage = _report()["stats"]["coverage"]
    assert (coverage["active"], coverage["covered"], coverage["uncollected"]) == (2, 1, ["前哨站"])
    assert _alerts(fakes, "WeRSS 没有在采集") == []
    [daily] = [m for m in fakes.sink.received if m["title"].startswith("【日报】")]
    assert "公众号覆盖 1/2（50%）：1 个尚未采集到文章（前哨站）" in daily["message"]


def test_an_account_werss_collected_today_is_covered_though_it_wrote_nothing(fakes):
    """WeRSS's own record (``mps/{id}``'s sync_time) is the evidence for an account that wrote nothing new."""
    fakes.werss.accounts = ACCOUNTS[:2]
    fakes.werss.articles = [article(1, shanghai(2026, 1, 8, 11))]
    fakes.werss.synced["MP_WXS_2"] = int(shanghai(2026, 1, 8, 21, 30).timestamp())
    fakes.deepseek.responder = lambda body: answer(30)
    _slot(fakes, shanghai(2026, 1, 8, 22))
    assert _report()["stats"]["coverage"]["covered"] == 2
    # WeRSS's record is asked only where no article shows the account collected
    assert fakes.werss.account_calls == ["MP_WXS_2"]


def test_the_overview_after_midnight_shows_the_last_day_slots_ran_not_a_day_of_nothing(fakes):
    """At 00:05 no slot has listed today's accounts yet: the WeRSS box speaks of yesterday, as of its end."""
    fakes.werss.accounts = ACCOUNTS[:1]
    fakes.werss.articles = [article(1, shanghai(2026, 1, 8, 11))]
    fakes.deepseek.responder = lambda body: answer(30)
    _slot(fakes, shanghai(2026, 1, 8, 22))
    for at in (shanghai(2026, 1, 9, 0, 5), shanghai(2026, 1, 8, 23, 30)):
        page = read_page("/", at)
        assert "没有在采集" not in page and "0/1" not in page
    assert "01-08 1/1 个公众号都有采集到的迹象" in read_page("/", shanghai(2026, 1, 9, 0, 5))
    assert "今天 1/1 个公众号都有采集到的迹象" in read_page("/", shanghai(2026, 1, 8, 23, 30))
    assert "WeRSS 公众号状态 · 全部正常" in read_page("/", shanghai(2026, 1, 8, 23, 30))
