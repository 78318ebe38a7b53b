"""Market data for the track record, behind one small interface (``Source``), so a second source can stand in.

- ``instruments``: which instrument a pick's targets name, its benchmark, its price limit (pure);
- ``akshare_source``: the source the radar uses, built on the akshare library (imported lazily, inside the
  track-record task only: the DAG file and the pages never import it);
- ``recorded``: the same calls answered from recorded responses in the repository (the tests, the demo, the
  benchmark): the same parsing, no network.

Every price is backward-adjusted (hfq) where the instrument has adjustments, so a stored reference price and a
later close are on one basis and a past bar never changes when a dividend is paid later.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Protocol

from include.radar.market.instruments import Instrument


class SourceError(RuntimeError):
    """The market-data source failed for one request (network, a changed page, a refusal): retried next day."""


@dataclass(frozen=True)
class Bar:
    day: date
    open: float | None
    high: float | None
    low: float | None
    close: float


@dataclass(frozen=True)
class MinuteBar:
    start: datetime  # when the bar's first trade may happen (Asia/Shanghai); its open is the first price after
    open: float


class Source(Protocol):
    """What the track record asks of a market-data source. Every method may raise SourceError."""

    name: str

    def daily(self, instrument: Instrument, start: date, end: date) -> list[Bar]:
        """Daily bars from ``start`` to ``end`` inclusive, oldest first; days without a trade are absent."""
        ...

    def intraday(self, instrument: Instrument, day: date) -> list[MinuteBar] | None:
        """The 5-minute bars of ``day``; None when the source has none for this kind of instrument."""
        ...

    def calendar(self) -> list[date]:
        """The A-share trading days (past and those already published for the year ahead)."""
        ...

    def listings(self) -> list[tuple[str, str]]:
        """(instrument key, name) of every listed A-share and Hong Kong stock."""
        ...
