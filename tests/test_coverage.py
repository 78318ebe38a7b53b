"""The 22:00 report says what share of the accounts the day covered: accounts whose article list
was read that day and that are not stalled (quiet far beyond their usual interval, or WeRSS's WeChat login
lapsed), out of the accounts WeRSS listed that day.

Rooms: coverage.py (the rules, pure), digest.py (``coverage_of``: the day read for them; the report's line),
decide.py (the daily push's line).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from include.radar import db, decide
from include.radar.coverage import Coverage, summarise
from tests.slotrun import answer, article, read_page, run_slot, shanghai

DAY = shanghai(2026, 1, 8, 22).date()
ACCOUNTS = [{"id": "MP_WXS_1", "mp_name": "研究所"}, {"id": "MP_WXS_2", "mp_name": "前哨站"},
            {"id": "MP_WXS_3", "mp_name": "宏观"}]


def _slot(fakes, when):
    fakes.at(when)
    with time_machine.travel(when + timedelta(minutes=1), tick=True):
        return run_slot(when)


def _report() -> dict:
    with db.connect() as conn:
        return conn.execute("SELECT status, stats, error FROM daily_report").fetchone()


# ------------------------------------------------------------------------------------------------- pure


def test_covered_is_read_and_not_stalled_out_of_the_accounts_listed():
    rows = [{"id": 1, "name": "研究所", "read": True}, {"id": 2, "name": "前哨站", "read": False},
            {"id": 3, "name": "宏观", "read": True}, {"id": 4, "name": "快讯", "read": True}]
    found = summarise(rows, {3}, login_lapsed=False)
    assert (found.active, found.covered, found.share) == (4, 2, 50)
    assert found.unread == ["前哨站"] and found.stalled == ["宏观"]
    assert found.line() == "公众号覆盖 2/4（50%）：1 个未能读取（前哨站）；1 个久未发文（宏观）"
    lapsed = summarise(rows, {3}, login_lapsed=True)
    assert lapsed.covered == 0 and "微信登录已过期" in lapsed.line()
    assert summarise(rows[:1], set(), login_lapsed=False).line() == "公众号覆盖 1/1（100%）"
    # 2 of 3 is 66 %, never rounded up to look better
    assert summarise(rows[:3], set(), login_lapsed=False).share == 66


def test_a_day_without_an_account_list_covers_none_of_the_week_before():
    found = summarise([{"id": 1, "name": "研究所", "read": False}], set(), login_lapsed=False, listed=False)
    assert (found.active, found.covered) == (1, 0) and "未能读取 WeRSS 的公众号列表" in found.line()


@pytest.mark.parametrize("stored", [None, "x", {}, {"active": "3", "covered": 1}, {"active": 2, "covered": 3},
                                    {"active": True, "covered": 0}, {"active": -1, "covered": 0}])
def test_a_stored_coverage_that_makes_no_sense_is_not_shown(stored):
    assert Coverage.from_stats(stored) is None
    assert decide.coverage_line({"coverage": stored}) == []


def test_a_stored_coverage_round_trips_with_its_names_capped():
    names = [f"号{i:02d}" for i in range(25)]
    found = summarise([{"id": i, "name": n, "read": False} for i, n in enumerate(names)], set(), login_lapsed=False)
    back = Coverage.from_stats(found.as_stats())
    assert back is not None and back.unread_count == 25 and len(back.unread) == 10
    assert back.line() == found.line() == "公众号覆盖 0/25（0%）：25 个未能读取（号00、号01、号02 等）"


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
    assert report["status"] == 3 and "WeChat login lapsed" in report["error"]
    [daily] = [m for m in fakes.sink.received if m["title"].startswith("【日报】")]
    assert "公众号覆盖 0/2（0%）：WeRSS 的微信登录已过期，采集已停止" in daily["message"]


def test_a_day_werss_was_down_counts_the_accounts_of_the_days_before_as_not_covered(fakes):
    fakes.werss.accounts = ACCOUNTS[:2]
    _slot(fakes, shanghai(2026, 1, 7, 22))
    fakes.werss.down = True
    _slot(fakes, shanghai(2026, 1, 8, 22))
    with db.connect() as conn:
        stats = conn.execute("SELECT stats FROM daily_report WHERE report_date = %s", (DAY,)).fetchone()["stats"]
    assert (stats["coverage"]["active"], stats["coverage"]["covered"], stats["coverage"]["listed"]) == (2, 0, False)
