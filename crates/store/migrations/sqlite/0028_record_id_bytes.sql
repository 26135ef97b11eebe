-- Vendor record ids as their 16 bytes instead of 32 lowercase hex characters, in hash_records
-- and in the tables that name a record (records_unverified, record_signatures), and the
-- records' times (valid_from, valid_until, added_at) as integer microseconds since the Unix
-- epoch instead of RFC 3339 text (8 bytes instead of up to 32). Both shrink each row and
-- every index that holds an id or a time: the primary key, and the export (valid_from, id),
-- change (changed_epoch, id), feed and date-added (added_at, id) orders. The service binds
-- the bytes and the integers and reads them back as the same hex and the same instants, and
-- both sort as the text did, so ids in answers, cursors and HMACs, and every order, are
-- unchanged. cert_revoked_at stays text (it is NULL but for the rare revoked signer, and is
-- compared with revoked_certificates' text times); download_audit keeps the id as text (a
-- log, never joined).
--
-- The table is copied as 0027 copied it (its indexes and triggers made again over the copy,
-- unchanged). A value converts only when it has the shape the service writes (an id of 32
-- lowercase hex digits, a time "YYYY-MM-DDTHH:MM:SS[.fff|.ffffff]+00:00"); anything else is
-- copied as it is, which the checks below refuse: a bad row fails the migration rather than
-- being stored as something else.
DROP TRIGGER hash_records_signed_update;
DROP TRIGGER hash_records_deleted;
DROP INDEX hash_records_sha256;
DROP INDEX hash_records_sha1;
DROP INDEX hash_records_md5;
DROP INDEX hash_records_family;
DROP INDEX hash_records_name_key;
DROP INDEX hash_records_valid_from;
DROP INDEX hash_records_changed_epoch;
DROP INDEX hash_records_one_current;
DROP INDEX hash_records_sig_thumbprint;
DROP INDEX hash_records_current_feed;
DROP INDEX hash_records_current_added;
ALTER TABLE hash_records RENAME TO hash_records_text;
ALTER TABLE records_unverified RENAME TO records_unverified_text;
ALTER TABLE record_signatures RENAME TO record_signatures_text;
DROP INDEX record_signatures_thumbprint;

CREATE TABLE hash_records (
    id                BLOB PRIMARY KEY CONSTRAINT id_is_16_bytes
        CHECK (typeof(id) = 'blob' AND length(id) = 16),
    vendor            TEXT NOT NULL,
    executable_name   TEXT NOT NULL,
    family            TEXT NOT NULL,
    version           TEXT NOT NULL,
    platform          TEXT NOT NULL,
    arch              TEXT NOT NULL,
    hash_sha256       BLOB NOT NULL CONSTRAINT hash_sha256_is_32_bytes
        CHECK (typeof(hash_sha256) = 'blob' AND length(hash_sha256) = 32),
    hash_sha1         BLOB CONSTRAINT hash_sha1_is_20_bytes
        CHECK (hash_sha1 IS NULL OR (typeof(hash_sha1) = 'blob' AND length(hash_sha1) = 20)),
    hash_md5          BLOB CONSTRAINT hash_md5_is_16_bytes
        CHECK (hash_md5 IS NULL OR (typeof(hash_md5) = 'blob' AND length(hash_md5) = 16)),
    source_url        TEXT NOT NULL,
    download_verified BOOLEAN NOT NULL,
    sig_signer        TEXT,
    sig_issuer        TEXT,
    sig_serial        TEXT,
    sig_thumbprint    TEXT,
    cert_revoked_at   TEXT,
    status            TEXT NOT NULL CHECK (status IN ('current', 'superseded')),
    valid_from        INTEGER NOT NULL CONSTRAINT valid_from_is_micros
        CHECK (typeof(valid_from) = 'integer'),
    valid_until       INTEGER CONSTRAINT valid_until_is_micros
        CHECK (valid_until IS NULL OR typeof(valid_until) = 'integer'),
    hmac              BLOB NOT NULL CONSTRAINT hmac_is_32_bytes
        CHECK (typeof(hmac) = 'blob' AND length(hmac) = 32),
    name_key          TEXT,
    changed_epoch     BIGINT NOT NULL DEFAULT 0,
    added_at          INTEGER CONSTRAINT added_at_is_micros
        CHECK (added_at IS NULL OR typeof(added_at) = 'integer'),
    size_bytes        BIGINT
);
CREATE TABLE records_unverified (
    id               BLOB PRIMARY KEY CONSTRAINT id_is_16_bytes
        CHECK (typeof(id) = 'blob' AND length(id) = 16),
    counted_current  BOOLEAN NOT NULL,
    counted_vendor   TEXT NOT NULL,
    counted_platform TEXT NOT NULL,
    counted_sha256   BLOB NOT NULL CONSTRAINT counted_sha256_is_32_bytes
        CHECK (typeof(counted_sha256) = 'blob' AND length(counted_sha256) = 32),
    deleted          BOOLEAN NOT NULL
);

CREATE TABLE record_signatures (
    record_id  BLOB NOT NULL CONSTRAINT record_id_is_16_bytes
        CHECK (typeof(record_id) = 'blob' AND length(record_id) = 16),
    thumbprint TEXT NOT NULL,
    PRIMARY KEY (record_id, thumbprint)
);

INSERT INTO hash_records (rowid, id, vendor, executable_name, family, version, platform, arch,
    hash_sha256, hash_sha1, hash_md5, source_url, download_verified, sig_signer, sig_issuer,
    sig_serial, sig_thumbprint, cert_revoked_at, status, valid_from, valid_until, hmac,
    name_key, changed_epoch, added_at, size_bytes)
SELECT rowid, CASE WHEN length(id) = 32 AND lower(hex(unhex(id))) = id THEN unhex(id) ELSE id END,
    vendor, executable_name, family, version, platform, arch,
    hash_sha256, hash_sha1, hash_md5, source_url, download_verified, sig_signer, sig_issuer,
    sig_serial, sig_thumbprint, cert_revoked_at, status,
    CASE
        WHEN valid_from GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]+00:00'
            THEN unixepoch(substr(valid_from, 1, 19)) * 1000000
        WHEN valid_from GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]+00:00'
            THEN unixepoch(substr(valid_from, 1, 19)) * 1000000 + CAST(substr(valid_from, 21, 3) AS INTEGER) * 1000
        WHEN valid_from GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]+00:00'
            THEN unixepoch(substr(valid_from, 1, 19)) * 1000000 + CAST(substr(valid_from, 21, 6) AS INTEGER)
        ELSE valid_from END,
    CASE
        WHEN valid_until GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]+00:00'
            THEN unixepoch(substr(valid_until, 1, 19)) * 1000000
        WHEN valid_until GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]+00:00'
            THEN unixepoch(substr(valid_until, 1, 19)) * 1000000 + CAST(substr(valid_until, 21, 3) AS INTEGER) * 1000
        WHEN valid_until GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]+00:00'
            THEN unixepoch(substr(valid_until, 1, 19)) * 1000000 + CAST(substr(valid_until, 21, 6) AS INTEGER)
        ELSE valid_until END,
    hmac, name_key, changed_epoch,
    CASE
        WHEN added_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]+00:00'
            THEN unixepoch(substr(added_at, 1, 19)) * 1000000
        WHEN added_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]+00:00'
            THEN unixepoch(substr(added_at, 1, 19)) * 1000000 + CAST(substr(added_at, 21, 3) AS INTEGER) * 1000
        WHEN added_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]+00:00'
            THEN unixepoch(substr(added_at, 1, 19)) * 1000000 + CAST(substr(added_at, 21, 6) AS INTEGER)
        ELSE added_at END,
    size_bytes
FROM hash_records_text ORDER BY rowid;
INSERT INTO records_unverified (id, counted_current, counted_vendor, counted_platform,
    counted_sha256, deleted)
SELECT CASE WHEN length(id) = 32 AND lower(hex(unhex(id))) = id THEN unhex(id) ELSE id END,
    counted_current, counted_vendor, counted_platform, counted_sha256, deleted
FROM records_unverified_text ORDER BY id;
INSERT INTO record_signatures (record_id, thumbprint)
SELECT CASE WHEN length(record_id) = 32 AND lower(hex(unhex(record_id))) = record_id THEN unhex(record_id) ELSE record_id END, thumbprint
FROM record_signatures_text ORDER BY record_id, thumbprint;
DROP TABLE hash_records_text;
DROP TABLE records_unverified_text;
DROP TABLE record_signatures_text;

CREATE INDEX record_signatures_thumbprint ON record_signatures (thumbprint);
CREATE INDEX hash_records_sha256 ON hash_records (hash_sha256);
CREATE INDEX hash_records_sha1 ON hash_records (hash_sha1) WHERE hash_sha1 IS NOT NULL;
CREATE INDEX hash_records_md5 ON hash_records (hash_md5) WHERE hash_md5 IS NOT NULL;
CREATE INDEX hash_records_family ON hash_records (family);
CREATE INDEX hash_records_name_key ON hash_records (name_key);
CREATE INDEX hash_records_valid_from ON hash_records (valid_from, id);
CREATE INDEX hash_records_changed_epoch ON hash_records (changed_epoch, id);
CREATE UNIQUE INDEX hash_records_one_current ON hash_records (vendor, family, platform, arch)
    WHERE status = 'current';
CREATE INDEX hash_records_sig_thumbprint ON hash_records (sig_thumbprint)
    WHERE sig_thumbprint IS NOT NULL;
CREATE INDEX hash_records_current_feed ON hash_records (executable_name, platform, arch, id)
    WHERE status = 'current';
CREATE INDEX hash_records_current_added ON hash_records (added_at, id)
    WHERE status = 'current';

-- The triggers of 0020, as they were.
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
