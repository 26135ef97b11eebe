-- Every start fills the name keys of rows written before name keys existed (the store's
-- `backfill_name_keys`), looking for `name_key IS NULL`. With no index that looks at every
-- row at every start, long after the last such row was filled: 0.7 s at a million records,
-- minutes at a hundred million. This index holds only those rows, so once they are filled
-- it is empty and a start reads nothing. Building it reads the table once.
CREATE INDEX hash_records_unfilled_name_key ON hash_records (id) WHERE name_key IS NULL;
