//! Migrations, embedded in the binary: each backend has its own numbered SQL files, applied
//! in order on start, each in its own transaction, and remembered in `schema_migrations`.

pub(crate) struct Migration {
    pub version: i64,
    pub sql: &'static str,
}

pub(crate) const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        sql: include_str!("../migrations/sqlite/0001_init.sql"),
    },
    Migration {
        version: 2,
        sql: include_str!("../migrations/sqlite/0002_access.sql"),
    },
    Migration {
        version: 3,
        sql: include_str!("../migrations/sqlite/0003_translog.sql"),
    },
    Migration {
        version: 4,
        sql: include_str!("../migrations/sqlite/0004_ingest.sql"),
    },
    Migration {
        version: 5,
        sql: include_str!("../migrations/sqlite/0005_records_epoch.sql"),
    },
    Migration {
        version: 6,
        sql: include_str!("../migrations/sqlite/0006_job_lease_finished.sql"),
    },
    Migration {
        version: 7,
        sql: include_str!("../migrations/sqlite/0007_name_key.sql"),
    },
    Migration {
        version: 8,
        sql: include_str!("../migrations/sqlite/0008_changed_epoch.sql"),
    },
    Migration {
        version: 9,
        sql: include_str!("../migrations/sqlite/0009_revocations.sql"),
    },
    Migration {
        version: 10,
        sql: include_str!("../migrations/sqlite/0010_packages.sql"),
    },
    Migration {
        version: 11,
        sql: include_str!("../migrations/sqlite/0011_staff.sql"),
    },
    Migration {
        version: 12,
        sql: include_str!("../migrations/sqlite/0012_feeds.sql"),
    },
    Migration {
        version: 13,
        sql: include_str!("../migrations/sqlite/0013_users.sql"),
    },
    Migration {
        version: 17,
        sql: include_str!("../migrations/sqlite/0017_record_size.sql"),
    },
    Migration {
        version: 18,
        sql: include_str!("../migrations/sqlite/0018_feed_order.sql"),
    },
    Migration {
        version: 19,
        sql: include_str!("../migrations/sqlite/0019_coverage_requests.sql"),
    },
    Migration {
        version: 20,
        sql: include_str!("../migrations/sqlite/0020_record_counts.sql"),
    },
];

pub(crate) const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        sql: include_str!("../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        sql: include_str!("../migrations/postgres/0002_access.sql"),
    },
    Migration {
        version: 3,
        sql: include_str!("../migrations/postgres/0003_translog.sql"),
    },
    Migration {
        version: 4,
        sql: include_str!("../migrations/postgres/0004_ingest.sql"),
    },
    Migration {
        version: 5,
        sql: include_str!("../migrations/postgres/0005_records_epoch.sql"),
    },
    Migration {
        version: 6,
        sql: include_str!("../migrations/postgres/0006_job_lease_finished.sql"),
    },
    Migration {
        version: 7,
        sql: include_str!("../migrations/postgres/0007_name_key.sql"),
    },
    Migration {
        version: 8,
        sql: include_str!("../migrations/postgres/0008_changed_epoch.sql"),
    },
    Migration {
        version: 9,
        sql: include_str!("../migrations/postgres/0009_revocations.sql"),
    },
    Migration {
        version: 10,
        sql: include_str!("../migrations/postgres/0010_packages.sql"),
    },
    Migration {
        version: 11,
        sql: include_str!("../migrations/postgres/0011_staff.sql"),
    },
    Migration {
        version: 12,
        sql: include_str!("../migrations/postgres/0012_feeds.sql"),
    },
    Migration {
        version: 13,
        sql: include_str!("../migrations/postgres/0013_users.sql"),
    },
    Migration {
        version: 17,
        sql: include_str!("../migrations/postgres/0017_record_size.sql"),
    },
    Migration {
        version: 18,
        sql: include_str!("../migrations/postgres/0018_feed_order.sql"),
    },
    Migration {
        version: 19,
        sql: include_str!("../migrations/postgres/0019_coverage_requests.sql"),
    },
    Migration {
        version: 20,
        sql: include_str!("../migrations/postgres/0020_record_counts.sql"),
    },
];

pub(crate) const CREATE_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY)";
