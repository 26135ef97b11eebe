-- A record's source URL in two parts: where it was fetched from (an archive's URL up to and
-- including the '#' that names its member, or else a download's URL up to its last '/'),
-- stored once in record_sources and named by source_id, and the rest in source_url. The
-- members of one package share its URL, which was most of each row's URL (about 80 of 95
-- bytes in a Debian package member's). A row with no source_id (every row written before
-- this migration, and a URL with no '/') holds its whole URL in source_url; the service
-- reads both alike, so answers and HMACs are unchanged. Sources are append-only: changing
-- one would change the URL of every record naming it (the log's refusal function says so).
CREATE TABLE record_sources (
    id  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url TEXT NOT NULL UNIQUE
);
CREATE TRIGGER record_sources_no_change BEFORE UPDATE OR DELETE ON record_sources
    FOR EACH ROW EXECUTE FUNCTION translog_append_only();
CREATE TRIGGER record_sources_no_truncate BEFORE TRUNCATE ON record_sources
    FOR EACH STATEMENT EXECUTE FUNCTION translog_append_only();

ALTER TABLE hash_records ADD COLUMN source_id BIGINT;

-- The trigger of 0027, which also notes a row whose source_id changes.
DROP TRIGGER hash_records_signed_update ON hash_records;
CREATE TRIGGER hash_records_signed_update AFTER UPDATE ON hash_records FOR EACH ROW
    WHEN (OLD.vendor IS DISTINCT FROM NEW.vendor
        OR OLD.executable_name IS DISTINCT FROM NEW.executable_name
        OR OLD.version IS DISTINCT FROM NEW.version OR OLD.platform IS DISTINCT FROM NEW.platform
        OR OLD.arch IS DISTINCT FROM NEW.arch
        OR OLD.hash_sha256 IS DISTINCT FROM NEW.hash_sha256
        OR OLD.hash_sha1 IS DISTINCT FROM NEW.hash_sha1
        OR OLD.hash_md5 IS DISTINCT FROM NEW.hash_md5
        OR OLD.source_id IS DISTINCT FROM NEW.source_id
        OR OLD.source_url IS DISTINCT FROM NEW.source_url
        OR OLD.download_verified IS DISTINCT FROM NEW.download_verified
        OR OLD.sig_signer IS DISTINCT FROM NEW.sig_signer
        OR OLD.sig_issuer IS DISTINCT FROM NEW.sig_issuer
        OR OLD.sig_serial IS DISTINCT FROM NEW.sig_serial
        OR OLD.sig_thumbprint IS DISTINCT FROM NEW.sig_thumbprint
        OR OLD.size_bytes IS DISTINCT FROM NEW.size_bytes OR OLD.hmac IS DISTINCT FROM NEW.hmac
        OR (OLD.status = 'superseded' AND NEW.status = 'current'))
    EXECUTE FUNCTION hash_records_unverified();
