-- An opportunity push tells of every item it lists, not only of its top (whose analysis its target_url names): the
-- leads of the items it shows, so that no later slot pushes the news of any of them again (store/events.py).
ALTER TABLE notification_log ADD COLUMN shown_ids bigint[];
