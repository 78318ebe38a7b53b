"""Demo data: 澄观产业研究's earlier calls, so that the demo day's pushes have a track record to quote (the
account's record beside its name, the score band's line).

Thirty-six analyses, each titled 「往期观点 N（演示数据）」, pushed once before the open on the first three
trading days of the recorded prices' first week (two weeks before the demo's week, market_fixtures.py), scored
80–89, each naming one of the recorded stocks; then the real track-record step measures them on the recorded
prices, as of the demo day's 06:30. Nothing is made up beyond the calls themselves: their outcomes are the
step's, on the same recorded prices as the rest of the demo.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from include.radar import store
from include.radar.core import db
from include.radar.core.slots import SHANGHAI
from include.radar.market import Source

ACCOUNT = ("MP_WXS_3081746259", "澄观产业研究")
CALLS = 36
TARGETS = ("贵州茅台（600519.SH）", "宁德时代（300750.SZ）", "中国平安（601318.SH）", "比亚迪（002594.SZ）",
           "中微公司（688012.SH）", "紫金矿业（601899.SH）")


def _calls(first: date) -> list[tuple[datetime, int, str, str]]:
    """(pushed at, score, target, direction) of each call: twelve a day from 08:00, before the open."""
    out = []
    for i in range(CALLS):
        at = datetime.combine(first + timedelta(days=i // 12), time(8, 0), SHANGHAI) + timedelta(minutes=5 * (i % 12))
        out.append((at, 80 + i % 10, TARGETS[i % len(TARGETS)], "bearish" if i % 4 == 3 else "bullish"))
    return out


def _insert(conn: Any, n: int, at: datetime, score: int, target: str, direction: str, base_url: str) -> None:
    account = store.articles.upsert_account(conn, *ACCOUNT)
    item = conn.execute(
        "INSERT INTO content_item (external_id, account_id, mp_id, title, published_at, body_status) "
        "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
        (f"demo-history-{n}", account["id"], ACCOUNT[0], f"往期观点 {n}（演示数据）", at - timedelta(minutes=30),
         store.common.BODY_READY)).fetchone()["id"]
    opportunity = {"name": "往期观点", "type": "stock", "targets": [target], "direction": direction}
    analysis = conn.execute(
        "INSERT INTO analysis_result (content_item_id, score, has_opportunity, top_type, summary, result_json, model, "
        "prompt_version, grouped_at) VALUES (%s, %s, true, 'stock', %s, %s, 'demo', 'demo', %s) RETURNING id",
        (item, score, f"往期观点 {n}（演示数据）：{target}", Jsonb({"score": score, "opportunities": [opportunity]}), at),
    ).fetchone()["id"]
    conn.execute(
        "INSERT INTO notification_log (msg_uuid, report_date, slot, push_type, target_url, channel, title, status, "
        "sent_at) VALUES (%s, %s, '07:00', 'opportunity', %s, 'demo', %s, 1, %s)",
        (f"demo-history-{n}", at.date(), f"{base_url}/analysis/{analysis}", f"往期观点 {n}（演示数据）", at))


def insert_calls(url: str, first: date, base_url: str) -> None:
    """The calls from ``first`` (a Monday of the recorded prices), pushed (bench/deadline.py's too)."""
    with db.connect(url) as conn:
        for n, call in enumerate(_calls(first), 1):
            _insert(conn, n, *call, base_url)


def seed(url: str, first: date, day: date, base_url: str, source: Callable[[], Source]) -> Any:
    """The calls (insert_calls), measured by the track record as of ``day``'s 06:30: the step's run
    (report/track_record.Update)."""
    from include.radar.report import track_record

    insert_calls(url, first, base_url)
    return track_record.update(lambda: db.connect(url), source, now=datetime.combine(day, time(6, 30), SHANGHAI))
