"""akshare's calls answered from recorded responses: the tests, the demo and the benchmark run the real
source's parsing (akshare_source.LibrarySource) on them, with no network.

A response is a JSON file of records, the shape ``frame.to_dict("records")`` gives for the call, dates written
as ISO strings: ``<directory>/<function>/<symbol>.json`` for a call with a symbol, ``<directory>/<function>.json``
for one without (the calendar, the listings). A call nothing was recorded for answers an empty table, as the
library does for a code it does not know. ``shift_days`` moves every date by whole weeks (the demo replays its
recorded weeks on the week it runs in; weekdays stay weekdays).
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from include.radar.market import SourceError
from include.radar.market.akshare_source import LibrarySource

DATE_COLUMNS = ("日期", "date", "trade_date")
TIME_COLUMNS = ("时间",)


class RecordedCaller:
    def __init__(self, directory: Path | str, shift_days: int = 0) -> None:
        self.directory = Path(directory)
        if shift_days % 7:
            raise ValueError("recorded prices are shifted by whole weeks only (weekdays stay weekdays)")
        self.shift = timedelta(days=shift_days)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._cache: dict[Path, list[dict[str, Any]]] = {}

    def _load(self, path: Path) -> list[dict[str, Any]]:
        if path not in self._cache:
            try:
                rows = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
            except (OSError, ValueError) as exc:
                raise SourceError(f"recorded answer {path.name} unreadable: {exc}") from exc
            self._cache[path] = [self._shifted(r) for r in rows if isinstance(r, dict)]
        return self._cache[path]

    def _shifted(self, row: dict[str, Any]) -> dict[str, Any]:
        if not self.shift:
            return row
        out = dict(row)
        for column in DATE_COLUMNS:
            if isinstance(out.get(column), str):
                out[column] = (date.fromisoformat(out[column][:10]) + self.shift).isoformat()
        for column in TIME_COLUMNS:
            if isinstance(out.get(column), str):
                out[column] = (datetime.fromisoformat(out[column][:19]) + self.shift).isoformat(sep=" ")
        return out

    def __call__(self, function: str, **kwargs: Any) -> list[dict[str, Any]]:
        self.calls.append((function, kwargs))
        symbol = kwargs.get("symbol")
        path = self.directory / function / f"{symbol}.json" if symbol else self.directory / f"{function}.json"
        return list(self._load(path))


def recorded_source(directory: Path | str, shift_days: int = 0) -> LibrarySource:
    return LibrarySource(RecordedCaller(directory, shift_days), name="recorded")
