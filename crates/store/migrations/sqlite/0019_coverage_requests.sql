-- Package versions an inventory asked the service to know, for the next refresh of their
-- channel (pypi, npm, debian, ubuntu). Only the version itself is kept: nothing else of the
-- inventory, nor who sent it. `ticket` changes whenever an entry is queued again.
CREATE TABLE coverage_requests (
    ecosystem    TEXT NOT NULL,
    package_name TEXT NOT NULL,
    version      TEXT NOT NULL,
    ticket       TEXT NOT NULL,
    status       TEXT NOT NULL,
    error        TEXT,
    requested_at TEXT NOT NULL,
    finished_at  TEXT,
    PRIMARY KEY (ecosystem, package_name, version)
);
CREATE INDEX coverage_requests_queued ON coverage_requests (ecosystem, status, requested_at);
