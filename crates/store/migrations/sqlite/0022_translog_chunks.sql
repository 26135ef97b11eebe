-- The root of each aligned run of 256 leaves of a day's tree (the last run may be
-- shorter), stored with the day's leaves: an inclusion proof then reads one run of leaves
-- and these roots, never the whole day. Days published before this table have no rows
-- until the server computes them from the leaves. Append-only like the leaves.
CREATE TABLE translog_chunks (
    log_date    TEXT NOT NULL REFERENCES translog_roots (log_date),
    chunk_index BIGINT NOT NULL,
    chunk_root  TEXT NOT NULL,
    PRIMARY KEY (log_date, chunk_index)
);
CREATE TRIGGER translog_chunks_no_update BEFORE UPDATE ON translog_chunks
BEGIN SELECT RAISE(ABORT, 'translog_chunks is append-only'); END;
CREATE TRIGGER translog_chunks_no_delete BEFORE DELETE ON translog_chunks
BEGIN SELECT RAISE(ABORT, 'translog_chunks is append-only'); END;
