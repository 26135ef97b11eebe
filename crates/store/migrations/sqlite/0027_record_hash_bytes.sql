-- The vendor records' digests (hash_sha256, hash_sha1, hash_md5) and HMAC as their bytes
-- (32, 20, 16 and 32) instead of lowercase hex: half the size in each row and in each
-- digest index. The service binds the bytes and reads them back as the same lowercase hex,
-- so what it answers, and what each HMAC covers, is unchanged. records_unverified's
-- counted_sha256, copied from hash_sha256 by the triggers, is stored as bytes too.
--
-- SQLite changes a column's type by copying the table: the triggers and indexes are dropped
-- (their names are then free), the tables renamed, copied and dropped, then the indexes and
-- triggers made again over the new tables.
--
-- Every query of the store on hash_records, and the index that serves it (after the copy
-- as before it: each index has a query that needs it at scale, so none is dropped):
--   primary key (id)           records_after, the STIX pages (id ranges), every update by
--                              id, the join of records_unverified, revocations' id IN (…)
--   hash_records_sha256        lookups by SHA-256 (find_by_hashes: the lookup index's
--                              fallback, the console, TAXII, transparency), the write
--                              path's current rows of a SHA-256 (hashes_sql), statistics'
--                              current records of a SHA-256 (CURRENT_WITH_SHA256)
--   hash_records_sha1          lookups by SHA-1 (find_by_hashes; the refresh jobs)
--   hash_records_md5           lookups by MD5 (find_by_hashes)
--   hash_records_family        the write path's histories (family IN (…)), histories and
--                              exports by executable
--   hash_records_name_key      current records of a name, name suggestions, the family of
--                              a name (histories, exports), coverage probes, the fill of
--                              name keys on open (name_key IS NULL)
--   hash_records_valid_from    exports, in (valid_from, id) order from a cursor
--   hash_records_changed_epoch the records changed after an epoch (replicas, the lookup
--                              index), in (changed_epoch, id) order
--   hash_records_one_current   at most one current record a family (unique); current
--                              records of families (vendor, family), of a vendor (search,
--                              tracked packages)
--   hash_records_sig_thumbprint records signed by a revoked certificate
--   hash_records_current_feed  the public feed and the current records, in (name,
--                              platform, arch, id) order
--   hash_records_current_added TAXII and the pull feeds, in (added_at, id) order
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
ALTER TABLE hash_records RENAME TO hash_records_hex;
ALTER TABLE records_unverified RENAME TO records_unverified_hex;

-- The columns in the order the earlier migrations left them. Each digest and the HMAC is a
-- blob of its length: a value bound as anything else is refused.
CREATE TABLE hash_records (
    id                TEXT PRIMARY KEY,
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
    valid_from        TEXT NOT NULL,
    valid_until       TEXT,
    hmac              BLOB NOT NULL CONSTRAINT hmac_is_32_bytes
        CHECK (typeof(hmac) = 'blob' AND length(hmac) = 32),
    name_key          TEXT,
    changed_epoch     BIGINT NOT NULL DEFAULT 0,
    added_at          TEXT,
    size_bytes        BIGINT
);
CREATE TABLE records_unverified (
    id               TEXT PRIMARY KEY,
    counted_current  BOOLEAN NOT NULL,
    counted_vendor   TEXT NOT NULL,
    counted_platform TEXT NOT NULL,
    counted_sha256   BLOB NOT NULL CONSTRAINT counted_sha256_is_32_bytes
        CHECK (typeof(counted_sha256) = 'blob' AND length(counted_sha256) = 32),
    deleted          BOOLEAN NOT NULL
);

-- A value converts only when it is lowercase hex (its bytes spell it back exactly);
-- anything else (other text, uppercase, an odd length) is copied as it is, text, which the
-- checks above refuse: a bad row fails the migration rather than being stored as
-- something else. The rowids are kept, and so the rows' order.
INSERT INTO hash_records (rowid, id, vendor, executable_name, family, version, platform, arch,
    hash_sha256, hash_sha1, hash_md5, source_url, download_verified, sig_signer, sig_issuer,
    sig_serial, sig_thumbprint, cert_revoked_at, status, valid_from, valid_until, hmac,
    name_key, changed_epoch, added_at, size_bytes)
SELECT rowid, id, vendor, executable_name, family, version, platform, arch,
    CASE WHEN lower(hex(unhex(hash_sha256))) = hash_sha256 THEN unhex(hash_sha256)
        ELSE hash_sha256 END,
    CASE WHEN lower(hex(unhex(hash_sha1))) = hash_sha1 THEN unhex(hash_sha1)
        ELSE hash_sha1 END,
    CASE WHEN lower(hex(unhex(hash_md5))) = hash_md5 THEN unhex(hash_md5)
        ELSE hash_md5 END,
    source_url, download_verified, sig_signer, sig_issuer, sig_serial, sig_thumbprint,
    cert_revoked_at, status, valid_from, valid_until,
    CASE WHEN lower(hex(unhex(hmac))) = hmac THEN unhex(hmac) ELSE hmac END,
    name_key, changed_epoch, added_at, size_bytes
FROM hash_records_hex ORDER BY rowid;
INSERT INTO records_unverified (id, counted_current, counted_vendor, counted_platform,
    counted_sha256, deleted)
SELECT id, counted_current, counted_vendor, counted_platform,
    CASE WHEN lower(hex(unhex(counted_sha256))) = counted_sha256 THEN unhex(counted_sha256)
        ELSE counted_sha256 END,
    deleted
FROM records_unverified_hex ORDER BY id;
DROP TABLE hash_records_hex;
DROP TABLE records_unverified_hex;

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

-- The triggers of 0020, as they were: they compare and copy the columns whatever their type.
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
