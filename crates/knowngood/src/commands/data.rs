//! The foreground data jobs: the daily root, the offline bundle, the NSRL corpus, CRL
//! checks, OSV advisories and popular package names.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use model::SystemClock;

use super::{load_secrets, with_store};
use crate::config::{CommonArgs, Config};
use crate::{offline, verify};

/// `translog publish`: the day's signed root (a second run prints the stored one).
pub(crate) async fn translog_publish(common: &CommonArgs, date: Option<&str>) -> Result<()> {
    let config = Config::resolve(common, None)?;
    let secrets = load_secrets(&config)?;
    let root = with_store(&config, &secrets, async |store| {
        let now = chrono::Utc::now();
        let date = match date {
            Some(d) => verify::parse_date_arg(d)?,
            None => now.date_naive(),
        };
        let key = jobs::LogKey::new(&secrets.log_ed25519);
        Ok(jobs::publish::publish_day(store.as_ref(), &key, now, date).await?)
    })
    .await?;
    println!(
        "{} {} entries root {} prev {}",
        root.log_date, root.entry_count, root.merkle_root, root.prev_root
    );
    Ok(())
}

/// `bundle export DIR`: the signed offline bundle, its files given `mode` if asked.
pub(crate) async fn bundle_export(
    common: &CommonArgs,
    mode: Option<u32>,
    dir: &Path,
) -> Result<()> {
    let config = Config::resolve(common, None)?;
    let secrets = load_secrets(&config)?;
    let written = with_store(&config, &secrets, async |store| {
        let key = jobs::LogKey::new(&secrets.log_ed25519);
        let corpus_root = config.corpus_dir.clone();
        // Mapped, not resident: the filters read each table once, in order, so the
        // tables need not be copied into memory (the page cache serves them).
        let options = corpus::OpenOptions {
            verify: corpus::Verify::Full,
            memory: corpus::Memory::Mapped,
        };
        let corpus =
            tokio::task::spawn_blocking(move || corpus::Corpus::open_with(&corpus_root, options))
                .await?
                .context("opening the reference corpus")?;
        // The server's vendor generations when there are any: the newest that fits the
        // database is mapped, not rebuilt. Otherwise the index writes one there or, without
        // that directory, in a temporary one.
        let generations = config.data_dir.join("vendor-generations");
        let index = Arc::new(if generations.is_dir() {
            lookup::VendorIndex::with_dir(generations)
        } else {
            lookup::VendorIndex::default()
        });
        offline::export(store, &index, &key, corpus.current(), dir).await
    })
    .await?;
    if let Some(mode) = mode {
        offline::set_modes(dir, mode)?;
    }
    println!("{written}");
    Ok(())
}

/// `nsrl import`: RDS v3 databases into a new corpus generation.
pub(crate) async fn nsrl_import(common: &CommonArgs, paths: Vec<PathBuf>, set: &str) -> Result<()> {
    let config = Config::resolve(common, None)?;
    let set = match set {
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
        info.generation, info.entries, info.sha1_entries, info.md5_entries, info.bytes_on_disk
    );
    Ok(())
}

/// `revocation check`: every recorded signing certificate against its issuer's CRL.
pub(crate) async fn revocation_check(common: &CommonArgs, force: bool) -> Result<()> {
    let config = Config::resolve(common, None)?;
    let secrets = load_secrets(&config)?;
    let report = with_store(&config, &secrets, async |store| {
        let jobs = &config.settings.jobs;
        Ok(jobs::revocation::check(
            store.as_ref(),
            &SystemClock,
            &jobs.revocation,
            &jobs.refresh.outbound,
            force,
        )
        .await?)
    })
    .await?;
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

/// `advisories import`: OSV documents, read in full before the database is opened.
pub(crate) async fn advisories_import(common: &CommonArgs, paths: &[PathBuf]) -> Result<()> {
    let config = Config::resolve(common, None)?;
    let secrets = load_secrets(&config)?;
    let mut read = jobs::advisories::Reader::default();
    for path in paths {
        read.path(path)
            .with_context(|| format!("reading {}", path.display()))?;
    }
    let not_kept = read.not_kept_lines();
    let jobs::advisories::Reader { rows, skipped, .. } = read;
    let written = with_store(&config, &secrets, async |store| {
        Ok(jobs::advisories::import(store.as_ref(), &rows, chrono::Utc::now()).await?)
    })
    .await?;
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

/// `packages refresh-popular`: an ecosystem's popular-name list, replaced in the data
/// directory (read at the next start).
pub(crate) fn packages_refresh_popular(
    common: &CommonArgs,
    ecosystem: &str,
    file: &Path,
) -> Result<()> {
    let config = Config::resolve(common, None)?;
    let ecosystem: packages::Ecosystem =
        ecosystem.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
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

/// Where `packages refresh-popular` keeps an ecosystem's list.
fn popular_list_path(data_dir: &Path, ecosystem: packages::Ecosystem) -> PathBuf {
    data_dir
        .join("packages")
        .join(format!("{ecosystem}-popular.tsv"))
}

/// The popular-name lists refreshed into the data dir; the shipped ones serve the others.
pub(crate) fn refreshed_popular_lists(data_dir: &Path) -> Result<Vec<packages::PopularList>> {
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
