-- Issue 13 (operations): what every LLM call cost at the prices of its time, a daily budget, and the
-- operator's alerts, each sent at most once per cause and day.

-- An analysis's cost is in the configured currency (USD or CNY), no longer always dollars.
ALTER TABLE analysis_result RENAME COLUMN cost_usd TO cost;
ALTER TABLE analysis_result ADD COLUMN currency text NOT NULL DEFAULT 'USD';

-- One row per ladder of DeepSeek calls that was answered at least once: analyses that succeeded, failed,
-- crashed or were interrupted, and the daily digest. The day's spend (the budget, the pages) is the sum
-- over spent_on, the Asia/Shanghai day of the calls.
CREATE TABLE llm_spend (
    id                bigserial PRIMARY KEY,
    spent_on          date NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    purpose           text NOT NULL CHECK (purpose IN ('analysis', 'digest')),
    content_item_id   bigint REFERENCES content_item (id),
    attempt_id        bigint REFERENCES analysis_attempt (id),
    slot_run_id       bigint REFERENCES slot_run (id),
    model             text NOT NULL,
    calls             integer NOT NULL DEFAULT 0,
    answered          integer NOT NULL DEFAULT 0,
    peak_calls        integer NOT NULL DEFAULT 0,
    rate_limited      integer NOT NULL DEFAULT 0,
    prompt_tokens     bigint NOT NULL DEFAULT 0,
    cache_hit_tokens  bigint NOT NULL DEFAULT 0,
    cache_miss_tokens bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    reasoning_tokens  bigint NOT NULL DEFAULT 0,
    cost              numeric(14, 6) NOT NULL DEFAULT 0,
    currency          text NOT NULL
);
CREATE INDEX llm_spend_day_idx ON llm_spend (spent_on);
CREATE INDEX llm_spend_slot_run_idx ON llm_spend (slot_run_id);

-- Articles a slot left for the next day because the day's budget was reached (not failed, not dropped).
-- An article held back by the budget carries the day, so the daily report counts it once.
ALTER TABLE slot_run ADD COLUMN budget_deferred integer NOT NULL DEFAULT 0;
ALTER TABLE content_item ADD COLUMN budget_deferred_on date;

-- The operator's alerts: one row per cause and Shanghai day, whatever raised it how often; its delivery
-- goes through notification_log (push_type 'alert', identified by the cause), so it is sent once.
CREATE TABLE operator_alert (
    id           bigserial PRIMARY KEY,
    alert_date   date NOT NULL,
    cause        text NOT NULL,
    title        text NOT NULL,
    detail       text NOT NULL DEFAULT '',
    occurrences  integer NOT NULL DEFAULT 1,
    slot_run_id  bigint REFERENCES slot_run (id),
    dag_run_id   text,
    delivered    boolean NOT NULL DEFAULT false,
    delivery_error text,
    first_at     timestamptz NOT NULL DEFAULT now(),
    last_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT operator_alert_day_cause_key UNIQUE (alert_date, cause)
);
