"""View models of the report pages: store rows in, small immutable objects out.

Everything here is a pure function of its arguments (no database, no clock, no settings lookup), so the
page logic that matters — slot states, push status, ordering, which links carry a signature, what counts as
a safe link — is tested without a server. Templates only lay out what these objects hold.

Text from articles and from the LLM is never marked safe here, with one exception: the daily digest,
rendered by markdown-it with raw HTML disabled and no link but this app's own page links (a URL the LLM
wrote stays text).
"""

from __future__ import annotations

from include.radar.core.text import span  # noqa: F401
from include.radar.web.views.analysis import (  # noqa: F401
    AnalysisPage,
    EventView,
    OpportunityView,
    Reused,
    _band,
    _texts,
    analysis_page,
    event_view,
    opportunity_views,
)
from include.radar.web.views.common import (  # noqa: F401
    _ANALYSIS_PATH,
    _DAILY_PATH,
    _MD,
    _NOTE_STATUS,
    _REPORT_STATUS,
    _SLOT_STATUS,
    _WEEKDAYS,
    DIRECTION_LABELS,
    PUSH_FAILED,
    PUSH_LABELS,
    PUSH_NONE,
    PUSH_PARTIAL,
    PUSH_PENDING,
    PUSH_SENT,
    PUSH_UNKNOWN,
    PUSH_UNKNOWN_NOTICE,
    REPORT_BUILDING,
    REPORT_EMPTY,
    REPORT_FAILED,
    REPORT_FAILED_NOTICE,
    REPORT_LABELS,
    REPORT_MISSING,
    REPORT_OK,
    REPORT_PARTIAL,
    REPORT_PARTIAL_NOTICE,
    SLOT_DONE,
    SLOT_FAILED,
    SLOT_LABELS,
    SLOT_LATE,
    SLOT_PENDING,
    SLOT_RUNNING,
    TYPE_LABELS,
    LinkRule,
    Links,
    Row,
    _is_app_path,
    _markdown,
    _vet_links,
    day_label,
    digest_link_rewriter,
    direction_label,
    duration,
    error_text,
    local_time,
    money,
    render_markdown,
    safe_http_url,
    short,
    type_label,
)
from include.radar.web.views.daily import (  # noqa: F401
    AnalysisCard,
    DailyPage,
    FailureView,
    PendingView,
    SourceView,
    Stats,
    TopOpportunity,
    _as_int,
    _stats,
    analysis_cards,
    daily_page,
    failure_reasons,
    pending_views,
    source_view,
    top_opportunities,
    watchlist,
)
from include.radar.web.views.overview import (  # noqa: F401
    AccountView,
    DayRowView,
    OverviewPage,
    account_views,
    day_rows,
    overview_page,
)
from include.radar.web.views.slots import (  # noqa: F401
    ChannelPush,
    PushView,
    SlotView,
    StepLink,
    _clock,
    _entries,
    failed_step_links,
    missing_slot_view,
    push_state,
    push_view,
    run_duration,
    silent_label,
    slot_view,
    slot_views,
)
