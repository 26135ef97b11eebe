-- A record's source URL in two parts: where it was fetched from (an archive's URL up to and
-- including the '#' that names its member, or else a download's URL up to its last '/'),
-- stored once in record_sources and named by source_id, and the rest in source_url. The
-- members of one package share its URL, which was most of each row's URL (about 80 of 95
-- bytes in a Debian package member's). A row with no source_id (every row written before
-- this migration, and a URL with no '/') holds its whole URL in source_url; the service
-- reads both alike, so answers and HMACs are unchanged. Sources are append-only: changing
-- one would change the URL of every record naming it.
CREATE TABLE record_sources (
    id  INTEGER PRIMARY KEY,
    url TEXT NOT NULL UNIQUE
);
CREATE TRIGGER record_sources_no_update BEFORE UPDATE ON record_sources
BEGIN SELECT RAISE(ABORT, 'record_sources is append-only'); END;
CREATE TRIGGER record_sources_no_delete BEFORE DELETE ON record_sources
BEGIN SELECT RAISE(ABORT, 'record_sources is append-only'); END;

ALTER TABLE hash_records ADD COLUMN source_id INTEGER;

-- The trigger of 0028, which also notes a row whose source_id changes.
DROP TRIGGER hash_records_signed_update;
CREATE TRIGGER hash_records_signed_update AFTER UPDATE OF vendor, executable_name, version,
    platform, arch, hash_sha256, hash_sha1, hash_md5, source_id, source_url, download_verified,
    sig_signer, sig_issuer, sig_serial, sig_thumbprint, size_bytes, hmac, status ON hash_records
    WHEN OLD.vendor IS NOT NEW.vendor OR OLD.executable_name IS NOT NEW.executable_name
        OR OLD.version IS NOT NEW.version OR OLD.platform IS NOT NEW.platform
        OR OLD.arch IS NOT NEW.arch OR OLD.hash_sha256 IS NOT NEW.hash_sha256
        OR OLD.hash_sha1 IS NOT NEW.hash_sha1 OR OLD.hash_md5 IS NOT NEW.hash_md5
        OR OLD.source_id IS NOT NEW.source_id OR OLD.source_url IS NOT NEW.source_url
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
