-- The shadow evaluation's money and failures (include/radar/evaluation.py, docs/evaluation.md).

-- failed: its endpoint failed article after article and the run stopped; reason says why it stopped, failed or
-- was refused as a code the pages put in words (cap, time, held, config, failing, crashed, refused), note the detail
ALTER TABLE evaluation DROP CONSTRAINT evaluation_status_check;
ALTER TABLE evaluation ADD CONSTRAINT evaluation_status_check
    CHECK (status IN ('planned', 'running', 'done', 'stopped', 'refused', 'failed'));
ALTER TABLE evaluation ADD COLUMN reason text;
-- the candidate's own off-peak prices and where they came from (published, given, deployment); the current set-up
-- it is compared with, as configured when it started (model, thinking, reasoning effort, prompt version)
ALTER TABLE evaluation ADD COLUMN prices jsonb;
ALTER TABLE evaluation ADD COLUMN baseline jsonb;

-- An evaluation's claims are kept by the slots' functions (store/claims.py): its attempts have a lease too
ALTER TABLE evaluation_attempt ADD COLUMN lease_until timestamptz;
-- The cap: each call's worst case is reserved on its attempt before the call is made, and released once what the
-- ladder cost is in the ledger; what a run that died left reserved stays counted (it may have been billed)
ALTER TABLE evaluation_attempt ADD COLUMN reserved numeric(14, 6) NOT NULL DEFAULT 0 CHECK (reserved >= 0);
