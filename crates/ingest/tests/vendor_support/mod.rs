//! Loopback vendor channels for the fetcher tests: an HTTPS server (certificate from a test CA
//! made with rcgen, trusted by the test client) serving fixed documents, and an in-memory
//! `RecordSink`.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::{TimeZone, Utc};
use ingest::{
    DownloadAudit, DownloadLimits, FetchContext, FetchLimits, RecordSink, RecordedOutcome,
    VendorConfig, VendorReport, ingest_vendor, vendors,
};
use model::{Arch, FixedClock, NewRecord, Platform};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use sha1::Digest as _;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// The test CA and a server certificate for 127.0.0.1 it signed.
struct Pki {
    ca_pem: String,
    acceptor: TlsAcceptor,
}

static PKI: LazyLock<Pki> = LazyLock::new(|| {
    let mut ca_params = CertificateParams::default();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Knowngood Vendor Test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone(), ca.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        acceptor: TlsAcceptor::from(Arc::new(config)),
    }
});

/// A TCP listener that completes the TLS handshake before handing connections to axum.
struct TlsListener(TcpListener);

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.0.accept().await else {
                continue;
            };
            let handshake = PKI.acceptor.accept(tcp);
            if let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(5), handshake).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// The test CA's certificate, PEM: what an operator puts in `extra_ca_file`.
pub fn ca_pem() -> &'static str {
    &PKI.ca_pem
}

/// A loopback HTTP proxy that tunnels `CONNECT host:port` and records each target.
pub struct ConnectProxy {
    pub url: String,
    pub targets: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let targets = Arc::new(Mutex::new(Vec::new()));
        let seen = targets.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(tunnel(client, seen.clone()));
            }
        });
        Self { url, targets }
    }

    pub fn targets(&self) -> Vec<String> {
        self.targets.lock().unwrap().clone()
    }
}

async fn tunnel(mut client: TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte).await.unwrap_or(0) == 0 {
            return;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut words = head.split_whitespace();
    let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
        let _ = client
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            .await;
        return;
    };
    seen.lock().unwrap().push(target.to_owned());
    let Ok(mut upstream) = TcpStream::connect(target).await else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
        return;
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await
        .is_ok()
    {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}

/// A client that trusts only the test CA and, like production, speaks HTTPS only.
pub fn client() -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(PKI.ca_pem.as_bytes()).unwrap();
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .https_only(true)
        .no_proxy()
        .build()
        .unwrap()
}

#[derive(Clone)]
enum Reply {
    Body(Vec<u8>),
    Status(StatusCode),
}

/// A vendor channel made of fixed documents, keyed by raw request path (query ignored).
/// `{BASE}` in a document is replaced by the server's own base URL when served.
#[derive(Clone, Default)]
pub struct Site {
    files: HashMap<String, Reply>,
    /// What every unknown path answers (404 when unset).
    otherwise: Option<Reply>,
    /// Paths requested, in order.
    pub hits: Arc<Mutex<Vec<String>>>,
}

impl Site {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn file(mut self, path: &str, body: impl Into<Vec<u8>>) -> Self {
        self.files.insert(path.to_owned(), Reply::Body(body.into()));
        self
    }

    pub fn status(mut self, path: &str, status: u16) -> Self {
        self.files.insert(
            path.to_owned(),
            Reply::Status(StatusCode::from_u16(status).unwrap()),
        );
        self
    }

    /// Every path answers `status`: a vendor that is down.
    pub fn down(status: u16) -> Self {
        Self {
            otherwise: Some(Reply::Status(StatusCode::from_u16(status).unwrap())),
            ..Self::default()
        }
    }

    /// Every path answers 200 with an HTML error page: a broken channel.
    pub fn garbage() -> Self {
        Self {
            otherwise: Some(Reply::Body(
                b"<html><body><h1>Down for maintenance</h1></body></html>".to_vec(),
            )),
            ..Self::default()
        }
    }

    pub fn hit(&self, path: &str) -> bool {
        self.hits.lock().unwrap().iter().any(|p| p == path)
    }

    /// Serves the site over HTTPS on 127.0.0.1 for the rest of the test; the base URL.
    pub async fn serve(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://{}", listener.local_addr().unwrap());
        let site = Arc::new(self.clone());
        let own_base = Arc::new(base.clone());
        let app = Router::new().fallback(move |uri: Uri| {
            let (site, own_base) = (site.clone(), own_base.clone());
            async move { site.answer(&uri, &own_base) }
        });
        tokio::spawn(async move { axum::serve(TlsListener(listener), app).await });
        base
    }

    fn answer(&self, uri: &Uri, base: &str) -> Response {
        let path = uri.path();
        self.hits.lock().unwrap().push(path.to_owned());
        match self.files.get(path).or(self.otherwise.as_ref()) {
            Some(Reply::Body(body)) => {
                let body = match std::str::from_utf8(body) {
                    Ok(text) if text.contains("{BASE}") => {
                        text.replace("{BASE}", base).into_bytes()
                    }
                    _ => body.clone(),
                };
                ([(header::CONTENT_TYPE, "application/octet-stream")], body).into_response()
            }
            Some(Reply::Status(status)) => (*status, "unavailable").into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        }
    }
}

/// A base URL nothing listens on: connections are refused.
pub async fn dead_base() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("https://{addr}")
}

/// The records kept in memory, identified like the store does: a file and version on one
/// platform and arch.
#[derive(Default)]
pub struct MemorySink {
    pub records: Mutex<Vec<(String, NewRecord)>>,
    pub audits: Mutex<Vec<DownloadAudit>>,
    /// Records with this executable name fail to store.
    pub fail_name: Option<String>,
}

#[async_trait]
impl RecordSink for MemorySink {
    async fn record(&self, r: NewRecord) -> Result<RecordedOutcome, model::Error> {
        if self.fail_name.as_deref() == Some(r.executable_name.as_str()) {
            return Err(model::Error::Internal("disk full".into()));
        }
        let mut records = self.records.lock().unwrap();
        let same = |k: &NewRecord| {
            (
                &k.vendor,
                &k.executable_name,
                &k.version,
                k.platform,
                k.arch,
            ) == (
                &r.vendor,
                &r.executable_name,
                &r.version,
                r.platform,
                r.arch,
            )
        };
        if let Some((id, known)) = records.iter_mut().find(|(_, k)| same(k)) {
            let changed = known.hash_sha256 != r.hash_sha256;
            *known = r;
            return Ok(RecordedOutcome {
                id: id.clone(),
                inserted: changed,
                hash_changed: changed,
            });
        }
        let id = format!("rec-{}", records.len() + 1);
        records.push((id.clone(), r));
        Ok(RecordedOutcome {
            id,
            inserted: true,
            hash_changed: false,
        })
    }

    async fn download_audited(&self, audit: DownloadAudit) -> Result<(), model::Error> {
        self.audits.lock().unwrap().push(audit);
        Ok(())
    }
}

impl MemorySink {
    /// The record of `name` on `platform`/`arch`.
    pub fn get(&self, name: &str, platform: Platform, arch: Arch) -> NewRecord {
        let records = self.records.lock().unwrap();
        let found = records
            .iter()
            .find(|(_, r)| r.executable_name == name && r.platform == platform && r.arch == arch);
        match found {
            Some((_, r)) => r.clone(),
            None => panic!(
                "no record {name} {platform}/{arch}; have {:#?}",
                records
                    .iter()
                    .map(|(_, r)| (&r.executable_name, r.platform, r.arch))
                    .collect::<Vec<_>>()
            ),
        }
    }

    pub fn versions(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .records
            .lock()
            .unwrap()
            .iter()
            .map(|(_, r)| r.version.clone())
            .collect();
        v.dedup();
        v
    }
}

pub fn limits() -> FetchLimits {
    FetchLimits {
        max_versions: 1,
        max_document_bytes: 8 << 20,
        request_timeout: Duration::from_secs(10),
        download: DownloadLimits {
            max_bytes: 1 << 20,
            connect_timeout: Duration::from_secs(5),
            total_timeout: Duration::from_secs(10),
            max_signature_bytes: 1 << 20,
        },
    }
}

pub fn clock() -> FixedClock {
    FixedClock::new(Utc.with_ymd_and_hms(2026, 5, 1, 2, 0, 0).unwrap())
}

/// The vendor's configuration with every URL pointed at `base`.
pub fn config_for(id: &str, base: &str) -> VendorConfig {
    let mut config = vendors::by_id(id).unwrap().config;
    config.base_url = base.to_owned();
    if config.files_url.is_some() {
        config.files_url = Some(base.to_owned());
    }
    config
}

/// Runs vendor `id` against `base` with `config` adjusted by the test.
pub async fn run_with(
    id: &str,
    base: &str,
    sink: &MemorySink,
    adjust: impl FnOnce(&mut VendorConfig, &mut FetchLimits),
) -> VendorReport {
    let setup = vendors::by_id(id).unwrap();
    let mut config = config_for(id, base);
    let mut limits = limits();
    adjust(&mut config, &mut limits);
    let ctx = FetchContext::new(client(), config, limits);
    ingest_vendor(&*setup.fetcher, &ctx, sink, &clock()).await
}

/// Serves `site` and runs vendor `id` against it with default test settings.
pub async fn run(id: &str, site: &Site) -> (VendorReport, MemorySink) {
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with(id, &base, &sink, |_, _| {}).await;
    (report, sink)
}

pub fn sha256(data: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(data))
}

pub fn sha1(data: &[u8]) -> String {
    hex::encode(sha1::Sha1::digest(data))
}

pub fn md5(data: &[u8]) -> String {
    hex::encode(md5::Md5::digest(data))
}

/// A distinct, well-formed digest of `len` hex characters for manifest-only files.
pub fn fake_hex(seed: &str, len: usize) -> String {
    sha256(seed.as_bytes()).repeat(2)[..len].to_owned()
}

/// The body served for a downloadable file.
pub fn body(name: &str) -> Vec<u8> {
    format!("vendor binary {name}\n").repeat(50).into_bytes()
}
