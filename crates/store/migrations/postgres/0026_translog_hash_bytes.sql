-- The transparency log's hashes (leaf_hash, hash_sha256, chunk_root) as their 32 bytes
-- instead of 64 hex characters: half the size in each row and index. bytea compares as
-- its bytes, in the order of the lowercase hex ("C" collation), so a day's tree order is
-- unchanged. Changing a column's type rewrites the table and fires no row trigger; the
-- foreign key from the exits is dropped while both sides change type, then restored.
ALTER TABLE translog_exits DROP CONSTRAINT translog_exits_leaf_hash_entered_fkey;
ALTER TABLE translog_entries
    ALTER COLUMN leaf_hash TYPE bytea USING decode(leaf_hash, 'hex'),
    ALTER COLUMN hash_sha256 TYPE bytea USING decode(hash_sha256, 'hex');
ALTER TABLE translog_exits
    ALTER COLUMN leaf_hash TYPE bytea USING decode(leaf_hash, 'hex');
ALTER TABLE translog_exits ADD CONSTRAINT translog_exits_leaf_hash_entered_fkey
    FOREIGN KEY (leaf_hash, entered) REFERENCES translog_entries (leaf_hash, entered);
ALTER TABLE translog_chunk_starts
    ALTER COLUMN leaf_hash TYPE bytea USING decode(leaf_hash, 'hex');
ALTER TABLE translog_chunks
    ALTER COLUMN chunk_root TYPE bytea USING decode(chunk_root, 'hex');
