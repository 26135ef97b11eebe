-- Signing-certificate revocation (CRL checks).

-- The issuing CA's certificate (DER) as shipped in the signature: what the issuer's CRLs
-- are verified against.
ALTER TABLE signing_certificates ADD COLUMN issuer_cert BLOB;

-- Every certificate that signed a recorded file, primary and nested signatures alike.
CREATE TABLE record_signatures (
    record_id  TEXT NOT NULL,
    thumbprint TEXT NOT NULL,
    PRIMARY KEY (record_id, thumbprint)
);
CREATE INDEX record_signatures_thumbprint ON record_signatures (thumbprint);
CREATE INDEX hash_records_sig_thumbprint ON hash_records (sig_thumbprint);

-- Revocations found on verified CRLs. A released row (a hold lifted) stays as history;
-- at most one unreleased row per certificate.
CREATE TABLE revoked_certificates (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    thumbprint   TEXT NOT NULL,
    signer       TEXT NOT NULL,
    issuer       TEXT NOT NULL,
    serial       TEXT NOT NULL,
    revoked_at   TEXT NOT NULL,
    reason       TEXT NOT NULL,
    check_method TEXT NOT NULL DEFAULT 'crl',
    crl_url      TEXT NOT NULL,
    recorded_at  TEXT NOT NULL,
    released_at  TEXT
);
CREATE UNIQUE INDEX revoked_certificates_active ON revoked_certificates (thumbprint)
    WHERE released_at IS NULL;
CREATE INDEX revoked_certificates_at ON revoked_certificates (revoked_at, id);

-- One row per CRL URL: the last verified CRL (for conditional GETs and checks between
-- updates) and the outcome of the last attempt, shown on /public/status.
CREATE TABLE crl_cache (
    url             TEXT PRIMARY KEY,
    issuer          TEXT NOT NULL,
    body            BLOB,
    etag            TEXT,
    last_modified   TEXT,
    crl_number      TEXT,
    this_update     TEXT,
    next_update     TEXT,
    last_good_at    TEXT,
    last_checked_at TEXT,
    last_error_at   TEXT,
    last_error      TEXT
);
