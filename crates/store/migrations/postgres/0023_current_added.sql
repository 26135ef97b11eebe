-- The TAXII collection and the pull feeds read current records a page at a time in the
-- order they were added (oldest first for TAXII, newest first for the feeds), from the
-- position after the previous page's last record.
CREATE INDEX hash_records_current_added ON hash_records (added_at, id)
    WHERE status = 'current';
