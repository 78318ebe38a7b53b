"""What a pushed link and the read session it opens may do, and for how long: a link votes on the page it
names only, the session it opens votes on nothing, and a link opens sessions during its first day only.

Rooms: web/auth.py (the read session), web/feedback.py (the vote forms), web/routes/reports.py.
"""

from __future__ import annotations

import re
from datetime import timedelta

from fastapi.testclient import TestClient

from include.radar import store
from include.radar.core.clock import FixedClock
from include.radar.web.auth import READ_COOKIE
from tests.pages import DAY, NOW, FakeUser, Seeder, allow_reading, commit, make_settings, signed
from tests.test_trust_web import _app

FORM = 'class="fb-form"'


def _tokens(html: str, analysis_id: int) -> dict[str, str]:
    """The signed fields (exp, tok) of the first vote form aimed at ``analysis_id`` on a page."""
    form = re.search(rf'action="/analysis/{analysis_id}/feedback" class="fb-form">(.*?)</form>', html, re.S)
    assert form is not None
    fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', form.group(1)))
    return {"exp": fields["exp"], "tok": fields["tok"]}


def _two_days(seed: Seeder) -> dict[str, int]:
    today = seed.slot(DAY, "07:00", new=1)
    mine = seed.article(today, "储能集采放量", 81, account="储能前沿")
    seed.close(today)
    before = seed.slot(DAY - timedelta(days=1), "07:00", new=1)
    other = seed.article(before, "券商成交放大", 70, account="券商研究")
    seed.close(before)
    commit(seed)
    return {"mine": mine, "other": other}


def test_a_read_session_shows_no_vote_forms_and_casts_no_vote(seed: Seeder, db_url, conn) -> None:
    """A forwarded push used to let its holder walk every analysis of every day with the cookie alone and
    find 👍 / 👎 / 🤷 forms with valid tokens on each: the reader's feedback was anyone's to rewrite."""
    ids = _two_days(seed)
    client = TestClient(_app(db_url))  # no Airflow user: the link is the only way in
    daily = client.get(signed(f"/daily/{DAY.isoformat()}"))
    assert daily.status_code == 200 and FORM in daily.text  # the link's own page and its analyses vote
    assert READ_COOKIE in client.cookies
    for path in (f"/analysis/{ids['other']}", f"/analysis/{ids['mine']}", f"/daily/{(DAY - timedelta(days=1))}",
                 f"/daily/{DAY.isoformat()}"):
        page = client.get(path)  # the cookie alone
        assert page.status_code == 200, path
        assert FORM not in page.text and 'name="tok"' not in page.text, path
    assert "浏览中只能查看" in client.get(f"/analysis/{ids['other']}").text
    # a link to one analysis votes on that analysis
    own = client.get(signed(f"/analysis/{ids['mine']}"))
    assert FORM in own.text and re.search(rf'action="/analysis/{ids["mine"]}/feedback"', own.text)
    # and a vote posted with the cookie alone, or with the token of the link's own analysis, is refused
    for data in ({"verdict": "down"}, {"verdict": "down", **_tokens(own.text, ids["mine"])}):
        refused = client.post(f"/analysis/{ids['other']}/feedback", data=data, follow_redirects=False)
        assert refused.status_code == 403, data
    assert store.focus.feedback_of(conn, [ids["mine"], ids["other"]]) == {}


def test_a_link_opens_read_sessions_during_its_first_day_only(seed: Seeder, db_url) -> None:
    """Each visit of a valid link used to open a fresh 30-minute session: a forwarded link was seven days of
    read access to every page. Now the session it opens ends a day after the link was sent, whatever the
    visits; the link's own page still opens for the link's whole life."""
    _two_days(seed)
    clock = FixedClock(NOW)
    client = TestClient(_app(db_url, clock=clock))
    link = signed(f"/daily/{DAY.isoformat()}", now=NOW)
    assert "Max-Age=1800;" in client.get(link).headers["set-cookie"]
    clock.at = NOW + timedelta(hours=23, minutes=50)  # ten minutes of the first day left
    near_end = client.get(link)
    assert "Max-Age=600;" in near_end.headers["set-cookie"] and "10 分钟内可继续浏览" in near_end.text
    clock.at = NOW + timedelta(days=2)
    fresh = TestClient(_app(db_url, clock=clock))
    later = fresh.get(link)
    assert later.status_code == 200  # the page the link names
    assert READ_COOKIE not in later.headers.get("set-cookie", "") and "分钟内可继续浏览" not in later.text
    assert fresh.get("/").status_code == 401 and fresh.get(f"/daily/{(DAY - timedelta(days=1))}").status_code == 401
    # a link signed under a shorter remember_me_days opens its session on its first day all the same
    short = TestClient(_app(db_url, settings=make_settings(remember_me_days=2), clock=FixedClock(NOW)))
    assert "Max-Age=1800;" in short.get(signed(f"/daily/{DAY.isoformat()}", days=2)).headers["set-cookie"]


# ------------------------------------------------------------------- what a link's pages show of the operator

RULE = "!/K[ab]*a[ab]{150}c/"
PRIVATE = {  # what the seed below writes where the pages could show it, and what each reveals
    "rule": RULE,
    "alert detail": "读者的正则规则太慢，已停用",
    "delivery (a channel kind, a host)": "wecom://ops.corp.internal",
    "alert action": "在关注设置中删去或简化",
    "check line (a database user)": "radar_pages_login",
    "service error (a host)": "werss.corp.internal",
    "database tables": "content_item",
    "slot error (a host)": "db-primary.internal",
    "push channel (a kind, a host)": "bark://push.corp.internal",
    "account error (a host)": "werss-backend.internal",
    "spend": "$0.4321",
    "budget": "今日预算已用尽",
}


def _operator_lines(seed: Seeder) -> int:
    """A day whose health panel, slot cards, pushes and accounts carry every kind of private line; the id of
    its one analysis."""
    conn = seed.conn
    noon = seed.slot(DAY, "12:00", new=1, error="ConnectError: db-primary.internal:5432 refused")
    analysis = seed.article(noon, "储能集采放量", 81)
    seed.close(noon)
    seed.push(DAY, channel="bark://push.corp.internal", error="bark://push.corp.internal: HTTP 500")
    slow = store.operations.record_alert(conn, day=DAY, cause="rules_slow", title="读者的正则规则太慢",
                              detail=f"读者的正则规则太慢，已停用：{RULE}（49 毫秒/篇）", slot_run_id=noon["id"],
                              dag_run_id=noon["dag_run_id"])
    store.operations.finish_alert(conn, slow["id"], "wecom://ops.corp.internal: HTTP 502", delivered=False)
    store.operations.update_status(conn, "check:last", lambda s: {
        "at": NOW.isoformat(), "ok": 20, "warnings": 0, "failures": 1,
        "failing": ["✗ radar database: role radar_pages_login cannot read track_pick"]})
    store.operations.update_status(conn, "werss:status", lambda s: {
        "last_status": "failed", "last_ingest_at": NOW.isoformat(),
        "last_errors": ["HTTP 502 from http://werss.corp.internal:8001/api"]})
    store.operations.update_status(conn, "retention:status", lambda s: {
        "at": NOW.isoformat(), "database_bytes": 2**30, "tables": {"content_item": 2**29}, "articles": 10})
    account = seed.account("储能前沿")
    conn.execute("UPDATE wechat_account SET last_error = %s WHERE id = %s",
                 ("ConnectError: werss-backend.internal refused", account))
    store.operations.record_spend(conn, {
        "spent_on": DAY, "purpose": "analysis", "content_item_id": None, "attempt_id": None,
        "slot_run_id": noon["id"], "model": "deepseek-v4-pro", "calls": 1, "answered": 1, "peak_calls": 0,
        "rate_limited": 0, "prompt_tokens": 1000, "cache_hit_tokens": 0, "cache_miss_tokens": 1000,
        "completion_tokens": 100, "reasoning_tokens": 0, "cost": 0.4321, "currency": "USD"})
    commit(seed)
    return analysis


def test_a_read_session_s_overview_shows_no_operator_line_no_rule_and_no_spend(seed: Seeder, db_url) -> None:
    """The health panel was built for every reader: a forwarded link showed the reader's regex rule (in the
    rules_slow alert), host names, the database's user, channel kinds and the day's spend. Through the link's
    read session the overview shows states and counts only; an Airflow login sees every line."""
    analysis = _operator_lines(seed)
    settings = make_settings(daily_budget=0.1)
    owner = TestClient(_app(db_url, user=FakeUser(), settings=settings))
    allow_reading(owner.app)
    full = owner.get("/").text
    for what, text in PRIVATE.items():  # the seed put each where the pages show it
        assert text in full, what
    assert "<dt>成本</dt>" in owner.get(f"/analysis/{analysis}").text

    reader = TestClient(_app(db_url, settings=settings))
    assert reader.get(signed(f"/daily/{DAY.isoformat()}")).status_code == 200
    assert READ_COOKIE in reader.cookies
    overview = reader.get("/")
    assert overview.status_code == 200 and "通过推送链接浏览" in overview.text
    for what, text in PRIVATE.items():
        assert text not in overview.text, what
    # what the panel still says: states, counts and titles, and that the rest needs a login
    assert "读者的正则规则太慢" in overview.text and "告警详情与处理办法：登录 Airflow 后可见" in overview.text
    assert "✗ 1" in overview.text and "未通过的检查项：登录 Airflow 后可见" in overview.text
    assert "本时段出错（详情登录 Airflow 后可见）" in overview.text
    # the other pages the session reaches show no spend, channel or error line either
    for path in (f"/daily/{DAY.isoformat()}", signed(f"/daily/{DAY.isoformat()}")):
        daily = reader.get(path).text
        for what in ("spend", "push channel (a kind, a host)", "slot error (a host)"):
            assert PRIVATE[what] not in daily, (path, what)
    assert "<dt>成本</dt>" not in reader.get(f"/analysis/{analysis}").text
