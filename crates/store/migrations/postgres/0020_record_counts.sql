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
CREATE FUNCTION hash_records_unverified() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO records_unverified (id, counted_current, counted_vendor, counted_platform,
        counted_sha256, deleted)
    VALUES (OLD.id, OLD.status = 'current', OLD.vendor, OLD.platform, OLD.hash_sha256,
        TG_OP = 'DELETE')
    ON CONFLICT (id) DO UPDATE SET deleted = records_unverified.deleted OR excluded.deleted;
    RETURN NULL;
END $$;
CREATE TRIGGER hash_records_signed_update AFTER UPDATE ON hash_records FOR EACH ROW
    WHEN (OLD.vendor IS DISTINCT FROM NEW.vendor
        OR OLD.executable_name IS DISTINCT FROM NEW.executable_name
        OR OLD.version IS DISTINCT FROM NEW.version OR OLD.platform IS DISTINCT FROM NEW.platform
        OR OLD.arch IS DISTINCT FROM NEW.arch
        OR OLD.hash_sha256 IS DISTINCT FROM NEW.hash_sha256
        OR OLD.hash_sha1 IS DISTINCT FROM NEW.hash_sha1
        OR OLD.hash_md5 IS DISTINCT FROM NEW.hash_md5
        OR OLD.source_url IS DISTINCT FROM NEW.source_url
        OR OLD.download_verified IS DISTINCT FROM NEW.download_verified
        OR OLD.sig_signer IS DISTINCT FROM NEW.sig_signer
        OR OLD.sig_issuer IS DISTINCT FROM NEW.sig_issuer
        OR OLD.sig_serial IS DISTINCT FROM NEW.sig_serial
        OR OLD.sig_thumbprint IS DISTINCT FROM NEW.sig_thumbprint
        OR OLD.size_bytes IS DISTINCT FROM NEW.size_bytes OR OLD.hmac IS DISTINCT FROM NEW.hmac
        OR (OLD.status = 'superseded' AND NEW.status = 'current'))
    EXECUTE FUNCTION hash_records_unverified();
CREATE TRIGGER hash_records_deleted AFTER DELETE ON hash_records FOR EACH ROW
    EXECUTE FUNCTION hash_records_unverified();
