-- Rows written before 0029 hold their whole source URL, and rows written before 0031 their
-- name key and family whole. The store rewrites them into the compact form in the
-- background, a batch at a time in id order (`RecordCompactionStore`, run by the
-- `records.compact` job), instead of in a migration that would hold the database at start.
-- This row keeps where the walk resumes (the last id looked at), whether it is done and how
-- many rows it rewrote, so the walk survives restarts and its progress can be shown. A
-- database with no records has nothing to rewrite.
CREATE TABLE record_compaction (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    after_id  BYTEA,
    done      BOOLEAN NOT NULL,
    rewritten BIGINT NOT NULL
);
INSERT INTO record_compaction (id, after_id, done, rewritten)
    SELECT 1, NULL, NOT EXISTS (SELECT 1 FROM hash_records), 0;

-- A row's source URL whole: its record_sources part joined to the rest. A trigger's WHEN
-- may not hold a subquery, so the trigger below calls this.
CREATE FUNCTION record_source_url(source BIGINT, rest TEXT) RETURNS TEXT
    LANGUAGE sql STABLE
    AS $$ SELECT COALESCE((SELECT url FROM record_sources WHERE id = source), '') || rest $$;

-- The trigger of 0029, comparing a row's source URL whole instead of its two columns:
-- moving the shared part of a URL into record_sources leaves the signed record as it was,
-- and is not noted. The URL is joined only when one of its columns changed, so a status
-- update reads no source.
DROP TRIGGER hash_records_signed_update ON hash_records;
CREATE TRIGGER hash_records_signed_update AFTER UPDATE ON hash_records FOR EACH ROW
    WHEN (OLD.vendor IS DISTINCT FROM NEW.vendor
        OR OLD.executable_name IS DISTINCT FROM NEW.executable_name
        OR OLD.version IS DISTINCT FROM NEW.version OR OLD.platform IS DISTINCT FROM NEW.platform
        OR OLD.arch IS DISTINCT FROM NEW.arch
        OR OLD.hash_sha256 IS DISTINCT FROM NEW.hash_sha256
        OR OLD.hash_sha1 IS DISTINCT FROM NEW.hash_sha1
        OR OLD.hash_md5 IS DISTINCT FROM NEW.hash_md5
        OR ((OLD.source_id IS DISTINCT FROM NEW.source_id
                OR OLD.source_url IS DISTINCT FROM NEW.source_url)
            AND record_source_url(OLD.source_id, OLD.source_url)
                IS DISTINCT FROM record_source_url(NEW.source_id, NEW.source_url))
        OR OLD.download_verified IS DISTINCT FROM NEW.download_verified
        OR OLD.sig_signer IS DISTINCT FROM NEW.sig_signer
        OR OLD.sig_issuer IS DISTINCT FROM NEW.sig_issuer
        OR OLD.sig_serial IS DISTINCT FROM NEW.sig_serial
        OR OLD.sig_thumbprint IS DISTINCT FROM NEW.sig_thumbprint
        OR OLD.size_bytes IS DISTINCT FROM NEW.size_bytes OR OLD.hmac IS DISTINCT FROM NEW.hmac
        OR (OLD.status = 'superseded' AND NEW.status = 'current'))
    EXECUTE FUNCTION hash_records_unverified();
