"""Writes the recorded market-data answers the tests, the demo and the benchmark replay
(include/radar_demo/data/market/, read by include/radar/market/recorded.py).

Each file has the shape the akshare call named by its path returns (``frame.to_dict("records")``, the columns
of akshare 1.19.5, dates as ISO strings); the numbers are made up here, deterministically: this project's
machines reach no market-data service, and a fixture's job is the shape and a few stated situations:

- 2026-02-16..20 and 02-23 are the Spring Festival closure (A-shares), 02-17..19 in Hong Kong;
- 600999 does not trade from 2026-02-04 to 02-11 (suspended) and 000018 not after 2026-02-13 (delisted);
- 300750 opens at its +20 % limit on 2026-02-05;
- 600519 and the CSI 300 have 5-minute bars on 2026-02-04;
- the demo's sample opportunities' A-share and Hong Kong targets have daily bars (its pushes' moves);
- the CSI 300's total-return series (H00300) has its closes only, as CSI publishes it, 1.3 times the price
  index's and a further 0.5 % from 2026-03-16 on (a dividend reinvested).

    python -m tools.market_fixtures      # rewrites the files; the output is the same on every run
"""

from __future__ import annotations

import json
import random
from datetime import date, datetime, timedelta
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "include" / "radar_demo" / "data" / "market"
FIRST, LAST = date(2026, 1, 19), date(2026, 4, 30)
CN_CLOSED = {date(2026, 2, d) for d in (16, 17, 18, 19, 20, 23)} | {date(2026, 4, 6)}
HK_CLOSED = {date(2026, 2, d) for d in (17, 18, 19)} | {date(2026, 4, 3), date(2026, 4, 6), date(2026, 4, 7)}


def weekdays() -> list[date]:
    days, d = [], FIRST
    while d <= LAST:
        if d.weekday() < 5:
            days.append(d)
        d += timedelta(days=1)
    return days


CN_DAYS = [d for d in weekdays() if d not in CN_CLOSED]
HK_DAYS = [d for d in weekdays() if d not in HK_CLOSED]


def path(days: list[date], seed: int, start: float, sigma: float, drift: float = 0.0,
         market: dict[date, float] | None = None, beta: float = 0.0) -> dict[date, tuple[float, float, float, float]]:
    rng = random.Random(seed)
    out, close = {}, start
    for d in days:
        change = drift + beta * (market or {}).get(d, 0.0) + rng.gauss(0, sigma)
        open_ = close * (1 + rng.gauss(0, sigma / 3))
        close = close * (1 + change)
        high, low = max(open_, close) * (1 + abs(rng.gauss(0, sigma / 3))), min(open_, close) * (1 - abs(rng.gauss(0, sigma / 3)))
        out[d] = (round(open_, 2), round(high, 2), round(low, 2), round(close, 2))
    return out


def changes(bars: dict[date, tuple[float, float, float, float]]) -> dict[date, float]:
    days = sorted(bars)
    return {d: bars[d][3] / bars[p][3] - 1 for p, d in zip(days, days[1:], strict=False)}


def em_rows(bars, code: str | None = None, with_code: bool = False) -> list[dict]:
    rows, previous = [], None
    for d in sorted(bars):
        o, h, low, c = bars[d]
        pc = previous or o
        row = {"日期": d.isoformat()}
        if with_code:
            row["股票代码"] = code
        row.update({"开盘": o, "收盘": c, "最高": h, "最低": low, "成交量": 100000 + int(c) % 997,
                    "成交额": round(c * 1.0e7, 1), "振幅": round((h - low) / pc * 100, 2),
                    "涨跌幅": round((c / pc - 1) * 100, 2), "涨跌额": round(c - pc, 2), "换手率": 0.85})
        rows.append(row)
        previous = c
    return rows


def sw_rows(bars, code: str) -> list[dict]:
    return [{"代码": code, "日期": d.isoformat(), "收盘": c, "开盘": o, "最高": h, "最低": low, "成交量": 12.5,
             "成交额": 310.2} for d, (o, h, low, c) in sorted(bars.items())]


def minutes(day: date, open_: float, close: float, seed: int, index: bool = False) -> list[dict]:
    rng = random.Random(seed)
    ends = [datetime.combine(day, datetime.min.time()) + timedelta(hours=9, minutes=35 + 5 * i) for i in range(24)]
    ends += [datetime.combine(day, datetime.min.time()) + timedelta(hours=13, minutes=5 + 5 * i) for i in range(24)]
    rows, price = [], open_
    step = (close - open_) / len(ends)
    for end in ends:
        o = round(price, 2)
        price = price + step + rng.gauss(0, abs(open_) * 0.0008)
        c = round(price, 2)
        row = {"时间": end.isoformat(sep=" "), "开盘": o, "收盘": c, "最高": max(o, c), "最低": min(o, c)}
        if index:
            row.update({"成交量": 5000, "成交额": 1.0e8, "振幅": 0.1, "涨跌幅": 0.01, "涨跌额": 0.3, "换手率": 0.0})
        else:
            row.update({"涨跌幅": 0.01, "涨跌额": 0.5, "成交量": 800, "成交额": 7.5e6, "振幅": 0.1, "换手率": 0.01})
        rows.append(row)
    return rows


def csindex_rows(bars, code: str, name: str) -> list[dict]:
    """stock_zh_index_hist_csindex's columns; a total-return series has no open, high or low."""
    rows, previous = [], None
    for d, (_, _, _, c) in sorted(bars.items()):
        rows.append({"日期": d.isoformat(), "指数代码": code, "指数中文全称": name, "指数中文简称": name,
                     "指数英文全称": "CSI 300 Total Return Index", "指数英文简称": "CSI 300 TR", "开盘": None,
                     "最高": None, "最低": None, "收盘": c, "涨跌": round(c - (previous or c), 2),
                     "涨跌幅": round((c / (previous or c) - 1) * 100, 2), "成交量": 1.5e6, "成交金额": 3.2e7,
                     "样本数量": 300, "滚动市盈率": 13.1})
        previous = c
    return rows


def write(name: str, rows: list[dict]) -> None:
    target = OUT / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(rows, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")


def main() -> None:
    csi = path(CN_DAYS, 300, 4000.0, 0.009)
    market = changes(csi)
    write("index_zh_a_hist/000300.json", em_rows(csi))
    dividend = date(2026, 3, 16)
    total = {d: (o, h, low, round(c * 1.3 * (1.005 if d >= dividend else 1.0), 2)) for d, (o, h, low, c) in csi.items()}
    write("stock_zh_index_hist_csindex/H00300.json", csindex_rows(total, "H00300", "沪深300全收益"))
    write("tool_trade_date_hist_sina.json", [{"trade_date": d.isoformat()} for d in CN_DAYS])
    stocks = {
        "600519": path(CN_DAYS, 519, 9050.0, 0.012, 0.0015, market, 0.9),
        "300750": path(CN_DAYS, 750, 610.0, 0.02, 0.001, market, 1.2),
        "601318": path(CN_DAYS, 318, 180.0, 0.012, -0.001, market, 1.0),
        "002594": path(CN_DAYS, 594, 1900.0, 0.018, 0.0, market, 1.1),
        "600999": path(CN_DAYS, 999, 95.0, 0.012, -0.002, market, 1.0),
        "000018": path(CN_DAYS, 18, 3.1, 0.03, -0.01, market, 0.5),
        # the demo's sample opportunities' targets (its pushes say their moves since the article)
        "688012": path(CN_DAYS, 688012, 180.0, 0.022, 0.002, market, 1.3),
        "688072": path(CN_DAYS, 688072, 160.0, 0.024, 0.001, market, 1.3),
        "601899": path(CN_DAYS, 601899, 18.0, 0.015, 0.001, market, 1.0),
        "600276": path(CN_DAYS, 600276, 52.0, 0.014, 0.0, market, 0.8),
        "688235": path(CN_DAYS, 688235, 150.0, 0.02, 0.0, market, 1.0),
    }
    # 300750 opens at its +20 % limit on 2026-02-05 (ChiNext) and stays there
    limit_day = date(2026, 2, 5)
    previous_close = stocks["300750"][CN_DAYS[CN_DAYS.index(limit_day) - 1]][3]
    top = round(previous_close * 1.2, 2)
    stocks["300750"][limit_day] = (top, top, top, top)
    for d in [d for d in stocks["600999"] if date(2026, 2, 4) <= d <= date(2026, 2, 11)]:
        del stocks["600999"][d]
    for d in [d for d in stocks["000018"] if d > date(2026, 2, 13)]:
        del stocks["000018"][d]
    for code, bars in stocks.items():
        write(f"stock_zh_a_hist/{code}.json", em_rows(bars, code, with_code=True))
    write("fund_etf_hist_em/510300.json", em_rows(path(CN_DAYS, 510300, 4.8, 0.009, 0.0, market, 1.0)))
    sectors = {"801081": (1, 0.004, 1.3), "801150": (2, -0.002, 0.8), "801170": (3, 0.001, 0.7),
               "801730": (4, 0.002, 1.1), "801125": (5, 0.0, 0.9), "801890": (6, 0.001, 1.0),
               "801737": (8, 0.001, 1.2)}
    for code, (seed, drift, beta) in sectors.items():
        write(f"index_hist_sw/{code}.json", sw_rows(path(CN_DAYS, seed, 3000.0 + seed * 500, 0.008, drift, market, beta), code))
    hsi = path(HK_DAYS, 7, 26000.0, 0.011)
    write("stock_hk_index_daily_sina/HSI.json", [
        {"date": d.isoformat(), "open": o, "high": h, "low": low, "close": c, "volume": 1.2e9}
        for d, (o, h, low, c) in sorted(hsi.items())])
    hk_market = changes(hsi)
    write("stock_hk_hist/00700.json", em_rows(path(HK_DAYS, 700, 520.0, 0.015, 0.001, hk_market, 1.1)))
    write("stock_hk_hist/02318.json", em_rows(path(HK_DAYS, 2318, 48.0, 0.013, 0.0, hk_market, 1.0)))
    write("stock_hk_hist/00358.json", em_rows(path(HK_DAYS, 358, 16.0, 0.018, 0.001, hk_market, 1.1)))
    day = date(2026, 2, 4)
    write("stock_zh_a_hist_min_em/600519.json", minutes(day, stocks["600519"][day][0], stocks["600519"][day][3], 1))
    write("index_zh_a_hist_min_em/000300.json", minutes(day, csi[day][0], csi[day][3], 2, index=True))
    write("stock_info_a_code_name.json", [
        {"code": "600519", "name": "贵州茅台"}, {"code": "300750", "name": "宁德时代"},
        {"code": "601318", "name": "中国平安"}, {"code": "002594", "name": "比亚迪"},
        {"code": "600999", "name": "招商证券"}, {"code": "000018", "name": "神州长城"}])
    write("stock_hk_spot_em.json", [
        {"序号": 1, "代码": "00700", "名称": "腾讯控股", "最新价": 520.0, "涨跌额": 1.0, "涨跌幅": 0.2, "今开": 519.0,
         "最高": 523.0, "最低": 515.0, "昨收": 519.0, "成交量": 1.5e7, "成交额": 7.8e9},
        {"序号": 2, "代码": "02318", "名称": "中国平安", "最新价": 48.0, "涨跌额": 0.1, "涨跌幅": 0.2, "今开": 47.9,
         "最高": 48.3, "最低": 47.6, "昨收": 47.9, "成交量": 3.0e7, "成交额": 1.4e9}])


if __name__ == "__main__":
    main()
