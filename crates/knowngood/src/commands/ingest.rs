//! `knowngood ingest`: refresh vendor records in the foreground, queue an SBOM's package
//! versions first, or list the channels or the coverage queue.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use model::SystemClock;

use super::{load_secrets, with_store};
use crate::client;
use crate::config::{CommonArgs, Config};

/// `ingest`: every channel (or `vendor`'s) now; with `from_sbom`, the versions a bill of
/// materials lists are queued first and only the queue is recorded. Fails when any
/// channel had errors or hash mismatches.
pub(crate) async fn run(
    common: &CommonArgs,
    vendor: Option<&str>,
    list: bool,
    queue: bool,
    from_sbom: Option<&std::path::Path>,
) -> Result<()> {
    let config = Config::resolve(common, None)?;
    if list {
        return list_channels(&config).await;
    }
    if queue {
        return list_queue(&config).await;
    }
    // Read before the store opens: a file that is no bill of materials changes nothing.
    let plan = match from_sbom {
        Some(path) => Some(sbom_plan(path)?),
        None => None,
    };
    let secrets = load_secrets(&config)?;
    // In the foreground a failure is reported at once; the scheduler retries.
    let options = jobs::refresh::RefreshOptions {
        attempts: 1,
        ..config.settings.jobs.refresh.clone()
    };
    let reports = with_store(&config, &secrets, async |store| {
        let reports = match plan {
            Some(plan) => {
                let clock: Arc<dyn model::Clock> = Arc::new(SystemClock);
                let done =
                    jobs::coverage::request(store.as_ref(), &plan.items, clock.now()).await?;
                print_queued(&plan, &done);
                jobs::refresh::refresh_queued(store.clone(), clock, &options, vendor, &print_report)
                    .await
            }
            None => {
                jobs::refresh::refresh_vendors(
                    store.clone(),
                    Arc::new(SystemClock),
                    &options,
                    vendor,
                    &print_report,
                )
                .await
            }
        };
        Ok(reports?)
    })
    .await?;
    if reports.iter().any(|r| r.errors > 0 || r.mismatches > 0) {
        bail!("some vendors failed; see above");
    }
    Ok(())
}

/// One channel's line, and its problems below it on stderr.
fn print_report(r: &ingest::VendorReport) {
    let state = if r.skipped {
        "disabled".to_string()
    } else {
        format!(
            "{} found, {} new, {} unchanged, {} downloaded, {} rejected ({} hash mismatches), {} errors",
            r.discovered, r.recorded, r.unchanged, r.downloaded, r.rejected, r.mismatches, r.errors
        )
    };
    println!("{:<22} {state}", r.fetcher);
    for p in &r.problems {
        eprintln!("    {}: {}", p.kind.as_str(), p.message);
    }
}

/// `knowngood ingest --queue`: every version the coverage queue holds, in (ecosystem, name,
/// version) order, its state and why a failed one failed, then the count of each state.
async fn list_queue(config: &Config) -> Result<()> {
    use store::coverage::CoverageState;
    let secrets = load_secrets(config)?;
    with_store(config, &secrets, async |store| {
        let (mut queued, mut done, mut failed) = (0u64, 0u64, 0u64);
        let mut offset = 0u64;
        loop {
            let page = store.coverage_entries(None, 1000, offset).await?;
            for e in &page.items {
                let state = e.state.as_str();
                *match e.state {
                    CoverageState::Queued => &mut queued,
                    CoverageState::Done => &mut done,
                    CoverageState::Failed => &mut failed,
                } += 1;
                let item = &e.item;
                match (&e.error, e.state) {
                    (Some(error), CoverageState::Failed) => println!(
                        "{:<7} {} {} {state}: {}",
                        item.ecosystem,
                        item.name,
                        item.version,
                        model::redact_urls(error)
                    ),
                    _ => println!(
                        "{:<7} {} {} {state}",
                        item.ecosystem, item.name, item.version
                    ),
                }
            }
            offset += page.items.len() as u64;
            if page.items.is_empty() || offset >= page.total {
                break;
            }
        }
        eprintln!("{queued} queued, {done} done, {failed} failed");
        Ok(())
    })
    .await
}

/// What queueing a bill of materials' versions did, and each version refused.
fn print_queued(plan: &jobs::coverage::Plan, done: &jobs::coverage::Queued) {
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
}

/// The package versions a bill of materials asks the coverage queue for (`ingest
/// --from-sbom`), read within the SBOM route's size limit.
fn sbom_plan(path: &std::path::Path) -> Result<jobs::coverage::Plan> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .with_context(|| format!("{shown}"))?
        .len();
    let limit = packages::sbom::MAX_SBOM_BYTES;
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
    let health = recorded_health(config).await?;
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
    print_columns(&lines);
    Ok(())
}

/// The last run of each channel recorded in the configured database; none when its SQLite
/// file does not exist (listing creates no database).
async fn recorded_health(
    config: &Config,
) -> Result<std::collections::HashMap<String, store::VendorHealth>> {
    let sqlite_missing = config
        .database_url
        .strip_prefix("sqlite:")
        .map(|rest| rest.trim_start_matches("//"))
        .map(|rest| rest.split('?').next().unwrap_or(rest))
        .is_some_and(|path| !std::path::Path::new(path).exists());
    Ok(if sqlite_missing {
        Default::default()
    } else {
        let secrets = load_secrets(config)?;
        let health = with_store(config, &secrets, async |store| {
            Ok(store.vendor_health().await?)
        })
        .await?;
        health.into_iter().map(|h| (h.vendor.clone(), h)).collect()
    })
}

/// Rows in columns as wide as their widest cell (the last column unpadded).
fn print_columns(lines: &[[String; 5]]) {
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for l in lines {
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
