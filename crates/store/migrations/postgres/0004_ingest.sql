-- One row per artifact the service downloaded to hash it. Content is streamed through the
-- hashers and never stored, so deleted_at always equals downloaded_at.
CREATE TABLE download_audit (
    id             BIGSERIAL PRIMARY KEY,
    vendor         TEXT NOT NULL,
    downloaded_at  TIMESTAMPTZ NOT NULL,
    deleted_at     TIMESTAMPTZ NOT NULL,
    storage_method TEXT NOT NULL DEFAULT 'stream',
    url            TEXT NOT NULL,
    size_bytes     BIGINT NOT NULL,
    hash_record_id TEXT NOT NULL
);
CREATE INDEX download_audit_at ON download_audit (downloaded_at, id);
CREATE INDEX download_audit_vendor ON download_audit (vendor, downloaded_at);

-- A package version whose artifact hash changed after it was first recorded.
CREATE TABLE change_alerts (
    id              TEXT PRIMARY KEY,
    ecosystem       TEXT NOT NULL,
    package_name    TEXT NOT NULL,
    version         TEXT NOT NULL,
    previous_sha256 TEXT NOT NULL,
    latest_sha256   TEXT NOT NULL,
    observed_at     TIMESTAMPTZ NOT NULL
);
CREATE INDEX change_alerts_observed ON change_alerts (observed_at);

-- Scheduled jobs run on one replica at a time: the holder of an unexpired lease.
CREATE TABLE job_leases (
    job        TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);

-- Every signing certificate seen on a downloaded PE, with its CRL distribution points, for
-- the revocation checker.
CREATE TABLE signing_certificates (
    thumbprint    TEXT PRIMARY KEY,
    signer        TEXT NOT NULL,
    issuer        TEXT NOT NULL,
    serial        TEXT NOT NULL,
    -- One URL per line.
    crl_urls      TEXT NOT NULL,
    first_seen_at TIMESTAMPTZ NOT NULL,
    last_seen_at  TIMESTAMPTZ NOT NULL
);
