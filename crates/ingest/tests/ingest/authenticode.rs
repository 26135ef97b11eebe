//! Authenticode extraction from PE files built here and signed with `osslsigncode`
//! (Debian package `osslsigncode`) under a test CA made with rcgen.
//!
//! Tests that need a signature are marked ignored, not passed, when osslsigncode did not run
//! where the tests were built; the unsigned, non-PE and malformed cases need nothing.

use std::path::Path;

use axum::Router;
use axum::routing::get;
use ingest::{AuthenticodeError, SignatureCapture, SignerInfo, download_and_hash, extract_signer};
use rand::{Rng, RngCore};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, CrlDistributionPoint, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SerialNumber,
};
use sha1::Digest as _;

const CRL_URL: &str = "http://crl.knowngood.test/ca.crl";

/// Offset of the security data directory entry in the headers `build_pe` writes.
fn security_entry_at(pe32plus: bool) -> usize {
    // DOS header (0x40) + "PE\0\0" + COFF header (20) + data directories start + 4 * 8.
    0x58 + if pe32plus { 112 } else { 96 } + 32
}

/// A minimal valid PE image: headers and one `.text` section holding `ret`.
fn build_pe(pe32plus: bool) -> Vec<u8> {
    fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
        buf[at..at + bytes.len()].copy_from_slice(bytes);
    }
    let mut pe = vec![0u8; 0x400];
    put(&mut pe, 0, b"MZ");
    put(&mut pe, 0x3c, &0x40u32.to_le_bytes());
    put(&mut pe, 0x40, b"PE\0\0");

    let optional_size: u16 = if pe32plus { 240 } else { 224 };
    let coff = 0x44;
    let machine: u16 = if pe32plus { 0x8664 } else { 0x14c };
    put(&mut pe, coff, &machine.to_le_bytes());
    put(&mut pe, coff + 2, &1u16.to_le_bytes()); // one section
    put(&mut pe, coff + 16, &optional_size.to_le_bytes());
    put(&mut pe, coff + 18, &0x0022u16.to_le_bytes()); // executable, large-address aware

    let opt = 0x58;
    put(
        &mut pe,
        opt,
        &(if pe32plus { 0x20bu16 } else { 0x10b }).to_le_bytes(),
    );
    put(&mut pe, opt + 4, &0x200u32.to_le_bytes()); // SizeOfCode
    put(&mut pe, opt + 16, &0x1000u32.to_le_bytes()); // AddressOfEntryPoint
    put(&mut pe, opt + 20, &0x1000u32.to_le_bytes()); // BaseOfCode
    if pe32plus {
        put(&mut pe, opt + 24, &0x1_4000_0000u64.to_le_bytes()); // ImageBase
    } else {
        put(&mut pe, opt + 28, &0x40_0000u32.to_le_bytes()); // ImageBase
    }
    put(&mut pe, opt + 32, &0x1000u32.to_le_bytes()); // SectionAlignment
    put(&mut pe, opt + 36, &0x200u32.to_le_bytes()); // FileAlignment
    put(&mut pe, opt + 40, &6u16.to_le_bytes()); // MajorOperatingSystemVersion
    put(&mut pe, opt + 48, &6u16.to_le_bytes()); // MajorSubsystemVersion
    put(&mut pe, opt + 56, &0x2000u32.to_le_bytes()); // SizeOfImage
    put(&mut pe, opt + 60, &0x200u32.to_le_bytes()); // SizeOfHeaders
    put(&mut pe, opt + 68, &3u16.to_le_bytes()); // console subsystem
    let (stack_at, count_at) = if pe32plus { (72, 108) } else { (72, 92) };
    if pe32plus {
        for (i, v) in [0x10_0000u64, 0x1000, 0x10_0000, 0x1000].iter().enumerate() {
            put(&mut pe, opt + stack_at + 8 * i, &v.to_le_bytes());
        }
    } else {
        for (i, v) in [0x10_0000u32, 0x1000, 0x10_0000, 0x1000].iter().enumerate() {
            put(&mut pe, opt + stack_at + 4 * i, &v.to_le_bytes());
        }
    }
    put(&mut pe, opt + count_at, &16u32.to_le_bytes()); // NumberOfRvaAndSizes

    let section = opt + optional_size as usize;
    put(&mut pe, section, b".text\0\0\0");
    put(&mut pe, section + 8, &0x10u32.to_le_bytes()); // VirtualSize
    put(&mut pe, section + 12, &0x1000u32.to_le_bytes()); // VirtualAddress
    put(&mut pe, section + 16, &0x200u32.to_le_bytes()); // SizeOfRawData
    put(&mut pe, section + 20, &0x200u32.to_le_bytes()); // PointerToRawData
    put(&mut pe, section + 36, &0x6000_0020u32.to_le_bytes()); // code, execute, read
    pe[0x200] = 0xc3; // ret
    pe
}

/// A code-signing certificate under a test CA, and the fields extraction must report.
struct TestSigner {
    key_pem: String,
    chain_pem: String,
    expected: SignerInfo,
}

fn test_ca() -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::default();
    // The default name holds a CN already, which would fix its position first.
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Knowngood Tests");
    params
        .distinguished_name
        .push(DnType::CommonName, "Knowngood Test CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// `serial` starts with a byte >= 0x80 so that its DER carries a 00 sign byte.
fn test_signer(
    ca: &CertifiedIssuer<'static, KeyPair>,
    common_name: &str,
    serial: &[u8],
    ca_first: bool,
) -> TestSigner {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    // The default name holds a CN already, which would fix its position first.
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CountryName, "US");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Example, Inc.");
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.serial_number = Some(SerialNumber::from_slice(serial));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
    params.crl_distribution_points = vec![CrlDistributionPoint {
        uris: vec![CRL_URL.into()],
    }];
    let cert = params.signed_by(&key, ca).unwrap();
    let chain_pem = if ca_first {
        format!("{}{}", ca.pem(), cert.pem())
    } else {
        format!("{}{}", cert.pem(), ca.pem())
    };
    TestSigner {
        key_pem: key.serialize_pem(),
        chain_pem,
        expected: SignerInfo {
            sig_signer: format!("CN={common_name},O=Example\\, Inc.,C=US"),
            sig_issuer: "CN=Knowngood Test CA,O=Knowngood Tests".into(),
            sig_serial: hex::encode(serial),
            sig_thumbprint: hex::encode(sha1::Sha1::digest(cert.der())),
            crl_urls: vec![CRL_URL.into()],
            // osslsigncode ships the chain given, CA included.
            issuer_cert: Some(ca.der().to_vec()),
            nested: Vec::new(),
        },
    }
}

/// Signs `input` as `signer` (with `nest`, adding to rather than replacing its signatures).
fn sign(dir: &Path, input: &[u8], signer: &TestSigner, nest: bool) -> Vec<u8> {
    testkit::pki::osslsign(dir, input, &signer.key_pem, &signer.chain_pem, nest)
}

struct Fixture {
    dir: tempfile::TempDir,
    first: TestSigner,
    second: TestSigner,
}

fn fixture() -> Fixture {
    let ca = test_ca();
    Fixture {
        dir: tempfile::tempdir().unwrap(),
        first: test_signer(
            &ca,
            "Example Code Signer",
            &[0x8a, 0x5e, 0x01, 0x02, 0xff],
            false,
        ),
        second: test_signer(&ca, "Second Signer", &[0x42, 0x00, 0x07], true),
    }
}

/// The (offset, size) of the certificate table, read from the known header layout.
fn table_of(pe: &[u8], pe32plus: bool) -> (usize, usize) {
    let at = security_entry_at(pe32plus);
    let word = |i: usize| u32::from_le_bytes(pe[i..i + 4].try_into().unwrap()) as usize;
    (word(at), word(at + 4))
}

testkit::needs_osslsigncode! {
    #[test]
    fn signed_pe_reports_the_certificate_that_signed_it() {
        let f = fixture();
        for pe32plus in [true, false] {
            let signed = sign(f.dir.path(), &build_pe(pe32plus), &f.first, false);
            assert_eq!(extract_signer(&signed), Ok(Some(f.first.expected.clone())));
        }
    }
}

testkit::needs_osslsigncode! {
    #[test]
    fn signer_is_found_by_issuer_and_serial_not_by_certificate_order() {
        let f = fixture();
        // `second` lists the CA before its own certificate.
        let signed = sign(f.dir.path(), &build_pe(true), &f.second, false);
        let signer = extract_signer(&signed).unwrap().unwrap();
        assert_eq!(signer, f.second.expected);
        assert_eq!(signer.sig_serial, "420007");
    }
}

testkit::needs_osslsigncode! {
    #[test]
    fn nested_signature_is_listed_under_the_primary() {
        let f = fixture();
        let once = sign(f.dir.path(), &build_pe(true), &f.first, false);
        let twice = sign(f.dir.path(), &once, &f.second, true);
        let mut expected = f.first.expected.clone();
        expected.nested = vec![f.second.expected.clone()];
        assert_eq!(extract_signer(&twice), Ok(Some(expected)));
    }
}

testkit::needs_osslsigncode! {
    #[test]
    fn further_win_certificate_entries_are_listed_under_the_primary() {
        let f = fixture();
        let unsigned = build_pe(true);
        let a = sign(f.dir.path(), &unsigned, &f.first, false);
        let b = sign(f.dir.path(), &unsigned, &f.second, false);
        let (a_at, a_len) = table_of(&a, true);
        let (b_at, b_len) = table_of(&b, true);
        assert_eq!(a_len % 8, 0, "osslsigncode pads each entry to 8 bytes");

        // One table holding both entries, like Debian's signed shim.
        let mut both = a[..a_at].to_vec();
        both.extend_from_slice(&a[a_at..a_at + a_len]);
        both.extend_from_slice(&b[b_at..b_at + b_len]);
        let size_at = security_entry_at(true) + 4;
        both[size_at..size_at + 4].copy_from_slice(&((a_len + b_len) as u32).to_le_bytes());

        let mut expected = f.first.expected.clone();
        expected.nested = vec![f.second.expected.clone()];
        assert_eq!(extract_signer(&both), Ok(Some(expected)));
    }
}

testkit::needs_osslsigncode! {
    #[test]
    fn streaming_in_small_chunks_gives_the_same_signer() {
        let f = fixture();
        let signed = sign(f.dir.path(), &build_pe(true), &f.first, false);
        for chunk in [1, 7, 64, 4096] {
            let mut capture = SignatureCapture::new(1 << 20);
            for piece in signed.chunks(chunk) {
                capture.push(piece);
            }
            assert_eq!(
                capture.finish(),
                Ok(Some(f.first.expected.clone())),
                "{chunk}"
            );
        }
        let (_, table_len) = table_of(&signed, true);
        let mut tight = SignatureCapture::new(table_len - 1);
        tight.push(&signed);
        assert!(matches!(
            tight.finish(),
            Err(AuthenticodeError::TableTooLarge { .. })
        ));
    }
}

#[test]
fn unsigned_pe_and_non_pe_files_have_no_signer() {
    for pe32plus in [true, false] {
        assert_eq!(extract_signer(&build_pe(pe32plus)), Ok(None));
    }
    let mut dos = build_pe(true);
    dos[0x40..0x44].copy_from_slice(b"NE\0\0"); // MZ without a PE header
    assert_eq!(extract_signer(&dos), Ok(None));
    let elf = [&b"\x7fELF\x02\x01\x01\0"[..], &[0u8; 120]].concat();
    assert_eq!(extract_signer(&elf), Ok(None));
    assert_eq!(extract_signer(b"just some text, not a program"), Ok(None));
}

testkit::needs_osslsigncode! {
    #[test]
    fn truncated_signed_pe_is_an_error_at_every_length() {
        let f = fixture();
        let signed = sign(f.dir.path(), &build_pe(true), &f.first, false);
        for cut in 2..signed.len() {
            assert!(
                extract_signer(&signed[..cut]).is_err(),
                "cut at {cut} of {}",
                signed.len()
            );
        }
    }
}

#[test]
fn corrupt_headers_and_tables_are_errors() {
    let mut bad_magic = build_pe(true);
    bad_magic[0x58] = 0x99;
    assert!(matches!(
        extract_signer(&bad_magic),
        Err(AuthenticodeError::MalformedPe(_))
    ));

    // A table that points past the end of the file.
    let mut past_end = build_pe(true);
    let at = security_entry_at(true);
    past_end[at..at + 4].copy_from_slice(&0x400u32.to_le_bytes());
    past_end[at + 4..at + 8].copy_from_slice(&0x100u32.to_le_bytes());
    assert!(matches!(
        extract_signer(&past_end),
        Err(AuthenticodeError::MalformedPe(_))
    ));

    // A table whose entry claims more bytes than the table has.
    let mut entry = past_end.clone();
    entry.extend_from_slice(&0xffff_fff0u32.to_le_bytes());
    entry.extend_from_slice(&0x0200u16.to_le_bytes());
    entry.extend_from_slice(&2u16.to_le_bytes());
    entry.resize(0x500, 0);
    assert!(matches!(
        extract_signer(&entry),
        Err(AuthenticodeError::MalformedSignature(_))
    ));

    // A well-sized entry whose content is not DER.
    entry[0x400..0x404].copy_from_slice(&0x100u32.to_le_bytes());
    assert!(matches!(
        extract_signer(&entry),
        Err(AuthenticodeError::MalformedSignature(_))
    ));
}

testkit::needs_osslsigncode! {
    #[test]
    fn damaged_signatures_never_panic() {
        let f = fixture();
        let once = sign(f.dir.path(), &build_pe(true), &f.first, false);
        let twice = sign(f.dir.path(), &once, &f.second, true);
        let (at, len) = table_of(&twice, true);

        // Every byte of the table inverted in turn: an error or a (partial) answer, no panic.
        let mut errors = 0;
        for i in at..at + len {
            let mut damaged = twice.clone();
            damaged[i] ^= 0xff;
            errors += usize::from(extract_signer(&damaged).is_err());
        }
        // Bytes inside keys, signature values and digests decode fine when damaged; structure
        // bytes must not.
        assert!(
            errors > len / 4,
            "only {errors} of {len} damaged bytes were noticed"
        );

        // Random damage anywhere, and random bytes behind an MZ header.
        let mut rng = rand::rng();
        for _ in 0..300 {
            let mut damaged = twice.clone();
            for _ in 0..rng.random_range(1..8) {
                let i = rng.random_range(0..damaged.len());
                damaged[i] = rng.random();
            }
            let _ = extract_signer(&damaged);

            let mut noise = vec![0u8; rng.random_range(2..600)];
            rng.fill_bytes(&mut noise);
            noise[..2].copy_from_slice(b"MZ");
            let _ = extract_signer(&noise);
        }
    }
}

testkit::needs_osslsigncode! {
    #[tokio::test]
    async fn download_reads_the_signer_of_a_served_pe() {
        let f = fixture();
        let signed = sign(f.dir.path(), &build_pe(true), &f.first, false);
        let mut corrupt = signed.clone();
        let (at, _) = table_of(&corrupt, true);
        corrupt[at + 8] = 0x04; // the PKCS#7 SEQUENCE is no longer one

        let (good, bad) = (signed.clone(), corrupt.clone());
        let app = Router::new()
            .route("/signed.exe", get(move || async move { good }))
            .route("/corrupt.exe", get(move || async move { bad }));
        let base = format!("http://{}", crate::common::serve(app).await);
        let client = crate::common::client();

        let got = download_and_hash(
            &client,
            &format!("{base}/signed.exe"),
            &crate::common::limits(),
            &model::SystemClock,
        )
        .await
        .unwrap();
        assert_eq!(
            got.digests.sha256,
            hex::encode(sha2::Sha256::digest(&signed))
        );
        assert_eq!(got.size_bytes, signed.len() as u64);
        assert_eq!(got.pe_signer, Some(f.first.expected.clone()));
        assert_eq!(got.pe_signer_error, None);

        // A broken signature still yields the hashes, with the reason the signer is missing.
        let got = download_and_hash(
            &client,
            &format!("{base}/corrupt.exe"),
            &crate::common::limits(),
            &model::SystemClock,
        )
        .await
        .unwrap();
        assert_eq!(
            got.digests.sha256,
            hex::encode(sha2::Sha256::digest(&corrupt))
        );
        assert_eq!(got.pe_signer, None);
        assert!(matches!(
            got.pe_signer_error,
            Some(AuthenticodeError::MalformedSignature(_))
        ));
    }
}
