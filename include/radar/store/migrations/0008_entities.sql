-- Issue 15 §3: a page per company/entity (the opportunities' targets) and 30-day trends. The entity page asks
-- "which opportunities name this target" (targets ? name): a GIN index answers it without reading them all.
CREATE INDEX opportunity_targets_idx ON opportunity USING gin (targets);
CREATE INDEX slot_run_run_date_id_idx ON slot_run (run_date, id);
