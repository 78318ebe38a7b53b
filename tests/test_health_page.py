"""Health at a glance on the overview, and costs on every page.

Rows are written with the store functions the pipeline uses (tests/test_web.py's Seeder, store.operations.record_spend,
store.operations.record_alert, store.operations.update_status); the budget and the failed-attempt cost come from the real pipeline
(tests/slotrun.py over the fake WeRSS and DeepSeek), read through the pages as a reader sees them.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from include.radar import DAG_ID, store
from include.radar.core.clock import FixedClock
from include.radar.core.settings import Settings
from include.radar.core.slots import SHANGHAI
from include.radar.web import costs
from include.radar.web.app import create_app
from include.radar.web.views import common, health
from include.radar_demo.fakes import completion
from tests.conftest import connect
from tests.pages import DAY, NOW, XSS, XSS_ESCAPED, FakeUser, Seeder, airflow_get_user, allow_reading, make_settings
from tests.slotrun import answer, article, read_page, run_slot, shanghai

# NOW is 2026-01-08 20:30 in Shanghai: 07:00-14:00 are due, 18:00 is overdue, 22:00 is next


@pytest.fixture
def seed(conn: Any) -> Seeder:
    return Seeder(conn)


def page(db_url: str, path: str = "/", *, settings: Settings | None = None, root_path: str = "") -> str:
    cfg = settings or make_settings()
    app = create_app(lambda: cfg, db_url, clock=FixedClock(NOW))
    app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
    allow_reading(app)
    response = TestClient(app, root_path=root_path).get(path)
    assert response.status_code == 200, response.text[:2000]
    return response.text


def health_html(html: str) -> str:
    start = html.index('<section class="card health" id="health">')
    return html[start : html.index("</section>", start)]


def spend(conn: Any, day: date, cost: float, *, slot_run_id: int | None = None, item_id: int | None = None,
          currency: str = "USD") -> None:
    store.operations.record_spend(conn, {
        "spent_on": day, "purpose": "analysis", "content_item_id": item_id, "attempt_id": None,
        "slot_run_id": slot_run_id, "model": "deepseek-v4-pro", "calls": 1, "answered": 1, "peak_calls": 0,
        "rate_limited": 0, "prompt_tokens": 1000, "cache_hit_tokens": 0, "cache_miss_tokens": 1000,
        "completion_tokens": 100, "reasoning_tokens": 0, "cost": cost, "currency": currency,
    })


def times(conn: Any, run: dict[str, Any], start: str, end: str | None) -> None:
    """Pin a slot run's start and finish (Shanghai wall clock on its day)."""
    day = run["run_date"]

    def at(hhmm: str) -> datetime:
        return datetime.combine(day, datetime.strptime(hhmm, "%H:%M").time(), tzinfo=SHANGHAI)

    conn.execute("UPDATE slot_run SET started_at = %s, finished_at = %s WHERE id = %s",
                 (at(start), at(end) if end else None, run["id"]))


def seed_recent_slots(seed: Seeder) -> dict[str, dict[str, Any]]:
    """Six runs over two days, a failed one with two failed steps, a running one, and 18:00 never ran."""
    conn = seed.conn
    old = seed.slot(DAY - timedelta(days=1), "18:00", new=9)
    seed.close(old)
    last_night = seed.slot(DAY - timedelta(days=1), "22:00", new=1)
    seed.article(last_night, "昨晚文章", 40)
    seed.close(last_night)
    morning = seed.slot(DAY, "07:00", new=3)
    seed.article(morning, "早间机会", 81)
    seed.article(morning, "早间资讯", 30)
    seed.close(morning)
    noon = seed.slot(DAY, "12:00", new=2)
    item = seed.failure(noon, "失败的文章", "DeepSeek 500")
    store.slot_runs.record_step(conn, noon["id"], "ingest", "WeRSS 503: service unavailable")
    store.slot_runs.record_step(conn, noon["id"], f"analyse:{item}", "RuntimeError: ladder exhausted")
    seed.close(noon)
    running = seed.slot(DAY, "14:00", new=1)
    conn.execute("UPDATE slot_run SET budget_deferred = 2 WHERE id = %s", (running["id"],))
    times(conn, old, "18:00", "18:04")
    times(conn, last_night, "22:00", "22:07")
    times(conn, morning, "07:00", "07:12")
    times(conn, noon, "12:00", "13:05")
    times(conn, running, "14:00", None)
    spend(conn, DAY, 0.0123, slot_run_id=morning["id"])
    spend(conn, DAY, 0.002, slot_run_id=noon["id"])
    spend(conn, DAY, 0.003, slot_run_id=noon["id"])
    conn.commit()
    return {"old": old, "last_night": last_night, "morning": morning, "noon": noon, "running": running,
            "failed_item": {"id": item}}


RUN_ROW = re.compile(r'<a class="run-when" href="[^"]*/daily/(\d{4}-\d\d-\d\d)#slots">([\d: -]+)</a>\s*'
                     r'<span class="badge state-(\w+)">')


def run_items(section: str) -> dict[str, str]:
    """The health section's slot list: "01-08 07:00" -> its <li>."""
    items = section.split('<li class="run">')[1:]
    return {RUN_ROW.search(i).group(2): i for i in items}


# ---------------------------------------------------------------------------------------------- health


def test_the_overview_opens_with_health_before_the_days_slot_cards(seed: Seeder, db_url: str) -> None:
    seed_recent_slots(seed)
    html = page(db_url)
    opening = html.index('<section class="card health"')
    assert opening < html.index('<div class="tiles">') < html.index("<h2>今日时段</h2>")
    assert opening < html.index('<div class="slot">')
    assert html.index("<h1>") < opening  # only the page's title comes first


def test_the_last_five_slots_across_days_newest_first_with_counts_duration_and_cost(seed: Seeder, db_url: str
                                                                                       ) -> None:
    seed_recent_slots(seed)
    section = health_html(page(db_url))
    listed = RUN_ROW.findall(section)
    assert [(when, state) for _, when, state in listed] == [
        ("01-08 18:00", "late"),  # never ran: the scheduler was silent
        ("01-08 14:00", "running"),
        ("01-08 12:00", "failed"),
        ("01-08 07:00", "done"),
        ("01-07 22:00", "done"),
    ]  # the sixth (01-07 18:00) is left out
    assert listed[-1][0] == "2026-01-07"  # each links to its day's slot cards
    items = run_items(section)
    morning = re.sub(r"\s+", " ", items["01-08 07:00"])
    assert "12 分钟 · $0.0123" in morning
    assert ("新增 <b>3</b> · 分析 <b>2</b> · 失败 <b>0</b> · 预算顺延 <b>0</b>") in morning
    noon = re.sub(r"\s+", " ", items["01-08 12:00"])
    assert "1 小时 5 分 · $0.0050" in noon and '失败 <b class="badnum">1</b>' in noon
    running = re.sub(r"\s+", " ", items["01-08 14:00"])
    assert "已运行 6 小时 30 分" in running and '预算顺延 <b class="warnnum">2</b>' in running
    assert "$0" in running  # a slot without spend costs nothing, shown as such
    assert "7 分钟 · $0" in re.sub(r"\s+", " ", items["01-07 22:00"])
    # the day's slot cards carry each slot's cost too
    html = page(db_url)
    card = html.split('<span class="time">07:00</span>')[1].split('<div class="slot">')[0]
    assert "花费 $0.0123" in card


def test_the_next_scheduled_slot_and_how_long_until_it(seed: Seeder, db_url: str) -> None:
    section = health_html(page(db_url))
    assert "下一时段 <b>22:00</b> · 1 小时 30 分后" in section
    # after the last slot of the day: tomorrow's first, minutes rounded up
    late = datetime(2026, 1, 8, 22, 0, 30, tzinfo=SHANGHAI)
    nxt = health.next_slot(late, ("07:00", "12:00", "22:00"), SHANGHAI)
    assert nxt == health.NextSlot(label="明天 07:00", eta="9 小时后")
    assert health.next_slot(datetime(2026, 1, 8, 6, 59, 30, tzinfo=SHANGHAI), ("07:00",), SHANGHAI).eta == "即将开始"
    assert health.next_slot(datetime(2026, 1, 8, 6, 15, tzinfo=SHANGHAI), ("07:00",), SHANGHAI).eta == "45 分钟后"


def test_a_failed_slot_links_to_its_airflow_run_and_its_failed_tasks_logs(seed: Seeder, db_url: str) -> None:
    runs = seed_recent_slots(seed)
    run_id = runs["noon"]["dag_run_id"]
    assert ":" in run_id and "+" in run_id
    encoded = quote(run_id, safe="")
    html = page(db_url, root_path="/airflow/radar")  # the app mounted under an Airflow behind a path prefix
    noon = run_items(health_html(html))["01-08 12:00"]
    run_url = f"/airflow/dags/opportunity_radar/runs/{encoded}"
    assert f'href="{run_url}" target="_top">Airflow 运行 ↗' in noon
    assert f'href="{run_url}/tasks/ingest" target="_top">ingest ↗' in noon
    # a mapped analysis: the analyse task's page (the map index is not known), labelled with the step
    item = runs["failed_item"]["id"]
    assert f'href="{run_url}/tasks/analyse" target="_top">analyse:{item} ↗' in noon
    # the same links on the day's slot card
    card = html.split('<span class="time">12:00</span>')[1].split('<div class="slot">')[0]
    assert f'{run_url}/tasks/ingest"' in card and f'{run_url}/tasks/analyse"' in card
    # a slot that did fine links to no task log
    assert "/tasks/" not in run_items(health_html(html))["01-08 07:00"]


def test_a_slot_that_should_have_run_and_did_not_links_to_the_dag(seed: Seeder, db_url: str) -> None:
    seed_recent_slots(seed)
    html = page(db_url, root_path="/airflow/radar")
    missed = run_items(health_html(html))["01-08 18:00"]
    assert f'href="/airflow/dags/{DAG_ID}" target="_top"' in missed and "应运行而没有运行记录" in missed
    card = html.split('<span class="time">18:00</span>')[1].split('<div class="slot">')[0]
    assert f'href="/airflow/dags/{DAG_ID}"' in card
    # the still-pending 22:00 slot links nowhere
    pending = html.split('<span class="time">22:00</span>')[1].split("</div>\n</div>")[0]
    assert "/dags/" not in pending
    assert "项需关注" in health_html(html) and "01-08 18:00 超时未运行" in health_html(html)


def test_todays_alerts_are_listed_escaped_and_scrubbed_and_yesterdays_are_not(seed: Seeder, db_url: str) -> None:
    conn = seed.conn
    noon = seed.slot(DAY, "12:00")
    budget = store.operations.record_alert(conn, day=DAY, cause="budget", title="今日 LLM 预算已用尽",
                                detail="今日花费 $5.01，其余 3 篇顺延", slot_run_id=noon["id"],
                                dag_run_id=noon["dag_run_id"])
    store.operations.finish_alert(conn, budget["id"], None, delivered=True)
    hostile = store.operations.record_alert(conn, day=DAY, cause="deepseek", title="DeepSeek 调用异常",
                                 detail=f"模型回答 {XSS}", slot_run_id=None, dag_run_id=None)
    store.operations.record_alert(conn, day=DAY, cause="deepseek", title="DeepSeek 调用异常", detail="again",
                       slot_run_id=None, dag_run_id=None)
    store.operations.finish_alert(conn, hostile["id"], "HTTP 500 from push gateway", delivered=False)
    # a row written before the store scrubbed (or by another tool): the page scrubs it
    conn.execute("UPDATE operator_alert SET delivery_error = 'gateway said: api_key=sk-live-abcdef123456' "
                 "WHERE id = %s", (hostile["id"],))
    store.operations.record_alert(conn, day=DAY - timedelta(days=1), cause="werss_stale", title="昨天的告警",
                       detail="yesterday", slot_run_id=None, dag_run_id=None)
    conn.commit()

    section = health_html(page(db_url))
    assert "今日 LLM 预算已用尽" in section and "今日花费 $5.01，其余 3 篇顺延" in section
    assert "DeepSeek 调用异常" in section
    assert "昨天的告警" not in section and "yesterday" not in section
    assert "今天没有告警" not in section
    # outside text never becomes markup
    assert XSS not in section and XSS_ESCAPED in section
    # delivery: sent, or why not (scrubbed); how often; what to do; the run it came from
    alerts = section.split('<li class="alert">')[1:]
    by_title = {re.search(r"<b>(.*?)</b>", a).group(1): a for a in alerts}
    assert list(by_title) == ["DeepSeek 调用异常", "今日 LLM 预算已用尽"]  # the latest first
    assert "已送达" in by_title["今日 LLM 预算已用尽"]
    assert f"/dags/{DAG_ID}/runs/{quote(noon['dag_run_id'], safe='')}" in by_title["今日 LLM 预算已用尽"]
    failed = by_title["DeepSeek 调用异常"]
    assert "发送失败：gateway said: api_key=" in failed and "sk-live-abcdef123456" not in failed
    assert "共 2 次" in failed and "处理：查看 DeepSeek 控制台" in failed
    assert "<li>今日告警 2 条</li>" in section  # counted in the headline


def test_a_fresh_install_shows_no_records_rather_than_errors(db_url: str) -> None:
    html = page(db_url)
    section = health_html(html)
    assert "今天没有告警" in section
    assert section.count("暂无记录") == 2  # WeRSS and DeepSeek: no call yet
    assert "还没有任何时段运行记录" in section
    assert "今日花费 $0 · 未设预算" in section
    assert "一切正常" in section


def test_an_install_whose_dag_never_ran_shows_every_slot_since_as_late(conn: Any, db_url: str) -> None:
    """No slot run at all (the DAG left paused): the slots since the schema was made are late, those before it
    are not, and the headline does not say 一切正常."""
    made = conn.execute("SELECT min(applied_at) AS at FROM schema_migration").fetchone()["at"]
    installed = datetime(2026, 1, 8, 10, 0, tzinfo=SHANGHAI)
    conn.execute("UPDATE schema_migration SET applied_at = applied_at - (%s - %s)", (made, installed))
    conn.commit()
    try:
        section = health_html(page(db_url))
    finally:
        conn.execute("UPDATE schema_migration SET applied_at = applied_at + (%s - %s)", (made, installed))
        conn.commit()
    assert "一切正常" not in section and "项需关注" in section
    assert re.findall(r"<li>(01-0\d \d\d:00) 超时未运行</li>", section) == ["01-08 18:00", "01-08 14:00", "01-08 12:00"]
    assert "01-08 07:00" not in section and "01-07 22:00" not in section  # before the install
    assert "还没有任何时段运行记录" not in section


def test_werss_and_deepseek_status_from_their_last_calls(seed: Seeder, db_url: str) -> None:
    runs = seed_recent_slots(seed)
    conn = seed.conn
    ingest_at = datetime(2026, 1, 8, 14, 1, tzinfo=SHANGHAI).astimezone(UTC)
    store.operations.update_status(conn, "werss:status", lambda s: {
        "last_slot_run_id": runs["running"]["id"], "last_ingest_at": ingest_at.isoformat(), "last_status": "partial",
        "last_new": 4, "last_errors": [f"MP_WXS_2: HTTP 502 {XSS}", "token=abc123secret in the URL"],
        "auth_stalled_slots": 2})
    store.operations.update_status(conn, "deepseek:status", lambda s: {
        "streak": 3, "last_status": "rate_limited", "throttled_slot_run_id": runs["running"]["id"],
        "cool_down_until": (NOW + timedelta(minutes=10)).isoformat(),
        "last_ok_at": datetime(2026, 1, 8, 13, 58, tzinfo=SHANGHAI).isoformat(),
        "last_error": "429 Too Many Requests", "last_error_at": datetime(2026, 1, 8, 14, 3, tzinfo=SHANGHAI).isoformat()})
    conn.commit()
    section = health_html(page(db_url))
    werss, deepseek = section.split('<div class="svc">')[1:3]
    assert "<b>WeRSS</b>" in werss and "部分失败" in werss and "14:01" in werss
    assert "上次抓到 4 篇新文章" in werss and "连续 2 个时段没有新文章且提示会话过期" in werss
    assert XSS not in werss and XSS_ESCAPED in werss
    assert "abc123secret" not in werss  # errors are scrubbed on the way to the page
    assert "<b>DeepSeek</b>" in deepseek and "限流（429）" in deepseek and "14:03" in deepseek
    assert "429 Too Many Requests" in deepseek and "上次成功 13:58" in deepseek
    assert "连续 3 次 429 限流" in deepseek and "冷却中：20:40 前暂停调用" in deepseek
    assert "时段 01-08 14:00 已降为单并发" in deepseek
    assert "暂无记录" not in section
    assert "<li>WeRSS 部分失败</li>" in section.split('<div class="hgrid">')[0]  # named in the headline

    # the cool-down is over and DeepSeek answers again: no warnings left
    store.operations.update_status(conn, "deepseek:status", lambda s: {**s, "streak": 0, "last_status": "ok",
                                                           "cool_down_until": NOW.isoformat(),
                                                           "last_ok_at": NOW.isoformat()})
    conn.commit()
    deepseek = health_html(page(db_url)).split('<div class="svc">')[2]
    assert "正常" in deepseek and "冷却" not in deepseek and "单并发" not in deepseek and "20:30" in deepseek


def test_hostile_service_state_values_do_not_break_the_page(conn: Any, db_url: str) -> None:
    store.operations.update_status(conn, "werss:status", lambda s: {"last_status": ["x"], "last_new": "many",
                                                          "last_errors": "not a list", "last_ingest_at": 12})
    store.operations.update_status(conn, "deepseek:status", lambda s: {"streak": "three", "cool_down_until": "soon",
                                                             "throttled_slot_run_id": {"id": 1}, "last_error": XSS})
    conn.commit()
    section = health_html(page(db_url))
    assert "未知" in section and XSS not in section and XSS_ESCAPED in section


def _svg(html: str) -> str:
    match = re.search(r'<svg class="spark".*?</svg>', html, re.S)
    assert match
    return match.group(0)


def test_spend_against_the_budget_and_a_30_day_line_drawn_without_script(conn: Any, db_url: str) -> None:
    spend(conn, DAY, 0.1)
    spend(conn, DAY, 0.0234)
    spend(conn, DAY - timedelta(days=3), 0.5)
    spend(conn, DAY - timedelta(days=29), 0.25)  # the first day of the line
    spend(conn, DAY - timedelta(days=30), 9.0)  # outside the 30 days
    spend(conn, DAY, 7.0, currency="CNY")  # another currency is not added to dollars
    conn.commit()

    html = page(db_url, settings=make_settings(daily_budget=5))
    section = health_html(html)
    assert "今日花费 $0.1234 / 预算 $5.00" in section and "已用尽" not in section
    assert '<span style="width: 2%"></span>' in section
    assert "价格为估算" not in section

    svg = _svg(section)
    assert "<script" not in svg.lower() and "javascript" not in svg.lower() and " on" not in svg.replace(
        " one", "")  # no event handlers either
    points = re.search(r'<polyline class="line" points="([^"]+)"', svg).group(1).split()
    assert len(points) == 30
    ys = [float(p.split(",")[1]) for p in points]
    assert ys[26] == min(ys) == costs.CHART_PAD  # 01-05, the highest day, at the top
    assert ys[26] < ys[0] < ys[29] < ys[1]  # higher is dearer: 0.5, 0.25 on the first day, 0.1234 today, 0
    assert ys[1] == ys[28] == costs.CHART_H - costs.CHART_PAD  # days without spend are 0
    assert svg.count("<title>") == 30 and "<title>01-08 $0.1234</title>" in svg
    chart = section[section.index('<div class="chart">'):]
    assert "<span>$0.5000</span><span>$0</span>" in chart  # the axis: max and min
    assert "12-10" in chart and "01-08" in chart and "USD" in chart  # first and last day, the currency

    # no budget: said so; a model without a published price: the figures are estimates
    section = health_html(page(db_url, settings=make_settings(deepseek_model="deepseek-v5")))
    assert "今日花费 $0.1234 · 未设预算" in section and "价格为估算，请设置 deepseek_prices" in section
    # a budget reached: said so, and in the headline
    section = health_html(page(db_url, settings=make_settings(daily_budget=0.1)))
    assert "今日花费 $0.1234 / 预算 $0.1000（已用尽）" in section and "<li>今日预算已用尽</li>" in section
    # in CNY, the CNY ledger
    section = health_html(page(db_url, settings=make_settings(deepseek_currency="CNY")))
    assert "今日花费 ¥7.00 · 未设预算" in section and "近 30 天 · CNY" in section


def test_the_recent_days_table_has_a_cost_column(conn: Any, db_url: str) -> None:
    spend(conn, DAY, 0.1234)
    spend(conn, DAY - timedelta(days=3), 1.5)
    conn.commit()
    html = page(db_url)
    table = html[html.index('<th class="num">花费</th>'):]
    cells = {m.group(1): re.findall(r'<td class="num">([^<]*)</td>', m.group(0))
             for m in re.finditer(r'<td><a href="/daily/(\d{4}-\d\d-\d\d)">.*?</tr>', table, re.S)}
    assert len(cells) == 14
    assert cells["2026-01-08"][-1] == "$0.1234"
    assert cells["2026-01-05"][-1] == "$1.50"
    assert cells["2026-01-07"][-1] == "—"  # no call that day


# -------------------------------------------------------------------------------------- costs on pages


def test_the_analysis_page_shows_its_cost_and_the_articles_total_with_failed_attempts(fakes, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "1")
    slot = shanghai(2026, 1, 8, 14)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(1, slot - timedelta(hours=1))]
    fakes.at(slot)
    fakes.deepseek.responder = lambda body: completion("not json at all")
    run_slot(slot)  # a paid ladder that failed
    fakes.deepseek.responder = lambda body: answer(72)
    fakes.at(shanghai(2026, 1, 8, 18))
    run_slot(shanghai(2026, 1, 8, 18))
    with connect() as conn:
        row = conn.execute("SELECT id, content_item_id, cost, currency FROM analysis_result").fetchone()
        total = conn.execute("SELECT sum(cost) AS c, sum(calls) AS n, count(*) AS ladders FROM llm_spend "
                             "WHERE content_item_id = %s", (row["content_item_id"],)).fetchone()
    assert total["ladders"] == 2 and total["c"] > row["cost"] > 0
    html = read_page(f"/analysis/{row['id']}", shanghai(2026, 1, 8, 19))
    costs = html.split("<dt>成本</dt>")[1].split("</dd>")[0]
    assert common.money(row["cost"], "USD") in costs
    assert f"本文合计 {common.money(total['c'], 'USD')}（{total['n']} 次调用，含失败的尝试）" in costs


def test_an_analysis_that_cost_one_clean_call_shows_no_separate_total(fakes) -> None:
    slot = shanghai(2026, 1, 8, 14)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(1, slot - timedelta(hours=1))]
    fakes.at(slot)
    fakes.deepseek.responder = lambda body: answer(72)
    run_slot(slot)
    with connect() as conn:
        row = conn.execute("SELECT id, cost FROM analysis_result").fetchone()
    html = read_page(f"/analysis/{row['id']}", shanghai(2026, 1, 8, 15))
    costs = html.split("<dt>成本</dt>")[1].split("</dd>")[0]
    assert common.money(row["cost"], "USD") in costs and row["cost"] > 0 and "本文合计" not in costs


def test_the_daily_page_shows_the_days_cost_and_what_the_budget_deferred(fakes, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DAILY_BUDGET", "0.0001")  # one analysis reaches it
    slot = shanghai(2026, 1, 8, 14)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(n, slot - timedelta(hours=n)) for n in (1, 2, 3)]
    fakes.at(slot)
    fakes.deepseek.responder = lambda body: answer(70)
    run_slot(slot)
    with connect() as conn:
        spent = store.operations.day_spend(conn, DAY, "USD")
    assert spent > 0

    # before the report: from the live rows
    html = read_page("/daily/2026-01-08", shanghai(2026, 1, 8, 15))
    assert "预算用尽，2 篇顺延到次日" in html
    assert f'<div class="k">LLM 花费</div><div class="v cost">{common.money(spent, "USD")}</div>' in html
    # the overview: the slot's deferrals, its cost, and the day's spend against the budget
    section = health_html(read_page("/", shanghai(2026, 1, 8, 15)))
    item = run_items(section)["01-08 14:00"]
    assert '预算顺延 <b class="warnnum">2</b>' in item and common.money(spent, "USD") in item
    assert f"今日花费 {common.money(spent, 'USD')} / 预算 $0.0001（已用尽）" in section

    # after the 22:00 report: as the report counted them
    fakes.at(shanghai(2026, 1, 8, 22))
    run_slot(shanghai(2026, 1, 8, 22))
    html = read_page("/daily/2026-01-08", shanghai(2026, 1, 8, 22, 30))
    assert "预算用尽，2 篇顺延到次日" in html


def test_a_day_without_deferrals_says_nothing_of_the_budget_and_old_reports_keep_their_cost(seed: Seeder,
                                                                                           db_url: str) -> None:
    old_day = DAY - timedelta(days=40)
    run = seed.slot(old_day, "22:00")
    seed.article(run, "旧文章", 50)
    seed.close(run)
    seed.report(old_day, stats={"analysed": 1, "opportunities": 0, "failed": 0, "max_score": 50,
                                "cost_usd": 0.0421})  # a report written before the spend ledger
    seed.conn.commit()
    html = page(db_url, f"/daily/{old_day.isoformat()}")
    assert '<div class="v cost">$0.0421</div>' in html and "预算用尽" not in html
