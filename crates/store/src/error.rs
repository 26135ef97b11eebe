//! The storage layer's own failures, classified where they arise (a driver error, a bad
//! URL, a row that cannot be decoded) and turned into a [`model::Error`] in exactly one
//! place, [`From<StoreError> for model::Error`]. Details stay in the log: callers (and
//! through them, API clients) see the kind only.

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The row asked for does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A unique constraint refused the write.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database cannot be reached or gave up (pool timeout, I/O, connection lost).
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// A stored value cannot be read back (a decode failure, a value outside its domain).
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// The store was configured wrongly (e.g. a database URL of no known kind).
    #[error("configuration: {0}")]
    Config(String),
    /// Anything else the driver reported.
    #[error("database error: {0}")]
    Other(#[source] sqlx::Error),
}

/// Statements that failed because the database could not be reached (pool timeout, lost
/// or refused connection), since the process started.
static UNAVAILABLE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many statements failed as [`StoreError::Unavailable`] in this process.
pub fn unavailable_errors() -> u64 {
    UNAVAILABLE.load(std::sync::atomic::Ordering::Relaxed)
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        let classified = Self::classify(e);
        if matches!(classified, StoreError::Unavailable(_)) {
            UNAVAILABLE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        classified
    }
}

impl StoreError {
    fn classify(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::RowNotFound => StoreError::NotFound("no such row".into()),
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                StoreError::Conflict(db.message().to_string())
            }
            // The server is going away or not accepting connections: a shutdown ending the
            // session (57P01-57P03), a connection failure (class 08), no free slot (53300).
            sqlx::Error::Database(db)
                if db.code().is_some_and(|c| {
                    c.starts_with("08") || matches!(&*c, "57P01" | "57P02" | "57P03" | "53300")
                }) =>
            {
                StoreError::Unavailable(e)
            }
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => StoreError::Unavailable(e),
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
                StoreError::Corrupt(e.to_string())
            }
            _ => StoreError::Other(e),
        }
    }
}

/// The one mapping into the domain's error kinds. Unavailable is the caller's to retry
/// (503); what the caller cannot act on is internal (500) and logged here with its cause.
impl From<StoreError> for model::Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(m) => model::Error::NotFound(m),
            StoreError::Conflict(m) => model::Error::Conflict(m),
            StoreError::Unavailable(cause) => {
                tracing::error!(error = %cause, "database unavailable");
                model::Error::Unavailable("the database is unavailable; retry shortly".into())
            }
            other => {
                tracing::error!(error = %other, "storage failure");
                model::Error::internal_caused("storage failure", other)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_errors_are_classified_then_mapped_once() {
        let e: model::Error = StoreError::from(sqlx::Error::PoolTimedOut).into();
        assert!(matches!(e, model::Error::Unavailable(_)), "{e:?}");
        let e: model::Error = StoreError::from(sqlx::Error::RowNotFound).into();
        assert!(matches!(e, model::Error::NotFound(_)), "{e:?}");
        let e: model::Error = StoreError::Config("bad URL".into()).into();
        assert!(matches!(e, model::Error::Internal { .. }), "{e:?}");
        let e: model::Error = StoreError::from(sqlx::Error::Protocol("garbled".into())).into();
        assert!(matches!(e, model::Error::Internal { .. }), "{e:?}");
    }
}
