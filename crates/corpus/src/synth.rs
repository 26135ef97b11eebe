//! Synthetic NSRL RDS v3 databases with the real schemas (minimal and full), for tests and
//! benchmarks. Deterministic for a given seed; [`hashes_of`] tells which hashes are present.
//!
//! Shape: `n_distinct` SHA-256 values spread evenly over the key space, 1 to 11 FILE rows per
//! hash (6 on average) with different file names and packages, one package per ~150 hashes
//! with 1-3 PKG rows each, manufacturers, operating systems and a VERSION row. Hashes are
//! uppercase hex in the minimal layout and lowercase in the full layout's METADATA table (its
//! FILE view upper-cases them, as NIST's does).

use std::path::Path;

use rusqlite::{Connection, Statement, params};

use crate::error::{IoContext, Result};
use crate::rds::{Layout, sql_error};

/// Tables, views and columns as NIST ships them (minimal layout).
const MINIMAL_SCHEMA: &str = "
CREATE TABLE FILE (sha256 VARCHAR NOT NULL, sha1 VARCHAR NOT NULL, md5 VARCHAR NOT NULL,
  crc32 VARCHAR NOT NULL, file_name VARCHAR NOT NULL, file_size INTEGER NOT NULL,
  package_id INTEGER NOT NULL,
  CONSTRAINT PK_FILE__FILE PRIMARY KEY (sha256, sha1, md5, crc32, file_name, file_size, package_id));
CREATE TABLE MFG (manufacturer_id INTEGER NOT NULL, name VARCHAR NOT NULL,
  CONSTRAINT PK_MFG__MFG_ID PRIMARY KEY (manufacturer_id));
CREATE TABLE OS (operating_system_id INTEGER NOT NULL, name VARCHAR NOT NULL, version VARCHAR NOT NULL,
  manufacturer_id INTEGER NOT NULL,
  CONSTRAINT PK_OS__OS_ID PRIMARY KEY (operating_system_id, manufacturer_id));
CREATE TABLE PKG (package_id INTEGER NOT NULL, name VARCHAR NOT NULL, version VARCHAR NOT NULL,
  operating_system_id INTEGER NOT NULL, manufacturer_id INTEGER NOT NULL, language VARCHAR NOT NULL,
  application_type VARCHAR NOT NULL,
  CONSTRAINT PK_PGK__PKG_ID PRIMARY KEY (package_id, operating_system_id, manufacturer_id, language, application_type));
CREATE TABLE VERSION (version VARCHAR UNIQUE NOT NULL, build_set VARCHAR NOT NULL,
  build_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL, release_date TIMESTAMP NOT NULL,
  description VARCHAR NOT NULL, CONSTRAINT PK_VERSION__VERSION PRIMARY KEY (version));
CREATE VIEW DISTINCT_HASH AS SELECT DISTINCT sha256, sha1, md5, crc32 FROM FILE;
";

/// Normalised tables with FILE, MFG, OS and PKG as views (full layout).
const FULL_SCHEMA: &str = "
CREATE TABLE PACKAGE_OBJECT (package_object_id INTEGER UNIQUE NOT NULL, package_id INTEGER NOT NULL,
  object_id INTEGER UNIQUE NOT NULL, PRIMARY KEY (package_object_id));
CREATE TABLE APPLICATION (application_id INTEGER UNIQUE NOT NULL, package_id INTEGER NOT NULL,
  name VARCHAR DEFAULT '' NOT NULL, name_b64 VARCHAR NOT NULL, name_coding VARCHAR NOT NULL,
  version VARCHAR DEFAULT '', poe VARCHAR DEFAULT 'purchased' NOT NULL, build VARCHAR DEFAULT '',
  latest_copyright VARCHAR DEFAULT '', other VARCHAR DEFAULT '',
  creation_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL,
  update_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL, PRIMARY KEY (application_id));
CREATE TABLE APPLICATION_TYPE (application_type_id INTEGER UNIQUE NOT NULL, description VARCHAR NOT NULL,
  creation_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL,
  update_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL, PRIMARY KEY (application_type_id));
CREATE TABLE APPLICATION_APPLICATION_TYPE (application_application_type_id INTEGER UNIQUE NOT NULL,
  application_id INTEGER NOT NULL, application_type_id INTEGER NOT NULL,
  PRIMARY KEY (application_application_type_id));
CREATE TABLE LANGUAGE (language_id INTEGER UNIQUE NOT NULL, name VARCHAR DEFAULT '' NOT NULL,
  creation_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL,
  update_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL, language_tag VARCHAR, PRIMARY KEY (language_id));
CREATE TABLE APPLICATION_LANGUAGE (application_language_id INTEGER UNIQUE NOT NULL,
  language_id INTEGER NOT NULL, application_id INTEGER NOT NULL, PRIMARY KEY (application_language_id));
CREATE TABLE OPERATING_SYSTEM (operating_system_id INTEGER UNIQUE NOT NULL, name VARCHAR DEFAULT '' NOT NULL,
  name_b64 VARCHAR, name_coding VARCHAR, version VARCHAR DEFAULT '' NOT NULL,
  architecture VARCHAR DEFAULT '' NOT NULL, creation_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL,
  update_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL, PRIMARY KEY (operating_system_id));
CREATE TABLE OPERATING_SYSTEM_APPLICATION (operating_system_application_id INTEGER UNIQUE NOT NULL,
  operating_system_id INTEGER NOT NULL, application_id INTEGER NOT NULL,
  PRIMARY KEY (operating_system_application_id));
CREATE TABLE MANUFACTURER (manufacturer_id INTEGER UNIQUE NOT NULL, name VARCHAR DEFAULT '' NOT NULL,
  name_b64 VARCHAR, name_coding VARCHAR, address1 VARCHAR DEFAULT '' NOT NULL,
  city VARCHAR DEFAULT '' NOT NULL, country VARCHAR DEFAULT '' NOT NULL, url VARCHAR DEFAULT '' NOT NULL,
  creation_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL,
  update_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL, PRIMARY KEY (manufacturer_id));
CREATE TABLE MANUFACTURER_APPLICATION (manufacturer_application_id INTEGER UNIQUE NOT NULL,
  manufacturer_id INTEGER NOT NULL, application_id INTEGER NOT NULL,
  PRIMARY KEY (manufacturer_application_id));
CREATE TABLE MANUFACTURER_OPERATING_SYSTEM (manufacturer_operating_system_id INTEGER UNIQUE NOT NULL,
  operating_system_id INTEGER NOT NULL, manufacturer_id INTEGER NOT NULL,
  PRIMARY KEY (manufacturer_operating_system_id));
CREATE TABLE METADATA (metadata_id NUMERIC UNIQUE NOT NULL, object_id INTEGER, key_hash VARCHAR NOT NULL,
  image_hash VARCHAR, path VARCHAR NOT NULL, file_name VARCHAR NOT NULL, extension VARCHAR DEFAULT '' NOT NULL,
  bytes INTEGER NOT NULL, mtime TIMESTAMP, used_in_rds TIMESTAMP,
  update_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL, recursion_level INTEGER,
  extractee_id INTEGER DEFAULT 0, crc32 VARCHAR NOT NULL, md5 VARCHAR NOT NULL, sha1 VARCHAR NOT NULL,
  sha256 VARCHAR NOT NULL, PRIMARY KEY (metadata_id));
CREATE TABLE VERSION (version VARCHAR UNIQUE NOT NULL, build_set VARCHAR NOT NULL,
  build_date TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL, release_date TIMESTAMP NOT NULL,
  description VARCHAR NOT NULL, PRIMARY KEY (version));
CREATE VIEW FILE AS SELECT UPPER(md.sha256) AS sha256, UPPER(md.sha1) AS sha1, UPPER(md.md5) AS md5,
  CASE md.extension WHEN '' THEN md.file_name ELSE md.file_name || '.' || md.extension END AS file_name,
  md.bytes AS file_size, po.package_id
  FROM METADATA AS md, PACKAGE_OBJECT AS po WHERE md.object_id = po.object_id;
CREATE VIEW MFG AS SELECT manufacturer_id, name FROM MANUFACTURER;
CREATE VIEW OS AS SELECT os.operating_system_id, os.name, os.version, mos.manufacturer_id
  FROM OPERATING_SYSTEM AS os, MANUFACTURER_OPERATING_SYSTEM AS mos
  WHERE os.operating_system_id = mos.operating_system_id;
CREATE VIEW PKG AS SELECT a.package_id, a.name, a.version, osa.operating_system_id, ma.manufacturer_id,
  l.name AS language, at.description AS application_type
  FROM APPLICATION AS a, OPERATING_SYSTEM_APPLICATION AS osa, MANUFACTURER_APPLICATION AS ma,
    APPLICATION_LANGUAGE AS al, LANGUAGE AS l, APPLICATION_APPLICATION_TYPE AS aat, APPLICATION_TYPE AS at
  WHERE a.application_id = osa.application_id AND a.application_id = ma.application_id
    AND a.application_id = al.application_id AND al.language_id = l.language_id
    AND a.application_id = aat.application_id AND aat.application_type_id = at.application_type_id;
";

/// One FILE row for [`write_rows`]; hashes as hex text, written as given.
#[derive(Clone, Debug)]
pub struct FileRow {
    pub sha256: String,
    pub sha1: String,
    pub md5: String,
    pub file_name: String,
    pub file_size: i64,
    pub package_id: i64,
}

/// One PKG row for [`write_rows`].
#[derive(Clone, Debug)]
pub struct Package {
    pub package_id: i64,
    pub name: String,
    pub version: String,
}

#[derive(Clone, Copy, Debug)]
pub struct SynthOptions {
    pub layout: Layout,
    pub n_distinct: u64,
    pub seed: u64,
    /// Average FILE rows per hash (NSRL modern: ~6).
    pub rows_per_hash: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynthStats {
    pub file_rows: u64,
    pub distinct_sha256: u64,
    pub packages: u64,
}

/// Writes a database with `n_distinct` SHA-256 values and ~6 FILE rows each.
pub fn write_rds(path: &Path, layout: Layout, n_distinct: u64, seed: u64) -> Result<SynthStats> {
    write_rds_with(
        path,
        &SynthOptions {
            layout,
            n_distinct,
            seed,
            rows_per_hash: 6,
        },
    )
}

/// The hashes of the `i`-th file of a database written with this seed and size; SHA-256
/// values ascend with `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynthHashes {
    pub sha256: [u8; 32],
    pub sha1: [u8; 20],
    pub md5: [u8; 16],
}

pub fn hashes_of(seed: u64, n_distinct: u64, i: u64) -> SynthHashes {
    let step = u64::MAX / n_distinct.max(1);
    let top = i
        .wrapping_mul(step)
        .wrapping_add(mix(seed ^ mix(i)) % step.max(1));
    let mut h = SynthHashes {
        sha256: [0; 32],
        sha1: [0; 20],
        md5: [0; 16],
    };
    h.sha256[..8].copy_from_slice(&top.to_be_bytes());
    fill(&mut h.sha256[8..], seed.wrapping_add(1), i);
    fill(&mut h.sha1, seed.wrapping_add(2), i);
    fill(&mut h.md5, seed.wrapping_add(3), i);
    h
}

pub fn write_rds_with(path: &Path, o: &SynthOptions) -> Result<SynthStats> {
    let mut db = Db::create(path, o.layout)?;
    let packages = (o.n_distinct / 150).max(10);
    let manufacturers = (packages / 20).max(3);
    let systems = 40u64;
    let spread = u64::from(o.rows_per_hash.max(1)) * 2 - 1;
    let mut stats = SynthStats {
        file_rows: 0,
        distinct_sha256: o.n_distinct,
        packages,
    };
    {
        let mut w = db.writer()?;
        let mut rows: Vec<(String, i64, i64)> = Vec::with_capacity(32);
        let mut hex = HexBufs::default();
        for i in 0..o.n_distinct {
            let h = hashes_of(o.seed, o.n_distinct, i);
            let mut crc = [0u8; 4];
            fill(&mut crc, o.seed.wrapping_add(4), i);
            let size = (mix(o.seed ^ i.wrapping_mul(31)) % 5_000_000) as i64;
            let copies = 1 + mix(o.seed.wrapping_add(5) ^ mix(i)) % spread;
            rows.clear();
            for j in 0..copies {
                let r = mix(mix(o.seed.wrapping_add(6) ^ i) ^ j);
                rows.push((
                    file_name(r, o.n_distinct),
                    size,
                    1 + ((r >> 32) % packages) as i64,
                ));
            }
            // Minimal FILE is written in primary-key order; equal rows would break the key.
            rows.sort();
            rows.dedup();
            hex.set(
                &h.sha256,
                &h.sha1,
                &h.md5,
                &crc,
                o.layout == Layout::Minimal,
            );
            for (name, size, package) in &rows {
                w.file(&hex, name, *size, *package)?;
                stats.file_rows += 1;
            }
        }
        for p in 1..=packages {
            let r = mix(o.seed.wrapping_add(7) ^ p);
            let name = format!("{} {}", PRODUCTS[(r % PRODUCTS.len() as u64) as usize], p);
            let version = format!("{}.{}", (r >> 8) % 20, (r >> 16) % 10);
            for k in 0..1 + (r >> 24) % 3 {
                let os = 1 + (mix(r ^ k) % systems) as i64;
                let mfg = 1 + ((r >> 40) % manufacturers) as i64;
                w.package(
                    p as i64,
                    &name,
                    &version,
                    os,
                    mfg,
                    LANGUAGES[k as usize % LANGUAGES.len()],
                )?;
            }
        }
        for m in 1..=manufacturers {
            w.manufacturer(m as i64, &format!("Manufacturer {m}"))?;
        }
        for s in 1..=systems {
            w.system(
                s as i64,
                &format!("OS {s}"),
                &format!("{}.0", s % 12),
                1 + (s % manufacturers) as i64,
            )?;
        }
        w.version(o.layout)?;
    }
    db.finish()?;
    Ok(stats)
}

/// Writes a small database with exactly these rows (any order, any hex case).
pub fn write_rows(
    path: &Path,
    layout: Layout,
    rows: &[FileRow],
    packages: &[Package],
) -> Result<()> {
    let mut db = Db::create(path, layout)?;
    {
        let mut w = db.writer()?;
        let mut hex = HexBufs::default();
        for row in rows {
            hex.sha256.clone_from(&row.sha256);
            hex.sha1.clone_from(&row.sha1);
            hex.md5.clone_from(&row.md5);
            hex.crc32 = "00000000".to_string();
            w.file(&hex, &row.file_name, row.file_size, row.package_id)?;
        }
        for (k, p) in packages.iter().enumerate() {
            // Distinct languages keep several rows of one package apart in PKG's key.
            w.package(
                p.package_id,
                &p.name,
                &p.version,
                1,
                1,
                LANGUAGES[k % LANGUAGES.len()],
            )?;
        }
        w.manufacturer(1, "Manufacturer 1")?;
        w.system(1, "OS 1", "1.0", 1)?;
        w.version(layout)?;
    }
    db.finish()
}

const PRODUCTS: [&str; 12] = [
    "Office Suite",
    "Photo Editor",
    "Web Browser",
    "Antivirus",
    "Compiler Toolkit",
    "Media Player",
    "Game Engine",
    "Database Server",
    "Driver Pack",
    "Accounting",
    "Mail Client",
    "Runtime",
];
const LANGUAGES: [&str; 3] = ["English", "German", "Japanese"];
const COMMON: [&str; 16] = [
    "README.txt",
    "LICENSE",
    "setup.exe",
    "uninstall.exe",
    "index.html",
    "msvcr100.dll",
    "config.xml",
    "icon.png",
    "license.txt",
    "data.bin",
    "strings.json",
    "version.dll",
    "update.exe",
    "help.chm",
    "Thumbs.db",
    "desktop.ini",
];
const STEMS: [&str; 8] = [
    "lib", "module", "resource", "img", "strings", "plugin", "core", "view",
];
const EXTS: [&str; 10] = [
    "dll", "exe", "txt", "png", "so", "js", "xml", "json", "mui", "sys",
];

/// One in five rows uses a common name; the rest come from a vocabulary of n/2 names.
fn file_name(r: u64, n: u64) -> String {
    if r.is_multiple_of(5) {
        return COMMON[((r >> 8) % COMMON.len() as u64) as usize].to_string();
    }
    let v = (r >> 8) % (n / 2).max(64);
    format!(
        "{}{v}.{}",
        STEMS[(v % 8) as usize],
        EXTS[((v >> 3) % 10) as usize]
    )
}

fn mix(mut z: u64) -> u64 {
    // splitmix64 finaliser
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fill(out: &mut [u8], stream: u64, i: u64) {
    for (k, chunk) in out.chunks_mut(8).enumerate() {
        let v = mix(mix(stream.wrapping_mul(0x1000_0000_01b3) ^ i) ^ k as u64).to_be_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// Hex text of one hash's values, reused across rows.
#[derive(Default)]
struct HexBufs {
    sha256: String,
    sha1: String,
    md5: String,
    crc32: String,
}

impl HexBufs {
    fn set(&mut self, sha256: &[u8], sha1: &[u8], md5: &[u8], crc: &[u8], upper: bool) {
        let put = |s: &mut String, b: &[u8]| {
            s.clear();
            let digits: &[u8; 16] = if upper {
                b"0123456789ABCDEF"
            } else {
                b"0123456789abcdef"
            };
            for &x in b {
                s.push(digits[(x >> 4) as usize] as char);
                s.push(digits[(x & 15) as usize] as char);
            }
        };
        put(&mut self.sha256, sha256);
        put(&mut self.sha1, sha1);
        put(&mut self.md5, md5);
        put(&mut self.crc32, crc);
    }
}

struct Db {
    path: std::path::PathBuf,
    conn: Connection,
    layout: Layout,
}

impl Db {
    fn create(path: &Path, layout: Layout) -> Result<Db> {
        for suffix in ["", "-journal", "-wal", "-shm"] {
            let p = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).at(&p),
                _ => {}
            }
        }
        let err = |e| sql_error(path, e);
        let conn = Connection::open(path).map_err(err)?;
        // A throw-away bulk load: no journal, no fsync, big cache for the primary-key index.
        conn.execute_batch(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE;
             PRAGMA cache_size = -524288; PRAGMA temp_store = MEMORY;",
        )
        .map_err(err)?;
        conn.execute_batch(match layout {
            Layout::Minimal => MINIMAL_SCHEMA,
            Layout::Full => FULL_SCHEMA,
        })
        .map_err(err)?;
        conn.execute_batch("BEGIN").map_err(err)?;
        Ok(Db {
            path: path.to_path_buf(),
            conn,
            layout,
        })
    }

    fn writer(&mut self) -> Result<Writer<'_>> {
        let err = |e| sql_error(&self.path, e);
        let p = |sql: &str| self.conn.prepare(sql).map_err(err);
        let stmts = match self.layout {
            Layout::Minimal => vec![
                p("INSERT INTO FILE VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?,
                p("INSERT OR IGNORE INTO PKG VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'Operating System')")?,
                p("INSERT INTO MFG VALUES (?1, ?2)")?,
                p("INSERT INTO OS VALUES (?1, ?2, ?3, ?4)")?,
            ],
            Layout::Full => vec![
                p("INSERT INTO METADATA (metadata_id, object_id, key_hash, path, file_name, extension, bytes,
                   crc32, md5, sha1, sha256) VALUES (?1, ?1, ?2, '/', ?3, ?4, ?5, ?6, ?7, ?2, ?8)")?,
                p("INSERT INTO PACKAGE_OBJECT VALUES (?1, ?2, ?1)")?,
                p("INSERT INTO APPLICATION (application_id, package_id, name, name_b64, name_coding, version)
                   VALUES (?1, ?2, ?3, '', 'utf-8', ?4)")?,
                p("INSERT INTO OPERATING_SYSTEM_APPLICATION VALUES (?1, ?2, ?1)")?,
                p("INSERT INTO MANUFACTURER_APPLICATION VALUES (?1, ?2, ?1)")?,
                p("INSERT INTO APPLICATION_LANGUAGE VALUES (?1, ?2, ?1)")?,
                p("INSERT INTO APPLICATION_APPLICATION_TYPE VALUES (?1, ?1, 1)")?,
                p("INSERT INTO MANUFACTURER (manufacturer_id, name) VALUES (?1, ?2)")?,
                p("INSERT INTO OPERATING_SYSTEM (operating_system_id, name, version) VALUES (?1, ?2, ?3)")?,
                p("INSERT INTO MANUFACTURER_OPERATING_SYSTEM VALUES (?1, ?1, ?2)")?,
            ],
        };
        Ok(Writer {
            path: &self.path,
            conn: &self.conn,
            layout: self.layout,
            stmts,
            next_id: 1,
            next_app: 1,
        })
    }

    fn finish(self) -> Result<()> {
        let err = |e| sql_error(&self.path, e);
        self.conn.execute_batch("COMMIT").map_err(err)?;
        self.conn.close().map_err(|(_, e)| err(e))
    }
}

struct Writer<'c> {
    path: &'c Path,
    conn: &'c Connection,
    layout: Layout,
    stmts: Vec<Statement<'c>>,
    next_id: i64,
    next_app: i64,
}

impl Writer<'_> {
    fn file(&mut self, h: &HexBufs, name: &str, size: i64, package: i64) -> Result<()> {
        let err = |e| sql_error(self.path, e);
        match self.layout {
            Layout::Minimal => {
                self.stmts[0]
                    .execute(params![
                        h.sha256, h.sha1, h.md5, h.crc32, name, size, package
                    ])
                    .map_err(err)?;
            }
            Layout::Full => {
                let id = self.next_id;
                self.next_id += 1;
                let (stem, ext) = match name.rsplit_once('.') {
                    Some((s, e)) if !s.is_empty() => (s, e),
                    _ => (name, ""),
                };
                self.stmts[0]
                    .execute(params![
                        id, h.sha1, stem, ext, size, h.crc32, h.md5, h.sha256
                    ])
                    .map_err(err)?;
                self.stmts[1].execute(params![id, package]).map_err(err)?;
            }
        }
        Ok(())
    }

    fn package(
        &mut self,
        id: i64,
        name: &str,
        version: &str,
        os: i64,
        mfg: i64,
        language: &str,
    ) -> Result<()> {
        let err = |e| sql_error(self.path, e);
        match self.layout {
            Layout::Minimal => {
                self.stmts[1]
                    .execute(params![id, name, version, os, mfg, language])
                    .map_err(err)?;
            }
            Layout::Full => {
                let app = self.next_app;
                self.next_app += 1;
                self.stmts[2]
                    .execute(params![app, id, name, version])
                    .map_err(err)?;
                self.stmts[3].execute(params![app, os]).map_err(err)?;
                self.stmts[4].execute(params![app, mfg]).map_err(err)?;
                let lang = 1 + LANGUAGES.iter().position(|l| *l == language).unwrap_or(0) as i64;
                self.stmts[5].execute(params![app, lang]).map_err(err)?;
                self.stmts[6].execute(params![app]).map_err(err)?;
            }
        }
        Ok(())
    }

    fn manufacturer(&mut self, id: i64, name: &str) -> Result<()> {
        let i = if self.layout == Layout::Minimal { 2 } else { 7 };
        self.stmts[i]
            .execute(params![id, name])
            .map_err(|e| sql_error(self.path, e))?;
        Ok(())
    }

    fn system(&mut self, id: i64, name: &str, version: &str, mfg: i64) -> Result<()> {
        let err = |e| sql_error(self.path, e);
        match self.layout {
            Layout::Minimal => {
                self.stmts[3]
                    .execute(params![id, name, version, mfg])
                    .map_err(err)?;
            }
            Layout::Full => {
                self.stmts[8]
                    .execute(params![id, name, version])
                    .map_err(err)?;
                self.stmts[9].execute(params![id, mfg]).map_err(err)?;
            }
        }
        Ok(())
    }

    fn version(&mut self, layout: Layout) -> Result<()> {
        let err = |e| sql_error(self.path, e);
        if layout == Layout::Full {
            self.conn
                .execute_batch(
                    "INSERT INTO APPLICATION_TYPE (application_type_id, description) VALUES (1, 'Operating System');
                     INSERT INTO LANGUAGE (language_id, name) VALUES (1, 'English'), (2, 'German'), (3, 'Japanese');",
                )
                .map_err(err)?;
        }
        self.conn
            .execute(
                "INSERT INTO VERSION (version, build_set, release_date, description) VALUES (?1, ?2, ?3, ?4)",
                params![
                    "2026.09.1",
                    format!("RDS_2026.09.1_modern_{}", layout.as_str()),
                    "2026-09-01",
                    "synthetic RDS v3 database for knowngood tests"
                ],
            )
            .map_err(err)?;
        Ok(())
    }
}
