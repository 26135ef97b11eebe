-- The byte size of a recorded file, when ingest hashed the file itself; NULL for hashes
-- taken from a vendor's manifest and for every record written before sizes were kept.
ALTER TABLE hash_records ADD COLUMN size_bytes BIGINT;
