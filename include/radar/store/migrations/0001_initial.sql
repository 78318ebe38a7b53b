-- Opportunity Radar schema, version 1.
-- Idempotency lives in the unique constraints: slot_run(run_date, slot), content_item(external_id),
-- analysis_result(content_item_id), daily_report(report_date), notification_log(msg_uuid).
-- Every timestamp is timestamptz (stored UTC); pages and messages convert to Asia/Shanghai.

CREATE TABLE wechat_account (
    id                   bigserial PRIMARY KEY,
    mp_id                text NOT NULL UNIQUE,
    name                 text NOT NULL DEFAULT '',
    last_article_at      timestamptz,
    last_checked_at      timestamptz,
    check_count          integer NOT NULL DEFAULT 0,
    hit_count            integer NOT NULL DEFAULT 0,
    consecutive_failures integer NOT NULL DEFAULT 0,
    backoff_until        timestamptz,
    last_error           text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE slot_run (
    id               bigserial PRIMARY KEY,
    run_date         date NOT NULL,
    slot             text NOT NULL CHECK (slot ~ '^[0-2][0-9]:[0-5][0-9]$'),
    status           smallint NOT NULL DEFAULT 0 CHECK (status IN (0, 1, 2)),  -- 0 running, 1 success, 2 failed
    scheduled_at     timestamptz NOT NULL,
    run_type         text NOT NULL DEFAULT 'scheduled',
    dag_id           text,
    dag_run_id       text,
    attempts         integer NOT NULL DEFAULT 1,
    new_count        integer NOT NULL DEFAULT 0,
    waiting_count    integer NOT NULL DEFAULT 0,
    analysed_count   integer NOT NULL DEFAULT 0,
    failed_count     integer NOT NULL DEFAULT 0,
    opportunity_count integer NOT NULL DEFAULT 0,
    pushed_count     integer NOT NULL DEFAULT 0,
    decision         text,
    step_errors      jsonb NOT NULL DEFAULT '{}',   -- {step: message} of the steps that failed last time they ran
    error            text,
    started_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    CONSTRAINT slot_run_date_slot_key UNIQUE (run_date, slot)
);
CREATE INDEX slot_run_run_date_idx ON slot_run (run_date DESC);

CREATE TABLE content_item (
    id               bigserial PRIMARY KEY,
    external_id      text NOT NULL,
    account_id       bigint REFERENCES wechat_account (id),
    mp_id            text NOT NULL DEFAULT '',
    title            text NOT NULL DEFAULT '',
    url              text NOT NULL DEFAULT '',
    published_at     timestamptz NOT NULL,
    raw_html_size    integer NOT NULL DEFAULT 0,
    clean_text       text NOT NULL DEFAULT '',
    content_hash     text,
    body_status      smallint NOT NULL DEFAULT 1 CHECK (body_status IN (0, 1, 2)), -- 0 waiting for body, 1 ready, 2 unusable
    analyzed_status  smallint NOT NULL DEFAULT 0 CHECK (analyzed_status IN (0, 1, 2, 3)), -- 0 pending, 1 analysing, 2 done, 3 failed
    attempts         integer NOT NULL DEFAULT 0,
    last_error       text,
    first_slot_run_id bigint REFERENCES slot_run (id),
    last_slot_run_id bigint REFERENCES slot_run (id),    -- the slot that last tried to analyse it
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT content_item_external_id_key UNIQUE (external_id)
);
CREATE INDEX content_item_published_at_idx ON content_item (published_at DESC);
CREATE INDEX content_item_pending_idx ON content_item (analyzed_status, published_at)
    WHERE body_status = 1 AND analyzed_status IN (0, 3);
CREATE INDEX content_item_waiting_idx ON content_item (published_at) WHERE body_status = 0;
CREATE INDEX content_item_hash_idx ON content_item (content_hash);
CREATE INDEX content_item_last_slot_run_idx ON content_item (last_slot_run_id) WHERE analyzed_status = 3;

CREATE TABLE analysis_result (
    id                 bigserial PRIMARY KEY,
    content_item_id    bigint NOT NULL REFERENCES content_item (id),
    slot_run_id        bigint REFERENCES slot_run (id),
    reused_from_id     bigint REFERENCES analysis_result (id),
    score              smallint NOT NULL CHECK (score BETWEEN 0 AND 100),
    has_opportunity    boolean NOT NULL,
    top_type           text NOT NULL,
    summary            text NOT NULL,
    result_json        jsonb NOT NULL,
    model              text NOT NULL,
    prompt_version     text NOT NULL,
    prompt_tokens      integer NOT NULL DEFAULT 0,
    completion_tokens  integer NOT NULL DEFAULT 0,
    reasoning_tokens   integer NOT NULL DEFAULT 0,
    cache_hit_tokens   integer NOT NULL DEFAULT 0,
    cache_miss_tokens  integer NOT NULL DEFAULT 0,
    cost_usd           numeric(12, 6) NOT NULL DEFAULT 0,
    latency_ms         integer NOT NULL DEFAULT 0,
    llm_calls          integer NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT analysis_result_content_item_id_key UNIQUE (content_item_id)
);
CREATE INDEX analysis_result_slot_run_idx ON analysis_result (slot_run_id, score DESC);
CREATE INDEX analysis_result_created_at_idx ON analysis_result (created_at DESC);

CREATE TABLE opportunity (
    id                 bigserial PRIMARY KEY,
    analysis_result_id bigint NOT NULL REFERENCES analysis_result (id) ON DELETE CASCADE,
    position           smallint NOT NULL,
    name               text NOT NULL,
    type               text NOT NULL,
    targets            jsonb NOT NULL DEFAULT '[]',
    direction          text NOT NULL DEFAULT '',
    horizon            text NOT NULL DEFAULT '',
    catalyst           text NOT NULL DEFAULT '',
    risks              jsonb NOT NULL DEFAULT '[]',
    evidence           jsonb NOT NULL DEFAULT '[]',
    confidence         real NOT NULL DEFAULT 0,
    CONSTRAINT opportunity_analysis_position_key UNIQUE (analysis_result_id, position)
);

CREATE TABLE daily_report (
    id           bigserial PRIMARY KEY,
    report_date  date NOT NULL,
    status       smallint NOT NULL DEFAULT 0 CHECK (status IN (0, 1, 2)), -- 0 building, 1 ok, 2 failed (fallback digest)
    digest_md    text NOT NULL DEFAULT '',
    digest_json  jsonb NOT NULL DEFAULT '{}',
    slots_done   text[] NOT NULL DEFAULT '{}',
    stats        jsonb NOT NULL DEFAULT '{}',
    model        text,
    prompt_version text,
    error        text,
    slot_run_id  bigint REFERENCES slot_run (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT daily_report_report_date_key UNIQUE (report_date)
);

CREATE TABLE notification_log (
    id           bigserial PRIMARY KEY,
    msg_uuid     text NOT NULL,
    report_date  date NOT NULL,
    slot         text NOT NULL,
    push_type    text NOT NULL,        -- opportunity | daily
    target_url   text NOT NULL,
    channel      text NOT NULL,        -- redacted channel label (scheme + host), never the secret URL
    slot_run_id  bigint REFERENCES slot_run (id),
    title        text NOT NULL DEFAULT '',
    status       smallint NOT NULL DEFAULT 0 CHECK (status IN (0, 1, 2)), -- 0 pending, 1 sent, 2 failed
    attempts     integer NOT NULL DEFAULT 0,
    error        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    sent_at      timestamptz,
    CONSTRAINT notification_log_msg_uuid_key UNIQUE (msg_uuid)
);
CREATE INDEX notification_log_report_date_idx ON notification_log (report_date, push_type);

-- A slot that decided not to push (or could not: backfill, late, suppressed) says why here.
CREATE TABLE push_decision (
    id           bigserial PRIMARY KEY,
    slot_run_id  bigint NOT NULL REFERENCES slot_run (id),
    decision     text NOT NULL,
    detail       jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX push_decision_slot_run_idx ON push_decision (slot_run_id);

-- Small key/value cache for service state such as the WeRSS token and its expiry.
CREATE TABLE service_state (
    key          text PRIMARY KEY,
    value        jsonb NOT NULL,
    expires_at   timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
