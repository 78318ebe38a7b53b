"""``evaluate`` (the evaluation DAG's one task, triggered by hand, never on a slot's path): a shadow evaluation of a
candidate model started from the trigger form's params (``dry_run``: only its estimate, nothing recorded), or a
stopped or refused one resumed with a new cap (include/radar/evaluation/shadow.py). Its claims belong to the task try, so
a retry of the task pays for nothing already answered; an evaluation that failed fails the task, without retries."""

from __future__ import annotations

import logging
from typing import Any

from include.radar.analysis import analyst
from include.radar.evaluation import commands, shadow
from include.radar.evaluation import summary as evaluation_report
from include.radar.operations.connections import ConfigurationError
from include.radar.steps.runtime import Runtime

log = logging.getLogger(__name__)


def evaluate(rt: Runtime, params: dict[str, Any], *, attempt: tuple[str, int, int] | None = None,
             run_id: str | None = None, seconds: float | None = None) -> dict[str, Any]:
    """Start (or, with ``resume``, continue) an evaluation; the summary's first lines for the task's XCom."""
    settings = rt.settings
    try:
        evaluation_id = params.get("resume")
        if not evaluation_id:
            candidate = shadow.Candidate(
                model=str(params.get("model") or ""), thinking=bool(params.get("thinking", True)),
                reasoning_effort=str(params.get("reasoning_effort") or "high") if params.get("thinking", True) else None,
                prompt_version=str(params.get("prompt_version") or analyst.ANALYSIS_PROMPT.version),
                conn_id=str(params.get("connection") or settings.deepseek_conn_id),
                prices=str(params["prices"]) if params.get("prices") else None)
            sample = shadow.Sample(days=int(params.get("days") or 14), size=int(params.get("size") or 50),
                                       only_with=str(params.get("only") or "all"))
            cap = float(params.get("cap") or 0)
            if params.get("dry_run"):
                plan, _ = shadow.preview(rt.connect, settings, candidate, sample, cap, clock=rt.clock)
                lines = commands.plan_lines(plan, candidate, cap)
                for line in lines:
                    log.info("%s", line)
                if plan.refused:  # a dry run that would be refused fails as the start would
                    raise ConfigurationError(f"dry run refused: {plan.refused}")
                return {"evaluation_id": None, "dry_run": True, "summary": lines}
            plan = shadow.start(rt.connect, settings, candidate, sample, cap, created_by=f"dag:{run_id or '-'}",
                                clock=rt.clock)
            if plan.refused:
                raise ConfigurationError(f"evaluation {plan.evaluation_id} refused: {plan.refused} (resume it with a "
                                         "higher cap)")
            evaluation_id = plan.evaluation_id
        elif params.get("cap"):
            refused = shadow.new_cap(rt.connect, settings, int(evaluation_id), float(params["cap"]))
            if refused:
                raise ConfigurationError(f"evaluation {evaluation_id} still refused: {refused}")
    except (shadow.EvaluationError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"evaluation params: {exc}") from exc
    owner = "|".join((run_id or "manual", *(str(a) for a in attempt))) if attempt else None
    try:
        result = shadow.run(rt.connect, settings, int(evaluation_id), claimer=owner,
                            deadline=None if seconds is None else rt.clock.monotonic() + seconds, clock=rt.clock)
    except shadow.EvaluationError as exc:  # an endpoint that over-reported: no retry helps
        raise ConfigurationError(f"evaluation {evaluation_id}: {exc}") from exc
    with rt.connect() as conn:
        summary = evaluation_report.load(conn, int(evaluation_id), rt.clock.now(), settings=settings)
    lines = evaluation_report.lines(summary) if summary else []
    for line in lines:
        log.info("%s", line)
    if result.failed:
        raise ConfigurationError(f"evaluation {evaluation_id} failed: {result.stopped}")
    return {"evaluation_id": int(evaluation_id), "stopped": result.stopped, "counts": result.counts,
            "summary": lines[:6]}
