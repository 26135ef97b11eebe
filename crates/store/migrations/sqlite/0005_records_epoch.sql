-- Moves in the same transaction as every new vendor record, so every replica can tell that
-- its in-memory views of the records (lookup index, feed caches) are stale.
INSERT INTO counters (name, value) VALUES ('records_epoch', 0);
