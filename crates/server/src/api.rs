//! The JSON shapes of the API. Field names follow docs/api.md; these
//! types also describe the responses in the OpenAPI document.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use model::HashRecord;
use model::record::rfc3339;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One tracked file.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct HashRecordJson {
    pub id: String,
    pub executable_name: String,
    pub version: String,
    pub vendor: String,
    /// windows, linux, darwin, android, or universal for platform-neutral artifacts.
    pub platform: String,
    pub arch: String,
    pub hash_sha256: String,
    pub hash_sha1: Option<String>,
    pub hash_md5: Option<String>,
    pub source_url: String,
    pub download_verified: bool,
    pub valid_from: String,
    pub sig_signer: Option<String>,
    pub sig_issuer: Option<String>,
    pub sig_serial: Option<String>,
    pub sig_thumbprint: Option<String>,
    /// Present only when the signing certificate has been revoked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_revoked_at: Option<String>,
    /// The file's size in bytes; present only when the service hashed the file itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

impl From<&HashRecord> for HashRecordJson {
    fn from(r: &HashRecord) -> Self {
        let n = &r.record;
        Self {
            id: r.id.clone(),
            executable_name: n.executable_name.clone(),
            version: n.version.clone(),
            vendor: n.vendor.clone(),
            platform: n.platform.as_str().into(),
            arch: n.arch.as_str().into(),
            hash_sha256: n.hash_sha256.clone(),
            hash_sha1: n.hash_sha1.clone(),
            hash_md5: n.hash_md5.clone(),
            source_url: n.source_url.clone(),
            download_verified: n.download_verified,
            valid_from: rfc3339(r.valid_from),
            sig_signer: n.sig_signer.clone(),
            sig_issuer: n.sig_issuer.clone(),
            sig_serial: n.sig_serial.clone(),
            sig_thumbprint: n.sig_thumbprint.clone(),
            cert_revoked_at: r.cert_revoked_at.map(rfc3339),
            size: n.size,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct HashOfDay {
    /// Day of the snapshot (UTC).
    pub date: String,
    pub generated_at: String,
    /// True when this body came from the feed cache (kept at most one hour).
    pub cache_hit: bool,
    pub hashes: Vec<HashRecordJson>,
    /// Without `executable`, the feed comes a page at a time: the `after` value of the next
    /// page (also in the `Link` header, `rel="next"`), or null on the last page.
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LookupRequest<'a> {
    /// 1 to 100 MD5, SHA-1 or SHA-256 values (32, 40 or 64 hex characters).
    #[serde(borrow)]
    #[schema(value_type = Vec<String>)]
    pub hashes: Vec<SubmittedText<'a>>,
}

/// A submitted string, borrowed from the body unless it holds an escape. (serde borrows a
/// `Cow` only where it is a field of its own, not as an element of a `Vec`.)
#[derive(Debug, Deserialize)]
pub struct SubmittedText<'a>(#[serde(borrow)] pub Cow<'a, str>);

// The text borrows from the classifier's sources (lookup index, corpus generation or the
// records read for the request) and the keys from the batch: no copies per hit.
/// Classification of one submitted hash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub(crate) struct LookupResult<'a> {
    /// known_vendor_release, known_file or unknown.
    pub classification: &'static str,
    /// service_vendor, or the reference corpus set (nsrl_minimal, nsrl_full, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executable_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<&'a str>,
    /// Only on the historical lookup, for a match against a superseded build.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub historical: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub product_name: Option<&'a str>,
    /// A vendor file's size in bytes, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LookupResponse<'a> {
    /// Keyed by each distinct submitted hash, lowercase.
    // Built from the sorted batch: the entries are in key order already, so they are
    // written as a JSON object without building a map.
    #[serde(serialize_with = "sorted_entries_as_object")]
    #[schema(value_type = BTreeMap<String, LookupResult>)]
    pub results: Vec<(&'a str, LookupResult<'a>)>,
}

fn sorted_entries_as_object<S: serde::Serializer>(
    entries: &[(&str, LookupResult<'_>)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(entries.iter().map(|(key, result)| (key, result)))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryEntry {
    pub executable_name: String,
    pub version: String,
    pub vendor: String,
    pub platform: String,
    pub arch: String,
    pub hash_sha256: String,
    pub valid_from: String,
    pub valid_until: Option<String>,
    /// current or superseded.
    pub status: String,
    /// Present only when a certificate that signed the file has been revoked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_revoked_at: Option<String>,
    /// The file's size in bytes, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

impl From<&HashRecord> for HistoryEntry {
    fn from(r: &HashRecord) -> Self {
        Self {
            executable_name: r.record.executable_name.clone(),
            version: r.record.version.clone(),
            vendor: r.record.vendor.clone(),
            platform: r.record.platform.as_str().into(),
            arch: r.record.arch.as_str().into(),
            hash_sha256: r.record.hash_sha256.clone(),
            valid_from: rfc3339(r.valid_from),
            valid_until: r.valid_until.map(rfc3339),
            status: r.status.as_str().into(),
            cert_revoked_at: r.cert_revoked_at.map(rfc3339),
            size: r.record.size,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryPage {
    pub results: Vec<HistoryEntry>,
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
}

/// One export row; CSV exports have these columns in this order.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ExportRow {
    pub executable_name: String,
    pub version: String,
    pub vendor: String,
    pub platform: String,
    pub arch: String,
    pub hash_sha256: String,
    pub hash_sha1: Option<String>,
    pub hash_md5: Option<String>,
    pub valid_from: String,
    pub valid_until: Option<String>,
    pub status: String,
    pub source_url: String,
    pub download_verified: bool,
    /// JSON export only, and only when a certificate that signed the file has been
    /// revoked; the CSV columns stay the thirteen above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_revoked_at: Option<String>,
}

impl From<&HashRecord> for ExportRow {
    fn from(r: &HashRecord) -> Self {
        let n = &r.record;
        Self {
            executable_name: n.executable_name.clone(),
            version: n.version.clone(),
            vendor: n.vendor.clone(),
            platform: n.platform.as_str().into(),
            arch: n.arch.as_str().into(),
            hash_sha256: n.hash_sha256.clone(),
            hash_sha1: n.hash_sha1.clone(),
            hash_md5: n.hash_md5.clone(),
            valid_from: rfc3339(r.valid_from),
            valid_until: r.valid_until.map(rfc3339),
            status: r.status.as_str().into(),
            source_url: n.source_url.clone(),
            download_verified: n.download_verified,
            cert_revoked_at: r.cert_revoked_at.map(rfc3339),
        }
    }
}

/// A lookup result as a JSON value that outlives the classification (SBOM components).
pub(crate) fn lookup_result_owned(verdict: lookup::Verdict<'_>) -> serde_json::Value {
    serde_json::to_value(LookupResult::of(verdict, false))
        .unwrap_or_else(|_| serde_json::json!({ "classification": "unknown" }))
}

impl<'a> LookupResult<'a> {
    /// The answer for one hash; `historical` marks a match of a superseded build.
    pub fn of(verdict: lookup::Verdict<'a>, historical: bool) -> Self {
        let classification = verdict.classification().as_str();
        match verdict {
            lookup::Verdict::VendorRelease(m) => LookupResult {
                classification,
                source: Some("service_vendor"),
                vendor: Some(m.vendor),
                executable_name: Some(m.executable_name),
                version: Some(m.version),
                platform: Some(m.platform.as_str()),
                historical: (historical && !m.current).then_some(true),
                size: m.size,
                ..LookupResult::default()
            },
            lookup::Verdict::File(e) => LookupResult {
                classification,
                source: Some(e.source),
                file_name: Some(e.file_name),
                product_name: Some(e.product_name),
                ..LookupResult::default()
            },
            lookup::Verdict::Unknown => LookupResult {
                classification,
                ..LookupResult::default()
            },
        }
    }
}

/// Most hashes one lookup request may name (the lookup routes and the hashlookup bulk routes).
pub(crate) const MAX_LOOKUP_HASHES: usize = 100;

pub(crate) const EXPORT_COLUMNS: [&str; 13] = [
    "executable_name",
    "version",
    "vendor",
    "platform",
    "arch",
    "hash_sha256",
    "hash_sha1",
    "hash_md5",
    "valid_from",
    "valid_until",
    "status",
    "source_url",
    "download_verified",
];

impl ExportRow {
    /// One CSV line (RFC 4180 quoting), with its line break.
    pub(crate) fn to_csv_line(&self) -> String {
        let opt = |v: &Option<String>| v.clone().unwrap_or_default();
        let fields = [
            self.executable_name.clone(),
            self.version.clone(),
            self.vendor.clone(),
            self.platform.clone(),
            self.arch.clone(),
            self.hash_sha256.clone(),
            opt(&self.hash_sha1),
            opt(&self.hash_md5),
            self.valid_from.clone(),
            opt(&self.valid_until),
            self.status.clone(),
            self.source_url.clone(),
            self.download_verified.to_string(),
        ];
        let mut line = fields
            .iter()
            .map(|f| csv_field(f))
            .collect::<Vec<_>>()
            .join(",");
        line.push_str("\r\n");
        line
    }
}

/// Characters that make a spreadsheet read a cell as a formula when they open it.
const FORMULA_PREFIXES: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// One CSV field: quoted (RFC 4180) when it holds a separator, a quote or a line break, and
/// prefixed with `'` when it starts with a formula character, so `-2+3+cmd|…` and
/// `@types/node (npm)` alike open as text. The JSON export carries the raw values.
pub(crate) fn csv_field(value: &str) -> String {
    let needs_quotes = value.contains([',', '"', '\r', '\n']);
    let value = if value.starts_with(FORMULA_PREFIXES) {
        format!("'{value}")
    } else {
        value.to_string()
    };
    if needs_quotes {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

#[cfg(test)]
mod csv_tests {
    use super::csv_field;

    #[test]
    fn formula_prefixes_are_neutralised_alike() {
        for (raw, shown) in [
            ("=1+1", "'=1+1"),
            ("+1", "'+1"),
            ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
            ("@types/node (npm)", "'@types/node (npm)"),
            ("\tx", "'\tx"),
            ("\rx", "\"'\rx\""),
            ("a,b", "\"a,b\""),
            ("=a,\"b\"", "\"'=a,\"\"b\"\"\""),
            ("putty.exe", "putty.exe"),
            ("1.2-3", "1.2-3"),
        ] {
            assert_eq!(csv_field(raw), shown, "{raw:?}");
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StatsTotals {
    /// Distinct SHA-256 over current vendor records.
    pub known_good_hashes: u64,
    pub total_vendors: u64,
    pub total_platforms: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Stats {
    pub generated_at: String,
    pub totals: StatsTotals,
    /// Distinct SHA-256 in the live reference corpus (0 when none is loaded).
    pub reference_corpus_hashes: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ComponentStatus {
    /// ok or down (database); idle or running (scheduler).
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<&'static str>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReferenceCorpusStatus {
    /// The live generation; null when no corpus has been imported.
    pub generation: Option<String>,
    /// Distinct SHA-256 values.
    pub entries: u64,
    pub sources: Vec<String>,
    /// RDS releases the generation was built from.
    pub rds_versions: Vec<String>,
    pub imported_at: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Components {
    pub database: ComponentStatus,
    pub reference_corpus: ReferenceCorpusStatus,
    pub scheduler: ComponentStatus,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VendorStatus {
    pub vendor: String,
    /// ok, degraded (the last run recorded what it could read but part of the channel was
    /// gone), failing (last run failed) or unknown (never run).
    pub status: &'static str,
    pub last_success_at: Option<String>,
    pub last_error_at: Option<String>,
    pub last_error: Option<String>,
    pub records: u64,
}

/// The state of one CRL distribution point of an issuer.
#[derive(Debug, Serialize, ToSchema)]
pub struct CrlStatus {
    /// Issuing CA (RFC 4514).
    pub issuer: String,
    /// The distribution point (credentials in it redacted).
    pub url: String,
    /// ok (the last check used a verified CRL), failing (it could not) or unknown.
    pub status: &'static str,
    /// When a CRL from it last verified.
    pub last_good_at: Option<String>,
    /// nextUpdate of the last verified CRL.
    pub next_update: Option<String>,
    pub last_checked_at: Option<String>,
    pub last_error_at: Option<String>,
    /// Why the last check could not use it; null once a check succeeds.
    pub last_error: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RevocationStatus {
    /// One entry per issuer and distribution point.
    pub crls: Vec<CrlStatus>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    /// ok, degraded or down.
    pub status: &'static str,
    pub generated_at: String,
    pub components: Components,
    pub vendors: Vec<VendorStatus>,
    /// The revocation check's CRLs, per issuer.
    pub revocation: RevocationStatus,
    /// Vendor records whose HMAC failed verification since the server started; such
    /// records are never reported as known vendor releases.
    pub integrity_failures: u64,
}

pub fn timestamp(t: DateTime<Utc>) -> String {
    rfc3339(t)
}

// ---------------------------------------------------------------------------------------
// Keys (the admin key routes, grants and platform administrators answer these)
// ---------------------------------------------------------------------------------------

#[derive(Debug, Serialize, ToSchema)]
pub struct GrantJson {
    pub role: String,
    /// Absent for a permanent grant.
    pub expires_at: Option<String>,
    pub granted_by: String,
    pub granted_at: String,
    /// False once `expires_at` has passed.
    pub active: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyJson {
    pub key_id: String,
    pub team_id: String,
    /// Primary role.
    pub role: String,
    /// Primary role plus active grants.
    pub roles: Vec<String>,
    pub label: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
    pub grants: Vec<GrantJson>,
}

/// A new key; `key` is shown this once and cannot be recovered.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewKeyJson {
    pub key_id: String,
    pub key: String,
    pub team_id: String,
    pub role: String,
    pub label: String,
    pub created_at: String,
}

impl From<&auth::admin::ManagedKey> for KeyJson {
    fn from(k: &auth::admin::ManagedKey) -> Self {
        let info = &k.info;
        KeyJson {
            key_id: info.key_id.clone(),
            team_id: info.team_id.clone(),
            role: info.role.as_str().into(),
            roles: k.roles.iter().map(|r| r.as_str().to_string()).collect(),
            label: info.label.clone(),
            created_at: timestamp(info.created_at),
            revoked_at: info.revoked_at.map(timestamp),
            grants: info
                .grants
                .iter()
                .map(|g| GrantJson {
                    role: g.role.as_str().into(),
                    expires_at: g.expires_at.map(timestamp),
                    granted_by: g.granted_by.clone(),
                    granted_at: timestamp(g.granted_at),
                    active: k.grant_active(g),
                })
                .collect(),
        }
    }
}

impl From<auth::admin::NewKey> for NewKeyJson {
    fn from(k: auth::admin::NewKey) -> Self {
        NewKeyJson {
            key_id: k.key_id,
            key: k.key,
            team_id: k.team_id,
            role: k.role.as_str().into(),
            label: k.label,
            created_at: timestamp(k.created_at),
        }
    }
}

/// A session token.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionToken {
    /// RS256 JWT with the `mfa` claim; send it as a Bearer token. It lives 15 minutes and is
    /// renewed at `/api/v1/auth/refresh` while its sign-in session (12 hours) lasts.
    pub token: String,
    /// When the token expires (its `exp`).
    pub expires_at: String,
}
