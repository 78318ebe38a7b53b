"""Like against like: the basis a pick's excess return is measured on (pure: keys and bars in, bars and words out).

Stocks and ETFs are backward-adjusted (dividends reinvested), so their benchmark is the CSI 300 total-return
index (``H00300``); where the library has no total-return series (Hang Seng, Shenwan) the benchmark stays a
price index and ``excess_bias`` says beside the figure that it is biased upward. CSI publishes H00300's close
only, so its opens and 5-minute prices are the price index's scaled by the day's ratio of the two closes, which
within a day is the total-return index's to well under a basis point (docs/track-record.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date

from include.radar.market import Bar, MinuteBar
from include.radar.market.instruments import CSI300, CSI300TR, HSI, Instrument, from_key

# a total-return index's price twin: its opens and 5-minute bars, scaled
PRICE_OF: dict[str, Instrument] = {CSI300TR.key: CSI300}
# the dividend yields a price benchmark leaves out (a year; concentrated in June–August)
YIELDS = {CSI300.key: "2.5–3%", HSI.key: "3–4%"}
SECTOR_YIELD = "随行业不同，约 1–5%"
INDEX_KEY_SQL = "'^(SW|HKI|CSI):|^SH:000|^SZ:399'"  # store/track.py's mirror of an index's key (from_key)


def price_twin(benchmark: Instrument) -> Instrument | None:
    """The price index whose opens and 5-minute bars stand in for a total-return index's; None for a price index."""
    return PRICE_OF.get(benchmark.key)


def total_return_bars(total: Mapping[date, Bar], price: Mapping[date, Bar]) -> dict[date, Bar]:
    """The total-return index's daily bars, its open, high and low taken from the price index scaled by the day's
    ratio of the closes; a day the price index lacks keeps the source's bar as it is."""
    out: dict[date, Bar] = {}
    for day, bar in total.items():
        twin = price.get(day)
        if twin is None or not twin.close:
            out[day] = bar
            continue
        ratio = bar.close / twin.close

        def scaled(value: float | None, ratio: float = ratio) -> float | None:
            return None if value is None else value * ratio

        out[day] = Bar(day, scaled(twin.open), scaled(twin.high), scaled(twin.low), bar.close)
    return out


def scaled_minutes(minutes: Sequence[MinuteBar] | None, total: Mapping[date, Bar], price: Mapping[date, Bar],
                   day: date) -> list[MinuteBar] | None:
    """The price index's 5-minute bars of ``day`` as the total-return index's; None without both closes."""
    if minutes is None or day not in total or day not in price or not price[day].close:
        return None
    ratio = total[day].close / price[day].close
    return [MinuteBar(m.start, m.open * ratio) for m in minutes]


def excess_bias(instrument: str | None, benchmark: str | None, benchmark_name: str = "") -> str:
    """What an excess figure leaves out, said beside it: '' when the pick is measured like against like (an
    adjusted stock or ETF against a total-return index, an index against a price index)."""
    inst, bench = from_key(instrument or ""), from_key(benchmark or "")
    if inst is None or bench is None or inst.kind == "index" or bench.key in PRICE_OF:
        return ""
    name = benchmark_name or {CSI300.key: CSI300.name, HSI.key: HSI.name}.get(bench.key, "行业指数")
    yearly = YIELDS.get(bench.key, SECTOR_YIELD if bench.market == "SW" else "")
    return (f"基准{name}是价格指数（不含分红），标的按后复权（含分红）计：超额偏高约为基准同期的股息率"
            f"{f'（每年{yearly}，集中在 6–8 月）' if yearly else ''}")
