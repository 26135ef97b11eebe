//! The two backends' migrations build the same schema: the same tables, the same columns
//! in each, the same named indexes on the same tables. A migration written for one backend
//! and forgotten (or misspelt) for the other fails here.

use std::collections::BTreeSet;

use model::RecordSigner;
use testkit::{Backend, RECORD_SECRET, Scratch};

/// Tables with their columns (`table.column`), and indexes (`index on table`), of a freshly
/// migrated database of `backend`; `None` when that backend is not configured.
async fn schema(backend: Backend) -> Option<(BTreeSet<String>, BTreeSet<String>)> {
    let scratch = Scratch::new(backend, "schema").await?;
    let url = scratch.new_url().await;
    let store = store::open(&url, RecordSigner::new(RECORD_SECRET))
        .await
        .unwrap();
    store.close().await;
    let (columns_sql, indexes_sql) = match backend {
        Backend::Sqlite => (
            "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p \
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'",
            // Indexes SQLite makes itself for PRIMARY KEY and UNIQUE are not declared.
            "SELECT name, tbl_name FROM sqlite_master \
             WHERE type = 'index' AND name NOT LIKE 'sqlite_autoindex_%'",
        ),
        Backend::Postgres => (
            "SELECT table_name, column_name FROM information_schema.columns \
             WHERE table_schema = current_schema()",
            // Likewise the indexes PostgreSQL makes for constraints.
            "SELECT i.relname, t.relname FROM pg_index x \
             JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid \
             JOIN pg_namespace n ON n.oid = t.relnamespace \
             LEFT JOIN pg_constraint c ON c.conindid = x.indexrelid \
             WHERE n.nspname = current_schema() AND c.oid IS NULL",
        ),
    };
    let columns = testkit::db::text_rows(backend, &url, columns_sql, &[])
        .await
        .into_iter()
        .map(|row| format!("{}.{}", row[0], row[1]))
        .collect();
    let indexes = testkit::db::text_rows(backend, &url, indexes_sql, &[])
        .await
        .into_iter()
        .map(|row| format!("{} on {}", row[0], row[1]))
        .collect();
    scratch.cleanup().await;
    Some((columns, indexes))
}

fn differences(a: &BTreeSet<String>, b: &BTreeSet<String>) -> (Vec<String>, Vec<String>) {
    (
        a.difference(b).cloned().collect(),
        b.difference(a).cloned().collect(),
    )
}

testkit::postgres_test! {
    async fn both_backends_migrate_to_the_same_tables_columns_and_indexes() {
        let (lite_columns, lite_indexes) = schema(Backend::Sqlite).await.unwrap();
        let Some((pg_columns, pg_indexes)) = schema(Backend::Postgres).await else {
            return;
        };
        assert!(lite_columns.len() > 100, "{} columns", lite_columns.len());
        assert!(lite_indexes.len() > 10, "{lite_indexes:?}");
        let (only_sqlite, only_postgres) = differences(&lite_columns, &pg_columns);
        assert!(
            only_sqlite.is_empty() && only_postgres.is_empty(),
            "columns only on SQLite: {only_sqlite:?}; only on PostgreSQL: {only_postgres:?}"
        );
        let (only_sqlite, only_postgres) = differences(&lite_indexes, &pg_indexes);
        assert!(
            only_sqlite.is_empty() && only_postgres.is_empty(),
            "indexes only on SQLite: {only_sqlite:?}; only on PostgreSQL: {only_postgres:?}"
        );
    }
}
