-- The transparency log's hashes (leaf_hash, hash_sha256, chunk_root) as their 32 bytes
-- instead of 64 hex characters: half the size in each row and index. Blobs compare as
-- their bytes, in the order of the lowercase hex, so a day's tree order is unchanged.
-- SQLite changes a column's type by copying the table: the old tables are renamed (their
-- triggers and indexes dropped first, so the names are free), copied and dropped.
DROP TRIGGER translog_entries_no_update;
DROP TRIGGER translog_entries_no_delete;
DROP TRIGGER translog_exits_no_update;
DROP TRIGGER translog_exits_no_delete;
DROP TRIGGER translog_chunk_starts_no_update;
DROP TRIGGER translog_chunk_starts_no_delete;
DROP TRIGGER translog_chunks_no_update;
DROP TRIGGER translog_chunks_no_delete;
DROP INDEX translog_entries_sha256;
DROP INDEX translog_chunk_starts_hash;
ALTER TABLE translog_exits RENAME TO translog_exits_hex;
ALTER TABLE translog_entries RENAME TO translog_entries_hex;
ALTER TABLE translog_chunk_starts RENAME TO translog_chunk_starts_hex;
ALTER TABLE translog_chunks RENAME TO translog_chunks_hex;

CREATE TABLE translog_entries (
    leaf_hash       BLOB NOT NULL,
    entered         TEXT NOT NULL REFERENCES translog_roots (log_date),
    executable_name TEXT NOT NULL,
    hash_sha256     BLOB NOT NULL,
    version         TEXT NOT NULL,
    platform        TEXT NOT NULL,
    arch            TEXT NOT NULL,
    PRIMARY KEY (leaf_hash, entered)
) WITHOUT ROWID;
CREATE TABLE translog_exits (
    leaf_hash BLOB NOT NULL,
    entered   TEXT NOT NULL,
    last_day  TEXT NOT NULL REFERENCES translog_roots (log_date),
    PRIMARY KEY (leaf_hash, entered),
    FOREIGN KEY (leaf_hash, entered) REFERENCES translog_entries (leaf_hash, entered)
) WITHOUT ROWID;
CREATE TABLE translog_chunk_starts (
    log_date    TEXT NOT NULL REFERENCES translog_roots (log_date),
    chunk_index BIGINT NOT NULL,
    leaf_hash   BLOB NOT NULL,
    PRIMARY KEY (log_date, chunk_index)
) WITHOUT ROWID;
CREATE TABLE translog_chunks (
    log_date    TEXT NOT NULL REFERENCES translog_roots (log_date),
    chunk_index BIGINT NOT NULL,
    chunk_root  BLOB NOT NULL,
    PRIMARY KEY (log_date, chunk_index)
);

-- unhex() of anything but hex is NULL, which NOT NULL refuses: a bad row fails the
-- migration rather than being stored as something else.
INSERT INTO translog_entries (leaf_hash, entered, executable_name, hash_sha256, version,
                              platform, arch)
SELECT unhex(leaf_hash), entered, executable_name, unhex(hash_sha256), version, platform, arch
FROM translog_entries_hex ORDER BY leaf_hash, entered;
INSERT INTO translog_exits (leaf_hash, entered, last_day)
SELECT unhex(leaf_hash), entered, last_day FROM translog_exits_hex ORDER BY leaf_hash, entered;
INSERT INTO translog_chunk_starts (log_date, chunk_index, leaf_hash)
SELECT log_date, chunk_index, unhex(leaf_hash) FROM translog_chunk_starts_hex
ORDER BY log_date, chunk_index;
INSERT INTO translog_chunks (log_date, chunk_index, chunk_root)
SELECT log_date, chunk_index, unhex(chunk_root) FROM translog_chunks_hex
ORDER BY log_date, chunk_index;
DROP TABLE translog_exits_hex;
DROP TABLE translog_entries_hex;
DROP TABLE translog_chunk_starts_hex;
DROP TABLE translog_chunks_hex;

CREATE INDEX translog_entries_sha256 ON translog_entries (hash_sha256);
CREATE INDEX translog_chunk_starts_hash ON translog_chunk_starts (log_date, leaf_hash);
CREATE TRIGGER translog_entries_no_update BEFORE UPDATE ON translog_entries
BEGIN SELECT RAISE(ABORT, 'translog_entries is append-only'); END;
CREATE TRIGGER translog_entries_no_delete BEFORE DELETE ON translog_entries
BEGIN SELECT RAISE(ABORT, 'translog_entries is append-only'); END;
CREATE TRIGGER translog_exits_no_update BEFORE UPDATE ON translog_exits
BEGIN SELECT RAISE(ABORT, 'translog_exits is append-only'); END;
CREATE TRIGGER translog_exits_no_delete BEFORE DELETE ON translog_exits
BEGIN SELECT RAISE(ABORT, 'translog_exits is append-only'); END;
CREATE TRIGGER translog_chunk_starts_no_update BEFORE UPDATE ON translog_chunk_starts
BEGIN SELECT RAISE(ABORT, 'translog_chunk_starts is append-only'); END;
CREATE TRIGGER translog_chunk_starts_no_delete BEFORE DELETE ON translog_chunk_starts
BEGIN SELECT RAISE(ABORT, 'translog_chunk_starts is append-only'); END;
CREATE TRIGGER translog_chunks_no_update BEFORE UPDATE ON translog_chunks
BEGIN SELECT RAISE(ABORT, 'translog_chunks is append-only'); END;
CREATE TRIGGER translog_chunks_no_delete BEFORE DELETE ON translog_chunks
BEGIN SELECT RAISE(ABORT, 'translog_chunks is append-only'); END;
