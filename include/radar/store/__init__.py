"""All of the radar's SQL, parameterised, in one package: one room per table group.

Every function takes an open psycopg connection (``db.connect()``) and leaves committing to the caller's
``with`` block; idempotency rests on the schema's unique keys (``ON CONFLICT``: a duplicate is an answer, not
an error). Callers use ``store.<name>``, and ``store.<room>.<name>`` for the rooms whose names would be unclear
alone: ``track`` (``calendar``, ``listings``, ``bars_of`` speak of the market), ``evaluations``, ``retention``. The rooms: ``slot_runs``, ``articles``
(accounts and articles), ``claims`` (claims, leases, attempts), ``analyses``, ``pushes`` (the notification log),
``events``, ``focus`` (profile, rules, feedback), ``searching``, ``trends``, ``reports`` (the daily report and
the pages' queries), ``operations`` (spend, deferrals, alerts), ``weekly``, ``state``, ``track``, ``evaluations`` and ``retention``.
"""

from __future__ import annotations

from include.radar.store import evaluations, retention, track  # noqa: F401 - reached as store.<room>.<name>
from include.radar.store.analyses import (  # noqa: F401
    analysis_brief,
    analysis_for_hash,
    analysis_for_item,
    day_analyses,
    day_failures,
    existing_analysis_ids,
    get_analysis,
    insert_analysis,
    mark_item_done,
    opportunities_of,
    pending_items,
    slot_analyses,
)
from include.radar.store.articles import (  # noqa: F401
    accounts,
    accounts_listed_between,
    accounts_of_day,
    collection_evidence,
    fill_waiting_body,
    get_item,
    insert_content_item,
    known_external_ids,
    record_account_check,
    record_account_skips,
    record_account_sync,
    record_accounts_listed,
    record_accounts_read,
    record_body_missing,
    record_body_problem,
    silent_accounts,
    upsert_account,
)
from include.radar.store.claims import (  # noqa: F401
    HEARTBEAT,
    LEASE,
    Claim,
    claim_item,
    claim_owner,
    expire_leases,
    finish_attempt,
    items_to_analyse,
    reap_claims,
    renew_claims,
    reset_failed,
    same_task,
)
from include.radar.store.common import (  # noqa: F401
    ANALYSING,
    BODY_READY,
    BODY_UNUSABLE,
    BODY_WAITING,
    DONE,
    FAILED,
    NOTE_FAILED,
    NOTE_PENDING,
    NOTE_SENT,
    NOTE_UNKNOWN,
    PENDING,
    REPORT_BUILDING,
    REPORT_FAILED,
    REPORT_OK,
    REPORT_PARTIAL,
    RUNNING,
    SLOT_FAILED,
    SUCCESS,
    Row,
    dumps,
)
from include.radar.store.events import (  # noqa: F401
    event_members,
    grouped_near,
    lock_grouping,
    pushed_events,
    set_events,
    ungrouped,
)
from include.radar.store.focus import (  # noqa: F401
    EXCLUDED,
    SLOW_RULES_STATE,
    analyses_since,
    exclude_items,
    excluded_count,
    excluded_items,
    excluded_to_recheck,
    feedback_for_ranking,
    feedback_of,
    feedback_version,
    get_profile,
    save_profile,
    set_feedback,
    settle_recheck,
    slow_rules,
    switch_off_rules,
    texts_of,
)
from include.radar.store.operations import (  # noqa: F401
    alerts_between,
    day_budget_deferred,
    day_spend,
    defer_for_budget,
    finish_alert,
    item_spend,
    missed_since_last_run,
    missed_slots,
    record_alert,
    record_spend,
    slot_spend,
    spend_by_day,
    status,
    update_status,
)
from include.radar.store.pushes import (  # noqa: F401
    claim_notification,
    daily_push_sent,
    finish_notification,
    mark_unknown,
    notification,
    stale_notifications,
    start_send,
)
from include.radar.store.reports import (  # noqa: F401
    daily_notifications,
    get_daily_report,
    mark_report_failed,
    recent_days,
    recent_slot_runs,
    report_predates_slot,
    upsert_daily_report,
)
from include.radar.store.searching import (  # noqa: F401
    BANDS,
    Filters,
    account_names,
    index_missing,
    search_articles,
)
from include.radar.store.slot_runs import (  # noqa: F401
    FAILED_OUTCOMES,
    MAX_ERROR_LOG,
    MAX_SLOT_WARNINGS,
    add_deferred,
    add_slot_warnings,
    close_slot_run,
    get_slot_run,
    get_slot_started_at,
    open_slot_run,
    record_ingest,
    record_step,
    refresh_slots_done,
    set_slot_decision,
    slot_failed_count,
    slot_runs_for_day,
)
from include.radar.store.state import (  # noqa: F401
    FORM_KEY_STATE,
    delete_state,
    ensure_state,
    get_state,
    make_form_key,
    set_state,
)
from include.radar.store.trends import (  # noqa: F401
    day_scores,
    entity_analyses,
    entity_daily,
    top_entities,
    topic_daily,
)
from include.radar.store.weekly import (  # noqa: F401
    get_weekly_report,
    upsert_weekly_report,
    week_analyses,
    week_failed,
)
