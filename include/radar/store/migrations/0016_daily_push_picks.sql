-- Which top picks each daily push showed. A daily report can be rebuilt and pushed again (a forced redo):
-- the second push may list picks the first did not, and the track record dates a pick at the first push that
-- showed it (the report's first push is before its reader could have seen such a pick).
CREATE TABLE daily_push_pick (
    notification_id bigint NOT NULL REFERENCES notification_log (id) ON DELETE CASCADE,
    analysis_id     bigint NOT NULL REFERENCES analysis_result (id) ON DELETE CASCADE,
    PRIMARY KEY (notification_id, analysis_id)
);
CREATE INDEX daily_push_pick_analysis_idx ON daily_push_pick (analysis_id);
