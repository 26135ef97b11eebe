//! Support of the fetcher tests: the vendor channel (`testkit::vendor::Site`, served over
//! HTTPS with a test CA its client trusts), an in-memory `RecordSink`, and running a vendor
//! through the pipeline.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{TimeZone, Utc};
use ingest::{
    DownloadLimits, FetchContext, FetchLimits, RecordSink, VendorConfig, VendorReport,
    ingest_vendor, vendors,
};
use model::{Arch, DownloadAudit, FixedClock, NewRecord, Platform, RecordOutcome};
use sha1::Digest as _;
use testkit::vendor::https_client as client;
pub use testkit::vendor::{ConnectProxy, Site, ca_pem, dead_base};

/// The records kept in memory, identified like the store does: a file and version on one
/// platform and arch.
#[derive(Default)]
pub struct MemorySink {
    pub records: Mutex<Vec<(String, NewRecord)>>,
    pub audits: Mutex<Vec<DownloadAudit>>,
    /// Records with this executable name fail to store.
    pub fail_name: Option<String>,
    /// The release dates past versions' records were given: (file, version, date).
    pub released: Mutex<Vec<(String, String, chrono::DateTime<Utc>)>>,
}

#[async_trait]
impl RecordSink for MemorySink {
    async fn record(&self, r: NewRecord) -> Result<RecordOutcome, model::Error> {
        if self.fail_name.as_deref() == Some(r.executable_name.as_str()) {
            return Err(model::Error::internal("disk full"));
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
            return Ok(if changed {
                RecordOutcome::Inserted {
                    id: id.clone(),
                    superseded: Some(id.clone()),
                    hash_changed: true,
                }
            } else {
                RecordOutcome::Unchanged { id: id.clone() }
            });
        }
        let id = format!("rec-{}", records.len() + 1);
        records.push((id.clone(), r));
        Ok(RecordOutcome::Inserted {
            id,
            superseded: None,
            hash_changed: false,
        })
    }

    async fn record_released(
        &self,
        r: NewRecord,
        released: chrono::DateTime<Utc>,
    ) -> Result<RecordOutcome, model::Error> {
        let key = (r.executable_name.clone(), r.version.clone(), released);
        let outcome = self.record(r).await?;
        self.released.lock().unwrap().push(key);
        Ok(outcome)
    }

    async fn recorded_with_sha1(&self, r: &NewRecord) -> Result<bool, model::Error> {
        let records = self.records.lock().unwrap();
        Ok(records.iter().any(|(_, k)| {
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
            ) && k.hash_sha1.is_some()
                && k.hash_sha1 == r.hash_sha1
        }))
    }

    async fn already_recorded(&self, r: &NewRecord) -> Result<bool, model::Error> {
        let records = self.records.lock().unwrap();
        Ok(records.iter().any(|(_, k)| {
            (
                &k.vendor,
                &k.executable_name,
                &k.version,
                k.platform,
                k.arch,
                &k.hash_sha256,
            ) == (
                &r.vendor,
                &r.executable_name,
                &r.version,
                r.platform,
                r.arch,
                &r.hash_sha256,
            )
        }))
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

    /// The release date recorded with `name` at `version`, if any.
    pub fn released(&self, name: &str, version: &str) -> Option<chrono::DateTime<Utc>> {
        let released = self.released.lock().unwrap();
        released
            .iter()
            .find(|(n, v, _)| n == name && v == version)
            .map(|(_, _, at)| *at)
    }

    /// The distinct versions recorded, oldest first (artifacts are recorded concurrently,
    /// so arrival order says nothing).
    pub fn versions(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .records
            .lock()
            .unwrap()
            .iter()
            .map(|(_, r)| r.version.clone())
            .collect();
        v.sort_by(|a, b| ingest::formats::compare_versions(a, b));
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
        // Tests that read archive members turn this on.
        members: ingest::MemberLimits {
            enabled: false,
            ..Default::default()
        },
        downloads_per_host: 4,
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
