"""The evaluation's commands of ``python -m include.radar.cli``: ``evaluate`` starts one (``--dry-run``: only its
estimate; ``--resume ID``: continue one, with a new ``--cap``) and prints its summary; ``evaluation`` lists them,
or prints one's summary. Exit status: 0 done, 1 stopped or refused (resume it), 2 not started, 3 failed."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from include.radar import store
from include.radar.analysis import analyst, batches
from include.radar.core import loader
from include.radar.core.clock import Clock
from include.radar.core.settings import Settings
from include.radar.core.slots import SHANGHAI
from include.radar.evaluation import shadow
from include.radar.evaluation import summary as evaluation_report

COMMANDS = ("evaluate", "evaluation")
DONE, STOPPED, NOT_STARTED, FAILED = 0, 1, 2, 3


def add_parsers(sub: Any) -> None:
    run = sub.add_parser("evaluate", help="a shadow evaluation of a candidate model over stored articles "
                         "(its answers stored apart, never pushed; its spend under a cap of its own)")
    run.add_argument("--model", help="the candidate's model, e.g. deepseek-flash")
    run.add_argument("--no-thinking", action="store_true", help="thinking off")
    run.add_argument("--effort", default="high", choices=["low", "medium", "high", "max"], help="reasoning effort")
    run.add_argument("--prompt", default=analyst.ANALYSIS_PROMPT.version,
                     help="the analysis prompt version (v1, v2, v3…)")
    run.add_argument("--conn", default=None, help="the candidate's OpenAI-compatible connection, named radar_llm_… (default: DeepSeek's)")
    run.add_argument("--prices", default=None, help="the candidate's off-peak prices per million tokens, as JSON "
                     '{"cache_hit": …, "cache_miss": …, "output": …} (needed when none is published for it)')
    run.add_argument("--days", type=int, default=14, help="articles published in the last N days")
    run.add_argument("--size", type=int, default=50, help=f"at most this many articles (≤ {shadow.MAX_SAMPLE})")
    run.add_argument("--only", default="all", choices=list(shadow.ONLY_WITH),
                     help="only articles the reader gave a verdict on, or whose pick was measured")
    run.add_argument("--cap", type=float, help="the most this evaluation may spend (deepseek_currency)")
    run.add_argument("--dry-run", action="store_true", help="print the sample's size and estimate; record nothing")
    run.add_argument("--resume", type=int, help="continue evaluation ID (nothing answered is paid for again)")
    run.add_argument("--trust-max-tokens", action="store_true", help="run it although its endpoint once reported "
                     "more tokens than max_tokens allows (the run that saw it passed its cap)")
    show = sub.add_parser("evaluation", help="list the evaluations, or print one's summary")
    show.add_argument("id", nargs="?", type=int)


def handle(args: argparse.Namespace) -> int:
    loaded = loader.load()
    settings, connect, clock = loaded.settings, loaded.connect, loaded.clock
    if args.command == "evaluation":
        return _show(connect, args.id, settings, clock)
    if args.resume is not None:
        with connect() as conn:
            row = store.evaluations.get(conn, args.resume)
        if row is not None and args.model and args.model != row["model"]:
            print(f"error: --resume {args.resume} evaluates {row['model']}, not --model {args.model}: start a new "
                  "evaluation for another model", file=sys.stderr)
            return NOT_STARTED
        if row is not None and not args.trust_max_tokens:
            with connect() as conn:
                shadow.check_trusted(conn, row)  # before its cap is touched
        if args.cap is not None:
            refused = shadow.new_cap(connect, settings, args.resume, args.cap)
            if refused:
                print(f"refused: {refused}")
                return STOPPED
        return _run(connect, settings, args.resume, clock, args.trust_max_tokens)
    if not args.model or args.cap is None:
        print("error: --model and --cap are needed to start an evaluation (or --resume ID)")
        return NOT_STARTED
    candidate = _candidate(args, settings)
    sample = shadow.Sample(days=args.days, size=args.size, only_with=args.only)
    if args.dry_run:
        plan, _ = shadow.preview(connect, settings, candidate, sample, args.cap, clock=clock)
        for line in plan_lines(plan, candidate, args.cap):
            print(line)
        return STOPPED if plan.refused else DONE
    plan = shadow.start(connect, settings, candidate, sample, args.cap, created_by="cli", clock=clock)
    print(f"evaluation {plan.evaluation_id}: {plan.articles} articles, estimated {plan.prices.money(plan.estimate)}")
    if plan.refused:
        print(f"refused: {plan.refused} (resume it with a higher --cap: --resume {plan.evaluation_id} --cap …)")
        return STOPPED
    assert plan.evaluation_id is not None
    return _run(connect, settings, plan.evaluation_id, clock, args.trust_max_tokens)


def plan_lines(plan: shadow.Plan, candidate: shadow.Candidate, cap: float) -> list[str]:
    """A dry run's lines: what it would sample and cost, at whose prices, and whether the cap allows it."""
    money = plan.prices.money
    rates = plan.prices.off_peak
    return [
        f"dry run of {candidate.label} on connection {candidate.conn_id} (it answered): nothing recorded, no call made",
        f"  {plan.articles} articles; estimated {money(plan.estimate)} for one call an article, at most "
        f"{money(plan.worst)} with every ladder's repairs (each article's analysis's tokens, every token a cache miss "
        "at peak rates)",
        f"  priced at {candidate.model}'s {shadow.price_source_text(plan.source)} prices, per million tokens "
        f"off-peak: cache hit {rates.cache_hit:g}, miss {rates.cache_miss:g}, output {rates.output:g} {plan.prices.currency}",
        f"  one call at its most (reserved before it is made): {money(plan.most_per_call)}",
        f"  cap {money(cap)}: " + (f"refused, {plan.refused}" if plan.refused else "it would start" + (
            "" if cap >= plan.finishing else ", and may stop on its cap before the end")),
        f"  a cap of {money(up(plan.finishing))} finishes it whatever it needs (every call of every ladder at its most)",
    ]


def _run(connect: Any, settings: Settings, evaluation_id: int, clock: Clock, trust: bool = False) -> int:
    try:
        result = shadow.run(connect, settings, evaluation_id, clock=clock, trust_max_tokens=trust)
    except batches.BatchFailed as exc:  # articles crashed: recorded on their attempts, the evaluation failed
        print(f"failed: {exc}")
        return _show(connect, evaluation_id, settings, clock) or FAILED
    if result.stopped:
        line = f"{'failed' if result.failed else 'stopped'}: {result.stopped}"
        print(red(line) if result.reason == "over_cap" else line)
    shown = _show(connect, evaluation_id, settings, clock)
    return shown or (FAILED if result.failed else STOPPED if result.stopped else DONE)


def up(amount: float) -> float:
    """An amount rounded up to the places it is printed with (format_money's): a cap named is never short."""
    places = 4 if amount < 1 else 2
    return math.ceil(amount * 10**places - 1e-9) / 10**places


def red(line: str) -> str:
    """A line in red on a terminal (a log or a pipe gets it plain)."""
    return f"\033[31m{line}\033[0m" if sys.stdout.isatty() else line


def _candidate(args: argparse.Namespace, settings: Settings) -> shadow.Candidate:
    return shadow.Candidate(model=args.model, thinking=not args.no_thinking,
                                reasoning_effort=None if args.no_thinking else args.effort,
                                prompt_version=args.prompt, conn_id=args.conn or settings.deepseek_conn_id,
                                prices=args.prices)


def _show(connect: Any, evaluation_id: int | None, settings: Settings, clock: Clock) -> int:
    with connect() as conn:
        if evaluation_id is None:
            for row in store.evaluations.listing(conn):
                money = shadow.prices_of(row, settings).money
                print(f"{row['id']:>5}  {row['created_at'].astimezone(SHANGHAI):%Y-%m-%d %H:%M}  {row['model']:<18} {row['status']:<8} "
                      f"{row['answered']}/{row['items']} answered, spent {money(row['spent'])} of {money(row['cap'])}")
            return 0
        summary = evaluation_report.load(conn, evaluation_id, clock.now(), settings=settings)
    if summary is None:
        print(f"error: no evaluation {evaluation_id}")
        return NOT_STARTED
    for number, line in enumerate(evaluation_report.lines(summary)):
        print(red(line) if number == 0 and summary.evaluation.get("over_cap") else line)
    return 0
