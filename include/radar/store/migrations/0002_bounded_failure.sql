-- Issue 12 (bounded failure): every bad row, slow call and crash is counted where it happened, every
-- analysis attempt is on record, and a rerun adds to what a slot was instead of writing over it.

-- WeRSS rows skipped as malformed, and body checks that found no body yet, per account (cumulative).
ALTER TABLE wechat_account
    ADD COLUMN rows_skipped     integer NOT NULL DEFAULT 0,
    ADD COLUMN bodies_missing   integer NOT NULL DEFAULT 0,
    ADD COLUMN last_skip_reason text;

-- What a slot did, accumulated over its runs: rows skipped, analyses deferred to later slots, handled
-- problems (warnings, shown on the pages) and every step error it ever had (error_log, append-only).
-- step_errors keeps only the errors not yet fixed by a later run of the same step: they decide the status.
ALTER TABLE slot_run
    ADD COLUMN skipped_count  integer NOT NULL DEFAULT 0,
    ADD COLUMN deferred_count integer NOT NULL DEFAULT 0,
    ADD COLUMN warnings       jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN error_log      jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN deadline_at    timestamptz;            -- the daily push deadline of the run, when it has one

-- An article whose body WeRSS has not fetched yet is checked again on a schedule (next slot, +6 h, +24 h),
-- not at every slot. An article being analysed holds a lease: who holds it and until when.
ALTER TABLE content_item
    ADD COLUMN body_checks        integer NOT NULL DEFAULT 0,
    ADD COLUMN next_body_check_at timestamptz,
    ADD COLUMN claimed_by         text,
    ADD COLUMN lease_until        timestamptz;
UPDATE content_item SET lease_until = updated_at + interval '1 hour' WHERE analyzed_status = 1;
CREATE INDEX content_item_lease_idx ON content_item (lease_until) WHERE analyzed_status = 1;

-- One row per claim of an article for analysis: the attempt cap, the slot's failed count and the pages
-- all read from here. outcome: running (leased), analysed, reused (a repost's twin), failed (the ladder or
-- DeepSeek gave up), crashed (an unexpected error), expired (the lease ran out: the worker was lost),
-- interrupted (the slot's deadline cut the call: the article waits for a later slot), released (a
-- configuration error before any paid call: not counted).
CREATE TABLE analysis_attempt (
    id              bigserial PRIMARY KEY,
    content_item_id bigint NOT NULL REFERENCES content_item (id),
    slot_run_id     bigint REFERENCES slot_run (id),
    claimed_by      text NOT NULL,
    attempt         integer NOT NULL,
    outcome         text NOT NULL DEFAULT 'running' CHECK (outcome IN
                    ('running', 'analysed', 'reused', 'failed', 'crashed', 'expired', 'interrupted', 'released')),
    error           text,
    llm_calls       integer NOT NULL DEFAULT 0,
    started_at      timestamptz NOT NULL DEFAULT now(),
    lease_until     timestamptz NOT NULL,
    finished_at     timestamptz
);
CREATE INDEX analysis_attempt_slot_run_idx ON analysis_attempt (slot_run_id, outcome);
CREATE INDEX analysis_attempt_item_idx ON analysis_attempt (content_item_id);

-- daily_report.status 3: built from what was done (fallback digest, pending or failed work listed);
-- 2 now means that nothing could be built. Every earlier "failed" report had a fallback digest.
ALTER TABLE daily_report DROP CONSTRAINT daily_report_status_check;
ALTER TABLE daily_report ADD CONSTRAINT daily_report_status_check CHECK (status IN (0, 1, 2, 3));
UPDATE daily_report SET status = 3 WHERE status = 2 AND digest_md <> '';
