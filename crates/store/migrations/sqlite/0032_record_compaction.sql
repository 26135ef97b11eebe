-- Rows written before 0029 hold their whole source URL, and rows written before 0031 their
-- name key and family whole. The store rewrites them into the compact form in the
-- background, a batch at a time in id order (`RecordCompactionStore`, run by the
-- `records.compact` job), instead of in a migration that would hold the database at start.
-- This row keeps where the walk resumes (the last id looked at), whether it is done and how
-- many rows it rewrote, so the walk survives restarts and its progress can be shown. A
-- database with no records has nothing to rewrite.
CREATE TABLE record_compaction (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    after_id  BLOB,
    done      BOOLEAN NOT NULL,
    rewritten BIGINT NOT NULL
);
INSERT INTO record_compaction (id, after_id, done, rewritten)
    SELECT 1, NULL, NOT EXISTS (SELECT 1 FROM hash_records), 0;

-- The trigger of 0029, comparing a row's source URL whole (its record_sources part joined
-- to the rest) instead of its two columns: moving the shared part of a URL into
-- record_sources leaves the signed record as it was, and is not noted. The URL is joined
-- only when one of its columns changed, so a status update reads no source.
DROP TRIGGER hash_records_signed_update;
CREATE TRIGGER hash_records_signed_update AFTER UPDATE OF vendor, executable_name, version,
    platform, arch, hash_sha256, hash_sha1, hash_md5, source_id, source_url, download_verified,
    sig_signer, sig_issuer, sig_serial, sig_thumbprint, size_bytes, hmac, status ON hash_records
    WHEN OLD.vendor IS NOT NEW.vendor OR OLD.executable_name IS NOT NEW.executable_name
        OR OLD.version IS NOT NEW.version OR OLD.platform IS NOT NEW.platform
        OR OLD.arch IS NOT NEW.arch OR OLD.hash_sha256 IS NOT NEW.hash_sha256
        OR OLD.hash_sha1 IS NOT NEW.hash_sha1 OR OLD.hash_md5 IS NOT NEW.hash_md5
        OR ((OLD.source_id IS NOT NEW.source_id OR OLD.source_url IS NOT NEW.source_url)
            AND COALESCE((SELECT url FROM record_sources WHERE id = OLD.source_id), '')
                || OLD.source_url
                IS NOT COALESCE((SELECT url FROM record_sources WHERE id = NEW.source_id), '')
                || NEW.source_url)
        OR OLD.download_verified IS NOT NEW.download_verified
        OR OLD.sig_signer IS NOT NEW.sig_signer OR OLD.sig_issuer IS NOT NEW.sig_issuer
        OR OLD.sig_serial IS NOT NEW.sig_serial OR OLD.sig_thumbprint IS NOT NEW.sig_thumbprint
        OR OLD.size_bytes IS NOT NEW.size_bytes OR OLD.hmac IS NOT NEW.hmac
        OR (OLD.status = 'superseded' AND NEW.status = 'current')
BEGIN
    INSERT INTO records_unverified (id, counted_current, counted_vendor, counted_platform,
        counted_sha256, deleted)
    VALUES (OLD.id, OLD.status = 'current', OLD.vendor, OLD.platform, OLD.hash_sha256, FALSE)
    ON CONFLICT (id) DO NOTHING;
END;
