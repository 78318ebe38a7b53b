"""The demo day the evaluation's tests start from: the demo's articles through a real 22:00 slot (the stand-in
DeepSeek answers v4-pro with the demo's recorded answers, flash with its own), the reader's verdicts on six of
them, and the evaluation's helpers (test_evaluation.py, test_evaluation_money.py)."""

from __future__ import annotations

from datetime import date
from typing import Any

from include.radar import store
from include.radar.core.clock import FixedClock
from include.radar.core.settings import load_settings
from include.radar.evaluation import shadow
from include.radar_demo import run as demo_run
from tests.conftest import connect
from tests.slotrun import run_slot, shanghai

DAY = date(2026, 2, 4)
LATER = shanghai(2026, 2, 5, 9)
FLASH = shadow.Candidate(model="deepseek-flash", thinking=True, reasoning_effort="high", prompt_version="v3")
# what one stand-in call bills (fakes.completion: 1200 prompt tokens, 256 of them cache hits, 400 output), per
# million tokens at the off-peak rates (pricing.DEFAULT_OFF_PEAK; the peak multiplier is 1 in these tests)
FLASH_CALL = (256 * 0.003 + 944 * 0.15 + 400 * 0.60) / 1e6  # 0.000382368
PRO_CALL = (256 * 0.022 + 944 * 0.66 + 400 * 1.98) / 1e6  # 0.001420672
LIKED = ("设备订单拐点已现", "集采规则迎来优化", "人形机器人")
DISLIKED = ("集运运价三周上涨", "储能集采再现", "铜：矿端扰动再起")


def demo_day(fakes: Any, monkeypatch: Any) -> dict[str, int]:
    """The demo's articles through a real 22:00 slot, with the reader's verdicts; {title: analysis id}."""
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_PEAK_MULTIPLIER", "1")  # the same price at any hour
    werss = demo_run.build_werss(DAY, fakes.clock)
    fakes.werss.accounts, fakes.werss.articles = werss.accounts, werss.articles
    fakes.deepseek.responder = demo_run.build_deepseek().responder
    with connect() as conn:
        store.focus.save_profile(conn, demo_run.DEMO_PROFILE, "demo")
    at = shanghai(2026, 2, 4, 22)
    fakes.at(at)
    result = run_slot(at)
    assert not result["errors"], result["errors"]
    with connect() as conn:
        rows = conn.execute("SELECT a.id, c.title FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id"
                            ).fetchall()
        ids = {r["title"]: r["id"] for r in rows}
        for titles, verdict in ((LIKED, "up"), (DISLIKED, "down")):
            for prefix in titles:
                store.focus.set_feedback(conn, next(i for t, i in ids.items() if t.startswith(prefix)), verdict, "test")
    return ids


def settings(**overrides: Any) -> Any:
    return load_settings(**overrides)


def calls_of(fakes: Any, model: str) -> int:
    return sum(1 for r in fakes.deepseek.requests if r.get("model") == model)


def start(cap: float = 1.0, candidate: shadow.Candidate = FLASH, **sample: Any) -> shadow.Plan:
    return shadow.start(connect, settings(), candidate,
                            shadow.Sample(**{"days": 14, "size": 50, **sample}), cap, created_by="test",
                            clock=FixedClock(LATER))


def ledger(evaluation_id: int) -> tuple[int, float]:
    """(lines, money) of the evaluation in the spend ledger."""
    with connect() as conn:
        row = conn.execute("SELECT count(*) AS n, coalesce(sum(cost), 0) AS cost FROM llm_spend "
                           "WHERE evaluation_id = %s AND purpose = 'evaluation'", (evaluation_id,)).fetchone()
    return int(row["n"]), float(row["cost"])


def rows_in(*tables: str) -> dict[str, int]:
    with connect() as conn:
        return {t: conn.execute(f"SELECT count(*) AS n FROM {t}").fetchone()["n"] for t in tables}
