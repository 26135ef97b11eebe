//! Timestamps and records for tests.

use chrono::{DateTime, Utc};
use model::{Arch, NewRecord, Platform};

pub fn t(s: &str) -> DateTime<Utc> {
    s.parse()
        .unwrap_or_else(|e| panic!("bad timestamp {s:?}: {e}"))
}

/// Where every test's clock starts: a Monday morning, far from a day boundary.
pub fn start_time() -> DateTime<Utc> {
    t("2025-03-10T08:00:00Z")
}

/// Deterministic, random-looking lowercase hex of `len` characters.
pub fn hex_of(seed: u64, len: usize) -> String {
    let mut x = seed ^ ((len as u64) << 56) ^ 0x9e37_79b9_7f4a_7c15;
    let mut out = String::new();
    while out.len() < len {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.push_str(&format!("{:016x}", z ^ (z >> 31)));
    }
    out.truncate(len);
    out
}

/// A record with SHA-256, SHA-1 and MD5 derived from `seed`.
pub fn rec(
    vendor: &str,
    name: &str,
    version: &str,
    platform: Platform,
    arch: Arch,
    seed: u64,
) -> NewRecord {
    NewRecord {
        vendor: vendor.into(),
        executable_name: name.into(),
        version: version.into(),
        platform,
        arch,
        hash_sha256: hex_of(seed, 64),
        hash_sha1: Some(hex_of(seed, 40)),
        hash_md5: Some(hex_of(seed, 32)),
        source_url: format!(
            "https://downloads.example/{}/{name}",
            vendor.replace(' ', "-")
        ),
        download_verified: true,
        sig_signer: None,
        sig_issuer: None,
        sig_serial: None,
        sig_thumbprint: None,
        size: None,
    }
}

pub fn putty(version: &str, arch: Arch, seed: u64) -> NewRecord {
    rec("PuTTY", "putty.exe", version, Platform::Windows, arch, seed)
}

/// The Go MSI for windows/amd64 of `version`.
pub fn go(version: &str, seed: u64) -> NewRecord {
    rec(
        "Go",
        &format!("go{version}.windows-amd64.msi"),
        version,
        Platform::Windows,
        Arch::Amd64,
        seed,
    )
}

/// A PyPI package, addressed as `name (pypi)`; manifest-only: SHA-256 alone.
pub fn pypi(name: &str, version: &str, seed: u64) -> NewRecord {
    let mut r = rec(
        "pypi",
        &format!("{name} (pypi)"),
        version,
        Platform::Universal,
        Arch::Universal,
        seed,
    );
    r.hash_sha1 = None;
    r.hash_md5 = None;
    r.download_verified = false;
    r.source_url = format!("https://files.pythonhosted.org/packages/{name}-{version}.tar.gz");
    r
}

/// Percent-encodes a query value.
pub fn q(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// RFC 4648 base32 (padding ignored), as a TOTP enrolment hands out its seed; panics on
/// anything else.
pub fn base32_decode(text: &str) -> Vec<u8> {
    data_encoding::BASE32_NOPAD
        .decode(text.trim_end_matches('=').as_bytes())
        .unwrap_or_else(|e| panic!("not base32: {e}"))
}
