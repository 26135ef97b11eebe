//! `knowngood`: one binary for the service and its administration.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use model::TenantKind;
use model::{Role, SystemClock, Tier};
use store::NewApiKey;
use tracing_subscriber::EnvFilter;

mod client;
mod config;
mod md5x16;
mod offline;
mod packages_db;
mod scan;
mod secrets;
mod verify;

/// glibc's allocator spends a large share of a lookup in `malloc` once the heap has been
/// through an index build; mimalloc keeps per-thread pages and does not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use config::{CommonArgs, Config};
use secrets::Secrets;

/// Known-good hash verification: is this file the genuine vendor build?
#[derive(Debug, Parser)]
#[command(name = "knowngood", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP service.
    Serve {
        #[command(flatten)]
        common: CommonArgs,
        /// Address to listen on [default: 127.0.0.1:8080]
        #[arg(long, env = "KNOWNGOOD_LISTEN")]
        listen: Option<String>,
    },
    /// Accounts and keys.
    #[command(subcommand)]
    Admin(AdminCommand),
    /// The transparency log.
    #[command(subcommand)]
    Translog(TranslogCommand),
    /// The signed offline bundle.
    #[command(subcommand)]
    Bundle(BundleCommand),
    /// The NSRL reference corpus.
    #[command(subcommand)]
    Nsrl(NsrlCommand),
    /// Signing-certificate revocation.
    #[command(subcommand)]
    Revocation(RevocationCommand),
    /// Package intelligence data.
    #[command(subcommand)]
    Packages(PackagesCommand),
    /// OSV advisories attached to SBOM components.
    #[command(subcommand)]
    Advisories(AdvisoriesCommand),
    /// Refresh vendor records now, in the foreground (the service does it daily).
    Ingest {
        #[command(flatten)]
        common: CommonArgs,
        /// Only this vendor (see --list).
        #[arg(long)]
        vendor: Option<String>,
        /// List every channel (id, kind, what it follows as configured, its last
        /// result in this data directory) and exit.
        #[arg(long)]
        list: bool,
        /// Queue the PyPI, npm and Debian/Ubuntu package versions a bill of materials
        /// lists (CycloneDX or SPDX, as `POST /api/v1/intel/coverage/requests` reads it),
        /// then record the queued versions now (with --vendor: only that channel's). Only
        /// (ecosystem, name, version) is kept.
        #[arg(long, value_name = "FILE", conflicts_with = "list")]
        from_sbom: Option<std::path::PathBuf>,
    },
    /// Classify hashes against a server: a table, or the answers as JSON. The key comes
    /// from KNOWNGOOD_API_KEY or --key-file, never from a flag.
    Lookup {
        #[command(flatten)]
        client: ClientArgs,
        /// Print the server's answers as JSON.
        #[arg(long)]
        json: bool,
        /// SHA-256, SHA-1 or MD5 values; `-` reads them from standard input.
        #[arg(required = true)]
        hashes: Vec<String>,
    },
    /// Hash every file under the paths (SHA-256, SHA-1, MD5 in one pass) and classify them:
    /// vendor releases (superseded builds flagged), known files, unknowns. Unreadable and
    /// special files are reported, never fatal.
    #[command(after_help = "Exit status:\n  \
        0  scanned\n  \
        1  an error (a path that does not exist, the server could not be asked, bad usage\n     \
           of the key)\n  \
        2  bad usage\n  \
        4  --fail-on-unknown and at least one file is unknown (with --packages: unknown,\n     \
           not covered or modified)\n  \
        5  --fail-on-unknown with --packages and at least one file is modified")]
    Scan {
        #[command(flatten)]
        client: ClientArgs,
        /// table, jsonl or csv.
        #[arg(long, value_enum, default_value_t = scan::Format::Table)]
        format: scan::Format,
        /// Exit 4 when any file is unknown.
        #[arg(long)]
        fail_on_unknown: bool,
        /// Files hashed at once [default: the number of CPUs].
        #[arg(long)]
        jobs: Option<usize>,
        /// Classify with this offline bundle (verified first) instead of a server.
        #[arg(long)]
        offline: Option<std::path::PathBuf>,
        /// With --offline: trust only this log public key (base64); repeatable.
        #[arg(long = "trust-key", requires = "offline")]
        trust_key: Vec<String>,
        /// When standard error is not a terminal: a progress line every this many
        /// seconds (0: none). On a terminal a progress bar shows instead.
        #[arg(long, default_value_t = 10)]
        progress_every: u64,
        /// Say why each unknown file an installed package owns is unknown, from dpkg's
        /// database (status and info/*.list): `modified` when another file of the package
        /// is known as a vendor release of the installed version (the file differs from
        /// the genuine build), else `not_covered`; then files, known, modified and not
        /// covered per package. Offline, a bundle filter's hit carries no version: there any
        /// known vendor file of the package counts as the package being known. The RPM
        /// database is not read yet.
        #[arg(long)]
        packages: bool,
        /// With --packages: the root of the system whose dpkg database is read
        /// (DIR/var/lib/dpkg); its files are named as scanned, under DIR.
        #[arg(long, requires = "packages", default_value = "/")]
        dpkg_root: std::path::PathBuf,
        #[arg(required = true)]
        paths: Vec<std::path::PathBuf>,
    },
    /// Check, independently of the server's own claims, that a SHA-256 is in a day's
    /// signed transparency root (and that the daily roots chain).
    #[command(after_help = "Exit status:\n  \
        0  verified\n  \
        1  a check failed, the file is not in that day's tree, or an error\n  \
        2  bad usage\n  \
        3  not yet in a signed root, as the server says: the file was recorded after the day's\n     \
           root and will be in the next day's root; nothing is verified yet (verify again\n     \
           once that root is published)")]
    Verify {
        /// Base URL of a knowngood server.
        #[arg(long)]
        server: Option<String>,
        /// SHA-256 of the file.
        #[arg(long, required_unless_present = "bundle")]
        sha256: Option<String>,
        /// Verify an offline bundle directory instead: its signed manifest, every file,
        /// the day's root signature, and the root rebuilt from its feed list.
        #[arg(long, conflicts_with_all = ["sha256", "server", "offline", "save", "date"])]
        bundle: Option<std::path::PathBuf>,
        /// Day of the root [default: the latest published].
        #[arg(long)]
        date: Option<String>,
        /// Also verify the chain of roots this many days back.
        #[arg(long, default_value_t = 0)]
        chain: u32,
        /// Save the fetched documents into this directory.
        #[arg(long)]
        save: Option<std::path::PathBuf>,
        /// Verify from saved documents instead of a server.
        #[arg(long)]
        offline: Option<std::path::PathBuf>,
        /// Trust only this log public key (base64), obtained out of band; repeatable.
        #[arg(long = "trust-key")]
        trust_key: Vec<String>,
    },
}

/// Where the server is and where the key is read from.
#[derive(Debug, clap::Args)]
struct ClientArgs {
    /// Base URL of a knowngood server.
    #[arg(
        long,
        env = "KNOWNGOOD_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    server: String,
    /// Read the API key from this file (first line) instead of KNOWNGOOD_API_KEY.
    #[arg(long)]
    key_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum BundleCommand {
    /// Write the signed offline bundle (filters over the current vendor records and the
    /// reference corpus, the latest day's feed list and root, the signed manifest) into DIR.
    Export {
        #[command(flatten)]
        common: CommonArgs,
        /// Permissions of the written files, in octal (e.g. 0644 to hand the bundle over on
        /// removable media); directories get the matching search bits. [default: 0600,
        /// readable by the exporting user only]
        #[arg(long, value_parser = offline::parse_mode)]
        mode: Option<u32>,
        dir: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum NsrlCommand {
    /// Import NIST RDS v3 SQLite databases (minimal or full layout) into a new corpus
    /// generation beside the live one; a running server swaps it in within seconds.
    Import {
        #[command(flatten)]
        common: CommonArgs,
        /// RDS v3 SQLite files; several merge into one corpus.
        #[arg(required = true)]
        paths: Vec<std::path::PathBuf>,
        /// The RDS set these files belong to.
        #[arg(long, default_value = "modern", value_parser = ["modern", "android", "ios", "legacy"])]
        set: String,
    },
}

#[derive(Debug, Subcommand)]
enum RevocationCommand {
    /// Check every recorded signing certificate against its issuer's CRL now, in the
    /// foreground (the service does it every 6 hours).
    Check {
        #[command(flatten)]
        common: CommonArgs,
        /// Refetch CRLs (conditionally) even before their nextUpdate.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
enum AdvisoriesCommand {
    /// Import OSV advisories: JSON documents, directories of them, or an ecosystem's
    /// `all.zip` as OSV publishes it. npm, PyPI and Go entries are kept; a document already
    /// imported is replaced unless the stored one was modified later.
    Import {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(required = true)]
        paths: Vec<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum PackagesCommand {
    /// Replace an ecosystem's popular-name list (what typosquat analysis compares with) from
    /// a registry listing: a PyPI table with a `rank_…` column, an npm table with a
    /// `downloads…` column, a Go table with a `dependents…` column (modules requiring each),
    /// or a `name<TAB>rank` list. Takes effect at the next start.
    RefreshPopular {
        #[command(flatten)]
        common: CommonArgs,
        /// npm, pypi or go.
        #[arg(long)]
        ecosystem: String,
        /// The listing (tab-separated, with a header line).
        file: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum TranslogCommand {
    /// Publish the day's signed root now (once per day; a second run prints the stored root).
    Publish {
        #[command(flatten)]
        common: CommonArgs,
        /// UTC day [default: today].
        #[arg(long)]
        date: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Create the platform tenant and its platform_owner key; prints the key once.
    Bootstrap {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Create a customer account; prints its first key once.
    CreateAccount {
        #[command(flatten)]
        common: CommonArgs,
        /// Team id: 3-63 characters of a-z, 0-9 and '-'.
        #[arg(long)]
        team: String,
        /// free, basic, teams (or paid) or enterprise.
        #[arg(long)]
        tier: String,
        /// analyst, auditor or account_admin.
        #[arg(long, default_value = "account_admin")]
        role: String,
    },
    /// Issue another key to an existing account (e.g. an account_admin for an account
    /// created with an analyst key); prints the key once. The account admin then invites
    /// people (console Keys page, or POST /api/v1/admin/invites).
    AddKey {
        #[command(flatten)]
        common: CommonArgs,
        /// The account's team id.
        #[arg(long)]
        team: String,
        /// analyst, auditor or account_admin (platform roles on the platform tenant only).
        #[arg(long, default_value = "account_admin")]
        role: String,
        /// A label for the key [default: "<role> key"].
        #[arg(long)]
        label: Option<String>,
    },
    /// Invite a person into an existing account with a role; prints the invite code once
    /// (valid 7 days). They redeem it on the console's invite page, then sign in with the
    /// passkey or authenticator app they enrol there.
    Invite {
        #[command(flatten)]
        common: CommonArgs,
        /// The account's team id.
        #[arg(long)]
        team: String,
        /// analyst, auditor or account_admin.
        #[arg(long, default_value = "analyst")]
        role: String,
        /// The person's name, as the account's user list shows it.
        #[arg(long)]
        name: String,
        /// How you will hand them the code (e-mail address, chat handle): shown beside the
        /// pending invite; nothing is sent.
        #[arg(long)]
        contact: String,
    },
    /// Record vendor files from a JSON Lines file (one record per line, the fields of a
    /// hash record without id and validity), e.g. from an offline mirror. Prints a summary.
    ImportRecords {
        #[command(flatten)]
        common: CommonArgs,
        /// JSON Lines file; `-` for standard input.
        file: std::path::PathBuf,
    },
    /// Rotate the JWT signing key; tokens signed by the old key keep verifying. Restart
    /// the replicas afterwards (one at a time) so they sign with the new key.
    RotateJwtKey {
        #[command(flatten)]
        common: CommonArgs,
    },
}

fn main() -> std::process::ExitCode {
    // Everything this process creates (data dir, SQLite database and its -wal/-shm, corpus
    // generations, saved documents) is for its own user only.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let cli = Cli::parse();
    init_logging(cli.command.default_log_level());
    let outcome = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| runtime.block_on(run(cli)));
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            if let Some(modified) = e.downcast_ref::<scan::ModifiedFiles>() {
                eprintln!("{modified}");
                return std::process::ExitCode::from(scan::EXIT_MODIFIED);
            }
            if let Some(unknown) = e.downcast_ref::<scan::UnknownFiles>() {
                eprintln!("{unknown}");
                return std::process::ExitCode::from(scan::EXIT_UNKNOWN);
            }
            if let Some(pending) = e.downcast_ref::<verify::NotYetIncluded>() {
                eprintln!("{pending}");
                return std::process::ExitCode::from(verify::EXIT_NOT_YET_INCLUDED);
            }
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(verify::EXIT_FAILED)
        }
    }
}

impl Command {
    /// The log level when `RUST_LOG` does not say: the service and the long foreground
    /// jobs (ingest, NSRL import, revocation check) log their progress at `info`; the
    /// short administrative commands print their result on stdout and log only warnings.
    fn default_log_level(&self) -> &'static str {
        match self {
            // Each channel's problems are printed once, in its report line's list, not
            // also as log lines.
            Command::Ingest { .. } => "info,ingest::pipeline=error",
            Command::Serve { .. } | Command::Nsrl(_) | Command::Revocation(_) => "info",
            _ => "warn",
        }
    }
}

/// Logs go to stderr so that stdout carries only what a command prints on purpose (e.g. a
/// new key). `RUST_LOG` filters them (default: [`Command::default_log_level`]);
/// `KNOWNGOOD_LOG_FORMAT=json` writes one JSON object per line for log collectors.
fn init_logging(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var("KNOWNGOOD_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json")) {
        logs.json().init();
    } else {
        logs.init();
    }
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve { common, listen } => {
            serve(Config::resolve(&common, listen.as_deref())?).await
        }
        Command::Admin(AdminCommand::Bootstrap { common }) => {
            let key = create_tenant(
                &Config::resolve(&common, None)?,
                "platform",
                TenantKind::Platform,
                Tier::Enterprise,
                Role::PlatformOwner,
            )
            .await
            .map_err(|e| match e.downcast_ref::<model::Error>() {
                Some(model::Error::Conflict(_)) => {
                    anyhow::anyhow!("already bootstrapped: the platform tenant exists")
                }
                _ => e,
            })?;
            println!("{key}");
            Ok(())
        }
        Command::Ingest {
            common,
            vendor,
            list,
            from_sbom,
        } => {
            let config = Config::resolve(&common, None)?;
            if list {
                return list_channels(&config).await;
            }
            // Read before the store opens: a file that is no bill of materials changes nothing.
            let plan = match &from_sbom {
                Some(path) => Some(sbom_plan(path)?),
                None => None,
            };
            let secrets = Secrets::load_or_generate(&config.data_dir, &config.secrets)?;
            let store = open_store(&config, &secrets).await?;
            // In the foreground a failure is reported at once; the scheduler retries.
            let options = jobs::refresh::RefreshOptions {
                attempts: 1,
                ..config.settings.jobs.refresh.clone()
            };
            let print = |r: &ingest::VendorReport| {
                let state = if r.skipped {
                    "disabled".to_string()
                } else {
                    format!(
                        "{} found, {} new, {} unchanged, {} downloaded, {} rejected ({} hash mismatches), {} errors",
                        r.discovered,
                        r.recorded,
                        r.unchanged,
                        r.downloaded,
                        r.rejected,
                        r.mismatches,
                        r.errors
                    )
                };
                println!("{:<22} {state}", r.fetcher);
                for p in &r.problems {
                    eprintln!("    {}: {}", p.kind.as_str(), p.message);
                }
            };
            let reports = match plan {
                Some(plan) => {
                    let clock: Arc<dyn model::Clock> = Arc::new(SystemClock);
                    match jobs::coverage::request(store.as_ref(), &plan.items, clock.now()).await {
                        Ok(done) => {
                            println!(
                                "{} components: {} queued, {} already queued, {} known, {} refused, {} not followed",
                                plan.components,
                                done.queued.len(),
                                done.already_queued.len(),
                                done.known.len(),
                                plan.refused.len(),
                                plan.not_followed.values().sum::<u64>()
                            );
                            for r in &plan.refused {
                                eprintln!(
                                    "    refused {} {} {}: {}",
                                    r.ecosystem, r.name, r.version, r.reason
                                );
                            }
                            jobs::refresh::refresh_queued(
                                store.clone(),
                                clock,
                                &options,
                                vendor.as_deref(),
                                &print,
                            )
                            .await
                        }
                        Err(e) => Err(e),
                    }
                }
                None => {
                    jobs::refresh::refresh_vendors(
                        store.clone(),
                        Arc::new(SystemClock),
                        &options,
                        vendor.as_deref(),
                        &print,
                    )
                    .await
                }
            };
            store.close().await;
            let reports = reports?;
            if reports.iter().any(|r| r.errors > 0 || r.mismatches > 0) {
                bail!("some vendors failed; see above");
            }
            Ok(())
        }
        Command::Revocation(RevocationCommand::Check { common, force }) => {
            let config = Config::resolve(&common, None)?;
            let secrets = Secrets::load_or_generate(&config.data_dir, &config.secrets)?;
            let store = open_store(&config, &secrets).await?;
            let jobs = &config.settings.jobs;
            let report = jobs::revocation::check(
                store.as_ref(),
                &SystemClock,
                &jobs.revocation,
                &jobs.refresh.outbound,
                force,
            )
            .await;
            store.close().await;
            let report = report?;
            println!(
                "{} certificates ({} checked), {} CRLs ({} verified, {} fetched), {} newly revoked, {} holds released",
                report.certificates,
                report.checked,
                report.crls,
                report.crls_good,
                report.fetched,
                report.newly_revoked,
                report.released
            );
            for (url, error) in &report.errors {
                eprintln!("    {url}: {error}");
            }
            if !report.errors.is_empty() {
                bail!("some CRLs could not be used; see above");
            }
            Ok(())
        }
        Command::Packages(PackagesCommand::RefreshPopular {
            common,
            ecosystem,
            file,
        }) => {
            let config = Config::resolve(&common, None)?;
            let ecosystem: packages::Ecosystem =
                ecosystem.parse().map_err(|e: String| anyhow::anyhow!(e))?;
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let mut list = packages::PopularList::parse(ecosystem, &text)?;
            if list.names.is_empty() {
                bail!("{} holds no ranked {ecosystem} names", file.display());
            }
            list.header.insert(
                0,
                format!(
                    "Popular {ecosystem} names, refreshed {} from {}",
                    chrono::Utc::now().date_naive(),
                    file.display()
                ),
            );
            let path = popular_list_path(&config.data_dir, ecosystem);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = path.with_extension("tsv.tmp");
            std::fs::write(&tmp, list.to_tsv())?;
            std::fs::rename(&tmp, &path)?;
            println!(
                "{ecosystem}: {} popular names written to {} (used from the next start)",
                list.names.len(),
                path.display()
            );
            Ok(())
        }
        Command::Advisories(AdvisoriesCommand::Import { common, paths }) => {
            let config = Config::resolve(&common, None)?;
            let secrets = Secrets::load_or_generate(&config.data_dir, &config.secrets)?;
            let mut read = jobs::advisories::Reader::default();
            for path in &paths {
                read.path(path)
                    .with_context(|| format!("reading {}", path.display()))?;
            }
            let not_kept = read.not_kept_lines();
            let jobs::advisories::Reader { rows, skipped, .. } = read;
            let store = open_store(&config, &secrets).await?;
            let written =
                jobs::advisories::import(store.as_ref(), &rows, chrono::Utc::now()).await?;
            store.close().await;
            println!(
                "{} advisories for npm, PyPI or Go read, {written} imported ({} older than the stored ones); {skipped} documents for other ecosystems skipped",
                rows.len(),
                rows.len() as u64 - written
            );
            if !not_kept.is_empty() {
                println!("affected packages not kept, by reason:");
                for line in not_kept {
                    println!("  {line}");
                }
            }
            Ok(())
        }
        Command::Nsrl(NsrlCommand::Import { common, paths, set }) => {
            let config = Config::resolve(&common, None)?;
            let set = match set.as_str() {
                "android" => corpus::SetName::Android,
                "ios" => corpus::SetName::Ios,
                "legacy" => corpus::SetName::Legacy,
                _ => corpus::SetName::Modern,
            };
            let inputs: Vec<_> = paths.into_iter().map(|p| (p, set)).collect();
            let root = config.corpus_dir.clone();
            let info = tokio::task::spawn_blocking(move || {
                corpus::import(&inputs, &root, &corpus::TerminalProgress::new())
            })
            .await??;
            println!(
                "{}: {} distinct SHA-256 ({} SHA-1, {} MD5), {} bytes on disk",
                info.generation,
                info.entries,
                info.sha1_entries,
                info.md5_entries,
                info.bytes_on_disk
            );
            Ok(())
        }
        Command::Translog(TranslogCommand::Publish { common, date }) => {
            let config = Config::resolve(&common, None)?;
            let secrets = Secrets::load_or_generate(&config.data_dir, &config.secrets)?;
            let store = open_store(&config, &secrets).await?;
            let now = chrono::Utc::now();
            let date = match date {
                Some(d) => verify::parse_date_arg(&d)?,
                None => now.date_naive(),
            };
            let key = jobs::LogKey::new(&secrets.log_ed25519);
            let root = jobs::publish::publish_day(store.as_ref(), &key, now, date).await;
            store.close().await;
            let root = root?;
            println!(
                "{} {} entries root {} prev {}",
                root.log_date, root.entry_count, root.merkle_root, root.prev_root
            );
            Ok(())
        }
        Command::Bundle(BundleCommand::Export { common, mode, dir }) => {
            let config = Config::resolve(&common, None)?;
            let secrets = Secrets::load_or_generate(&config.data_dir, &config.secrets)?;
            let store = open_store(&config, &secrets).await?;
            let key = jobs::LogKey::new(&secrets.log_ed25519);
            let corpus_root = config.corpus_dir.clone();
            // Mapped, not resident: the filters read each table once, in order, so the
            // tables need not be copied into memory (the page cache serves them).
            let options = corpus::OpenOptions {
                verify: corpus::Verify::Full,
                memory: corpus::Memory::Mapped,
            };
            let corpus = tokio::task::spawn_blocking(move || {
                corpus::Corpus::open_with(&corpus_root, options)
            })
            .await?
            .context("opening the reference corpus")?;
            let outcome = offline::export(store.as_ref(), &key, corpus.current(), &dir).await;
            store.close().await;
            let written = outcome?;
            if let Some(mode) = mode {
                offline::set_modes(&dir, mode)?;
            }
            println!("{written}");
            Ok(())
        }
        Command::Lookup {
            client,
            json,
            hashes,
        } => client::run_lookup(&client.server, client.key_file.as_deref(), json, &hashes).await,
        Command::Scan {
            client,
            format,
            fail_on_unknown,
            jobs,
            offline,
            trust_key,
            progress_every,
            packages,
            dpkg_root,
            paths,
        } => {
            let jobs = jobs.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(2, std::num::NonZero::get)
            });
            scan::run(scan::ScanArgs {
                paths,
                server: client.server,
                key_file: client.key_file,
                format,
                fail_on_unknown,
                jobs,
                offline,
                trust_keys: trust_key,
                progress_every: std::time::Duration::from_secs(progress_every),
                packages: packages.then_some(dpkg_root),
            })
            .await
        }
        Command::Verify {
            bundle: Some(dir),
            trust_key,
            ..
        } => {
            let verified = offline::verify_bundle(&dir, &trust_key)?;
            println!("{}", offline::describe(&verified));
            Ok(())
        }
        Command::Verify {
            server,
            sha256,
            date,
            chain,
            save,
            offline,
            trust_key,
            bundle: None,
        } => {
            verify::run(verify::VerifyArgs {
                server,
                sha256: sha256.unwrap_or_default(),
                date,
                chain,
                save,
                offline,
                trusted_keys: trust_key,
            })
            .await
        }
        Command::Admin(AdminCommand::AddKey {
            common,
            team,
            role,
            label,
        }) => {
            let role: Role = role.parse()?;
            let key = add_key(&Config::resolve(&common, None)?, &team, role, label).await?;
            println!("{key}");
            Ok(())
        }
        Command::Admin(AdminCommand::Invite {
            common,
            team,
            role,
            name,
            contact,
        }) => {
            let role: Role = role.parse()?;
            let config = Config::resolve(&common, None)?;
            let invite = invite(&config, &team, role, &name, &contact).await?;
            // The configured console origin; on the default (any port on localhost) the
            // path alone.
            let rp = &config.settings.relying_party;
            let page = if rp.any_port {
                "/console/invite".to_string()
            } else {
                format!("{}console/invite", rp.origin)
            };
            println!("{}", invite.code);
            eprintln!(
                "invite {} for {name} ({role}) in {team}, valid until {}; they redeem the code at {page}",
                invite.invite_id,
                model::record::rfc3339(invite.expires_at)
            );
            Ok(())
        }
        Command::Admin(AdminCommand::ImportRecords { common, file }) => {
            let config = Config::resolve(&common, None)?;
            let secrets = Secrets::load_or_generate(&config.data_dir, &config.secrets)?;
            // The whole file is checked before the database is touched.
            let records = read_records(&file)?;
            let store = open_store(&config, &secrets).await?;
            let outcome = import_records(store.as_ref(), records).await;
            store.close().await;
            let (inserted, unchanged) = outcome?;
            println!("{inserted} recorded, {unchanged} unchanged");
            Ok(())
        }
        Command::Admin(AdminCommand::RotateJwtKey { common }) => {
            let config = Config::resolve(&common, None)?;
            if config.secrets.jwt_private_key_pem.is_some() {
                bail!(
                    "the JWT key comes from the configuration; rotate it there (move the old key to jwt_retired_keys_pem)"
                );
            }
            let path = secrets::rotate_jwt_key(&config.data_dir)?;
            eprintln!("new JWT signing key at {path}; restart the replicas to sign with it");
            Ok(())
        }
        Command::Admin(AdminCommand::CreateAccount {
            common,
            team,
            tier,
            role,
        }) => {
            let tier: Tier = tier.parse()?;
            let role: Role = role.parse()?;
            if role.is_platform() {
                bail!(
                    "{role} is a platform role; customer accounts take analyst, auditor or account_admin"
                );
            }
            let key = create_tenant(
                &Config::resolve(&common, None)?,
                &team,
                TenantKind::Customer,
                tier,
                role,
            )
            .await?;
            println!("{key}");
            Ok(())
        }
    }
}

/// The package versions a bill of materials asks the coverage queue for (`ingest
/// --from-sbom`), read within the SBOM route's size limit.
fn sbom_plan(path: &std::path::Path) -> Result<jobs::coverage::Plan> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .with_context(|| format!("{shown}"))?
        .len();
    let limit = server::routes::coverage::MAX_SBOM_BYTES;
    if size > limit as u64 {
        bail!("{shown}: {size} bytes; a bill of materials may have at most {limit}");
    }
    let body = std::fs::read(path).with_context(|| format!("{shown}"))?;
    let sbom = packages::sbom::parse(&body).map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
    jobs::coverage::plan(&sbom).map_err(|e| anyhow::anyhow!("{shown}: {e}"))
}

/// `knowngood ingest --list`: one line per channel under a header: id, kind, vendor, what
/// it follows (the configured channel, with its packages or releases) and the last result
/// recorded in this data directory's database (none is created to say so).
async fn list_channels(config: &Config) -> Result<()> {
    let sqlite_missing = config
        .database_url
        .strip_prefix("sqlite:")
        .map(|rest| rest.trim_start_matches("//"))
        .map(|rest| rest.split('?').next().unwrap_or(rest))
        .is_some_and(|path| !std::path::Path::new(path).exists());
    let health: std::collections::HashMap<String, store::VendorHealth> = if sqlite_missing {
        Default::default()
    } else {
        let secrets = Secrets::load_or_generate(&config.data_dir, &config.secrets)?;
        let store = open_store(config, &secrets).await?;
        let health = store.vendor_health().await;
        store.close().await;
        health?.into_iter().map(|h| (h.vendor.clone(), h)).collect()
    };
    let mut lines = vec![[
        "ID".to_string(),
        "KIND".into(),
        "VENDOR".into(),
        "FOLLOWS".into(),
        "LAST RESULT".into(),
    ]];
    for setup in ingest::vendors::all() {
        let channel = jobs::refresh::channel_config(&setup, &config.settings.jobs.refresh);
        let id = setup.fetcher.id().to_string();
        let kind = match id.as_str() {
            "debian" | "ubuntu" | "archlinux" | "rockylinux" => "distribution",
            "pypi" | "npm" | "gomod" => "package registry",
            "fdroid" => "app repository",
            _ => "vendor releases",
        };
        let mut follows = channel.base_url.clone();
        let mut extra = Vec::new();
        if !channel.releases.is_empty() {
            extra.push(format!("releases {}", channel.releases.join(",")));
        }
        if !channel.items.is_empty() {
            let shown: Vec<&str> = channel.items.iter().take(3).map(String::as_str).collect();
            let more = channel.items.len().saturating_sub(3);
            extra.push(if more > 0 {
                format!("{} and {more} more", shown.join(","))
            } else {
                shown.join(",")
            });
        }
        if let Some(file) = &channel.items_file {
            extra.push(format!("and the list in {}", file.display()));
        }
        if !extra.is_empty() {
            follows = format!("{follows} ({})", extra.join("; "));
        }
        let last = if !channel.enabled {
            "disabled".to_string()
        } else {
            match health.get(setup.fetcher.vendor()) {
                None => "never run".to_string(),
                Some(h) => last_result(h),
            }
        };
        lines.push([
            id,
            kind.into(),
            setup.fetcher.vendor().to_string(),
            follows,
            client::printable(&last),
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for l in &lines {
        println!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            l[0],
            l[1],
            l[2],
            l[3],
            l[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        );
    }
    Ok(())
}

/// A channel's last recorded run: when it last succeeded, and the error of a later failure.
fn last_result(h: &store::VendorHealth) -> String {
    let at = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M UTC").to_string();
    match (h.last_success_at, h.last_error_at) {
        (Some(ok), Some(err)) if err > ok => format!(
            "failed {}: {} (last success {}, {} records)",
            at(err),
            h.last_error.as_deref().unwrap_or("error"),
            at(ok),
            h.records
        ),
        (None, Some(err)) => format!(
            "failed {}: {}",
            at(err),
            h.last_error.as_deref().unwrap_or("error")
        ),
        (Some(ok), _) => format!("ok {}, {} records", at(ok), h.records),
        (None, None) => "never run".to_string(),
    }
}

async fn open_store(config: &Config, secrets: &Secrets) -> Result<Arc<dyn store::Store>> {
    store::open_with(
        &config.database_url,
        model::RecordSigner::new(&secrets.hmac),
        config.database,
    )
    .await
    .with_context(|| {
        format!(
            "opening the {} database {}",
            backend_name(&config.database_url),
            config::redact_url(&config.database_url)
        )
    })
}

fn backend_name(url: &str) -> &str {
    url.split(':').next().unwrap_or("")
}

/// Every line of a JSON Lines file, parsed and validated; an error names the line. With
/// [`import_records`] the import is all or nothing, and a line already recorded (same file
/// of the same version) counts as unchanged, so a re-run, even after an interrupted one,
/// records nothing twice.
fn read_records(file: &std::path::Path) -> Result<Vec<model::NewRecord>> {
    use std::io::BufRead;
    let reader: Box<dyn BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?,
        ))
    };
    let mut records = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("line {}: cannot read", n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let record: model::NewRecord =
            serde_json::from_str(&line).with_context(|| format!("line {}: not a record", n + 1))?;
        let record = record
            .validate()
            .with_context(|| format!("line {}: invalid record", n + 1))?;
        records.push(record);
    }
    Ok(records)
}

/// Records the validated lines of a file in one transaction: (recorded, unchanged).
async fn import_records(
    store: &dyn store::Store,
    records: Vec<model::NewRecord>,
) -> Result<(u64, u64)> {
    let outcomes = store
        .record_many(records, chrono::Utc::now())
        .await
        .context("recording (nothing was recorded)")?;
    let inserted = outcomes
        .iter()
        .filter(|o| matches!(o, store::RecordOutcome::Inserted { .. }))
        .count();
    let unchanged = outcomes.len() - inserted;
    Ok((inserted as u64, unchanged as u64))
}

/// Creates a tenant with its first key and returns the key, which exists nowhere else.
async fn create_tenant(
    config: &Config,
    team: &str,
    kind: TenantKind,
    tier: Tier,
    role: Role,
) -> Result<String> {
    let secrets = Secrets::load_or_generate(&config.data_dir, &config.secrets)?;
    let store = open_store(config, &secrets).await?;
    let issued = auth::KeyHasher::new(&secrets.hmac).issue(team)?;
    let result = store
        .create_tenant_with_key(
            team,
            kind,
            tier,
            NewApiKey {
                key_id: issued.key_id.clone(),
                team_id: team.to_string(),
                key_hash: issued.key_hash.clone(),
                role,
                label: format!("first {role} key"),
            },
            chrono::Utc::now(),
        )
        .await;
    store.close().await;
    result?;
    tracing::info!(team, key_id = %issued.key_id, %role, %tier, "created account");
    Ok(issued.key)
}

/// Issues a key of `role` to the existing account `team`, audited as done from the
/// command line; returns the key.
async fn add_key(config: &Config, team: &str, role: Role, label: Option<String>) -> Result<String> {
    auth::validate_team_id(team)?;
    let secrets = Secrets::load_or_generate(&config.data_dir, &config.secrets)?;
    let store = open_store(config, &secrets).await?;
    let result = async {
        let tenant = store.tenant(team).await?.ok_or_else(|| {
            anyhow::anyhow!("no account {team:?}: create it with `knowngood admin create-account`")
        })?;
        if role.is_platform() != (tenant.kind == TenantKind::Platform) {
            bail!(
                "{role} is not a role for {} account {team:?}",
                if tenant.kind == TenantKind::Platform {
                    "the platform"
                } else {
                    "a customer"
                }
            );
        }
        let issued = auth::KeyHasher::new(&secrets.hmac).issue(team)?;
        let now = chrono::Utc::now();
        store
            .insert_key(
                NewApiKey {
                    key_id: issued.key_id.clone(),
                    team_id: team.to_string(),
                    key_hash: issued.key_hash.clone(),
                    role,
                    label: label.unwrap_or_else(|| format!("{role} key")),
                },
                now,
            )
            .await?;
        store
            .append_audit(&store::admin::AuditEntry {
                at: now,
                actor: "command-line".into(),
                team_id: team.to_string(),
                action: "key.issue".into(),
                target: issued.key_id.clone(),
                outcome: "ok".into(),
                detail: format!("knowngood admin add-key --role {role}"),
            })
            .await?;
        tracing::info!(team, key_id = %issued.key_id, %role, "issued a key");
        Ok(issued.key)
    }
    .await;
    store.close().await;
    result
}

/// An invite into `team`'s account, from the command line (audited as such).
async fn invite(
    config: &Config,
    team: &str,
    role: Role,
    name: &str,
    contact: &str,
) -> Result<auth::users::NewInviteCode> {
    auth::validate_team_id(team)?;
    if role.is_platform() {
        bail!("people hold customer roles only; platform roles are for staff keys");
    }
    let secrets = Secrets::load_or_generate(&config.data_dir, &config.secrets)?;
    let store = open_store(config, &secrets).await?;
    let result = async {
        let tenant = store.tenant(team).await?.ok_or_else(|| {
            anyhow::anyhow!("no account {team:?}: create it with `knowngood admin create-account`")
        })?;
        if tenant.kind == TenantKind::Platform {
            bail!("{team:?} is the platform account; invite people into customer accounts");
        }
        let now = chrono::Utc::now();
        let invite = auth::users::create_invite(
            store.as_ref(),
            &auth::KeyHasher::new(&secrets.hmac),
            auth::users::InviteRequest {
                team_id: team,
                role,
                display_name: name,
                contact,
                created_by: "command-line",
            },
            now,
        )
        .await?;
        store
            .append_audit(&store::admin::AuditEntry {
                at: now,
                actor: "command-line".into(),
                team_id: team.to_string(),
                action: "user.invite".into(),
                target: invite.invite_id.clone(),
                outcome: "ok".into(),
                detail: format!("knowngood admin invite --role {role}"),
            })
            .await?;
        Ok(invite)
    }
    .await;
    store.close().await;
    result
}

async fn serve(config: Config) -> Result<()> {
    let secrets = Secrets::load_or_generate(&config.data_dir, &config.secrets)?;
    let store = open_store(&config, &secrets).await?;
    let clock: Arc<dyn model::Clock> = Arc::new(SystemClock);
    let credentials = auth::credentials::Credentials::new(
        store.clone(),
        auth::KeyHasher::new(&secrets.hmac),
        auth::jwt::JwtKeys::from_pkcs8(&secrets.jwt_rsa_pkcs8)?,
        clock.clone(),
    );
    let limiter = match &config.redis_url {
        Some(url) => auth::limits::Limiter::Redis(auth::limits::RedisLimiter::connect(url).await?),
        None => auth::limits::Limiter::Local(Default::default()),
    };
    let state = server::AppState::new(
        store.clone(),
        credentials,
        limiter,
        clock,
        config.settings,
        jobs::LogKey::new(&secrets.log_ed25519),
    );
    let corpus_root = config.corpus_dir.clone();
    let corpus = tokio::task::spawn_blocking(move || corpus::Corpus::open(&corpus_root))
        .await?
        .context("opening the reference corpus")?;
    if let Some(info) = corpus.info() {
        tracing::info!(generation = %info.generation, entries = info.entries, "reference corpus loaded");
    }
    let state = state
        .with_corpus(Arc::new(corpus))
        .with_vendor_generations(config.data_dir.join("vendor-generations"))
        .with_popular_lists(refreshed_popular_lists(&config.data_dir)?);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    tracing::info!(
        listen = %listener.local_addr()?,
        database = store.backend(),
        database_url = %config::redact_url(&config.database_url),
        redis_url = %config
            .redis_url
            .as_deref()
            .map_or_else(|| "none".to_string(), config::redact_url),
        data_dir = %config.data_dir.display(),
        transparency_log_key = %secrets.log_public_key(),
        "knowngood serving"
    );
    if let Some(address) = config.metrics_listen {
        let metrics = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("binding the metrics listener {address}"))?;
        tracing::info!(listen = %metrics.local_addr()?, "metrics served at /metrics");
        // Ends with the process; scrapes hold no state worth draining.
        tokio::spawn(server::metrics::serve(metrics, state.clone()));
    }
    let (stop_upkeep, upkeep_stopped) = tokio::sync::oneshot::channel::<()>();
    let upkeep = tokio::spawn(server::maintain(state.clone(), async {
        let _ = upkeep_stopped.await;
    }));
    let settings = Arc::clone(&state.settings);
    let draining = Arc::clone(&state.draining);
    let grace = settings.connections.drain_grace;
    let stop = async move {
        shutdown_signal().await;
        draining.store(true, std::sync::atomic::Ordering::Release);
        if !grace.is_zero() {
            tracing::info!(
                seconds = grace.as_secs(),
                "draining: /readyz answers 503 until the listener closes"
            );
            tokio::time::sleep(grace).await;
        }
    };
    server::serve_with(listener, server::router(state), &settings, stop).await?;
    tracing::info!("draining finished; writing usage counts and closing the database");
    let _ = stop_upkeep.send(());
    let _ = upkeep.await;
    store.close().await;
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                let _ = interrupt.await;
                return;
            }
        };
    tokio::select! {
        _ = interrupt => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutdown requested; finishing in-flight requests");
}

/// Where `packages refresh-popular` keeps an ecosystem's list.
fn popular_list_path(
    data_dir: &std::path::Path,
    ecosystem: packages::Ecosystem,
) -> std::path::PathBuf {
    data_dir
        .join("packages")
        .join(format!("{ecosystem}-popular.tsv"))
}

/// The popular-name lists refreshed into the data dir; the shipped ones serve the others.
fn refreshed_popular_lists(data_dir: &std::path::Path) -> Result<Vec<packages::PopularList>> {
    let mut lists = Vec::new();
    for ecosystem in packages::Ecosystem::ALL {
        let path = popular_list_path(data_dir, ecosystem);
        if !path.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let list = packages::PopularList::parse(ecosystem, &text)
            .with_context(|| format!("reading {}", path.display()))?;
        tracing::info!(%ecosystem, names = list.names.len(), path = %path.display(), "popular package names loaded");
        lists.push(list);
    }
    Ok(lists)
}
