//! A real server on 127.0.0.1:0 over a scratch database, with real API keys, reached over
//! HTTP with reqwest.

use std::sync::{Arc, OnceLock};

use auth::credentials::Credentials;
use auth::jwt::JwtKeys;
use auth::limits::{Limiter, LocalLimiter};
use chrono::Duration;
use model::TenantKind;
use model::{Clock, FixedClock, NewRecord, RecordSigner, Role, Tier};
use reqwest::Method;
use serde_json::Value;
use server::{AppState, Limits, Settings};
use store::{NewApiKey, RecordOutcome, Store};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::db::{self, Backend, Scratch};
use crate::{Fixture, start_time};

use crate::db::RECORD_SECRET;
pub const KEY_SECRET: &[u8] = b"api-test-key-secret";

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

impl Fixture for TestApp {
    type Config = Settings;

    fn config() -> Settings {
        test_settings()
    }

    async fn start(scratch: &Arc<Scratch>, settings: Settings) -> Self {
        TestApp::on(scratch, settings, None).await
    }

    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }
}

impl TestApp {
    /// A server over a new database of `scratch`, answering from `corpus` when given; its
    /// clock stands at [`start_time`].
    pub async fn on(
        scratch: &Scratch,
        settings: Settings,
        corpus: Option<Arc<corpus::Corpus>>,
    ) -> Self {
        let url = scratch.new_url().await;
        let clock = Arc::new(FixedClock::new(start_time()));
        Self::start_on(scratch.backend(), url, clock, settings, corpus).await
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
        db::exec(self.backend, &self.url, sql, binds).await
    }

    /// Rows of a query run on a raw connection, behind the store's back; every selected
    /// column is read as text, so select text columns (or cast).
    pub async fn text_rows(&self, sql: &str, binds: &[&str]) -> Vec<Vec<String>> {
        db::text_rows(self.backend, &self.url, sql, binds).await
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
