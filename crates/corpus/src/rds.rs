//! Reading NSRL RDS v3 SQLite databases (minimal and full layouts).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::error::{Error, IoContext, Result};
use crate::format::RdsVersion;

/// The two shapes NIST publishes each RDS set in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layout {
    /// `FILE`, `PKG`, `MFG`, `OS` tables and the `DISTINCT_HASH` view.
    Minimal,
    /// Normalised tables with `FILE`, `PKG`, `MFG`, `OS` as views.
    Full,
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Minimal => "minimal",
            Layout::Full => "full",
        }
    }
}

/// The RDS set an input belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SetName {
    Modern,
    Android,
    Ios,
    Legacy,
}

impl SetName {
    pub fn as_str(self) -> &'static str {
        match self {
            SetName::Modern => "modern",
            SetName::Android => "android",
            SetName::Ios => "ios",
            SetName::Legacy => "legacy",
        }
    }

    /// `nsrl_minimal` / `nsrl_full` for the modern set, `nsrl_<set>` for the others.
    pub fn source(self, layout: Layout) -> String {
        match self {
            SetName::Modern => format!("nsrl_{}", layout.as_str()),
            other => format!("nsrl_{}", other.as_str()),
        }
    }
}

impl fmt::Display for SetName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SetName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "modern" => Ok(SetName::Modern),
            "android" => Ok(SetName::Android),
            "ios" => Ok(SetName::Ios),
            "legacy" => Ok(SetName::Legacy),
            _ => Err(Error::UnknownSet(s.to_string())),
        }
    }
}

/// One `FILE` row, borrowed from SQLite's buffers.
pub(crate) struct FileRow<'a> {
    pub sha256: &'a [u8],
    pub sha1: &'a [u8],
    pub md5: &'a [u8],
    pub file_name: &'a [u8],
    pub package_id: i64,
}

pub(crate) struct RdsInput {
    pub path: PathBuf,
    pub layout: Layout,
    conn: Connection,
}

impl RdsInput {
    /// Opens read-only and recognises the layout; refuses non-SQLite, truncated and
    /// unrelated databases before any long work starts.
    pub fn open(path: &Path) -> Result<RdsInput> {
        check_header(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| sql_error(path, e))?;
        // A bigger page cache helps the full layout's join; the minimal scan is sequential.
        conn.pragma_update(None, "cache_size", -262_144i64)
            .map_err(|e| sql_error(path, e))?;
        let layout = detect_layout(&conn, path)?;
        Ok(RdsInput {
            path: path.to_path_buf(),
            layout,
            conn,
        })
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        sql_error(&self.path, e)
    }

    /// Cheap estimate of the FILE row count for progress (largest rowid of the big table).
    pub fn row_estimate(&self) -> Option<u64> {
        let table = match self.layout {
            Layout::Minimal => "FILE",
            Layout::Full => "METADATA",
        };
        self.conn
            .query_row(&format!("SELECT max(rowid) FROM {table}"), [], |r| {
                r.get::<_, Option<i64>>(0)
            })
            .ok()
            .flatten()
            .and_then(|n| u64::try_from(n).ok())
    }

    /// `package_id -> "name version"`, the smallest by bytes when a package has several rows.
    pub fn products(&self) -> Result<HashMap<i64, String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT package_id, name, version FROM PKG")
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.err(e))?;
        let mut out: HashMap<i64, String> = HashMap::new();
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let Some(id) = as_int(row.get_ref(0).map_err(|e| self.err(e))?) else {
                continue;
            };
            let name = as_text(row.get_ref(1).map_err(|e| self.err(e))?);
            let version = as_text(row.get_ref(2).map_err(|e| self.err(e))?);
            let product = match (name.trim(), version.trim()) {
                (n, "") => n.to_string(),
                ("", v) => v.to_string(),
                (n, v) => format!("{n} {v}"),
            };
            match out.get_mut(&id) {
                Some(best) if product.as_bytes() < best.as_bytes() => *best = product,
                Some(_) => {}
                None => {
                    out.insert(id, product);
                }
            }
        }
        Ok(out)
    }

    /// Rows of the `VERSION` table, if there is one; columns it lacks stay `None`.
    pub fn versions(&self) -> Result<Vec<RdsVersion>> {
        let has_table: bool = self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'VERSION' AND type IN ('table', 'view')",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(|e| self.err(e))?
            > 0;
        if !has_table {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare("SELECT * FROM VERSION")
            .map_err(|e| self.err(e))?;
        let names = table_columns(&self.conn, "VERSION").map_err(|e| self.err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let mut v = RdsVersion::default();
            for (i, name) in names.iter().enumerate() {
                let value = match row.get_ref(i).map_err(|e| self.err(e))? {
                    ValueRef::Null => None,
                    other => Some(as_text(other)),
                };
                match name.as_str() {
                    "version" => v.version = value,
                    "build_set" => v.build_set = value,
                    "build_date" => v.build_date = value,
                    "release_date" => v.release_date = value,
                    "description" => v.description = value,
                    _ => {}
                }
            }
            out.push(v);
        }
        Ok(out)
    }

    /// Streams every FILE row; `f` returning an error stops the scan.
    pub fn for_each_row(&self, mut f: impl FnMut(FileRow<'_>) -> Result<()>) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare("SELECT sha256, sha1, md5, file_name, package_id FROM FILE")
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let text = |i: usize, column: &'static str| -> Result<&[u8]> {
                match row.get_ref(i).map_err(|e| self.err(e))? {
                    ValueRef::Text(t) => Ok(t),
                    other => Err(Error::InvalidHash {
                        path: self.path.clone(),
                        column,
                        value: format!("{:?}", other.data_type()),
                    }),
                }
            };
            let file_name = match row.get_ref(3).map_err(|e| self.err(e))? {
                ValueRef::Text(t) | ValueRef::Blob(t) => t,
                _ => &[],
            };
            let package_id = as_int(row.get_ref(4).map_err(|e| self.err(e))?).unwrap_or(-1);
            f(FileRow {
                sha256: text(0, "sha256")?,
                sha1: text(1, "sha1")?,
                md5: text(2, "md5")?,
                file_name,
                package_id,
            })?;
        }
        Ok(())
    }
}

fn as_int(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

fn as_text(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(r) => r.to_string(),
        ValueRef::Null => String::new(),
    }
}

pub(crate) fn sql_error(path: &Path, e: rusqlite::Error) -> Error {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => Error::NotSqlite {
            path: path.to_path_buf(),
        },
        Some(ErrorCode::DatabaseCorrupt) => Error::Corrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
        _ => Error::Sqlite {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// Checks the 100-byte SQLite header: magic string, and that the file is as long as the
/// page count it declares (a cut download otherwise fails only minutes into the scan).
fn check_header(path: &Path) -> Result<()> {
    let mut file = std::fs::File::open(path).at(path)?;
    let actual = file.metadata().at(path)?.len();
    let mut header = [0u8; 100];
    if actual < 100 {
        return Err(Error::NotSqlite {
            path: path.to_path_buf(),
        });
    }
    file.read_exact(&mut header).at(path)?;
    if &header[..16] != b"SQLite format 3\0" {
        return Err(Error::NotSqlite {
            path: path.to_path_buf(),
        });
    }
    let be32 = |at: usize| {
        u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65536u64,
        n => u64::from(n),
    };
    // The in-header page count is only valid when the change counter matches the
    // version-valid-for field (SQLite file format, section 1.3.7).
    if be32(24) == be32(92) && page_size >= 512 {
        let expected = u64::from(be32(28)) * page_size;
        if expected > actual {
            return Err(Error::Truncated {
                path: path.to_path_buf(),
                expected,
                actual,
            });
        }
    }
    Ok(())
}

fn detect_layout(conn: &Connection, path: &Path) -> Result<Layout> {
    let mut objects: HashMap<String, String> = HashMap::new();
    {
        let mut stmt = conn
            .prepare("SELECT upper(name), type FROM sqlite_master WHERE type IN ('table', 'view')")
            .map_err(|e| sql_error(path, e))?;
        let mut rows = stmt.query([]).map_err(|e| sql_error(path, e))?;
        while let Some(row) = rows.next().map_err(|e| sql_error(path, e))? {
            let name: String = row.get(0).map_err(|e| sql_error(path, e))?;
            let kind: String = row.get(1).map_err(|e| sql_error(path, e))?;
            objects.insert(name, kind);
        }
    }
    let kind = |name: &str| objects.get(name).map(String::as_str);
    let layout = match (kind("FILE"), kind("DISTINCT_HASH"), kind("METADATA")) {
        (Some("table"), Some("view"), _) => Layout::Minimal,
        (Some("view"), _, Some("table")) => Layout::Full,
        _ => {
            let mut names: Vec<&str> = objects.keys().map(String::as_str).collect();
            names.sort_unstable();
            let found = if names.is_empty() {
                "no tables".to_string()
            } else {
                format!("tables/views {}", names.join(", "))
            };
            return Err(Error::UnrecognisedSchema {
                path: path.to_path_buf(),
                detail: format!(
                    "expected a FILE table with a DISTINCT_HASH view (minimal) or a FILE view over METADATA (full); found {found}"
                ),
            });
        }
    };
    require_columns(
        conn,
        path,
        "FILE",
        &["sha256", "sha1", "md5", "file_name", "package_id"],
    )?;
    require_columns(conn, path, "PKG", &["package_id", "name", "version"])?;
    Ok(layout)
}

/// Lowercased column names of a table or view, in order, read as values of
/// `pragma_table_info`: rusqlite's `Statement::column_names` panics on a name that is not
/// UTF-8, which a damaged or hostile file can hold.
fn table_columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?;
    let mut rows = stmt.query([table])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(as_text(row.get_ref(0)?).to_ascii_lowercase());
    }
    Ok(out)
}

fn require_columns(conn: &Connection, path: &Path, table: &str, wanted: &[&str]) -> Result<()> {
    let stmt = conn
        .prepare(&format!("SELECT * FROM \"{table}\" LIMIT 0"))
        .map_err(|e| match e.sqlite_error_code() {
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => sql_error(path, e),
            _ => Error::UnrecognisedSchema {
                path: path.to_path_buf(),
                detail: format!("cannot read {table}: {e}"),
            },
        })?;
    drop(stmt);
    let have: HashSet<String> = table_columns(conn, table)
        .map_err(|e| sql_error(path, e))?
        .into_iter()
        .collect();
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|c| !have.contains(*c))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::UnrecognisedSchema {
            path: path.to_path_buf(),
            detail: format!("{table} lacks column(s) {}", missing.join(", ")),
        })
    }
}
