-- Vendor record ids as their 16 bytes instead of 32 lowercase hex characters, in hash_records
-- and in the tables that name a record (records_unverified, record_signatures): 16 bytes less
-- in each row and in every index that holds an id (the primary key; the export, change,
-- feed and date-added orders). The service binds the bytes and reads them back as the same
-- hex, and the bytes sort as the hex did, so ids in answers, cursors and HMACs, and every
-- order by id, are unchanged. download_audit keeps the id as text: it is a log, never joined.
-- (The record times are already 8 bytes here, timestamptz.)

-- decode() takes uppercase hex too, which would read back as another id: anything but 32
-- lowercase hex digits fails the migration, naming it, rather than being stored as another.
DO $$
DECLARE
    bad text;
BEGIN
    SELECT id INTO bad FROM hash_records WHERE id !~ '^[0-9a-f]{32}$' LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'hash record id % is not 32 lowercase hex digits', bad;
    END IF;
    SELECT id INTO bad FROM records_unverified WHERE id !~ '^[0-9a-f]{32}$' LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'records_unverified id % is not 32 lowercase hex digits', bad;
    END IF;
    SELECT record_id INTO bad FROM record_signatures WHERE record_id !~ '^[0-9a-f]{32}$' LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'record_signatures record_id % is not 32 lowercase hex digits', bad;
    END IF;
END $$;

ALTER TABLE hash_records
    ALTER COLUMN id TYPE bytea USING decode(id, 'hex'),
    ADD CONSTRAINT id_is_16_bytes CHECK (octet_length(id) = 16);
ALTER TABLE records_unverified
    ALTER COLUMN id TYPE bytea USING decode(id, 'hex'),
    ADD CONSTRAINT id_is_16_bytes CHECK (octet_length(id) = 16);
ALTER TABLE record_signatures
    ALTER COLUMN record_id TYPE bytea USING decode(record_id, 'hex'),
    ADD CONSTRAINT record_id_is_16_bytes CHECK (octet_length(record_id) = 16);
