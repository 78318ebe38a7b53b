"""DeepSeek's rate limit, shared by every analysis of a slot (each runs in its own task process).

The state lives in PostgreSQL (``service_state`` key ``deepseek:status``, updated with the row locked): the
current streak of 429 answers, a cool-down every call waits out (the longest ``Retry-After`` heard), the slot
that is throttled, and the last outcome of a call, which the overview page shows. After ``THROTTLE_AFTER`` 429s
in a row the slot is throttled for the rest of its run: its calls go one at a time (an advisory lock held while
a call is in flight). After ``ALERT_AFTER`` the operator is alerted (once a day). A usable answer ends the
streak. The gate is advisory: when the database cannot be reached, calls go on unthrottled. An evaluation's
candidate on the slots' connection shares the state without reporting into it (its outcomes are not the
slots'); on a connection of its own it has a state and a lock of its own (:func:`own_state`).
"""

from __future__ import annotations

import contextlib
import logging
import zlib
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from include.radar import store
from include.radar.analysis.llm import RateGate
from include.radar.core import redact
from include.radar.core.clock import SYSTEM, Clock

log = logging.getLogger(__name__)

KEY = "deepseek:status"
THROTTLE_AFTER = 2
ALERT_AFTER = 3
_LOCK = 0x7261_6461_724C_4C4D & 0x7FFF_FFFF_FFFF_FFFF  # "radarLLM": one call in flight while throttled
POLL_SECONDS = 0.5


class DatabaseGate(RateGate):
    def __init__(
        self,
        connect: Callable[[], Any],
        slot_run_id: int,
        *,
        on_streak: Callable[[int, str], None] | None = None,
        clock: Clock = SYSTEM,
        key: str = KEY,
        lock: int = _LOCK,
        reports: bool = True,
    ) -> None:
        self.connect = connect
        self.slot_run_id = slot_run_id
        self.on_streak = on_streak
        self.clock = clock
        self.key, self.lock = key, lock
        self.reports = reports  # whether its calls' outcomes are the state's last_status (what the overview shows)
        self._seen: dict[str, Any] = {}  # the state as wait() read it, for in_flight() right after

    def _update(self, change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        try:
            with self.connect() as conn:
                return store.operations.update_status(conn, self.key, change)
        except Exception:  # the gate is advisory
            log.warning("the shared DeepSeek rate-limit state could not be updated", exc_info=True)
            return {}

    def _read(self) -> dict[str, Any]:
        try:
            with self.connect() as conn:
                return store.operations.status(conn, self.key)
        except Exception:
            log.warning("the shared DeepSeek rate-limit state could not be read", exc_info=True)
            return {}

    def wait(self, left: float | None) -> float:
        self._seen = self._read()
        until = _at(self._seen.get("cool_down_until"))
        if until is None:
            return 0.0
        pause = (until - self.clock.now()).total_seconds()
        if left is not None:
            pause = min(pause, left)
        if pause <= 0:
            return 0.0
        log.info("DeepSeek asked for a pause: waiting %.1fs before the next call", pause)
        self.clock.sleep(pause)
        return pause

    @contextlib.contextmanager
    def in_flight(self, left: float) -> Iterator[None]:
        if self._seen.get("throttled_slot_run_id") != self.slot_run_id:
            yield
            return
        with contextlib.ExitStack() as stack:
            try:  # one session holds the lock for the whole call and releases it after (its connection is pooled)
                conn = stack.enter_context(self.connect())
                give_up = self.clock.monotonic() + max(left, 0)
                while not conn.execute("SELECT pg_try_advisory_lock(%s) AS ok", (self.lock,)).fetchone()["ok"]:
                    conn.commit()
                    if self.clock.monotonic() > give_up:
                        break
                    self.clock.sleep(POLL_SECONDS)
                else:
                    stack.callback(_release, conn, self.lock)
                conn.commit()
            except Exception:  # the gate is advisory: the call goes on unthrottled
                log.warning("the DeepSeek throttle could not be taken", exc_info=True)
            yield

    def limited(self, pause: float, error: str) -> None:
        now = self.clock.now()

        def change(state: dict[str, Any]) -> dict[str, Any]:
            streak = int(state.get("streak") or 0) + 1
            until = max(filter(None, [_at(state.get("cool_down_until")), now + timedelta(seconds=pause)]))
            state.update(streak=streak, cool_down_until=until.isoformat())
            if self.reports:
                state.update(last_status="rate_limited", last_error=redact.scrub(error)[:300],
                             last_error_at=now.isoformat())
            if streak >= THROTTLE_AFTER:
                state["throttled_slot_run_id"] = self.slot_run_id
            return state

        state = self._update(change)
        streak = int(state.get("streak") or 0)
        if streak == THROTTLE_AFTER:
            log.warning("DeepSeek answered 429 %d times in a row: this slot's calls now go one at a time", streak)
        if streak >= ALERT_AFTER and self.on_streak:
            self.on_streak(streak, error)

    def failed(self, error: str) -> None:
        if not self.reports:
            return
        now = self.clock.now()

        def change(state: dict[str, Any]) -> dict[str, Any]:
            state.update(last_status="failed", last_error=redact.scrub(error)[:300], last_error_at=now.isoformat())
            return state

        self._update(change)

    def answered(self) -> None:
        now = self.clock.now()

        def change(state: dict[str, Any]) -> dict[str, Any]:
            state.update(streak=0)
            if self.reports:
                state.update(last_status="ok", last_ok_at=now.isoformat())
            return state

        self._update(change)


def _at(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def own_state(conn_id: str) -> tuple[str, int]:
    """The state key and advisory lock of the calls made on connection ``conn_id`` (not the slots')."""
    return f"{KEY}:{conn_id}", (_LOCK ^ zlib.crc32(conn_id.encode())) & 0x7FFF_FFFF_FFFF_FFFF


def _release(conn: Any, lock: int) -> None:
    try:
        conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))
    except Exception:  # db.connect releases it all the same as the connection goes back to its pool
        log.warning("the DeepSeek throttle could not be released", exc_info=True)
