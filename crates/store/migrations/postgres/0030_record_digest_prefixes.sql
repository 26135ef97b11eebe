-- The digest indexes of hash_records key on each digest's first 8 bytes instead of the
-- whole digest (32, 20 and 16 bytes). Eight bytes still tell one stored digest from another
-- (two of a hundred million share a prefix with odds near 1 in 4,000), and every query by
-- digest names both the prefix, which the index finds, and the whole digest, which the row
-- it finds is checked against: `substr(hash_sha256, 1, 8) IN ($1, …) AND hash_sha256 IN
-- ($9, …)`, the prefixes bound as values of their own. The three indexes shrink by about
-- half, which every new row version of an import or a refresh writes too. Queries and
-- answers are otherwise unchanged.
DROP INDEX hash_records_sha256;
DROP INDEX hash_records_sha1;
DROP INDEX hash_records_md5;
CREATE INDEX hash_records_sha256 ON hash_records (substr(hash_sha256, 1, 8));
CREATE INDEX hash_records_sha1 ON hash_records (substr(hash_sha1, 1, 8))
    WHERE hash_sha1 IS NOT NULL;
CREATE INDEX hash_records_md5 ON hash_records (substr(hash_md5, 1, 8))
    WHERE hash_md5 IS NOT NULL;
