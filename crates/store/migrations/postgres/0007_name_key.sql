-- Names compare on a key the service computes (Unicode NFC after full case folding), the same
-- on both backends. An ASCII name's key is its lowercase, filled here; the service fills the
-- others (and their families) when it opens the database.
ALTER TABLE hash_records ADD COLUMN name_key TEXT;
UPDATE hash_records SET name_key = lower(executable_name)
    WHERE octet_length(executable_name) = char_length(executable_name);
DROP INDEX hash_records_name;
CREATE INDEX hash_records_name_key ON hash_records (name_key);
