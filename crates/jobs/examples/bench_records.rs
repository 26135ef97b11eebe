//! Records written per second and the daily root, against baselines measured in the same run.
//!
//! Synthetic records as a distribution refresh makes them: members of packages
//! (`usr/lib/x86_64-linux-gnu/libtool123s0.so.1`, `usr/bin/tool123s0-4`), each named by its
//! path as the distributions' ingestion names members, with their `.deb#path` source URLs
//! and three digests, several versions of each file (each newer version
//! supersedes the one before, as a history does). Each phase writes into a fresh store.
//!
//! 1. **import**: `admin import-records` hands the store the whole file in one
//!    `record_many`. Baseline: the one-row-at-a-time path, the same kind of records each in
//!    a transaction of its own (`record`, sequential).
//!    Then the console's name suggestions over the imported records: 50 name prefixes
//!    spread over the names, their median and slowest time. Baseline: the same by `LIKE`
//!    alone, as the store searched before (on SQLite a scan of the name index).
//! 2. **refresh**: the vendor refresh has up to 256 artifacts waiting for their records at
//!    once (the ingest pipeline's `MAX_ARTIFACTS_IN_FLIGHT`), each package's 8 files in one
//!    `record_many` call; concurrent calls share transactions. Baseline: the pipeline before,
//!    which held an artifact's turn while it waited, so at most 16 waited at once; the same
//!    number of records into a table of the same size. Then the next refresh as it usually
//!    goes: each file's newest version offered again, every record unchanged.
//! 3. **daily root**: `publish_day` over the import's current records, in a child process,
//!    for its time and peak memory (VmHWM). Baseline, in another child: the previous way,
//!    every current record loaded and the root computed in memory. Both roots must agree.
//!
//! 4. **disk**: the import's database, bytes a record: SQLite's file after a checkpoint and
//!    each table and index of the records (`dbstat`); PostgreSQL's `pg_total_relation_size`
//!    of the record tables and each index of `hash_records`.
//!    Then the transparency log, bytes a leaf: the leaves, stored once (`translog_entries`
//!    with its index, `translog_exits`), and what the day stores of its own
//!    (`translog_chunk_starts`, `translog_chunks`). Then a second day: a few percent of the
//!    files get a newer version, the day is published (its time), and the bytes it adds to
//!    every translog table, a leaf.
//!
//! 5. **older rows**: the import's rows put back as the store wrote them before migrations
//!    0029 and 0031 (whole source URLs; name key and family whole), then rewritten compact by
//!    the `records.compact` job's loop: rows/s, and on SQLite the bytes a record the record
//!    tables use before and after (`dbstat`'s page bytes less their unused bytes) and the
//!    free pages the rewrite left for new rows. No baseline: it measures what an upgrade
//!    costs.
//!
//! No lookup index follows the writes here (the server's catches up once per transaction).
//!
//! ```text
//! cargo run --release -p jobs --example bench_records -- [--records N (200000)] \
//!     [--versions V (4)] [--baseline M (3000)] [--postgres URL]
//! ```
//!
//! `--postgres URL` creates fresh databases on that server (the URL's database is only
//! used to create and drop them); SQLite uses files in a temporary directory.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, TimeZone, Utc};
use model::{Arch, NewRecord, Platform, RecordSigner};
use sqlx::Connection as _;
use store::{RecordOutcome, Store};

/// As in the `knowngood` binary, which `admin import-records` and the refresh run in.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The records/s goal of both write paths.
const GOAL: f64 = 20_000.0;
/// Artifacts the ingest pipeline has waiting for their records at once.
const REFRESH_TASKS: usize = ingest::pipeline::MAX_ARTIFACTS_IN_FLIGHT;
/// The same before artifacts gave up their turn while waiting: the artifacts at work.
const REFRESH_TASKS_BEFORE: usize = ingest::pipeline::MAX_WORKING_ARTIFACTS;
const SECRET: &[u8] = b"bench-records-secret";

struct Args {
    records: u64,
    versions: u64,
    baseline: u64,
    postgres: Option<String>,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, BoxError> {
    let mut args = Args {
        records: 200_000,
        versions: 4,
        baseline: 3_000,
        postgres: None,
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--records" => args.records = value()?.replace('_', "").parse()?,
            "--versions" => args.versions = value()?.parse()?,
            "--baseline" => args.baseline = value()?.replace('_', "").parse()?,
            "--postgres" => args.postgres = Some(value()?),
            "-h" | "--help" => {
                println!(
                    "bench_records [--records N (200000)] [--versions V (4)] [--baseline M (3000)] [--postgres URL]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    if args.records == 0 || args.versions == 0 || args.baseline == 0 {
        return Err("--records, --versions and --baseline must be positive".into());
    }
    Ok(args)
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d4_9bb1_33b1_11eb);
    z ^ (z >> 31)
}

fn digest(seed: u64, hex_len: usize) -> String {
    let mut out = String::with_capacity(hex_len);
    let mut state = seed;
    while out.len() < hex_len {
        state = splitmix(state);
        out.push_str(&format!("{state:016x}"));
    }
    out.truncate(hex_len);
    out
}

/// Version `v` (0 = oldest) of file `f` of the data set `set` (sets never share files).
fn record(set: u64, f: u64, v: u64) -> NewRecord {
    // The data set is in the package's name, so the sets' files differ.
    let n = f / 8;
    let package = format!("tool{n}s{set}");
    let (path, platform, arch) = match f % 4 {
        0 => (
            format!("usr/bin/{package}-{}", f % 8),
            Platform::Linux,
            Arch::Amd64,
        ),
        1 => (
            format!("usr/lib/x86_64-linux-gnu/lib{package}.so.{}", f % 8),
            Platform::Linux,
            Arch::Amd64,
        ),
        2 => (
            format!("usr/lib/aarch64-linux-gnu/lib{package}.so.{}", f % 8),
            Platform::Linux,
            Arch::Arm64,
        ),
        _ => (
            format!("usr/sbin/{package}d-{}", f % 8),
            Platform::Linux,
            Arch::Arm64,
        ),
    };
    let version = format!("{}.{}.{v}-{}", 1 + n % 7, n % 13, 1 + v % 3);
    let seed = (set << 56) ^ (f << 8) ^ v;
    NewRecord {
        vendor: "Debian bookworm".into(),
        // A member is named by its path, which its URL ends in, as the distributions'
        // ingestion names it.
        executable_name: path.clone(),
        version: version.clone(),
        platform,
        arch,
        hash_sha256: digest(seed ^ 0x256, 64),
        hash_sha1: Some(digest(seed ^ 0x1, 40)),
        hash_md5: Some(digest(seed ^ 0x5, 32)),
        source_url: format!(
            "https://deb.debian.org/debian/pool/main/t/{package}/{package}_{version}_{}.deb#{path}",
            arch.as_str()
        ),
        download_verified: true,
        sig_signer: None,
        sig_issuer: None,
        sig_serial: None,
        sig_thumbprint: None,
        size: Some(10_000 + seed % 1_000_000),
    }
}

/// `n` records of set `set`: files of `versions` versions each, oldest version first.
fn records(set: u64, n: u64, versions: u64) -> Vec<NewRecord> {
    let files = n.div_ceil(versions);
    let mut out = Vec::with_capacity(n as usize);
    'all: for v in 0..versions {
        for f in 0..files {
            if out.len() as u64 == n {
                break 'all;
            }
            out.push(record(set, f, v));
        }
    }
    out
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 5, 12, 0, 0).unwrap()
}

fn inserted(outcomes: &[RecordOutcome]) -> usize {
    outcomes
        .iter()
        .filter(|o| matches!(o, RecordOutcome::Inserted { .. }))
        .count()
}

/// A fresh database per phase, dropped at the end.
struct Databases {
    dir: tempfile::TempDir,
    postgres: Option<String>,
    created: Vec<String>,
}

impl Databases {
    async fn fresh(&mut self, name: &str) -> Result<String, BoxError> {
        match &self.postgres {
            None => Ok(format!(
                "sqlite://{}?mode=rwc",
                self.dir.path().join(format!("{name}.db")).display()
            )),
            Some(admin_url) => {
                let database = format!("bench_records_{name}_{}", std::process::id());
                let mut admin = sqlx::PgConnection::connect(admin_url).await?;
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {database} WITH (FORCE)"
                )))
                .execute(&mut admin)
                .await?;
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
                    .execute(&mut admin)
                    .await?;
                admin.close().await?;
                self.created.push(database.clone());
                with_database(admin_url, &database)
            }
        }
    }

    async fn drop_all(&self) -> Result<(), BoxError> {
        if let Some(admin_url) = &self.postgres {
            let mut admin = sqlx::PgConnection::connect(admin_url).await?;
            for database in &self.created {
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {database} WITH (FORCE)"
                )))
                .execute(&mut admin)
                .await?;
            }
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

async fn open(url: &str) -> Result<Arc<dyn Store>, BoxError> {
    Ok(store::open(url, RecordSigner::new(SECRET)).await?)
}

/// Files of one package version, recorded together as one archive's members are.
const FILES_AN_ARTIFACT: usize = 8;

/// Records `recs` as `tasks` artifacts at once (each task its share of artifacts, in order),
/// each artifact's files in one `record_many` call. The number inserted.
async fn record_concurrently(
    store: &Arc<dyn Store>,
    recs: Vec<NewRecord>,
    tasks: usize,
) -> Result<usize, BoxError> {
    let mut shares: Vec<Vec<Vec<NewRecord>>> = (0..tasks).map(|_| Vec::new()).collect();
    let mut recs = recs.into_iter().peekable();
    let mut i = 0;
    while recs.peek().is_some() {
        shares[i % tasks].push(recs.by_ref().take(FILES_AN_ARTIFACT).collect());
        i += 1;
    }
    let mut handles = Vec::new();
    for share in shares {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let mut n = 0usize;
            for artifact in share {
                n += inserted(&store.record_many(artifact, now()).await?);
            }
            Ok::<_, model::Error>(n)
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await??;
    }
    Ok(total)
}

fn rate(n: usize, secs: f64) -> f64 {
    n as f64 / secs.max(1e-9)
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The second published day of the translog phase.
fn next_day() -> DateTime<Utc> {
    now() + chrono::Duration::days(1)
}

/// The child process of the root phase: `--root-child streamed|next-day|in-memory URL`.
/// Prints `leaves secs vmhwm_kib root`.
async fn root_child(how: &str, url: &str) -> Result<(), BoxError> {
    let store = open(url).await?;
    let key = jobs::LogKey::new(&[7u8; 32]);
    let started = Instant::now();
    let (leaves, root) = match how {
        "streamed" | "next-day" => {
            let at = if how == "next-day" { next_day() } else { now() };
            let stored =
                jobs::publish::publish_day(store.as_ref(), &key, at, at.date_naive()).await?;
            (stored.entry_count, stored.merkle_root)
        }
        _ => {
            let records = store.current_records(None).await?;
            let mut leaves: Vec<(translog::Hash, [String; 5])> = records
                .iter()
                .filter(|r| r.integrity_ok)
                .map(|r| {
                    let n = &r.record;
                    let hash = translog::Record {
                        executable_name: &n.executable_name,
                        hash_sha256: &n.hash_sha256,
                        version: &n.version,
                        platform: n.platform.as_str(),
                        arch: n.arch.as_str(),
                    }
                    .leaf_hash()
                    .unwrap();
                    let fields = [
                        n.executable_name.clone(),
                        n.hash_sha256.clone(),
                        n.version.clone(),
                        n.platform.as_str().to_string(),
                        n.arch.as_str().to_string(),
                    ];
                    (hash, fields)
                })
                .collect();
            leaves.sort_by_key(|a| a.0);
            leaves.dedup_by(|a, b| a.0 == b.0);
            let hashes: Vec<translog::Hash> = leaves.iter().map(|l| l.0).collect();
            (
                hashes.len() as u64,
                hex::encode(translog::merkle_root(&hashes)),
            )
        }
    };
    let secs = started.elapsed().as_secs_f64();
    store.close().await;
    println!("{leaves} {secs} {} {root}", vm_hwm_kib());
    Ok(())
}

fn run_root_child(how: &str, url: &str) -> Result<(u64, f64, u64, String), BoxError> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .args(["--root-child", how, url])
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "{how} root child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = String::from_utf8(out.stdout)?;
    let f: Vec<&str> = text.split_whitespace().collect();
    if f.len() != 4 {
        return Err(format!("unexpected child output {text:?}").into());
    }
    Ok((
        f[0].parse()?,
        f[1].parse()?,
        f[2].parse()?,
        f[3].to_string(),
    ))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut raw = std::env::args().skip(1);
    let first = raw.next();
    if first.as_deref() == Some("--root-child") {
        let how = raw.next().ok_or("--root-child needs a mode")?;
        let url = raw.next().ok_or("--root-child needs a URL")?;
        return root_child(&how, &url).await;
    }
    let args = parse_args(first.into_iter().chain(raw))?;
    let mut dbs = Databases {
        dir: tempfile::tempdir()?,
        postgres: args.postgres.clone(),
        created: Vec::new(),
    };
    let backend = if args.postgres.is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    println!(
        "bench_records on {backend}: {} records ({} versions a file), baselines of {}",
        args.records, args.versions, args.baseline
    );

    // 1. import: one record_many, as `admin import-records` does with a file.
    let import_url = dbs.fresh("import").await?;
    let store = open(&import_url).await?;
    let recs = records(1, args.records, args.versions);
    let started = Instant::now();
    let outcomes = store.record_many(recs, now()).await?;
    let import_secs = started.elapsed().as_secs_f64();
    let import_rate = rate(outcomes.len(), import_secs);
    assert_eq!(inserted(&outcomes) as u64, args.records);
    store.close().await;

    let base_url = dbs.fresh("one_at_a_time").await?;
    let store = open(&base_url).await?;
    let recs = records(2, args.baseline, args.versions);
    let started = Instant::now();
    let mut n = 0;
    for r in recs {
        if matches!(
            store.record(r, now()).await?,
            RecordOutcome::Inserted { .. }
        ) {
            n += 1;
        }
    }
    let one_rate = rate(n, started.elapsed().as_secs_f64());
    assert_eq!(n as u64, args.baseline);
    store.close().await;
    println!(
        "import:  {} records in one record_many: {import_secs:.1} s, {import_rate:.0} records/s \
         (goal {GOAL:.0}: {})",
        args.records,
        if import_rate >= GOAL {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "         baseline, one record a transaction: {one_rate:.0} records/s; ratio {:.1}x",
        import_rate / one_rate
    );

    // The console's name suggestions over the import's records.
    let store = open(&import_url).await?;
    let prefixes = name_prefixes(1, args.records, args.versions);
    let mut took = Vec::with_capacity(prefixes.len());
    for prefix in &prefixes {
        let started = Instant::now();
        let names = store.executable_names_with_prefix(prefix, 10).await?;
        took.push(started.elapsed().as_secs_f64());
        assert!(!names.is_empty(), "{prefix} suggests nothing");
    }
    store.close().await;
    let like_alone = suggest_by_like_alone(&import_url, &prefixes).await?;
    let (median, slowest) = (median_of(&mut took), took[took.len() - 1]);
    let (base_median, base_slowest) = (
        median_of(&mut like_alone.clone()),
        like_alone.iter().copied().fold(0.0, f64::max),
    );
    println!(
        "names:   {} name-prefix suggestions (10 each) over the import: median {:.0} µs, \
         slowest {:.0} µs",
        prefixes.len(),
        median * 1e6,
        slowest * 1e6
    );
    println!(
        "         baseline, the same by LIKE alone (a scan of the name index): median {:.0} µs, \
         slowest {:.0} µs; ratio of medians {:.1}x",
        base_median * 1e6,
        base_slowest * 1e6,
        base_median / median
    );

    // 2. refresh: the pipeline's artifacts waiting at once, against its limit before.
    let refresh_url = dbs.fresh("refresh").await?;
    let store = open(&refresh_url).await?;
    let recs = records(3, args.records, args.versions);
    let started = Instant::now();
    let n = record_concurrently(&store, recs, REFRESH_TASKS).await?;
    let refresh_secs = started.elapsed().as_secs_f64();
    let refresh_rate = rate(n, refresh_secs);
    assert_eq!(n as u64, args.records);
    // The next refresh finds each file as it left it: its newest version offered again.
    let mut newest = std::collections::BTreeMap::new();
    for r in records(3, args.records, args.versions) {
        newest.insert((r.executable_name.clone(), r.arch), r);
    }
    let again: Vec<NewRecord> = newest.into_values().collect();
    let files = again.len();
    let started = Instant::now();
    let n = record_concurrently(&store, again, REFRESH_TASKS).await?;
    let again_secs = started.elapsed().as_secs_f64();
    assert_eq!(n, 0, "every file offered again is unchanged");
    store.close().await;
    let refresh_base_url = dbs.fresh("refresh_before").await?;
    let store = open(&refresh_base_url).await?;
    let recs = records(4, args.records, args.versions);
    let started = Instant::now();
    let n = record_concurrently(&store, recs, REFRESH_TASKS_BEFORE).await?;
    let refresh_before_rate = rate(n, started.elapsed().as_secs_f64());
    assert_eq!(n as u64, args.records);
    store.close().await;
    println!(
        "refresh: {} records, {REFRESH_TASKS} artifacts of {FILES_AN_ARTIFACT} files at once, \
         an artifact a `record_many`: {refresh_secs:.1} s, {refresh_rate:.0} records/s \
         (goal {GOAL:.0}: {})",
        args.records,
        if refresh_rate >= GOAL {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "         baseline, {REFRESH_TASKS_BEFORE} artifacts at once: {refresh_before_rate:.0} \
         records/s; ratio {:.1}x",
        refresh_rate / refresh_before_rate
    );
    println!(
        "         then each of the {files} files offered again, unchanged: {again_secs:.1} s, \
         {:.0} records/s",
        rate(files, again_secs)
    );

    // 3. the daily root over the import's current records, each way in its own process.
    let (base_leaves, base_secs, base_hwm, base_root) = run_root_child("in-memory", &import_url)?;
    let (leaves, secs, hwm, root) = run_root_child("streamed", &import_url)?;
    assert_eq!(
        (leaves, &root),
        (base_leaves, &base_root),
        "both ways give one root"
    );
    println!(
        "root:    {leaves} leaves streamed and stored by publish_day: {secs:.1} s, VmHWM {:.0} MiB",
        hwm as f64 / 1024.0
    );
    println!(
        "         baseline, all loaded and the root computed in memory (nothing stored): \
         {base_secs:.1} s, VmHWM {:.0} MiB; memory ratio {:.2}",
        base_hwm as f64 / 1024.0,
        hwm as f64 / base_hwm.max(1) as f64
    );

    // 4. disk: the import's database, and what the root stored in it.
    disk_usage(&import_url, args.records).await?;
    let Some(day1) = translog_bytes(&import_url).await? else {
        dbs.drop_all().await?;
        return Ok(());
    };
    let per_leaf = |bytes: i64| bytes as f64 / leaves.max(1) as f64;
    println!(
        "translog: {leaves} leaves stored once (entries and exits): {:.0} bytes a leaf \
         ({:.1} MiB); the day's chunk starts and chunk roots: {:.1} bytes a leaf",
        per_leaf(day1.once),
        day1.once as f64 / (1 << 20) as f64,
        per_leaf(day1.day)
    );
    // A second day: every 33rd file gets a newer version, which supersedes its current one.
    let files = args.records.div_ceil(args.versions);
    let changes: Vec<NewRecord> = (0..files)
        .step_by(33)
        .map(|f| record(1, f, args.versions))
        .collect();
    let changed = changes.len();
    let store = open(&import_url).await?;
    store.record_many(changes, next_day()).await?;
    store.close().await;
    let (leaves2, secs2, _, _) = run_root_child("next-day", &import_url)?;
    let day2 = translog_bytes(&import_url)
        .await?
        .ok_or("dbstat went away")?;
    println!(
        "          a second day, {changed} files changed ({:.1}% of the leaves): \
         {leaves2} leaves published in {secs2:.1} s, adding {:.1} bytes a leaf \
         (entries and exits {:.1}, chunk starts and roots {:.1})",
        100.0 * changed as f64 / leaves.max(1) as f64,
        per_leaf(day2.once + day2.day - day1.once - day1.day),
        per_leaf(day2.once - day1.once),
        per_leaf(day2.day - day1.day)
    );

    // 5. older rows, rewritten compact as after an upgrade.
    older_rows(&import_url).await?;
    dbs.drop_all().await?;
    Ok(())
}

/// SQLite: (bytes the record tables and their indexes use, bytes of free pages), after a
/// checkpoint; None on PostgreSQL or without `dbstat`.
async fn sqlite_used_bytes(url: &str) -> Result<Option<(i64, i64)>, BoxError> {
    if !url.starts_with("sqlite:") {
        return Ok(None);
    }
    let mut conn = sqlx::SqliteConnection::connect(url).await?;
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await?;
    let used: Result<(i64,), _> = sqlx::query_as(
        "SELECT SUM(d.pgsize - d.unused) FROM dbstat d JOIN sqlite_master m ON m.name = d.name \
         WHERE m.tbl_name IN ('hash_records', 'record_sources')",
    )
    .fetch_one(&mut conn)
    .await;
    let (free,): (i64,) = sqlx::query_as(
        "SELECT p.freelist_count * s.page_size FROM pragma_freelist_count p, pragma_page_size s",
    )
    .fetch_one(&mut conn)
    .await?;
    conn.close().await?;
    Ok(used.ok().map(|(used,)| (used, free)))
}

/// Phase 5: the rows of the store at `url` put back in their older form, then rewritten
/// compact by the `records.compact` job's loop.
async fn older_rows(url: &str) -> Result<(), BoxError> {
    let backend = if url.starts_with("sqlite:") {
        testkit::Backend::Sqlite
    } else {
        testkit::Backend::Postgres
    };
    let rows = testkit::db::exec(backend, url, testkit::db::RECORDS_AS_BEFORE_0029, &[]).await?;
    testkit::db::exec(backend, url, testkit::db::COMPACTION_FROM_THE_START, &[]).await?;
    let before = sqlite_used_bytes(url).await?;
    let store = open(url).await?;
    let started = Instant::now();
    let progress = jobs::compaction::compact_older_records(store.as_ref()).await?;
    let secs = started.elapsed().as_secs_f64();
    store.close().await;
    assert_eq!(progress.rewritten, rows, "every row is rewritten");
    println!(
        "older:   {rows} rows put back in their pre-0029 form, rewritten compact by \
         records.compact: {secs:.1} s, {:.0} rows/s",
        rate(rows as usize, secs)
    );
    let after = sqlite_used_bytes(url).await?;
    if let (Some((used_before, _)), Some((used_after, free))) = (before, after) {
        let per = |bytes: i64| bytes as f64 / rows as f64;
        println!(
            "         record tables and indexes in use: {:.0} bytes a row before, {:.0} after; \
             free pages left for new rows: {:.0} bytes a row",
            per(used_before),
            per(used_after),
            per(free)
        );
    }
    Ok(())
}

/// The tables of the records: `hash_records` and what every record write keeps beside it.
const RECORD_TABLES: [&str; 4] = [
    "hash_records",
    "record_sources",
    "record_counts",
    "records_unverified",
];

/// The tables of the transparency log's leaves, each stored once.
const LEAF_TABLES: [&str; 2] = ["translog_entries", "translog_exits"];
/// The tables of what each published day stores of its own beside its root.
const DAY_TABLES: [&str; 2] = ["translog_chunk_starts", "translog_chunks"];

/// Bytes of the transparency log's tables, with their indexes.
struct TranslogBytes {
    /// [`LEAF_TABLES`].
    once: i64,
    /// [`DAY_TABLES`].
    day: i64,
}

/// The bytes of the translog tables in the database at `url`; None (after saying why)
/// when this SQLite has no `dbstat`.
async fn translog_bytes(url: &str) -> Result<Option<TranslogBytes>, BoxError> {
    let mut sizes = Vec::new();
    if url.starts_with("sqlite://") {
        let mut conn = sqlx::SqliteConnection::connect(url).await?;
        for tables in [LEAF_TABLES, DAY_TABLES] {
            let mut total = 0;
            for table in tables {
                let stat: Result<(Option<i64>,), _> = sqlx::query_as(
                    "SELECT SUM(d.pgsize) FROM dbstat d JOIN sqlite_master m \
                     ON m.name = d.name WHERE m.tbl_name = $1",
                )
                .bind(table)
                .fetch_one(&mut conn)
                .await;
                match stat {
                    Ok((bytes,)) => total += bytes.unwrap_or(0),
                    Err(e) => {
                        println!("         (no dbstat in this SQLite: {e})");
                        return Ok(None);
                    }
                }
            }
            sizes.push(total);
        }
        conn.close().await?;
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        for tables in [LEAF_TABLES, DAY_TABLES] {
            let mut total = 0;
            for table in tables {
                let (bytes,): (i64,) =
                    sqlx::query_as("SELECT pg_total_relation_size($1::regclass)")
                        .bind(table)
                        .fetch_one(&mut conn)
                        .await?;
                total += bytes;
            }
            sizes.push(total);
        }
        conn.close().await?;
    }
    Ok(Some(TranslogBytes {
        once: sizes[0],
        day: sizes[1],
    }))
}

/// 50 name prefixes of data set `set`, spread over its packages and directories: each
/// names a package's files in one directory.
fn name_prefixes(set: u64, n: u64, versions: u64) -> Vec<String> {
    let packages = n.div_ceil(versions).div_ceil(8).max(1);
    (0..50u64)
        .map(|i| {
            let package = format!("tool{}s{set}", i * packages / 50);
            match i % 4 {
                0 => format!("usr/bin/{package}-"),
                1 => format!("usr/lib/x86_64-linux-gnu/lib{package}.so"),
                2 => format!("usr/lib/aarch64-linux-gnu/lib{package}.so"),
                _ => format!("usr/sbin/{package}d"),
            }
        })
        .collect()
}

/// Sorts `times` and gives their median.
fn median_of(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The seconds each of `prefixes` took as the store searched before: the names' `LIKE`
/// alone, which SQLite answers by scanning the name index (PostgreSQL's is now on
/// `text_pattern_ops`, which turns the `LIKE` into a range).
async fn suggest_by_like_alone(url: &str, prefixes: &[String]) -> Result<Vec<f64>, BoxError> {
    const KEY: &str = "COALESCE(NULLIF(name_key, ''), executable_name)";
    let sql = format!(
        "SELECT MIN(executable_name) FROM hash_records WHERE {KEY} LIKE $1 ESCAPE '\\' \
         GROUP BY {KEY} ORDER BY {KEY} LIMIT 10"
    );
    let mut took = Vec::with_capacity(prefixes.len());
    macro_rules! time_each {
        ($conn:expr) => {
            for prefix in prefixes {
                let started = Instant::now();
                let names: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.as_str()))
                    .bind(format!("{prefix}%"))
                    .fetch_all(&mut $conn)
                    .await?;
                took.push(started.elapsed().as_secs_f64());
                assert!(!names.is_empty(), "{prefix} finds nothing by LIKE");
            }
        };
    }
    if url.starts_with("sqlite://") {
        let mut conn = sqlx::SqliteConnection::connect(url).await?;
        time_each!(conn);
        conn.close().await?;
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        time_each!(conn);
        conn.close().await?;
    }
    Ok(took)
}

/// Prints the bytes a record of the database at `url` (written by the import) takes.
async fn disk_usage(url: &str, records: u64) -> Result<(), BoxError> {
    let per = |bytes: i64| bytes as f64 / records as f64;
    // (object, bytes): each table and index of the records.
    let mut objects: Vec<(String, i64)> = Vec::new();
    let (whole, whole_label) = if let Some(path) = url.strip_prefix("sqlite://") {
        let path = path.split('?').next().unwrap_or(path);
        let mut conn = sqlx::SqliteConnection::connect(url).await?;
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&mut conn)
            .await?;
        let file = std::fs::metadata(path)?.len() as i64;
        let stat: Result<Vec<(String, String, i64)>, _> = sqlx::query_as(
            "SELECT d.name, COALESCE(m.tbl_name, d.name), SUM(d.pgsize) FROM dbstat d \
             LEFT JOIN sqlite_master m ON m.name = d.name GROUP BY d.name",
        )
        .fetch_all(&mut conn)
        .await;
        match stat {
            Ok(rows) => objects.extend(
                rows.into_iter()
                    .filter(|(_, table, _)| RECORD_TABLES.contains(&table.as_str()))
                    .map(|(name, _, bytes)| (name, bytes)),
            ),
            Err(e) => println!("         (no dbstat in this SQLite: {e})"),
        }
        conn.close().await?;
        (file, "the whole file after a checkpoint")
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        let mut total = 0;
        for table in RECORD_TABLES {
            let (bytes,): (i64,) = sqlx::query_as("SELECT pg_total_relation_size($1::regclass)")
                .bind(table)
                .fetch_one(&mut conn)
                .await?;
            total += bytes;
        }
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT c.relname::text, pg_relation_size(c.oid) FROM pg_class c \
             WHERE c.oid = ANY($1::text[]::regclass[]) OR c.oid IN (SELECT indexrelid \
             FROM pg_index WHERE indrelid = ANY($1::text[]::regclass[]))",
        )
        .bind(RECORD_TABLES)
        .fetch_all(&mut conn)
        .await?;
        objects.extend(rows);
        conn.close().await?;
        (total, "pg_total_relation_size of the record tables")
    };
    objects.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let listed: i64 = objects.iter().map(|o| o.1).sum();
    println!(
        "disk:    {:.0} bytes a record ({whole_label}, {:.1} MiB for {records} records; goal 300)",
        per(whole),
        whole as f64 / (1 << 20) as f64
    );
    if !objects.is_empty() {
        println!(
            "         record tables and their indexes: {:.0} bytes a record",
            per(listed)
        );
        for (name, bytes) in &objects {
            println!("         {:>7.1}  {name}", per(*bytes));
        }
    }
    Ok(())
}
