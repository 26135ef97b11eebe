//! Lookup latency against a baseline measured in the same run.
//!
//! Loads N realistic vendor records into a fresh store, starts the real server on
//! 127.0.0.1:0 and alternates, sequentially over one keep-alive connection, `GET /healthz`
//! and `POST /api/v1/intel/lookup` with 100 hashes (50 known current records, 50 unknown;
//! SHA-256, SHA-1 and MD5 mixed). Reports the ratio of the median lookup latency to the
//! median health-check latency; the goal is at most 1.5. Lookups are answered from the
//! in-memory vendor index (built and timed before the run); the database path, which
//! answers only before the first build, is measured separately.
//!
//! Then lookups alone, back to back, while `--ingest` new records (half new versions that
//! supersede a current record, half new files) are written through the store in
//! transactions of `--ingest-batch`, as the vendor refresh does: in ten windows, each
//! followed by as many lookups with nothing else going on. Reports p50/p99 of both and the
//! ratio of the p99s (goal at most 2),
//! and how many lookups the database answered (the index catches up after every write).
//!
//! ```text
//! cargo run --release -p server --example bench_lookup -- \
//!     [--records N] [--postgres URL | --sqlite-file PATH] [--requests M] [--batch B] \
//!     [--ingest I (10000; 0: none)] [--ingest-batch K (1)]
//! ```
//!
//! SQLite uses a file in a temporary directory, or `--sqlite-file PATH`, which is kept and
//! reused by later runs with the same `--records` (loading a million records takes minutes);
//! `--postgres URL` creates a fresh database on that server (the URL's database is only used
//! to create and drop it).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

mod support;
use support::{splitmix, summarize, us};

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use model::TenantKind;
use model::{Arch, Clock, HashValue, NewRecord, Platform, RecordSigner, Role, SystemClock, Tier};
use sqlx::Connection as _;
use store::{NewApiKey, RecordOutcome, Store};
use tower::ServiceExt as _;

const GOAL: f64 = 1.5;
/// Most p99 lookup latency during an ingest may be, relative to without.
const INGEST_GOAL: f64 = 2.0;

/// This process's anonymous resident memory, in KiB (not the database file SQLite maps,
/// which the index build reads through).
fn rss_anon_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
const HASHES_PER_LOOKUP: usize = 100;
const KNOWN_PER_LOOKUP: usize = 50;
const SEED: u64 = 0x6b6e_6f77_6e67_6f6f;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    records: u64,
    requests: usize,
    batch: usize,
    postgres: Option<String>,
    sqlite_file: Option<std::path::PathBuf>,
    ingest: u64,
    ingest_batch: usize,
}

fn parse_args() -> Result<Args, BoxError> {
    let mut args = Args {
        records: 1_000_000,
        requests: 2000,
        batch: 2000,
        postgres: None,
        sqlite_file: None,
        ingest: 10_000,
        ingest_batch: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--records" => args.records = value()?.replace('_', "").parse()?,
            "--requests" => args.requests = value()?.replace('_', "").parse()?,
            "--batch" => args.batch = value()?.parse()?,
            "--postgres" => args.postgres = Some(value()?),
            "--sqlite-file" => args.sqlite_file = Some(value()?.into()),
            "--ingest" => args.ingest = value()?.replace('_', "").parse()?,
            "--ingest-batch" => args.ingest_batch = value()?.parse()?,
            "-h" | "--help" => {
                println!(
                    "bench_lookup [--records N (1000000)] [--requests M (2000)] \
                     [--batch B (2000)] [--postgres URL | --sqlite-file PATH] \
                     [--ingest I (10000)] [--ingest-batch K (1)]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    if args.postgres.is_some() && args.sqlite_file.is_some() {
        return Err("--postgres and --sqlite-file exclude each other".into());
    }
    if args.records == 0 || args.requests == 0 || args.batch == 0 || args.ingest_batch == 0 {
        return Err("--records, --requests, --batch and --ingest-batch must be positive".into());
    }
    Ok(args)
}

// ---------------------------------------------------------------------------------------
// Deterministic synthetic corpus
// ---------------------------------------------------------------------------------------

fn mix(parts: &[u64]) -> u64 {
    parts
        .iter()
        .fold(SEED, |acc, p| splitmix(acc ^ splitmix(*p)))
}

/// `len` hex characters drawn from the stream seeded by `parts`.
fn hex_digest(parts: &[u64], len: usize) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut state = mix(parts);
    let mut out = String::with_capacity(len);
    while out.len() < len {
        state = splitmix(state);
        for i in 0..16 {
            if out.len() == len {
                break;
            }
            out.push(HEX[((state >> (i * 4)) & 0xf) as usize] as char);
        }
    }
    out
}

/// A small fast generator for the request mix.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = splitmix(self.0);
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct Vendor {
    name: &'static str,
    domain: &'static str,
    signer: &'static str,
    products: &'static [&'static str],
}

const VENDORS: &[Vendor] = &[
    Vendor {
        name: "Microsoft",
        domain: "download.microsoft.com",
        signer: "Microsoft Corporation",
        products: &[
            "vscode",
            "powertoys",
            "teams",
            "dotnet-sdk",
            "pwsh",
            "azure-cli",
            "edge",
        ],
    },
    Vendor {
        name: "Google",
        domain: "dl.google.com",
        signer: "Google LLC",
        products: &[
            "chrome",
            "drive",
            "android-studio",
            "earth-pro",
            "cloud-sdk",
        ],
    },
    Vendor {
        name: "Mozilla",
        domain: "ftp.mozilla.org",
        signer: "Mozilla Corporation",
        products: &["firefox", "thunderbird", "firefox-esr"],
    },
    Vendor {
        name: "Go",
        domain: "go.dev",
        signer: "Google LLC",
        products: &["go", "gopls"],
    },
    Vendor {
        name: "Node.js",
        domain: "nodejs.org",
        signer: "OpenJS Foundation",
        products: &["node", "npm"],
    },
    Vendor {
        name: "Python Software Foundation",
        domain: "www.python.org",
        signer: "Python Software Foundation",
        products: &["python", "pip", "idle"],
    },
    Vendor {
        name: "HashiCorp",
        domain: "releases.hashicorp.com",
        signer: "HashiCorp, Inc.",
        products: &[
            "terraform",
            "vault",
            "consul",
            "nomad",
            "packer",
            "boundary",
        ],
    },
    Vendor {
        name: "Docker",
        domain: "desktop.docker.com",
        signer: "Docker Inc",
        products: &["docker-desktop", "docker-cli", "compose"],
    },
    Vendor {
        name: "JetBrains",
        domain: "download.jetbrains.com",
        signer: "JetBrains s.r.o.",
        products: &["idea", "pycharm", "goland", "rider", "clion", "webstorm"],
    },
    Vendor {
        name: "VideoLAN",
        domain: "get.videolan.org",
        signer: "VideoLAN",
        products: &["vlc"],
    },
    Vendor {
        name: "Igor Pavlov",
        domain: "www.7-zip.org",
        signer: "Igor Pavlov",
        products: &["7z", "7zr"],
    },
    Vendor {
        name: "Git",
        domain: "github.com/git-for-windows",
        signer: "Johannes Schindelin",
        products: &["git", "git-lfs"],
    },
    Vendor {
        name: "Zoom",
        domain: "zoom.us",
        signer: "Zoom Video Communications, Inc.",
        products: &["zoom", "zoom-rooms"],
    },
    Vendor {
        name: "Slack",
        domain: "downloads.slack-edge.com",
        signer: "Slack Technologies, LLC",
        products: &["slack"],
    },
    Vendor {
        name: "Oracle",
        domain: "download.oracle.com",
        signer: "Oracle America, Inc.",
        products: &["jdk", "virtualbox", "mysql-shell"],
    },
    Vendor {
        name: "Adobe",
        domain: "ardownload2.adobe.com",
        signer: "Adobe Inc.",
        products: &["acrobat-reader", "creative-cloud"],
    },
    Vendor {
        name: "Simon Tatham",
        domain: "the.earth.li/~sgtatham/putty",
        signer: "Simon Tatham",
        products: &["putty", "pscp", "plink"],
    },
    Vendor {
        name: "Brave",
        domain: "github.com/brave",
        signer: "Brave Software, Inc.",
        products: &["brave-browser"],
    },
    Vendor {
        name: "Rust",
        domain: "static.rust-lang.org",
        signer: "Rust Foundation",
        products: &["rustup-init", "cargo"],
    },
    Vendor {
        name: "Postman",
        domain: "dl.pstmn.io",
        signer: "Postman, Inc.",
        products: &["postman"],
    },
];

const PLATFORMS: &[(Platform, Arch, &str)] = &[
    (Platform::Windows, Arch::Amd64, "msi"),
    (Platform::Windows, Arch::Arm64, "exe"),
    (Platform::Windows, Arch::X86, "exe"),
    (Platform::Linux, Arch::Amd64, "tar.gz"),
    (Platform::Linux, Arch::Arm64, "deb"),
    (Platform::Linux, Arch::Arm, "rpm"),
    (Platform::Darwin, Arch::Arm64, "dmg"),
    (Platform::Darwin, Arch::Amd64, "pkg"),
    (Platform::Android, Arch::Arm64, "apk"),
    (Platform::Universal, Arch::Universal, "tgz"),
];

/// One executable family: `versions[f]` records of it are loaded, oldest first, so all
/// but the last end up superseded.
struct Corpus {
    versions: Vec<u8>,
}

impl Corpus {
    /// Families until the version counts add up to `records`: 80 % have one version,
    /// the rest two to four.
    fn new(records: u64) -> Self {
        let mut versions = Vec::new();
        let mut total = 0u64;
        while total < records {
            let roll = mix(&[1, versions.len() as u64]) % 100;
            let n: u64 = match roll {
                0..80 => 1,
                80..90 => 2,
                90..96 => 3,
                _ => 4,
            };
            let n = n.min(records - total);
            versions.push(n as u8);
            total += n;
        }
        Self { versions }
    }

    fn families(&self) -> u64 {
        self.versions.len() as u64
    }

    fn has_sha1(f: u64) -> bool {
        !mix(&[2, f]).is_multiple_of(10)
    }

    fn has_md5(f: u64) -> bool {
        !mix(&[3, f]).is_multiple_of(8)
    }

    fn sha256(f: u64, v: u64) -> String {
        hex_digest(&[10, f, v], 64)
    }

    fn sha1(f: u64, v: u64) -> String {
        hex_digest(&[11, f, v], 40)
    }

    fn md5(f: u64, v: u64) -> String {
        hex_digest(&[12, f, v], 32)
    }

    /// Version `v` (0-based) of family `f`.
    fn record(f: u64, v: u64) -> NewRecord {
        let vendor = &VENDORS[(f % VENDORS.len() as u64) as usize];
        let rest = f / VENDORS.len() as u64;
        let product = vendor.products[(rest % vendor.products.len() as u64) as usize];
        let rest = rest / vendor.products.len() as u64;
        let (platform, arch, ext) = PLATFORMS[(rest % PLATFORMS.len() as u64) as usize];
        // Distinct tools of one product line: `terraform-provider-17`, ...
        let tool = rest / PLATFORMS.len() as u64;
        let h = mix(&[4, f]);
        let version = format!("{}.{}.{}", 1 + h % 30, (h >> 8) % 40, v + (h >> 16) % 5);
        let stem = if tool == 0 {
            product.to_string()
        } else {
            format!("{product}-ext{tool}")
        };
        let executable_name = format!(
            "{stem}-{version}-{}-{}.{ext}",
            platform.as_str(),
            arch.as_str()
        );
        let signed = platform == Platform::Windows || platform == Platform::Darwin;
        NewRecord {
            vendor: vendor.name.to_string(),
            source_url: format!(
                "https://{}/{stem}/{version}/{executable_name}",
                vendor.domain
            ),
            executable_name,
            version,
            platform,
            arch,
            hash_sha256: Self::sha256(f, v),
            hash_sha1: Self::has_sha1(f).then(|| Self::sha1(f, v)),
            hash_md5: Self::has_md5(f).then(|| Self::md5(f, v)),
            download_verified: !h.is_multiple_of(20),
            sig_signer: signed.then(|| vendor.signer.to_string()),
            sig_issuer: signed
                .then(|| "DigiCert Trusted G4 Code Signing RSA4096 SHA384 2021 CA1".to_string()),
            sig_serial: signed.then(|| hex_digest(&[13, f], 32)),
            sig_thumbprint: signed.then(|| hex_digest(&[14, f], 40)),
            size: None,
        }
    }

    /// Families an ingest gives new versions to; lookups never ask for them, so that a kept
    /// database answers the same after an ingest.
    fn ingested(f: u64) -> bool {
        f % 16 == 15
    }

    /// A hash of the current (last) version of a random family, of a random kind.
    fn known_hash(&self, rng: &mut Rng, used: &mut HashSet<u64>) -> String {
        let f = loop {
            let f = rng.below(self.families());
            if !Self::ingested(f) && used.insert(f) {
                break f;
            }
        };
        let v = u64::from(self.versions[f as usize]) - 1;
        match rng.below(4) {
            0 if Self::has_sha1(f) => Self::sha1(f, v),
            1 if Self::has_md5(f) => Self::md5(f, v),
            _ => Self::sha256(f, v),
        }
    }

    /// A hash no record has.
    fn unknown_hash(rng: &mut Rng) -> String {
        let n = rng.next();
        match rng.below(4) {
            0 => hex_digest(&[20, n], 40),
            1 => hex_digest(&[21, n], 32),
            _ => hex_digest(&[22, n], 64),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Store setup
// ---------------------------------------------------------------------------------------

enum Scratch {
    /// Removed, with the database, when dropped.
    Sqlite {
        _dir: tempfile::TempDir,
    },
    /// A database kept for later runs.
    Kept,
    Postgres {
        admin_url: String,
        database: String,
    },
}

impl Scratch {
    async fn create(args: &Args) -> Result<(Self, String), BoxError> {
        if let Some(path) = &args.sqlite_file {
            return Ok((
                Scratch::Kept,
                format!("sqlite://{}?mode=rwc", path.display()),
            ));
        }
        match args.postgres.as_deref() {
            None => {
                let dir = tempfile::tempdir()?;
                let url = format!(
                    "sqlite://{}?mode=rwc",
                    dir.path().join("bench.db").display()
                );
                Ok((Scratch::Sqlite { _dir: dir }, url))
            }
            Some(admin_url) => {
                let database = format!("knowngood_bench_{}", store::new_id());
                let mut admin = sqlx::PgConnection::connect(admin_url).await?;
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
                    .execute(&mut admin)
                    .await?;
                admin.close().await?;
                let url = with_database(admin_url, &database)?;
                Ok((
                    Scratch::Postgres {
                        admin_url: admin_url.to_string(),
                        database,
                    },
                    url,
                ))
            }
        }
    }

    async fn drop_database(self) -> Result<(), BoxError> {
        if let Scratch::Postgres {
            admin_url,
            database,
        } = self
        {
            let mut admin = sqlx::PgConnection::connect(&admin_url).await?;
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {database} WITH (FORCE)"
            )))
            .execute(&mut admin)
            .await?;
            admin.close().await?;
        }
        Ok(())
    }
}

/// The URL with its database replaced: `postgres://u@h:p/x?o` -> `postgres://u@h:p/db?o`.
fn with_database(url: &str, database: &str) -> Result<String, BoxError> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let (scheme, rest) = base
        .split_once("://")
        .ok_or_else(|| format!("not a URL: {url:?}"))?;
    let authority = rest.split('/').next().unwrap_or(rest);
    Ok(format!("{scheme}://{authority}/{database}{query}"))
}

/// Loads a kept database on its first run; later runs with the same record count find the
/// marker written beside it and skip the load.
async fn load_once(
    path: &std::path::Path,
    store: &dyn Store,
    corpus: &Corpus,
    args: &Args,
) -> Result<Loaded, BoxError> {
    let marker = path.with_extension("loaded");
    if let Ok(text) = std::fs::read_to_string(&marker) {
        let counts: Vec<u64> = text
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        if let [records, superseded] = counts[..]
            && records == args.records
        {
            println!("reusing {} (loaded earlier)", path.display());
            return Ok(Loaded {
                records,
                superseded,
                elapsed: None,
            });
        }
        return Err(format!(
            "{} holds another load; delete it and its marker",
            path.display()
        )
        .into());
    }
    let loaded = load(store, corpus, args.batch).await?;
    std::fs::write(&marker, format!("{} {}", args.records, loaded.superseded))?;
    Ok(loaded)
}

struct Loaded {
    records: u64,
    superseded: u64,
    /// `None` when an earlier run loaded the database.
    elapsed: Option<Duration>,
}

impl Loaded {
    fn timing(&self) -> String {
        match self.elapsed {
            Some(t) => format!(
                "{:.1} s ({:.0} records/s)",
                t.as_secs_f64(),
                self.records as f64 / t.as_secs_f64()
            ),
            None => "by an earlier run".into(),
        }
    }
}

/// Loads the corpus in phases: every family's first version, then the second versions,
/// and so on, each phase a day later, so that history is real supersession.
async fn load(store: &dyn Store, corpus: &Corpus, batch: usize) -> Result<Loaded, BoxError> {
    let start = Instant::now();
    let day0: DateTime<Utc> = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
    let max_versions = corpus.versions.iter().copied().max().unwrap_or(1);
    let total: u64 = corpus.versions.iter().map(|&v| u64::from(v)).sum();
    let (mut done, mut superseded, mut next_report) = (0u64, 0u64, (total / 10).max(1));
    for v in 0..u64::from(max_versions) {
        let families: Vec<u64> = (0..corpus.families())
            .filter(|&f| u64::from(corpus.versions[f as usize]) > v)
            .collect();
        for (b, chunk) in families.chunks(batch).enumerate() {
            let now = day0 + chrono::Duration::days(v as i64) + chrono::Duration::seconds(b as i64);
            let records = chunk.iter().map(|&f| Corpus::record(f, v)).collect();
            let outcomes = store.record_many(records, now).await?;
            for o in &outcomes {
                match o {
                    RecordOutcome::Inserted {
                        superseded: Some(_),
                        ..
                    } => superseded += 1,
                    RecordOutcome::Inserted { .. } => {}
                    RecordOutcome::Unchanged { id } => {
                        return Err(format!("record {id} unexpectedly unchanged").into());
                    }
                }
            }
            if v > 0 && superseded != done + outcomes.len() as u64 - corpus.families() {
                return Err("a later version did not supersede its family's record".into());
            }
            done += outcomes.len() as u64;
            if done >= next_report && done < total {
                next_report += (total / 10).max(1);
                let secs = start.elapsed().as_secs_f64();
                println!(
                    "  loaded {done}/{total} records ({:.0} records/s)",
                    done as f64 / secs
                );
            }
        }
    }
    Ok(Loaded {
        records: done,
        superseded,
        elapsed: Some(start.elapsed()),
    })
}

// ---------------------------------------------------------------------------------------
// Measurement
// ---------------------------------------------------------------------------------------

async fn timed_get(client: &reqwest::Client, url: &str) -> Result<Duration, BoxError> {
    let start = Instant::now();
    let response = client.get(url).send().await?;
    let status = response.status();
    let body = response.bytes().await?;
    let elapsed = start.elapsed();
    if !status.is_success() {
        return Err(format!("GET {url}: {status}: {}", String::from_utf8_lossy(&body)).into());
    }
    Ok(elapsed)
}

async fn timed_lookup(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    case: &LookupCase,
) -> Result<(Duration, bytes::Bytes), BoxError> {
    let start = Instant::now();
    let response = client
        .post(url)
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .body(case.body.clone())
        .send()
        .await?;
    let status = response.status();
    let bytes = response.bytes().await?;
    let elapsed = start.elapsed();
    if !status.is_success() {
        return Err(format!("lookup: {status}: {}", String::from_utf8_lossy(&bytes)).into());
    }
    Ok((elapsed, bytes))
}

/// Every known hash of the request found, every other one unknown.
fn check_lookup(case: &LookupCase, body: &[u8]) -> Result<(), BoxError> {
    let parsed: serde_json::Value = serde_json::from_slice(body)?;
    let results = parsed["results"]
        .as_object()
        .ok_or("lookup response without results")?;
    if results.len() != HASHES_PER_LOOKUP {
        return Err(format!("lookup returned {} results", results.len()).into());
    }
    for (hash, result) in results {
        let want = if case.known.contains(hash) {
            "known_vendor_release"
        } else {
            "unknown"
        };
        if result["classification"] != want {
            return Err(format!("{hash}: expected {want}, got {result}").into());
        }
    }
    Ok(())
}

/// One lookup request, built before any timing.
struct LookupCase {
    body: Vec<u8>,
    hashes: Vec<HashValue>,
    /// The hashes that name a current record.
    known: HashSet<String>,
}

fn lookup_cases(corpus: &Corpus, n: usize, rng: &mut Rng) -> Result<Vec<LookupCase>, BoxError> {
    (0..n)
        .map(|_| {
            let mut used = HashSet::new();
            let known: HashSet<String> = (0..KNOWN_PER_LOOKUP)
                .map(|_| corpus.known_hash(rng, &mut used))
                .collect();
            let mut hashes: Vec<String> = known.iter().cloned().collect();
            hashes.extend(
                (0..HASHES_PER_LOOKUP - KNOWN_PER_LOOKUP).map(|_| Corpus::unknown_hash(rng)),
            );
            // Known and unknown interleaved.
            for i in (1..hashes.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                hashes.swap(i, j);
            }
            Ok(LookupCase {
                body: serde_json::to_vec(&serde_json::json!({ "hashes": hashes }))?,
                hashes: hashes
                    .iter()
                    .map(|h| HashValue::parse(h))
                    .collect::<Result<_, _>>()?,
                known,
            })
        })
        .collect()
}

/// Lookup latencies during an ingest and, in alternating windows of as many lookups, with no writes.
struct IngestRun {
    quiet: Vec<Duration>,
    during: Vec<Duration>,
    records: u64,
    took: Duration,
    database_lookups: u64,
}

/// The `i`-th record of an ingest: even ones a new version of an existing family set aside
/// for ingests (which supersedes its current record), odd ones a new family. Digests carry `salt`, so that a
/// kept database gets new files on every run.
fn ingest_record(corpus: &Corpus, i: u64, salt: u64) -> NewRecord {
    let families = corpus.families();
    let mut r = if i.is_multiple_of(2) && families >= 16 {
        let f = (i / 2) % (families / 16) * 16 + 15;
        debug_assert!(Corpus::ingested(f));
        Corpus::record(f, u64::from(corpus.versions[f as usize]))
    } else {
        Corpus::record(families + i, 0)
    };
    r.hash_sha256 = hex_digest(&[30, salt, i], 64);
    r.hash_sha1 = r.hash_sha1.map(|_| hex_digest(&[31, salt, i], 40));
    r.hash_md5 = r.hash_md5.map(|_| hex_digest(&[32, salt, i], 32));
    r
}

#[allow(clippy::too_many_arguments)]
async fn lookups_during_ingest(
    args: &Args,
    corpus: &Corpus,
    store: &Arc<dyn Store>,
    client: &reqwest::Client,
    url: &str,
    key: &str,
    cases: &[LookupCase],
    index: &lookup::VendorIndex,
) -> Result<IngestRun, BoxError> {
    // Quiet and ingest windows alternate, each quiet window as many lookups as the ingest
    // window before it, so both sides are sampled as often and under the same conditions
    // (page cache, background rebuilds, the machine's other load).
    const WINDOWS: usize = 10;
    let database_before = index.database_lookups();
    let salt = Utc::now().timestamp_micros() as u64;
    let records: Vec<NewRecord> = (0..args.ingest)
        .map(|i| ingest_record(corpus, i, salt))
        .collect();
    let per_window = records.len().div_ceil(WINDOWS).max(1);
    let batch = args.ingest_batch;
    let mut quiet = Vec::new();
    let mut during = Vec::new();
    let mut written = 0u64;
    let mut took = Duration::ZERO;
    let mut next_case = cases.iter().cycle();
    for window in records.chunks(per_window) {
        let writer = Arc::clone(store);
        let window = window.to_vec();
        let ingest = tokio::spawn(async move {
            let started = Instant::now();
            let mut written = 0u64;
            for chunk in window.chunks(batch) {
                let outcomes = writer.record_many(chunk.to_vec(), Utc::now()).await?;
                written += outcomes
                    .iter()
                    .filter(|o| matches!(o, RecordOutcome::Inserted { .. }))
                    .count() as u64;
            }
            Ok::<_, model::Error>((written, started.elapsed()))
        });
        let before = during.len();
        for case in next_case.by_ref() {
            if ingest.is_finished() {
                break;
            }
            during.push(timed_lookup(client, url, key, case).await?.0);
        }
        let (n, t) = ingest.await??;
        written += n;
        took += t;
        // Let the last write's catch-up settle, as between two refreshes.
        tokio::time::sleep(Duration::from_millis(600)).await;
        for case in next_case.by_ref().take((during.len() - before).max(1)) {
            quiet.push(timed_lookup(client, url, key, case).await?.0);
        }
    }
    let records = written;

    Ok(IngestRun {
        quiet,
        during,
        records,
        took,
        database_lookups: index.database_lookups() - database_before,
    })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let corpus = Corpus::new(args.records);
    let (scratch, url) = Scratch::create(&args).await?;
    let result = run(&args, &corpus, &url).await;
    scratch.drop_database().await?;
    result
}

async fn run(args: &Args, corpus: &Corpus, url: &str) -> Result<(), BoxError> {
    let store = store::open(url, RecordSigner::new(b"bench-record-secret")).await?;
    let backend = store.backend();
    println!(
        "backend: {backend}; loading {} records in {} families (batches of {})",
        args.records,
        corpus.families(),
        args.batch
    );
    let loaded = match &args.sqlite_file {
        Some(path) => load_once(path, store.as_ref(), corpus, args).await?,
        None => load(store.as_ref(), corpus, args.batch).await?,
    };
    println!(
        "loaded {} records ({} superseded history): {}",
        loaded.records,
        loaded.superseded,
        loaded.timing()
    );

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let keys = auth::KeyHasher::new(b"bench-key-secret");
    // A team of its own per run: a kept database has the earlier runs' teams.
    let team = format!("bench-analyst-{}", Utc::now().timestamp_micros());
    let issued = keys.issue(&team)?;
    store
        .create_tenant_with_key(
            &team,
            TenantKind::Customer,
            // No monthly quota: a run makes tens of thousands of lookups.
            Tier::Enterprise,
            NewApiKey {
                key_id: issued.key_id.clone(),
                team_id: team.clone(),
                key_hash: issued.key_hash.clone(),
                role: Role::Analyst,
                label: "bench".into(),
            },
            clock.now(),
        )
        .await?;

    let state = support::unthrottled_state(Arc::clone(&store), keys, Arc::clone(&clock), &[7; 32])?;
    // Lookups are served from the in-memory index, which a server builds in the background
    // at start; here it is built up front and timed.
    let rss_before = rss_anon_kib();
    let started = Instant::now();
    let indexed = state.classifier.rebuild().await?;
    let index_build = started.elapsed();
    let index_kib = rss_anon_kib().saturating_sub(rss_before);
    let index = Arc::clone(state.classifier.index());
    let app = server::router(state);
    let serving = support::Serving::start(app.clone()).await?;
    let addr = serving.addr;

    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(1)
        .build()?;
    let healthz = format!("http://{addr}/healthz");
    let lookup = format!("http://{addr}/api/v1/intel/lookup");
    let mut rng = Rng(mix(&[99, Utc::now().timestamp_micros() as u64]));
    let warmup = (args.requests / 5).max(100);
    let cases = lookup_cases(corpus, warmup + args.requests, &mut rng)?;

    for case in &cases[..warmup] {
        timed_get(&client, &healthz).await?;
        let (_, body) = timed_lookup(&client, &lookup, &issued.key, case).await?;
        check_lookup(case, &body)?;
    }
    let mut health_samples = Vec::with_capacity(args.requests);
    let mut lookup_samples = Vec::with_capacity(args.requests);
    let started = Instant::now();
    let mut bodies = Vec::with_capacity(args.requests);
    for case in &cases[warmup..] {
        health_samples.push(timed_get(&client, &healthz).await?);
        let (elapsed, body) = timed_lookup(&client, &lookup, &issued.key, case).await?;
        lookup_samples.push(elapsed);
        bodies.push(body);
    }
    let wall = started.elapsed();
    // Checked after the timed run, so that the client's parsing does not share it.
    for (case, body) in cases[warmup..].iter().zip(&bodies) {
        check_lookup(case, body)?;
    }

    // Diagnostics, each over the same batches: the application without TCP and HTTP/1
    // (the router called in-process: access checks, JSON, handler); the store alone; one
    // database round trip (`SELECT 1`).
    let mut app_samples = Vec::with_capacity(args.requests);
    let mut store_samples = Vec::with_capacity(args.requests);
    let mut ping_samples = Vec::with_capacity(args.requests);
    for case in &cases[warmup..] {
        let mut request = axum::http::Request::post("/api/v1/intel/lookup")
            .header("x-api-key", &issued.key)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(case.body.clone()))?;
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                [127, 0, 0, 1],
                1,
            ))));
        let start = Instant::now();
        let response = app.clone().oneshot(request).await?;
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
        app_samples.push(start.elapsed());
        if !status.is_success() {
            return Err(format!("in-process lookup: {status}").into());
        }
        check_lookup(case, &body)?;
        let start = Instant::now();
        store.ping().await?;
        ping_samples.push(start.elapsed());
        let start = Instant::now();
        let found = store.find_by_hashes(&case.hashes, false).await?;
        store_samples.push(start.elapsed());
        if found.len() != KNOWN_PER_LOOKUP {
            return Err(format!("find_by_hashes found {} records", found.len()).into());
        }
    }

    let ingest = if args.ingest > 0 {
        Some(
            lookups_during_ingest(
                args,
                corpus,
                &store,
                &client,
                &lookup,
                &issued.key,
                &cases[warmup..],
                &index,
            )
            .await?,
        )
    } else {
        None
    };

    serving.stop().await?;
    store.close().await;

    let h = summarize(health_samples);
    let l = summarize(lookup_samples);
    let st = summarize(store_samples);
    let inproc = summarize(app_samples);
    let ping = summarize(ping_samples);
    let ratio = l.median.as_secs_f64() / h.median.as_secs_f64();
    println!("backend:  {backend}");
    println!(
        "records:  {} ({} superseded)",
        loaded.records, loaded.superseded
    );
    println!("load:     {}", loaded.timing());
    println!(
        "index:    {indexed} hashes in {:.1} s, anonymous memory +{:.0} MB",
        index_build.as_secs_f64(),
        index_kib as f64 * 1024.0 / 1e6
    );
    println!(
        "requests: {} of each, alternating, after {warmup} warm-up pairs ({:.1} s)",
        args.requests,
        wall.as_secs_f64()
    );
    println!(
        "GET /healthz                      median {:>10}  p90 {:>10}  p99 {:>10}",
        us(h.median),
        us(h.p90),
        us(h.p99)
    );
    println!(
        "POST /api/v1/intel/lookup (100)   median {:>10}  p90 {:>10}  p99 {:>10}",
        us(l.median),
        us(l.p90),
        us(l.p99)
    );
    println!(
        "  router in-process, no TCP       median {:>10}  p90 {:>10}  p99 {:>10}  (measured separately)",
        us(inproc.median),
        us(inproc.p90),
        us(inproc.p99)
    );
    println!(
        "  database path (find_by_hashes)  median {:>10}  p90 {:>10}  p99 {:>10}  (measured separately; used only before the first build)",
        us(st.median),
        us(st.p90),
        us(st.p99)
    );
    println!(
        "  one database round trip (ping)  median {:>10}  p90 {:>10}  p99 {:>10}  (measured separately)",
        us(ping.median),
        us(ping.p90),
        us(ping.p99)
    );
    println!(
        "ratio lookup/healthz median: {ratio:.2} (goal <= {GOAL:.1}): {}",
        if ratio <= GOAL { "MET" } else { "MISSED" }
    );
    if let Some(run) = ingest {
        let (n_quiet, n_during) = (run.quiet.len(), run.during.len());
        let q = summarize(run.quiet);
        let d = summarize(run.during);
        println!(
            "ingest:   {} new records in transactions of {} ({:.1} s, {:.0} records/s) into {}",
            run.records,
            args.ingest_batch,
            run.took.as_secs_f64(),
            run.records as f64 / run.took.as_secs_f64(),
            loaded.records
        );
        println!(
            "lookup, no ingest ({n_quiet:>6})       median {:>10}  p99 {:>10}",
            us(q.median),
            us(q.p99)
        );
        println!(
            "lookup, during ingest ({n_during:>6})   median {:>10}  p99 {:>10}  (database answered {})",
            us(d.median),
            us(d.p99),
            run.database_lookups
        );
        let p99 = d.p99.as_secs_f64() / q.p99.as_secs_f64();
        println!(
            "ratio during/without ingest: p50 {:.2}, p99 {p99:.2} (goal <= {INGEST_GOAL:.1}): {}",
            d.median.as_secs_f64() / q.median.as_secs_f64(),
            if p99 <= INGEST_GOAL { "MET" } else { "MISSED" }
        );
    }
    Ok(())
}
