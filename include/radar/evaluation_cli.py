"""The evaluation's commands of ``python -m include.radar.cli``: ``evaluate`` starts one (or resumes one with
``--resume ID``) and prints its summary; ``evaluation`` lists them, or prints one's summary."""

from __future__ import annotations

import argparse
import functools
from typing import Any

from include.radar import analyst, db, evaluation, evaluation_report, redact, store
from include.radar.settings import Settings, load_settings

COMMANDS = ("evaluate", "evaluation")


def add_parsers(sub: Any) -> None:
    run = sub.add_parser("evaluate", help="a shadow evaluation of a candidate model over stored articles "
                         "(its answers stored apart, never pushed; its spend in the ledger, under a cap)")
    run.add_argument("--model", help="the candidate's model, e.g. deepseek-flash")
    run.add_argument("--no-thinking", action="store_true", help="thinking off")
    run.add_argument("--effort", default="high", choices=["low", "medium", "high", "max"], help="reasoning effort")
    run.add_argument("--prompt", default=analyst.ANALYSIS_PROMPT.version,
                     help="the analysis prompt version (v1, v2, v3…)")
    run.add_argument("--conn", default=None, help="the candidate's OpenAI-compatible connection (default: DeepSeek's)")
    run.add_argument("--days", type=int, default=14, help="articles published in the last N days")
    run.add_argument("--size", type=int, default=50, help=f"at most this many articles (≤ {evaluation.MAX_SAMPLE})")
    run.add_argument("--only", default="all", choices=list(evaluation.ONLY_WITH),
                     help="only articles the reader gave a verdict on, or whose pick was measured")
    run.add_argument("--cap", type=float, help="the most this evaluation may spend (deepseek_currency)")
    run.add_argument("--resume", type=int, help="continue evaluation ID (nothing answered is paid for again)")
    show = sub.add_parser("evaluation", help="list the evaluations, or print one's summary")
    show.add_argument("id", nargs="?", type=int)


def handle(args: argparse.Namespace) -> int:
    settings = load_settings()
    url = db.database_url(settings.db_conn_id)
    redact.register(db.password_of(url))
    connect = functools.partial(db.connect, url, statement_timeout_s=settings.db_statement_timeout_seconds,
                                lock_timeout_s=settings.db_lock_timeout_seconds)
    money = settings.price_table().money
    if args.command == "evaluation":
        return _show(connect, args.id, money)
    if args.resume is None:
        if not args.model or args.cap is None:
            print("error: --model and --cap are needed to start an evaluation (or --resume ID)")
            return 2
        plan = evaluation.start(connect, settings, _candidate(args, settings), evaluation.Sample(
            days=args.days, size=args.size, only_with=args.only), args.cap, created_by="cli")
        print(f"evaluation {plan.evaluation_id}: {plan.articles} articles, estimated {money(plan.estimate)}")
        if plan.refused:
            print(f"refused: {plan.refused}")
            return 1
        evaluation_id = plan.evaluation_id
    else:
        evaluation_id = args.resume
        if args.cap is not None:
            if not 0 <= args.cap < 1e6:
                raise evaluation.EvaluationError("cap: a non-negative amount")
            with connect() as conn:
                store.evaluations.set_cap(conn, evaluation_id, args.cap)
    result = evaluation.run(connect, settings, evaluation_id)
    if result.stopped:
        print(f"stopped: {result.stopped}")
    return _show(connect, evaluation_id, money) or (1 if result.stopped else 0)


def _candidate(args: argparse.Namespace, settings: Settings) -> evaluation.Candidate:
    return evaluation.Candidate(model=args.model, thinking=not args.no_thinking,
                                reasoning_effort=None if args.no_thinking else args.effort,
                                prompt_version=args.prompt, conn_id=args.conn or settings.deepseek_conn_id)


def _show(connect: Any, evaluation_id: int | None, money: Any) -> int:
    with connect() as conn:
        if evaluation_id is None:
            for row in store.evaluations.listing(conn):
                print(f"{row['id']:>5}  {row['created_at']:%Y-%m-%d %H:%M}  {row['model']:<18} {row['status']:<8} "
                      f"{row['answered']}/{row['items']} answered, spent {money(row['spent'])} of {money(row['cap'])}")
            return 0
        summary = evaluation_report.load(conn, evaluation_id)
    if summary is None:
        print(f"error: no evaluation {evaluation_id}")
        return 2
    for line in evaluation_report.lines(summary, money):
        print(line)
    return 0
