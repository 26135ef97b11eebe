-- An archive member's source URL most often ends in its path, which is also its executable
-- name: `usr/bin/ls` was read from `…/coreutils_9.1_amd64.deb#usr/bin/ls`. Such a row now
-- stores '' as the rest of its URL (source_url) and TRUE in source_rest_is_name, and the
-- service reads its URL as the shared part (record_sources) followed by the name: about 40
-- bytes a member row. NULL or FALSE: source_url holds the rest, as before. A new nullable
-- column without a default changes no stored row.
ALTER TABLE hash_records ADD COLUMN source_rest_is_name BOOLEAN;

-- The trigger of 0032, joining the URL with the name where the row says so.
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
                OR OLD.source_url IS DISTINCT FROM NEW.source_url
                OR OLD.source_rest_is_name IS DISTINCT FROM NEW.source_rest_is_name)
            AND record_source_url(OLD.source_id, CASE WHEN OLD.source_rest_is_name
                    THEN OLD.executable_name ELSE OLD.source_url END)
                IS DISTINCT FROM record_source_url(NEW.source_id, CASE WHEN NEW.source_rest_is_name
                    THEN NEW.executable_name ELSE NEW.source_url END))
        OR OLD.download_verified IS DISTINCT FROM NEW.download_verified
        OR OLD.sig_signer IS DISTINCT FROM NEW.sig_signer
        OR OLD.sig_issuer IS DISTINCT FROM NEW.sig_issuer
        OR OLD.sig_serial IS DISTINCT FROM NEW.sig_serial
        OR OLD.sig_thumbprint IS DISTINCT FROM NEW.sig_thumbprint
        OR OLD.size_bytes IS DISTINCT FROM NEW.size_bytes OR OLD.hmac IS DISTINCT FROM NEW.hmac
        OR (OLD.status = 'superseded' AND NEW.status = 'current'))
    EXECUTE FUNCTION hash_records_unverified();

-- Rows already stored keep their URL's rest: the background rewrite of older rows
-- (`records.compact`, migration 0032) walks the table again and stores them this way too.
UPDATE record_compaction SET after_id = NULL, done = FALSE
    WHERE EXISTS (SELECT 1 FROM hash_records);
