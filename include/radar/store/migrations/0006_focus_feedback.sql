-- Issue 15 §1-§2: the reader's focus (one profile) and their feedback on analyses.
--
-- reader_profile: one row (id = 1). watchlist_* are lists the radar matches in an article's title and text
-- (companies, tickers, sectors) or only hands to the model (interests); rules are the TrendRadar-style filter
-- lines (`word` any-of, `+word` must, `!word` never, `/regex/` in each form), applied before any LLM call.
CREATE TABLE reader_profile (
    id          smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    companies   text[] NOT NULL DEFAULT '{}',
    tickers     text[] NOT NULL DEFAULT '{}',
    sectors     text[] NOT NULL DEFAULT '{}',
    interests   text[] NOT NULL DEFAULT '{}',
    rules       text[] NOT NULL DEFAULT '{}',
    updated_by  text,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- An article the reader's rules exclude is never sent to the LLM: analyzed_status 4, the rule in last_error,
-- counted on the slot run that excluded it.
ALTER TABLE content_item DROP CONSTRAINT content_item_analyzed_status_check;
ALTER TABLE content_item ADD CONSTRAINT content_item_analyzed_status_check
    CHECK (analyzed_status IN (0, 1, 2, 3, 4));  -- 0 pending, 1 analysing, 2 done, 3 failed, 4 excluded by the reader
ALTER TABLE slot_run ADD COLUMN excluded_count integer NOT NULL DEFAULT 0;

-- The watchlist entries the radar itself found in the article when it was analysed (the ranking's boost).
ALTER TABLE analysis_result ADD COLUMN watch_hits text[] NOT NULL DEFAULT '{}';

-- One verdict per analysis, the last one given (a second click is idempotent, a different one replaces it).
CREATE TABLE feedback (
    analysis_id  bigint PRIMARY KEY REFERENCES analysis_result (id) ON DELETE CASCADE,
    verdict      text NOT NULL CHECK (verdict IN ('up', 'down', 'knew')),
    via          text NOT NULL,            -- 'link' (a signed action from a page) or 'user:<airflow user>'
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX feedback_updated_at_idx ON feedback (updated_at DESC);
