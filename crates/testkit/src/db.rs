//! Scratch databases and raw SQL behind the store's back.

use std::io::Write as _;
use std::sync::{Arc, Mutex};

use model::RecordSigner;
use sqlx::{Connection as _, PgConnection, SqliteConnection};
use store::Store;

use crate::Fixture;

/// The record HMAC secret of every scratch store.
pub const RECORD_SECRET: &[u8] = b"api-test-record-secret";

pub const PG_ENV: &str = "KNOWNGOOD_TEST_POSTGRES_URL";

/// Puts every vendor record row back as the store wrote it before migrations 0029, 0031 and
/// 0033: its whole source URL in the row, its name key and family whole. The records stay
/// the same, so the update trigger notes nothing; then [`COMPACTION_FROM_THE_START`] lets
/// the compaction walk them again.
pub const RECORDS_AS_BEFORE_0029: &str = "UPDATE hash_records SET \
     source_url = COALESCE((SELECT url FROM record_sources \
         WHERE record_sources.id = hash_records.source_id), '') \
         || CASE WHEN source_rest_is_name THEN executable_name ELSE source_url END, \
     source_id = NULL, source_rest_is_name = NULL, \
     family = COALESCE(NULLIF(family, ''), NULLIF(name_key, ''), executable_name), \
     name_key = COALESCE(NULLIF(name_key, ''), executable_name)";
/// Starts the compaction's walk again (see [`RECORDS_AS_BEFORE_0029`]).
pub const COMPACTION_FROM_THE_START: &str =
    "UPDATE record_compaction SET after_id = NULL, done = FALSE";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The name `Store::backend` reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }

    /// An SQL literal of the bytes that `hex` (hex digits) spells, such as a stored hash.
    pub fn bytes_literal(self, hex: &str) -> String {
        match self {
            Backend::Sqlite => format!("X'{hex}'"),
            Backend::Postgres => format!("'\\x{hex}'::bytea"),
        }
    }

    /// An SQL expression of the bytes that the text parameter `param` (such as `$1`, bound
    /// to hex digits) spells: a stored record id or hash found by its hex.
    pub fn unhex(self, param: &str) -> String {
        match self {
            Backend::Sqlite => format!("unhex({param})"),
            Backend::Postgres => format!("decode({param}, 'hex')"),
        }
    }

    /// An SQL expression of `column`'s bytes as lowercase hex, as the service shows them.
    pub fn hex(self, column: &str) -> String {
        match self {
            Backend::Sqlite => format!("lower(hex({column}))"),
            Backend::Postgres => format!("encode({column}, 'hex')"),
        }
    }
}

/// Where one test's databases live: a temporary directory of SQLite files, or PostgreSQL
/// schemas. [`Scratch::cleanup`] drops the schemas; the directory goes when dropped.
pub struct Scratch {
    backend: Backend,
    place: Place,
}

enum Place {
    Sqlite(tempfile::TempDir),
    Postgres {
        base: String,
        schemas: Mutex<Vec<String>>,
    },
}

impl Scratch {
    /// `None`, with a `SKIPPED` line, for PostgreSQL when no database is configured.
    pub async fn new(backend: Backend, name: &str) -> Option<Self> {
        let place = match backend {
            Backend::Sqlite => Place::Sqlite(tempfile::tempdir().expect("tempdir")),
            Backend::Postgres => match std::env::var(PG_ENV) {
                Ok(base) if !base.trim().is_empty() => Place::Postgres {
                    base,
                    schemas: Mutex::default(),
                },
                _ => {
                    // Past the harness's capture, so the skip shows in `cargo test` output.
                    let _ = writeln!(
                        std::io::stderr(),
                        "SKIPPED postgres::{name}: set {PG_ENV}=postgres://USER@HOST:PORT/DB to run it"
                    );
                    return None;
                }
            },
        };
        Some(Self { backend, place })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A new, empty database and its URL.
    pub async fn new_url(&self) -> String {
        match &self.place {
            Place::Sqlite(dir) => {
                let path = dir.path().join(format!("{}.db", store::new_id()));
                format!("sqlite://{}?mode=rwc", path.display())
            }
            Place::Postgres { base, schemas } => {
                let schema = format!("kgt_{}", store::new_id());
                let mut admin = PgConnection::connect(base)
                    .await
                    .unwrap_or_else(|e| panic!("{PG_ENV}={base:?}: cannot connect: {e}"));
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                    .execute(&mut admin)
                    .await
                    .expect("create schema");
                admin.close().await.ok();
                schemas.lock().unwrap().push(schema.clone());
                let sep = if base.contains('?') { '&' } else { '?' };
                format!("{base}{sep}options[search_path]={schema}")
            }
        }
    }

    pub async fn cleanup(&self) {
        let Place::Postgres { base, schemas } = &self.place else {
            return;
        };
        let schemas = std::mem::take(&mut *schemas.lock().unwrap());
        if schemas.is_empty() {
            return;
        }
        let mut admin = PgConnection::connect(base).await.expect("admin connect");
        for s in schemas {
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {s} CASCADE")))
                .execute(&mut admin)
                .await
                .expect("drop schema");
        }
        admin.close().await.ok();
    }
}

/// A store over a fresh database, and the means to reach that database behind its back.
pub struct Db {
    pub backend: Backend,
    pub url: String,
    pub store: Arc<dyn Store>,
    /// For more databases of the same backend.
    pub scratch: Arc<Scratch>,
}

impl Fixture for Db {
    type Config = ();

    fn config() {}

    async fn start(scratch: &Arc<Scratch>, (): ()) -> Self {
        let url = scratch.new_url().await;
        let store = store::open(&url, RecordSigner::new(RECORD_SECRET))
            .await
            .expect("open store");
        assert_eq!(store.backend(), scratch.backend().name());
        Db {
            backend: scratch.backend(),
            url,
            store,
            scratch: scratch.clone(),
        }
    }

    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }
}

impl Db {
    /// Another store on the same database.
    pub async fn open(&self, secret: &[u8]) -> Arc<dyn Store> {
        store::open(&self.url, RecordSigner::new(secret))
            .await
            .expect("open store")
    }

    /// Runs one statement; rows affected.
    pub async fn exec(&self, sql: &str, binds: &[&str]) -> u64 {
        exec(self.backend, &self.url, sql, binds)
            .await
            .unwrap_or_else(|e| panic!("raw exec: {e}"))
    }

    /// A single integer.
    pub async fn scalar(&self, sql: &str) -> i64 {
        scalar(self.backend, &self.url, sql).await
    }
}

/// Runs one statement on a raw connection to `url`; rows affected, or the database's
/// refusal.
pub async fn exec(backend: Backend, url: &str, sql: &str, binds: &[&str]) -> Result<u64, String> {
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    let n = match backend {
        Backend::Sqlite => {
            let mut c = SqliteConnection::connect(url).await.expect("raw connect");
            let mut q = sqlx::query(sql);
            for b in binds {
                q = q.bind(*b);
            }
            let n = q.execute(&mut c).await.map(|r| r.rows_affected());
            c.close().await.ok();
            n
        }
        Backend::Postgres => {
            let mut c = PgConnection::connect(url).await.expect("raw connect");
            let mut q = sqlx::query(sql);
            for b in binds {
                q = q.bind(*b);
            }
            let n = q.execute(&mut c).await.map(|r| r.rows_affected());
            c.close().await.ok();
            n
        }
    };
    n.map_err(|e| e.to_string())
}

/// A single integer from a raw connection to `url`.
pub async fn scalar(backend: Backend, url: &str, sql: &str) -> i64 {
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    match backend {
        Backend::Sqlite => {
            let mut c = SqliteConnection::connect(url).await.expect("raw connect");
            let v = sqlx::query_scalar(sql)
                .fetch_one(&mut c)
                .await
                .expect("raw scalar");
            c.close().await.ok();
            v
        }
        Backend::Postgres => {
            let mut c = PgConnection::connect(url).await.expect("raw connect");
            let v = sqlx::query_scalar(sql)
                .fetch_one(&mut c)
                .await
                .expect("raw scalar");
            c.close().await.ok();
            v
        }
    }
}

/// Rows of a query on a raw connection to `url`, every column read as text.
pub async fn text_rows(backend: Backend, url: &str, sql: &str, binds: &[&str]) -> Vec<Vec<String>> {
    use sqlx::Row as _;
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    match backend {
        Backend::Sqlite => {
            let mut c = SqliteConnection::connect(url).await.expect("raw connect");
            let mut q = sqlx::query(sql);
            for b in binds {
                q = q.bind(*b);
            }
            let rows = q.fetch_all(&mut c).await.expect("raw query");
            c.close().await.ok();
            rows.iter()
                .map(|r| (0..r.len()).map(|i| r.get::<String, _>(i)).collect())
                .collect()
        }
        Backend::Postgres => {
            let mut c = PgConnection::connect(url).await.expect("raw connect");
            let mut q = sqlx::query(sql);
            for b in binds {
                q = q.bind(*b);
            }
            let rows = q.fetch_all(&mut c).await.expect("raw query");
            c.close().await.ok();
            rows.iter()
                .map(|r| (0..r.len()).map(|i| r.get::<String, _>(i)).collect())
                .collect()
        }
    }
}
