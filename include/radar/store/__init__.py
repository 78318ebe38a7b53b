"""All of the radar's SQL, parameterised, in one package: one room per table group.

Every function takes an open psycopg connection (``db.connect(url)``) and leaves committing to the caller's
``with`` block; idempotency rests on the schema's unique keys (``ON CONFLICT``: a duplicate is an answer, not
an error). Callers reach a function in the room that defines it, ``store.<room>.<name>``: ``slot_runs``,
``articles`` (accounts and articles), ``claims`` (claims, leases, attempts), ``analyses``, ``pushes`` (the
notification log), ``events``, ``feeds`` (the reader's feed: its tokens, what it lists), ``focus`` (profile, rules, feedback), ``searching``, ``trends``, ``reports`` (the
daily report and the pages' queries), ``operations`` (spend, deferrals, alerts), ``weekly``, ``state``, ``track``
(the market's calendar, listings and bars; picks and outcomes), ``evaluations``, ``retention`` and ``common``
(what the rooms share).
"""

from __future__ import annotations

from include.radar.store import (  # the rooms: ``from include.radar import store`` reaches each
    analyses,
    articles,
    claims,
    common,
    evaluations,
    events,
    feeds,
    focus,
    operations,
    pushes,
    reports,
    retention,
    searching,
    slot_runs,
    state,
    track,
    trends,
    weekly,
)

__all__ = [
    "analyses", "articles", "claims", "common", "evaluations", "events", "feeds", "focus", "operations", "pushes",
    "reports", "retention", "searching", "slot_runs", "state", "track", "trends", "weekly",
]
