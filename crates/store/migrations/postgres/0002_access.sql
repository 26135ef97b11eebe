-- Role grants: permanent (expires_at NULL) or time-limited; expiry needs no cleanup.
CREATE TABLE key_grants (
    key_id     TEXT NOT NULL REFERENCES api_keys (key_id),
    role       TEXT NOT NULL,
    expires_at TIMESTAMPTZ,
    granted_by TEXT NOT NULL,
    granted_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (key_id, role)
);

-- Every administrative action; append-only, enforced here as well as in the API.
CREATE TABLE audit_log (
    id       BIGSERIAL PRIMARY KEY,
    at       TIMESTAMPTZ NOT NULL,
    actor    TEXT NOT NULL,
    team_id  TEXT NOT NULL,
    action   TEXT NOT NULL,
    target   TEXT NOT NULL,
    outcome  TEXT NOT NULL,
    detail   TEXT NOT NULL DEFAULT ''
);
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'audit_log is append-only'; END $$;
CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

-- Authenticated requests per account, day and route, added in batches.
CREATE TABLE usage_counts (
    team_id  TEXT NOT NULL,
    day      DATE NOT NULL,
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
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
