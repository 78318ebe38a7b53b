"""``cli check``: one command that says whether a deployment will work, one line per check (docs/check.md).

It reads the settings and connections the tasks read and tries each with a real, cheap call, bounded by
``--timeout``; WeRSS gets one login at most, never retried (five refused logins lock its account). A
:class:`Line` is ✓ works, ! works but wants a look, ✗ will not work, and says what to do when not ✓. Lines pass
through redact.scrub before they are printed or stored, so no secret leaves; the result row in service_state
(:data:`STATE_KEY`, for the health panel) and the optional test pushes are all the check writes.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from include.radar.core import redact
from include.radar.core.clock import SYSTEM, Clock

STATE_KEY = "check:last"
DEFAULT_TIMEOUT = 10.0
T = TypeVar("T")


class Mark(StrEnum):
    OK = "✓"
    WARN = "!"
    FAIL = "✗"


@dataclass(frozen=True)
class Line:
    """One check's outcome: ``area`` (``WeRSS``), what was checked (``login``), what was found, and for a line
    that is not ✓ what to do about it."""

    area: str
    name: str
    mark: Mark
    text: str
    fix: str = ""

    def render(self) -> str:
        fix = f" → {self.fix}" if self.fix and self.mark is not Mark.OK else ""
        return redact.scrub(f"{self.mark} {self.area} · {self.name}: {self.text}{fix}")


def ok(area: str, name: str, text: str) -> Line:
    return Line(area, name, Mark.OK, text)


def warn(area: str, name: str, text: str, fix: str) -> Line:
    return Line(area, name, Mark.WARN, text, fix)


def fail(area: str, name: str, text: str, fix: str) -> Line:
    return Line(area, name, Mark.FAIL, text, fix)


@dataclass
class Options:
    timeout: float = DEFAULT_TIMEOUT
    send_test: bool = False
    llm_call: bool = False
    clock: Clock = SYSTEM  # the loader's: what every line's time, budget and day are read on


@dataclass
class Report:
    lines: list[Line]
    at: datetime

    def count(self, mark: Mark) -> int:
        return sum(1 for line in self.lines if line.mark is mark)

    @property
    def exit_code(self) -> int:
        return 1 if self.count(Mark.FAIL) else 0

    def summary(self) -> str:
        verdict = "按现在的配置不能工作" if self.exit_code else "可以工作" if not self.count(Mark.WARN) else \
            "可以工作，有几处要看一看"
        return f"{self.count(Mark.OK)} ✓，{self.count(Mark.WARN)} !，{self.count(Mark.FAIL)} ✗：这套部署{verdict}"

    def as_state(self) -> dict[str, Any]:
        """What the health panel shows: when, the counts, and the lines that are not ✓ (scrubbed)."""
        return {"at": self.at.isoformat(), "ok": self.count(Mark.OK), "warnings": self.count(Mark.WARN),
                "failures": self.count(Mark.FAIL),
                "failing": [line.render() for line in self.lines if line.mark is Mark.FAIL][:20],
                "warning_lines": [line.render() for line in self.lines if line.mark is Mark.WARN][:20]}


class Timeout(RuntimeError):
    """A call gave no answer within the check's timeout."""


def bounded(call: Callable[[], T], seconds: float, what: str) -> T:
    """``call()`` in a daemon thread, abandoned after ``seconds``: for the libraries whose own timeouts the
    check cannot set (Airflow's metadata engine, akshare), so that a dead host costs seconds."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True, name=f"check:{what}")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise Timeout(f"{what} 在 {seconds:g} 秒内没有回答")
    if "error" in box:
        raise box["error"]
    return box["value"]


def reason(exc: BaseException, limit: int = 240) -> str:
    """An error in one line, scrubbed and cut (what a check line quotes)."""
    text = re.sub(r"\s+", " ", str(exc)).strip() or exc.__class__.__name__
    return redact.scrub(text)[:limit]
