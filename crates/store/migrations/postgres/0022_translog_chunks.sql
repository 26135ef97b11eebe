-- The root of each aligned run of 256 leaves of a day's tree (the last run may be
-- shorter), stored with the day's leaves: an inclusion proof then reads one run of leaves
-- and these roots, never the whole day. Days published before this table have no rows
-- until the server computes them from the leaves. Append-only like the leaves.
CREATE TABLE translog_chunks (
    log_date    DATE NOT NULL REFERENCES translog_roots (log_date),
    chunk_index BIGINT NOT NULL,
    chunk_root  TEXT NOT NULL,
    PRIMARY KEY (log_date, chunk_index)
);
CREATE TRIGGER translog_chunks_no_change BEFORE UPDATE OR DELETE ON translog_chunks
    FOR EACH ROW EXECUTE FUNCTION translog_append_only();
CREATE TRIGGER translog_chunks_no_truncate BEFORE TRUNCATE ON translog_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION translog_append_only();
