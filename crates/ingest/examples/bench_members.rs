//! Files inside archives: one streamed pass of [`download_archive`] (archive hashed, members
//! inflated and hashed with SHA-256, SHA-1 and MD5, nothing on disk) against `sha256sum`,
//! `sha1sum` and `md5sum` of the same members already extracted to tmpfs, in one run.
//!
//! ```text
//! cargo run --release -p ingest --example bench_members -- [--mib 200] [--members 2000]
//! ```
//!
//! The archives are generated here: a zip of `--members` executables (an `MZ` header, then
//! bytes half random and half repeated, so deflate has work to do) totalling `--mib`, and a
//! `.deb` of half that size (`ar` with `debian-binary`, `control.tar.gz`, `data.tar.zst`)
//! with half as many members of the same kind. Each is served from memory over
//! loopback HTTP. The tools are timed on the extracted files (extraction not counted), each
//! tool once over all members, run one after another (the sum) and in parallel. Memory
//! growth during the pass is sampled from VmRSS every ~10 ms.
//!
//! Goals: tools (sum) / one pass >= 1.0; RSS growth <= 64 MB.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

use std::convert::Infallible;
use std::error::Error;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use bytes::Bytes;
use futures::stream;
use ingest::{ArchiveFormat, DownloadLimits, MemberLimits, download_archive};
use model::SystemClock;
use rand::RngCore;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const RUNS: usize = 3;

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

struct RssSampler {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<u64>,
}

impl RssSampler {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = thread::spawn(move || {
            let mut max = status_kib("VmRSS");
            while !flag.load(Ordering::Relaxed) {
                max = max.max(status_kib("VmRSS"));
                thread::sleep(Duration::from_millis(10));
            }
            max.max(status_kib("VmRSS"))
        });
        Self { stop, handle }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or(0)
    }
}

fn members(count: usize, total: usize) -> Vec<(String, Vec<u8>)> {
    let each = total / count;
    let mut rng = rand::rng();
    (0..count)
        .map(|i| {
            let mut data = vec![0u8; each];
            rng.fill_bytes(&mut data[..each / 2]);
            data[..2].copy_from_slice(b"MZ");
            for (j, b) in data[each / 2..].iter_mut().enumerate() {
                *b = (j % 61) as u8;
            }
            (format!("app-1.0.0/bin/tool{i:05}.exe"), data)
        })
        .collect()
}

fn zip_of(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(1));
    let mut out = Vec::new();
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(&mut out));
    for (name, data) in files {
        w.start_file(name.as_str(), options).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap();
    out
}

fn deb_of(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o755);
        b.append_data(&mut h, format!("./{name}"), data.as_slice())
            .unwrap();
    }
    let data = zstd::encode_all(b.into_inner().unwrap().as_slice(), 3).unwrap();
    let mut out = b"!<arch>\n".to_vec();
    for (name, body) in [
        ("debian-binary", b"2.0\n".to_vec()),
        ("control.tar.gz", vec![0u8; 10]),
        ("data.tar.zst", data),
    ] {
        let header = format!(
            "{name:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            0,
            0,
            0,
            "100644",
            body.len()
        );
        out.extend(header.bytes());
        out.extend(&body);
        if body.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    out
}

/// Runs `tool` over every file; returns its time and its first digest.
fn run_tool(tool: &str, paths: &[PathBuf]) -> Result<(Duration, String), Box<dyn Error>> {
    let started = Instant::now();
    let out = Command::new(tool)
        .args(paths)
        .stdout(Stdio::piped())
        .output()?;
    let t = started.elapsed();
    if !out.status.success() {
        return Err(format!("{tool} failed").into());
    }
    let text = String::from_utf8(out.stdout)?;
    let first = text
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    Ok((t, first))
}

struct Case {
    label: &'static str,
    format: ArchiveFormat,
    bytes: Bytes,
    files: Vec<(String, Vec<u8>)>,
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let (mut mib, mut count) = (200usize, 2000usize);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mib" => mib = args.next().ok_or("--mib needs a value")?.parse()?,
            "--members" => count = args.next().ok_or("--members needs a value")?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let zip_files = members(count, mib << 20);
    let deb_files = members(count / 2, mib << 19);
    let cases = vec![
        Case {
            label: "zip",
            format: ArchiveFormat::Zip,
            bytes: Bytes::from(zip_of(&zip_files)),
            files: zip_files,
        },
        Case {
            label: "deb",
            format: ArchiveFormat::Deb,
            bytes: Bytes::from(deb_of(&deb_files)),
            files: deb_files,
        },
    ];

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let client = reqwest::Client::builder().no_proxy().build()?;
    let limits = DownloadLimits {
        max_bytes: 8 << 30,
        connect_timeout: Duration::from_secs(60),
        total_timeout: Duration::from_secs(3600),
        ..DownloadLimits::default()
    };
    let member_limits = MemberLimits::default();
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };

    for case in cases {
        let served = case.bytes.clone();
        let url = rt.block_on(async move {
            let app = Router::new().route(
                "/archive",
                get(move || {
                    let data = served.clone();
                    async move {
                        let len = data.len();
                        let chunks = (0..len).step_by(1 << 20).map(move |at| {
                            Ok::<_, Infallible>(data.slice(at..(at + (1 << 20)).min(len)))
                        });
                        (
                            [(header::CONTENT_LENGTH, len.to_string())],
                            Body::from_stream(stream::iter(chunks)),
                        )
                            .into_response()
                    }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            tokio::spawn(async move { axum::serve(listener, app).await });
            Ok::<_, std::io::Error>(format!("http://{addr}/archive"))
        })?;

        // The members extracted to tmpfs for the tools (not timed).
        let dir = tempfile::tempdir_in(&base)?;
        let paths: Vec<PathBuf> = case
            .files
            .iter()
            .enumerate()
            .map(|(i, (_, data))| {
                let p = dir.path().join(format!("m{i:05}"));
                std::fs::write(&p, data).map(|()| p)
            })
            .collect::<Result<_, _>>()?;
        let member_bytes: usize = case.files.iter().map(|(_, d)| d.len()).sum();
        println!(
            "{}: {:.1} MB archive, {} members, {:.1} MB of members; best of {RUNS}",
            case.label,
            case.bytes.len() as f64 / 1e6,
            case.files.len(),
            member_bytes as f64 / 1e6
        );

        let (mut ours, mut sum, mut par) = (Duration::MAX, Duration::MAX, Duration::MAX);
        let mut growth_kib = 0u64;
        for run in 1..=RUNS {
            let rss_before = status_kib("VmRSS");
            let sampler = RssSampler::start();
            let started = Instant::now();
            let scanned = rt.block_on(download_archive(
                &client,
                &url,
                case.format,
                &limits,
                &member_limits,
                &SystemClock,
            ))?;
            let t = started.elapsed();
            let growth = sampler.stop().saturating_sub(rss_before);
            let scan = scanned.scan?;
            if scan.members.len() != case.files.len() {
                return Err(format!("found {} members", scan.members.len()).into());
            }
            ours = ours.min(t);
            growth_kib = growth_kib.max(growth);

            let mut tool_time = Duration::ZERO;
            let mut firsts = Vec::new();
            for tool in ["sha256sum", "sha1sum", "md5sum"] {
                let (t, first) = run_tool(tool, &paths)?;
                tool_time += t;
                firsts.push(first);
            }
            let first = &scan.members[0].digests;
            if firsts
                != [
                    first.sha256.as_str(),
                    first.sha1.as_str(),
                    first.md5.as_str(),
                ]
            {
                return Err("digests differ from the tools'".into());
            }
            sum = sum.min(tool_time);
            let started = Instant::now();
            let handles: Vec<_> = ["sha256sum", "sha1sum", "md5sum"]
                .into_iter()
                .map(|tool| {
                    let paths = paths.clone();
                    thread::spawn(move || run_tool(tool, &paths).map(|_| ()).is_ok())
                })
                .collect();
            for h in handles {
                if !h.join().unwrap_or(false) {
                    return Err("a tool failed".into());
                }
            }
            par = par.min(started.elapsed());
            println!(
                "  run {run}: one pass {:.3} s (growth {:.1} MB), tools one after another {:.3} s",
                t.as_secs_f64(),
                growth as f64 * 1024.0 / 1e6,
                tool_time.as_secs_f64()
            );
        }
        let ratio = sum.as_secs_f64() / ours.as_secs_f64();
        let growth_mb = growth_kib as f64 * 1024.0 / 1e6;
        println!(
            "  best: one pass {:.3} s; sha256sum+sha1sum+md5sum {:.3} s (in parallel {:.3} s)",
            ours.as_secs_f64(),
            sum.as_secs_f64(),
            par.as_secs_f64()
        );
        println!(
            "  ratio tools / one pass = {ratio:.2} (goal >= 1.0: {}); parallel tools / one pass = {:.2}; peak VmRSS growth {growth_mb:.1} MB (goal <= 64 MB: {})",
            if ratio >= 1.0 { "met" } else { "MISSED" },
            par.as_secs_f64() / ours.as_secs_f64(),
            if growth_mb <= 64.0 { "met" } else { "MISSED" }
        );
    }
    Ok(())
}
