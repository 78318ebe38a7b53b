"""The radar against a real WeRSS (we-mp-rss 1.4.9's own backend, tests/werss_real.py), its state made by its
own code, not our stand-in's: a login read from a scan as WeRSS stores it (``set_token``), a task created
through its API and applied, collections it runs itself, articles its collection callback stores. Read by
``check``, by the ingest's watcher (the overview's and the alert's state) and by the ingest's list and detail
calls. Skipped with the reason where no source is named (``RADAR_WERSS_SOURCE``; `.ci/run` names it).

Rooms: collect/werss.py (the client, ``wechat_login``, ``judged``), collect/watch.py, check/werss.py,
check/task_runs.py, web/views/health.py; the docs' WeRSS keys against its config.example.yaml.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from include.radar import store
from include.radar.check import Options
from include.radar.check.schedule import task_of
from include.radar.check.task_runs import SEEN_KEY
from include.radar.check.werss import werss_lines
from include.radar.collect import coverage, ingest, watch
from include.radar.collect.listing import window_metas
from include.radar.collect.werss import WERSS_TZ
from include.radar.core.clock import SYSTEM
from include.radar.core.settings import load_settings
from include.radar.core.slots import slot_for
from include.radar.operations import connections
from include.radar.web.views.health import wechat_login_view
from tests import werss_real
from tests.conftest import connect

REPO = Path(__file__).resolve().parents[1]
BODY = "<p>" + "国产刻蚀设备订单同比增长，龙头公司扩产。" * 30 + "</p>"


@pytest.fixture(scope="module")
def werss(tmp_path_factory) -> Any:
    """A WeRSS never scanned."""
    server = werss_real.start(tmp_path_factory.mktemp("werss"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def scanned(tmp_path_factory) -> Any:
    """A WeRSS scanned, as its QR callback stores a scan (set_token writes data/wx.lic's token_data)."""
    server = werss_real.start(tmp_path_factory.mktemp("werss-scanned"))
    server.own("from driver.token import set_token; set_token({'token': '1234567890', 'cookies_str': 'slave_sid=S', "
               "'fingerprint': 'fp', 'expiry': {'expiry_time': '2030-01-01 00:00:00'}})")
    yield server
    server.stop()


def _settings(server: Any, monkeypatch: Any) -> Any:
    monkeypatch.setenv("AIRFLOW_CONN_WERSS_DEFAULT", server.connection)
    return load_settings(use_airflow=False)


class Watching:
    """What the ingest's watcher needs of its step: the settings, the database, and the alerts it raises."""

    clock = SYSTEM

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.alerts: list[tuple[str, str]] = []

    def connect(self) -> Any:
        return connect()

    def alert(self, cause: str, detail: str, slot: Any = None, *, day_of: Any = None) -> str:
        self.alerts.append((cause, detail))
        return "sent"


def _check(settings: Any) -> list[str]:
    return [line.render() for line in werss_lines(settings, Options(timeout=10), connect)]


def _one(lines: list[str], start: str) -> str:
    found = [x for x in lines if x.startswith(start)]
    assert len(found) == 1, (start, lines)
    return found[0]


def _ingest(settings: Any) -> tuple[Watching, dict[str, Any], ingest.IngestSummary]:
    """A slot's ingest as the step runs it (the list, the details, WeRSS's records of its collections), then
    its login watcher: what the alert and the overview read."""
    client = connections.werss_client(settings, timeout=10, max_retries=0)
    key = slot_for(datetime.now(UTC), settings.schedule_slots)
    with connect() as conn:
        slot = store.slot_runs.open_slot_run(conn, key, run_type="manual", dag_id=None, dag_run_id=None)
    summary = ingest.ingest_slot(connect, client, ingest.SlotIngest(slot["id"], key, window_days=3, max_articles=50,
                                                                      page_size=5))
    step = Watching(settings)
    watch.wechat_login(step, {"slot_run_id": slot["id"]}, client)
    with connect() as conn:
        return step, store.operations.status(conn, coverage.WECHAT_STATUS), summary


def _store_article(werss: Any, mp_id: str, aid: str, title: str, published: int) -> None:
    """What a collection's callback stores (jobs/article.py UpdateArticle → core.db.DB.add_article)."""
    werss.own(f"from jobs.article import UpdateArticle; UpdateArticle({{'id': {aid!r}, 'mp_id': {mp_id!r}, "
              f"'title': {title!r}, 'url': 'https://mp.weixin.qq.com/s/{aid}', 'pic_url': '', "
              f"'publish_time': {published}, 'content': {BODY!r}, 'description': '订单'}})")


def test_a_werss_never_scanned_reads_as_never_scanned(werss, db_url, monkeypatch) -> None:
    """A fresh 1.4.9 answers sys/info as it does after a scan and a restart (an empty token, login true): the
    proof is that its first collection of a new account started nowhere (WeRSS starts one only with a token)."""
    radar = _settings(werss, monkeypatch)
    mp_id = werss.subscribe("3000000001", "从未扫码号")
    werss.api("GET", f"/mps/update/{mp_id}", params={"start_page": 0, "end_page": 1})  # a collection, tokenless
    assert werss.api("GET", "/sys/info")["wx"] == {"token": "", "expiry_time": "", "info": None, "login": True}
    lines = _check(radar)
    assert _one(lines, "✗ WeRSS · 微信登录").startswith("✗ WeRSS · 微信登录: WeRSS 还没有扫码登录微信：没有一个公众号被采集过")
    step, state, _ = _ingest(radar)
    assert state["scanned"] is False and [c for c, _ in step.alerts] == ["wechat_not_scanned"]
    view = wechat_login_view(state, now=datetime.now(UTC), tz=WERSS_TZ, warn_hours=24)
    assert view.state == "unscanned" and "还没有扫码" in view.text
    assert werss.sync_time(mp_id) == 0


def test_a_scan_as_werss_stores_it_reads_as_scanned(scanned, db_url, monkeypatch) -> None:
    """set_token (what WeRSS's QR callback calls) writes data/wx.lic's token_data; sys/info still shows no token,
    but WeRSS's next collection starts with it: check, the watcher and the overview read a login."""
    werss, radar = scanned, _settings(scanned, monkeypatch)
    assert werss.api("GET", "/sys/info")["wx"]["token"] == ""  # what 1.4.9 shows after a scan
    mp_id = werss.subscribe("3000000002", "扫码后订阅号")  # its first collection, now with the token
    werss.wait_for_sync(mp_id)
    line = _one(_check(radar), "! WeRSS · 微信登录")
    assert line.startswith("! WeRSS · 微信登录: 已登录（") and "的采集用着它），但 WeRSS 没有给出到期时间" in line
    step, state, _ = _ingest(radar)
    assert state["scanned"] is True and step.alerts == []
    view = wechat_login_view(state, now=datetime.now(UTC), tz=WERSS_TZ, warn_hours=24)
    assert view.state == "ok" and view.text == "微信已登录（WeRSS 未给出到期时间）"
    assert "1234567890" not in repr(state) and "slave_sid" not in repr(state)


def test_a_task_is_no_tick_until_werss_ran_it_after_it_was_applied_and_stored_what_it_collected(
        scanned, db_url, monkeypatch) -> None:
    """A task saved through the API and never 「应用」'd, then applied and run by WeRSS itself: ✓ only once a run
    after the check knew the task started and stored an article."""
    werss, radar = scanned, _settings(scanned, monkeypatch)
    mp_id = werss.subscribe("3000000003", "任务号")
    werss.wait_for_sync(mp_id)  # its first collection on subscribing
    ran = datetime.now(WERSS_TZ) - timedelta(minutes=15)  # a daily cron 15 minutes ago: its time has passed
    task = werss.api("POST", "/message_tasks", json={
        "name": "雷达采集", "message_type": 0, "message_template": "", "web_hook_url": "", "mps_id": "[]",
        "cron_exp": f"{ran.minute} {ran.hour} * * *", "status": 1})
    lines = _check(radar)  # saved, not applied
    assert not [x for x in lines if x.startswith(("✓ WeRSS · 采集任务", "✓ WeRSS · 任务运行"))], lines
    with connect() as conn:  # an earlier check knew the task before its time
        store.state.set_state(conn, SEEN_KEY, {task_of(task).form: (ran - timedelta(hours=1)).isoformat()}, None)
    werss.api("PUT", "/message_tasks/job/fresh")  # 「应用」
    before = werss.sync_time(mp_id)
    werss.api("GET", f"/message_tasks/{task['id']}/run")  # WeRSS runs it; its requests to WeChat fail here
    werss.wait_for_sync(mp_id, after=before)
    assert "但没有存下新文章" in _one(_check(radar), "! WeRSS · 任务运行")  # started, collected nothing
    _store_article(werss, mp_id, "2247483001", "刻蚀订单", int(datetime.now(UTC).timestamp()) - 600)
    lines = _check(radar)
    assert "已运行并存下新文章" in _one(lines, "✓ WeRSS · 任务运行")
    assert "还没有看到它" not in _one(lines, "! WeRSS · 采集任务")  # a daily cron: only its timing


def test_the_ingest_reads_werss_s_own_list_and_detail(scanned, conn, monkeypatch) -> None:
    """The article list and detail as 1.4.9 serves them (an article stored by its collection callback), read by
    the ingest's own calls into the radar's store."""
    werss, radar = scanned, _settings(scanned, monkeypatch)
    account = {"id": werss.subscribe("3000000004", "正文号")}
    published = int((slot_for(datetime.now(UTC), radar.schedule_slots).scheduled_at - timedelta(hours=1)).timestamp())
    _store_article(werss, account["id"], "2247483002", "设备扩产", published)
    client = connections.werss_client(radar, timeout=10, max_retries=0)
    now = datetime.now(UTC)
    window = window_metas(client, account["id"], now - timedelta(hours=72), now, 5, now=now)
    assert [(m.title, m.publish_time) for m in window.metas] == [("设备扩产", published)] and not window.skipped
    cleaned, verdict = ingest.read_body(client.article(window.metas[0].id))
    assert cleaned is not None and "国产刻蚀设备订单同比增长" in cleaned.text, verdict
    _, _, summary = _ingest(radar)
    assert summary.new >= 1 and summary.skipped == 0
    stored = conn.execute("SELECT title, body_status FROM content_item WHERE title = '设备扩产'").fetchall()
    assert [(r["title"], r["body_status"]) for r in stored] == [("设备扩产", 1)]


def _keys(tree: dict[str, Any], prefix: str = "") -> set[str]:
    found = set()
    for key, value in tree.items():
        found.add(prefix + str(key))
        if isinstance(value, dict):
            found |= _keys(value, f"{prefix}{key}.")
    return found


def test_no_page_names_a_werss_key_that_werss_does_not_have(werss) -> None:
    """Every ``gather.…`` key the docs, the compose file and the check's advice name, and every ``server.…`` key
    beside WeRSS's name, is in WeRSS's own config.example.yaml (``server.py`` and the like are files)."""
    text = (werss.tree / "config.example.yaml").read_text(encoding="utf-8")
    keys = _keys(yaml.safe_load(re.sub(r"\$\{[^}]*\}", "x", text)))
    named: dict[str, set[str]] = {}
    pages = [*REPO.glob("docs/*.md"), REPO / "README.md", REPO / "README.en.md", REPO / "docker-compose.werss.yaml",
             *REPO.glob("include/radar/check/*.py"), *REPO.glob("deploy/**/*")]
    for page in (p for p in pages if p.is_file()):
        for key in re.findall(r"\b((?:gather|server)\.[a-z_]+)\b(?!\.)", page.read_text(errors="replace")):
            if key.rsplit(".", 1)[1] not in ("py", "service", "serve_forever"):
                named.setdefault(key, set()).add(page.name)
    assert "gather.content_auto_check" in named and "server.enable_job" in named
    assert {k: v for k, v in named.items() if k not in keys} == {}
