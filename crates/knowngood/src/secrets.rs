//! The server's secrets: the HMAC secret (API keys and record integrity), the RSA key that
//! signs JWTs, and the Ed25519 key that signs the transparency log.
//!
//! On first start they are generated into `<data dir>/secrets/` (directory 0700, files
//! 0600). For several replicas they come from the config file or the environment instead,
//! the same on every replica. Their `Debug` output never shows them.

use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use anyhow::{Context, Result, bail};
use aws_lc_rs::encoding::AsDer;
use base64::Engine;

use crate::config::SecretSettings;

pub(crate) struct Secrets {
    pub(crate) hmac: Vec<u8>,
    /// PKCS#8 DER of the RSA keys for JWTs: the first signs, the others (retired by a
    /// rotation less than a day ago) still verify.
    pub(crate) jwt_rsa_pkcs8: Vec<Vec<u8>>,
    /// Seed of the Ed25519 signing key.
    pub(crate) log_ed25519: [u8; 32],
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secrets(<redacted>)")
    }
}

const HMAC_FILE: &str = "hmac.key";
const JWT_FILE: &str = "jwt-rsa.pem";
const LOG_FILE: &str = "translog-ed25519.key";
const RETIRED_DIR: &str = "jwt-retired";
/// Retired JWT keys verify for a day: far longer than the 15 minutes a token lives.
const RETIRED_KEEP_SECS: i64 = 86_400;

/// Rotates the JWT signing key in the data dir: the current key moves to `jwt-retired/`
/// (it keeps verifying tokens already issued), a new key takes its place. Replicas pick the
/// new key up when restarted.
pub(crate) fn rotate_jwt_key(data_dir: &Path) -> Result<String> {
    let dir = data_dir.join("secrets");
    let current = dir.join(JWT_FILE);
    if !current.exists() {
        bail!("no JWT key at {} to rotate", current.display());
    }
    let retired = dir.join(RETIRED_DIR);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&retired)?;
    let stamp = chrono::Utc::now().timestamp();
    fs::rename(&current, retired.join(format!("retired-{stamp}.pem")))?;
    load_or_create(&current, generate_rsa_pem)?;
    Ok(current.display().to_string())
}

/// PEMs of keys retired less than a day ago (by the time in their file name).
fn recently_retired(dir: &Path) -> Result<Vec<String>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let now = chrono::Utc::now().timestamp();
    let mut pems = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let retired_at = path.file_name().and_then(|n| n.to_str()).and_then(|n| {
            n.strip_prefix("retired-")?
                .strip_suffix(".pem")?
                .parse::<i64>()
                .ok()
        });
        if retired_at.is_some_and(|t| now - t < RETIRED_KEEP_SECS) {
            pems.push(fs::read_to_string(&path)?);
        }
    }
    Ok(pems)
}

impl Secrets {
    /// Settings win over files; whatever is still missing is generated into the data dir.
    pub(crate) fn load_or_generate(data_dir: &Path, settings: &SecretSettings) -> Result<Self> {
        let dir = data_dir.join("secrets");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("creating {}", dir.display()))?;

        let hmac = match &settings.hmac_secret {
            Some(hex_secret) => decode_hex(hex_secret, "hmac_secret")?,
            None => load_or_create(&dir.join(HMAC_FILE), || {
                Ok(hex::encode(rand::random::<[u8; 32]>()))
            })
            .and_then(|text| decode_hex(&text, HMAC_FILE))?,
        };
        if hmac.len() < 32 {
            bail!("the HMAC secret must be at least 32 bytes (64 hex characters)");
        }

        let jwt_pem = match &settings.jwt_private_key_pem {
            Some(pem) => pem.clone(),
            None => load_or_create(&dir.join(JWT_FILE), generate_rsa_pem)?,
        };
        let mut jwt_pems = vec![jwt_pem];
        jwt_pems.extend(settings.jwt_retired_keys_pem.iter().cloned());
        jwt_pems.extend(recently_retired(&dir.join(RETIRED_DIR))?);
        let jwt_rsa_pkcs8 = jwt_pems
            .iter()
            .map(|pem| {
                let der = pem_body(pem, "PRIVATE KEY")?;
                aws_lc_rs::rsa::KeyPair::from_pkcs8(&der).map_err(|_| {
                    anyhow::anyhow!("a JWT key is not a valid RSA PKCS#8 private key")
                })?;
                Ok(der)
            })
            .collect::<Result<Vec<_>>>()?;

        let log = match &settings.log_signing_key {
            Some(hex_seed) => decode_hex(hex_seed, "log_signing_key")?,
            None => load_or_create(&dir.join(LOG_FILE), || {
                Ok(hex::encode(rand::random::<[u8; 32]>()))
            })
            .and_then(|text| decode_hex(&text, LOG_FILE))?,
        };
        let log_ed25519: [u8; 32] = log
            .try_into()
            .map_err(|_| anyhow::anyhow!("the log signing key must be a 32-byte Ed25519 seed"))?;

        Ok(Self {
            hmac,
            jwt_rsa_pkcs8,
            log_ed25519,
        })
    }

    /// Base64 of the raw Ed25519 public key of the transparency log.
    pub(crate) fn log_public_key(&self) -> String {
        let public = ed25519_dalek::SigningKey::from_bytes(&self.log_ed25519).verifying_key();
        base64::engine::general_purpose::STANDARD.encode(public.to_bytes())
    }
}

fn decode_hex(text: &str, what: &str) -> Result<Vec<u8>> {
    hex::decode(text.trim()).with_context(|| format!("{what} must be hex"))
}

/// Reads the file, or creates it with 0600 permissions from `make` (never overwriting a
/// file that appeared meanwhile).
fn load_or_create(path: &Path, make: impl FnOnce() -> Result<String>) -> Result<String> {
    match fs::read_to_string(path) {
        Ok(text) => return Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    let text = make()?;
    let tmp = path.with_extension("tmp");
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    // A hard link fails if another process created the file first; then we use theirs.
    match fs::hard_link(&tmp, path) {
        Ok(()) => {
            fs::remove_file(&tmp)?;
            tracing::info!(path = %path.display(), "generated secret");
            Ok(text)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            fs::remove_file(&tmp)?;
            Ok(fs::read_to_string(path)?)
        }
        Err(e) => Err(e).with_context(|| format!("writing {}", path.display())),
    }
}

fn generate_rsa_pem() -> Result<String> {
    let key = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048)
        .map_err(|_| anyhow::anyhow!("RSA key generation failed"))?;
    let der = key
        .as_der()
        .map_err(|_| anyhow::anyhow!("RSA key encoding failed"))?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in b64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    Ok(pem)
}

fn pem_body(pem: &str, label: &str) -> Result<Vec<u8>> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = pem
        .find(&begin)
        .with_context(|| format!("expected a PEM block {begin}"))?;
    let stop = pem[start..]
        .find(&end)
        .with_context(|| format!("expected {end}"))?;
    let body: String = pem[start + begin.len()..start + stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .context("PEM body is not base64")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn generated_once_with_private_permissions_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = Secrets::load_or_generate(dir.path(), &SecretSettings::default()).unwrap();
        for file in [HMAC_FILE, JWT_FILE, LOG_FILE] {
            let mode = fs::metadata(dir.path().join("secrets").join(file))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }
        let again = Secrets::load_or_generate(dir.path(), &SecretSettings::default()).unwrap();
        assert_eq!(first.hmac, again.hmac);
        assert_eq!(first.jwt_rsa_pkcs8, again.jwt_rsa_pkcs8);
        assert_eq!(first.log_ed25519, again.log_ed25519);
        assert_eq!(format!("{first:?}"), "Secrets(<redacted>)");

        // Rotation: a new signing key, the old one still verifies.
        rotate_jwt_key(dir.path()).unwrap();
        let rotated = Secrets::load_or_generate(dir.path(), &SecretSettings::default()).unwrap();
        assert_eq!(rotated.jwt_rsa_pkcs8.len(), 2);
        assert_ne!(rotated.jwt_rsa_pkcs8[0], first.jwt_rsa_pkcs8[0]);
        assert_eq!(rotated.jwt_rsa_pkcs8[1], first.jwt_rsa_pkcs8[0]);
    }

    #[test]
    fn settings_override_files() {
        let dir = tempfile::tempdir().unwrap();
        let settings = SecretSettings {
            hmac_secret: Some("ab".repeat(32)),
            log_signing_key: Some("cd".repeat(32)),
            ..SecretSettings::default()
        };
        let s = Secrets::load_or_generate(dir.path(), &settings).unwrap();
        assert_eq!(s.hmac, vec![0xab; 32]);
        assert_eq!(s.log_ed25519, [0xcd; 32]);
        let short = SecretSettings {
            hmac_secret: Some("ab".into()),
            ..SecretSettings::default()
        };
        assert!(Secrets::load_or_generate(dir.path(), &short).is_err());
    }
}
