-- Vendor hash records with full history. Timestamps are timestamptz.
CREATE TABLE hash_records (
    id                TEXT PRIMARY KEY,
    vendor            TEXT NOT NULL,
    executable_name   TEXT NOT NULL,
    family            TEXT NOT NULL,
    version           TEXT NOT NULL,
    platform          TEXT NOT NULL,
    arch              TEXT NOT NULL,
    hash_sha256       TEXT NOT NULL,
    hash_sha1         TEXT,
    hash_md5          TEXT,
    source_url        TEXT NOT NULL,
    download_verified BOOLEAN NOT NULL,
    sig_signer        TEXT,
    sig_issuer        TEXT,
    sig_serial        TEXT,
    sig_thumbprint    TEXT,
    cert_revoked_at   TIMESTAMPTZ,
    status            TEXT NOT NULL CHECK (status IN ('current', 'superseded')),
    valid_from        TIMESTAMPTZ NOT NULL,
    valid_until       TIMESTAMPTZ,
    hmac              TEXT NOT NULL
);
CREATE INDEX hash_records_sha256 ON hash_records (hash_sha256);
CREATE INDEX hash_records_sha1 ON hash_records (hash_sha1) WHERE hash_sha1 IS NOT NULL;
CREATE INDEX hash_records_md5 ON hash_records (hash_md5) WHERE hash_md5 IS NOT NULL;
CREATE INDEX hash_records_family ON hash_records (family, vendor, platform, arch, status);
CREATE INDEX hash_records_name ON hash_records (lower(executable_name));
CREATE INDEX hash_records_valid_from ON hash_records (valid_from, id);
-- At most one current record per executable family.
CREATE UNIQUE INDEX hash_records_one_current ON hash_records (vendor, family, platform, arch)
    WHERE status = 'current';

CREATE TABLE tenants (
    team_id    TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('platform', 'customer')),
    tier       TEXT NOT NULL,
    suspended  BOOLEAN NOT NULL DEFAULT FALSE,
    created_at TIMESTAMPTZ NOT NULL
);

-- Only an HMAC of each key is kept; the key itself is shown once and never stored.
CREATE TABLE api_keys (
    key_id     TEXT PRIMARY KEY,
    team_id    TEXT NOT NULL REFERENCES tenants (team_id),
    key_hash   TEXT NOT NULL UNIQUE,
    role       TEXT NOT NULL,
    label      TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);
CREATE INDEX api_keys_team ON api_keys (team_id);

CREATE TABLE vendor_health (
    vendor          TEXT PRIMARY KEY,
    last_success_at TIMESTAMPTZ,
    last_error_at   TIMESTAMPTZ,
    last_error      TEXT
);
