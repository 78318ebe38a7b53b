"""What the tests of the report pages share: the settings, the logged-in user, signed links, the seeder
that writes rows through the store's functions, and the constants of the seeded day. The fixtures built on
them (``seed``, ``make_client``, ``client``) are in conftest.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from include.radar import store
from include.radar.core import signing
from include.radar.core.settings import Settings, load_settings
from include.radar.core.slots import SHANGHAI, slot_at

if TYPE_CHECKING:
    from fastapi import FastAPI

SECRET = "test-link-secret-0123456789abcdef01"
DAY = date(2026, 1, 8)
# 20:30 in Shanghai: 07:00-14:00 have run, 18:00 is overdue (grace 30 min), 22:00 is still ahead
NOW = datetime(2026, 1, 8, 20, 30, tzinfo=SHANGHAI).astimezone(UTC)
XSS = "<script>alert(1)</script>"
XSS_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def make_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"link_secret": SECRET, "report_base_url": "https://radar.example.com/radar"}
    values.update(overrides)
    return load_settings({}.get, use_airflow=False, **values)


@dataclass
class FakeUser:
    username: str = "analyst"


def airflow_get_user() -> Any:
    from airflow.api_fastapi.core_api.security import get_user

    return get_user


def allow_reading(app: FastAPI, *, edit: bool = False) -> None:
    """Grant the fake user the role check (read access to the radar DAG; edit access with ``edit``), overridden
    like get_user."""
    from include.radar.web.auth import may_edit_radar, may_read_radar

    app.dependency_overrides[may_read_radar] = lambda _user: True
    app.dependency_overrides[may_edit_radar] = lambda _user: edit


def signed(path: str, *, now: datetime = NOW, days: int = 7, secret: str = SECRET) -> str:
    query = signing.sign(path, secret, now, days)
    return f"{path}?exp={query['exp']}&sig={query['sig']}"


# ------------------------------------------------------------------------------------------------ seeding


class Seeder:
    """Writes rows the way the steps do, through the store's functions (include/radar/store/)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.threshold = 60
        self._n = 0
        self._accounts: dict[str, int] = {}

    def account(self, name: str) -> int:
        if name not in self._accounts:
            self._accounts[name] = store.articles.upsert_account(self.conn, f"mp_{len(self._accounts)}", name)["id"]
        return self._accounts[name]

    def slot(
        self, day: date, slot: str, *, state: str = "done", error: str | None = None, new: int = 0
    ) -> dict[str, Any]:
        key = slot_at(day, slot)
        run_id = f"scheduled__{key.scheduled_at.isoformat()}"
        row = store.slot_runs.open_slot_run(self.conn, key, run_type="scheduled", dag_id="opportunity_radar", dag_run_id=run_id)
        if new:
            store.slot_runs.record_ingest(self.conn, row["id"], new=new, skipped=0, waiting=0)
        if error:
            store.slot_runs.record_step(self.conn, row["id"], "ingest", error)
        return row

    def close(self, slot_row: dict[str, Any]) -> dict[str, Any]:
        return store.slot_runs.close_slot_run(self.conn, slot_row["id"], self.threshold)

    def article(
        self,
        slot_row: dict[str, Any],
        title: str,
        score: int,
        *,
        summary: str = "摘要",
        account: str = "财经观察",
        url: str = "https://mp.weixin.qq.com/s/abc",
        published_at: datetime | None = None,
        opportunities: list[dict[str, Any]] | None = None,
        reused_from_id: int | None = None,
    ) -> int:
        self._n += 1
        account_id = self.account(account)
        item_id = store.articles.insert_content_item(
            self.conn,
            {
                "external_id": f"ext-{self._n}",
                "account_id": account_id,
                "mp_id": f"mp-{account}",
                "title": title,
                "url": url,
                "published_at": published_at or slot_row["scheduled_at"] - timedelta(hours=1),
                "raw_html_size": 1000,
                "clean_text": "正文",
                "content_hash": f"hash-{self._n}",
                "body_status": 1,
                "last_error": None,
                "slot_run_id": slot_row["id"],
            },
        )
        claim = store.claims.claim_item(self.conn, item_id, slot_run_id=slot_row["id"], claimer="seed", max_attempts=3)
        opps = opportunities or []
        analysis_id = store.analyses.insert_analysis(
            self.conn,
            {
                "content_item_id": item_id,
                "slot_run_id": slot_row["id"],
                "reused_from_id": reused_from_id,
                "score": score,
                "has_opportunity": score >= self.threshold,
                "top_type": opps[0]["type"] if opps else "none",
                "summary": summary,
                "result_json": {"score": score, "summary": summary, "opportunities": opps},
                "model": "deepseek-v4-pro",
                "prompt_version": "analysis/v1",
                "prompt_tokens": 5321,
                "completion_tokens": 812,
                "reasoning_tokens": 2048,
                "cache_hit_tokens": 4096,
                "cache_miss_tokens": 1225,
                "cost": "0.001234",
                "currency": "USD",
                "latency_ms": 23456,
                "llm_calls": 2,
            },
            opps,
            attempt_id=claim.attempt_id,
        )
        assert analysis_id is not None
        return analysis_id

    def failure(self, slot_row: dict[str, Any], title: str, error: str) -> int:
        self._n += 1
        item_id = store.articles.insert_content_item(
            self.conn,
            {
                "external_id": f"ext-{self._n}",
                "account_id": self.account("失败号"),
                "mp_id": "mp-fail",
                "title": title,
                "url": "https://mp.weixin.qq.com/s/fail",
                "published_at": slot_row["scheduled_at"] - timedelta(hours=2),
                "raw_html_size": 1000,
                "clean_text": "正文",
                "content_hash": f"hash-{self._n}",
                "body_status": 1,
                "last_error": None,
                "slot_run_id": slot_row["id"],
            },
        )
        claim = store.claims.claim_item(self.conn, item_id, slot_run_id=slot_row["id"], claimer="seed", max_attempts=3)
        store.claims.finish_attempt(self.conn, claim.attempt_id, "failed", error=error)
        return item_id

    def push(
        self, day: date, *, channel: str = "bark://api.day.app", error: str | None = None, sent: bool = True
    ) -> None:
        uuid = f"daily-{day}-{channel}"
        store.pushes.claim_notification(
            self.conn,
            {
                "msg_uuid": uuid,
                "report_date": day,
                "slot": "22:00",
                "push_type": "daily",
                "target_url": f"https://radar.example.com/radar/daily/{day}?exp=1&sig=secret-signature",
                "channel": channel,
                "slot_run_id": None,
                "title": f"【日报】{day}",
                "channel_key": f"key-{channel}",
                "body": f"【日报】{day}",
            },
        )
        if sent or error:
            store.pushes.finish_notification(self.conn, uuid, error)

    def report(
        self,
        day: date,
        *,
        status: int = store.common.REPORT_OK,
        digest_md: str = "## 今日要点\n- 储能集采放量",
        digest_json: dict[str, Any] | None = None,
        stats: dict[str, Any] | None = None,
        slots_done: list[str] | None = None,
        error: str | None = None,
    ) -> None:
        store.reports.upsert_daily_report(
            self.conn,
            {
                "report_date": day,
                "status": status,
                "digest_md": digest_md,
                "digest_json": digest_json or {"top_opportunities": [], "watchlist": []},
                "slots_done": slots_done or [],
                "stats": stats or {},
                "model": "deepseek-v4-pro",
                "prompt_version": "digest/v1",
                "error": error,
                "slot_run_id": None,
            },
        )


OPPORTUNITY = {
    "name": "储能电芯龙头",
    "type": "sector",
    "targets": ["储能", "锂电池"],
    "direction": "bullish",
    "horizon": "1-3个月",
    "catalyst": "四季度集采招标量同比翻倍",
    "risks": ["碳酸锂价格反弹挤压利润"],
    "evidence": ["11月储能集采中标规模同比增长120%"],
    "confidence": 0.7,
}


def commit(seeder: Seeder) -> None:
    seeder.conn.commit()
