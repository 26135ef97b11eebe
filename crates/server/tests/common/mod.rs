//! Test support for the API suite: a real server on 127.0.0.1:0 over a real store, with
//! real API keys, reached over HTTP with reqwest.
//!
//! Every test runs against SQLite (a fresh file per test) and, when
//! `KNOWNGOOD_TEST_POSTGRES_URL` names a reachable PostgreSQL database (e.g.
//! `postgres://postgres@127.0.0.1:5432/postgres`), against PostgreSQL in a fresh schema per
//! test (created through that URL, selected with `options[search_path]`, dropped
//! afterwards), the approach of the store's conformance suite. Without the variable the
//! PostgreSQL variants print `SKIPPED` and pass.

// Shared by several test binaries, each of which uses only part of it. (Some also allow
// dead code on their `mod common;`, which clippy would call a duplicate.)
#![allow(dead_code, clippy::duplicated_attributes)]

use std::future::Future;
use std::io::Write as _;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};

use auth::credentials::Credentials;
use auth::jwt::JwtKeys;
use auth::limits::{Limiter, LocalLimiter};
use chrono::{DateTime, Duration, Utc};
use futures::FutureExt as _;
use model::{Arch, Clock, FixedClock, NewRecord, Platform, RecordSigner, Role, Tier};
use reqwest::Method;
use serde_json::Value;
use server::{AppState, Limits, Settings};
use sqlx::{Connection as _, PgConnection, SqliteConnection};
use store::{NewApiKey, RecordOutcome, Store, TenantKind};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub const PG_ENV: &str = "KNOWNGOOD_TEST_POSTGRES_URL";
pub const RECORD_SECRET: &[u8] = b"api-test-record-secret";
pub const KEY_SECRET: &[u8] = b"api-test-key-secret";

/// Where every test's clock starts: a Monday morning, far from a day boundary.
pub fn start_time() -> DateTime<Utc> {
    t("2025-03-10T08:00:00Z")
}

pub fn t(s: &str) -> DateTime<Utc> {
    s.parse()
        .unwrap_or_else(|e| panic!("bad timestamp {s:?}: {e}"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

enum Scratch {
    /// Removed (with the database) when dropped.
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres {
        base: String,
        schema: String,
    },
}

impl Scratch {
    async fn create(backend: Backend, name: &str) -> Option<(Self, String)> {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("tempdir");
                let url = format!("sqlite://{}?mode=rwc", dir.path().join("api.db").display());
                Some((Scratch::Sqlite(dir), url))
            }
            Backend::Postgres => {
                let base = match std::env::var(PG_ENV) {
                    Ok(v) if !v.trim().is_empty() => v,
                    _ => {
                        // Past the harness's capture, so the skip shows in `cargo test` output.
                        let _ = writeln!(
                            std::io::stderr(),
                            "SKIPPED postgres::{name}: set {PG_ENV}=postgres://USER@HOST:PORT/DB to run it"
                        );
                        return None;
                    }
                };
                let schema = format!("kga_{}", store::new_id());
                let mut admin = PgConnection::connect(&base)
                    .await
                    .unwrap_or_else(|e| panic!("{PG_ENV}={base:?}: cannot connect: {e}"));
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                    .execute(&mut admin)
                    .await
                    .expect("create schema");
                admin.close().await.ok();
                let sep = if base.contains('?') { '&' } else { '?' };
                let url = format!("{base}{sep}options[search_path]={schema}");
                Some((Scratch::Postgres { base, schema }, url))
            }
        }
    }

    async fn cleanup(self) {
        if let Scratch::Postgres { base, schema } = self {
            let mut admin = PgConnection::connect(&base).await.expect("admin connect");
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
                .execute(&mut admin)
                .await
                .expect("drop schema");
            admin.close().await.ok();
        }
    }
}

/// Runs one test body against a fresh database of `backend` and a server over it.
pub async fn run<F, Fut>(backend: Backend, name: &str, body: F)
where
    F: FnOnce(TestApp) -> Fut,
    Fut: Future<Output = ()>,
{
    run_with(backend, name, |_| {}, body).await;
}

/// [`run`] with the server's settings adjusted first (limits, quotas); the defaults are
/// those of [`test_settings`].
pub async fn run_with<F, Fut>(
    backend: Backend,
    name: &str,
    configure: impl FnOnce(&mut Settings),
    body: F,
) where
    F: FnOnce(TestApp) -> Fut,
    Fut: Future<Output = ()>,
{
    run_with_corpus(backend, name, configure, None, body).await;
}

/// [`run_with`] over a server that answers from this reference corpus.
pub async fn run_with_corpus<F, Fut>(
    backend: Backend,
    name: &str,
    configure: impl FnOnce(&mut Settings),
    corpus: Option<Arc<corpus::Corpus>>,
    body: F,
) where
    F: FnOnce(TestApp) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some((scratch, url)) = Scratch::create(backend, name).await else {
        return;
    };
    let mut settings = test_settings();
    configure(&mut settings);
    let result = AssertUnwindSafe(async {
        let app = TestApp::start(backend, url, settings, corpus).await;
        let store = app.store.clone();
        body(app).await;
        store.close().await;
    })
    .catch_unwind()
    .await;
    scratch.cleanup().await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// A running server and the means to seed it and to reach its database directly.
pub struct TestApp {
    pub backend: Backend,
    pub url: String,
    pub base: String,
    pub store: Arc<dyn Store>,
    pub clock: Arc<FixedClock>,
    pub hasher: auth::KeyHasher,
    /// The running server's state (its usage counters, credential cache, limiter).
    pub state: AppState,
    client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.server.abort();
    }
}

/// The server's state over `store`: real credentials (keys hashed with `hasher`, JWTs
/// signed with a test RSA key), an in-process limiter, and per-minute limits high enough
/// that no test meets them (the frozen clock never lets a bucket drain).
pub fn app_state(
    store: Arc<dyn Store>,
    hasher: auth::KeyHasher,
    clock: Arc<FixedClock>,
) -> AppState {
    app_state_with(
        store,
        hasher,
        clock,
        Limiter::Local(LocalLimiter::default()),
        test_settings(),
    )
}

/// The settings of [`app_state`]: the documented defaults with every per-minute limit raised out of
/// reach.
pub fn test_settings() -> Settings {
    Settings {
        limits: Limits {
            hash_of_day_per_ip: 1_000_000,
            public_per_ip: 1_000_000,
            token_per_key: 1_000_000,
            authenticated_per_key: 1_000_000,
            failed_auth_per_ip: 1_000_000,
            failed_auth_per_team: 1_000_000,
        },
        ..Settings::default()
    }
}

/// The server's state with a chosen limiter and settings.
pub fn app_state_with(
    store: Arc<dyn Store>,
    hasher: auth::KeyHasher,
    clock: Arc<dyn Clock>,
    limiter: Limiter,
    settings: Settings,
) -> AppState {
    let credentials = Credentials::new(store.clone(), hasher, jwt_keys(), clock.clone());
    AppState::new(
        store,
        credentials,
        limiter,
        clock,
        settings,
        jobs::LogKey::new(&[7; 32]),
    )
}

/// The PKCS#8 DER of the RSA key that signs this binary's tokens. RSA key generation is
/// slow; one key serves every test of the binary.
pub fn jwt_pkcs8() -> &'static [u8] {
    static PKCS8: OnceLock<Vec<u8>> = OnceLock::new();
    PKCS8.get_or_init(|| auth::jwt::generate_rsa_pkcs8().expect("RSA key"))
}

fn jwt_keys() -> JwtKeys {
    JwtKeys::from_pkcs8(&[jwt_pkcs8().to_vec()]).expect("JWT keys")
}

/// One HTTP answer.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {}",
                self.status, self.text
            )
        })
    }

    /// The `error` code of an error body.
    pub fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code in {}", self.text))
            .to_string()
    }

    pub fn message(&self) -> String {
        self.json()["message"].as_str().unwrap_or("").to_string()
    }

    pub fn content_type(&self) -> String {
        self.headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    }

    /// Asserts the status and the error code of an error answer.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "{}", self.text);
        assert_eq!(self.error(), code, "{}", self.text);
    }
}

impl TestApp {
    async fn start(
        backend: Backend,
        url: String,
        settings: Settings,
        corpus: Option<Arc<corpus::Corpus>>,
    ) -> Self {
        let clock = Arc::new(FixedClock::new(start_time()));
        Self::start_on(backend, url, clock, settings, corpus).await
    }

    async fn start_on(
        backend: Backend,
        url: String,
        clock: Arc<FixedClock>,
        settings: Settings,
        corpus: Option<Arc<corpus::Corpus>>,
    ) -> Self {
        let store = store::open(&url, RecordSigner::new(RECORD_SECRET))
            .await
            .expect("open store");
        let hasher = auth::KeyHasher::new(KEY_SECRET);
        let dyn_clock: Arc<dyn Clock> = clock.clone();
        let state = app_state_with(
            store.clone(),
            hasher.clone(),
            dyn_clock,
            Limiter::Local(LocalLimiter::default()),
            settings,
        );
        let state = match corpus {
            Some(corpus) => state.with_corpus(corpus),
            None => state,
        };
        let app = server::router(state.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(server::serve_with(listener, app, &state.settings, async {
            let _ = rx.await;
        }));
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .expect("client");
        Self {
            backend,
            url,
            base: format!("http://{addr}"),
            store,
            clock,
            hasher,
            state,
            client,
            shutdown: Some(tx),
            server,
        }
    }

    /// A second server (another replica: its own store connections, credential cache,
    /// limiter and usage counters) over the same database, on the same clock, sharing the
    /// reference corpus. Close its store when done: `replica.store.close().await`.
    pub async fn replica(&self) -> TestApp {
        Self::start_on(
            self.backend,
            self.url.clone(),
            self.clock.clone(),
            (*self.state.settings).clone(),
            self.state.corpus.clone(),
        )
        .await
    }

    /// Starts this server's background upkeep (`server::maintain`), as the binary does.
    pub fn spawn_maintain(&self) -> Upkeep {
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(server::maintain(self.state.clone(), async {
            let _ = rx.await;
        }));
        Upkeep {
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Stops serving HTTP (in-flight requests finish), as on a clean shutdown.
    pub async fn stop_serving(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.server).await;
    }

    /// Creates an account of either kind with one key of `role`; returns (key_id, key).
    pub async fn tenant(
        &self,
        team_id: &str,
        kind: TenantKind,
        role: Role,
        tier: Tier,
    ) -> (String, String) {
        let issued = self.hasher.issue(team_id).expect("issue key");
        self.store
            .create_tenant_with_key(
                team_id,
                kind,
                tier,
                NewApiKey {
                    key_id: issued.key_id.clone(),
                    team_id: team_id.into(),
                    key_hash: issued.key_hash.clone(),
                    role,
                    label: format!("{role} key"),
                },
                self.clock.now(),
            )
            .await
            .expect("create tenant");
        (issued.key_id, issued.key)
    }

    /// The public `key_id` of a key.
    pub async fn key_id(&self, key: &str) -> String {
        self.store
            .key_by_hash(&self.hasher.hash(key))
            .await
            .expect("key_by_hash")
            .expect("known key")
            .key_id
    }

    /// Any method with an `X-API-Key` and an optional JSON body.
    pub async fn send(&self, method: Method, path: &str, key: &str, body: Option<Value>) -> Resp {
        self.call(method, path, Some(key), body.map(|b| b.to_string().into()))
            .await
    }

    /// Creates an account (tenant) with one key of `role`; returns the key.
    pub async fn account(&self, team_id: &str, role: Role, tier: Tier) -> String {
        self.tenant(team_id, TenantKind::Customer, role, tier)
            .await
            .1
    }

    /// The usual caller: an analyst on a basic account.
    pub async fn analyst(&self) -> String {
        self.account("analyst-basic", Role::Analyst, Tier::Basic)
            .await
    }

    /// Moves the clock a minute on and records the file at the new time.
    pub async fn record(&self, r: NewRecord) -> String {
        self.clock.advance(Duration::minutes(1));
        self.record_now(r).await
    }

    /// Records the file at the clock's current time.
    pub async fn record_now(&self, r: NewRecord) -> String {
        match self
            .store
            .record(r, self.clock.now())
            .await
            .expect("record")
        {
            RecordOutcome::Inserted { id, .. } => id,
            other => panic!("expected Inserted, got {other:?}"),
        }
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<reqwest::Body>,
    ) -> Resp {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(key) = key {
            req = req.header("X-API-Key", key);
        }
        if let Some(body) = body {
            req = req.header("Content-Type", "application/json").body(body);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body");
        assert_ne!(status, 500, "{path} answered 500: {text}");
        Resp {
            status,
            headers,
            text,
        }
    }

    /// The same with `Authorization: Bearer <token>`.
    pub async fn call_bearer(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<reqwest::Body>,
    ) -> Resp {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {token}"));
        if let Some(body) = body {
            req = req.header("Content-Type", "application/json").body(body);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body");
        assert_ne!(status, 500, "{path} answered 500: {text}");
        Resp {
            status,
            headers,
            text,
        }
    }

    /// A JWT for the key, from the token route.
    pub async fn token(&self, key: &str) -> String {
        let r = self
            .call(Method::POST, "/api/v1/auth/token", Some(key), None)
            .await;
        assert_eq!(r.status, 200, "token exchange: {}", r.text);
        r.json()["token"].as_str().expect("token").to_string()
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call(Method::GET, path, None, None).await
    }

    pub async fn get_with(&self, path: &str, key: &str) -> Resp {
        self.call(Method::GET, path, Some(key), None).await
    }

    pub async fn post_with(&self, path: &str, key: &str, body: impl Into<String>) -> Resp {
        let body: String = body.into();
        self.call(Method::POST, path, Some(key), Some(body.into()))
            .await
    }

    /// Runs one statement on a raw connection, behind the store's back; rows affected.
    pub async fn exec(&self, sql: &str, binds: &[&str]) -> u64 {
        self.try_exec(sql, binds)
            .await
            .unwrap_or_else(|e| panic!("raw exec: {e}"))
    }

    /// [`TestApp::exec`] that reports the database's refusal instead of panicking.
    pub async fn try_exec(&self, sql: &str, binds: &[&str]) -> Result<u64, String> {
        let sql = sqlx::AssertSqlSafe(sql.to_string());
        match self.backend {
            Backend::Sqlite => {
                let mut c = SqliteConnection::connect(&self.url)
                    .await
                    .expect("raw connect");
                let mut q = sqlx::query(sql);
                for b in binds {
                    q = q.bind(*b);
                }
                let n = q.execute(&mut c).await.map(|r| r.rows_affected());
                c.close().await.ok();
                n.map_err(|e| e.to_string())
            }
            Backend::Postgres => {
                let mut c = PgConnection::connect(&self.url).await.expect("raw connect");
                let mut q = sqlx::query(sql);
                for b in binds {
                    q = q.bind(*b);
                }
                let n = q.execute(&mut c).await.map(|r| r.rows_affected());
                c.close().await.ok();
                n.map_err(|e| e.to_string())
            }
        }
    }
}

impl TestApp {
    /// Rows of a query run on a raw connection, behind the store's back; every selected
    /// column is read as text, so select text columns (or cast).
    pub async fn text_rows(&self, sql: &str, binds: &[&str]) -> Vec<Vec<String>> {
        use sqlx::Row as _;
        let sql = sqlx::AssertSqlSafe(sql.to_string());
        match self.backend {
            Backend::Sqlite => {
                let mut c = SqliteConnection::connect(&self.url)
                    .await
                    .expect("raw connect");
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
                let mut c = PgConnection::connect(&self.url).await.expect("raw connect");
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
}

/// A running `server::maintain` task.
pub struct Upkeep {
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Upkeep {
    /// Signals shutdown and waits for the final usage flush.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("maintain task");
        }
    }
}

impl Drop for Upkeep {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Deterministic, random-looking lowercase hex of `len` characters.
pub fn hex_of(seed: u64, len: usize) -> String {
    let mut x = seed ^ ((len as u64) << 56) ^ 0x9e37_79b9_7f4a_7c15;
    let mut out = String::new();
    while out.len() < len {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.push_str(&format!("{:016x}", z ^ (z >> 31)));
    }
    out.truncate(len);
    out
}

/// A record with SHA-256, SHA-1 and MD5 derived from `seed`.
pub fn rec(
    vendor: &str,
    name: &str,
    version: &str,
    platform: Platform,
    arch: Arch,
    seed: u64,
) -> NewRecord {
    NewRecord {
        vendor: vendor.into(),
        executable_name: name.into(),
        version: version.into(),
        platform,
        arch,
        hash_sha256: hex_of(seed, 64),
        hash_sha1: Some(hex_of(seed, 40)),
        hash_md5: Some(hex_of(seed, 32)),
        source_url: format!(
            "https://downloads.example/{}/{name}",
            vendor.replace(' ', "-")
        ),
        download_verified: true,
        sig_signer: None,
        sig_issuer: None,
        sig_serial: None,
        sig_thumbprint: None,
    }
}

pub fn putty(version: &str, arch: Arch, seed: u64) -> NewRecord {
    rec("PuTTY", "putty.exe", version, Platform::Windows, arch, seed)
}

/// The Go MSI for windows/amd64 of `version`.
pub fn go(version: &str, seed: u64) -> NewRecord {
    rec(
        "Go",
        &format!("go{version}.windows-amd64.msi"),
        version,
        Platform::Windows,
        Arch::Amd64,
        seed,
    )
}

/// A PyPI package, addressed as `name (pypi)`; manifest-only: SHA-256 alone.
pub fn pypi(name: &str, version: &str, seed: u64) -> NewRecord {
    let mut r = rec(
        "pypi",
        &format!("{name} (pypi)"),
        version,
        Platform::Universal,
        Arch::Universal,
        seed,
    );
    r.hash_sha1 = None;
    r.hash_md5 = None;
    r.download_verified = false;
    r.source_url = format!("https://files.pythonhosted.org/packages/{name}-{version}.tar.gz");
    r
}

/// Percent-encodes a query value.
pub fn q(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
