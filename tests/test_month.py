"""A few days of the month bench (tests/month.py; `make bench-month` runs thirty): every piece of news pushed at
most once (reposts and rewrites one to three days late included), none lost, stuck or analysed twice, no LLM call
for a repost or the excluded notice, no connection left open.

Rooms: the whole slot (tests/slotrun.py) on its clock, pushes/events.py and store/events.py above all.
"""

from __future__ import annotations

from datetime import date

from include.radar.core import db
from tests import month

FIRST = date(2026, 1, 5)


def test_four_days_of_slots_push_each_piece_of_news_once_and_lose_nothing(fakes, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_RETENTION_DAYS", "14")
    pieces, daily = month.generate(FIRST, 4)
    assert {p.kind for p in pieces.pieces} >= {"news", "repost", "rewrite", "notice"}
    figures = month.run(fakes.werss, fakes.deepseek, pieces, daily, FIRST, db.database_url())
    assert figures.pushed_twice == {}, figures.pushes_per_news
    assert (figures.lost, figures.stuck, figures.twice) == ([], [], [])
    assert figures.pushes_per_news and figures.above  # there was news to push, and it was pushed
    assert figures.llm_calls <= figures.analysable  # no call for a repost, the notice or a missing body
    assert figures.connections == 0
    assert figures.rewrites_of_pushed >= 1 and figures.rewrites_joined == figures.rewrites, figures
