-- Users of the console: people invited into accounts, besides the accounts' API keys.
-- A user holds one customer role per account they belong to.
CREATE TABLE users (
    user_id      TEXT PRIMARY KEY,
    display_name TEXT NOT NULL,
    contact      TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('active', 'disabled'))
);

CREATE TABLE memberships (
    user_id    TEXT NOT NULL REFERENCES users (user_id),
    team_id    TEXT NOT NULL REFERENCES tenants (team_id),
    role       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, team_id)
);

-- One-time invite codes, kept only as their HMAC. Redeeming one creates the user (or adds
-- the membership to the user named by `user_id`) and marks the code used.
CREATE TABLE invites (
    code_hash    TEXT PRIMARY KEY,
    invite_id    TEXT NOT NULL UNIQUE,
    team_id      TEXT NOT NULL REFERENCES tenants (team_id),
    role         TEXT NOT NULL,
    display_name TEXT NOT NULL,
    contact      TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL,
    redeemed_at  TIMESTAMPTZ,
    user_id      TEXT
);

-- Console and invited-user sessions; a session's token carries its id (the JWT's jti).
-- `subject` is whose second factors count (`key:<key_id>` or `user:<uuid>`); `mfa` is set
-- once the session passed or enrolled a second factor. Signing out sets `revoked_at`.
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    subject    TEXT NOT NULL,
    key_id     TEXT,
    user_id    TEXT,
    team_id    TEXT NOT NULL REFERENCES tenants (team_id),
    mfa        BOOLEAN NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);

-- Second factors, per subject. The TOTP seed is encrypted with a key derived from the
-- server secret; `last_step` is the last accepted time step (a code is accepted once).
CREATE TABLE mfa_totp (
    subject    TEXT PRIMARY KEY,
    secret_enc TEXT NOT NULL,
    enabled    BOOLEAN NOT NULL,
    last_step  BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE mfa_recovery_codes (
    subject   TEXT NOT NULL,
    code_hash TEXT NOT NULL,
    used_at   TIMESTAMPTZ,
    PRIMARY KEY (subject, code_hash)
);

CREATE TABLE mfa_passkeys (
    passkey_id    TEXT PRIMARY KEY,
    subject       TEXT NOT NULL,
    -- The WebAuthn user handle (base64url) of the subject, a sign-in hint.
    user_handle   TEXT NOT NULL,
    credential_id TEXT NOT NULL UNIQUE,
    display_name  TEXT NOT NULL,
    passkey       TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    last_used_at  TIMESTAMPTZ
);
CREATE INDEX mfa_passkeys_subject ON mfa_passkeys (subject);
CREATE INDEX mfa_passkeys_user_handle ON mfa_passkeys (user_handle);

-- WebAuthn ceremonies in flight (registration or sign-in), so any replica can finish one.
CREATE TABLE mfa_ceremonies (
    ceremony_id TEXT PRIMARY KEY,
    subject     TEXT,
    kind        TEXT NOT NULL,
    state       TEXT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);

-- Wrong second-factor codes per subject: past the budget the subject is locked out a while.
CREATE TABLE mfa_failures (
    subject      TEXT PRIMARY KEY,
    failures     BIGINT NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    locked_until TIMESTAMPTZ
);
