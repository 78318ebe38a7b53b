"""A month of slots as the reader lives it (tests/month.py): ``--days`` (30) generated days of 16-30 articles from
eight accounts, with reposts, rewrites one to three days late in other words, late and missing bodies, a poison
row a day and a notice the reader's rule excludes, run slot by slot through the real steps on the slots' clock,
retention at its 14-day minimum. Prints, and asserts: pushes per piece of news (at most one), articles lost,
stuck or analysed twice (none), the LLM calls against the analysable articles, the database's size per day,
the connections left open after the last slot, and the slots' time on day 1 against the last day.

    make bench-month                  # thirty days
    make bench-month ARGS="--days 7"
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from datetime import date
from pathlib import Path

from include.radar_demo import year
from include.radar_demo.fakes import FakeDeepSeek, FakeWeRSS, PushSink, serve

REPO = Path(__file__).resolve().parents[1]

FIRST = date(2026, 3, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=30, help="days of slots (default 30)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    for name in ("werkzeug", "include", "httpx", "apprise"):
        logging.getLogger(name).setLevel(logging.ERROR)
    werss = FakeWeRSS(username="bench", password="bench-password")
    deepseek, sink = FakeDeepSeek(api_key="sk-bench"), PushSink()
    werss_at, deepseek_at, sink_at = serve(werss.handle), serve(deepseek.handle), serve(sink.handle)
    with year.scratch_database(year.bench_server_url()) as url:
        os.environ.update({**year.standins_environment(url, werss_at, deepseek_at, sink_at),
                           "AIRFLOW_VAR_RADAR_RETENTION_DAYS": "14"})
        from tests import month  # reads the environment set above

        pieces, daily = month.generate(FIRST, args.days)
        kinds = {k: sum(1 for p in pieces.pieces if p.kind == k) for k in ("news", "repost", "rewrite", "notice")}
        print(f"[bench-month] {args.days} days from {FIRST}: {len(pieces.pieces)} articles ({kinds['news']} news, "
              f"{kinds['repost']} reposts, {kinds['rewrite']} rewrites one to three days late, {kinds['notice']} "
              f"excluded notices; {pieces.late} late and {pieces.missing} missing bodies) and {pieces.poison} poison rows",
              flush=True)
        f = month.run(werss, deepseek, pieces, daily, FIRST, url, log=lambda line: print(line, flush=True))
    pushed = sum(1 for c in f.pushes_per_news.values() if c)
    print(f"\n| figure | value |\n|---|---|\n"
          f"| pieces of news pushed more than once | {len(f.pushed_twice)} (of {pushed} pushed; {len(f.above)} scored ≥ 60) |\n"
          f"| rewrites taken in / joined their news / of news already pushed | {f.rewrites} / {f.rewrites_joined} / "
          f"{f.rewrites_of_pushed} |\n"
          f"| articles lost / stuck / analysed twice | {len(f.lost)} / {len(f.stuck)} / {len(f.twice)} |\n"
          f"| LLM calls / articles to analyse (with a body; not a repost of an analysed one, not excluded) | "
          f"{f.llm_calls} / {f.analysable} |\n"
          f"| database, MB on day 1 / {min(15, f.days)} / {f.days} | {f.mb_per_day[0]:.1f} / {f.mb_per_day[min(14, f.days - 1)]:.1f} / "
          f"{f.mb_per_day[-1]:.1f} |\n"
          f"| connections open after the last slot | {f.connections} |\n"
          f"| mean slot time, day 1 / day {f.days} | {f.slot_seconds[0]:.2f} s / {f.slot_seconds[-1]:.2f} s |")
    problems = [name for name, bad in (("a piece of news pushed twice", f.pushed_twice), ("lost", f.lost),
                                        ("stuck", f.stuck), ("analysed twice", f.twice),
                                        ("connections left open", f.connections)) if bad]
    if problems:
        print(f"[bench-month] FAILED: {', '.join(problems)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
