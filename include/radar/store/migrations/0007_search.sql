-- Issue 15 §3: search over every article and its analysis. The lexemes are made in Python (search.py: jieba
-- words and Chinese character pairs) when an article or an analysis is stored, and written with
-- array_to_tsvector; NULL until then (`python -m include.radar.cli migrate` indexes what is missing, so rows
-- stored before this migration are found too).
ALTER TABLE content_item ADD COLUMN search_tsv tsvector;
CREATE INDEX content_item_search_idx ON content_item USING gin (search_tsv);
CREATE INDEX content_item_unindexed_idx ON content_item (id) WHERE search_tsv IS NULL;
