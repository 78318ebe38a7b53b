-- Issue 24 §7-8: WeChat's own failure modes. An article first seen without its body is rechecked at every
-- slot for its first 24 hours after it was first seen (then 6 h later, then daily), so the moment it was
-- first seen is kept; rows stored before this migration count from when they were stored.
ALTER TABLE content_item ADD COLUMN first_seen_at timestamptz;
UPDATE content_item SET first_seen_at = created_at;
ALTER TABLE content_item ALTER COLUMN first_seen_at SET DEFAULT now(), ALTER COLUMN first_seen_at SET NOT NULL;
