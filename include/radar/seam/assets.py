"""The radar's Airflow Assets, for users' own DAGs scheduled on them (data-aware scheduling) and the Assets view:
``radar://daily-report``, an event per daily report whose push reached a channel (its extra: the day, the
counts, the page's link), and ``radar://opportunity``, an event per opportunity an opportunity push told of.

The tasks declare **aliases** as outlets, not the Assets: Airflow emits an event for every Asset outlet of a task
that succeeds, and a rerun that pushes nothing must emit nothing; through an alias only the events the task adds
exist (``outlet_events[alias].add``). A consumer schedules on the Asset: ``schedule=Asset("radar://daily-report")``.
The links are unsigned: an event's extra sits in Airflow's metadata, read with an Airflow login. docs/pushes.md.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Asset, AssetAlias

DAILY_REPORT = Asset("radar://daily-report")
OPPORTUNITY = Asset("radar://opportunity")
DAILY_REPORT_ALIAS = AssetAlias("radar-daily-report")
OPPORTUNITY_ALIAS = AssetAlias("radar-opportunity")


# what a step's result calls each Asset (the steps import nothing of Airflow)
BY_KIND = {"daily-report": (DAILY_REPORT, DAILY_REPORT_ALIAS), "opportunity": (OPPORTUNITY, OPPORTUNITY_ALIAS)}


def emit(result: Any) -> Any:
    """Add the events a push step's result names (``asset_events``: [[kind, extra], …], kind a key of
    :data:`BY_KIND`; none when nothing was pushed) to the running task's outlets; the result without them is
    the task's XCom."""
    if not isinstance(result, dict):
        return result
    events = result.get("asset_events") or []
    if events:
        from airflow.sdk import get_current_context

        outlets = get_current_context()["outlet_events"]
        for kind, extra in events:
            asset, alias = BY_KIND[kind]
            outlets[alias].add(asset, extra=extra)
    return {k: v for k, v in result.items() if k != "asset_events"}
