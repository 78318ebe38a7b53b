-- A shadow evaluation: a candidate set-up (model, thinking, effort, prompt version, its own connection) run over
-- a bounded sample of stored articles. Its answers live here, apart from analysis_result: nothing that pushes,
-- ranks, reports or keeps the track record reads these tables.
CREATE TABLE evaluation (
    id               bigserial PRIMARY KEY,
    created_at       timestamptz NOT NULL DEFAULT now(),
    created_by       text NOT NULL DEFAULT '',
    model            text NOT NULL,
    thinking         boolean NOT NULL,
    reasoning_effort text,
    prompt_version   text NOT NULL,
    conn_id          text NOT NULL,
    days             integer NOT NULL CHECK (days BETWEEN 1 AND 366),
    sample_size      integer NOT NULL CHECK (sample_size BETWEEN 1 AND 500),
    only_with        text NOT NULL DEFAULT 'all' CHECK (only_with IN ('all', 'feedback', 'outcomes')),
    cap              numeric(14, 6) NOT NULL CHECK (cap >= 0),
    currency         text NOT NULL,
    estimate         numeric(14, 6) NOT NULL DEFAULT 0,
    -- planned: sampled, not run yet; running; done: every article answered or failed for good; stopped: the cap,
    -- the day's budget or a configuration error left articles pending (resume it); refused: the estimate was over
    -- the cap, no call was made
    status           text NOT NULL DEFAULT 'planned'
                     CHECK (status IN ('planned', 'running', 'done', 'stopped', 'refused')),
    note             text NOT NULL DEFAULT '',
    finished_at      timestamptz
);

-- One row per sampled article: its claim (the same lease and attempt rules as a slot's analyses) and the
-- candidate's answer, checked like a real one. baseline_analysis_id is the reader's analysis it is compared with.
CREATE TABLE evaluation_item (
    evaluation_id        bigint NOT NULL REFERENCES evaluation (id) ON DELETE CASCADE,
    content_item_id      bigint NOT NULL REFERENCES content_item (id) ON DELETE CASCADE,
    baseline_analysis_id bigint REFERENCES analysis_result (id) ON DELETE SET NULL,
    status               smallint NOT NULL DEFAULT 0 CHECK (status IN (0, 1, 2, 3)), -- pending, claimed, done, failed
    attempts             integer NOT NULL DEFAULT 0,
    claimed_by           text,
    lease_until          timestamptz,
    last_error           text,
    score                integer,
    has_opportunity      boolean,
    top_type             text,
    summary              text,
    result_json          jsonb,
    evidence_verified    boolean,
    consistency_note     text,
    failed_rungs         integer NOT NULL DEFAULT 0,
    prompt_tokens        integer NOT NULL DEFAULT 0,
    completion_tokens    integer NOT NULL DEFAULT 0,
    cache_hit_tokens     integer NOT NULL DEFAULT 0,
    cost                 numeric(14, 6) NOT NULL DEFAULT 0,
    latency_ms           integer NOT NULL DEFAULT 0,
    llm_calls            integer NOT NULL DEFAULT 0,
    answered_at          timestamptz,
    PRIMARY KEY (evaluation_id, content_item_id)
);

-- How each claim of an evaluation's article ended, as analysis_attempt does for the slots.
CREATE TABLE evaluation_attempt (
    id              bigserial PRIMARY KEY,
    evaluation_id   bigint NOT NULL,
    content_item_id bigint NOT NULL,
    claimed_by      text NOT NULL,
    attempt         integer NOT NULL,
    outcome         text NOT NULL DEFAULT 'running'
                    CHECK (outcome IN ('running', 'analysed', 'failed', 'crashed', 'released', 'interrupted',
                                       'expired')),
    error           text,
    llm_calls       integer NOT NULL DEFAULT 0,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    FOREIGN KEY (evaluation_id, content_item_id) REFERENCES evaluation_item (evaluation_id, content_item_id)
        ON DELETE CASCADE
);

-- An evaluation's calls are real money: in the ledger (so the day's budget counts them), under the evaluation,
-- with no article or slot (an article's cost on its page stays what its own analysis cost).
ALTER TABLE llm_spend ADD COLUMN evaluation_id bigint REFERENCES evaluation (id);
ALTER TABLE llm_spend DROP CONSTRAINT llm_spend_purpose_check;
ALTER TABLE llm_spend ADD CONSTRAINT llm_spend_purpose_check CHECK (purpose IN ('analysis', 'digest', 'evaluation'));
CREATE INDEX llm_spend_evaluation_idx ON llm_spend (evaluation_id) WHERE evaluation_id IS NOT NULL;
