-- Issue 24 §5: every push is accounted for, even when its sender dies.
-- A row is claimed (pending) before its send, as before; now it also keeps the text as fitted for its channel
-- and the channel's key (a hash of its URL, never the URL), so that a pending row whose send never started can
-- be delivered later by another sender, and send_started_at, written and committed just before the channel
-- is called: a pending row with it set and no outcome is "delivery unknown" (status 3), never resent
-- automatically (the operator is told once and can force a new push).
ALTER TABLE notification_log ADD COLUMN channel_key text;
ALTER TABLE notification_log ADD COLUMN body text;
ALTER TABLE notification_log ADD COLUMN send_started_at timestamptz;
ALTER TABLE notification_log DROP CONSTRAINT notification_log_status_check;
ALTER TABLE notification_log ADD CONSTRAINT notification_log_status_check CHECK (status IN (0, 1, 2, 3));
-- 0 pending, 1 sent, 2 failed, 3 unknown (the send started, no outcome was recorded)
CREATE INDEX notification_log_pending_idx ON notification_log (updated_at) WHERE status = 0;

-- Claims belong to a task try and their short lease is renewed by it: the renewal finds them by owner.
CREATE INDEX content_item_claimed_by_idx ON content_item (claimed_by) WHERE analyzed_status = 1;
