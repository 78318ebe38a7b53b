-- Issue 54 §1: the reader's Atom feed (/feed.atom) opens with a long-lived token of its own, one live token per
-- Airflow user, made, rotated and revoked from the profile page. The URL carries the key and its HMAC under
-- link_secret (web/routes/feed.py); the key alone opens nothing, and a revoked key opens nothing whatever its
-- signature. The key is the primary key: the pages' login writes this table and has no sequence to use.
CREATE TABLE feed_token (
    key         text PRIMARY KEY CHECK (key ~ '^[0-9a-f]{32}$'),
    reader      text NOT NULL,            -- the Airflow user it is for (web/auth.py user_name)
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE UNIQUE INDEX feed_token_live_idx ON feed_token (reader) WHERE revoked_at IS NULL;
