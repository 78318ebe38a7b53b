-- An evaluation whose endpoint reported more for a call than the call reserved (it does not honour max_tokens):
-- the run stopped at once, and this says by how much it passed its cap and which call did it (the first over its
-- reservation: its article, its place in the ladder, its tokens against those asked, its cost against what it
-- reserved). The endpoint (conn_id and model) is not run again unless the operator asks (docs/evaluation.md).
ALTER TABLE evaluation ADD COLUMN over_cap jsonb;
