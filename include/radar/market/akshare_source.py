"""The market-data source the radar uses: the akshare library (MIT; Eastmoney, Sina and Shenwan's public data).

akshare is the one free library that reaches every instrument a pick can name, with backward-adjusted bars and
an exchange calendar, without a token; but its calls scrape public endpoints that change. So it is pinned and
treated as an outside service: each call runs under its own deadline in a worker thread, any failure is a
``SourceError`` for that request, and every request verifies TLS (the Shenwan calls ask for ``verify=False``:
a server that cannot prove who it is gives no benchmark). It is imported inside ``LibraryCaller.__call__``
only (it is heavy): the DAG file, the pages and the other tasks never load it. Why akshare, and the calls
and columns read: docs/track-record.md.
"""

from __future__ import annotations

import logging
import math
import threading
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from include.radar.core import http
from include.radar.core.clock import SYSTEM
from include.radar.core.slots import SHANGHAI
from include.radar.market import Bar, MinuteBar, SourceError
from include.radar.market.instruments import Instrument, a_share

log = logging.getLogger(__name__)
MINUTES = 5


class Caller(Protocol):
    """Runs one library function by name and returns its table as records (one dict per row)."""

    def __call__(self, function: str, **kwargs: Any) -> list[dict[str, Any]]: ...


class LibraryCaller:
    """Calls akshare. Each call runs in a daemon thread and is abandoned after ``timeout`` seconds (a request the
    library makes without a timeout of its own cannot hold the task); calls are spaced ``min_interval`` apart
    (Eastmoney and Sina refuse bursts)."""

    def __init__(self, timeout: float = 30.0, min_interval: float = 0.5) -> None:
        self.timeout = timeout
        self.min_interval = min_interval
        self._last = 0.0

    def __call__(self, function: str, **kwargs: Any) -> list[dict[str, Any]]:
        wait = self._last + self.min_interval - SYSTEM.monotonic()
        if wait > 0:
            SYSTEM.sleep(wait)
        result: dict[str, Any] = {}

        def run() -> None:
            try:
                import akshare  # heavy (pandas, a JS engine): only the track-record task loads it

                # its answers capped by what they decode to; TLS verified even where it asks for none (Shenwan)
                with http.requests_capped(http.REQUESTS_MARKET_MAX_BYTES), http.requests_verified():
                    frame = getattr(akshare, function)(**kwargs)
                result["rows"] = [] if frame is None else frame.to_dict("records")
            except BaseException as exc:  # handed to the caller's thread below
                result["error"] = exc

        worker = threading.Thread(target=run, name=f"akshare-{function}", daemon=True)
        worker.start()
        worker.join(self.timeout)
        self._last = SYSTEM.monotonic()
        if worker.is_alive():
            raise SourceError(f"akshare.{function} gave no answer within {self.timeout:.0f}s")
        if "error" in result:
            exc = result["error"]
            raise SourceError(f"akshare.{function} failed: {type(exc).__name__}: {str(exc)[:200]}") from exc
        return result["rows"]


# --------------------------------------------------------------------------------------------- parsing


def _day(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str) and len(value) >= 8:
        text = value.strip()[:10]
        try:
            return date.fromisoformat(text) if "-" in text else datetime.strptime(text[:8], "%Y%m%d").date()
        except ValueError:
            return None
    to_pydate = getattr(value, "date", None)  # a pandas Timestamp
    return to_pydate() if callable(to_pydate) else None


def _num(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def parse_daily(rows: list[dict[str, Any]], start: date, end: date) -> list[Bar]:
    """Daily bars from records with Chinese (日期 开盘 收盘 最高 最低) or English (date open …) columns; rows
    without a date or a positive close are skipped, days outside [start, end] dropped, one bar per day."""
    bars: dict[date, Bar] = {}
    for row in rows:
        if not isinstance(row, dict):
            continue
        day = _day(row.get("日期", row.get("date")))
        close = _num(row.get("收盘", row.get("close")))
        if day is None or close is None or not start <= day <= end:
            continue
        bars[day] = Bar(day, _num(row.get("开盘", row.get("open"))), _num(row.get("最高", row.get("high"))),
                        _num(row.get("最低", row.get("low"))), close)
    return [bars[d] for d in sorted(bars)]


def parse_minutes(rows: list[dict[str, Any]], day: date) -> list[MinuteBar]:
    """5-minute bars of ``day`` (时间 is the bar's end, 'YYYY-MM-DD HH:MM[:SS]'), as (start, open), oldest first."""
    out: dict[datetime, MinuteBar] = {}
    for row in rows:
        if not isinstance(row, dict):
            continue
        try:
            end = datetime.fromisoformat(str(row.get("时间", "")).strip()[:19])
        except ValueError:
            continue
        price = _num(row.get("开盘"))
        if price is None or end.date() != day:
            continue
        start = (end - timedelta(minutes=MINUTES)).replace(tzinfo=SHANGHAI)
        out[start] = MinuteBar(start, price)
    return [out[k] for k in sorted(out)]


def _ymd(day: date) -> str:
    return day.strftime("%Y%m%d")


class LibrarySource:
    """The ``Source`` (include/radar/market/__init__.py) over akshare's calls (or recorded answers to them)."""

    def __init__(self, caller: Caller, name: str = "akshare") -> None:
        self.call = caller
        self.name = name

    def daily(self, instrument: Instrument, start: date, end: date) -> list[Bar]:
        code, span = instrument.code, {"start_date": _ymd(start), "end_date": _ymd(end)}
        if instrument.market in ("SH", "SZ", "BJ") and instrument.kind == "stock":
            rows = self.call("stock_zh_a_hist", symbol=code, period="daily", adjust="hfq", **span)
        elif instrument.market in ("SH", "SZ") and instrument.kind == "etf":
            rows = self.call("fund_etf_hist_em", symbol=code, period="daily", adjust="hfq", **span)
        elif instrument.market in ("SH", "SZ") and instrument.kind == "index":
            rows = self.call("index_zh_a_hist", symbol=code, period="daily", **span)
        elif instrument.market == "CSI":
            rows = self.call("stock_zh_index_hist_csindex", symbol=code, **span)
        elif instrument.market == "HK":
            rows = self.call("stock_hk_hist", symbol=code, period="daily", adjust="hfq", **span)
        elif instrument.market == "HKI":
            rows = self.call("stock_hk_index_daily_sina", symbol=code)
        elif instrument.market == "SW":
            rows = self.call("index_hist_sw", symbol=code, period="day")
        else:
            raise SourceError(f"no daily bars for {instrument.key} from {self.name}")
        return parse_daily(rows, start, end)

    def intraday(self, instrument: Instrument, day: date) -> list[MinuteBar] | None:
        span = {"start_date": f"{day.isoformat()} 09:00:00", "end_date": f"{day.isoformat()} 16:00:00"}
        function: str | None = None
        extra: dict[str, Any] = {}
        if instrument.market in ("SH", "SZ", "BJ") and instrument.kind == "stock":
            function, extra = "stock_zh_a_hist_min_em", {"adjust": "hfq"}
        elif instrument.market in ("SH", "SZ") and instrument.kind == "etf":
            function, extra = "fund_etf_hist_min_em", {"adjust": "hfq"}
        elif instrument.market in ("SH", "SZ") and instrument.kind == "index":
            function = "index_zh_a_hist_min_em"
        if function is None:
            return None
        return parse_minutes(self.call(function, symbol=instrument.code, period=str(MINUTES), **span, **extra), day)

    def calendar(self) -> list[date]:
        days = {_day(r.get("trade_date")) for r in self.call("tool_trade_date_hist_sina") if isinstance(r, dict)}
        return sorted(d for d in days if d is not None)

    def listings(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for row in self.call("stock_info_a_code_name"):
            code, name = str(row.get("code", "")).strip().zfill(6), str(row.get("name", "")).strip()
            found = a_share(code, None) if code.isdigit() and len(code) == 6 else None
            if found is not None and name:
                out.append((found.key, name))
        for row in self.call("fund_etf_spot_em"):  # an ETF's name tells its limit (创业板ETF: ±20 %)
            code, name = str(row.get("代码", "")).strip().zfill(6), str(row.get("名称", "")).strip()
            found = a_share(code, None) if code.isdigit() and len(code) == 6 else None
            if found is not None and found.kind == "etf" and name:
                out.append((found.key, name))
        for row in self.call("stock_hk_spot_em"):
            code, name = str(row.get("代码", "")).strip(), str(row.get("名称", "")).strip()
            if code.isdigit() and name:
                out.append((f"HK:{code.zfill(5)}", name))
        return out


def library_source(timeout: float) -> LibrarySource:
    return LibrarySource(LibraryCaller(timeout=timeout))

