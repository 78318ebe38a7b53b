"""What a pushed link and the read session it opens may do, and for how long: a link votes on the page it
names only, the session it opens votes on nothing, and a link opens sessions during its first day only.

Rooms: web/auth.py (the read session), web/runtime.py (the vote forms), web/routes/reports.py.
"""

from __future__ import annotations

import re
from datetime import timedelta

from fastapi.testclient import TestClient

from include.radar import store
from include.radar.web.auth import READ_COOKIE
from tests.pages import DAY, NOW, Seeder, commit, make_settings, signed
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
    assert store.feedback_of(conn, [ids["mine"], ids["other"]]) == {}


def test_a_link_opens_read_sessions_during_its_first_day_only(seed: Seeder, db_url) -> None:
    """Each visit of a valid link used to open a fresh 30-minute session: a forwarded link was seven days of
    read access to every page. Now the session it opens ends a day after the link was sent, whatever the
    visits; the link's own page still opens for the link's whole life."""
    _two_days(seed)
    clock = [NOW]
    client = TestClient(_app(db_url, clock=clock))
    link = signed(f"/daily/{DAY.isoformat()}", now=NOW)
    assert "Max-Age=1800;" in client.get(link).headers["set-cookie"]
    clock[0] = NOW + timedelta(hours=23, minutes=50)  # ten minutes of the first day left
    near_end = client.get(link)
    assert "Max-Age=600;" in near_end.headers["set-cookie"] and "10 分钟内可继续浏览" in near_end.text
    clock[0] = NOW + timedelta(days=2)
    fresh = TestClient(_app(db_url, clock=clock))
    later = fresh.get(link)
    assert later.status_code == 200  # the page the link names
    assert READ_COOKIE not in later.headers.get("set-cookie", "") and "分钟内可继续浏览" not in later.text
    assert fresh.get("/").status_code == 401 and fresh.get(f"/daily/{(DAY - timedelta(days=1))}").status_code == 401
    # a link signed under a shorter remember_me_days opens its session on its first day all the same
    short = TestClient(_app(db_url, settings=make_settings(remember_me_days=2), clock=[NOW]))
    assert "Max-Age=1800;" in short.get(signed(f"/daily/{DAY.isoformat()}", days=2)).headers["set-cookie"]
