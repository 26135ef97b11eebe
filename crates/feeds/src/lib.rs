//! The pull feeds, built from records: [`json_feed`] (JSON Feed 1.1), [`rss`] (RSS 2.0),
//! [`stix`] (STIX 2.1 objects and the bundle) and [`taxii`] (the object index and the
//! resources of a read-only TAXII 2.1 server). Pure: records in, bytes out; the server
//! reads the records, caches what is built here and serves it.

use chrono::{DateTime, SecondsFormat, Utc};
use model::HashRecord;

pub mod json_feed;
pub mod rss;
pub mod stix;
pub mod taxii;

/// Who publishes the feeds, as their documents name it.
#[derive(Debug, Clone)]
pub struct Publisher {
    /// The service's public address, absolute, without a trailing slash
    /// (`https://knowngood.example`); feed and TAXII links are built on it.
    pub base_url: String,
}

impl Publisher {
    pub fn new(base_url: &str) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_string(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }
}

/// Title of the feeds of current vendor releases.
pub const TITLE: &str = "knowngood: current vendor releases";
/// What the feeds hold, in one sentence.
pub const DESCRIPTION: &str = "Hashes of current vendor releases, sourced from the vendors' own \
     manifests or computed from downloads over HTTPS; one entry per tracked file.";

/// How many records a JSON Feed, RSS or STIX bundle document holds at most: the newest
/// ones; each document links to the next older window.
pub const WINDOW: usize = 1000;

/// The records a feed presents: verified ones only, newest added first.
pub fn feed_records(records: &[HashRecord]) -> Vec<&HashRecord> {
    let mut verified: Vec<&HashRecord> = records.iter().filter(|r| r.integrity_ok).collect();
    verified.sort_by(|a, b| (b.added_at, &b.id).cmp(&(a.added_at, &a.id)));
    verified
}

/// Where an older window of a feed starts: strictly before the record added at
/// `added_at` with id `id` (the last record of the previous window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Before {
    pub added_at: DateTime<Utc>,
    pub id: String,
}

impl Before {
    /// The opaque `before` query value.
    pub fn encode(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!(
            "{}:{}",
            self.added_at.timestamp_micros(),
            self.id
        ))
    }

    /// A `before` value this service gave, or `None`.
    pub fn decode(text: &str) -> Option<Self> {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text.trim())
            .ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (micros, id) = text.split_once(':')?;
        Some(Self {
            added_at: DateTime::from_timestamp_micros(micros.parse().ok()?)?,
            id: id.to_string(),
        })
    }

    /// The address of the window this starts, on the feed at `path`.
    pub fn url(&self, publisher: &Publisher, path: &str) -> String {
        publisher.url(&format!("{path}?before={}", self.encode()))
    }
}

/// When the records of a feed last changed: the newest `added_at` (a record leaves the
/// current set only when a newer one is added).
pub fn last_modified(records: &[&HashRecord]) -> Option<DateTime<Utc>> {
    records.iter().map(|r| r.added_at).max()
}

/// RFC 3339 UTC with milliseconds, the STIX timestamp form.
pub(crate) fn millis(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// RFC 3339 UTC with microseconds: TAXII's date added, which must tell records apart.
pub fn micros(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A strong entity tag for a body: its SHA-256, shortened.
pub fn etag(body: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(body);
    format!("\"{}\"", hex::encode(&digest[..16]))
}

/// The record's fields, for the feeds' extension objects.
pub(crate) fn record_fields(r: &HashRecord) -> serde_json::Value {
    let n = &r.record;
    let mut fields = serde_json::json!({
        "id": r.id,
        "vendor": n.vendor,
        "executable_name": n.executable_name,
        "version": n.version,
        "platform": n.platform.as_str(),
        "arch": n.arch.as_str(),
        "hash_sha256": n.hash_sha256,
        "hash_sha1": n.hash_sha1,
        "hash_md5": n.hash_md5,
        "source_url": n.source_url,
        "download_verified": n.download_verified,
        "valid_from": model::record::rfc3339(r.valid_from),
        "sig_signer": n.sig_signer,
        "sig_issuer": n.sig_issuer,
        "sig_serial": n.sig_serial,
        "sig_thumbprint": n.sig_thumbprint,
    });
    if let (Some(at), Some(map)) = (r.cert_revoked_at, fields.as_object_mut()) {
        map.insert("cert_revoked_at".into(), model::record::rfc3339(at).into());
    }
    fields
}

/// A one-line title for a record: `putty.exe 0.81 (PuTTY, windows/amd64)`.
pub(crate) fn record_title(r: &HashRecord) -> String {
    let n = &r.record;
    format!(
        "{} {} ({}, {}/{})",
        n.executable_name, n.version, n.vendor, n.platform, n.arch
    )
}

/// The record's digests as text lines.
pub(crate) fn record_digests(r: &HashRecord) -> String {
    let n = &r.record;
    let mut text = format!("SHA-256 {}", n.hash_sha256);
    if let Some(sha1) = &n.hash_sha1 {
        text.push_str(&format!("\nSHA-1 {sha1}"));
    }
    if let Some(md5) = &n.hash_md5 {
        text.push_str(&format!("\nMD5 {md5}"));
    }
    text
}

#[cfg(test)]
pub(crate) mod fixtures {
    use chrono::{TimeZone, Utc};
    use model::{Arch, HashRecord, NewRecord, Platform, RecordStatus};

    pub fn record(id: &str, name: &str, version: &str, second: u32) -> HashRecord {
        let at = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, second).unwrap();
        HashRecord {
            id: id.into(),
            record: NewRecord {
                vendor: "PuTTY".into(),
                executable_name: name.into(),
                version: version.into(),
                platform: Platform::Windows,
                arch: Arch::Amd64,
                hash_sha256: format!("{:064x}", second + 1),
                hash_sha1: Some(format!("{:040x}", second + 1)),
                hash_md5: Some(format!("{:032x}", second + 1)),
                source_url: "https://the.earth.li/~sgtatham/putty/latest/w64/putty.exe".into(),
                download_verified: true,
                sig_signer: None,
                sig_issuer: None,
                sig_serial: None,
                sig_thumbprint: None,
                size: None,
            },
            family: name.into(),
            status: RecordStatus::Current,
            valid_from: at,
            valid_until: None,
            added_at: at,
            cert_revoked_at: None,
            integrity_ok: true,
        }
    }
}
