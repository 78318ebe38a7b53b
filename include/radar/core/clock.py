"""The radar's one clock: the moment (UTC, aware), the day in Asia/Shanghai (the radar's day: its slots, its
budget, its reports), and the counters a time budget is measured on (``monotonic``: seconds that only go
forward; ``cpu``: this thread's CPU time, which a busy neighbour does not add to).

Every entry point gets its clock from the loader with its settings and database (``Runtime.load``, the pages'
app, ``cli``): the system's :class:`Clock`. A test or a script that needs another hour gives its own, a
:class:`FixedClock` or a subclass, where the radar takes one (``Runtime(clock=…)``, ``Budget(…, clock)``,
``spending.budget_reached(…, clock)``): nothing patches a module's global to move time. Pure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from include.radar.core.slots import SHANGHAI


class Clock:
    """The system's clock."""

    def now(self) -> datetime:
        """This moment, aware, in UTC."""
        return datetime.now(UTC)

    def shanghai(self) -> datetime:
        """This moment in Asia/Shanghai, the radar's time of day."""
        return self.now().astimezone(SHANGHAI)

    def today(self) -> date:
        """The radar's day: today's date in Asia/Shanghai (00:05 there is already the next UTC day's 16:05)."""
        return self.shanghai().date()

    def monotonic(self) -> float:
        """Seconds that only go forward (what a deadline or a budget of seconds is counted on)."""
        return time.monotonic()

    def cpu(self) -> float:
        """This thread's CPU time in seconds (what a regex rule's cost is counted on)."""
        return time.thread_time()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a backoff, a poll): on the system's clock, for real."""
        time.sleep(max(seconds, 0.0))


SYSTEM = Clock()


@dataclass
class FixedClock(Clock):
    """A clock at the moment it is told: ``at`` (moved by :meth:`advance`, or set). Its counters are the
    system's unless a step is given: then ``monotonic`` moves ``step`` seconds from ``counter`` each time it is
    read, and ``cpu`` ``cpu_step`` seconds from ``cpu_counter`` (0: it stands still; a test may also add to a
    counter itself), so that a budget of seconds runs out, or never does, at a test's will."""

    at: datetime
    step: float | None = None
    cpu_step: float | None = None
    counter: float = 1000.0
    cpu_counter: float = 0.0

    def __post_init__(self) -> None:
        if self.at.tzinfo is None:
            raise ValueError("a FixedClock needs an aware moment")

    def now(self) -> datetime:
        return self.at.astimezone(UTC)

    def advance(self, by: timedelta) -> None:
        self.at += by

    def monotonic(self) -> float:
        if self.step is None:
            return super().monotonic()
        self.counter += self.step
        return self.counter

    def cpu(self) -> float:
        if self.cpu_step is None:
            return super().cpu()
        self.cpu_counter += self.cpu_step
        return self.cpu_counter

    def sleep(self, seconds: float) -> None:
        """With a step, no wait: the moment and the counter move on by ``seconds`` (a backoff takes no real
        time in a test, and its deadline still sees it); without one, the system's wait."""
        if self.step is None:
            super().sleep(seconds)
            return
        self.at += timedelta(seconds=max(seconds, 0.0))
        self.counter += max(seconds, 0.0)


class ClockAt(Clock):
    """The system's clock set to another moment: it reads ``at`` when made and runs on at the system's pace
    (a test's slot at its own hour, whose deadlines still pass in real seconds); the counters are the system's."""

    def __init__(self, at: datetime) -> None:
        if at.tzinfo is None:
            raise ValueError("a ClockAt needs an aware moment")
        self._offset = at.astimezone(UTC) - datetime.now(UTC)

    def now(self) -> datetime:
        return datetime.now(UTC) + self._offset
