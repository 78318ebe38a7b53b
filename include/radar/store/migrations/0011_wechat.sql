-- Issue 24 §7-8: WeChat's own failure modes (a body still to come, WeChat's pages instead of a body, the share of
-- the accounts a day covered).
--
-- An article first seen without its body is rechecked at every slot for its first 24 hours after it was first
-- seen (then 6 h later, then daily), so the moment it was first seen is kept; rows stored before this migration
-- count from when they were stored.
ALTER TABLE content_item ADD COLUMN first_seen_at timestamptz;
UPDATE content_item SET first_seen_at = created_at;
ALTER TABLE content_item ALTER COLUMN first_seen_at SET DEFAULT now(), ALTER COLUMN first_seen_at SET NOT NULL;

-- A body that is WeChat's verification page (环境异常), a cut body, or a deleted or blocked article's page
-- (include/radar/body_check.py) is never analysed: counted per account by kind, with the last reason, and on
-- the slot that met it.
ALTER TABLE wechat_account
    ADD COLUMN bodies_verification integer NOT NULL DEFAULT 0,
    ADD COLUMN bodies_incomplete   integer NOT NULL DEFAULT 0,
    ADD COLUMN bodies_gone         integer NOT NULL DEFAULT 0,
    ADD COLUMN last_body_problem    text,
    ADD COLUMN last_body_problem_at timestamptz;
ALTER TABLE slot_run ADD COLUMN body_problems integer NOT NULL DEFAULT 0;

-- Articles stored before this check whose text is the verification page and that no analysis has used yet:
-- back to waiting for their real body (due at the next slot), so they are never paid for. The page is known by
-- its shape, as in body_check.py: its notice, and at most 40 other characters once its phrases are removed (an
-- article that quotes the notice keeps its text).
UPDATE content_item
SET body_status = 0, clean_text = '', content_hash = NULL, next_body_check_at = now(),
    last_error = 'WeChat''s verification page (环境异常) saved instead of the body; waiting for the real body'
WHERE body_status = 1 AND analyzed_status IN (0, 3) AND char_length(clean_text) <= 400
  AND clean_text LIKE '%完成验证后即可继续访问%'
  AND char_length(regexp_replace(
        replace(replace(replace(replace(clean_text, '当前环境异常', ''), '完成验证后即可继续访问', ''), '环境异常', ''),
                '去验证', ''),
        '[[:space:][:punct:]，。！？、：；“”「」]', '', 'g')) <= 40;

-- Which accounts a day covered (include/radar/coverage.py): the accounts WeRSS's account list named at a slot
-- of the day (the slot's Shanghai date), and whether their article list was read at one.
CREATE TABLE account_day (
    account_id bigint NOT NULL REFERENCES wechat_account (id),
    day        date NOT NULL,
    listed_at  timestamptz NOT NULL,
    read_at    timestamptz,
    PRIMARY KEY (account_id, day)
);
CREATE INDEX account_day_day_idx ON account_day (day);
