-- The records epoch of the transaction that last wrote each row (insert, supersession,
-- interval fitted), so that in-memory views can read only what changed since they were built.
ALTER TABLE hash_records ADD COLUMN changed_epoch BIGINT NOT NULL DEFAULT 0;
CREATE INDEX hash_records_changed_epoch ON hash_records (changed_epoch, id);
