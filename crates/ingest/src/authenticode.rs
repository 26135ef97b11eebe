//! Authenticode signer extraction from PE files (parse only, no signature verification).
//!
//! A PE's security data directory (entry 4) holds the file offset and size of a table of
//! WIN_CERTIFICATE entries `{u32 length, u16 revision, u16 type}`, each 8-byte aligned;
//! type 2 carries a PKCS#7 SignedData whose content is an `SpcIndirectDataContent`. The
//! signer certificate is the one whose issuer and serial equal the SignerInfo's
//! `issuerAndSerialNumber` (certificate order is not significant). Further signatures sit
//! in additional table entries and in the unsigned attribute 1.3.6.1.4.1.311.2.4.1.
//!
//! [`SignatureCapture`] works on a stream: it keeps the first 64 KiB (the headers), learns
//! where the table is, and keeps only the table's bytes, so a download never needs the whole
//! file in memory. [`extract_signer`] does the same over a buffer.
//!
//! Distinguished names are RFC 4514 strings: most specific RDN first (`CN=..,O=..,C=..`),
//! `,` between RDNs, special characters backslash-escaped, and `OID=#hex` for attribute types
//! or values without a string form.

use std::ops::Range;

use aws_lc_rs::digest;
use cms::cert::CertificateChoices;
use cms::content_info::ContentInfo;
use cms::signed_data::{SignedData, SignerIdentifier, SignerInfo as CmsSignerInfo};
use der::asn1::ObjectIdentifier;
use der::{Decode, Encode, SliceReader};
use x509_cert::Certificate;
use x509_cert::ext::pkix::name::{DistributionPointName, GeneralName};
use x509_cert::ext::pkix::{AuthorityKeyIdentifier, CrlDistributionPoints, SubjectKeyIdentifier};

const ID_SIGNED_DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.2");
const SPC_INDIRECT_DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.311.2.1.4");
const SPC_NESTED_SIGNATURE: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.3.6.1.4.1.311.2.4.1");
const WIN_CERT_TYPE_PKCS_SIGNED_DATA: u16 = 2;

/// Bytes kept from the start of a stream to read the PE headers from.
const HEAD_LEN: usize = 64 * 1024;
/// Nested signatures deeper than this are refused (real files nest once).
const MAX_NESTING: u8 = 4;

/// The identity of one Authenticode signer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignerInfo {
    /// Subject DN of the signer certificate, RFC 4514.
    pub sig_signer: String,
    /// Issuer DN of the signer certificate, RFC 4514.
    pub sig_issuer: String,
    /// Certificate serial, lowercase hex without a leading 00 sign byte.
    pub sig_serial: String,
    /// Lowercase hex SHA-1 of the certificate's DER.
    pub sig_thumbprint: String,
    /// URIs from the certificate's CRL distribution points (2.5.29.31).
    pub crl_urls: Vec<String>,
    /// DER of the issuing CA's certificate when the signature's certificate set holds it
    /// (subject equal to the signer's issuer, and subject key identifier equal to the
    /// signer's authority key identifier when both are present): what its CRLs are
    /// verified against.
    pub issuer_cert: Option<Vec<u8>>,
    /// On the primary signer: every other signature in the file (further WIN_CERTIFICATE
    /// entries and nested signatures), flattened in file order. Empty on those entries.
    pub nested: Vec<SignerInfo>,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum AuthenticodeError {
    #[error("malformed PE: {0}")]
    MalformedPe(String),
    #[error("malformed Authenticode signature: {0}")]
    MalformedSignature(String),
    #[error("signature table of {size} bytes is over the {limit}-byte limit")]
    TableTooLarge { size: usize, limit: usize },
}

fn bad_sig(e: impl std::fmt::Display) -> AuthenticodeError {
    AuthenticodeError::MalformedSignature(e.to_string())
}

/// The primary signer of a PE held in memory. Non-PE or unsigned input gives `Ok(None)`.
pub fn extract_signer(bytes: &[u8]) -> Result<Option<SignerInfo>, AuthenticodeError> {
    let mut capture = SignatureCapture::new(usize::MAX);
    capture.push(bytes);
    capture.finish()
}

/// Collects what Authenticode extraction needs while a file streams past.
pub struct SignatureCapture {
    limit: usize,
    /// Stream offset of the next byte.
    offset: usize,
    state: Capture,
}

enum Capture {
    /// Reading the first bytes, not yet known whether or where there is a table.
    Head(Vec<u8>),
    /// Not a signed PE: nothing more to keep.
    Nothing,
    Table {
        range: Range<usize>,
        bytes: Vec<u8>,
    },
    Failed(AuthenticodeError),
}

impl SignatureCapture {
    /// `limit` caps the certificate table kept in memory.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            offset: 0,
            state: Capture::Head(Vec::new()),
        }
    }

    /// Feeds the next chunk of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        let start = self.offset;
        self.offset = self.offset.saturating_add(chunk.len());
        if let Capture::Head(head) = &mut self.state {
            let take = (HEAD_LEN - head.len()).min(chunk.len());
            head.extend_from_slice(&chunk[..take]);
            if head.len() >= 2 && !head.starts_with(b"MZ") {
                self.state = Capture::Nothing;
            } else if head.len() == HEAD_LEN {
                self.locate_table();
            }
        }
        if let Capture::Table { range, bytes } = &mut self.state {
            append_overlap(range, bytes, start, chunk);
        }
    }

    /// The primary signer once the whole stream has been pushed.
    pub fn finish(mut self) -> Result<Option<SignerInfo>, AuthenticodeError> {
        if let Capture::Head(_) = self.state {
            self.locate_table();
        }
        match self.state {
            Capture::Head(_) | Capture::Nothing => Ok(None),
            Capture::Failed(e) => Err(e),
            Capture::Table { range, bytes } if bytes.len() < range.len() => {
                Err(AuthenticodeError::MalformedPe(format!(
                    "certificate table at {}..{} runs past the end of the {}-byte file",
                    range.start, range.end, self.offset
                )))
            }
            Capture::Table { bytes, .. } => signer_from_table(&bytes),
        }
    }

    /// Reads the headers kept so far and decides what else to keep.
    fn locate_table(&mut self) {
        let Capture::Head(head) = std::mem::replace(&mut self.state, Capture::Nothing) else {
            return;
        };
        self.state = match certificate_table_range(&head) {
            Ok(None) => Capture::Nothing,
            Err(e) => Capture::Failed(e),
            Ok(Some(range)) if range.len() > self.limit => {
                Capture::Failed(AuthenticodeError::TableTooLarge {
                    size: range.len(),
                    limit: self.limit,
                })
            }
            Ok(Some(range)) => {
                let mut bytes = Vec::new();
                // The table may start inside the head already seen (small files).
                append_overlap(&range, &mut bytes, 0, &head);
                Capture::Table { range, bytes }
            }
        };
    }
}

/// Appends to `bytes` the part of `chunk` (at stream offset `start`) that continues the
/// table. Tracking the next wanted offset makes re-fed overlapping data harmless.
fn append_overlap(range: &Range<usize>, bytes: &mut Vec<u8>, start: usize, chunk: &[u8]) {
    let want = range.start + bytes.len();
    let end = start + chunk.len();
    if want >= range.end || want < start || want >= end {
        return;
    }
    let stop = range.end.min(end);
    bytes.extend_from_slice(&chunk[want - start..stop - start]);
}

fn read_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The file range of the certificate table named by the headers in `head`, `None` when the
/// input is not a PE or the PE is unsigned.
fn certificate_table_range(head: &[u8]) -> Result<Option<Range<usize>>, AuthenticodeError> {
    if !head.starts_with(b"MZ") {
        return Ok(None);
    }
    let short = |what: &str| {
        AuthenticodeError::MalformedPe(format!("{what} lies beyond the first {} bytes", head.len()))
    };
    let pe = read_u32(head, 0x3c).ok_or_else(|| short("the DOS header"))? as usize;
    let signature = head
        .get(pe..pe + 4)
        .ok_or_else(|| short("the PE signature"))?;
    if signature != b"PE\0\0" {
        // An MZ file without a PE header is a DOS program, not a PE.
        return Ok(None);
    }
    let coff = pe + 4;
    let optional_size = read_u16(head, coff + 16).ok_or_else(|| short("the COFF header"))? as usize;
    let optional = coff + 20;
    let magic = read_u16(head, optional).ok_or_else(|| short("the optional header"))?;
    // Offsets of NumberOfRvaAndSizes and of the data directories for PE32 / PE32+.
    let (count_at, dirs_at) = match magic {
        0x10b => (92, 96),
        0x20b => (108, 112),
        other => {
            return Err(AuthenticodeError::MalformedPe(format!(
                "unknown optional header magic {other:#x}"
            )));
        }
    };
    let dir_count =
        read_u32(head, optional + count_at).ok_or_else(|| short("the optional header"))?;
    let security_at = dirs_at + 4 * 8;
    if dir_count <= 4 || optional_size < security_at + 8 {
        return Ok(None);
    }
    let entry = optional + security_at;
    let (Some(offset), Some(size)) = (read_u32(head, entry), read_u32(head, entry + 4)) else {
        return Err(short("the security directory entry"));
    };
    if offset == 0 || size == 0 {
        return Ok(None);
    }
    let (start, size) = (offset as usize, size as usize);
    Ok(Some(start..start + size))
}

/// Walks the WIN_CERTIFICATE table; the first signature is primary, the rest are `nested`.
fn signer_from_table(table: &[u8]) -> Result<Option<SignerInfo>, AuthenticodeError> {
    let mut found = Vec::new();
    let mut rest = table;
    while rest.len() >= 8 {
        let (Some(length), Some(cert_type)) = (read_u32(rest, 0), read_u16(rest, 6)) else {
            break;
        };
        let length = length as usize;
        if length < 8 || length > rest.len() {
            return Err(bad_sig(format!(
                "WIN_CERTIFICATE length {length} does not fit the {} bytes left in the table",
                rest.len()
            )));
        }
        if cert_type == WIN_CERT_TYPE_PKCS_SIGNED_DATA {
            parse_signature(&rest[8..length], 0, &mut found)?;
        }
        let aligned = length.div_ceil(8) * 8;
        rest = rest.get(aligned..).unwrap_or_default();
    }
    let mut signers = found.into_iter();
    Ok(signers.next().map(|mut primary| {
        primary.nested = signers.collect();
        primary
    }))
}

/// Parses one PKCS#7 Authenticode signature, pushing its signer and then its nested ones.
fn parse_signature(
    data: &[u8],
    depth: u8,
    out: &mut Vec<SignerInfo>,
) -> Result<(), AuthenticodeError> {
    // `decode` rather than `from_der`: table entries may carry zero padding after the DER.
    let content_info = ContentInfo::decode(&mut SliceReader::new(data).map_err(bad_sig)?)
        .map_err(|e| bad_sig(format!("ContentInfo: {e}")))?;
    if content_info.content_type != ID_SIGNED_DATA {
        return Err(bad_sig(format!(
            "content type {} is not signedData",
            content_info.content_type
        )));
    }
    let signed: SignedData = content_info
        .content
        .decode_as()
        .map_err(|e| bad_sig(format!("SignedData: {e}")))?;
    if signed.encap_content_info.econtent_type != SPC_INDIRECT_DATA {
        return Err(bad_sig(format!(
            "content {} is not SpcIndirectDataContent",
            signed.encap_content_info.econtent_type
        )));
    }
    let [signer] = signed.signer_infos.0.as_slice() else {
        return Err(bad_sig(format!(
            "Authenticode needs exactly one SignerInfo, found {}",
            signed.signer_infos.0.len()
        )));
    };
    let cert = signer_certificate(&signed, signer)?;
    let mut info = describe(cert, data)?;
    info.issuer_cert = issuer_certificate(&signed, cert);
    out.push(info);

    let nested = signer.unsigned_attrs.iter().flat_map(|attrs| attrs.iter());
    for attr in nested.filter(|a| a.oid == SPC_NESTED_SIGNATURE) {
        if depth >= MAX_NESTING {
            return Err(bad_sig("nested signatures are too deep"));
        }
        for value in attr.values.iter() {
            parse_signature(&value.to_der().map_err(bad_sig)?, depth + 1, out)?;
        }
    }
    Ok(())
}

/// The certificate named by the SignerInfo's issuer and serial, wherever it is in the set.
fn signer_certificate<'a>(
    signed: &'a SignedData,
    signer: &CmsSignerInfo,
) -> Result<&'a Certificate, AuthenticodeError> {
    let SignerIdentifier::IssuerAndSerialNumber(id) = &signer.sid else {
        return Err(bad_sig(
            "signer is named by subject key identifier, not issuer and serial",
        ));
    };
    let certificates = signed.certificates.iter().flat_map(|set| set.0.iter());
    certificates
        .filter_map(|choice| match choice {
            CertificateChoices::Certificate(cert) => Some(cert),
            CertificateChoices::Other(_) => None,
        })
        .find(|cert| {
            cert.tbs_certificate.issuer == id.issuer
                && cert.tbs_certificate.serial_number == id.serial_number
        })
        .ok_or_else(|| {
            bad_sig(format!(
                "no certificate matches the signer's issuer {} and serial {}",
                id.issuer,
                serial_hex(id.serial_number.as_bytes())
            ))
        })
}

/// The certificate of the set that issued `cert`: named by its issuer, and holding the key
/// its authority key identifier names (when both sides say). Absent when the file does not
/// ship it.
fn issuer_certificate(signed: &SignedData, cert: &Certificate) -> Option<Vec<u8>> {
    let wanted_key = cert
        .tbs_certificate
        .get::<AuthorityKeyIdentifier>()
        .ok()
        .flatten()
        .and_then(|(_, aki)| aki.key_identifier);
    signed
        .certificates
        .iter()
        .flat_map(|set| set.0.iter())
        .filter_map(|choice| match choice {
            CertificateChoices::Certificate(c) => Some(c),
            CertificateChoices::Other(_) => None,
        })
        .filter(|c| c.tbs_certificate.subject == cert.tbs_certificate.issuer)
        .find(|c| {
            let ski = c
                .tbs_certificate
                .get::<SubjectKeyIdentifier>()
                .ok()
                .flatten();
            match (&wanted_key, ski) {
                (Some(want), Some((_, ski))) => want.as_bytes() == ski.0.as_bytes(),
                _ => true,
            }
        })
        .and_then(|c| c.to_der().ok())
}

fn describe(cert: &Certificate, container: &[u8]) -> Result<SignerInfo, AuthenticodeError> {
    let der = cert.to_der().map_err(bad_sig)?;
    // The parser normalises some encodings (e.g. it sorts SETs); a thumbprint is only right
    // if the re-encoded certificate is byte for byte the one in the file.
    if !container.windows(der.len()).any(|w| w == der.as_slice()) {
        return Err(bad_sig(
            "signer certificate is not in canonical DER; its thumbprint cannot be computed",
        ));
    }
    let thumbprint = digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, &der);
    let tbs = &cert.tbs_certificate;
    Ok(SignerInfo {
        sig_signer: tbs.subject.to_string(),
        sig_issuer: tbs.issuer.to_string(),
        sig_serial: serial_hex(tbs.serial_number.as_bytes()),
        sig_thumbprint: hex::encode(thumbprint.as_ref()),
        crl_urls: crl_urls(cert)?,
        issuer_cert: None,
        nested: Vec::new(),
    })
}

/// Lowercase hex of an unsigned serial: the DER sign byte (a leading 00) is dropped.
fn serial_hex(bytes: &[u8]) -> String {
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    match &bytes[first..] {
        [] => "00".into(),
        significant => hex::encode(significant),
    }
}

fn crl_urls(cert: &Certificate) -> Result<Vec<String>, AuthenticodeError> {
    let points = match cert.tbs_certificate.get::<CrlDistributionPoints>() {
        Ok(Some((_critical, points))) => points,
        Ok(None) => return Ok(Vec::new()),
        Err(e) => return Err(bad_sig(format!("CRL distribution points: {e}"))),
    };
    let mut urls = Vec::new();
    for point in points.0 {
        if let Some(DistributionPointName::FullName(names)) = point.distribution_point {
            for name in names {
                if let GeneralName::UniformResourceIdentifier(uri) = name {
                    urls.push(uri.to_string());
                }
            }
        }
    }
    Ok(urls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_drops_the_sign_byte_only() {
        assert_eq!(serial_hex(&[0x00, 0x8a, 0x01]), "8a01");
        assert_eq!(serial_hex(&[0x7f, 0x00]), "7f00");
        assert_eq!(serial_hex(&[0x00]), "00");
    }

    #[test]
    fn overlap_is_taken_once_and_in_order() {
        let range = 5..12;
        let mut bytes = Vec::new();
        let data: Vec<u8> = (0..20).collect();
        // Fed in uneven chunks, with the first 8 bytes fed twice.
        append_overlap(&range, &mut bytes, 0, &data[..8]);
        append_overlap(&range, &mut bytes, 0, &data[..8]);
        append_overlap(&range, &mut bytes, 8, &data[8..9]);
        append_overlap(&range, &mut bytes, 9, &data[9..]);
        assert_eq!(bytes, (5..12).collect::<Vec<u8>>());
    }

    #[test]
    fn non_pe_and_short_input_are_not_signed() {
        for input in [
            &b""[..],
            b"M",
            b"#!/bin/sh\necho hi\n",
            b"\x7fELF\x02\x01\x01",
        ] {
            assert_eq!(extract_signer(input), Ok(None), "{input:?}");
        }
    }

    #[test]
    fn truncated_dos_header_is_an_error() {
        assert!(matches!(
            extract_signer(b"MZ\x90\x00"),
            Err(AuthenticodeError::MalformedPe(_))
        ));
    }
}
