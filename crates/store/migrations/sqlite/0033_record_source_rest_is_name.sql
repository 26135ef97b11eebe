-- An archive member's source URL most often ends in its path, which is also its executable
-- name: `usr/bin/ls` was read from `…/coreutils_9.1_amd64.deb#usr/bin/ls`. Such a row now
-- stores '' as the rest of its URL (source_url) and TRUE in source_rest_is_name, and the
-- service reads its URL as the shared part (record_sources) followed by the name: about 40
-- bytes a member row. NULL or FALSE: source_url holds the rest, as before. A new nullable
-- column costs nothing at start.
ALTER TABLE hash_records ADD COLUMN source_rest_is_name BOOLEAN;

-- The trigger of 0032, joining the URL with the name where the row says so.
DROP TRIGGER hash_records_signed_update;
CREATE TRIGGER hash_records_signed_update AFTER UPDATE OF vendor, executable_name, version,
    platform, arch, hash_sha256, hash_sha1, hash_md5, source_id, source_url,
    source_rest_is_name, download_verified, sig_signer, sig_issuer, sig_serial,
    sig_thumbprint, size_bytes, hmac, status ON hash_records
    WHEN OLD.vendor IS NOT NEW.vendor OR OLD.executable_name IS NOT NEW.executable_name
        OR OLD.version IS NOT NEW.version OR OLD.platform IS NOT NEW.platform
        OR OLD.arch IS NOT NEW.arch OR OLD.hash_sha256 IS NOT NEW.hash_sha256
        OR OLD.hash_sha1 IS NOT NEW.hash_sha1 OR OLD.hash_md5 IS NOT NEW.hash_md5
        OR ((OLD.source_id IS NOT NEW.source_id OR OLD.source_url IS NOT NEW.source_url
                OR OLD.source_rest_is_name IS NOT NEW.source_rest_is_name)
            AND COALESCE((SELECT url FROM record_sources WHERE id = OLD.source_id), '')
                || CASE WHEN OLD.source_rest_is_name THEN OLD.executable_name
                    ELSE OLD.source_url END
                IS NOT COALESCE((SELECT url FROM record_sources WHERE id = NEW.source_id), '')
                || CASE WHEN NEW.source_rest_is_name THEN NEW.executable_name
                    ELSE NEW.source_url END)
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

-- Rows already stored keep their URL's rest: the background rewrite of older rows
-- (`records.compact`, migration 0032) walks the table again and stores them this way too.
UPDATE record_compaction SET after_id = NULL, done = FALSE
    WHERE EXISTS (SELECT 1 FROM hash_records);
