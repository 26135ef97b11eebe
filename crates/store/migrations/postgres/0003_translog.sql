-- Transparency log: one signed root per UTC day and the leaves it covers. Both are
-- append-only: a published day is never rewritten or deleted.
CREATE TABLE translog_roots (
    log_date     DATE PRIMARY KEY,
    merkle_root  TEXT NOT NULL,
    entry_count  BIGINT NOT NULL,
    prev_root    TEXT NOT NULL,
    signature    TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    published_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE translog_leaves (
    log_date        DATE NOT NULL REFERENCES translog_roots (log_date),
    leaf_index      BIGINT NOT NULL,
    leaf_hash       TEXT NOT NULL,
    executable_name TEXT NOT NULL,
    hash_sha256     TEXT NOT NULL,
    version         TEXT NOT NULL,
    platform        TEXT NOT NULL,
    arch            TEXT NOT NULL,
    PRIMARY KEY (log_date, leaf_index)
);
CREATE INDEX translog_leaves_sha256 ON translog_leaves (log_date, hash_sha256);
-- Every key that ever signed a root, so old roots stay verifiable after a rotation.
CREATE TABLE translog_keys (
    key_id     TEXT PRIMARY KEY,
    public_key TEXT NOT NULL,
    added_at   TIMESTAMPTZ NOT NULL
);
CREATE FUNCTION translog_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END $$;
CREATE TRIGGER translog_roots_no_change BEFORE UPDATE OR DELETE ON translog_roots
    FOR EACH ROW EXECUTE FUNCTION translog_append_only();
CREATE TRIGGER translog_leaves_no_change BEFORE UPDATE OR DELETE ON translog_leaves
    FOR EACH ROW EXECUTE FUNCTION translog_append_only();
CREATE TRIGGER translog_roots_no_truncate BEFORE TRUNCATE ON translog_roots
    FOR EACH STATEMENT EXECUTE FUNCTION translog_append_only();
CREATE TRIGGER translog_leaves_no_truncate BEFORE TRUNCATE ON translog_leaves
    FOR EACH STATEMENT EXECUTE FUNCTION translog_append_only();
