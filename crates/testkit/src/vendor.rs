//! A fake vendor channel: fixed documents served on loopback, over HTTPS (a certificate
//! from a test CA, trusted by [`https_client`]) or plain HTTP, that a test can change
//! while it is served (a new release, an outage, a flaky path). With the `apt` feature,
//! `apt` publishes a signed Debian-format archive on it.

#[cfg(feature = "apt")]
pub mod apt;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
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
    type Addr = SocketAddr;

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
pub fn https_client() -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(PKI.ca_pem.as_bytes()).unwrap();
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .https_only(true)
        .no_proxy()
        .build()
        .unwrap()
}

/// A client that talks to loopback directly even when a proxy is configured.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// Serves `app` over plain HTTP on 127.0.0.1 at a free port for the rest of the test.
pub async fn serve_router(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A base URL nothing listens on: connections are refused.
///
/// The port stays bound (without listening) for the rest of the process: a port that
/// was merely freed can be taken by another test's server running alongside, which
/// then answers instead of refusing.
pub async fn dead_base() -> String {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    std::mem::forget(socket);
    format!("https://{addr}")
}

#[derive(Clone)]
enum Reply {
    Body(Vec<u8>),
    Status(StatusCode),
}

#[derive(Default)]
struct Documents {
    files: HashMap<String, Reply>,
    /// What every unknown path answers (404 when unset).
    otherwise: Option<Reply>,
    /// Path prefixes answering with a status: a vendor that is down.
    down: Vec<(String, StatusCode)>,
    /// Paths that answer 503 for their next n requests.
    flaky: HashMap<String, u32>,
}

/// A vendor channel, keyed by raw request path (the query is ignored unless a document was
/// registered with it). `{BASE}` in a text
/// document is replaced by the server's own base URL when served. Clones share the
/// documents, so a served site can still be changed.
#[derive(Clone, Default)]
pub struct Site {
    docs: Arc<Mutex<Documents>>,
    /// Paths requested, in order.
    pub hits: Arc<Mutex<Vec<String>>>,
}

impl Site {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every path answers `status`: a vendor that is down.
    pub fn down(status: u16) -> Self {
        Self::otherwise(Reply::Status(StatusCode::from_u16(status).unwrap()))
    }

    /// Every path answers 200 with an HTML error page: a broken channel.
    pub fn garbage() -> Self {
        Self::otherwise(Reply::Body(
            b"<html><body><h1>Down for maintenance</h1></body></html>".to_vec(),
        ))
    }

    fn otherwise(reply: Reply) -> Self {
        let site = Self::default();
        site.docs.lock().unwrap().otherwise = Some(reply);
        site
    }

    /// Serves `body` at `path` (replacing what was there); returns the site, so calls chain.
    pub fn file(&self, path: &str, body: impl Into<Vec<u8>>) -> Self {
        let reply = Reply::Body(body.into());
        self.docs
            .lock()
            .unwrap()
            .files
            .insert(path.to_owned(), reply);
        self.clone()
    }

    /// `path` answers `status`; returns the site, so calls chain.
    pub fn status(&self, path: &str, status: u16) -> Self {
        let reply = Reply::Status(StatusCode::from_u16(status).unwrap());
        self.docs
            .lock()
            .unwrap()
            .files
            .insert(path.to_owned(), reply);
        self.clone()
    }

    /// Every path under `prefix` answers `status` until [`Site::up`].
    pub fn down_under(&self, prefix: &str, status: u16) {
        let status = StatusCode::from_u16(status).unwrap();
        self.docs
            .lock()
            .unwrap()
            .down
            .push((prefix.to_owned(), status));
    }

    pub fn up(&self, prefix: &str) {
        self.docs.lock().unwrap().down.retain(|(p, _)| p != prefix);
    }

    /// `path` answers 503 for its next `times` requests.
    pub fn flaky(&self, path: &str, times: u32) {
        self.docs
            .lock()
            .unwrap()
            .flaky
            .insert(path.to_owned(), times);
    }

    pub fn hit(&self, path: &str) -> bool {
        self.hits.lock().unwrap().iter().any(|p| p == path)
    }

    /// Serves the site over HTTPS on 127.0.0.1 for the rest of the test; the base URL.
    pub async fn serve(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://{}", listener.local_addr().unwrap());
        let app = self.router(&base);
        tokio::spawn(async move { axum::serve(TlsListener(listener), app).await });
        base
    }

    /// Serves the site over plain HTTP (for clients injected without TLS); the base URL.
    pub async fn serve_http(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = self.router(&base);
        tokio::spawn(async move { axum::serve(listener, app).await });
        base
    }

    fn router(&self, base: &str) -> Router {
        let site = self.clone();
        let base = Arc::new(base.to_owned());
        Router::new().fallback(move |uri: Uri| {
            let (site, base) = (site.clone(), base.clone());
            async move { site.answer(&uri, &base) }
        })
    }

    fn answer(&self, uri: &Uri, base: &str) -> Response {
        let path = uri.path();
        self.hits.lock().unwrap().push(path.to_owned());
        let reply = {
            let mut docs = self.docs.lock().unwrap();
            let down = docs
                .down
                .iter()
                .find(|(prefix, _)| path.starts_with(prefix.as_str()))
                .map(|(_, status)| *status);
            if let Some(status) = down {
                return (status, "unavailable").into_response();
            }
            if let Some(left) = docs.flaky.get_mut(path)
                && *left > 0
            {
                *left -= 1;
                return (StatusCode::SERVICE_UNAVAILABLE, "try again").into_response();
            }
            // A document registered with its query (`/files/?release=7`) answers that
            // query only; otherwise the path alone decides.
            let with_query = uri.query().map(|q| format!("{path}?{q}"));
            with_query
                .and_then(|p| docs.files.get(&p))
                .or_else(|| docs.files.get(path))
                .or(docs.otherwise.as_ref())
                .cloned()
        };
        match reply {
            Some(Reply::Body(body)) => {
                let body = match std::str::from_utf8(&body) {
                    Ok(text) if text.contains("{BASE}") => {
                        text.replace("{BASE}", base).into_bytes()
                    }
                    _ => body,
                };
                ([(header::CONTENT_TYPE, "application/octet-stream")], body).into_response()
            }
            Some(Reply::Status(status)) => (status, "unavailable").into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        }
    }
}
