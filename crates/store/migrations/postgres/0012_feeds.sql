-- When each record entered the store, strictly increasing in commit order and distinct per
-- record (a few microseconds apart): the feeds' "date added", which a client polling with
-- "added after the last one I saw" relies on to miss nothing and see nothing twice. Rows
-- older than this column take their valid_from.
ALTER TABLE hash_records ADD COLUMN added_at TIMESTAMPTZ;
UPDATE hash_records SET added_at = valid_from;
CREATE INDEX hash_records_added_at ON hash_records (added_at, id);
