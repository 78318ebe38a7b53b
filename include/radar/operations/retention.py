"""Retention: what the radar keeps, and for how long (the daily slot's ``retention`` task).

Article bodies are most of what a year stores (``make bench-growth``), and past ``retention_days`` no step
reads them (the longest window is the week's). So an old article keeps everything but its body: title, link,
hash (a repost still reuses its analysis), statuses, the analysis with its evidence checks, pushes, feedback,
the track record, and the search lexemes of its title and analysis; ``body_pruned_at`` says when, and it is
never offered for analysis again. Bounded: batches of ``BATCH``, each its own transaction, within the step's
time (``SECONDS``); what is left waits for the next day, shown on the health panel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from include.radar import store
from include.radar.core.clock import SYSTEM, Clock

log = logging.getLogger(__name__)

STATUS_KEY = "retention:status"
BATCH = 500
SECONDS = 300.0  # the step's own bound (its task times out at 10 minutes)


@dataclass(frozen=True)
class Pruned:
    bodies: int
    batches: int
    remaining: int  # articles past the cutoff still holding their body (the next run's work)
    seconds: float

    @property
    def finished(self) -> bool:
        return self.remaining == 0


def cutoff(now: datetime, keep_days: int) -> datetime:
    """Articles published before this instant lose their body."""
    return now - timedelta(days=keep_days)


def prune(connect: Callable[[], Any], *, keep_days: int, now: datetime, max_attempts: int, batch: int = BATCH,
          seconds: float = SECONDS, clock: Clock = SYSTEM) -> Pruned:
    """Prune bodies older than ``keep_days`` days, a batch per transaction, until none is left or ``seconds``
    have passed (a batch started is finished: a batch of 500 takes about a second). An article still owed its
    analysis (pending, or failed with fewer than ``max_attempts`` attempts) keeps its body."""
    limit = cutoff(now, keep_days)
    started = clock.monotonic()
    pruned = batches = 0
    while clock.monotonic() - started < seconds:
        with connect() as conn:
            done = store.retention.prune_bodies(conn, limit, batch, max_attempts=max_attempts)
        if not done:
            break
        pruned += done
        batches += 1
    with connect() as conn:
        remaining = store.retention.unpruned_before(conn, limit, max_attempts=max_attempts)
    return Pruned(pruned, batches, remaining, round(clock.monotonic() - started, 3))


def daily(connect: Callable[[], Any], settings: Any, slot: dict[str, Any], now: datetime, *,
          seconds: float = SECONDS, clock: Clock = SYSTEM) -> dict[str, Any]:
    """The DAG's retention task: at the daily slot, after the daily push. Prunes what retention_days lets go
    (nothing when it is 0) and records what the database holds for the health panel; a backlog left by the
    time bound (on ``clock``) is a warning on the slot, taken up the next day.

    ``now`` is the slot's own time, not the clock: a rerun prunes the same articles, and a backfill of an old
    day prunes no more than that day's run would have."""
    if not slot["is_daily"]:
        return {"reason": "retention runs at the daily slot"}
    keep = settings.retention_days
    run = (prune(connect, keep_days=keep, now=now, max_attempts=settings.max_analysis_attempts, seconds=seconds,
                 clock=clock) if keep else None)
    with connect() as conn:
        held = store.retention.footprint(conn)
        status = {"at": clock.now().isoformat(), "retention_days": keep, **held,
                  "last": asdict(run) if run else None}
        store.operations.update_status(conn, STATUS_KEY, lambda _old: status)
        if run and not run.finished:
            store.slot_runs.add_slot_warnings(conn, slot["slot_run_id"], "retention", [
                f"retention: {run.remaining} article bodies older than {keep} days left for tomorrow "
                f"({run.bodies} pruned in {run.seconds:.0f} s)"])
    size = held["database_bytes"] / 2**20
    if run:
        log.info("retention: %d article bodies older than %d days pruned in %d batches (%.1f s), %d left; "
                 "database %.0f MB", run.bodies, keep, run.batches, run.seconds, run.remaining, size)
    else:
        log.info("retention: retention_days is 0, nothing pruned; database %.0f MB", size)
    return {"pruned": run.bodies if run else 0, "remaining": run.remaining if run else 0,
            "database_mb": round(size, 1)}
