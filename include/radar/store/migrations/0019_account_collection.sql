-- Evidence that WeRSS is collecting an account (include/radar/coverage.py): when WeRSS last started collecting
-- it, as its own record says (GET /mps/{id}'s sync_time), read by the slots for the accounts with no recent
-- article. An account counts as covered only on such evidence or an article within its rhythm.
ALTER TABLE wechat_account
    ADD COLUMN werss_synced_at  timestamptz,
    ADD COLUMN werss_checked_at timestamptz;
