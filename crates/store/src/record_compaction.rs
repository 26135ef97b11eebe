//! Rewriting records stored before the compact columns, online. Rows written before
//! migration 0029 hold their whole source URL, rows written before 0031 their name key and
//! family whole, and archive members written before 0033 their path twice (as their name
//! and at the end of their URL); all read the same as compact rows, but take about 140 to
//! 200 bytes more. The store rewrites them a batch at a time, walking `hash_records` in id
//! order from where the `record_compaction` row says the walk stopped, each batch its own
//! short transaction, so the service answers and records throughout and a restart resumes
//! the walk. A rewrite changes no signed field and no answer: the URL joined again from its
//! parts is the same (the update trigger compares it whole, migrations 0032 and 0033), and
//! the name key and family read back the same (`name_key_sql!`, `family_sql!`), so the
//! records epoch does not move and no view of the records needs to catch up.

use std::collections::HashMap;

use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::Columns;
use crate::record_writes::{
    PG_LOCK_RECORDS, RECORDS_LOCK, SourceColumns, pg_source_ids, rest_columns, rest_is_name,
    shared_sources, source_columns, source_parts, sqlite_source_ids,
};
use crate::{PgStore, Result, SqliteStore, db_error};

/// How far the rewrite of older rows has gone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionProgress {
    /// Every row has been looked at; nothing is left to rewrite.
    pub done: bool,
    /// The share of the id space walked, 0 to 1. Record ids are random, so this is about
    /// the share of the rows looked at.
    pub walked: f64,
    /// Rows rewritten so far (in every process).
    pub rewritten: u64,
}

#[async_trait]
pub trait RecordCompactionStore: Send + Sync {
    /// Looks at the next `limit` rows of the walk (one transaction) and rewrites those
    /// stored in an older form; returns the progress after them. Once done, does nothing.
    async fn compact_older_records(&self, limit: u32) -> Result<CompactionProgress>;

    /// The progress of the walk, as the last batch left it.
    async fn compaction_progress(&self) -> Result<CompactionProgress>;
}

const PROGRESS: &str = "SELECT after_id, done, rewritten FROM record_compaction WHERE id = 1";
/// The progress, read by a batch as it locks the walk's row: a batch of another replica
/// (PostgreSQL; SQLite has one writer) waits for this one to commit, then reads where it
/// ended, so no row is looked at twice.
const LOCK_PROGRESS: &str = "UPDATE record_compaction SET done = done WHERE id = 1 \
     RETURNING after_id, done, rewritten";
const FIRST_ROWS: &str = "SELECT id, executable_name, name_key, family, source_id, source_url, \
     source_rest_is_name FROM hash_records ORDER BY id LIMIT $1";
const ROWS_AFTER: &str = "SELECT id, executable_name, name_key, family, source_id, source_url, \
     source_rest_is_name FROM hash_records WHERE id > $1 ORDER BY id LIMIT $2";
/// PostgreSQL writes an updated row as a new version anyway, and (once vacuumed) reuses the
/// old version's room for any new row. A batch's rows in one statement: one round trip.
const PG_REWRITE: &str = "UPDATE hash_records h SET name_key = v.name_key, family = v.family, \
     source_id = v.source_id, source_url = v.rest, source_rest_is_name = v.rest_is_name \
     FROM UNNEST($1::bytea[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::boolean[]) \
     AS v(id, name_key, family, source_id, rest, rest_is_name) WHERE h.id = v.id";
/// SQLite updates a row in place, and a row that shrinks leaves its room inside a page that
/// new rows never reach (they take the next rowid, after every page). So the rewrite also
/// moves the row to the end: the old pages empty as the walk goes on, and are merged and
/// freed for new rows and indexes. (Measured on 100,000 rows shrunk by 80 bytes: in place,
/// as many new rows then grew the file by 59 %; moved, by 4 %.) A statement a row: SQLite
/// runs in the process.
const SQLITE_REWRITE: &str = "UPDATE hash_records \
     SET rowid = (SELECT MAX(rowid) + 1 FROM hash_records), name_key = $1, family = $2, \
     source_id = $3, source_url = $4, source_rest_is_name = $5 WHERE id = $6";

/// A row's new columns: its id, then its compact name columns and source columns.
type Rewrite<'a> = (&'a [u8], &'a Compact<'a>, SourceColumns<'a>);

async fn sqlite_rewrite(conn: &mut sqlx::SqliteConnection, rows: &[Rewrite<'_>]) -> Result<()> {
    for (id, c, source) in rows {
        sqlx::query(SQLITE_REWRITE)
            .bind(c.name_key)
            .bind(c.family)
            .bind(source.id)
            .bind(source.rest)
            .bind(source.rest_is_name)
            .bind(*id)
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
    }
    Ok(())
}

async fn pg_rewrite(conn: &mut sqlx::PgConnection, rows: &[Rewrite<'_>]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    sqlx::query(PG_REWRITE)
        .bind(rows.iter().map(|r| r.0).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.1.name_key).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.1.family).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.2.id).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.2.rest).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.2.rest_is_name).collect::<Vec<_>>())
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    Ok(())
}

const ADVANCE: &str = "UPDATE record_compaction SET after_id = $1, done = $2, \
     rewritten = rewritten + $3 WHERE id = 1 RETURNING after_id, done, rewritten";

/// A row's columns as a batch reads them.
struct Stored {
    id: Vec<u8>,
    executable_name: String,
    /// NULL: not filled yet (migration 0007; the store fills it at start), left alone.
    name_key: Option<String>,
    family: String,
    source_id: Option<i64>,
    source_url: String,
    /// NULL reads as FALSE: `source_url` holds the rest.
    source_rest_is_name: bool,
}

impl Stored {
    fn of(row: &impl Columns) -> Result<Self> {
        Ok(Self {
            id: row.bytes_ref("id")?.to_vec(),
            executable_name: row.text("executable_name")?,
            name_key: row.opt_text("name_key")?,
            family: row.text("family")?,
            source_id: row.opt_int("source_id")?,
            source_url: row.text("source_url")?,
            source_rest_is_name: row.opt_flag("source_rest_is_name")?.unwrap_or(false),
        })
    }

    /// The compact form of the row's name key and family ('' where each equals what it is
    /// derived from) and source URL (the shared part to store in `record_sources`, and the
    /// rest unless it is the name), or None when it is compact already.
    fn compact(&self) -> Option<Compact<'_>> {
        let key = self.name_key.as_deref()?;
        let read_key = if key.is_empty() {
            self.executable_name.as_str()
        } else {
            key
        };
        let name_key = if key == self.executable_name { "" } else { key };
        let family = if self.family == read_key {
            ""
        } else {
            self.family.as_str()
        };
        let (shared, rest) = match self.source_id {
            None => source_parts(&self.source_url),
            Some(_) => ("", self.source_url.as_str()),
        };
        let names_rest = !self.source_rest_is_name && rest_is_name(rest, &self.executable_name);
        let unchanged =
            name_key == key && family == self.family && shared.is_empty() && !names_rest;
        (!unchanged).then_some(Compact {
            name_key,
            family,
            shared,
        })
    }
}

/// The columns a rewrite stores (see [`Stored::compact`]).
struct Compact<'a> {
    name_key: &'a str,
    family: &'a str,
    /// Empty: the row keeps its `source_id`.
    shared: &'a str,
}

/// The rows of a batch to rewrite, each with its compact form, and the shared parts of the
/// URLs they split (`record_writes::shared_sources`) that need a source id.
fn rewrites_of(stored: &[Stored]) -> (Vec<(&Stored, Compact<'_>)>, Vec<&str>) {
    let rewrites: Vec<(&Stored, Compact<'_>)> = stored
        .iter()
        .filter_map(|s| s.compact().map(|c| (s, c)))
        .collect();
    let shared = shared_sources(
        rewrites
            .iter()
            .filter(|(_, c)| !c.shared.is_empty())
            .map(|(s, _)| s.source_url.as_str()),
    );
    (rewrites, shared)
}

/// The source columns a rewritten row stores, as the writer stores them
/// (`record_writes::source_columns`): its own `source_id`, or the id of its URL's shared
/// part, and the rest unless it is the name.
fn source_of<'a>(s: &'a Stored, ids: &HashMap<String, i64>) -> Result<SourceColumns<'a>> {
    if s.source_rest_is_name {
        return Ok(SourceColumns {
            id: s.source_id,
            rest: "",
            rest_is_name: true,
        });
    }
    match s.source_id {
        Some(id) => Ok(rest_columns(Some(id), &s.source_url, &s.executable_name)),
        None => source_columns(&s.source_url, &s.executable_name, ids),
    }
}

/// The walk's position as a share of the id space: the first 8 bytes of the last id looked
/// at, over 2^64.
fn walked(after: Option<&[u8]>, done: bool) -> f64 {
    if done {
        return 1.0;
    }
    let Some(after) = after else { return 0.0 };
    let mut high = [0u8; 8];
    let n = after.len().min(8);
    high[..n].copy_from_slice(&after[..n]);
    u64::from_be_bytes(high) as f64 / 2f64.powi(64)
}

fn progress_of(row: &impl Columns) -> Result<CompactionProgress> {
    let done = row.flag("done")?;
    Ok(CompactionProgress {
        done,
        walked: walked(row.opt_bytes_ref("after_id")?, done),
        rewritten: u64::try_from(row.int("rewritten")?).unwrap_or(0),
    })
}

macro_rules! compaction_backend {
    ($store:ident, $db:ty, $row:ty, $source_ids:ident, $rewrite:ident, $lock:expr) => {
        impl $store {
            /// One batch of the walk, in one transaction on `conn`.
            async fn compact_batch(
                conn: &mut <$db as sqlx::Database>::Connection,
                limit: u32,
            ) -> Result<CompactionProgress> {
                let mut tx = sqlx::Connection::begin_with(&mut *conn, Self::BEGIN)
                    .await
                    .map_err(db_error)?;
                // Record writes update rows of many families in their own order: on
                // PostgreSQL a batch waits for them, as they wait for each other, rather
                // than locking rows against them (which deadlocks). SQLite's write lock
                // already does so.
                let lock: Option<&str> = $lock;
                if let Some(lock) = lock {
                    sqlx::query(lock)
                        .bind(RECORDS_LOCK)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                }
                let at: $row = sqlx::query(LOCK_PROGRESS)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db_error)?;
                if at.flag("done")? {
                    return progress_of(&at);
                }
                let after = at.opt_bytes_ref("after_id")?.map(<[u8]>::to_vec);
                let rows: Vec<$row> = match &after {
                    None => sqlx::query(FIRST_ROWS).bind(i64::from(limit)),
                    Some(after) => sqlx::query(ROWS_AFTER)
                        .bind(after.as_slice())
                        .bind(i64::from(limit)),
                }
                .fetch_all(&mut *tx)
                .await
                .map_err(db_error)?;
                let stored = rows.iter().map(Stored::of).collect::<Result<Vec<_>>>()?;
                let (rewrites, shared) = rewrites_of(&stored);
                let ids = $source_ids(&mut *tx, &shared).await?;
                let rows = rewrites
                    .iter()
                    .map(|(s, c)| Ok((s.id.as_slice(), c, source_of(s, &ids)?)))
                    .collect::<Result<Vec<Rewrite<'_>>>>()?;
                $rewrite(&mut *tx, &rows).await?;
                let done = stored.len() < limit as usize;
                let last = stored.last().map(|s| s.id.clone()).or(after);
                let rewritten = i64::try_from(rewrites.len()).unwrap_or(i64::MAX);
                let at: $row = sqlx::query(ADVANCE)
                    .bind(last.as_deref())
                    .bind(done)
                    .bind(rewritten)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db_error)?;
                let progress = progress_of(&at)?;
                tx.commit().await.map_err(db_error)?;
                Ok(progress)
            }
        }

        #[async_trait]
        impl RecordCompactionStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn compact_older_records(&self, limit: u32) -> Result<CompactionProgress> {
                // Once done, not even the write lock is taken.
                let progress = self.compaction_progress().await?;
                if progress.done {
                    return Ok(progress);
                }
                // A batch rewrites rows all over the table and its indexes: it runs with
                // the record writer's settings (`record_writes::WriterSettings`).
                self.with_writer_settings(async |conn| {
                    Self::compact_batch(conn, limit.max(1)).await
                })
                .await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn compaction_progress(&self) -> Result<CompactionProgress> {
                let at: $row = sqlx::query(PROGRESS)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                progress_of(&at)
            }
        }
    };
}

compaction_backend!(
    SqliteStore,
    sqlx::Sqlite,
    SqliteRow,
    sqlite_source_ids,
    sqlite_rewrite,
    None
);
compaction_backend!(
    PgStore,
    sqlx::Postgres,
    PgRow,
    pg_source_ids,
    pg_rewrite,
    Some(PG_LOCK_RECORDS)
);

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(
        name: &str,
        key: Option<&str>,
        family: &str,
        source: Option<i64>,
        url: &str,
    ) -> Stored {
        Stored {
            id: vec![0; 16],
            executable_name: name.into(),
            name_key: key.map(Into::into),
            family: family.into(),
            source_id: source,
            source_url: url.into(),
            source_rest_is_name: false,
        }
    }

    /// A rewrite's name key, family and source columns (shared parts stored as id 7).
    fn rewritten(s: &Stored) -> Option<(&str, &str, SourceColumns<'_>)> {
        let c = s.compact()?;
        let ids = HashMap::from([(c.shared.to_owned(), 7)]);
        Some((c.name_key, c.family, source_of(s, &ids).expect("source")))
    }

    fn source(id: Option<i64>, rest: &str, rest_is_name: bool) -> SourceColumns<'_> {
        SourceColumns {
            id,
            rest,
            rest_is_name,
        }
    }

    #[test]
    fn older_rows_are_rewritten_as_the_writer_stores_new_ones() {
        // A Debian member written before 0029 and 0031: every part comes out compact, and
        // the URL's rest, its path, is its name.
        let member = stored(
            "usr/bin/ls",
            Some("usr/bin/ls"),
            "usr/bin/ls",
            None,
            "https://deb.example/pool/c/coreutils_9.1-1_amd64.deb#usr/bin/ls",
        );
        assert_eq!(
            member.compact().expect("rewritten").shared,
            "https://deb.example/pool/c/coreutils_9.1-1_amd64.deb#"
        );
        assert_eq!(
            rewritten(&member),
            Some(("", "", source(Some(7), "", true)))
        );
        // A member named under its package keeps the rest it has.
        let qualified = stored(
            "coreutils/usr/bin/ls",
            Some("coreutils/usr/bin/ls"),
            "coreutils/usr/bin/ls",
            None,
            "https://deb.example/pool/c/coreutils_9.1-1_amd64.deb#usr/bin/ls",
        );
        assert_eq!(
            rewritten(&qualified),
            Some(("", "", source(Some(7), "usr/bin/ls", false)))
        );
        // A mixed-case, versioned name keeps what differs from what it derives from.
        let msi = stored(
            "Go1.21.9.windows-amd64.msi",
            Some("go1.21.9.windows-amd64.msi"),
            "go.windows-amd64.msi",
            None,
            "https://dl.example/go/Go1.21.9.windows-amd64.msi",
        );
        assert_eq!(
            rewritten(&msi),
            Some((
                "go1.21.9.windows-amd64.msi",
                "go.windows-amd64.msi",
                source(Some(7), "", true)
            ))
        );
        // A row written compact, a URL with no shared part, and a name key not filled yet
        // are left alone.
        let compact = Stored {
            source_rest_is_name: true,
            ..stored("usr/bin/ls", Some(""), "", Some(3), "")
        };
        assert!(compact.compact().is_none());
        assert!(
            stored("ls", Some(""), "", Some(3), "usr/bin/ls")
                .compact()
                .is_none()
        );
        assert!(
            stored("tool", Some(""), "", None, "tool.exe")
                .compact()
                .is_none()
        );
        assert!(
            stored("Tool", None, "Tool", None, "https://x/Tool")
                .compact()
                .is_none()
        );
        // Only the names of a row whose URL was split already.
        let split = stored("ls", Some("ls"), "ls", Some(3), "usr/bin/ls");
        assert_eq!(
            rewritten(&split),
            Some(("", "", source(Some(3), "usr/bin/ls", false)))
        );
        // Only the rest of a member written between 0031 and 0033.
        let between = stored("usr/bin/ls", Some(""), "", Some(3), "usr/bin/ls");
        assert_eq!(
            rewritten(&between),
            Some(("", "", source(Some(3), "", true)))
        );
    }

    #[test]
    fn the_walk_shows_the_share_of_ids_passed() {
        assert_eq!(walked(None, false), 0.0);
        assert_eq!(
            walked(Some(&[0x80; 16]), false),
            0x8080_8080_8080_8080u64 as f64 / 2f64.powi(64)
        );
        assert_eq!(walked(Some(&[0xff; 16]), true), 1.0);
        assert!((walked(Some(&[0x40, 0, 0, 0, 0, 0, 0, 0, 9]), false) - 0.25).abs() < 1e-12);
    }
}
