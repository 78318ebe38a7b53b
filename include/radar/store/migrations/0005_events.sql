-- Issue 14 §3: one entry per real-world event. event_id names an analysis's event by the id of the event's
-- first analysis (its anchor, itself for the first one); event_note says why it joined (similarity to which
-- analysis, shared entities). grouped_at NULL: grouping has not seen it yet (the slot's summarise step and the
-- daily report group what is new, under an advisory lock, in published order).
ALTER TABLE analysis_result ADD COLUMN event_id bigint REFERENCES analysis_result (id);
ALTER TABLE analysis_result ADD COLUMN event_note text;
ALTER TABLE analysis_result ADD COLUMN grouped_at timestamptz;
CREATE INDEX analysis_result_event_id_idx ON analysis_result (event_id);
CREATE INDEX analysis_result_ungrouped_idx ON analysis_result (id) WHERE grouped_at IS NULL;
-- analyses from before grouping stand alone (their history is not regrouped); new ones may join them
UPDATE analysis_result SET event_id = id, grouped_at = now() WHERE grouped_at IS NULL;
