"""The reader's Atom feed: made from the profile page, valid Atom 1.0 as a feed reader parses it (feedparser),
one entry per pushed event with a stable id, conditional GET, hostile text escaped, a revoked token refused.

Rooms: web/routes/feed.py, web/views/feed.py, store/feeds.py, the profile page's feed form.
"""

from __future__ import annotations

import re
from datetime import timedelta
from email.utils import format_datetime
from typing import Any
from urllib.parse import urlsplit

import feedparser
import pytest
from fastapi.testclient import TestClient
from psycopg.types.json import Jsonb

from include.radar import store
from include.radar.core.clock import FixedClock
from include.radar.web.admission import Admission
from include.radar.web.app import create_app
from include.radar.web.views.feed import ID_PREFIX, MAX_ENTRIES, xml_text
from tests.pages import DAY, NOW, OPPORTUNITY, Seeder, commit, make_settings
from tests.test_push_forms import HOSTILE

pytestmark = pytest.mark.hostile
QUOTE = "四季度集采招标量同比翻倍，中标规模同比增长120%"


def _opportunity(hostile: str = "") -> dict[str, Any]:
    return {**OPPORTUNITY, "targets": ["宁德时代（300750.SZ）", "腾讯控股(0700.HK)", *([hostile] if hostile else [])]}


def _analysis(seed: Seeder, slot: dict, title: str, score: int, *, account: str = "储能前沿", quote: str = QUOTE,
              summary: str = "储能集采放量，龙头受益。") -> int:
    analysis_id = seed.article(slot, title, score, account=account, summary=summary,
                               opportunities=[_opportunity(title if "<" in title else "")])
    checks = {"checks": {"verified": 1, "quotes": [{"quote": quote, "opportunity": 0, "verified": True}]}}
    seed.conn.execute(
        "UPDATE analysis_result SET evidence_verified = true, result_json = result_json || %s WHERE id = %s",
        (Jsonb(checks), analysis_id))
    store.events.set_events(seed.conn, [(analysis_id, analysis_id, None)])
    return analysis_id


def _pushed(seed: Seeder, slot: dict, shown: list[int], *, channels: tuple[str, ...] = ("json://one",)) -> None:
    """An opportunity push of ``slot`` that reached its channels (the log as push.deliver writes it)."""
    for channel in channels:
        uuid = f"opp-{slot['id']}-{channel}"
        store.pushes.claim_notification(seed.conn, {
            "msg_uuid": uuid, "report_date": slot["run_date"], "slot": slot["slot"], "push_type": "opportunity",
            "target_url": f"https://radar.example.com/radar/analysis/{shown[0]}", "channel": channel,
            "slot_run_id": slot["id"], "title": "【机会提醒】", "channel_key": channel, "body": "…",
            "shown_ids": shown})
        store.pushes.finish_notification(seed.conn, uuid, None)


@pytest.fixture
def pushed_day(seed: Seeder) -> dict[str, int]:
    morning = seed.slot(DAY, "07:00", new=3)
    top = _analysis(seed, morning, "宁德时代储能订单放量", 86)
    second = _analysis(seed, morning, "券商成交放大", 72, account="券商研究", quote="两市成交额连续三日破万亿")
    seed.close(morning)
    _pushed(seed, morning, [top, second], channels=("json://one", "json://two"))
    seed.report(DAY, stats={"analysed": 3, "opportunities": 2, "failed": 0, "max_score": 86})
    seed.push(DAY)
    commit(seed)
    return {"top": top, "second": second, "slot": morning["id"]}


def _reader(db_url: str, **settings: Any) -> TestClient:
    """An Airflow user's browser: the profile page and its feed form."""
    from tests.pages import FakeUser, airflow_get_user, allow_reading

    app = create_app(lambda: make_settings(**settings), db_url, clock=FixedClock(NOW))
    app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
    allow_reading(app)
    return TestClient(app)


def _anyone(db_url: str, admission: Admission | None = None) -> TestClient:
    """A feed reader: no Airflow login, no cookie, only the feed's URL."""
    return TestClient(create_app(lambda: make_settings(), db_url, clock=FixedClock(NOW), admission=admission))


def _feed_form(page: str) -> dict[str, str]:
    form = re.search(r'<form method="post" action="([^"]+)" class="feed-form">(.*?)</form>', page, re.S)
    assert form is not None, "the profile page offers the feed form"
    return {"_action": form[1], **dict(re.findall(r'name="(csrf)" value="([^"]*)"', form[2]))}


def _feed_path(client: TestClient, action: str = "rotate") -> str:
    """Make (or rotate, or revoke) the reader's token through the profile page; the feed URL it then shows,
    as a path of the app."""
    form = _feed_form(client.get("/profile").text)
    done = client.post(form["_action"], data={"csrf": form["csrf"].replace("&amp;", "&"), "action": action},
                       follow_redirects=False)
    assert done.status_code == 303
    page = client.get(done.headers["location"]).text
    urls = re.findall(r'<code class="feed-url">([^<]+)</code>', page)
    if not urls:
        return ""
    url = urls[0].replace("&amp;", "&")
    assert url.startswith("https://radar.example.com/radar/feed.atom?feed=")
    parts = urlsplit(url)
    return parts.path.removeprefix("/radar") + "?" + parts.query


def _parsed(response: Any) -> Any:
    assert response.status_code == 200, response.text[:300]
    assert response.headers["content-type"] == "application/atom+xml; charset=utf-8"
    parsed = feedparser.parse(response.content)
    assert parsed.bozo == 0, parsed.get("bozo_exception")
    assert parsed.version == "atom10"
    return parsed


def test_the_feed_is_atom_1_0_with_an_entry_per_pushed_event_saying_what_the_push_said(pushed_day, db_url) -> None:
    path = _feed_path(_reader(db_url))
    feed = _parsed(_anyone(db_url).get(path))
    ids = [e.id for e in feed.entries]
    # one entry per event however many channels the push reached, and the day's report; newest push first
    assert sorted(ids) == sorted([f"{ID_PREFIX}event/{pushed_day['top']}", f"{ID_PREFIX}event/{pushed_day['second']}",
                                  f"{ID_PREFIX}daily/{DAY.isoformat()}"])
    top = next(e for e in feed.entries if e.id.endswith(f"event/{pushed_day['top']}"))
    text = top.content[0].value
    assert top.content[0].type == "text/plain"
    assert "86 分｜看多｜行业" in text  # the score, the direction, the type
    assert "标的：宁德时代 300750、腾讯控股 00700" in text  # the targets with their codes
    assert f"证据：「{QUOTE}」" in text and "储能前沿" in text  # the verified quote, the account
    assert top.author == "储能前沿" and top.title.startswith("储能集采放量")
    assert top.published_parsed and top.updated_parsed
    daily = next(e for e in feed.entries if "daily/" in e.id)
    assert daily.title.startswith("【日报】2026-01-08") and "分析 3 篇，机会 2 条" in daily.content[0].value
    # each link is the page's, signed: it opens without a login
    link = urlsplit(top.link)
    assert link.path == f"/radar/analysis/{pushed_day['top']}" and "sig=" in link.query
    assert _anyone(db_url).get(f"{link.path.removeprefix('/radar')}?{link.query}").status_code == 200
    assert feed.feed.title == "机会雷达" and any(lk.rel == "self" for lk in feed.feed.links)


def test_entry_ids_are_stable_and_updated_moves_when_the_event_gains_an_analysis(pushed_day, db_url, seed) -> None:
    path = _feed_path(_reader(db_url))
    client = _anyone(db_url)
    first = client.get(path)
    again = client.get(path)
    assert again.content == first.content  # nothing pushed since: the same bytes, the same ETag
    before = {e.id: e.updated for e in _parsed(first).entries}
    later = seed.slot(DAY, "12:00", new=1)
    rewrite = _analysis(seed, later, "宁德时代储能订单：又一家报道", 70, account="电池观察")
    store.events.set_events(seed.conn, [(rewrite, pushed_day["top"], "同一事件")])
    seed.close(later)
    commit(seed)
    after = {e.id: e for e in _parsed(client.get(path)).entries}
    assert set(after) == set(before)  # the rewrite joined the pushed event: no new entry, the same id
    top = f"{ID_PREFIX}event/{pushed_day['top']}"
    assert after[top].updated != before[top] and "电池观察" in after[top].content[0].value
    assert after[f"{ID_PREFIX}event/{pushed_day['second']}"].updated == before[f"{ID_PREFIX}event/{pushed_day['second']}"]


def test_a_current_copy_is_answered_304_by_etag_or_last_modified(pushed_day, db_url) -> None:
    path = _feed_path(_reader(db_url))
    client = _anyone(db_url)
    full = client.get(path)
    etag, modified = full.headers["etag"], full.headers["last-modified"]
    assert client.get(path, headers={"If-None-Match": etag}).status_code == 304
    assert client.get(path, headers={"If-None-Match": f'W/{etag}, "other"'}).status_code == 304
    assert client.get(path, headers={"If-None-Match": '"other"'}).status_code == 200
    assert client.get(path, headers={"If-Modified-Since": modified}).status_code == 304
    older = format_datetime(NOW - timedelta(days=30), usegmt=True)
    assert client.get(path, headers={"If-Modified-Since": older}).status_code == 200
    assert client.get(path, headers={"If-Modified-Since": "not a date"}).status_code == 200
    head = client.head(path)
    assert head.status_code == 200 and head.content == b"" and head.headers["etag"] == etag


def test_a_revoked_or_rotated_token_is_refused_401_and_a_forged_one_never_reaches_the_database(pushed_day, db_url) -> None:
    reader = _reader(db_url)
    old = _feed_path(reader)
    client = _anyone(db_url)
    assert client.get(old).status_code == 200
    new = _feed_path(reader, "rotate")
    assert new != old and client.get(old).status_code == 401 and client.get(new).status_code == 200
    assert _feed_path(reader, "revoke") == ""  # the profile shows no URL any more
    assert client.get(new).status_code == 401
    key = re.search(r"feed=([0-9a-f]+)", new)[1]
    for query in ("", f"feed={key}", f"feed={key}&sig={'0' * 64}", f"feed={key}&sig=zz", f"feed={key}&feed={key}",
                  "feed=%00&sig=%ff", "sig=" + "a" * 5000, f"feed={key.upper()}&sig={'a' * 64}"):
        answer = client.get(f"/feed.atom?{query}")
        assert answer.status_code == 401, query
        assert "订阅链接无效或已停用" in answer.text
    # a link's session or signature is no feed token
    assert _reader(db_url).get("/feed.atom").status_code == 401  # nor is an Airflow login


def test_the_feed_form_is_an_airflow_users_and_the_feed_needs_a_link_secret(pushed_day, db_url, conn) -> None:
    reader = _reader(db_url)
    form = _feed_form(reader.get("/profile").text)
    assert reader.post(form["_action"], data={"csrf": "forged", "action": "rotate"},
                       follow_redirects=False).status_code == 403
    assert _anyone(db_url).post("/profile/feed", data={"action": "rotate"}, follow_redirects=False).status_code == 401
    assert store.feeds.live_token(conn, "analyst") is None
    path = _feed_path(reader)
    without = TestClient(create_app(lambda: make_settings(link_secret=None), db_url, clock=FixedClock(NOW)))
    answer = without.get(path)
    assert answer.status_code == 401 and "AIRFLOW_VAR_RADAR_LINK_SECRET" in answer.text


def test_hostile_titles_stay_text_in_the_feed(db_url, seed) -> None:
    slot = seed.slot(DAY, "14:00", new=len(HOSTILE))
    ids = [_analysis(seed, slot, hostile, 90 - n, account=hostile[:30], quote=hostile, summary=hostile + "。")
           for n, hostile in enumerate(HOSTILE)]
    seed.close(slot)
    _pushed(seed, slot, ids)
    commit(seed)
    response = _anyone(db_url).get(_feed_path(_reader(db_url)))
    raw = response.content.decode()
    assert "<b>" not in raw and "<a href" not in raw and "<!channel>" not in raw and "javascript:" not in raw
    assert "http://evil" not in raw and "https://evil" not in raw  # defanged as the push is
    feed = _parsed(response)
    assert len(feed.entries) == len(HOSTILE)
    texts = " ".join(e.title + e.content[0].value + e.author for e in feed.entries)
    assert "<b>粗</b>**紧急**" in texts  # what the article said, as text a reader shows verbatim
    assert "hxxp://evil[.]example" in texts and "javascript[:]" in texts
    assert all(urlsplit(e.link).netloc == "radar.example.com" for e in feed.entries)  # the only links: the radar's


def test_what_xml_cannot_hold_is_dropped_never_a_500(db_url, seed) -> None:
    slot = seed.slot(DAY, "14:00", new=1)
    bad = "控制\x01字符\x0b与\ufffe不可见\x1f字"  # PostgreSQL keeps these; XML 1.0 cannot
    _pushed(seed, slot, [_analysis(seed, slot, bad, 88, account="号\x01", quote=bad, summary=bad + "。")])
    commit(seed)
    feed = _parsed(_anyone(db_url).get(_feed_path(_reader(db_url))))
    assert feed.entries[0].title == "控制字符"  # \x0b ends the first line, as in the push
    assert "与不可见" in feed.entries[0].content[0].value
    assert xml_text("孤立\ud800代理\x00") == "孤立代理"  # what a decoded request could hold, too


def test_the_feed_lists_the_last_50_entries(db_url, seed) -> None:
    ids = []
    for n in range(MAX_ENTRIES + 5):
        slot = seed.slot(DAY - timedelta(days=n), "12:00", new=1)
        ids.append(_analysis(seed, slot, f"第{n}条", 80))
        _pushed(seed, slot, ids[-1:])
        seed.conn.execute("UPDATE notification_log SET sent_at = %s WHERE slot_run_id = %s",
                          (NOW - timedelta(days=n), slot["id"]))
    commit(seed)
    feed = _parsed(_anyone(db_url).get(_feed_path(_reader(db_url))))
    assert [e.id for e in feed.entries] == [f"{ID_PREFIX}event/{i}" for i in ids[:MAX_ENTRIES]]  # newest first


def test_the_per_link_bound_holds_the_feed_url(pushed_day, db_url) -> None:
    path = _feed_path(_reader(db_url))
    client = _anyone(db_url, Admission(rate=0.001, burst=2, clock=lambda: 0.0))
    assert [client.get(path).status_code for _ in range(3)] == [200, 200, 429]
