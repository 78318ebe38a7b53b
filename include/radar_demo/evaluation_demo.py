"""The demo day's evaluation: deepseek-flash against deepseek-v4-pro over the day's analyses, from the stand-in's
recorded answers for each model (data/answers.json, data/answers_flash.json), measured against the recorded prices
six weeks on. Demo data, said so; the real command is ``python -m include.radar.cli evaluate``."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Any

from include.radar import store
from include.radar.core import db
from include.radar.core.clock import FixedClock
from include.radar.core.settings import load_settings
from include.radar.evaluation import shadow
from include.radar.evaluation import summary as evaluation_report

CAP = 0.50  # the demo's calls are answered by the stand-in: the ledger prices them as flash would bill them


def date_slot_runs(url: str, day: date) -> int:
    """The demo replays its five slots at once: date each slot run at its own time (as a scheduled run starts), so
    the evaluation measures each call from when its slot ran on the day, not from the replay's wall clock."""
    with db.connect(url) as conn:
        return conn.execute("UPDATE slot_run SET started_at = scheduled_at + interval '1 second' WHERE run_date = %s",
                            (day,)).rowcount


def vote_as_the_reader(url: str, day: date) -> tuple[int, int]:
    """The reader's verdicts on the day, as the report page's buttons record them: 👍 on the day's two best
    opportunities, 👎 on its two lowest scores (a repost's copied analysis is not voted on twice). Too few for the
    AUC to conclude anything, which the summary says."""
    with db.connect(url) as conn:
        rows = conn.execute(
            "SELECT a.id, a.score FROM analysis_result a JOIN slot_run s ON s.id = a.slot_run_id "
            "WHERE s.run_date = %s AND a.reused_from_id IS NULL ORDER BY a.score DESC, a.id", (day,)).fetchall()
        liked, disliked = rows[:2], rows[2:][-2:]
        for row, verdict in [(r, "up") for r in liked] + [(r, "down") for r in disliked]:
            store.focus.set_feedback(conn, row["id"], verdict, "user:demo")
    return len(liked), len(disliked)


def show(url: str, day: date, later: datetime, out: Path, say: Any) -> Path:
    """Run the evaluation, print its summary as the CLI does, and keep a copy of its page as of ``later``."""
    date_slot_runs(url, day)
    liked, disliked = vote_as_the_reader(url, day)
    say(f"\n[demo] the reader's verdicts on the day's report (demo data): 👍 {liked}, 👎 {disliked}")
    settings = load_settings(use_airflow=False)

    def connect() -> Any:
        return db.connect(url)

    plan = shadow.start(connect, settings, shadow.Candidate(model="deepseek-flash"),
                            shadow.Sample(days=7, size=50), CAP, created_by="demo")
    shadow.run(connect, settings, plan.evaluation_id)
    with connect() as conn:
        summary = evaluation_report.load(conn, plan.evaluation_id, now=later)
    say("[demo] evaluation (recorded answers per model, demo data): deepseek-flash against deepseek-v4-pro")
    for line in evaluation_report.lines(summary, settings.price_table().money) if summary else []:
        say(line)
    return _save_page(url, f"/evaluation/{plan.evaluation_id}", out / f"evaluation-{day.isoformat()}.html", later)


def _save_page(url: str, path: str, target: Path, now: datetime) -> Path:
    """The page as a logged-in operator sees it (a pushed link never opens it)."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from include.radar.web.app import create_app
    from include.radar.web.auth import may_read_radar

    app = create_app(lambda: load_settings(use_airflow=False), url, clock=FixedClock(now))
    app.dependency_overrides[get_user] = lambda: object()
    app.dependency_overrides[may_read_radar] = lambda user: True
    target.write_text(TestClient(app).get(path).text, encoding="utf-8")
    return target
