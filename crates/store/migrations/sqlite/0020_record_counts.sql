-- Counts of current records, moved in the same transaction as every record write, so that
-- statistics read a few rows instead of every record: ('current', '') current records,
-- ('vendor', v) and ('platform', p) current records by vendor and platform, ('sha256', '')
-- distinct SHA-256 of current records. Initialised here from the existing rows.
CREATE TABLE record_counts (
    kind TEXT NOT NULL,
    key  TEXT NOT NULL,
    n    BIGINT NOT NULL,
    PRIMARY KEY (kind, key)
);
INSERT INTO record_counts (kind, key, n)
    SELECT 'current', '', COUNT(*) FROM hash_records WHERE status = 'current';
INSERT INTO record_counts (kind, key, n)
    SELECT 'sha256', '', COUNT(DISTINCT hash_sha256) FROM hash_records WHERE status = 'current';
INSERT INTO record_counts (kind, key, n)
    SELECT 'vendor', vendor, COUNT(*) FROM hash_records WHERE status = 'current' GROUP BY vendor;
INSERT INTO record_counts (kind, key, n)
    SELECT 'platform', platform, COUNT(*) FROM hash_records WHERE status = 'current'
    GROUP BY platform;
-- The service never rewrites a signed field of a record, nor deletes one: a row changed
-- so behind its back is noted here with what the counts above counted for it, and its HMAC
-- is checked when statistics are read, so a forged record is no known-good hash there.
CREATE TABLE records_unverified (
    id               TEXT PRIMARY KEY,
    counted_current  BOOLEAN NOT NULL,
    counted_vendor   TEXT NOT NULL,
    counted_platform TEXT NOT NULL,
    counted_sha256   TEXT NOT NULL,
    deleted          BOOLEAN NOT NULL
);
CREATE TRIGGER hash_records_signed_update AFTER UPDATE OF vendor, executable_name, version,
    platform, arch, hash_sha256, hash_sha1, hash_md5, source_url, download_verified,
    sig_signer, sig_issuer, sig_serial, sig_thumbprint, size_bytes, hmac, status ON hash_records
    WHEN OLD.vendor IS NOT NEW.vendor OR OLD.executable_name IS NOT NEW.executable_name
        OR OLD.version IS NOT NEW.version OR OLD.platform IS NOT NEW.platform
        OR OLD.arch IS NOT NEW.arch OR OLD.hash_sha256 IS NOT NEW.hash_sha256
        OR OLD.hash_sha1 IS NOT NEW.hash_sha1 OR OLD.hash_md5 IS NOT NEW.hash_md5
        OR OLD.source_url IS NOT NEW.source_url
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
CREATE TRIGGER hash_records_deleted AFTER DELETE ON hash_records
BEGIN
    INSERT INTO records_unverified (id, counted_current, counted_vendor, counted_platform,
        counted_sha256, deleted)
    VALUES (OLD.id, OLD.status = 'current', OLD.vendor, OLD.platform, OLD.hash_sha256, TRUE)
    ON CONFLICT (id) DO UPDATE SET deleted = TRUE;
END;
