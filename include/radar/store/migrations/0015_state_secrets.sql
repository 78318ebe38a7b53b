-- Issue 24 §6 (defence in depth): the pages' login reads service_state for the statuses it shows and the
-- profile form's key, never the WeRSS login token the tasks cache there (werss:token:<host>:<user>). Row
-- security binds every login but the table's owner (the radar's own login, the tasks') and superusers; the
-- policy names no role, so a dump restores on any server.
ALTER TABLE service_state ENABLE ROW LEVEL SECURITY;
CREATE POLICY service_state_not_tokens ON service_state FOR SELECT USING (key NOT LIKE 'werss:token:%');
