-- Issue 26 §3: retention. After `retention_days` the daily slot prunes an article's body (clean_text, the
-- bulk of the database with its search lexemes): the title, link, account, hash, statuses, the analysis, its
-- evidence checks, pushes, feedback and the track record stay. The search lexemes are cut down to the title's
-- and the analysis's, so an old article is still found by them. body_pruned_at says when; a pruned article is
-- never offered for analysis again.
ALTER TABLE content_item ADD COLUMN body_pruned_at timestamptz;
-- what the next prune looks at: the articles not pruned yet (after a year, the last retention_days days only)
CREATE INDEX content_item_unpruned_idx ON content_item (published_at) WHERE body_pruned_at IS NULL;
