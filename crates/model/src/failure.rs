//! The kinds of failure background work records, written as `kind: message` into a
//! vendor's or a CRL's health and read back by the status routes: the public status page
//! shows only the kind, in plain words ([`ProblemKind::public_text`],
//! [`CheckFailure::public_text`]); staff see the whole message.

use std::fmt;

/// What went wrong with a vendor channel during a refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// The channel could not be read, or part of it.
    Discovery,
    /// The artifact's data cannot make a valid record.
    InvalidArtifact,
    Download,
    /// A published hash disagrees with the downloaded bytes: possible tampering.
    HashMismatch,
    Record,
    Audit,
    /// The files inside an archive could not all be read (a cap, an undecodable entry).
    /// The archive itself stands; this does not make the vendor fail.
    Archive,
}

impl ProblemKind {
    const ALL: [Self; 7] = [
        Self::Discovery,
        Self::InvalidArtifact,
        Self::Download,
        Self::HashMismatch,
        Self::Record,
        Self::Audit,
        Self::Archive,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Discovery => "discovery",
            Self::InvalidArtifact => "invalid_artifact",
            Self::Download => "download",
            Self::HashMismatch => "hash_mismatch",
            Self::Record => "record",
            Self::Audit => "audit",
            Self::Archive => "archive",
        }
    }

    /// The kind a stored `kind: message` text starts with.
    pub fn of_stored(text: &str) -> Option<Self> {
        let kind = text.split_once(':')?.0;
        Self::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    /// What the public status page says of a stored vendor error.
    pub fn public_text(stored: &str) -> &'static str {
        match Self::of_stored(stored) {
            Some(Self::HashMismatch) => "published hash mismatch (possible tampering)",
            Some(Self::Discovery) => "vendor channel unreadable",
            Some(Self::Download) => "download failed",
            Some(Self::InvalidArtifact) => "invalid data from the vendor channel",
            Some(Self::Record | Self::Audit) => "could not store the results",
            Some(Self::Archive) | None => "refresh failed",
        }
    }
}

/// Why a check of a remote document (a CRL, an advisory archive) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckFailure {
    /// The URL is not one the service may fetch.
    BadUrl,
    /// No answer: DNS, connection, TLS, timeout, or the body broke off.
    Unreachable,
    /// An answer other than success.
    HttpStatus,
    /// Larger than the configured cap (announced or sent).
    TooLarge,
    /// The document does not parse or is of an unsupported kind.
    Malformed,
    /// Its signature does not verify against its issuer.
    Unverified,
    /// Past its own validity.
    Expired,
    /// Older than one already accepted: a possible replay.
    Rollback,
}

impl CheckFailure {
    const ALL: [Self; 8] = [
        Self::BadUrl,
        Self::Unreachable,
        Self::HttpStatus,
        Self::TooLarge,
        Self::Malformed,
        Self::Unverified,
        Self::Expired,
        Self::Rollback,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadUrl => "bad_url",
            Self::Unreachable => "unreachable",
            Self::HttpStatus => "http_status",
            Self::TooLarge => "too_large",
            Self::Malformed => "malformed",
            Self::Unverified => "unverified",
            Self::Expired => "expired",
            Self::Rollback => "rollback",
        }
    }

    /// `kind: message`, the form health records store.
    pub fn message(self, message: impl fmt::Display) -> String {
        format!("{}: {message}", self.as_str())
    }

    /// The kind a stored `kind: message` text starts with.
    pub fn of_stored(text: &str) -> Option<Self> {
        let kind = text.split_once(':')?.0;
        Self::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    /// What the public status page says of a stored CRL error.
    pub fn public_text(stored: &str) -> &'static str {
        match Self::of_stored(stored) {
            Some(Self::Unreachable) => "CRL server unreachable",
            Some(Self::HttpStatus) => "CRL server answered an error",
            Some(Self::TooLarge) => "CRL over the size limit",
            Some(Self::Malformed) => "CRL unreadable or unsupported",
            Some(Self::Unverified) => "CRL failed verification against its issuer",
            Some(Self::Expired) => "CRL past its nextUpdate",
            Some(Self::Rollback) => "CRL number went backwards (possible replay)",
            Some(Self::BadUrl) | None => "CRL check failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_what_is_stored() {
        for kind in ProblemKind::ALL {
            let stored = format!("{}: something", kind.as_str());
            assert_eq!(ProblemKind::of_stored(&stored), Some(kind));
        }
        for kind in CheckFailure::ALL {
            assert_eq!(CheckFailure::of_stored(&kind.message("x")), Some(kind));
        }
        assert_eq!(ProblemKind::of_stored("no kind here"), None);
        assert_eq!(CheckFailure::of_stored("https://a: b"), None);
    }

    #[test]
    fn the_public_text_never_repeats_the_message() {
        let stored = "discovery: https://user:secret@mirror.internal/ failed";
        assert_eq!(
            ProblemKind::public_text(stored),
            "vendor channel unreadable"
        );
        let stored = CheckFailure::TooLarge.message("http://crl.internal/x.crl sent 9 GB");
        assert_eq!(
            CheckFailure::public_text(&stored),
            "CRL over the size limit"
        );
        assert_eq!(ProblemKind::public_text("boom"), "refresh failed");
    }
}
