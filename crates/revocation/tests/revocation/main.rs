//! CRLs made here with rcgen under test CAs, checked as the revocation checker checks them:
//! revoked and not revoked serials, holds and removeFromCRL, a CRL signed by the wrong key,
//! a CA without cRLSign, delta CRLs, PEM, and malformed, truncated and mutated DER
//! (a bounded property test that runs with `cargo test`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, DistinguishedName,
    DnType, IsCa, Issuer, KeyIdMethod, KeyPair, KeyUsagePurpose, RevocationReason,
    RevokedCertParams, SerialNumber,
};
use revocation::{CrlError, CrlNumber, Reason, parse, serial_key, serial_key_hex};
use time::{Duration, OffsetDateTime};

fn ca_params(name: &str, usages: Vec<KeyUsagePurpose>) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Knowngood Tests");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = usages;
    params
}

/// A CA: its certificate (DER) and the issuer that signs its CRLs.
struct Ca {
    der: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let params = ca_params(
        name,
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign],
    );
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Ca {
        der: cert.der().to_vec(),
        issuer: Issuer::new(params, key),
    }
}

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

fn crl(ca: &Ca, number: u64, revoked: &[(&[u8], Option<RevocationReason>)]) -> Vec<u8> {
    CertificateRevocationListParams {
        this_update: at(T0),
        next_update: at(T0) + Duration::days(7),
        crl_number: SerialNumber::from(number),
        issuing_distribution_point: None,
        revoked_certs: revoked
            .iter()
            .map(|(serial, reason)| RevokedCertParams {
                serial_number: SerialNumber::from_slice(serial),
                revocation_time: at(T0 - 3600),
                reason_code: *reason,
                invalidity_date: None,
            })
            .collect(),
        key_identifier_method: KeyIdMethod::Sha256,
    }
    .signed_by(&ca.issuer)
    .unwrap()
    .der()
    .to_vec()
}

const SERIAL: &[u8] = &[0x8a, 0x5e, 0x01];

#[test]
fn a_listed_serial_is_revoked_with_its_date_and_reason() {
    let ca = ca("Test CA");
    let der = crl(&ca, 1, &[(SERIAL, Some(RevocationReason::KeyCompromise))]);
    let crl = parse(&der).unwrap();
    crl.verify(&ca.der).unwrap();
    let entry = crl.entry("8a5e01").unwrap();
    assert_eq!(entry.reason, Reason::KeyCompromise);
    assert_eq!(entry.revoked_at.timestamp(), T0 - 3600);
    assert_eq!(crl.this_update.timestamp(), T0);
    assert_eq!(crl.next_update.unwrap().timestamp(), T0 + 7 * 86400);
    assert_eq!(crl.number, Some(CrlNumber::from_bytes(&[1])));
    assert_eq!(crl.issuer, "CN=Test CA,O=Knowngood Tests");
}

#[test]
fn an_unlisted_serial_is_not_revoked_and_an_absent_reason_is_unspecified() {
    let ca = ca("Test CA");
    let der = crl(&ca, 1, &[(&[0x01, 0x02], None)]);
    let crl = parse(&der).unwrap();
    crl.verify(&ca.der).unwrap();
    assert!(crl.entry("8a5e01").is_none());
    assert_eq!(crl.entry("0102").unwrap().reason, Reason::Unspecified);
}

#[test]
fn serials_compare_as_unsigned_integers() {
    // 0x8a needs a DER sign byte; the store keeps serials without it.
    assert_eq!(serial_key(&[0x00, 0x8a, 0x5e, 0x01]), "8a5e01");
    assert_eq!(serial_key_hex("008A5E01").as_deref(), Some("8a5e01"));
    assert_eq!(serial_key_hex("a5e01").as_deref(), Some("0a5e01"));
    let ca = ca("Test CA");
    let crl = parse(&crl(&ca, 1, &[(SERIAL, None)])).unwrap();
    assert!(crl.entry(&serial_key_hex("008a5e01").unwrap()).is_some());
}

#[test]
fn hold_and_remove_from_crl_are_read_as_such() {
    let ca = ca("Test CA");
    let der = crl(
        &ca,
        2,
        &[
            (SERIAL, Some(RevocationReason::CertificateHold)),
            (&[0x07], Some(RevocationReason::RemoveFromCrl)),
        ],
    );
    let crl = parse(&der).unwrap();
    crl.verify(&ca.der).unwrap();
    assert_eq!(crl.entry("8a5e01").unwrap().reason, Reason::CertificateHold);
    assert_eq!(crl.entry("07").unwrap().reason, Reason::RemoveFromCrl);
}

#[test]
fn a_crl_signed_by_another_key_does_not_verify() {
    let ca = ca("Test CA");
    // Same name, different key: the name matches, the signature cannot.
    let impostor = ca_params(
        "Test CA",
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign],
    );
    let impostor = Ca {
        der: Vec::new(),
        issuer: Issuer::new(impostor, KeyPair::generate().unwrap()),
    };
    let der = crl(&impostor, 1, &[(SERIAL, None)]);
    let err = parse(&der).unwrap().verify(&ca.der).unwrap_err();
    // rcgen writes the authority key identifier, so the key id already differs.
    assert!(
        matches!(err, CrlError::KeyIdMismatch | CrlError::BadSignature),
        "{err}"
    );
}

#[test]
fn a_tampered_crl_does_not_verify() {
    let ca = ca("Test CA");
    let mut der = crl(&ca, 1, &[(SERIAL, None)]);
    // Flip a byte of the revoked serial inside the signed part.
    let at = der.windows(3).position(|w| w == SERIAL).unwrap();
    der[at + 2] ^= 0x01;
    let crl = parse(&der).unwrap();
    assert_eq!(crl.verify(&ca.der), Err(CrlError::BadSignature));
}

#[test]
fn a_ca_without_crl_sign_is_refused() {
    // The CA certificate allows certificate signing only; the same key signs the CRL.
    let key = KeyPair::generate().unwrap();
    let cert_only = ca_params("Test CA", vec![KeyUsagePurpose::KeyCertSign]);
    let cert = cert_only.self_signed(&key).unwrap();
    let signer = Ca {
        der: Vec::new(),
        issuer: Issuer::new(
            ca_params("Test CA", vec![KeyUsagePurpose::CrlSign]),
            KeyPair::from_pem(&key.serialize_pem()).unwrap(),
        ),
    };
    let der = crl(&signer, 1, &[(SERIAL, None)]);
    assert_eq!(
        parse(&der).unwrap().verify(cert.der()),
        Err(CrlError::NotCrlSigner)
    );
}

#[test]
fn a_crl_of_another_issuer_is_refused() {
    let (a, b) = (ca("CA A"), ca("CA B"));
    let der = crl(&b, 1, &[(SERIAL, None)]);
    assert!(matches!(
        parse(&der).unwrap().verify(&a.der),
        Err(CrlError::IssuerMismatch { .. })
    ));
}

#[test]
fn pem_is_read_like_der() {
    let ca = ca("Test CA");
    let der = crl(&ca, 3, &[(SERIAL, None)]);
    let pem = format!(
        "-----BEGIN X509 CRL-----\n{}\n-----END X509 CRL-----\n",
        base64_lines(&der)
    );
    let crl = parse(pem.as_bytes()).unwrap();
    crl.verify(&ca.der).unwrap();
    assert!(crl.entry("8a5e01").is_some());
}

fn base64_lines(der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    text.as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn crl_numbers_order_numerically() {
    let n = |b: &[u8]| CrlNumber::from_bytes(b);
    assert!(n(&[0x01, 0x00]) > n(&[0xff]));
    assert!(n(&[0x00, 0x02]) > n(&[0x01]));
    assert_eq!(n(&[0x00, 0x05]), n(&[0x05]));
    assert_eq!(CrlNumber::from_hex("0100"), Some(n(&[1, 0])));
    assert_eq!(n(&[1, 0]).to_hex(), "0100");
}

#[test]
fn malformed_and_truncated_der_is_an_error_not_a_panic() {
    let ca = ca("Test CA");
    let der = crl(&ca, 1, &[(SERIAL, None), (&[0x02], None)]);
    for cut in [0, 1, 2, 10, der.len() / 2, der.len() - 1] {
        assert!(
            matches!(parse(&der[..cut]), Err(CrlError::Malformed(_))),
            "truncated at {cut}"
        );
    }
    let mut trailing = der.clone();
    trailing.push(0);
    assert!(parse(&trailing).is_err(), "trailing bytes");
    for junk in [
        &b"not a crl"[..],
        b"-----BEGIN X509 CRL-----\n!!\n-----END X509 CRL-----",
        b"<html>",
    ] {
        assert!(matches!(parse(junk), Err(CrlError::Malformed(_))));
    }
}

proptest! {
    // 512 cases per `cargo test`; CI runs more with CRL_FUZZ_CASES.
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic the parser.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = parse(&bytes);
    }

    /// A valid CRL with bytes changed, removed or inserted either fails to parse or
    /// verify, or still says what the CA signed.
    #[test]
    fn mutated_crls_never_panic_and_never_verify_falsely(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6)
    ) {
        let (ca, der) = fixture();
        let mut bytes = der.clone();
        for (index, value, kind) in edits {
            if bytes.is_empty() { break; }
            let i = index.index(bytes.len());
            match kind {
                0 => bytes[i] = value,
                1 => { bytes.remove(i); }
                _ => bytes.insert(i, value),
            }
        }
        if let Ok(crl) = parse(&bytes)
            && crl.verify(&ca.der).is_ok()
        {
            // Only an unchanged signed part verifies.
            prop_assert!(crl.entry("8a5e01").is_some());
            prop_assert_eq!(crl.len(), 2);
        }
    }
}

fn fuzz_cases() -> u32 {
    std::env::var("CRL_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

/// One CA and CRL for every property case (key generation is slow).
fn fixture() -> &'static (Ca, Vec<u8>) {
    static FIXTURE: std::sync::OnceLock<(Ca, Vec<u8>)> = std::sync::OnceLock::new();
    FIXTURE.get_or_init(|| {
        let ca = ca("Fuzz CA");
        let der = crl(
            &ca,
            9,
            &[
                (SERIAL, Some(RevocationReason::Superseded)),
                (&[0x02], None),
            ],
        );
        (ca, der)
    })
}

/// `der` with one more CRL extension (the signature no longer matters: parsing refuses
/// first).
fn with_extension(der: &[u8], oid: &str, critical: bool, value: &[u8]) -> Vec<u8> {
    use der::{Decode, Encode};
    let mut list = x509_cert::crl::CertificateList::from_der(der).unwrap();
    list.tbs_cert_list
        .crl_extensions
        .get_or_insert_with(Vec::new)
        .push(x509_cert::ext::Extension {
            extn_id: der::asn1::ObjectIdentifier::new_unwrap(oid),
            critical,
            extn_value: der::asn1::OctetString::new(value.to_vec()).unwrap(),
        });
    list.to_der().unwrap()
}

#[test]
fn delta_crls_and_unknown_critical_extensions_are_refused() {
    let ca = ca("Test CA");
    let der = crl(&ca, 1, &[(SERIAL, None)]);
    // deltaCRLIndicator (BaseCRLNumber 1).
    let delta = with_extension(&der, "2.5.29.27", true, &[0x02, 0x01, 0x01]);
    assert_eq!(parse(&delta).unwrap_err(), CrlError::Delta);
    let unknown = with_extension(&der, "1.2.3.4.5", true, &[0x05, 0x00]);
    assert!(matches!(
        parse(&unknown),
        Err(CrlError::UnsupportedCritical(_))
    ));
    // A non-critical unknown extension is fine to parse (the signature then fails).
    let harmless = with_extension(&der, "1.2.3.4.5", false, &[0x05, 0x00]);
    assert_eq!(
        parse(&harmless).unwrap().verify(&ca.der),
        Err(CrlError::BadSignature)
    );
}
