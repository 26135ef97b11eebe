//! The vendor refresh: every enabled fetcher discovers its vendor's current releases and
//! records them through the store. One vendor's failure never blocks the others; a vendor
//! whose channel cannot be read is retried with backoff; each run's outcome is kept as the
//! vendor's health (shown on /public/status). A package version whose hash changed raises
//! a change alert. Packages on any account's watchlist are followed too, and what the
//! registry said of those it does not know is noted for the watchlist. Versions waiting in
//! the coverage queue are recorded after their channel's own run, pinned.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveTime, Utc};
use ingest::{FetchContext, FetchLimits, ProblemKind, RecordSink, VendorReport, ingest_vendor};
use model::{Clock, DownloadAudit, Error, NewRecord, RecordOutcome};
use store::downloads::ChangeAlert;
use store::{HistoryQuery, Store};

/// Per-vendor overrides of the official channel (`[vendors.<id>]` in the config).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VendorOverride {
    pub enabled: Option<bool>,
    pub base_url: Option<String>,
    pub files_url: Option<String>,
    /// Packages, modules or app ids to follow, for vendors that track a list
    /// (distributions: also `*` and `@base`, and `name=version` pins).
    pub items: Option<Vec<String>>,
    /// Distributions: a file of further package names, one per line, optionally pinned
    /// `name=version`; read at each run.
    pub items_file: Option<std::path::PathBuf>,
    /// Debian: releases by code name, or `supported` (the default).
    pub releases: Option<Vec<String>>,
    /// Debian: the security archive.
    pub security_url: Option<String>,
    /// Debian and Rocky Linux: a snapshot service (Debian) or vault (Rocky Linux) for pinned
    /// versions the followed suites or repos no longer list.
    pub snapshot_url: Option<String>,
    /// PyPI and npm: `history = N` (the N newest versions the registry lists) or
    /// `history = "all"`.
    pub history: Option<HistorySetting>,
}

/// `history` as written in the config file: a count or a word.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(untagged)]
pub enum HistorySetting {
    Count(i64),
    Word(String),
}

impl HistorySetting {
    /// The horizon this setting names: a positive count or `"all"`.
    pub fn horizon(&self) -> Result<ingest::History, String> {
        match self {
            Self::Count(n) if *n >= 1 => usize::try_from(*n)
                .map(ingest::History::Newest)
                .map_err(|_| format!("{n} is too large")),
            Self::Word(w) if w == "all" => Ok(ingest::History::All),
            Self::Count(n) => Err(format!("{n} is not a positive number of versions")),
            Self::Word(w) => Err(format!("{w:?} is neither a positive number nor \"all\"")),
        }
    }
}

/// Ecosystems whose versions are immutable once published.
const PACKAGE_ECOSYSTEMS: [&str; 3] = ["npm", "pypi", "go"];

/// Records into the store for one vendor.
struct StoreSink {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    vendor: String,
    /// The vendors of the records written, when they name more than the fetcher's vendor
    /// (`Debian bookworm`, `Debian trixie`): each gets the run's health too.
    record_vendors: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl StoreSink {
    /// Records `rs` with `now` as the time their history entries start, in one write, one
    /// result a record: when the write fails (one family's stored history unreadable, say),
    /// each is written on its own, so one file's error does not cost the others. A package
    /// whose recorded hash changed raises its alert.
    async fn record_each(
        &self,
        rs: Vec<NewRecord>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Vec<Result<RecordOutcome, Error>> {
        // Packages only (`name (ecosystem)` under their ecosystem): the Go toolchain's
        // vendor `Go` is not the `go` module ecosystem.
        let packages: Vec<Option<(String, String, String, String)>> = rs
            .iter()
            .map(|r| {
                let ecosystem = &r.vendor;
                let is_package = PACKAGE_ECOSYSTEMS.contains(&ecosystem.as_str())
                    && r.executable_name.ends_with(&format!(" ({ecosystem})"));
                is_package.then(|| {
                    (
                        ecosystem.clone(),
                        r.executable_name.clone(),
                        r.version.clone(),
                        r.hash_sha256.to_ascii_lowercase(),
                    )
                })
            })
            .collect();
        {
            let mut vendors = self
                .record_vendors
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for r in rs.iter().filter(|r| r.vendor != self.vendor) {
                vendors.insert(r.vendor.clone());
            }
        }
        let together = match rs.len() {
            0 | 1 => None,
            _ => self.store.record_many(rs.clone(), now).await.ok(),
        };
        let mut results: Vec<Result<RecordOutcome, Error>> = match together {
            Some(outcomes) => outcomes.into_iter().map(Ok).collect(),
            None => {
                let mut each = Vec::with_capacity(rs.len());
                for r in rs {
                    each.push(self.store.record(r, now).await);
                }
                each
            }
        };
        for (result, package) in results.iter_mut().zip(packages) {
            if let (Ok(outcome), Some((ecosystem, name, version, sha256))) = (&*result, package)
                && outcome.hash_changed()
                && let Err(e) = self.alert(&ecosystem, &name, &version, &sha256).await
            {
                *result = Err(e);
            }
        }
        results
    }

    async fn record_one(
        &self,
        r: NewRecord,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<RecordOutcome, Error> {
        self.record_each(vec![r], now)
            .await
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(Error::internal("a recorded file got no outcome")))
    }

    /// A past version's history starts at its release date (never in the future).
    fn released_at(
        &self,
        released: chrono::DateTime<chrono::Utc>,
    ) -> chrono::DateTime<chrono::Utc> {
        released.min(self.clock.now())
    }
}

#[async_trait]
impl RecordSink for StoreSink {
    async fn record(&self, r: NewRecord) -> Result<RecordOutcome, Error> {
        self.record_one(r, self.clock.now()).await
    }

    async fn record_many(&self, rs: Vec<NewRecord>) -> Vec<Result<RecordOutcome, Error>> {
        self.record_each(rs, self.clock.now()).await
    }

    async fn recorded_with_sha1(&self, r: &NewRecord) -> Result<bool, Error> {
        let Some(sha1) = r
            .hash_sha1
            .as_deref()
            .and_then(|h| model::HashValue::parse(h).ok())
        else {
            return Ok(false);
        };
        let found = self.store.find_by_hashes(&[sha1], true).await?;
        Ok(found.iter().any(|k| {
            k.integrity_ok
                && (
                    &k.record.vendor,
                    &k.record.executable_name,
                    &k.record.version,
                    k.record.platform,
                    k.record.arch,
                ) == (
                    &r.vendor,
                    &r.executable_name,
                    &r.version,
                    r.platform,
                    r.arch,
                )
        }))
    }

    async fn record_released(
        &self,
        r: NewRecord,
        released: chrono::DateTime<chrono::Utc>,
    ) -> Result<RecordOutcome, Error> {
        self.record_one(r, self.released_at(released)).await
    }

    async fn record_many_released(
        &self,
        rs: Vec<NewRecord>,
        released: chrono::DateTime<chrono::Utc>,
    ) -> Vec<Result<RecordOutcome, Error>> {
        self.record_each(rs, self.released_at(released)).await
    }

    async fn signer_seen(&self, record_id: &str, signer: &ingest::SignerInfo) -> Result<(), Error> {
        self.store
            .signing_cert_seen(
                &store::downloads::SigningCert {
                    thumbprint: signer.sig_thumbprint.clone(),
                    signer: signer.sig_signer.clone(),
                    issuer: signer.sig_issuer.clone(),
                    serial: signer.sig_serial.clone(),
                    crl_urls: signer.crl_urls.clone(),
                    issuer_cert: signer.issuer_cert.clone(),
                },
                self.clock.now(),
            )
            .await?;
        self.store
            .record_signed_by(record_id, &signer.sig_thumbprint)
            .await
    }

    async fn already_recorded(&self, r: &NewRecord) -> Result<bool, Error> {
        let Ok(sha256) = model::HashValue::parse_as(&r.hash_sha256, model::HashAlgo::Sha256) else {
            return Ok(false);
        };
        let found = self.store.find_by_hashes(&[sha256], true).await?;
        Ok(found.iter().any(|h| {
            let k = &h.record;
            h.integrity_ok
                && (
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
        }))
    }

    async fn download_audited(&self, audit: DownloadAudit) -> Result<(), Error> {
        self.store.record_download(&audit).await
    }
}

impl StoreSink {
    /// Both observations stay in the history (the earlier one superseded); the alert
    /// names them.
    async fn alert(
        &self,
        ecosystem: &str,
        name: &str,
        version: &str,
        latest: &str,
    ) -> Result<(), Error> {
        let history = self
            .store
            .history(&HistoryQuery {
                executable: name.to_string(),
                limit: 10,
                ..HistoryQuery::default()
            })
            .await?;
        let previous = history
            .items
            .iter()
            .find(|h| h.record.version == version && h.record.hash_sha256 != latest)
            .map(|h| h.record.hash_sha256.clone())
            .unwrap_or_default();
        let package = name
            .strip_suffix(&format!(" ({ecosystem})"))
            .unwrap_or(name)
            .to_string();
        let id = self
            .store
            .add_change_alert(&ChangeAlert {
                id: String::new(),
                ecosystem: ecosystem.to_string(),
                package_name: package.clone(),
                version: version.to_string(),
                previous_sha256: previous.clone(),
                latest_sha256: latest.to_string(),
                observed_at: self.clock.now(),
            })
            .await?;
        tracing::warn!(alert = %id, ecosystem, package = %package, version, previous = %previous, latest, "package hash changed after publication");
        Ok(())
    }
}

/// How a refresh runs.
#[derive(Debug, Clone)]
pub struct RefreshOptions {
    pub vendors: BTreeMap<String, VendorOverride>,
    pub limits: FetchLimits,
    /// Attempts per vendor whose channel could not be read at all.
    pub attempts: u32,
    /// Wait before the second attempt; doubled before each further one.
    pub backoff: Duration,
    /// How the outbound clients of the jobs (vendor channels, downloads, corpus releases)
    /// are built: extra CA bundle, proxies.
    pub outbound: ingest::OutboundSettings,
    /// A client used as is instead of one built from `outbound` (tests).
    pub client: Option<reqwest::Client>,
    /// Armored OpenPGP keys the Debian and Ubuntu channels verify `InRelease` with instead
    /// of the shipped archive keys (tests: an archive signed with a key made at test time).
    pub archive_keys: Option<Vec<String>>,
}

impl RefreshOptions {
    /// The HTTPS-only client for vendor channels, downloads and corpus releases.
    pub fn https_client(&self) -> Result<reqwest::Client, ingest::OutboundError> {
        match &self.client {
            Some(client) => Ok(client.clone()),
            None => self.outbound.https_client(),
        }
    }

    /// Every vendor's fetcher with its official channel, the Debian-format ones keyed with
    /// `archive_keys` when set.
    fn setups(&self) -> Vec<ingest::vendors::VendorSetup> {
        let mut setups = ingest::vendors::all();
        if let Some(keys) = &self.archive_keys {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            for setup in &mut setups {
                match setup.fetcher.id() {
                    "debian" => setup.fetcher = Box::new(ingest::vendors::Debian::with_keys(&keys)),
                    "ubuntu" => setup.fetcher = Box::new(ingest::vendors::Ubuntu::with_keys(&keys)),
                    _ => {}
                }
            }
        }
        setups
    }
}

impl Default for RefreshOptions {
    fn default() -> Self {
        Self {
            vendors: BTreeMap::new(),
            limits: FetchLimits::default(),
            attempts: 3,
            backoff: Duration::from_secs(30),
            outbound: ingest::OutboundSettings::default(),
            client: None,
            archive_keys: None,
        }
    }
}

impl RefreshOptions {
    /// These options with the staff's platform settings applied: vendors disabled there
    /// are skipped whatever the configuration says.
    pub fn with_platform(&self, platform: &model::PlatformSettings) -> RefreshOptions {
        let mut options = self.clone();
        for id in &platform.disabled_vendors {
            options.vendors.entry(id.clone()).or_default().enabled = Some(false);
        }
        options
    }

    /// Whether the configuration (not the platform settings) enables vendor `id`.
    pub fn configured_enabled(&self, id: &str) -> Option<bool> {
        let setup = ingest::vendors::all()
            .into_iter()
            .find(|v| v.fetcher.id() == id)?;
        Some(
            self.vendors
                .get(id)
                .and_then(|o| o.enabled)
                .unwrap_or(setup.config.enabled),
        )
    }
}

/// Starts a refresh of one vendor now, in the background, under its own lease so that one
/// runs at a time across replicas. `NotFound` for an unknown vendor, `Conflict` when the
/// vendor is disabled or a refresh of it is already running.
pub async fn refresh_now(
    ctx: &crate::JobContext,
    vendor: &str,
) -> Result<tokio::task::JoinHandle<()>, Error> {
    let platform = ctx.store.current_platform_settings().await?;
    let options = ctx.settings.refresh.with_platform(&platform);
    match options.configured_enabled(vendor) {
        None => {
            return Err(Error::NotFound(format!(
                "no vendor {}; known: {}",
                model::shown(vendor),
                vendor_ids().join(", ")
            )));
        }
        Some(false) => {
            return Err(Error::Conflict(format!("vendor {vendor} is disabled")));
        }
        Some(true) => {}
    }
    let now = ctx.clock.now();
    let lease = format!("{JOB}.now:{vendor}");
    let holder = store::new_id();
    if !ctx
        .store
        .try_lease(&lease, &holder, now + chrono::Duration::hours(1), now)
        .await?
    {
        return Err(Error::Conflict(format!(
            "a refresh of {vendor} is already running"
        )));
    }
    let ctx = ctx.clone();
    let vendor = vendor.to_string();
    Ok(tokio::spawn(async move {
        let done = refresh_vendors(
            ctx.store.clone(),
            ctx.clock.clone(),
            &options,
            Some(&vendor),
            &|r| tracing::info!(vendor = %r.fetcher, recorded = r.recorded, unchanged = r.unchanged, errors = r.errors, "vendor refreshed on request"),
        )
        .await;
        if let Err(e) = done {
            tracing::warn!(vendor = %vendor, error = %e, "requested refresh failed");
        }
        if let Err(e) = ctx
            .store
            .release_lease(&lease, &holder, ctx.clock.now())
            .await
        {
            tracing::warn!(error = %e, "cannot release the refresh lease; it expires within the hour");
        }
    }))
}

/// A vendor's channel as configured: its official channel with the `[vendors.<id>]`
/// overrides applied.
pub fn channel_config(
    setup: &ingest::vendors::VendorSetup,
    options: &RefreshOptions,
) -> ingest::VendorConfig {
    let mut config = setup.config.clone();
    if let Some(o) = options.vendors.get(setup.fetcher.id()) {
        config.enabled = o.enabled.unwrap_or(config.enabled);
        if let Some(url) = &o.base_url {
            config.base_url = url.clone();
        }
        if o.files_url.is_some() {
            config.files_url = o.files_url.clone();
        }
        if let Some(items) = &o.items {
            config.items = items.clone();
        }
        if o.items_file.is_some() {
            config.items_file = o.items_file.clone();
        }
        if let Some(releases) = &o.releases {
            config.releases = releases.clone();
        }
        if o.security_url.is_some() {
            config.security_url = o.security_url.clone();
        }
        if o.snapshot_url.is_some() {
            config.snapshot_url = o.snapshot_url.clone();
        }
        // Checked when the configuration is loaded.
        if let Some(horizon) = o.history.as_ref().and_then(|h| h.horizon().ok()) {
            config.history = Some(horizon);
        }
    }
    config
}

/// Ids of every known vendor fetcher.
pub fn vendor_ids() -> Vec<String> {
    ingest::vendors::all()
        .iter()
        .map(|v| v.fetcher.id().to_string())
        .collect()
}

/// Runs every enabled vendor (or only `only`), one after another, and returns their reports;
/// `on_report` sees each as it finishes.
pub async fn refresh_vendors(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    options: &RefreshOptions,
    only: Option<&str>,
    on_report: &(dyn Fn(&VendorReport) + Send + Sync),
) -> Result<Vec<VendorReport>, Error> {
    let client = options
        .https_client()
        .map_err(|e| Error::internal_caused("HTTP client", e))?;
    let mut setups = options.setups();
    if let Some(id) = only {
        setups.retain(|v| v.fetcher.id() == id);
        if setups.is_empty() {
            return Err(Error::NotFound(format!(
                "no vendor {id:?}; known: {}",
                vendor_ids().join(", ")
            )));
        }
    }
    let watched = store.watched_packages().await?;
    let mut reports = Vec::new();
    for setup in setups {
        let mut config = channel_config(&setup, options);
        let ecosystem = package_ecosystem(setup.fetcher.id());
        let watched_here =
            ecosystem.map_or_else(Vec::new, |e| follow_watched(e, &watched, &mut config.items));
        let sink = StoreSink {
            store: store.clone(),
            clock: clock.clone(),
            vendor: setup.fetcher.vendor().to_string(),
            record_vendors: Default::default(),
        };
        let mut wait = options.backoff;
        let mut report = VendorReport::default();
        for attempt in 1..=options.attempts.max(1) {
            let ctx = FetchContext::new(client.clone(), config.clone(), options.limits.clone());
            report = ingest_vendor(setup.fetcher.as_ref(), &ctx, &sink, clock.as_ref()).await;
            let unreadable = report.discovered == 0
                && report
                    .problems
                    .iter()
                    .any(|p| p.kind == ProblemKind::Discovery);
            if !unreadable || attempt == options.attempts.max(1) {
                break;
            }
            tracing::warn!(vendor = %report.fetcher, attempt, "vendor channel unreadable; retrying");
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
        if !report.skipped {
            let now = clock.now();
            let error = health_error(&report);
            if error.is_some() && is_partial(&report) {
                // Recorded what it could: a success and an error at the same instant, which
                // the status page shows as degraded rather than failing.
                store.record_vendor_run(&report.vendor, None, now).await?;
            }
            store
                .record_vendor_run(&report.vendor, error.as_deref(), now)
                .await?;
            let record_vendors = std::mem::take(
                &mut *sink
                    .record_vendors
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()),
            );
            for vendor in record_vendors {
                store
                    .record_vendor_run(&vendor, error.as_deref(), now)
                    .await?;
            }
        }
        if let Some(e) = ecosystem
            && !report.skipped
        {
            note_registry_answers(store.as_ref(), e, &watched_here, &report, clock.now()).await?;
        }
        let skipped = report.skipped;
        on_report(&report);
        reports.push(report);
        if !skipped {
            let queue = QueueRun {
                store: &store,
                clock: &clock,
                client: &client,
                options,
            };
            reports.extend(queue.run(&setup, on_report).await?);
        }
    }
    Ok(reports)
}

/// Records the versions waiting in the coverage queue (see [`crate::coverage`]) of every
/// enabled channel it feeds (or only `only`), without the channels' own items; returns one
/// report per pass.
pub async fn refresh_queued(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    options: &RefreshOptions,
    only: Option<&str>,
    on_report: &(dyn Fn(&VendorReport) + Send + Sync),
) -> Result<Vec<VendorReport>, Error> {
    let client = options
        .https_client()
        .map_err(|e| Error::internal_caused("HTTP client", e))?;
    let queue = QueueRun {
        store: &store,
        clock: &clock,
        client: &client,
        options,
    };
    let mut reports = Vec::new();
    for setup in options.setups() {
        let id = setup.fetcher.id();
        if only.is_some_and(|o| o != id) || !channel_config(&setup, options).enabled {
            continue;
        }
        reports.extend(queue.run(&setup, on_report).await?);
    }
    Ok(reports)
}

/// Passes over one channel a refresh makes for the coverage queue (a distribution pins one
/// version of a package per pass); what remains waits for the next refresh.
const MAX_QUEUE_PASSES: usize = 4;

/// What a refresh reads the coverage queue with.
struct QueueRun<'a> {
    store: &'a Arc<dyn Store>,
    clock: &'a Arc<dyn Clock>,
    client: &'a reqwest::Client,
    options: &'a RefreshOptions,
}

impl QueueRun<'_> {
    /// Records the queued versions of `setup`'s channel, pinned, and closes each request:
    /// done when the channel recorded that version, failed with the reason otherwise. The
    /// passes are reported apart (`<id> (coverage queue)`) and never count in the vendor's
    /// health: a version an inventory named that the channel lacks is the inventory's
    /// problem, not the channel's.
    async fn run(
        &self,
        setup: &ingest::vendors::VendorSetup,
        on_report: &(dyn Fn(&VendorReport) + Send + Sync),
    ) -> Result<Vec<VendorReport>, Error> {
        let id = setup.fetcher.id();
        if !crate::coverage::CHANNELS.contains(&id) {
            return Ok(Vec::new());
        }
        let queued = self
            .store
            .queued_coverage(id, crate::coverage::PER_RUN)
            .await?;
        let mut reports = Vec::new();
        for pass in crate::coverage::passes(id, queued)
            .into_iter()
            .take(MAX_QUEUE_PASSES)
        {
            let mut config = channel_config(setup, self.options);
            config.items = pass
                .iter()
                .map(|e| crate::coverage::pinned_item(&e.item))
                .collect();
            config.items_file = None;
            config.history = None;
            let sink = QueueSink {
                inner: StoreSink {
                    store: self.store.clone(),
                    clock: self.clock.clone(),
                    vendor: setup.fetcher.vendor().to_string(),
                    record_vendors: Default::default(),
                },
                written: Default::default(),
            };
            let ctx = FetchContext::new(self.client.clone(), config, self.options.limits.clone());
            let mut report =
                ingest_vendor(setup.fetcher.as_ref(), &ctx, &sink, self.clock.as_ref()).await;
            report.fetcher = format!("{id} (coverage queue)");
            let written =
                std::mem::take(&mut *sink.written.lock().unwrap_or_else(|e| e.into_inner()));
            for entry in &pass {
                let recorded = written.iter().any(|(name, version)| {
                    crate::coverage::records_item(&entry.item, name, version)
                }) || self
                    .store
                    .records_exist(&[crate::coverage::probe(&entry.item)])
                    .await?
                    .first()
                    .copied()
                    .unwrap_or(false);
                let error = (!recorded).then(|| crate::coverage::failure(id, &entry.item, &report));
                self.store
                    .finish_coverage(entry, error.as_deref(), self.clock.now())
                    .await?;
            }
            on_report(&report);
            reports.push(report);
        }
        Ok(reports)
    }
}

/// A [`StoreSink`] that notes the (file, version) of every record written through it.
struct QueueSink {
    inner: StoreSink,
    written: std::sync::Mutex<Vec<(String, String)>>,
}

impl QueueSink {
    fn note(&self, r: &NewRecord) {
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((r.executable_name.clone(), r.version.clone()));
    }
}

#[async_trait]
impl RecordSink for QueueSink {
    async fn record(&self, r: NewRecord) -> Result<RecordOutcome, Error> {
        self.note(&r);
        self.inner.record(r).await
    }

    async fn record_released(
        &self,
        r: NewRecord,
        released: chrono::DateTime<chrono::Utc>,
    ) -> Result<RecordOutcome, Error> {
        self.note(&r);
        self.inner.record_released(r, released).await
    }

    async fn record_many(&self, rs: Vec<NewRecord>) -> Vec<Result<RecordOutcome, Error>> {
        rs.iter().for_each(|r| self.note(r));
        self.inner.record_many(rs).await
    }

    async fn record_many_released(
        &self,
        rs: Vec<NewRecord>,
        released: chrono::DateTime<chrono::Utc>,
    ) -> Vec<Result<RecordOutcome, Error>> {
        rs.iter().for_each(|r| self.note(r));
        self.inner.record_many_released(rs, released).await
    }

    async fn recorded_with_sha1(&self, r: &NewRecord) -> Result<bool, Error> {
        self.inner.recorded_with_sha1(r).await
    }

    async fn already_recorded(&self, r: &NewRecord) -> Result<bool, Error> {
        self.inner.already_recorded(r).await
    }

    async fn signer_seen(&self, record_id: &str, signer: &ingest::SignerInfo) -> Result<(), Error> {
        self.inner.signer_seen(record_id, signer).await
    }

    async fn download_audited(&self, audit: DownloadAudit) -> Result<(), Error> {
        self.inner.download_audited(audit).await
    }
}

/// The package ecosystem of the fetchers that follow a list of packages.
fn package_ecosystem(fetcher_id: &str) -> Option<packages::Ecosystem> {
    match fetcher_id {
        "npm" => Some(packages::Ecosystem::Npm),
        "pypi" => Some(packages::Ecosystem::Pypi),
        "gomod" => Some(packages::Ecosystem::Go),
        _ => None,
    }
}

/// Adds the watched packages of `ecosystem` to the fetcher's list (once each, however the
/// list spells them) and returns them.
fn follow_watched(
    ecosystem: packages::Ecosystem,
    watched: &[(String, String)],
    items: &mut Vec<String>,
) -> Vec<String> {
    let mut here = Vec::new();
    for (e, name) in watched {
        if e != ecosystem.as_str() {
            continue;
        }
        let listed = items
            .iter()
            .any(|i| ecosystem.normalize(i).is_ok_and(|n| &n == name));
        if !listed {
            items.push(name.clone());
        }
        here.push(name.clone());
    }
    here
}

/// Notes, per watched package, whether the registry answered that it knows no such
/// package (404, or 410 from the Go module proxy); any other outcome clears the note.
async fn note_registry_answers(
    store: &dyn Store,
    ecosystem: packages::Ecosystem,
    watched: &[String],
    report: &VendorReport,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    for name in watched {
        // The package's address as the fetcher asks for it.
        let path = match ecosystem {
            packages::Ecosystem::Pypi => format!("/pypi/{name}/json"),
            packages::Ecosystem::Npm => format!("/{}", name.replace('/', "%2F")),
            packages::Ecosystem::Go => format!("/{}/@v/list", packages::names::go_escape(name)),
        };
        let unknown = report.problems.iter().any(|p| {
            ["404", "410"]
                .iter()
                .any(|code| p.message.contains(&format!("{path} answered HTTP {code}")))
        });
        store
            .set_registry_status(
                ecosystem.as_str(),
                name,
                unknown.then_some("not_found"),
                now,
            )
            .await?;
    }
    Ok(())
}

/// A run that read part of its channel (one target or one listed item gone) and recorded
/// the rest, with no hash mismatch: the vendor is degraded, not failing.
fn is_partial(report: &VendorReport) -> bool {
    report.discovered > 0
        && report.mismatches == 0
        && report.recorded + report.unchanged > 0
        && report
            .problems
            .iter()
            .all(|p| p.kind == ProblemKind::Discovery)
}

/// What the vendor's health should say about a run; None when it went well. The text
/// starts with the problem's kind (`hash_mismatch: …`, `discovery: …`), which is all the
/// public status page shows of it.
fn health_error(report: &VendorReport) -> Option<String> {
    if report.mismatches > 0 {
        let first = report
            .problems
            .iter()
            .find(|p| p.kind == ProblemKind::HashMismatch)
            .map(|p| p.message.clone())
            .unwrap_or_default();
        return Some(format!(
            "{}: hash mismatch on {} artifact(s), possible tampering: {first}",
            ProblemKind::HashMismatch.as_str(),
            report.mismatches
        ));
    }
    if report.errors > 0 {
        let first = report.problems.first()?;
        return Some(format!(
            "{}: {} error(s); first: {}",
            first.kind.as_str(),
            report.errors,
            first.message
        ));
    }
    None
}

/// The daily vendor refresh, on the replica that claims the day's lease first.
pub struct RefreshJob;

/// [`RefreshJob`]'s name.
pub const JOB: &str = "vendor.refresh";

/// The lease of a day's refresh; it notes when that refresh ended.
pub fn day_lease(day: chrono::NaiveDate) -> String {
    format!("{JOB}:{day}")
}

/// The day's refresh has ended (well or not) on some replica.
pub async fn ended(store: &dyn Store, day: chrono::NaiveDate) -> Result<bool, Error> {
    Ok(store
        .lease(&day_lease(day))
        .await?
        .is_some_and(|l| l.finished_at.is_some()))
}

#[async_trait]
impl crate::Job for RefreshJob {
    fn name(&self) -> &'static str {
        JOB
    }

    async fn due(
        &self,
        ctx: &crate::JobContext,
        now: DateTime<Utc>,
    ) -> Result<Option<crate::Due>, Error> {
        let platform = ctx.store.current_platform_settings().await?;
        let Some(at) = platform.daily_refresh_at.or(ctx.settings.daily_refresh) else {
            return Ok(None);
        };
        if now.time() < at {
            return Ok(None);
        }
        let today = now.date_naive();
        let end_of_day = today.and_time(NaiveTime::MIN).and_utc() + chrono::Duration::days(1);
        // A fresh holder name: whoever claims the day's lease first runs it, once.
        Ok(Some(crate::Due::Leased(crate::Lease {
            name: day_lease(today),
            holder: store::new_id(),
            until: end_of_day,
        })))
    }

    async fn run(&self, ctx: &crate::JobContext, _now: DateTime<Utc>) -> Result<(), Error> {
        let platform = ctx.store.current_platform_settings().await?;
        refresh_vendors(
            ctx.store.clone(),
            ctx.clock.clone(),
            &ctx.settings.refresh.with_platform(&platform),
            None,
            &|r| tracing::info!(vendor = %r.fetcher, recorded = r.recorded, unchanged = r.unchanged, errors = r.errors, mismatches = r.mismatches, "vendor refreshed"),
        )
        .await
        .map(|_| ())
    }
}
