//! The one place outbound HTTP clients are built (vendor channels, downloads, corpus
//! releases): the built-in web roots, the operating system's trust store ([`SystemRoots`],
//! read where OpenSSL reads it, as apt, pip and curl on the same machine do), plus, when
//! configured, the certificates of a PEM bundle (a private mirror or a TLS-inspecting
//! proxy), and the proxies of the environment.
//!
//! Proxies are read once into [`ProxySettings`] and applied explicitly, so what a client
//! does is decided by its settings, not by the environment at the moment it is built.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::{Certificate, NoProxy, Proxy};

#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    #[error("extra CA file {path}: cannot read: {error}")]
    CaUnreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("extra CA file {path}: {reason}")]
    CaInvalid { path: PathBuf, reason: String },
    // The variable's value is not shown: it may hold proxy credentials.
    #[error("{variable} is not a usable proxy URL")]
    Proxy {
        variable: &'static str,
        #[source]
        source: reqwest::Error,
    },
    #[error("building the HTTP client: {0}")]
    Build(#[source] reqwest::Error),
}

/// Certificates trusted in addition to the built-in web roots.
#[derive(Clone)]
pub struct ExtraCa {
    path: PathBuf,
    certs: Vec<Certificate>,
}

impl ExtraCa {
    /// Reads a PEM bundle. A file that cannot be read, is empty, holds no certificate or a
    /// certificate that does not parse is an error naming the file.
    pub fn load(path: &Path) -> Result<Self, OutboundError> {
        let invalid = |reason: &str| OutboundError::CaInvalid {
            path: path.to_path_buf(),
            reason: reason.to_owned(),
        };
        let pem = std::fs::read(path).map_err(|error| OutboundError::CaUnreadable {
            path: path.to_path_buf(),
            error,
        })?;
        if pem.iter().all(u8::is_ascii_whitespace) {
            return Err(invalid("the file is empty"));
        }
        let certs = Certificate::from_pem_bundle(&pem)
            .map_err(|_| invalid("a PEM certificate block does not decode"))?;
        if certs.is_empty() {
            return Err(invalid(
                "no certificate found (expected PEM \"-----BEGIN CERTIFICATE-----\" blocks)",
            ));
        }
        let ca = Self {
            path: path.to_path_buf(),
            certs,
        };
        // The PEM decoding does not look inside the DER; adding to a root store does.
        let mut builder = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .no_proxy();
        for cert in &ca.certs {
            builder = builder.add_root_certificate(cert.clone());
        }
        builder.build().map_err(|e| {
            invalid(&format!(
                "a certificate is not usable as a trust anchor: {}",
                crate::error_chain(&e)
            ))
        })?;
        Ok(ca)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many certificates the bundle holds.
    pub fn len(&self) -> usize {
        self.certs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.certs.is_empty()
    }
}

/// Whether the TLS library accepts `cert` as a trust anchor.
fn usable_anchor(cert: &Certificate) -> bool {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .no_proxy()
        .add_root_certificate(cert.clone())
        .build()
        .is_ok()
}

impl fmt::Debug for ExtraCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExtraCa")
            .field("path", &self.path)
            .field("certificates", &self.certs.len())
            .finish()
    }
}

/// Where the operating system keeps its trusted CA certificates, found the way OpenSSL (and
/// `openssl-probe`, `rustls-native-certs`) find them: `SSL_CERT_FILE` (a PEM bundle) and
/// `SSL_CERT_DIR` (directories of PEM files, `:`-separated) when either is set; otherwise
/// the distribution's bundle (`/etc/ssl/certs/ca-certificates.crt` on Debian and Ubuntu,
/// `/etc/pki/tls/certs/ca-bundle.crt` on Rocky Linux and RHEL, `/etc/ssl/cert.pem` on Arch
/// and Alpine, ...) and `/etc/ssl/certs`. A CA installed there (`update-ca-certificates`,
/// `update-ca-trust`) is trusted without any setting of this service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemRoots {
    pub files: Vec<PathBuf>,
    pub dirs: Vec<PathBuf>,
}

/// Bundles OpenSSL builds of the common distributions read, first found wins.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/pki/tls/cacert.pem",
    "/usr/local/share/certs/ca-root-nss.crt",
];

/// Directories of one-certificate PEM files.
const SYSTEM_DIRS: &[&str] = &["/etc/ssl/certs"];

/// Largest certificate file read from the system store.
const MAX_SYSTEM_FILE: u64 = 16 << 20;

impl SystemRoots {
    /// No system store (the bundled roots and `extra_ca_file` only).
    pub fn none() -> Self {
        Self {
            files: Vec::new(),
            dirs: Vec::new(),
        }
    }

    /// From the process environment.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// From variables looked up by `var` (`SSL_CERT_FILE`, `SSL_CERT_DIR`); empty values
    /// count as unset.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let (file, dir) = (set("SSL_CERT_FILE"), set("SSL_CERT_DIR"));
        if file.is_some() || dir.is_some() {
            return Self {
                files: file.into_iter().map(PathBuf::from).collect(),
                dirs: dir
                    .iter()
                    .flat_map(|d| d.split(':'))
                    .filter(|d| !d.is_empty())
                    .map(PathBuf::from)
                    .collect(),
            };
        }
        Self {
            files: SYSTEM_BUNDLES
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
                .into_iter()
                .collect(),
            dirs: SYSTEM_DIRS.iter().map(PathBuf::from).collect(),
        }
    }

    /// The certificates found, DER, each once. Unreadable files and blocks that do not
    /// decode are skipped (a system store holds what other programs put there); so are
    /// certificates that do not parse as X.509.
    pub fn load(&self) -> Vec<Vec<u8>> {
        use der::Decode as _;
        let mut pem_files: Vec<PathBuf> = self.files.clone();
        for dir in &self.dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut found: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    // Certificates by name, and OpenSSL's hash links (`5a3f0ff8.0`).
                    name.ends_with(".pem")
                        || name.ends_with(".crt")
                        || name
                            .rsplit_once('.')
                            .is_some_and(|(_, n)| n.bytes().all(|b| b.is_ascii_digit()))
                })
                .collect();
            found.sort();
            pem_files.extend(found);
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for path in pem_files {
            let readable =
                std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() <= MAX_SYSTEM_FILE);
            if !readable {
                continue;
            }
            let Ok(text) = std::fs::read(&path) else {
                continue;
            };
            for der in pem_certificates(&text) {
                if x509_cert::Certificate::from_der(&der).is_ok() && seen.insert(der.clone()) {
                    out.push(der);
                }
            }
        }
        out
    }
}

/// The DER of every `CERTIFICATE` block of a PEM text (other blocks, and blocks that do not
/// decode, skipped).
fn pem_certificates(text: &[u8]) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let text = String::from_utf8_lossy(text);
    let mut out = Vec::new();
    let mut rest = text.as_ref();
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    while let Some(start) = rest.find(BEGIN) {
        let body = &rest[start + BEGIN.len()..];
        let Some(end) = body.find(END) else { break };
        let b64: String = body[..end]
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(b64) {
            out.push(der);
        }
        rest = &body[end + END.len()..];
    }
    out
}

/// Proxies, as curl and reqwest read them: `HTTPS_PROXY` (or `https_proxy`) for `https://`
/// URLs, `HTTP_PROXY` (or `http_proxy`) for `http://` ones, except hosts matched by
/// `NO_PROXY` (or `no_proxy`: domains with their subdomains, IP addresses, CIDR ranges, `*`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ProxySettings {
    pub https: Option<String>,
    pub http: Option<String>,
    pub no_proxy: Option<String>,
}

impl ProxySettings {
    /// No proxy at all.
    pub fn none() -> Self {
        Self::default()
    }

    /// From the process environment.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// From variables looked up by `var`; the upper-case name wins, empty values count as
    /// unset.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let first = |names: [&str; 2]| {
            names
                .into_iter()
                .filter_map(&var)
                .map(|v| v.trim().to_owned())
                .find(|v| !v.is_empty())
        };
        Self {
            https: first(["HTTPS_PROXY", "https_proxy"]),
            http: first(["HTTP_PROXY", "http_proxy"]),
            no_proxy: first(["NO_PROXY", "no_proxy"]),
        }
    }

    fn apply(
        &self,
        mut builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::ClientBuilder, OutboundError> {
        // Off first: reqwest would otherwise read the environment itself.
        builder = builder.no_proxy();
        let except = || self.no_proxy.as_deref().and_then(NoProxy::from_string);
        if let Some(url) = &self.https {
            let proxy = Proxy::https(url.as_str()).map_err(|source| OutboundError::Proxy {
                variable: "HTTPS_PROXY",
                source,
            })?;
            builder = builder.proxy(proxy.no_proxy(except()));
        }
        if let Some(url) = &self.http {
            let proxy = Proxy::http(url.as_str()).map_err(|source| OutboundError::Proxy {
                variable: "HTTP_PROXY",
                source,
            })?;
            builder = builder.proxy(proxy.no_proxy(except()));
        }
        Ok(builder)
    }
}

/// Proxy URLs may carry credentials: only the host is shown.
impl fmt::Debug for ProxySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = |v: &Option<String>| {
            v.as_deref().map(|u| match reqwest::Url::parse(u) {
                Ok(url) => format!(
                    "{}:{}",
                    url.host_str().unwrap_or("?"),
                    url.port_or_known_default().unwrap_or(0)
                ),
                Err(_) => "<unparsable>".to_owned(),
            })
        };
        f.debug_struct("ProxySettings")
            .field("https", &host(&self.https))
            .field("http", &host(&self.http))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

/// How outbound clients are built.
#[derive(Debug, Clone)]
pub struct OutboundSettings {
    /// The operating system's trust store, trusted besides the built-in web roots.
    pub system_roots: SystemRoots,
    /// Trusted besides the built-in web roots and the system store.
    pub extra_ca: Option<ExtraCa>,
    pub proxy: ProxySettings,
    /// Time allowed to connect (TCP, and the proxy's tunnel).
    pub connect_timeout: Duration,
}

impl Default for OutboundSettings {
    /// Built-in roots and the system store, proxies from the environment (as curl would).
    fn default() -> Self {
        Self {
            system_roots: SystemRoots::from_env(),
            extra_ca: None,
            proxy: ProxySettings::from_env(),
            connect_timeout: Duration::from_secs(30),
        }
    }
}

impl OutboundSettings {
    /// A builder with the roots, proxies, identification and connect timeout set; for
    /// fetchers that must allow `http://` (signed CRLs). Per-request time and size limits
    /// stay with the callers.
    pub fn client_builder(&self) -> Result<reqwest::ClientBuilder, OutboundError> {
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("knowngood-ingest/", env!("CARGO_PKG_VERSION")))
            .tls_built_in_root_certs(true)
            .connect_timeout(self.connect_timeout);
        for der in self.system_roots.load() {
            // Checked one by one: a system certificate that is no usable trust anchor is
            // left out rather than failing every outbound client.
            let Ok(cert) = Certificate::from_der(&der) else {
                continue;
            };
            if usable_anchor(&cert) {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(ca) = &self.extra_ca {
            for cert in &ca.certs {
                builder = builder.add_root_certificate(cert.clone());
            }
        }
        self.proxy.apply(builder)
    }

    /// The client for vendor channels, downloads and corpus releases: HTTPS only.
    pub fn https_client(&self) -> Result<reqwest::Client, OutboundError> {
        self.client_builder()?
            .https_only(true)
            .build()
            .map_err(OutboundError::Build)
    }
}

/// Which setting fixes a failed connection, from the error's text (with its causes): a name
/// that does not resolve (`HTTPS_PROXY`, `base_url`), a certificate of an unknown issuer
/// (`extra_ca_file`, the system store), a proxy that refused the tunnel (`HTTPS_PROXY`,
/// `NO_PROXY`). `None` for other errors.
pub fn hint(error_text: &str) -> Option<&'static str> {
    let text = error_text.to_ascii_lowercase();
    if text.contains("tunnel error") || text.contains("proxy authorization required") {
        return Some(
            "the proxy refused the connection: check HTTPS_PROXY (its address and \
             credentials) and NO_PROXY, or set the vendor's base_url to a mirror reachable \
             without it",
        );
    }
    if text.contains("dns error") || text.contains("failed to lookup address") {
        return Some(
            "the host name does not resolve from this machine: if it reaches the internet \
             through a proxy, set HTTPS_PROXY; otherwise set the vendor's base_url to a \
             mirror it can reach",
        );
    }
    if text.contains("unknownissuer") || text.contains("unknown issuer") {
        return Some(
            "the server's certificate is signed by a CA this machine does not trust: put the \
             CA of the TLS-inspecting proxy or private mirror in the system trust store or in \
             extra_ca_file",
        );
    }
    None
}

/// Why a capped body was refused or cut short. The URL is not part of the message: each
/// caller names what it was downloading.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("announces {announced} bytes, over the {limit}-byte download limit")]
    AnnouncedTooLarge { announced: u64, limit: u64 },
    #[error("sent more than the {limit}-byte download limit; refused")]
    TooLarge { limit: u64 },
    /// `reason` is the transport error's chain, without the URL (which may hold credentials).
    #[error("broke off after {received} bytes: {reason}")]
    BrokeOff { received: u64, reason: String },
}

impl BodyError {
    /// The body is, or announced itself, larger than the cap.
    pub(crate) fn is_too_large(&self) -> bool {
        matches!(self, Self::AnnouncedTooLarge { .. } | Self::TooLarge { .. })
    }

    /// The failure a health record stores for this refusal of `shown` (a redacted URL):
    /// `too_large` over the cap, `unreachable` when the body broke off.
    pub fn stored_failure(&self, shown: &str) -> String {
        let kind = if self.is_too_large() {
            model::CheckFailure::TooLarge
        } else {
            model::CheckFailure::Unreachable
        };
        kind.message(format_args!("{shown} {self}"))
    }
}

/// A response body read within a size cap: refused at once when its announced length is
/// over the cap, stopped as soon as more than the cap has arrived. Every download of the
/// service (vendor files, channel documents, CRLs, advisories, corpus releases) is read
/// through this, so no reader can be made to hold or write more than its limit.
pub struct CappedBody {
    response: reqwest::Response,
    limit: u64,
    received: u64,
}

impl CappedBody {
    pub fn new(response: reqwest::Response, limit: u64) -> Result<Self, BodyError> {
        if let Some(announced) = response.content_length()
            && announced > limit
        {
            return Err(BodyError::AnnouncedTooLarge { announced, limit });
        }
        Ok(Self {
            response,
            limit,
            received: 0,
        })
    }

    /// The next chunk, `None` at the end of the body.
    pub async fn chunk(&mut self) -> Result<Option<bytes::Bytes>, BodyError> {
        let chunk = self
            .response
            .chunk()
            .await
            .map_err(|e| BodyError::BrokeOff {
                received: self.received,
                reason: crate::error_chain(&e.without_url()),
            })?;
        if let Some(chunk) = &chunk {
            self.received += chunk.len() as u64;
            if self.received > self.limit {
                return Err(BodyError::TooLarge { limit: self.limit });
            }
        }
        Ok(chunk)
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The whole body in memory.
    pub async fn into_vec(mut self) -> Result<Vec<u8>, BodyError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> ProxySettings {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ProxySettings::from_vars(|name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn proxies_come_from_the_usual_variables() {
        assert_eq!(vars(&[]), ProxySettings::none());
        let p = vars(&[
            ("https_proxy", "http://lower:3128"),
            ("HTTPS_PROXY", "http://upper:3128"),
            ("http_proxy", "http://plain:8080"),
            ("no_proxy", "mirror.internal,10.0.0.0/8"),
        ]);
        assert_eq!(p.https.as_deref(), Some("http://upper:3128"));
        assert_eq!(p.http.as_deref(), Some("http://plain:8080"));
        assert_eq!(p.no_proxy.as_deref(), Some("mirror.internal,10.0.0.0/8"));
        let p = vars(&[("HTTPS_PROXY", " "), ("https_proxy", "http://lower:3128")]);
        assert_eq!(p.https.as_deref(), Some("http://lower:3128"));
    }

    #[test]
    fn proxy_credentials_are_never_shown() {
        let p = vars(&[("HTTPS_PROXY", "http://user:hunter2@proxy.internal:3128")]);
        let shown = format!("{p:?}");
        assert!(shown.contains("proxy.internal:3128"), "{shown}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("user"),
            "{shown}"
        );
    }

    #[test]
    fn a_bad_proxy_url_names_its_variable_not_its_value() {
        let settings = OutboundSettings {
            proxy: vars(&[("HTTPS_PROXY", "http://sec ret@")]),
            ..OutboundSettings::default()
        };
        let e = settings.https_client().unwrap_err().to_string();
        assert!(e.contains("HTTPS_PROXY") && !e.contains("sec ret"), "{e}");
    }

    #[test]
    fn plain_http_is_refused() {
        let settings = OutboundSettings {
            proxy: ProxySettings::none(),
            ..OutboundSettings::default()
        };
        let client = settings.https_client().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let e = runtime
            .block_on(client.get("http://127.0.0.1:9/x").send())
            .unwrap_err();
        assert!(e.is_builder(), "{e:?}");
    }
}
