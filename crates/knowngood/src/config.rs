//! Configuration: command-line flags, then `KNOWNGOOD_*` environment variables, then the
//! TOML file, then defaults. Secrets are read from the file or the environment only (never
//! flags, which other users can see in the process list).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use serde::Deserialize;

pub(crate) const DEFAULT_DATA_DIR: &str = "./knowngood-data";
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// Options every subcommand that touches the data shares.
#[derive(Debug, Clone, Args)]
pub(crate) struct CommonArgs {
    /// Directory for the embedded database, generated secrets and corpus generations
    /// [default: ./knowngood-data]
    #[arg(long, env = "KNOWNGOOD_DATA_DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// TOML configuration file.
    #[arg(long, env = "KNOWNGOOD_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// `sqlite:…` or `postgres://…` [default: SQLite file in the data dir]
    // The URL may hold a password: `--help` must not print the environment's value.
    #[arg(long, env = "KNOWNGOOD_DATABASE_URL", hide_env_values = true)]
    pub(crate) database_url: Option<String>,
}

/// The configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    pub(crate) listen: Option<String>,
    /// Address of the Prometheus metrics listener (`GET /metrics`); off when unset.
    /// `KNOWNGOOD_METRICS_LISTEN` wins.
    pub(crate) metrics_listen: Option<String>,
    /// The service's public address, as clients reach it (`https://knowngood.example`): the
    /// feeds' links and TAXII's API roots are built on it. `KNOWNGOOD_PUBLIC_BASE_URL` wins;
    /// default `http://<listen>`.
    pub(crate) public_base_url: Option<String>,
    pub(crate) data_dir: Option<PathBuf>,
    pub(crate) database_url: Option<String>,
    /// Shares rate limits between replicas when set.
    pub(crate) redis_url: Option<String>,
    /// Where the reference corpus generations live, default `<data_dir>/corpus`;
    /// `KNOWNGOOD_CORPUS_DIR` wins. Replicas share one directory (a shared filesystem):
    /// whichever imports a generation, every replica verifies and maps it within a second.
    pub(crate) corpus_dir: Option<PathBuf>,
    /// New NSRL RDS v3 `*.db` files dropped here are imported automatically.
    pub(crate) corpus_import_dir: Option<PathBuf>,
    /// An NSRL RDS v3 release (a zip of `.db` files, as NIST ships them, or a bare `.db`)
    /// fetched and imported when it changes; `KNOWNGOOD_CORPUS_RELEASE_URL` wins. HTTPS only.
    pub(crate) corpus_release_url: Option<String>,
    /// Days between checks of `corpus_release_url`, default 90 (NIST publishes quarterly).
    pub(crate) corpus_release_check_days: Option<u32>,
    /// Largest release download, and largest total of databases extracted from it, in GiB;
    /// default 512.
    pub(crate) corpus_release_max_gib: Option<u64>,
    /// A PEM bundle trusted for outbound HTTPS besides the built-in web roots (a private
    /// mirror or a TLS-inspecting proxy); `KNOWNGOOD_EXTRA_CA_FILE` wins.
    pub(crate) extra_ca_file: Option<PathBuf>,
    #[serde(default)]
    pub(crate) trusted_proxies: Vec<IpAddr>,
    /// The console's public origin (e.g. `https://knowngood.example`): passkeys are bound
    /// to its host, and cookies are `Secure` when it is https. `KNOWNGOOD_CONSOLE_ORIGIN`
    /// wins. Default `http://localhost` on any port (local use only).
    pub(crate) console_origin: Option<String>,
    /// Where the hashlookup-compatible routes are served, default `/hashlookup/`;
    /// `KNOWNGOOD_HASHLOOKUP_PREFIX` wins.
    pub(crate) hashlookup_prefix: Option<String>,
    #[serde(default)]
    pub(crate) limits: LimitSettings,
    #[serde(default)]
    pub(crate) schedule: ScheduleSettings,
    #[serde(default)]
    pub(crate) revocation: RevocationSettings,
    #[serde(default)]
    pub(crate) advisories: AdvisorySettings,
    #[serde(default)]
    pub(crate) connections: ConnectionSettings,
    #[serde(default)]
    pub(crate) database: DatabaseSettings,
    #[serde(default)]
    pub(crate) archive_members: ArchiveMemberSettings,
    /// Per-vendor overrides: `[vendors.<id>] enabled, base_url, files_url, items`, and for
    /// distributions `items_file`, for Debian `releases`, `security_url` and `snapshot_url`,
    /// for Rocky Linux `snapshot_url`.
    #[serde(default)]
    pub(crate) vendors: std::collections::BTreeMap<String, jobs::refresh::VendorOverride>,
    #[serde(default)]
    pub(crate) secrets: SecretSettings,
}

/// Times of the daily jobs, `HH:MM` UTC.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScheduleSettings {
    /// Vendor refresh, default `02:00`; `off` disables it.
    pub(crate) daily_refresh: Option<String>,
    /// Transparency root, default `02:30`; with the refresh on, never before the day's
    /// refresh has ended.
    pub(crate) translog_publish: Option<String>,
    /// Seconds between looks for due jobs, default 60.
    pub(crate) jobs_check_secs: Option<u64>,
}

/// The database connection pool (`[database]`; PostgreSQL).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DatabaseSettings {
    /// Longest wait for a connection, connecting included, before a request fails with
    /// 503; default 5000.
    pub(crate) acquire_timeout_ms: Option<u64>,
}

impl DatabaseSettings {
    fn resolve(&self) -> Result<store::StoreOptions> {
        let defaults = store::StoreOptions::default();
        Ok(store::StoreOptions {
            acquire_timeout: match self.acquire_timeout_ms {
                None => defaults.acquire_timeout,
                Some(ms) if (100..=600_000).contains(&ms) => std::time::Duration::from_millis(ms),
                Some(_) => {
                    anyhow::bail!("database.acquire_timeout_ms must be between 100 and 600000")
                }
            },
        })
    }
}

/// The signing-certificate revocation check (`[revocation]`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RevocationSettings {
    /// Hours between checks, default 6; 0 turns the schedule off.
    pub(crate) check_hours: Option<u32>,
    /// Seconds between checks instead of `check_hours` (at least 1).
    pub(crate) check_secs: Option<u64>,
    /// Largest CRL accepted, in MiB; default 32.
    pub(crate) max_crl_mib: Option<u64>,
    /// Time allowed for one CRL fetch, in seconds; default 60.
    pub(crate) fetch_timeout_secs: Option<u64>,
}

impl RevocationSettings {
    fn resolve(&self) -> Result<jobs::revocation::RevocationOptions> {
        let defaults = jobs::revocation::RevocationOptions::default();
        if self.max_crl_mib == Some(0) || self.fetch_timeout_secs == Some(0) {
            anyhow::bail!(
                "revocation.max_crl_mib and revocation.fetch_timeout_secs must be at least 1"
            );
        }
        Ok(jobs::revocation::RevocationOptions {
            interval: match (self.check_secs, self.check_hours.unwrap_or(6)) {
                (Some(0), _) => anyhow::bail!("revocation.check_secs must be at least 1"),
                (Some(secs), _) => Some(std::time::Duration::from_secs(secs)),
                (None, 0) => None,
                (None, hours) => Some(std::time::Duration::from_secs(u64::from(hours) * 3600)),
            },
            max_crl_bytes: self
                .max_crl_mib
                .map_or(defaults.max_crl_bytes, |mib| mib << 20),
            fetch_timeout: self
                .fetch_timeout_secs
                .map_or(defaults.fetch_timeout, std::time::Duration::from_secs),
            client: None,
        })
    }
}

/// OSV advisories downloaded on a schedule (`[advisories]`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AdvisorySettings {
    /// OSV JSON documents or zip archives of them (OSV's per-ecosystem `all.zip`), HTTPS
    /// only; `KNOWNGOOD_ADVISORY_URLS` (comma-separated) wins. None = imports by hand only.
    #[serde(default)]
    pub(crate) urls: Vec<String>,
    /// Hours between refreshes, default 24.
    pub(crate) refresh_hours: Option<u32>,
    /// Largest download per URL, in MiB; default 512.
    pub(crate) max_mib: Option<u64>,
    /// Time allowed for one URL's download, in seconds; default 1800.
    pub(crate) fetch_timeout_secs: Option<u64>,
}

impl AdvisorySettings {
    /// The source to refresh from, if any URL is set: the environment's list (when not
    /// empty) wins over the file's.
    fn resolve(
        &self,
        env_urls: Option<String>,
    ) -> Result<Option<jobs::advisories::AdvisorySource>> {
        let texts: Vec<String> = match env_urls.filter(|u| !u.trim().is_empty()) {
            Some(list) => list
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(str::to_string)
                .collect(),
            None => self.urls.clone(),
        };
        if texts.is_empty() {
            return Ok(None);
        }
        let mut urls = Vec::with_capacity(texts.len());
        for text in &texts {
            // The parser's message only: the value may hold a token.
            let url = reqwest::Url::parse(text.trim())
                .map_err(|e| anyhow::anyhow!("advisories.urls: not a valid URL: {e}"))?;
            if url.scheme() != "https" {
                anyhow::bail!(
                    "advisories.urls must be https:// URLs (got {}://...)",
                    url.scheme()
                );
            }
            urls.push(url);
        }
        let mut source = jobs::advisories::AdvisorySource::new(urls);
        if let Some(hours) = self.refresh_hours {
            anyhow::ensure!(hours >= 1, "advisories.refresh_hours must be at least 1");
            source.interval = std::time::Duration::from_secs(u64::from(hours) * 3600);
        }
        if let Some(mib) = self.max_mib {
            anyhow::ensure!(
                (1..=1 << 20).contains(&mib),
                "advisories.max_mib must be between 1 and 1048576"
            );
            source.max_download_bytes = mib << 20;
        }
        if let Some(secs) = self.fetch_timeout_secs {
            anyhow::ensure!(
                secs >= 1,
                "advisories.fetch_timeout_secs must be at least 1"
            );
            source.timeout = std::time::Duration::from_secs(secs);
        }
        Ok(Some(source))
    }
}

/// The hashlookup prefix as a path that starts and ends with `/`, one or more plain
/// segments (letters, digits, `-`, `_`, `.`), and not under `/api/` or `/public/`.
fn hashlookup_prefix(raw: Option<String>) -> Result<String> {
    let Some(raw) = raw else {
        return Ok(server::HASHLOOKUP_DECLARED_PREFIX.to_owned());
    };
    let trimmed = raw.trim().trim_matches('/');
    let plain = |seg: &str| {
        !seg.is_empty()
            && seg != "."
            && seg != ".."
            && seg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    let first = trimmed.split('/').next().unwrap_or_default();
    if !trimmed.split('/').all(plain) || matches!(first, "api" | "public") {
        anyhow::bail!(
            "hashlookup_prefix must be a path of plain segments outside /api/ and /public/ (got {raw:?})"
        );
    }
    Ok(format!("/{trimmed}/"))
}

fn parse_time(text: &str, field: &str) -> Result<chrono::NaiveTime> {
    chrono::NaiveTime::parse_from_str(text.trim(), "%H:%M")
        .with_context(|| format!("schedule.{field} must be HH:MM (UTC), got {text:?}"))
}

/// Files inside archives: `[archive_members] enabled, kinds, max_members`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ArchiveMemberSettings {
    pub(crate) enabled: Option<bool>,
    /// Which files are recorded: any of `pe`, `elf`, `macho`, `script` (all by default).
    pub(crate) kinds: Option<Vec<String>>,
    pub(crate) max_members: Option<usize>,
}

impl ArchiveMemberSettings {
    fn resolve(&self) -> Result<ingest::MemberLimits> {
        let defaults = ingest::MemberLimits::default();
        let kinds = match &self.kinds {
            None => defaults.kinds,
            Some(names) => {
                let mut kinds = ingest::MemberKinds {
                    pe: false,
                    elf: false,
                    macho: false,
                    script: false,
                };
                for name in names {
                    match name.as_str() {
                        "pe" => kinds.pe = true,
                        "elf" => kinds.elf = true,
                        "macho" => kinds.macho = true,
                        "script" => kinds.script = true,
                        other => anyhow::bail!(
                            "archive_members.kinds: unknown kind {other:?} (pe, elf, macho, script)"
                        ),
                    }
                }
                kinds
            }
        };
        Ok(ingest::MemberLimits {
            enabled: self.enabled.unwrap_or(defaults.enabled),
            kinds,
            max_members: self.max_members.unwrap_or(defaults.max_members),
            ..defaults
        })
    }
}

/// Per-minute limits; unset values keep the documented defaults (docs/api.md).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitSettings {
    pub(crate) hash_of_day_per_ip: Option<u32>,
    pub(crate) public_per_ip: Option<u32>,
    pub(crate) token_per_key: Option<u32>,
    pub(crate) authenticated_per_key: Option<u32>,
    pub(crate) failed_auth_per_ip: Option<u32>,
    pub(crate) failed_auth_per_team: Option<u32>,
}

impl LimitSettings {
    /// The configured limits, the server's defaults where unset.
    fn resolve(&self) -> server::Limits {
        let defaults = server::Limits::default();
        server::Limits {
            hash_of_day_per_ip: self
                .hash_of_day_per_ip
                .unwrap_or(defaults.hash_of_day_per_ip),
            public_per_ip: self.public_per_ip.unwrap_or(defaults.public_per_ip),
            token_per_key: self.token_per_key.unwrap_or(defaults.token_per_key),
            authenticated_per_key: self
                .authenticated_per_key
                .unwrap_or(defaults.authenticated_per_key),
            failed_auth_per_ip: self
                .failed_auth_per_ip
                .unwrap_or(defaults.failed_auth_per_ip),
            failed_auth_per_team: self
                .failed_auth_per_team
                .unwrap_or(defaults.failed_auth_per_team),
        }
    }
}

/// Client connection timeouts (seconds) and caps; unset values keep the defaults of
/// `server::ConnectionLimits`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConnectionSettings {
    pub(crate) header_read_timeout_secs: Option<u64>,
    pub(crate) body_read_timeout_secs: Option<u64>,
    pub(crate) max_per_address: Option<usize>,
    pub(crate) max_total: Option<usize>,
    /// Seconds `/readyz` answers 503 after SIGTERM before the listener closes (default 0).
    pub(crate) drain_grace_secs: Option<u64>,
}

impl ConnectionSettings {
    fn resolve(&self) -> Result<server::ConnectionLimits> {
        let defaults = server::ConnectionLimits::default();
        let secs = |value: Option<u64>, default: std::time::Duration, field: &str| match value {
            None => Ok(default),
            Some(0) => Err(anyhow::anyhow!("connections.{field} must be at least 1")),
            Some(s) => Ok(std::time::Duration::from_secs(s)),
        };
        let count = |value: Option<usize>, default: usize, field: &str| match value {
            None => Ok(default),
            Some(0) => Err(anyhow::anyhow!("connections.{field} must be at least 1")),
            Some(n) => Ok(n),
        };
        Ok(server::ConnectionLimits {
            header_read_timeout: secs(
                self.header_read_timeout_secs,
                defaults.header_read_timeout,
                "header_read_timeout_secs",
            )?,
            body_read_timeout: secs(
                self.body_read_timeout_secs,
                defaults.body_read_timeout,
                "body_read_timeout_secs",
            )?,
            max_per_address: count(
                self.max_per_address,
                defaults.max_per_address,
                "max_per_address",
            )?,
            max_total: count(self.max_total, defaults.max_total, "max_total")?,
            drain_grace: self
                .drain_grace_secs
                .map_or(defaults.drain_grace, std::time::Duration::from_secs),
        })
    }
}

/// Secrets given by configuration rather than generated into the data dir; needed when
/// several replicas must share them.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SecretSettings {
    /// Hex, at least 32 bytes.
    pub(crate) hmac_secret: Option<String>,
    /// PKCS#8 PEM of an RSA key.
    pub(crate) jwt_private_key_pem: Option<String>,
    /// Hex of a 32-byte Ed25519 seed.
    pub(crate) log_signing_key: Option<String>,
    /// Earlier JWT keys (PKCS#8 PEM) that still verify tokens after a rotation.
    #[serde(default)]
    pub(crate) jwt_retired_keys_pem: Vec<String>,
}

impl fmt::Debug for SecretSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = |v: &Option<String>| if v.is_some() { "<set>" } else { "<unset>" };
        f.debug_struct("SecretSettings")
            .field("hmac_secret", &shown(&self.hmac_secret))
            .field("jwt_private_key_pem", &shown(&self.jwt_private_key_pem))
            .field("log_signing_key", &shown(&self.log_signing_key))
            .field("jwt_retired_keys_pem", &self.jwt_retired_keys_pem.len())
            .finish()
    }
}

/// The resolved configuration.
pub(crate) struct Config {
    pub(crate) listen: SocketAddr,
    /// Where `GET /metrics` is served; None = not at all.
    pub(crate) metrics_listen: Option<SocketAddr>,
    pub(crate) data_dir: PathBuf,
    pub(crate) database_url: String,
    pub(crate) database: store::StoreOptions,
    pub(crate) redis_url: Option<String>,
    /// The reference corpus root (generations and `CURRENT`).
    pub(crate) corpus_dir: PathBuf,
    pub(crate) settings: server::Settings,
    pub(crate) secrets: SecretSettings,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("metrics_listen", &self.metrics_listen)
            .field("data_dir", &self.data_dir)
            .field("database_url", &redact_url(&self.database_url))
            .field("database", &self.database)
            .field("redis_url", &self.redis_url.as_deref().map(redact_url))
            .field("corpus_dir", &self.corpus_dir)
            .field("settings", &self.settings)
            .field("secrets", &self.secrets)
            .finish()
    }
}

/// A URL as it may be logged: the password and the query (which may carry one, or a token)
/// replaced by `redacted`; the fragment dropped. Text that is not a URL is not shown at all.
pub(crate) fn redact_url(text: &str) -> String {
    let Ok(mut url) = reqwest::Url::parse(text.trim()) else {
        return "<not a URL>".to_string();
    };
    if url.password().is_some() {
        let _ = url.set_password(Some("redacted"));
    }
    if url.query().is_some() {
        url.set_query(Some("redacted"));
    }
    url.set_fragment(None);
    url.to_string()
}

impl Config {
    pub(crate) fn resolve(common: &CommonArgs, listen: Option<&str>) -> Result<Self> {
        let file = match &common.config {
            Some(path) => load_file(path)?,
            None => FileConfig::default(),
        };
        let corpus_release =
            corpus_release(&file, std::env::var("KNOWNGOOD_CORPUS_RELEASE_URL").ok())?;
        let advisories = file
            .advisories
            .resolve(std::env::var("KNOWNGOOD_ADVISORY_URLS").ok())?;
        let outbound = outbound(
            &file,
            std::env::var_os("KNOWNGOOD_EXTRA_CA_FILE"),
            ingest::ProxySettings::from_env(),
        )?;
        check_vendors(&file.vendors)?;
        let data_dir = common
            .data_dir
            .clone()
            .or(file.data_dir)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
        let data_dir = prepare_data_dir(&data_dir)?;
        let listen = listen
            .map(str::to_string)
            .or(file.listen)
            .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let listen = listen
            .parse()
            .with_context(|| format!("listen address {listen:?} is not host:port"))?;
        let metrics_listen = std::env::var("KNOWNGOOD_METRICS_LISTEN")
            .ok()
            .or(file.metrics_listen)
            .map(|a| {
                a.parse()
                    .with_context(|| format!("metrics listen address {a:?} is not host:port"))
            })
            .transpose()?;
        let public_base_url = public_base_url(
            std::env::var("KNOWNGOOD_PUBLIC_BASE_URL")
                .ok()
                .or(file.public_base_url),
            listen,
        )?;
        let database_url = common
            .database_url
            .clone()
            .or(file.database_url)
            .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("knowngood.db").display()));
        let redis_url = std::env::var("KNOWNGOOD_REDIS_URL").ok().or(file.redis_url);
        let database = file.database.resolve()?;
        let corpus_dir = std::env::var_os("KNOWNGOOD_CORPUS_DIR")
            .map(PathBuf::from)
            .or(file.corpus_dir)
            .unwrap_or_else(|| data_dir.join("corpus"));
        let jobs_every = match file.schedule.jobs_check_secs {
            None => server::Settings::default().jobs_every,
            Some(0) => anyhow::bail!("schedule.jobs_check_secs must be at least 1"),
            Some(secs) => std::time::Duration::from_secs(secs),
        };
        let settings = server::Settings {
            limits: file.limits.resolve(),
            trusted_proxies: file.trusted_proxies,
            jobs: jobs::JobSettings {
                corpus_release,
                corpus_import_dir: file.corpus_import_dir,
                daily_refresh: match file.schedule.daily_refresh.as_deref() {
                    Some("off") => None,
                    Some(t) => Some(parse_time(t, "daily_refresh")?),
                    None => chrono::NaiveTime::from_hms_opt(2, 0, 0),
                },
                translog_publish_at: match file.schedule.translog_publish.as_deref() {
                    Some(t) => parse_time(t, "translog_publish")?,
                    None => jobs::JobSettings::default().translog_publish_at,
                },
                refresh: jobs::refresh::RefreshOptions {
                    vendors: file.vendors,
                    outbound,
                    limits: ingest::FetchLimits {
                        members: file.archive_members.resolve()?,
                        ..ingest::FetchLimits::default()
                    },
                    ..Default::default()
                },
                revocation: file.revocation.resolve()?,
                advisories,
            },
            connections: file.connections.resolve()?,
            public_base_url,
            relying_party: relying_party(
                std::env::var("KNOWNGOOD_CONSOLE_ORIGIN")
                    .ok()
                    .or(file.console_origin)
                    .as_deref(),
            )?,
            hashlookup_prefix: hashlookup_prefix(
                std::env::var("KNOWNGOOD_HASHLOOKUP_PREFIX")
                    .ok()
                    .or(file.hashlookup_prefix),
            )?,
            jobs_every,
            ..server::Settings::default()
        };
        let secrets = file.secrets.overridden_by_env();
        Ok(Self {
            listen,
            metrics_listen,
            data_dir,
            database_url,
            database,
            redis_url,
            corpus_dir,
            settings,
            secrets,
        })
    }
}

impl SecretSettings {
    /// The secrets given in the environment replace those of the file.
    fn overridden_by_env(mut self) -> Self {
        for (var, slot) in [
            ("KNOWNGOOD_HMAC_SECRET", &mut self.hmac_secret),
            (
                "KNOWNGOOD_JWT_PRIVATE_KEY_PEM",
                &mut self.jwt_private_key_pem,
            ),
            ("KNOWNGOOD_LOG_SIGNING_KEY", &mut self.log_signing_key),
        ] {
            if let Ok(value) = std::env::var(var) {
                *slot = Some(value);
            }
        }
        self
    }
}

/// The public base URL: an absolute `http(s)://` URL without query or fragment, stored
/// without a trailing slash; by default the listen address.
fn public_base_url(configured: Option<String>, listen: SocketAddr) -> Result<String> {
    let Some(text) = configured else {
        return Ok(format!("http://{listen}"));
    };
    let url = reqwest::Url::parse(text.trim())
        .with_context(|| format!("public_base_url {text:?} is not a URL"))?;
    if !matches!(url.scheme(), "http" | "https")
        || url.host_str().is_none()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        anyhow::bail!(
            "public_base_url must be an http:// or https:// URL without query or fragment (got {text:?})"
        );
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// The WebAuthn relying party of the console's origin: its host is the relying-party id.
fn relying_party(origin: Option<&str>) -> Result<auth::mfa::RelyingParty> {
    let Some(origin) = origin else {
        return Ok(auth::mfa::RelyingParty::default());
    };
    let url = url::Url::parse(origin)
        .with_context(|| format!("console_origin {origin:?} is not a URL"))?;
    let host = url
        .host_str()
        .with_context(|| format!("console_origin {origin:?} has no host"))?;
    if !matches!(url.scheme(), "https" | "http") {
        anyhow::bail!("console_origin {origin:?} must be http(s)");
    }
    Ok(auth::mfa::RelyingParty {
        id: host.to_string(),
        origin: url.clone(),
        any_port: false,
    })
}

/// Creates the data dir for this user only (0700), or warns when an existing one is open
/// to group or others (it holds the database and the secrets); its canonical path.
fn prepare_data_dir(data_dir: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    if data_dir.exists() {
        let mode = std::fs::metadata(data_dir)
            .with_context(|| format!("reading data dir {}", data_dir.display()))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %data_dir.display(),
                mode = format!("{:o}", mode & 0o777),
                "the data dir is open to group or others; it holds the database and the secrets (chmod 700 it)"
            );
        }
    } else {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data_dir)
            .with_context(|| format!("creating data dir {}", data_dir.display()))?;
        // Whatever the umask made of it.
        std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("restricting data dir {}", data_dir.display()))?;
    }
    data_dir
        .canonicalize()
        .with_context(|| format!("resolving {}", data_dir.display()))
}

/// The release URL to fetch from, if any: the environment's (when not empty), else the
/// file's.
fn corpus_release(
    file: &FileConfig,
    env_url: Option<String>,
) -> Result<Option<jobs::corpus_release::ReleaseSource>> {
    let Some(text) = env_url
        .filter(|u| !u.trim().is_empty())
        .or_else(|| file.corpus_release_url.clone())
    else {
        return Ok(None);
    };
    // The parser's message only: the value may hold a token.
    let url = reqwest::Url::parse(text.trim())
        .map_err(|e| anyhow::anyhow!("corpus_release_url is not a valid URL: {e}"))?;
    if url.scheme() != "https" {
        anyhow::bail!(
            "corpus_release_url must be an https:// URL (got {}://...)",
            url.scheme()
        );
    }
    let mut source = jobs::corpus_release::ReleaseSource::new(url);
    if let Some(days) = file.corpus_release_check_days {
        anyhow::ensure!(days >= 1, "corpus_release_check_days must be at least 1");
        source.check_every = std::time::Duration::from_secs(u64::from(days) * 86_400);
    }
    if let Some(gib) = file.corpus_release_max_gib {
        anyhow::ensure!(
            (1..=1 << 20).contains(&gib),
            "corpus_release_max_gib must be between 1 and 1048576"
        );
        source.max_download_bytes = gib << 30;
        source.max_extracted_bytes = gib << 30;
    }
    Ok(Some(source))
}

/// How outbound clients are built: the extra CA bundle (the environment's path, when not
/// empty, else the file's) and the proxies. A client is built once here, so a bad bundle or
/// proxy URL stops the start, not the first fetch.
fn outbound(
    file: &FileConfig,
    env_ca: Option<std::ffi::OsString>,
    proxy: ingest::ProxySettings,
) -> Result<ingest::OutboundSettings> {
    let ca_file = env_ca
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| file.extra_ca_file.clone());
    let extra_ca = match ca_file {
        Some(path) => Some(ingest::ExtraCa::load(&path)?),
        None => None,
    };
    let settings = ingest::OutboundSettings {
        extra_ca,
        proxy,
        ..ingest::OutboundSettings::default()
    };
    settings
        .https_client()
        .map_err(|e| anyhow::anyhow!("outbound HTTP client: {}", ingest::error_chain(&e)))?;
    Ok(settings)
}

/// The distribution settings of `[vendors.<id>]`: `items_file` readable (it is read again
/// at each run), `releases`, `security_url` and `snapshot_url` only where they mean
/// something.
fn check_vendors(
    vendors: &std::collections::BTreeMap<String, jobs::refresh::VendorOverride>,
) -> Result<()> {
    const DISTRIBUTIONS: [&str; 4] = ["debian", "ubuntu", "archlinux", "rockylinux"];
    for (id, o) in vendors {
        if let Some(path) = &o.items_file {
            if !DISTRIBUTIONS.contains(&id.as_str()) {
                anyhow::bail!("vendors.{id}.items_file: only distributions read an items file");
            }
            std::fs::File::open(path).with_context(|| {
                format!("vendors.{id}.items_file: cannot read {}", path.display())
            })?;
        }
        if o.releases.is_some() && id != "debian" {
            anyhow::bail!("vendors.{id}.releases: only debian follows configured releases");
        }
        if o.security_url.is_some() && id != "debian" {
            anyhow::bail!("vendors.{id}.security_url: only debian reads a security archive");
        }
        if o.snapshot_url.is_some() && !["debian", "rockylinux"].contains(&id.as_str()) {
            anyhow::bail!(
                "vendors.{id}.snapshot_url: only debian (a snapshot service) and rockylinux \
                 (a vault of older minor releases) read one"
            );
        }
        for release in o.releases.iter().flatten() {
            let ok = !release.is_empty()
                && release
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !ok {
                anyhow::bail!(
                    "vendors.{id}.releases: {release:?} is not a code name (e.g. \"bookworm\") \
                     nor \"supported\""
                );
            }
        }
        if let Some(url) = &o.security_url
            && !url.starts_with("https://")
        {
            anyhow::bail!("vendors.{id}.security_url must be an https:// URL");
        }
        if let Some(url) = &o.snapshot_url {
            let https = reqwest::Url::parse(url).is_ok_and(|u| {
                u.scheme() == "https" && u.query().is_none() && u.fragment().is_none()
            });
            if !https {
                anyhow::bail!(
                    "vendors.{id}.snapshot_url must be an https:// URL without query or fragment \
                     (e.g. \"https://snapshot.debian.org\", \
                     \"https://dl.rockylinux.org/vault/rocky\")"
                );
            }
        }
        if let Some(history) = &o.history {
            if !["pypi", "npm"].contains(&id.as_str()) {
                anyhow::bail!("vendors.{id}.history: only pypi and npm follow a history horizon");
            }
            if let Err(why) = history.horizon() {
                anyhow::bail!(
                    "vendors.{id}.history: {why}; write a positive number of versions \
                     (history = 5) or history = \"all\""
                );
            }
        }
    }
    Ok(())
}

fn load_file(path: &Path) -> Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing config {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution_vendor_settings_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("packages.txt");
        std::fs::write(&list, "coreutils=9.7-3\nlibc6:amd64=2.41-12\n").unwrap();
        let parse = |text: &str| {
            let file: FileConfig = toml::from_str(text).unwrap();
            check_vendors(&file.vendors)
        };
        let good = format!(
            "[vendors.debian]\nreleases = [\"bookworm\", \"trixie\"]\nitems = [\"*\"]\n\
             items_file = {:?}\nsecurity_url = \"https://security.example/debian-security\"\n",
            list.display().to_string()
        );
        parse(&good).unwrap();
        let e = parse("[vendors.debian]\nitems_file = \"/nonexistent/list\"\n").unwrap_err();
        assert!(
            format!("{e:#}").contains("vendors.debian.items_file"),
            "{e:#}"
        );
        parse("[vendors.debian]\nsnapshot_url = \"https://snapshot.debian.org\"\n").unwrap();
        for bad in [
            "http://snapshot.debian.org",
            "snapshot.debian.org",
            "https://s.example/?x=1",
        ] {
            let e = parse(&format!("[vendors.debian]\nsnapshot_url = {bad:?}\n")).unwrap_err();
            assert!(e.to_string().contains("vendors.debian.snapshot_url"), "{e}");
        }
        parse("[vendors.rockylinux]\nsnapshot_url = \"https://dl.rockylinux.org/vault/rocky\"\n")
            .unwrap();
        let e = parse("[vendors.rockylinux]\nsnapshot_url = \"http://dl.rockylinux.org/vault\"\n")
            .unwrap_err();
        assert!(
            e.to_string().contains("vendors.rockylinux.snapshot_url"),
            "{e}"
        );
        let e = parse("[vendors.ubuntu]\nsnapshot_url = \"https://snapshot.debian.org\"\n")
            .unwrap_err();
        assert!(
            e.to_string().contains("only debian") && e.to_string().contains("rockylinux"),
            "{e}"
        );
        let e = parse("[vendors.pypi]\nreleases = [\"bookworm\"]\n").unwrap_err();
        assert!(e.to_string().contains("vendors.pypi.releases"), "{e}");
        let e = parse("[vendors.debian]\nreleases = [\"Bookworm 12\"]\n").unwrap_err();
        assert!(e.to_string().contains("not a code name"), "{e}");
        assert!(toml::from_str::<FileConfig>("[vendors.debian]\nrelease = [\"x\"]\n").is_err());
    }

    #[test]
    fn a_history_horizon_is_a_positive_count_or_all() {
        let parse = |text: &str| {
            let file: FileConfig = toml::from_str(text).unwrap();
            check_vendors(&file.vendors)?;
            Ok::<_, anyhow::Error>(file)
        };
        let file =
            parse("[vendors.pypi]\nhistory = 5\n[vendors.npm]\nhistory = \"all\"\n").unwrap();
        assert_eq!(
            file.vendors["pypi"].history.as_ref().unwrap().horizon(),
            Ok(ingest::History::Newest(5))
        );
        assert_eq!(
            file.vendors["npm"].history.as_ref().unwrap().horizon(),
            Ok(ingest::History::All)
        );
        for bad in ["0", "-3", "\"everything\""] {
            let e = parse(&format!("[vendors.pypi]\nhistory = {bad}\n")).unwrap_err();
            assert!(
                e.to_string().contains("vendors.pypi.history")
                    && e.to_string().contains("history = \"all\""),
                "{e}"
            );
        }
        let e = parse("[vendors.debian]\nhistory = 3\n").unwrap_err();
        assert!(e.to_string().contains("only pypi and npm"), "{e}");
        // A list or a table is no history setting at all.
        assert!(toml::from_str::<FileConfig>("[vendors.pypi]\nhistory = [3]\n").is_err());
    }

    #[test]
    fn flags_win_over_file_and_secrets_stay_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k.toml");
        std::fs::write(
            &file,
            "listen = \"127.0.0.1:9999\"\ndatabase_url = \"sqlite://x.db\"\n[secrets]\nhmac_secret = \"deadbeef\"\n",
        )
        .unwrap();
        let common = CommonArgs {
            data_dir: Some(dir.path().join("data")),
            config: Some(file),
            database_url: None,
        };
        let c = Config::resolve(&common, Some("127.0.0.1:7000")).unwrap();
        assert_eq!(c.listen.port(), 7000);
        assert_eq!(c.database_url, "sqlite://x.db");
        let shown = format!("{c:?}");
        assert!(!shown.contains("deadbeef"), "{shown}");
        assert!(shown.contains("<set>"));
    }

    #[test]
    fn pool_timeout_job_period_and_check_interval_are_read_and_checked() {
        let db = parsed("[database]\nacquire_timeout_ms = 1500\n").database;
        assert_eq!(
            db.resolve().unwrap().acquire_timeout,
            std::time::Duration::from_millis(1500)
        );
        assert_eq!(
            parsed("").database.resolve().unwrap(),
            store::StoreOptions::default()
        );
        for bad in ["0", "99", "600001"] {
            let db = parsed(&format!("[database]\nacquire_timeout_ms = {bad}\n")).database;
            let e = db.resolve().unwrap_err().to_string();
            assert!(e.contains("database.acquire_timeout_ms"), "{e}");
        }
        let r = parsed("[revocation]\ncheck_hours = 0\ncheck_secs = 30\n").revocation;
        assert_eq!(
            r.resolve().unwrap().interval,
            Some(std::time::Duration::from_secs(30))
        );
        let r = parsed("[revocation]\ncheck_secs = 0\n").revocation;
        assert!(r.resolve().is_err());
        assert_eq!(
            parsed("[schedule]\njobs_check_secs = 5\n")
                .schedule
                .jobs_check_secs,
            Some(5)
        );
    }

    #[test]
    fn the_public_base_url_defaults_to_the_listen_address_and_is_checked() {
        let listen: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        assert_eq!(
            public_base_url(None, listen).unwrap(),
            "http://127.0.0.1:7000"
        );
        assert_eq!(
            public_base_url(Some("https://kg.example/".into()), listen).unwrap(),
            "https://kg.example"
        );
        assert_eq!(
            public_base_url(Some("https://kg.example/intel/".into()), listen).unwrap(),
            "https://kg.example/intel"
        );
        for bad in ["kg.example", "ftp://kg.example", "https://kg.example/?a=1"] {
            assert!(public_base_url(Some(bad.into()), listen).is_err(), "{bad}");
        }
    }

    fn parsed(toml: &str) -> FileConfig {
        toml::from_str(toml).unwrap()
    }

    #[test]
    fn the_revocation_check_runs_every_6_hours_unless_told_otherwise() {
        let defaults = parsed("").revocation.resolve().unwrap();
        assert_eq!(
            defaults.interval,
            Some(std::time::Duration::from_secs(6 * 3600))
        );
        assert_eq!(defaults.max_crl_bytes, 32 << 20);
        let set =
            parsed("[revocation]\ncheck_hours = 0\nmax_crl_mib = 2\nfetch_timeout_secs = 5\n")
                .revocation
                .resolve()
                .unwrap();
        assert_eq!(set.interval, None, "0 turns the schedule off");
        assert_eq!(set.max_crl_bytes, 2 << 20);
        assert_eq!(set.fetch_timeout, std::time::Duration::from_secs(5));
        let zero = parsed("[revocation]\nmax_crl_mib = 0\n")
            .revocation
            .resolve();
        assert!(zero.is_err());
    }

    #[test]
    fn the_console_origin_names_the_relying_party() {
        let rp = relying_party(Some("https://kg.example.org")).unwrap();
        assert_eq!(rp.id, "kg.example.org");
        assert_eq!(rp.origin.as_str(), "https://kg.example.org/");
        assert!(!rp.any_port);
        assert_eq!(relying_party(None).unwrap().id, "localhost");
        assert!(relying_party(Some("kg.example.org")).is_err());
        assert!(relying_party(Some("ftp://kg.example.org")).is_err());
    }

    #[test]
    fn archive_members_are_configurable() {
        let all = parsed("").archive_members.resolve().unwrap();
        assert!(all.enabled && all.kinds.script && all.kinds.pe);
        let some = parsed("[archive_members]\nkinds = [\"pe\", \"elf\"]\nmax_members = 10\n")
            .archive_members
            .resolve()
            .unwrap();
        assert!(some.kinds.pe && some.kinds.elf && !some.kinds.script && !some.kinds.macho);
        assert_eq!(some.max_members, 10);
        let off = parsed("[archive_members]\nenabled = false\n");
        assert!(!off.archive_members.resolve().unwrap().enabled);
        let bad = parsed("[archive_members]\nkinds = [\"dll\"]\n");
        assert!(bad.archive_members.resolve().is_err());
    }

    #[test]
    fn the_release_url_checks_quarterly_unless_told_otherwise() {
        let file =
            parsed("corpus_release_url = \"https://mirror.example/rds/RDS_modern_minimal.zip\"\n");
        let source = corpus_release(&file, None).unwrap().unwrap();
        assert_eq!(
            source.url.as_str(),
            "https://mirror.example/rds/RDS_modern_minimal.zip"
        );
        assert_eq!(source.check_every.as_secs(), 90 * 86_400);
        assert_eq!(source.max_download_bytes, 512 << 30);

        let file = parsed(
            "corpus_release_url = \"https://mirror.example/r.zip\"\ncorpus_release_check_days = 7\ncorpus_release_max_gib = 2\n",
        );
        let source = corpus_release(&file, None).unwrap().unwrap();
        assert_eq!(source.check_every.as_secs(), 7 * 86_400);
        assert_eq!(source.max_download_bytes, 2 << 30);
        assert_eq!(source.max_extracted_bytes, 2 << 30);

        assert!(corpus_release(&parsed(""), None).unwrap().is_none());
        assert!(
            corpus_release(&parsed(""), Some(" ".into()))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn the_environment_names_the_release_url_and_it_is_never_shown_whole() {
        let file = parsed("corpus_release_url = \"https://file.example/r.zip\"\n");
        let env = "https://reader:hunter2@env.example/rds/r.zip?sig=s3cr3t";
        let source = corpus_release(&file, Some(env.into())).unwrap().unwrap();
        assert_eq!(source.url.host_str(), Some("env.example"));
        let settings = server::Settings {
            jobs: jobs::JobSettings {
                corpus_release: Some(source),
                ..jobs::JobSettings::default()
            },
            ..server::Settings::default()
        };
        let shown = format!("{settings:?}");
        assert!(shown.contains("env.example/rds/r.zip"), "{shown}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("s3cr3t"),
            "{shown}"
        );
    }

    #[test]
    fn a_bad_release_setting_is_refused_with_its_name() {
        let error = |toml: &str| {
            corpus_release(&parsed(toml), None)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let e = error("corpus_release_url = \"http://mirror.example/r.zip\"\n");
        assert!(e.contains("https://"), "{e}");
        let e = error("corpus_release_url = \"mirror.example/r.zip\"\n");
        assert!(e.contains("corpus_release_url is not a valid URL"), "{e}");
        let e = error(
            "corpus_release_url = \"https://m.example/r.zip\"\ncorpus_release_check_days = 0\n",
        );
        assert!(e.contains("corpus_release_check_days"), "{e}");
        let e =
            error("corpus_release_url = \"https://m.example/r.zip\"\ncorpus_release_max_gib = 0\n");
        assert!(e.contains("corpus_release_max_gib"), "{e}");
    }

    #[test]
    fn advisory_urls_refresh_daily_unless_told_otherwise() {
        assert!(parsed("").advisories.resolve(None).unwrap().is_none());
        let file = parsed(
            "[advisories]\nurls = [\"https://osv.example/npm/all.zip\", \"https://osv.example/PyPI/all.zip\"]\n",
        );
        let source = file.advisories.resolve(None).unwrap().unwrap();
        assert_eq!(source.urls.len(), 2);
        assert_eq!(source.urls[1].as_str(), "https://osv.example/PyPI/all.zip");
        assert_eq!(source.interval.as_secs(), 24 * 3600);
        assert_eq!(source.max_download_bytes, 512 << 20);
        assert_eq!(source.timeout.as_secs(), 1800);

        let set = parsed(
            "[advisories]\nurls = [\"https://osv.example/Go/all.zip\"]\nrefresh_hours = 6\nmax_mib = 64\nfetch_timeout_secs = 30\n",
        )
        .advisories
        .resolve(None)
        .unwrap()
        .unwrap();
        assert_eq!(set.interval.as_secs(), 6 * 3600);
        assert_eq!(set.max_download_bytes, 64 << 20);
        assert_eq!(set.timeout.as_secs(), 30);
    }

    #[test]
    fn the_environment_lists_the_advisory_urls_and_they_are_never_shown_whole() {
        let file = parsed("[advisories]\nurls = [\"https://file.example/npm/all.zip\"]\n");
        let env = " https://reader:hunter2@env.example/npm/all.zip?sig=s3cr3t , https://env.example/Go/all.zip,";
        let source = file.advisories.resolve(Some(env.into())).unwrap().unwrap();
        let hosts: Vec<_> = source.urls.iter().map(|u| u.host_str().unwrap()).collect();
        assert_eq!(hosts, ["env.example", "env.example"]);
        let blank = file.advisories.resolve(Some(" ".into())).unwrap().unwrap();
        assert_eq!(blank.urls[0].host_str(), Some("file.example"));
        let settings = server::Settings {
            jobs: jobs::JobSettings {
                advisories: Some(source),
                ..jobs::JobSettings::default()
            },
            ..server::Settings::default()
        };
        let shown = format!("{settings:?}");
        assert!(shown.contains("env.example/Go/all.zip"), "{shown}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("s3cr3t"),
            "{shown}"
        );
    }

    #[test]
    fn a_bad_advisory_setting_is_refused_with_its_name() {
        let error = |toml: &str| {
            parsed(toml)
                .advisories
                .resolve(None)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let e = error("[advisories]\nurls = [\"http://osv.example/all.zip\"]\n");
        assert!(e.contains("https://"), "{e}");
        let e = error("[advisories]\nurls = [\"osv.example/all.zip\"]\n");
        assert!(e.contains("advisories.urls: not a valid URL"), "{e}");
        let e = error("[advisories]\nurls = [\"https://o.example/a.zip\"]\nrefresh_hours = 0\n");
        assert!(e.contains("advisories.refresh_hours"), "{e}");
        let e = error("[advisories]\nurls = [\"https://o.example/a.zip\"]\nmax_mib = 0\n");
        assert!(e.contains("advisories.max_mib"), "{e}");
        let e =
            error("[advisories]\nurls = [\"https://o.example/a.zip\"]\nfetch_timeout_secs = 0\n");
        assert!(e.contains("advisories.fetch_timeout_secs"), "{e}");
        let typo =
            toml::from_str::<FileConfig>("[advisories]\nurl = \"https://o.example/a.zip\"\n");
        assert!(typo.is_err(), "an unknown key is refused");
    }

    fn test_ca_pem() -> String {
        let mut params = rcgen::CertificateParams::default();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn the_extra_ca_file_is_loaded_from_the_file_or_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("mirror-ca.pem");
        std::fs::write(&ca, test_ca_pem().repeat(2)).unwrap();
        let none = ingest::ProxySettings::none;

        let file = parsed(&format!("extra_ca_file = {:?}\n", ca.display().to_string()));
        let settings = outbound(&file, None, none()).unwrap();
        let loaded = settings.extra_ca.unwrap();
        assert_eq!((loaded.path(), loaded.len()), (ca.as_path(), 2));

        let env_ca = dir.path().join("env-ca.pem");
        std::fs::write(&env_ca, test_ca_pem()).unwrap();
        let settings = outbound(&file, Some(env_ca.clone().into()), none()).unwrap();
        assert_eq!(settings.extra_ca.unwrap().path(), env_ca);

        assert!(
            outbound(&parsed(""), None, none())
                .unwrap()
                .extra_ca
                .is_none()
        );
        assert!(
            outbound(&parsed(""), Some("".into()), none())
                .unwrap()
                .extra_ca
                .is_none()
        );
    }

    #[test]
    fn a_bad_extra_ca_file_stops_the_start_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let error = |content: Option<&str>| {
            let path = dir.path().join("bundle.pem");
            let _ = std::fs::remove_file(&path);
            if let Some(content) = content {
                std::fs::write(&path, content).unwrap();
            }
            let file = parsed(&format!(
                "extra_ca_file = {:?}\n",
                path.display().to_string()
            ));
            let e = outbound(&file, None, ingest::ProxySettings::none())
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(e.contains(&path.display().to_string()), "{e}");
            e
        };
        assert!(error(None).contains("cannot read"));
        assert!(error(Some("")).contains("empty"));
        assert!(error(Some(" \n")).contains("empty"));
        assert!(error(Some("not a certificate\n")).contains("no certificate"));
        assert!(
            error(Some(
                "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
            ))
            .contains("no certificate")
        );
        let e = error(Some(
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        ));
        assert!(e.contains("not usable"), "{e}");

        let unreadable = dir.path().join("a-directory");
        std::fs::create_dir(&unreadable).unwrap();
        let file = parsed(&format!(
            "extra_ca_file = {:?}\n",
            unreadable.display().to_string()
        ));
        let e = outbound(&file, None, ingest::ProxySettings::none())
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a-directory") && e.contains("cannot read"),
            "{e}"
        );
    }

    #[test]
    fn urls_are_logged_without_passwords_or_queries() {
        assert_eq!(
            redact_url("postgres://kg:S3cret@db.internal:5432/knowngood"),
            "postgres://kg:redacted@db.internal:5432/knowngood"
        );
        assert_eq!(
            redact_url("postgres://kg@db/k?sslmode=require&password=S3cret"),
            "postgres://kg@db/k?redacted"
        );
        assert_eq!(
            redact_url("redis://:S3cret@cache.internal:6379/0"),
            "redis://:redacted@cache.internal:6379/0"
        );
        assert_eq!(
            redact_url("sqlite:///var/lib/knowngood/knowngood.db"),
            "sqlite:///var/lib/knowngood/knowngood.db"
        );
        assert_eq!(redact_url("S3cret"), "<not a URL>");
        let config = Config {
            listen: "127.0.0.1:1".parse().unwrap(),
            metrics_listen: None,
            data_dir: PathBuf::from("/d"),
            database_url: "postgres://kg:S3cret@db/k".into(),
            database: store::StoreOptions::default(),
            redis_url: Some("rediss://u:Redis5ecret@cache/0".into()),
            corpus_dir: PathBuf::from("/d/corpus"),
            settings: server::Settings::default(),
            secrets: SecretSettings::default(),
        };
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("S3cret") && !shown.contains("Redis5ecret"),
            "{shown}"
        );
        assert!(shown.contains("db/k"), "{shown}");
    }

    #[test]
    fn connection_limits_come_from_the_file_or_the_defaults() {
        let defaults = server::ConnectionLimits::default();
        let limits = parsed("").connections.resolve().unwrap();
        assert_eq!(limits.header_read_timeout, defaults.header_read_timeout);
        assert_eq!(limits.max_total, defaults.max_total);
        let limits = parsed(
            "[connections]\nheader_read_timeout_secs = 5\nbody_read_timeout_secs = 60\nmax_per_address = 32\nmax_total = 500\n",
        )
        .connections
        .resolve()
        .unwrap();
        assert_eq!(limits.header_read_timeout.as_secs(), 5);
        assert_eq!(limits.body_read_timeout.as_secs(), 60);
        assert_eq!(limits.max_per_address, 32);
        assert_eq!(limits.max_total, 500);
        let e = parsed("[connections]\nmax_total = 0\n")
            .connections
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(e.contains("connections.max_total"), "{e}");
    }

    #[test]
    fn unknown_keys_in_the_file_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k.toml");
        std::fs::write(&file, "lisen = \"x\"\n").unwrap();
        let common = CommonArgs {
            data_dir: Some(dir.path().join("data")),
            config: Some(file),
            database_url: None,
        };
        assert!(Config::resolve(&common, None).is_err());
    }
}
