-- The vendor records' digests (hash_sha256, hash_sha1, hash_md5) and HMAC as their bytes
-- (32, 20, 16 and 32) instead of lowercase hex: half the size in each row and in each
-- digest index. The service binds the bytes and reads them back as the same lowercase hex,
-- so what it answers, and what each HMAC covers, is unchanged. records_unverified's
-- counted_sha256, copied from hash_sha256 by the trigger function, is stored as bytes too,
-- so the function is unchanged.
--
-- Every query of the store on hash_records, and the index that serves it (each index has a
-- query that needs it at scale, so none is dropped; changing a column's type rebuilds the
-- indexes over it, now half the size):
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

-- decode() takes uppercase hex too, which would read back as another value: anything but
-- lowercase hex of the right length fails the migration, naming a record that holds it,
-- rather than being stored as something else.
DO $$
DECLARE
    bad text;
BEGIN
    SELECT id INTO bad FROM hash_records
    WHERE hash_sha256 !~ '^[0-9a-f]{64}$' OR hash_sha1 !~ '^[0-9a-f]{40}$'
        OR hash_md5 !~ '^[0-9a-f]{32}$' OR hmac !~ '^[0-9a-f]{64}$'
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'hash record % holds a digest or HMAC that is not lowercase hex', bad;
    END IF;
    SELECT id INTO bad FROM records_unverified WHERE counted_sha256 !~ '^[0-9a-f]{64}$'
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'records_unverified % holds a SHA-256 that is not lowercase hex', bad;
    END IF;
END $$;

-- A column a trigger's condition names cannot change type: the trigger is made again after.
DROP TRIGGER hash_records_signed_update ON hash_records;
ALTER TABLE hash_records
    ALTER COLUMN hash_sha256 TYPE bytea USING decode(hash_sha256, 'hex'),
    ALTER COLUMN hash_sha1 TYPE bytea USING decode(hash_sha1, 'hex'),
    ALTER COLUMN hash_md5 TYPE bytea USING decode(hash_md5, 'hex'),
    ALTER COLUMN hmac TYPE bytea USING decode(hmac, 'hex'),
    ADD CONSTRAINT hash_sha256_is_32_bytes CHECK (octet_length(hash_sha256) = 32),
    ADD CONSTRAINT hash_sha1_is_20_bytes CHECK (octet_length(hash_sha1) = 20),
    ADD CONSTRAINT hash_md5_is_16_bytes CHECK (octet_length(hash_md5) = 16),
    ADD CONSTRAINT hmac_is_32_bytes CHECK (octet_length(hmac) = 32);
ALTER TABLE records_unverified
    ALTER COLUMN counted_sha256 TYPE bytea USING decode(counted_sha256, 'hex'),
    ADD CONSTRAINT counted_sha256_is_32_bytes CHECK (octet_length(counted_sha256) = 32);
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
