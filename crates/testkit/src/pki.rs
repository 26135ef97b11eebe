//! Code-signing PKI for revocation tests, made at test time: CAs and leaf certificates
//! (rcgen), CRLs signed by a CA, PE files signed with `osslsigncode` (Debian package), and
//! a loopback CRL server with ETags, outages and oversized answers.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
pub use rcgen::RevocationReason;
use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, CrlDistributionPoint,
    DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyIdMethod, KeyPair,
    KeyUsagePurpose, RevokedCertParams, SerialNumber,
};

fn offset(t: DateTime<Utc>) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(t.timestamp()).unwrap()
}

fn ca_params(name: &str, usages: Vec<KeyUsagePurpose>) -> CertificateParams {
    let mut params = CertificateParams::default();
    // The default name holds a CN already, which would fix its position first.
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Knowngood Tests");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = usages;
    params
}

/// A certificate authority: its certificate and what signs its certificates and CRLs.
pub struct TestCa {
    /// Subject DN, RFC 4514 (`CN=<name>,O=Knowngood Tests`).
    pub name: String,
    pub der: Vec<u8>,
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A code-signing certificate issued by a [`TestCa`].
pub struct Leaf {
    pub der: Vec<u8>,
    pub pem: String,
    pub key_pem: String,
    /// Lowercase hex SHA-1 of the DER.
    pub thumbprint: String,
    /// Lowercase hex, without a sign byte.
    pub serial: String,
    /// Subject DN, RFC 4514.
    pub subject: String,
    pub issuer: String,
}

impl TestCa {
    /// A CA allowed to sign certificates and CRLs.
    pub fn new(name: &str) -> Self {
        let params = ca_params(
            name,
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign],
        );
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Self {
            name: format!("CN={name},O=Knowngood Tests"),
            der: cert.der().to_vec(),
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A CA whose certificate allows certificate signing only (no cRLSign); its key
    /// still signs CRLs here, which a checker must refuse.
    pub fn without_crl_sign(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let cert = ca_params(name, vec![KeyUsagePurpose::KeyCertSign])
            .self_signed(&key)
            .unwrap();
        let signing = ca_params(
            name,
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign],
        );
        Self {
            name: format!("CN={name},O=Knowngood Tests"),
            der: cert.der().to_vec(),
            pem: cert.pem(),
            issuer: Issuer::new(signing, key),
        }
    }

    /// A CA of the same name and certificate whose CRLs are signed by another key.
    pub fn impostor(&self) -> Self {
        let params = ca_params(
            self.name
                .strip_prefix("CN=")
                .and_then(|n| n.split(',').next())
                .unwrap(),
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign],
        );
        Self {
            name: self.name.clone(),
            der: self.der.clone(),
            pem: self.pem.clone(),
            issuer: Issuer::new(params, KeyPair::generate().unwrap()),
        }
    }

    /// A code-signing certificate with `serial` and a CRL distribution point at `crl_url`.
    pub fn leaf(&self, common_name: &str, serial: &[u8], crl_url: &str) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Example Software");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.serial_number = Some(SerialNumber::from_slice(serial));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        params.crl_distribution_points = vec![CrlDistributionPoint {
            uris: vec![crl_url.to_string()],
        }];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let first = serial.iter().position(|&b| b != 0).unwrap_or(serial.len());
        Leaf {
            der: cert.der().to_vec(),
            pem: cert.pem(),
            key_pem: key.serialize_pem(),
            thumbprint: sha1_hex(cert.der()),
            serial: hex(&serial[first..]),
            subject: format!("CN={common_name},O=Example Software"),
            issuer: self.name.clone(),
        }
    }

    /// A full CRL numbered `number`, issued at `this_update`, valid for 7 days, listing
    /// `(serial, revocation time, reason)`.
    pub fn crl(
        &self,
        number: u64,
        this_update: DateTime<Utc>,
        revoked: &[(&[u8], DateTime<Utc>, Option<RevocationReason>)],
    ) -> Vec<u8> {
        CertificateRevocationListParams {
            this_update: offset(this_update),
            next_update: offset(this_update + chrono::Duration::days(7)),
            crl_number: SerialNumber::from(number),
            issuing_distribution_point: None,
            revoked_certs: revoked
                .iter()
                .map(|(serial, at, reason)| RevokedCertParams {
                    serial_number: SerialNumber::from_slice(serial),
                    revocation_time: offset(*at),
                    reason_code: *reason,
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: KeyIdMethod::Sha256,
        }
        .signed_by(&self.issuer)
        .unwrap()
        .der()
        .to_vec()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha1_hex(bytes: &[u8]) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, bytes);
    hex(d.as_ref())
}

/// Whether osslsigncode can run; if not, says so where `cargo test` shows it.
pub fn have_osslsigncode(test: &str) -> bool {
    let ok = Command::new("osslsigncode")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: osslsigncode is not installed (apt-get install osslsigncode)"
        );
    }
    ok
}

/// A minimal valid PE32+ image (headers and one `.text` section holding `ret`), made
/// distinct by `salt` in its section bytes.
pub fn build_pe(salt: u8) -> Vec<u8> {
    fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
        buf[at..at + bytes.len()].copy_from_slice(bytes);
    }
    let mut pe = vec![0u8; 0x400];
    put(&mut pe, 0, b"MZ");
    put(&mut pe, 0x3c, &0x40u32.to_le_bytes());
    put(&mut pe, 0x40, b"PE\0\0");
    let coff = 0x44;
    put(&mut pe, coff, &0x8664u16.to_le_bytes());
    put(&mut pe, coff + 2, &1u16.to_le_bytes());
    put(&mut pe, coff + 16, &240u16.to_le_bytes());
    put(&mut pe, coff + 18, &0x0022u16.to_le_bytes());
    let opt = 0x58;
    put(&mut pe, opt, &0x20bu16.to_le_bytes());
    put(&mut pe, opt + 4, &0x200u32.to_le_bytes());
    put(&mut pe, opt + 16, &0x1000u32.to_le_bytes());
    put(&mut pe, opt + 20, &0x1000u32.to_le_bytes());
    put(&mut pe, opt + 24, &0x1_4000_0000u64.to_le_bytes());
    put(&mut pe, opt + 32, &0x1000u32.to_le_bytes());
    put(&mut pe, opt + 36, &0x200u32.to_le_bytes());
    put(&mut pe, opt + 40, &6u16.to_le_bytes());
    put(&mut pe, opt + 48, &6u16.to_le_bytes());
    put(&mut pe, opt + 56, &0x2000u32.to_le_bytes());
    put(&mut pe, opt + 60, &0x200u32.to_le_bytes());
    put(&mut pe, opt + 68, &3u16.to_le_bytes());
    for (i, v) in [0x10_0000u64, 0x1000, 0x10_0000, 0x1000].iter().enumerate() {
        put(&mut pe, opt + 72 + 8 * i, &v.to_le_bytes());
    }
    put(&mut pe, opt + 108, &16u32.to_le_bytes());
    let section = opt + 240;
    put(&mut pe, section, b".text\0\0\0");
    put(&mut pe, section + 8, &0x10u32.to_le_bytes());
    put(&mut pe, section + 12, &0x1000u32.to_le_bytes());
    put(&mut pe, section + 16, &0x200u32.to_le_bytes());
    put(&mut pe, section + 20, &0x200u32.to_le_bytes());
    put(&mut pe, section + 36, &0x6000_0020u32.to_le_bytes());
    pe[0x200] = 0xc3;
    pe[0x201] = salt;
    pe
}

/// Signs `pe` with `leaf` (its chain: the leaf then the CA) using osslsigncode.
pub fn sign_pe(dir: &Path, pe: &[u8], leaf: &Leaf, ca: &TestCa) -> Vec<u8> {
    let chain = format!("{}{}", leaf.pem, ca.pem);
    osslsign(dir, pe, &leaf.key_pem, &chain, false)
}

/// Runs `osslsigncode sign` over `pe` with a key and the certificate chain it ships (PEM,
/// in the order given), in files of `dir`; `nest` adds a signature to the file's own rather
/// than replacing them. The signed file's bytes.
pub fn osslsign(dir: &Path, pe: &[u8], key_pem: &str, chain_pem: &str, nest: bool) -> Vec<u8> {
    let (key, chain) = (dir.join("key.pem"), dir.join("chain.pem"));
    let (unsigned, signed) = (dir.join("in.exe"), dir.join("out.exe"));
    std::fs::write(&key, key_pem).unwrap();
    std::fs::write(&chain, chain_pem).unwrap();
    std::fs::write(&unsigned, pe).unwrap();
    let _ = std::fs::remove_file(&signed);
    let mut cmd = Command::new("osslsigncode");
    cmd.arg("sign");
    if nest {
        cmd.arg("-nest");
    }
    let out = cmd
        .args(["-h", "sha256", "-n", "knowngood test", "-certs"])
        .arg(&chain)
        .arg("-key")
        .arg(&key)
        .arg("-in")
        .arg(&unsigned)
        .arg("-out")
        .arg(&signed)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "osslsigncode failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&signed).unwrap()
}

#[derive(Default)]
struct Served {
    /// Path -> (body, ETag).
    files: HashMap<String, (Vec<u8>, String)>,
    /// Every path answers this status while set.
    down: Option<StatusCode>,
    /// Path -> bytes of zeros streamed without a Content-Length.
    endless: HashMap<String, u64>,
    requests: HashMap<String, u32>,
    not_modified: HashMap<String, u32>,
    user_agents: Vec<String>,
}

/// A CA's CRL distribution point on loopback (plain HTTP, as CDPs normally are). Answers
/// `If-None-Match` with 304 when the ETag matches. Clones share their state.
#[derive(Clone, Default)]
pub struct CrlServer {
    served: Arc<Mutex<Served>>,
    pub base: String,
}

impl CrlServer {
    pub async fn start() -> Self {
        let mut server = Self::default();
        let state = server.clone();
        let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
            let state = state.clone();
            async move { state.answer(&uri, &headers) }
        });
        let addr = crate::vendor::serve_router(app).await;
        server.base = format!("http://{addr}");
        server
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Serves `body` at `path` with a new ETag.
    pub fn set(&self, path: &str, body: Vec<u8>) {
        let etag = format!("\"{}\"", &sha1_hex(&body)[..16]);
        let mut served = self.served.lock().unwrap();
        served.endless.remove(path);
        served.files.insert(path.to_string(), (body, etag));
    }

    /// Streams `bytes` zero bytes at `path` (chunked, no length announced).
    pub fn endless(&self, path: &str, bytes: u64) {
        self.served
            .lock()
            .unwrap()
            .endless
            .insert(path.to_string(), bytes);
    }

    /// Every path answers `status` (`None`: back up).
    pub fn down(&self, status: Option<u16>) {
        self.served.lock().unwrap().down = status.map(|s| StatusCode::from_u16(s).unwrap());
    }

    /// Requests for `path` so far, and how many were answered 304.
    pub fn requests(&self, path: &str) -> (u32, u32) {
        let s = self.served.lock().unwrap();
        (
            s.requests.get(path).copied().unwrap_or(0),
            s.not_modified.get(path).copied().unwrap_or(0),
        )
    }

    /// The User-Agent of every request so far.
    pub fn user_agents(&self) -> Vec<String> {
        self.served.lock().unwrap().user_agents.clone()
    }

    fn answer(&self, uri: &Uri, headers: &HeaderMap) -> Response {
        let path = uri.path().to_string();
        let mut s = self.served.lock().unwrap();
        *s.requests.entry(path.clone()).or_default() += 1;
        let agent = headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        s.user_agents.push(agent);
        if let Some(status) = s.down {
            return status.into_response();
        }
        if let Some(&bytes) = s.endless.get(&path) {
            let chunk = bytes::Bytes::from(vec![0u8; 64 << 10]);
            let chunks = bytes.div_ceil(64 << 10);
            let stream = futures::stream::iter(
                (0..chunks).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
            );
            return Body::from_stream(stream).into_response();
        }
        let Some((body, etag)) = s.files.get(&path).cloned() else {
            return StatusCode::NOT_FOUND.into_response();
        };
        let matches = headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == etag);
        if matches {
            *s.not_modified.entry(path).or_default() += 1;
            return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
        }
        (
            [
                (header::ETAG, etag),
                (header::CONTENT_TYPE, "application/pkix-crl".to_string()),
            ],
            body,
        )
            .into_response()
    }
}
