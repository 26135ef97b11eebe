//! Reading OSV advisories from disk for `knowngood advisories import`: single JSON
//! documents, directories of them, or a zip archive of them (OSV's per-ecosystem
//! `all.zip`).

use std::io::Read as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use store::packages::AdvisoryRow;

/// The largest document read; OSV's are a few kilobytes.
const MAX_DOCUMENT: u64 = 8 << 20;

/// Adds the advisories of `path` to `rows`; counts documents naming no npm, PyPI or Go
/// package in `skipped`.
pub fn read(path: &Path, rows: &mut Vec<AdvisoryRow>, skipped: &mut u64) -> Result<()> {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        entries.sort();
        for entry in entries {
            if entry.is_dir() || is_json(&entry) || is_zip(&entry) {
                read(&entry, rows, skipped)?;
            }
        }
        return Ok(());
    }
    if is_zip(path) {
        let file = std::fs::File::open(path)?;
        let mut archive = zip::ZipArchive::new(file).context("not a zip archive")?;
        for i in 0..archive.len() {
            let entry = archive.by_index(i)?;
            let name = entry.name()?.to_string();
            if !name.ends_with(".json") {
                continue;
            }
            if entry.size() > MAX_DOCUMENT {
                bail!("{name}: larger than {MAX_DOCUMENT} bytes");
            }
            let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
            entry.take(MAX_DOCUMENT).read_to_end(&mut bytes)?;
            add(&bytes, rows, skipped).with_context(|| name.clone())?;
        }
        return Ok(());
    }
    if std::fs::metadata(path)?.len() > MAX_DOCUMENT {
        bail!("larger than {MAX_DOCUMENT} bytes");
    }
    add(&std::fs::read(path)?, rows, skipped)
}

fn is_json(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

fn is_zip(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zip")
}

fn add(bytes: &[u8], rows: &mut Vec<AdvisoryRow>, skipped: &mut u64) -> Result<()> {
    let Some(advisory) = packages::parse_osv(bytes)? else {
        *skipped += 1;
        return Ok(());
    };
    let mut names: Vec<(String, String)> = advisory
        .affected
        .iter()
        .map(|a| (a.ecosystem.as_str().to_string(), a.name.clone()))
        .collect();
    names.sort();
    names.dedup();
    rows.push(AdvisoryRow {
        id: advisory.id,
        modified: advisory.modified,
        document: String::from_utf8_lossy(bytes).into_owned(),
        packages: names,
    });
    Ok(())
}
