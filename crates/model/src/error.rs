//! The error kinds every layer reports. The server maps each kind to exactly one HTTP
//! status and error code (see `server::error`); nothing else decides a status.

use std::fmt;
use std::sync::Arc;

/// The failure underneath an internal error, kept whole (with its own sources) for the
/// log. Shared, so an [`Error`] stays cheap to clone.
pub type Cause = Arc<dyn std::error::Error + Send + Sync>;

/// A failure a caller can be told about. Messages are written for the caller: they name
/// the offending field or value and never carry internals. [`Error::Internal`] is the
/// exception: what it displays (its context, then its cause's chain) is for the log only,
/// and callers are told its code alone.
#[derive(Debug, Clone, thiserror::Error)]
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
    /// Storage or other internal failure: what was being done and, when there is one, the
    /// failure underneath (also its `source()`). Both are for logs only, so the display
    /// carries the whole chain: a log line with `%error` shows every cause; callers are
    /// told `internal error` and nothing more.
    #[error("internal error: {context}{}", caused(context, source))]
    Internal {
        context: String,
        #[source]
        source: Option<Cause>,
    },
}

/// Equal kinds with equal messages; internal errors compare by context (causes are not
/// comparable).
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        use Error::*;
        match (self, other) {
            (BadRequest(a), BadRequest(b))
            | (Unauthorized(a), Unauthorized(b))
            | (Forbidden(a), Forbidden(b))
            | (NotFound(a), NotFound(b))
            | (Conflict(a), Conflict(b))
            | (PayloadTooLarge(a), PayloadTooLarge(b))
            | (RangeNotSatisfiable(a), RangeNotSatisfiable(b))
            | (Unavailable(a), Unavailable(b)) => a == b,
            (MfaRequired, MfaRequired) => true,
            (
                RateLimited {
                    retry_after_secs: a,
                },
                RateLimited {
                    retry_after_secs: b,
                },
            )
            | (
                QuotaExceeded {
                    retry_after_secs: a,
                },
                QuotaExceeded {
                    retry_after_secs: b,
                },
            ) => a == b,
            (Internal { context: a, .. }, Internal { context: b, .. }) => a == b,
            _ => false,
        }
    }
}

impl Eq for Error {}

impl Error {
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::BadRequest(msg.into())
    }

    /// An internal failure with no error value underneath (an invariant that did not
    /// hold, a value out of range).
    pub fn internal(context: impl fmt::Display) -> Self {
        Self::Internal {
            context: context.to_string(),
            source: None,
        }
    }

    /// An internal failure caused by `source`, which the log shows with its own causes.
    pub fn internal_caused(
        context: impl fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Internal {
            context: context.to_string(),
            source: Some(Arc::new(source)),
        }
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
            Error::Internal { .. } => "internal error",
        }
    }
}

/// `: <cause chain>` after an internal error's context, or nothing.
fn caused(context: &str, source: &Option<Cause>) -> String {
    match source {
        Some(cause) => {
            let text = chain(cause.as_ref());
            if context.contains(&text) {
                String::new()
            } else {
                format!(": {text}")
            }
        }
        None => String::new(),
    }
}

/// `e` and its sources on one line, each joined by `: ` unless the line already holds its
/// text (many errors repeat their source's message in their own).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let m = cause.to_string();
        if !text.contains(&m) {
            text.push_str(": ");
            text.push_str(&m);
        }
        source = cause.source();
    }
    text
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
mod chain_tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("connection refused")]
    struct Refused;

    #[derive(Debug, thiserror::Error)]
    #[error("reading the settings row")]
    struct Reading(#[source] Refused);

    #[test]
    fn an_internal_error_keeps_its_causes_for_the_log() {
        let e = Error::internal_caused("loading settings", Reading(Refused));
        let logged =
            "internal error: loading settings: reading the settings row: connection refused";
        assert_eq!(e.to_string(), logged);
        // The cause stays reachable as a source, and walking it repeats nothing.
        assert_eq!(
            std::error::Error::source(&e)
                .map(|s| s.to_string())
                .as_deref(),
            Some("reading the settings row")
        );
        assert_eq!(chain(&e), logged);
        assert_eq!(e.code(), "internal error");
        let plain = Error::internal("no signing key");
        assert_eq!(plain.to_string(), "internal error: no signing key");
        assert_eq!(plain, Error::internal("no signing key"));
    }
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
