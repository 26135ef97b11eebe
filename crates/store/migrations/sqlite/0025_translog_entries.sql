-- The transparency log's leaves, stored once instead of once a day. A day's tree holds the
-- leaves of the public feed when it was published; from one day to the next nearly all of
-- them stay. `translog_entries` has a row each time a leaf entered the published set:
-- `entered` is the first published day it is in. `translog_exits` names, for an entry that
-- left, the last published day it was in (days may be skipped, so an exit names a
-- published day, never the day after). A leaf that leaves and comes back has a second
-- entry. A leaf is in day D's tree iff an entry has entered <= D and no exit, or an exit
-- with last_day >= D; the tree is those leaves sorted by leaf hash (lowercase hex sorts as
-- the bytes do). Publishing a day writes its changes only.
CREATE TABLE translog_entries (
    leaf_hash       TEXT NOT NULL,
    entered         TEXT NOT NULL REFERENCES translog_roots (log_date),
    executable_name TEXT NOT NULL,
    hash_sha256     TEXT NOT NULL,
    version         TEXT NOT NULL,
    platform        TEXT NOT NULL,
    arch            TEXT NOT NULL,
    PRIMARY KEY (leaf_hash, entered)
) WITHOUT ROWID;
CREATE INDEX translog_entries_sha256 ON translog_entries (hash_sha256);
CREATE TABLE translog_exits (
    leaf_hash TEXT NOT NULL,
    entered   TEXT NOT NULL,
    last_day  TEXT NOT NULL REFERENCES translog_roots (log_date),
    PRIMARY KEY (leaf_hash, entered),
    FOREIGN KEY (leaf_hash, entered) REFERENCES translog_entries (leaf_hash, entered)
) WITHOUT ROWID;
-- The first leaf hash of each 256-leaf chunk of a day's tree: a leaf's position is its
-- chunk (the greatest start at or below its hash) and the count of the day's leaves from
-- that start, and a range of positions starts at its chunk's first leaf.
CREATE TABLE translog_chunk_starts (
    log_date    TEXT NOT NULL REFERENCES translog_roots (log_date),
    chunk_index BIGINT NOT NULL,
    leaf_hash   TEXT NOT NULL,
    PRIMARY KEY (log_date, chunk_index)
) WITHOUT ROWID;
CREATE INDEX translog_chunk_starts_hash ON translog_chunk_starts (log_date, leaf_hash);

-- Every published day's leaves become entries: each leaf's runs of consecutive published
-- days (gaps and islands over the days' numbers in date order) are one entry each, with an
-- exit unless the run reaches the latest published day.
CREATE TABLE translog_leaf_islands AS
WITH days AS (
    SELECT log_date, ROW_NUMBER() OVER (ORDER BY log_date) AS day_number FROM translog_roots
),
numbered AS (
    SELECT l.leaf_hash, l.log_date, d.day_number,
           d.day_number - ROW_NUMBER() OVER (PARTITION BY l.leaf_hash ORDER BY d.day_number)
               AS island
    FROM translog_leaves l JOIN days d ON d.log_date = l.log_date
)
SELECT leaf_hash, MIN(log_date) AS entered, MAX(log_date) AS last_day,
       MAX(day_number) AS last_number
FROM numbered GROUP BY leaf_hash, island;
INSERT INTO translog_entries (leaf_hash, entered, executable_name, hash_sha256, version,
                              platform, arch)
SELECT i.leaf_hash, i.entered, l.executable_name, l.hash_sha256, l.version, l.platform, l.arch
FROM translog_leaf_islands i
JOIN translog_leaves l ON l.log_date = i.entered AND l.leaf_hash = i.leaf_hash;
INSERT INTO translog_exits (leaf_hash, entered, last_day)
SELECT leaf_hash, entered, last_day FROM translog_leaf_islands
WHERE last_number < (SELECT COUNT(*) FROM translog_roots);
INSERT INTO translog_chunk_starts (log_date, chunk_index, leaf_hash)
SELECT log_date, leaf_index / 256, leaf_hash FROM translog_leaves WHERE leaf_index % 256 = 0;
DROP TABLE translog_leaf_islands;
DROP TABLE translog_leaves;

CREATE TRIGGER translog_entries_no_update BEFORE UPDATE ON translog_entries
BEGIN SELECT RAISE(ABORT, 'translog_entries is append-only'); END;
CREATE TRIGGER translog_entries_no_delete BEFORE DELETE ON translog_entries
BEGIN SELECT RAISE(ABORT, 'translog_entries is append-only'); END;
CREATE TRIGGER translog_exits_no_update BEFORE UPDATE ON translog_exits
BEGIN SELECT RAISE(ABORT, 'translog_exits is append-only'); END;
CREATE TRIGGER translog_exits_no_delete BEFORE DELETE ON translog_exits
BEGIN SELECT RAISE(ABORT, 'translog_exits is append-only'); END;
CREATE TRIGGER translog_chunk_starts_no_update BEFORE UPDATE ON translog_chunk_starts
BEGIN SELECT RAISE(ABORT, 'translog_chunk_starts is append-only'); END;
CREATE TRIGGER translog_chunk_starts_no_delete BEFORE DELETE ON translog_chunk_starts
BEGIN SELECT RAISE(ABORT, 'translog_chunk_starts is append-only'); END;
