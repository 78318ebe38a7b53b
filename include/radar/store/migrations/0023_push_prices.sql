-- What a daytime push said of an analysis's coded targets' moves since the article (pushes/context.py), as it
-- said it, with when it was worked out: the analysis page shows the same figures. The first push that told of
-- the analysis writes it; a later slot or a rerun never changes it (nothing of it is pushed twice).
CREATE TABLE push_prices (
    analysis_id  bigint PRIMARY KEY REFERENCES analysis_result (id) ON DELETE CASCADE,
    computed_at  timestamptz NOT NULL,
    lines        jsonb NOT NULL
);
