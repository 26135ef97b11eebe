-- Packages an account watches. Names are stored as the ecosystem compares them (PEP 503
-- for PyPI, lower case for npm, the exact module path for Go).
CREATE TABLE package_watches (
    id           TEXT PRIMARY KEY,
    team_id      TEXT NOT NULL,
    ecosystem    TEXT NOT NULL,
    package_name TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    UNIQUE (team_id, ecosystem, package_name)
);
CREATE INDEX package_watches_package ON package_watches (ecosystem, package_name);

-- What the registry answered for a watched package the service does not track yet:
-- 'not_found' when it knows no such package. Tracked packages have records instead.
CREATE TABLE package_registry_status (
    ecosystem    TEXT NOT NULL,
    package_name TEXT NOT NULL,
    status       TEXT NOT NULL,
    checked_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (ecosystem, package_name)
);

CREATE INDEX change_alerts_package ON change_alerts (ecosystem, package_name, observed_at);

-- Imported OSV advisories: the document as published, and the packages it names (one row
-- per ecosystem and name, as the ecosystem compares names) to find it by.
CREATE TABLE advisories (
    id          TEXT PRIMARY KEY,
    modified    TEXT NOT NULL,
    document    TEXT NOT NULL,
    imported_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE advisory_packages (
    ecosystem    TEXT NOT NULL,
    package_name TEXT NOT NULL,
    advisory_id  TEXT NOT NULL REFERENCES advisories (id) ON DELETE CASCADE,
    PRIMARY KEY (ecosystem, package_name, advisory_id)
);
