-- TAXII objects by id. An object's id is a digest of what it describes, so the records
-- that name it cannot be found from the id itself: this table maps each object a record
-- names (its indicator, file, software and the two relationships) to the record. Both
-- sides are keys, not ids, to keep the rows small: the first 8 bytes of the object's UUID
-- and of the record's id (32 hex digits), as signed integers. Several objects or records
-- may share a key; a lookup computes the objects of the records it finds and keeps the
-- one asked for. Filled from the records' changes, after the position below.
CREATE TABLE stix_object_records (
    object_key BIGINT NOT NULL,
    record_key BIGINT NOT NULL,
    PRIMARY KEY (object_key, record_key)
);
-- How far the table has followed the records' changes: `records_changed_after` from here.
CREATE TABLE stix_object_position (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    epoch    BIGINT NOT NULL,
    after_id TEXT
);
INSERT INTO stix_object_position (id, epoch, after_id) VALUES (1, 0, NULL);
