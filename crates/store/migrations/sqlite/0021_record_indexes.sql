-- Indexes of hash_records sized to the queries that use them (every query of the store was
-- read for this; the lookups themselves are served from memory-mapped generations).
--
-- The latest date added was found through an (added_at, id) index that no other query
-- used; it is now kept in this one row, in the transaction of every record write.
CREATE TABLE records_added (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    added_at TEXT
);
INSERT INTO records_added (id, added_at) SELECT 1, MAX(added_at) FROM hash_records;
DROP INDEX hash_records_added_at;
-- Histories are read by family name alone (`family IN (...)`); vendor, platform, arch and
-- status are tested on the rows found. The one-current index keeps its own columns.
DROP INDEX hash_records_family;
CREATE INDEX hash_records_family ON hash_records (family);
-- Only signed records carry a thumbprint, and one is only ever looked up by its value.
DROP INDEX hash_records_sig_thumbprint;
CREATE INDEX hash_records_sig_thumbprint ON hash_records (sig_thumbprint)
    WHERE sig_thumbprint IS NOT NULL;
