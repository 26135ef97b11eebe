-- Role grants: permanent (expires_at NULL) or time-limited; expiry needs no cleanup.
CREATE TABLE key_grants (
    key_id     TEXT NOT NULL REFERENCES api_keys (key_id),
    role       TEXT NOT NULL,
    expires_at TEXT,
    granted_by TEXT NOT NULL,
    granted_at TEXT NOT NULL,
    PRIMARY KEY (key_id, role)
);

-- Every administrative action; append-only, enforced here as well as in the API.
CREATE TABLE audit_log (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at       TEXT NOT NULL,
    actor    TEXT NOT NULL,
    team_id  TEXT NOT NULL,
    action   TEXT NOT NULL,
    target   TEXT NOT NULL,
    outcome  TEXT NOT NULL,
    detail   TEXT NOT NULL DEFAULT ''
);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;

-- Authenticated requests per account, day and route, added in batches.
CREATE TABLE usage_counts (
    team_id  TEXT NOT NULL,
    day      TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    count    BIGINT NOT NULL,
    PRIMARY KEY (team_id, day, endpoint)
);

-- Named counters; auth_epoch moves on every change to keys, grants or accounts so every
-- replica can drop its credential cache within a poll interval.
CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('auth_epoch', 0);
