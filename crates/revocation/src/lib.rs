//! Certificate revocation lists (RFC 5280 section 5): parsing, verification against the
//! issuing CA's certificate, and serial look-up. Pure: no I/O, no clock; the checker in
//! `jobs::revocation` fetches, caches and records.
//!
//! What a CRL must pass before anything is read from it ([`Crl::verify`]):
//! - its issuer name equals the CA certificate's subject (DER-equal), and when both carry a
//!   key identifier (the CRL's authorityKeyIdentifier, the CA's subjectKeyIdentifier) they
//!   are equal;
//! - the CA may sign CRLs: a keyUsage extension, when present, holds cRLSign (RFC 5280
//!   4.2.1.3: without the extension every use is allowed);
//! - the signature verifies with the CA's public key (RSA PKCS#1 v1.5 with SHA-1/256/384/512,
//!   ECDSA P-256/P-384, Ed25519), over the to-be-signed bytes exactly as received.
//!
//! [`parse`] refuses delta CRLs (deltaCRLIndicator): only full CRLs are used. It also
//! refuses CRLs with a critical extension it does not understand (RFC 5280 5.2), such as
//! an indirect CRL's certificateIssuer entries. Serials are compared as unsigned integers:
//! both sides are reduced to lowercase hex without leading zero bytes ([`serial_key`]).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;

use aws_lc_rs::signature::{self, UnparsedPublicKey, VerificationAlgorithm};
use base64::Engine as _;
use chrono::{DateTime, Utc};
use der::asn1::{AnyRef, ObjectIdentifier};
use der::{Decode, Encode};
use x509_cert::Certificate;
use x509_cert::crl::CertificateList;
use x509_cert::ext::Extension;
use x509_cert::ext::pkix::crl::{CrlNumber as CrlNumberExt, CrlReason};
use x509_cert::ext::pkix::{AuthorityKeyIdentifier, KeyUsage, SubjectKeyIdentifier};
use x509_cert::time::Time;

/// Why a CRL cannot be used. The text names what was wrong, never key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrlError {
    #[error("malformed CRL: {0}")]
    Malformed(String),
    #[error("delta CRL (deltaCRLIndicator): only full CRLs are used")]
    Delta,
    #[error("unsupported critical CRL extension {0}")]
    UnsupportedCritical(String),
    #[error("CRL issuer {crl} is not the CA certificate's subject {ca}")]
    IssuerMismatch { crl: String, ca: String },
    #[error("CRL authority key identifier does not match the CA's subject key identifier")]
    KeyIdMismatch,
    #[error("the CA certificate's keyUsage does not allow CRL signing (cRLSign)")]
    NotCrlSigner,
    #[error("CRL signature does not verify with the CA's key")]
    BadSignature,
    #[error("unsupported CRL signature algorithm {0}")]
    UnsupportedAlgorithm(String),
    #[error("CA certificate unreadable: {0}")]
    BadIssuerCertificate(String),
}

/// RFC 5280 section 5.3.1 reason codes, named as there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    Unspecified,
    KeyCompromise,
    CaCompromise,
    AffiliationChanged,
    Superseded,
    CessationOfOperation,
    CertificateHold,
    RemoveFromCrl,
    PrivilegeWithdrawn,
    AaCompromise,
}

impl Reason {
    pub const ALL: [Reason; 10] = [
        Reason::Unspecified,
        Reason::KeyCompromise,
        Reason::CaCompromise,
        Reason::AffiliationChanged,
        Reason::Superseded,
        Reason::CessationOfOperation,
        Reason::CertificateHold,
        Reason::RemoveFromCrl,
        Reason::PrivilegeWithdrawn,
        Reason::AaCompromise,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Unspecified => "unspecified",
            Reason::KeyCompromise => "keyCompromise",
            Reason::CaCompromise => "cACompromise",
            Reason::AffiliationChanged => "affiliationChanged",
            Reason::Superseded => "superseded",
            Reason::CessationOfOperation => "cessationOfOperation",
            Reason::CertificateHold => "certificateHold",
            Reason::RemoveFromCrl => "removeFromCRL",
            Reason::PrivilegeWithdrawn => "privilegeWithdrawn",
            Reason::AaCompromise => "aACompromise",
        }
    }

    pub fn parse(name: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// Lower is more severe: a compromised key (the signer's or a CA's) first, a
    /// suspension last.
    pub fn severity(self) -> u8 {
        match self {
            Reason::KeyCompromise | Reason::CaCompromise | Reason::AaCompromise => 0,
            Reason::Unspecified | Reason::PrivilegeWithdrawn => 1,
            Reason::AffiliationChanged | Reason::Superseded | Reason::CessationOfOperation => 2,
            Reason::CertificateHold | Reason::RemoveFromCrl => 3,
        }
    }

    fn from_code(code: CrlReason) -> Reason {
        match code {
            CrlReason::Unspecified => Reason::Unspecified,
            CrlReason::KeyCompromise => Reason::KeyCompromise,
            CrlReason::CaCompromise => Reason::CaCompromise,
            CrlReason::AffiliationChanged => Reason::AffiliationChanged,
            CrlReason::Superseded => Reason::Superseded,
            CrlReason::CessationOfOperation => Reason::CessationOfOperation,
            CrlReason::CertificateHold => Reason::CertificateHold,
            CrlReason::RemoveFromCRL => Reason::RemoveFromCrl,
            CrlReason::PrivilegeWithdrawn => Reason::PrivilegeWithdrawn,
            CrlReason::AaCompromise => Reason::AaCompromise,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A CRL number: an unsigned integer of any size, kept as big-endian bytes without
/// leading zeros so that comparison is numeric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrlNumber(Vec<u8>);

impl CrlNumber {
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
        CrlNumber(bytes[first..].to_vec())
    }

    /// Lowercase hex (`00` for zero).
    pub fn to_hex(&self) -> String {
        if self.0.is_empty() {
            "00".into()
        } else {
            hex::encode(&self.0)
        }
    }

    pub fn from_hex(text: &str) -> Option<Self> {
        let text = if text.len() % 2 == 1 {
            format!("0{text}")
        } else {
            text.to_string()
        };
        hex::decode(text).ok().map(|b| Self::from_bytes(&b))
    }
}

impl Ord for CrlNumber {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for CrlNumber {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One revoked serial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's revocationDate.
    pub revoked_at: DateTime<Utc>,
    /// An absent reasonCode is `unspecified`.
    pub reason: Reason,
}

/// A parsed full CRL; read it only after [`Crl::verify`] succeeded.
#[derive(Clone)]
pub struct Crl {
    /// Issuer DN, RFC 4514 form.
    pub issuer: String,
    pub this_update: DateTime<Utc>,
    pub next_update: Option<DateTime<Utc>>,
    pub number: Option<CrlNumber>,
    issuer_der: Vec<u8>,
    authority_key_id: Option<Vec<u8>>,
    entries: HashMap<String, Entry>,
    tbs: Vec<u8>,
    algorithm: ObjectIdentifier,
    signature: Vec<u8>,
}

impl fmt::Debug for Crl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Crl")
            .field("issuer", &self.issuer)
            .field("this_update", &self.this_update)
            .field("next_update", &self.next_update)
            .field("number", &self.number)
            .field("entries", &self.entries.len())
            .finish_non_exhaustive()
    }
}

/// A certificate serial as compared: lowercase hex of the unsigned value, without leading
/// zero bytes (a DER sign byte included); `00` for zero.
pub fn serial_key(bytes: &[u8]) -> String {
    CrlNumber::from_bytes(bytes).to_hex()
}

/// The same form for a serial written in hex (any case, any leading zeros).
pub fn serial_key_hex(text: &str) -> Option<String> {
    CrlNumber::from_hex(&text.to_ascii_lowercase()).map(|n| n.to_hex())
}

const OID_CRL_NUMBER: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.20");
const OID_DELTA_INDICATOR: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.27");
const OID_ISSUING_DP: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.28");
const OID_AUTHORITY_KEY_ID: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.35");
const OID_REASON_CODE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.21");
const OID_INVALIDITY_DATE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.24");

fn malformed(what: &str, e: impl fmt::Display) -> CrlError {
    CrlError::Malformed(format!("{what}: {e}"))
}

fn utc(t: &Time) -> Result<DateTime<Utc>, CrlError> {
    let d = t.to_unix_duration();
    let secs = i64::try_from(d.as_secs()).map_err(|e| malformed("time", e))?;
    DateTime::from_timestamp(secs, 0).ok_or_else(|| CrlError::Malformed("time out of range".into()))
}

/// DER, or PEM (`-----BEGIN X509 CRL-----`), to DER.
fn der_of(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, CrlError> {
    const BEGIN: &str = "-----BEGIN X509 CRL-----";
    const END: &str = "-----END X509 CRL-----";
    let trimmed = bytes.trim_ascii_start();
    if !trimmed.starts_with(b"-----BEGIN") {
        return Ok(std::borrow::Cow::Borrowed(bytes));
    }
    let text = std::str::from_utf8(trimmed).map_err(|e| malformed("PEM", e))?;
    let body = text
        .strip_prefix(BEGIN)
        .and_then(|rest| rest.split_once(END))
        .map(|(body, _)| body)
        .ok_or_else(|| CrlError::Malformed("PEM without an X509 CRL block".into()))?;
    let b64: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map(std::borrow::Cow::Owned)
        .map_err(|e| malformed("PEM base64", e))
}

/// The TLV bytes of the first element inside the outer SEQUENCE: the to-be-signed part
/// exactly as received (a re-encoding could differ and break the signature).
fn tbs_bytes(der: &[u8]) -> Result<Vec<u8>, CrlError> {
    let outer = AnyRef::from_der(der).map_err(|e| malformed("CertificateList", e))?;
    let inner = outer.value();
    let tbs = AnyRef::decode(&mut der::SliceReader::new(inner).map_err(|e| malformed("TBS", e))?)
        .map_err(|e| malformed("TBSCertList", e))?;
    let len = usize::try_from(tbs.encoded_len().map_err(|e| malformed("TBS", e))?)
        .map_err(|e| malformed("TBS", e))?;
    inner
        .get(..len)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| CrlError::Malformed("TBSCertList is truncated".into()))
}

fn check_critical(ext: &Extension, known: &[ObjectIdentifier]) -> Result<(), CrlError> {
    if ext.critical && !known.contains(&ext.extn_id) {
        return Err(CrlError::UnsupportedCritical(ext.extn_id.to_string()));
    }
    Ok(())
}

/// Parses a CRL (DER or PEM). Delta CRLs and CRLs with unknown critical extensions are
/// refused; nothing is trusted until [`Crl::verify`].
pub fn parse(bytes: &[u8]) -> Result<Crl, CrlError> {
    let der = der_of(bytes)?;
    let list = CertificateList::from_der(&der).map_err(|e| malformed("CertificateList", e))?;
    let tbs = tbs_bytes(&der)?;
    let t = &list.tbs_cert_list;
    if t.signature.oid != list.signature_algorithm.oid {
        return Err(CrlError::Malformed(
            "inner and outer signature algorithms differ".into(),
        ));
    }
    let mut number = None;
    let mut authority_key_id = None;
    for ext in t.crl_extensions.iter().flatten() {
        if ext.extn_id == OID_DELTA_INDICATOR {
            return Err(CrlError::Delta);
        }
        check_critical(ext, &[OID_ISSUING_DP, OID_CRL_NUMBER])?;
        match ext.extn_id {
            OID_CRL_NUMBER => {
                let n = CrlNumberExt::from_der(ext.extn_value.as_bytes())
                    .map_err(|e| malformed("cRLNumber", e))?;
                number = Some(CrlNumber::from_bytes(n.0.as_bytes()));
            }
            OID_AUTHORITY_KEY_ID => {
                let aki = AuthorityKeyIdentifier::from_der(ext.extn_value.as_bytes())
                    .map_err(|e| malformed("authorityKeyIdentifier", e))?;
                authority_key_id = aki.key_identifier.map(|k| k.as_bytes().to_vec());
            }
            _ => {}
        }
    }
    let mut entries = HashMap::new();
    for revoked in t.revoked_certificates.iter().flatten() {
        let mut reason = Reason::Unspecified;
        for ext in revoked.crl_entry_extensions.iter().flatten() {
            check_critical(ext, &[OID_REASON_CODE, OID_INVALIDITY_DATE])?;
            if ext.extn_id == OID_REASON_CODE {
                let code = CrlReason::from_der(ext.extn_value.as_bytes())
                    .map_err(|e| malformed("reasonCode", e))?;
                reason = Reason::from_code(code);
            }
        }
        entries.insert(
            serial_key(revoked.serial_number.as_bytes()),
            Entry {
                revoked_at: utc(&revoked.revocation_date)?,
                reason,
            },
        );
    }
    Ok(Crl {
        issuer: t.issuer.to_string(),
        this_update: utc(&t.this_update)?,
        next_update: t.next_update.as_ref().map(utc).transpose()?,
        number,
        issuer_der: t.issuer.to_der().map_err(|e| malformed("issuer", e))?,
        authority_key_id,
        entries,
        tbs,
        algorithm: list.signature_algorithm.oid,
        signature: list
            .signature
            .as_bytes()
            .ok_or_else(|| CrlError::Malformed("signature has unused bits".into()))?
            .to_vec(),
    })
}

const RSA_SHA1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.5");
const RSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
const RSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.12");
const RSA_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.13");
const ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const ECDSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");
const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
const P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");

/// The verification algorithm for a signature algorithm and the key's curve (if EC).
fn algorithm(
    sig: ObjectIdentifier,
    curve: Option<ObjectIdentifier>,
) -> Result<&'static dyn VerificationAlgorithm, CrlError> {
    Ok(match (sig, curve) {
        (RSA_SHA1, _) => &signature::RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY,
        (RSA_SHA256, _) => &signature::RSA_PKCS1_2048_8192_SHA256,
        (RSA_SHA384, _) => &signature::RSA_PKCS1_2048_8192_SHA384,
        (RSA_SHA512, _) => &signature::RSA_PKCS1_2048_8192_SHA512,
        (ECDSA_SHA256, Some(P256)) => &signature::ECDSA_P256_SHA256_ASN1,
        (ECDSA_SHA256, Some(P384)) => &signature::ECDSA_P384_SHA256_ASN1,
        (ECDSA_SHA384, Some(P256)) => &signature::ECDSA_P256_SHA384_ASN1,
        (ECDSA_SHA384, Some(P384)) => &signature::ECDSA_P384_SHA384_ASN1,
        (ED25519, _) => &signature::ED25519,
        (other, curve) => {
            return Err(CrlError::UnsupportedAlgorithm(match curve {
                Some(c) => format!("{other} on curve {c}"),
                None => other.to_string(),
            }));
        }
    })
}

impl Crl {
    /// Checks that the CA certificate (DER) issued this CRL and may sign CRLs, and that the
    /// signature verifies with its key.
    pub fn verify(&self, ca_der: &[u8]) -> Result<(), CrlError> {
        let ca = Certificate::from_der(ca_der)
            .map_err(|e| CrlError::BadIssuerCertificate(e.to_string()))?;
        let tbs = &ca.tbs_certificate;
        let subject = tbs
            .subject
            .to_der()
            .map_err(|e| CrlError::BadIssuerCertificate(e.to_string()))?;
        if subject != self.issuer_der {
            return Err(CrlError::IssuerMismatch {
                crl: self.issuer.clone(),
                ca: tbs.subject.to_string(),
            });
        }
        let bad = |e: der::Error| CrlError::BadIssuerCertificate(e.to_string());
        if let (Some(aki), Some((_, ski))) = (
            &self.authority_key_id,
            tbs.get::<SubjectKeyIdentifier>().map_err(bad)?,
        ) && aki.as_slice() != ski.0.as_bytes()
        {
            return Err(CrlError::KeyIdMismatch);
        }
        if let Some((_, usage)) = tbs.get::<KeyUsage>().map_err(bad)?
            && !usage.crl_sign()
        {
            return Err(CrlError::NotCrlSigner);
        }
        let spki = &tbs.subject_public_key_info;
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.decode_as::<ObjectIdentifier>().ok());
        let alg = algorithm(self.algorithm, curve)?;
        let key = spki
            .subject_public_key
            .as_bytes()
            .ok_or_else(|| CrlError::BadIssuerCertificate("public key has unused bits".into()))?;
        UnparsedPublicKey::new(alg, key)
            .verify(&self.tbs, &self.signature)
            .map_err(|_| CrlError::BadSignature)
    }

    /// The entry for a serial in [`serial_key`] form.
    pub fn entry(&self, serial: &str) -> Option<&Entry> {
        self.entries.get(serial)
    }

    /// Revoked serials listed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
