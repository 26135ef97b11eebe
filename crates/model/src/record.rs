//! Hash records: what the service knows about one vendor file, with its history state
//! and the HMAC that proves the store has not been altered behind the service's back.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::Error;

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name { $(#[serde(rename = $text)] $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(Error::bad_request(format!(
                        concat!("unknown ", stringify!($name), " {:?}: expected one of {}"),
                        other,
                        [$($text),+].join(", ")
                    ))),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_enum!(
    /// `universal` is for platform-neutral artifacts (npm tarballs, sdists, Go module zips).
    Platform { Windows = "windows", Linux = "linux", Darwin = "darwin", Android = "android", Universal = "universal" }
);
string_enum!(Arch { Amd64 = "amd64", Arm64 = "arm64", Arm = "arm", X86 = "x86", Universal = "universal" });
string_enum!(RecordStatus { Current = "current", Superseded = "superseded" });
string_enum!(Classification {
    KnownVendorRelease = "known_vendor_release",
    KnownFile = "known_file",
    Unknown = "unknown",
});

/// What recording a record did to the history of its file: the store's answer, which
/// ingest reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOutcome {
    /// A new record (current, or superseded when older than the current version); the id
    /// of the record it superseded, if any.
    Inserted {
        id: String,
        superseded: Option<String>,
        /// The superseded record had the same version but a different SHA-256: a
        /// republish, which ingest must report rather than pass over.
        hash_changed: bool,
    },
    /// The same file is already recorded: the current record, or a superseded one with the
    /// same version and hashes.
    Unchanged { id: String },
}

impl RecordOutcome {
    /// The id of the record written, or of the one already there.
    pub fn id(&self) -> &str {
        match self {
            Self::Inserted { id, .. } | Self::Unchanged { id } => id,
        }
    }

    pub fn inserted(&self) -> bool {
        matches!(self, Self::Inserted { .. })
    }

    /// The same file and version was known with another hash: a republish, or tampering.
    pub fn hash_changed(&self) -> bool {
        matches!(
            self,
            Self::Inserted {
                hash_changed: true,
                ..
            }
        )
    }
}

/// A download the service made: the binary was hashed in memory and never stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadAudit {
    /// The channel's vendor (the fetcher's, not a record's release-qualified name).
    pub vendor: String,
    pub downloaded_at: DateTime<Utc>,
    pub url: String,
    pub size_bytes: u64,
    pub hash_record_id: String,
}

/// A record as ingest hands it to the store: everything but the identity and history
/// state, which the store assigns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewRecord {
    pub vendor: String,
    pub executable_name: String,
    pub version: String,
    pub platform: Platform,
    pub arch: Arch,
    pub hash_sha256: String,
    pub hash_sha1: Option<String>,
    pub hash_md5: Option<String>,
    pub source_url: String,
    pub download_verified: bool,
    pub sig_signer: Option<String>,
    pub sig_issuer: Option<String>,
    pub sig_serial: Option<String>,
    pub sig_thumbprint: Option<String>,
    /// The file's length in bytes, when ingest hashed the file itself (a download or a
    /// member of one); unknown for hashes taken from a vendor's manifest. Covered by the
    /// HMAC when present (see [`RecordSigner`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

impl NewRecord {
    /// Checks the fields ingest must never get wrong, on every path into the store: hex
    /// digests of the right length (stored lowercase); a vendor, name and version that are
    /// non-empty, at most 255 bytes and free of control, bidirectional-override and
    /// zero-width characters (the transparency log's leaf encoding relies on the absence of
    /// NUL, and a name must look like what it is); an `https://` source URL.
    pub fn validate(mut self) -> Result<Self, Error> {
        fn digest(v: &str, len: usize, field: &str) -> Result<String, Error> {
            let v = v.trim();
            if v.len() != len || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Error::bad_request(format!(
                    "{field} must be {len} hex characters"
                )));
            }
            Ok(v.to_ascii_lowercase())
        }
        for (field, value) in [
            ("executable_name", &self.executable_name),
            ("version", &self.version),
            ("vendor", &self.vendor),
        ] {
            text_field(field, value)?;
        }
        if !source_url_ok(&self.source_url) {
            return Err(Error::bad_request(format!(
                "source_url must be an https:// URL (got {:?})",
                self.source_url
            )));
        }
        self.hash_sha256 = digest(&self.hash_sha256, 64, "hash_sha256")?;
        self.hash_sha1 = self
            .hash_sha1
            .as_deref()
            .map(|v| digest(v, 40, "hash_sha1"))
            .transpose()?;
        self.hash_md5 = self
            .hash_md5
            .as_deref()
            .map(|v| digest(v, 32, "hash_md5"))
            .transpose()?;
        if let Some(size) = self.size
            && i64::try_from(size).is_err()
        {
            return Err(Error::bad_request(format!(
                "size must be at most {} bytes (got {size})",
                i64::MAX
            )));
        }
        self.sig_serial = self.sig_serial.map(|s| s.to_ascii_lowercase());
        self.sig_thumbprint = self.sig_thumbprint.map(|s| s.to_ascii_lowercase());
        Ok(self)
    }

    /// The history family this record belongs to (see [`family_of`]).
    pub fn family(&self) -> String {
        family_of(&self.executable_name, &self.version)
    }
}

/// Longest vendor, executable name or version, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// Characters that make a name display as something it is not: bidirectional overrides and
/// isolates, zero-width characters and the byte-order mark.
fn deceptive(c: char) -> bool {
    matches!(
        c,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200B}'..='\u{200D}' | '\u{FEFF}'
    )
}

fn text_field(field: &str, value: &str) -> Result<(), Error> {
    if value.trim().is_empty() {
        return Err(Error::bad_request(format!("{field} must not be empty")));
    }
    if value.len() > MAX_NAME_BYTES {
        return Err(Error::bad_request(format!(
            "{field} must be at most {MAX_NAME_BYTES} bytes (got {})",
            value.len()
        )));
    }
    if let Some(c) = value.chars().find(|&c| c.is_control() || deceptive(c)) {
        return Err(Error::bad_request(format!(
            "{field} must not contain control, bidirectional-override or zero-width characters \
             (found U+{:04X})",
            u32::from(c)
        )));
    }
    Ok(())
}

/// An `https://` URL with a host. Plain `http://` only to this machine's loopback address
/// (a channel served locally, as in the refresh tests): vendor channels are HTTPS, and the
/// fetch client refuses anything else anyway.
fn source_url_ok(url: &str) -> bool {
    if url.chars().any(char::is_control) {
        return false;
    }
    let scheme = |s: &str| {
        url.get(..s.len())
            .filter(|p| p.eq_ignore_ascii_case(s))
            .map(|_| &url[s.len()..])
    };
    let (https, rest) = match (scheme("https://"), scheme("http://")) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        (None, None) => return false,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    if host.is_empty() {
        return false;
    }
    https
        || host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}

/// A stored record with its identity and history state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashRecord {
    pub id: String,
    pub record: NewRecord,
    pub family: String,
    pub status: RecordStatus,
    pub valid_from: DateTime<Utc>,
    pub valid_until: Option<DateTime<Utc>>,
    /// When the record entered the store: strictly increasing in commit order and at least
    /// [`ADDED_AT_STEP_MICROS`] apart between records, so feeds can number what a record
    /// adds within that step and "added after" never splits or repeats a record.
    pub added_at: DateTime<Utc>,
    pub cert_revoked_at: Option<DateTime<Utc>>,
    /// Whether the record's HMAC verified when it was read. A record that fails is never
    /// reported as a known vendor release.
    pub integrity_ok: bool,
}

/// Microseconds between the `added_at` of records entered one after the other (at least).
pub const ADDED_AT_STEP_MICROS: i64 = 8;

/// The form names are compared in: Unicode NFC after full case folding (of the canonical
/// decomposition), so `Élan.exe`, `élan.exe` and `E\u{301}lan.exe` are one name. Computed
/// here and stored, because SQLite's `lower()` folds ASCII only.
pub fn name_key(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization as _;
    // ASCII is its own decomposition and composition, and folds as lower case: most names,
    // and an import computes the key of every record more than once.
    if name.is_ascii() {
        return name.to_ascii_lowercase();
    }
    let folded = caseless::default_case_fold_str(&name.nfd().collect::<String>());
    folded.nfc().collect()
}

/// The executable name with its version replaced by a placeholder, so that
/// `go1.23.4.windows-amd64.msi` and `go1.23.5.windows-amd64.msi` are one executable while
/// `putty.exe` keeps its name across versions. In [`name_key`] form: names match
/// case-insensitively.
pub fn family_of(executable_name: &str, version: &str) -> String {
    let name = name_key(executable_name);
    let version = name_key(version.trim());
    let version = version.strip_prefix('v').unwrap_or(&version);
    if version.is_empty() {
        return name;
    }
    name.replace(version, "{version}")
}

/// RFC 3339 UTC with a `Z` suffix, the one timestamp format of the API.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Signs and verifies the HMAC that every vendor record carries. The HMAC covers the
/// identifying fields and the hashes; history state (status, validity) is not covered
/// because the store legitimately moves it.
#[derive(Clone)]
pub struct RecordSigner {
    key: Vec<u8>,
}

impl fmt::Debug for RecordSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RecordSigner(<redacted>)")
    }
}

impl RecordSigner {
    pub fn new(key: &[u8]) -> Self {
        Self { key: key.to_vec() }
    }

    fn mac(&self, id: &str, r: &NewRecord) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        // Length-prefixed fields: no two different records share an encoding.
        let fields: [&str; 11] = [
            "knowngood-record-v1",
            id,
            &r.vendor,
            &r.executable_name,
            &r.version,
            r.platform.as_str(),
            r.arch.as_str(),
            &r.hash_sha256,
            r.hash_sha1.as_deref().unwrap_or(""),
            r.hash_md5.as_deref().unwrap_or(""),
            &r.source_url,
        ];
        for f in fields {
            mac.update(&(f.len() as u64).to_be_bytes());
            mac.update(f.as_bytes());
        }
        mac.update(&[u8::from(r.download_verified)]);
        // The size joined the record later: appended only when known, so the HMACs of
        // records stored without one (all those written before) still verify unchanged.
        if let Some(size) = r.size {
            mac.update(b"\x01size");
            mac.update(&size.to_be_bytes());
        }
        mac
    }

    /// Hex HMAC-SHA256 over the record's identifying fields and hashes.
    pub fn sign(&self, id: &str, r: &NewRecord) -> String {
        hex::encode(self.mac(id, r).finalize().into_bytes())
    }

    /// Constant-time check of a stored HMAC: its bytes, as the store keeps them.
    pub fn verify(&self, id: &str, r: &NewRecord, stored: &[u8]) -> bool {
        self.mac(id, r).verify_slice(stored).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> NewRecord {
        NewRecord {
            vendor: "Go".into(),
            executable_name: "go1.23.4.windows-amd64.msi".into(),
            version: "1.23.4".into(),
            platform: Platform::Windows,
            arch: Arch::Amd64,
            hash_sha256: "AB".repeat(32),
            hash_sha1: None,
            hash_md5: None,
            source_url: "https://go.dev/dl/go1.23.4.windows-amd64.msi".into(),
            download_verified: false,
            sig_signer: None,
            sig_issuer: None,
            sig_serial: None,
            sig_thumbprint: None,
            size: None,
        }
    }

    #[test]
    fn family_replaces_the_version() {
        assert_eq!(
            family_of("go1.23.4.windows-amd64.msi", "1.23.4"),
            family_of("go1.23.5.windows-amd64.msi", "1.23.5")
        );
        assert_eq!(family_of("putty.exe", "0.81"), "putty.exe");
        assert_eq!(
            family_of("node-v20.1.0-x64.msi", "v20.1.0"),
            "node-v{version}-x64.msi"
        );
        assert_eq!(family_of("requests (pypi)", "2.32.3"), "requests (pypi)");
        assert_eq!(
            family_of("Élan.exe", "1.0"),
            family_of("E\u{301}LAN.exe", "2.0")
        );
    }

    #[test]
    fn name_key_folds_case_and_normalisation() {
        let key = name_key("Élan.exe");
        assert_eq!(key, "\u{e9}lan.exe");
        assert_eq!(name_key("élan.exe"), key);
        assert_eq!(name_key("E\u{301}lan.exe"), key);
        assert_eq!(name_key("e\u{301}LAN.EXE"), key);
        assert_eq!(name_key("ΣΊΣΥΦΟΣ.exe"), name_key("σίσυφος.exe"));
        assert_eq!(name_key("ПРОГРАММА.exe"), name_key("программа.exe"));
        assert_eq!(name_key("Straße.exe"), name_key("STRASSE.exe"));
        assert_eq!(name_key("PuTTY.exe"), "putty.exe");
        assert_ne!(name_key("elan.exe"), key);
    }

    #[test]
    fn name_key_of_ascii_is_the_full_folding() {
        use unicode_normalization::UnicodeNormalization as _;
        let every: String = (0u8..128).map(char::from).collect();
        let full: String = caseless::default_case_fold_str(&every.nfd().collect::<String>())
            .nfc()
            .collect();
        assert_eq!(name_key(&every), full);
        // One non-ASCII character takes the full path for the whole name.
        assert_eq!(name_key("KELVIN-\u{212A}.exe"), "kelvin-k.exe");
    }

    #[test]
    fn validate_lowercases_and_rejects_bad_digests() {
        let r = sample().validate().unwrap();
        assert_eq!(r.hash_sha256, "ab".repeat(32));
        let mut bad = sample();
        bad.hash_sha1 = Some("zz".into());
        assert!(bad.validate().is_err());
        let mut bad = sample();
        bad.executable_name = "a\0b".into();
        assert!(bad.validate().is_err());
        let mut bad = sample();
        bad.version = "1.0\n".into();
        assert!(bad.validate().is_err());
    }

    #[test]
    fn validate_rejects_deceptive_names_and_plain_http() {
        assert!(sample().validate().is_ok());
        let mut ok = sample();
        ok.executable_name = "Élan-σίσυφος.exe".into();
        ok.source_url = "HTTPS://example.org/a".into();
        assert!(ok.clone().validate().is_ok());
        // Plain HTTP to this machine only.
        for url in [
            "http://127.0.0.1:8080/a",
            "http://localhost/a",
            "http://[::1]:81/a",
        ] {
            ok.source_url = url.into();
            assert!(ok.clone().validate().is_ok(), "{url}");
        }
        let mut long = sample();
        long.executable_name = "a".repeat(MAX_NAME_BYTES);
        assert!(long.clone().validate().is_ok());
        long.executable_name.push('a');
        assert!(long.validate().is_err());
        // 128 two-byte characters: 256 bytes.
        let mut wide = sample();
        wide.version = "é".repeat(128);
        assert!(wide.validate().is_err());
        for c in [
            '\u{202A}', '\u{202E}', '\u{2066}', '\u{2069}', '\u{200B}', '\u{200D}', '\u{FEFF}',
            '\u{7}', '\u{85}',
        ] {
            for field in 0..3 {
                let mut bad = sample();
                let text = format!("a{c}b");
                match field {
                    0 => bad.executable_name = text,
                    1 => bad.version = text,
                    _ => bad.vendor = text,
                }
                assert!(
                    bad.validate().is_err(),
                    "U+{:04X} in field {field}",
                    u32::from(c)
                );
            }
        }
        for url in [
            "http://go.dev/dl/x.msi",
            "ftp://go.dev/x",
            "go.dev/x",
            "https://",
            "https:///x",
            "https://go.dev/a\nb",
            "",
            "http://127.0.0.1.example.com/x",
            "http://user@example.com/x",
            "http://10.0.0.1/x",
        ] {
            let mut bad = sample();
            bad.source_url = url.into();
            assert!(bad.validate().is_err(), "{url:?}");
        }
    }

    #[test]
    fn hmac_detects_any_change_to_signed_fields() {
        let signer = RecordSigner::new(b"secret");
        let r = sample().validate().unwrap();
        let tag = hex::decode(signer.sign("id1", &r)).unwrap();
        assert!(signer.verify("id1", &r, &tag));
        assert!(!signer.verify("id2", &r, &tag));
        let mut changed = r.clone();
        changed.hash_sha256 = "cd".repeat(32);
        assert!(!signer.verify("id1", &changed, &tag));
        let mut changed = r.clone();
        changed.version = "1.23.5".into();
        assert!(!signer.verify("id1", &changed, &tag));
        assert!(!RecordSigner::new(b"other").verify("id1", &r, &tag));
        assert!(!signer.verify("id1", &r, &tag[..31]), "a truncated tag");
        assert!(!signer.verify("id1", &r, b""));
    }

    #[test]
    fn size_is_signed_when_known_and_older_hmacs_still_verify() {
        let signer = RecordSigner::new(b"secret");
        let r = sample().validate().unwrap();
        // The tag of a record without a size is the one computed before sizes existed
        // (length-prefixed fields then the download_verified byte, nothing more).
        assert_eq!(
            signer.sign("id1", &r),
            "47b81b9e0c30ea5cb33376729859ee983df14bf4fa8a5792907f4e045f812116"
        );
        let sized = NewRecord {
            size: Some(1234),
            ..r.clone()
        };
        let tag = hex::decode(signer.sign("id1", &sized)).unwrap();
        assert!(signer.verify("id1", &sized, &tag));
        for other in [None, Some(1235), Some(0)] {
            let changed = NewRecord {
                size: other,
                ..r.clone()
            };
            assert!(!signer.verify("id1", &changed, &tag), "{other:?}");
        }
        let too_big = NewRecord {
            size: Some(u64::MAX),
            ..r
        };
        assert!(too_big.validate().is_err());
    }
}
