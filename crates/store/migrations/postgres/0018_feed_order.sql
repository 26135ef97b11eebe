-- The public feed is read a page at a time in (executable name, platform, arch, id) order,
-- from the position after the previous page's last record.
CREATE INDEX hash_records_current_feed ON hash_records (executable_name, platform, arch, id)
    WHERE status = 'current';
