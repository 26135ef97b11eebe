//! The one place outbound HTTP clients are built (vendor channels, downloads, corpus
//! releases): the built-in web roots plus, when configured, the certificates of a PEM bundle
//! (a private mirror or a TLS-inspecting proxy), and the proxies of the environment.
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

impl fmt::Debug for ExtraCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExtraCa")
            .field("path", &self.path)
            .field("certificates", &self.certs.len())
            .finish()
    }
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
    /// Trusted besides the built-in web roots.
    pub extra_ca: Option<ExtraCa>,
    pub proxy: ProxySettings,
    /// Time allowed to connect (TCP, and the proxy's tunnel).
    pub connect_timeout: Duration,
}

impl Default for OutboundSettings {
    /// Built-in roots only, proxies from the environment (as reqwest on its own would).
    fn default() -> Self {
        Self {
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
