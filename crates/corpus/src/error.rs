use std::path::PathBuf;

/// Everything that can go wrong importing, opening or swapping a corpus.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not an SQLite database")]
    NotSqlite { path: PathBuf },
    #[error("{path}: truncated SQLite database ({actual} bytes, header says {expected})")]
    Truncated {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error("{path}: corrupt SQLite database: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error("{path}: not an NSRL RDS v3 database: {detail}")]
    UnrecognisedSchema { path: PathBuf, detail: String },
    #[error("{path}: invalid {column} value {value:?} in FILE")]
    InvalidHash {
        path: PathBuf,
        column: &'static str,
        value: String,
    },
    #[error("{path}: {source}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("no input databases given")]
    NoInputs,
    #[error("the inputs hold no hashes")]
    Empty,
    #[error("too many distinct hashes for this format ({0}; the limit is 2^32 - 1)")]
    TooLarge(u64),
    #[error("import cancelled")]
    Cancelled,
    #[error("unknown RDS set {0:?} (expected modern, android, ios or legacy)")]
    UnknownSet(String),
    #[error("generation {dir}: {detail}")]
    BadGeneration { dir: PathBuf, detail: String },
    #[error(
        "generation {dir}: cannot hold its {needed} bytes in memory ({detail}); free memory or open it with Memory::Mapped"
    )]
    NoMemory {
        dir: PathBuf,
        needed: u64,
        detail: String,
    },
    #[error("{path}: invalid CURRENT pointer {value:?}")]
    BadCurrent { path: PathBuf, value: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches a path to I/O errors: `file.read(..).at(&path)?`.
pub(crate) trait IoContext<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| Error::Io {
            path: path.into(),
            source,
        })
    }
}

/// For callers whose own errors are I/O errors (the vendor index's generation writer).
impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Io { source, .. } => source,
            other => std::io::Error::other(other),
        }
    }
}

pub(crate) fn bad_generation(dir: &std::path::Path, detail: impl Into<String>) -> Error {
    Error::BadGeneration {
        dir: dir.to_path_buf(),
        detail: detail.into(),
    }
}
