//! `knowngood`: one binary for the service and its administration.

use anyhow::Result;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

mod client;
mod commands;
mod config;
mod md5x16;
mod offline;
mod packages_db;
mod scan;
mod secrets;
mod verify;

/// glibc's allocator spends a large share of a lookup in `malloc` once the heap has been
/// through an index build; mimalloc keeps per-thread pages and does not. Its `override`
/// feature (the workspace's `Cargo.toml`) serves C's `malloc` too, so SQLite's allocations
/// are mimalloc's as well.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use config::CommonArgs;

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
        /// List the coverage queue (every package version an SBOM asked for, in
        /// ecosystem, name, version order, its state — queued, done or failed — and why a
        /// failed one failed) and exit.
        #[arg(long, conflicts_with_all = ["list", "vendor"])]
        queue: bool,
        /// Queue the PyPI, npm and Debian/Ubuntu package versions a bill of materials
        /// lists (CycloneDX or SPDX, as `POST /api/v1/intel/coverage/requests` reads it),
        /// then record the queued versions now (with --vendor: only that channel's). Only
        /// (ecosystem, name, version) is kept.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["list", "queue"])]
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
        /// Say why each unknown file an installed package owns is unknown, from the package
        /// database under --packages-root: dpkg's (var/lib/dpkg: status and info/*.list) when
        /// it exists, else RPM's rpmdb.sqlite (var/lib/rpm, else usr/lib/sysimage/rpm;
        /// opened read-only), else RPM's BerkeleyDB Packages there (as on RHEL 8); RPM
        /// versions are [epoch:]version-release, the epoch only when not 0. `modified`
        /// when another file of the package is known as a vendor release of the installed
        /// version (the file differs from the genuine build), else `not_covered`; then
        /// files, known, modified and not covered per package. Offline, a bundle filter's
        /// hit carries no version: there any known vendor file of the package counts as the
        /// package being known.
        #[arg(long)]
        packages: bool,
        /// With --packages: the root of the system whose package database is read
        /// (a mounted image); its files are named as scanned, under DIR. Also spelled
        /// --dpkg-root.
        #[arg(long, alias = "dpkg-root", requires = "packages", default_value = "/")]
        packages_root: std::path::PathBuf,
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

/// Hands each subcommand to its function.
async fn run(cli: Cli) -> Result<()> {
    use commands::{admin, data, ingest, serve};
    match cli.command {
        Command::Serve { common, listen } => serve::serve(&common, listen.as_deref()).await,
        Command::Admin(AdminCommand::Bootstrap { common }) => admin::bootstrap(&common).await,
        Command::Admin(AdminCommand::CreateAccount {
            common,
            team,
            tier,
            role,
        }) => admin::create_account(&common, &team, &tier, &role).await,
        Command::Admin(AdminCommand::AddKey {
            common,
            team,
            role,
            label,
        }) => admin::add_key(&common, &team, &role, label).await,
        Command::Admin(AdminCommand::Invite {
            common,
            team,
            role,
            name,
            contact,
        }) => admin::invite(&common, &team, &role, &name, &contact).await,
        Command::Admin(AdminCommand::ImportRecords { common, file }) => {
            admin::import_records(&common, &file).await
        }
        Command::Admin(AdminCommand::RotateJwtKey { common }) => admin::rotate_jwt_key(&common),
        Command::Ingest {
            common,
            vendor,
            list,
            queue,
            from_sbom,
        } => {
            ingest::run(
                &common,
                vendor.as_deref(),
                list,
                queue,
                from_sbom.as_deref(),
            )
            .await
        }
        Command::Revocation(RevocationCommand::Check { common, force }) => {
            data::revocation_check(&common, force).await
        }
        Command::Packages(PackagesCommand::RefreshPopular {
            common,
            ecosystem,
            file,
        }) => data::packages_refresh_popular(&common, &ecosystem, &file),
        Command::Advisories(AdvisoriesCommand::Import { common, paths }) => {
            data::advisories_import(&common, &paths).await
        }
        Command::Nsrl(NsrlCommand::Import { common, paths, set }) => {
            data::nsrl_import(&common, paths, &set).await
        }
        Command::Translog(TranslogCommand::Publish { common, date }) => {
            data::translog_publish(&common, date.as_deref()).await
        }
        Command::Bundle(BundleCommand::Export { common, mode, dir }) => {
            data::bundle_export(&common, mode, &dir).await
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
            packages_root,
            paths,
        } => {
            scan::run(scan::ScanArgs {
                paths,
                server: client.server,
                key_file: client.key_file,
                format,
                fail_on_unknown,
                jobs: jobs.unwrap_or_else(|| {
                    std::thread::available_parallelism().map_or(2, std::num::NonZero::get)
                }),
                offline,
                trust_keys: trust_key,
                progress_every: std::time::Duration::from_secs(progress_every),
                packages: packages.then_some(packages_root),
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
    }
}
