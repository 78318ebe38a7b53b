-- Issue 15 §3: the weekly summary. One row per week (its Monday, Asia/Shanghai), built at Sunday's 22:00 slot
-- from the week's analyses by one digest call (source llm) or, when that call fails, from the database
-- (source fallback); a rerun that finds a row built by the LLM does not pay for another call. Its push goes
-- through notification_log (push_type 'weekly') like every other message: at most once per channel.
CREATE TABLE weekly_report (
    id           bigserial PRIMARY KEY,
    week_start   date NOT NULL CHECK (extract(isodow FROM week_start) = 1),
    status       smallint NOT NULL DEFAULT 1 CHECK (status IN (1, 3)),  -- 1 ok (LLM digest), 3 partial (fallback)
    digest_md    text NOT NULL DEFAULT '',
    digest_json  jsonb NOT NULL DEFAULT '{}',
    stats        jsonb NOT NULL DEFAULT '{}',
    model        text,
    prompt_version text,
    error        text,
    slot_run_id  bigint REFERENCES slot_run (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT weekly_report_week_start_key UNIQUE (week_start)
);
