-- A record's name key and family are derived: the name key is its executable name folded
-- (model::name_key), the family its name key with the version taken out. Most names are
-- lower case and carry no version, so a row held its name three times over. From here a
-- row stores '' for a name key equal to its executable name and for a family equal to its
-- name key; COALESCE(NULLIF(name_key, ''), executable_name) and
-- COALESCE(NULLIF(family, ''), NULLIF(name_key, ''), executable_name) read them back (the
-- `name_key_sql!` and `family_sql!` of the store), and the indexes below are on those
-- expressions, which every query spells the same way. Rows written before keep both
-- columns whole and read the same. NULL still marks a name key never filled (migration
-- 0007), which the store fills at start. The name-key index compares by code point
-- (text_pattern_ops), so that a name-prefix search (LIKE 'prefix%') reads one range of it
-- in any locale; equality uses it as before. SQLite compares text so already, and the
-- store searches it by an explicit range.
DROP INDEX hash_records_family;
DROP INDEX hash_records_name_key;
DROP INDEX hash_records_one_current;
CREATE INDEX hash_records_family
    ON hash_records ((COALESCE(NULLIF(family, ''), NULLIF(name_key, ''), executable_name)));
CREATE INDEX hash_records_name_key
    ON hash_records ((COALESCE(NULLIF(name_key, ''), executable_name)) text_pattern_ops);
CREATE UNIQUE INDEX hash_records_one_current ON hash_records
    (vendor, (COALESCE(NULLIF(family, ''), NULLIF(name_key, ''), executable_name)), platform, arch)
    WHERE status = 'current';
