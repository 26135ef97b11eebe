//! The offline bundle from the command line: `bundle export DIR` (from the store, signed
//! with the log key), `verify --bundle DIR` and the key it is checked against.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};

/// An octal file mode for `bundle export --mode` (`0644`, `644`, `0o644`): permission
/// bits only.
pub(crate) fn parse_mode(text: &str) -> std::result::Result<u32, String> {
    let digits = text.trim().trim_start_matches("0o");
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if mode <= 0o777 && !digits.is_empty() => Ok(mode),
        _ => Err(format!(
            "{text:?} is not an octal file mode such as 0644 (permission bits only, at most 0777)"
        )),
    }
}

/// Gives the bundle directory's files `mode`, and the directory itself `mode` plus search
/// (x) bits wherever it grants read.
pub(crate) fn set_modes(dir: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_file() {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("setting the mode of {}", path.display()))?;
        }
    }
    let dir_mode = mode | ((mode & 0o444) >> 2);
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(dir_mode))
        .with_context(|| format!("setting the mode of {}", dir.display()))?;
    Ok(())
}

/// Builds the bundle from the latest published root, the vendor lookup index of `index`
/// (the server's newest generation when it fits the database, caught up; otherwise one
/// written now, in bounded memory) and the corpus, writes it into `dir`, and says what it
/// wrote. The filters and the feed list go to disk as they are built, one at a time.
pub(crate) async fn export(
    store: &Arc<dyn store::Store>,
    index: &Arc<lookup::VendorIndex>,
    key: &jobs::LogKey,
    corpus: Option<Arc<corpus::Generation>>,
    dir: &Path,
) -> Result<String> {
    let root = store
        .recent_roots(1)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| {
            anyhow!("no transparency root is published yet: run `knowngood translog publish` first")
        })?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let into = dir.to_path_buf();
    let vendor = server::write_vendor_part(store, index, root.log_date, move |name| {
        std::fs::File::create(into.join(name))
    })
    .await?;
    let now = chrono::Utc::now();
    let dir = dir.to_path_buf();
    let signing = key.signing_key().clone();
    let key_id = key.key_id.clone();
    let written = tokio::task::spawn_blocking(move || -> Result<String> {
        // The corpus filters go straight to disk, one at a time (bounded memory).
        let corpus_filters = corpus
            .as_deref()
            .map(|g| bundle::write_corpus_filters_into(g, &dir))
            .transpose()?;
        let inputs = bundle::Inputs {
            vendor: &vendor.filters,
            root: &bundle::RootDoc {
                log_date: root.log_date.format("%Y-%m-%d").to_string(),
                merkle_root: root.merkle_root.clone(),
                entry_count: root.entry_count,
                prev_root: root.prev_root.clone(),
                signature: root.signature.clone(),
                key_id: root.key_id.clone(),
            },
            feed: &vendor.feed,
            corpus: corpus_filters.as_ref(),
            now,
        };
        let built = bundle::build(&inputs, &signing, &key_id)?;
        built.write(&dir)?;
        Ok(format!(
            "bundle written to {}: {} files, root {} of {}",
            dir.display(),
            built.files.len()
                + vendor.writers.len()
                + corpus_filters.map_or(0, |c| c.filters.len()),
            root.merkle_root,
            root.log_date
        ))
    })
    .await??;
    Ok(written)
}

/// Verifies the bundle against the pinned keys (any one), or, with none pinned, the key
/// the bundle carries (said on stderr: that trusts the bundle's source).
pub(crate) fn verify_bundle(dir: &Path, trusted: &[String]) -> Result<bundle::Verified> {
    if trusted.is_empty() {
        let key = bundle::bundled_key(dir).context("reading the bundle's key")?;
        eprintln!(
            "warning: no --trust-key given; checking against the key the bundle carries ({})",
            base64_key(&key)
        );
        return Ok(bundle::verify_dir(dir, &key)?);
    }
    let mut last = None;
    for text in trusted {
        let key = bundle::parse_public_key(text).context("--trust-key")?;
        match bundle::verify_dir(dir, &key) {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => Err(e.into()),
        None => bail!("no key to verify with"),
    }
}

fn base64_key(key: &bundle::ed25519::VerifyingKey) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(key.to_bytes())
}

/// One line about a verified bundle.
pub(crate) fn describe(v: &bundle::Verified) -> String {
    let m = &v.manifest;
    format!(
        "bundle verified: dataset {}, root {} of {} ({} feed records), {} filters at false-positive rate {}",
        m.dataset_date,
        m.merkle_root,
        m.log_date,
        v.feed.len(),
        v.filters.len(),
        m.false_positive_rate
    )
}
