//! The error kinds every layer reports. The server maps each kind to exactly one HTTP
//! status and error code (see `server::error`); nothing else decides a status.

/// A failure a caller can be told about. Messages are written for the caller: they name
/// the offending field or value and never carry internals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("MFA required")]
    MfaRequired,
    #[error("not found: {0}")]
    NotFound(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("payload too large: {0}")]
    PayloadTooLarge(String),
    /// A byte range outside the file, or more than one range.
    #[error("range not satisfiable: {0}")]
    RangeNotSatisfiable(String),
    #[error("rate limit exceeded")]
    RateLimited { retry_after_secs: u64 },
    #[error("quota exceeded")]
    QuotaExceeded { retry_after_secs: u64 },
    /// A dependency (the database) is down for now; worth retrying.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Storage or other internal failure. The detail is for logs only.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::BadRequest(msg.into())
    }
    pub fn internal(msg: impl std::fmt::Display) -> Self {
        Self::Internal(msg.to_string())
    }

    /// The public code of the kind, as error bodies and the audit log show it;
    /// exhaustive, so a new kind cannot go without one.
    pub fn code(&self) -> &'static str {
        match self {
            Error::BadRequest(_) => "bad request",
            Error::Unauthorized(_) => "unauthorized",
            Error::Forbidden(_) => "forbidden",
            Error::MfaRequired => "MFA_REQUIRED",
            Error::NotFound(_) => "not found",
            Error::Conflict(_) => "conflict",
            Error::PayloadTooLarge(_) => "payload too large",
            Error::RangeNotSatisfiable(_) => "range not satisfiable",
            Error::RateLimited { .. } => "rate limit exceeded",
            Error::QuotaExceeded { .. } => "QUOTA_EXCEEDED",
            Error::Unavailable(_) => "service unavailable",
            Error::Internal(_) => "internal error",
        }
    }
}

/// Longest caller value quoted in a message or an audit row.
pub const SHOWN_CHARS: usize = 64;

/// A caller-supplied value as messages and the audit log show it: quoted, control and
/// invisible characters escaped (so it cannot forge log lines or move a terminal's
/// cursor), cut to [`SHOWN_CHARS`] characters.
pub fn shown(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(SHOWN_CHARS) + 8);
    out.push('"');
    for (i, c) in value.chars().enumerate() {
        if i == SHOWN_CHARS {
            out.push('…');
            break;
        }
        out.extend(c.escape_debug());
    }
    out.push('"');
    out
}

#[cfg(test)]
mod shown_tests {
    use super::*;

    #[test]
    fn values_are_escaped_and_cut() {
        assert_eq!(shown("acme"), "\"acme\"");
        assert_eq!(shown("a\nb\u{1b}[2J"), "\"a\\nb\\u{1b}[2J\"");
        assert_eq!(shown("x\u{202e}y"), "\"x\\u{202e}y\"");
        let long = shown(&"z".repeat(60_000));
        assert_eq!(long.chars().count(), SHOWN_CHARS + 3);
        assert!(long.ends_with("…\""));
    }
}
