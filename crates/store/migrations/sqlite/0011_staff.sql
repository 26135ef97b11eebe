-- Staff impersonation sessions. A session's token carries its id (the JWT's jti); the row
-- says who started it, for which account, until when, and whether it was ended early.
CREATE TABLE impersonation_sessions (
    session_id    TEXT PRIMARY KEY,
    actor_key_id  TEXT NOT NULL,
    actor_team_id TEXT NOT NULL,
    team_id       TEXT NOT NULL REFERENCES tenants (team_id),
    user_id       TEXT,
    mode          TEXT NOT NULL CHECK (mode IN ('view', 'manage')),
    role          TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL,
    ended_at      TEXT
);

-- The platform settings staff change at run time: one JSON document, read by every replica
-- (a change moves auth_epoch, which replicas poll).
CREATE TABLE platform_settings (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    document   TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    updated_by TEXT NOT NULL
);

CREATE INDEX audit_log_actor ON audit_log (actor, id);
