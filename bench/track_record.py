"""Time the track record's step over a year of picks: from a cold cache, a warm one, a full recompute, the next day.

Creates a throw-away database (year.scratch_database, as bench/pages.py does), seeds a year of radar
data (year.seed), turns every analysis scoring 60 or more into a sent opportunity push naming one of
``--instruments`` A-share codes (so ~1,500 picks over ~300 instruments), then runs the real step
(track_record.update) with a synthetic market-data source (include/radar_demo/synthetic_market.py): akshare's
call shapes, deterministic prices for any symbol, each call waiting ``--latency`` seconds (a network round
trip; 0 measures the radar alone).

- cold: an empty cache: every instrument's bars, the calendar and the listings are fetched once;
- warm: the same day again: nothing is fetched (one fetch per instrument and day), the open picks computed again;
- recompute: the same day, every pick's reference and outcomes cleared first: every pick of the year computed
  again from the cache, nothing fetched (a backfill, a cleared task, a changed rule);
- next day: one incremental fetch per instrument (the last week of bars), the open picks computed.

    RADAR_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python -m bench.track_record
"""

from __future__ import annotations

import argparse
import logging
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from include.radar.core import db
from include.radar.core.slots import SHANGHAI
from include.radar_demo import synthetic_market, year

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    logging.getLogger("include.radar.report.track_record").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--instruments", type=int, default=300)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each market-data call waits")
    args = parser.parse_args(argv)
    today = datetime.now(UTC).astimezone(SHANGHAI).date()
    with year.scratch_database(year.bench_server_url()) as url:
        year.seed(url, today, args.days, random.Random(42))
        pushes = synthetic_market.make_picks(url, args.instruments)
        evening = datetime.combine(today, datetime.min.time(), tzinfo=SHANGHAI).replace(hour=22, minute=30)
        print(f"{args.days} days of picks: {pushes} sent pushes naming {args.instruments} instruments; "
              f"market-data calls wait {args.latency:.2f} s each")
        print(f"\n{'run':<12} {'seconds':>8} {'calls':>6} {'fetched':>8} {'cached':>7} {'picks':>6} {'measured':>9}")
        runs = (("cold", evening), ("warm", evening + timedelta(minutes=5)),
                ("recompute", evening + timedelta(minutes=10)), ("next day", evening + timedelta(days=1)))
        for label, now in runs:
            if label == "recompute":
                synthetic_market.forget_outcomes(url)
            caller = synthetic_market.SyntheticCaller(args.latency)
            seconds, run = synthetic_market.follow(url, caller, now)
            print(f"{label:<12} {seconds:>8.2f} {caller.calls:>6} {run.fetched:>8} {run.from_cache:>7} "
                  f"{run.computed:>6} {run.measured:>9}")
        with db.connect(url) as conn:
            row = conn.execute("SELECT count(*) AS picks, count(*) FILTER (WHERE status = 'measurable') AS m, "
                               "(SELECT count(*) FROM market_bar) AS bars FROM track_pick").fetchone()
        print(f"\n{row['picks']} picks ({row['m']} measurable), {row['bars']} cached bars")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
