//! `knowngood verify`: an independent check that a file's SHA-256 is in a day's signed
//! transparency root, using only the public key and the published fields. The leaf hash is
//! recomputed from the record's fields; nothing the server computed is trusted.
//!
//! With `--save DIR` the fetched documents are written to DIR; with `--offline DIR` they are
//! read from there instead of a server (`key.json`, `root-<date>.json`, `proof.json`).

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use chrono::{Duration, NaiveDate};
use serde_json::Value;
use translog::encoding::{parse_log_date, parse_public_key_base64};
use translog::verify::{InclusionResponse, check_chain_links, verify_inclusion_response};
use translog::{NEXT_ROOT_HEADER, Record, SignedRoot, VerifyingKey};

/// Exit status of a verification that failed, or of an error.
pub(crate) const EXIT_FAILED: u8 = 1;
/// Exit status when the server says the file was recorded after the root asked and no root
/// holds it yet: no check failed, but nothing about the file is verified either.
pub(crate) const EXIT_NOT_YET_INCLUDED: u8 = 3;

/// The file is current but was recorded after the `date` root; it will be in the `next`
/// root. Neither verified nor failed: `main` exits with [`EXIT_NOT_YET_INCLUDED`].
#[derive(Debug)]
pub(crate) struct NotYetIncluded {
    pub(crate) date: NaiveDate,
    pub(crate) next: NaiveDate,
}

impl std::fmt::Display for NotYetIncluded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "not yet in a signed root: recorded after the {} root; it will be in the {} root",
            self.date, self.next
        )
    }
}

impl std::error::Error for NotYetIncluded {}

pub(crate) struct VerifyArgs {
    pub(crate) server: Option<String>,
    pub(crate) sha256: String,
    pub(crate) date: Option<String>,
    pub(crate) chain: u32,
    pub(crate) save: Option<PathBuf>,
    pub(crate) offline: Option<PathBuf>,
    /// Public keys (base64) obtained out of band; when given, a root signed by any other
    /// key fails, whatever the server lists.
    pub(crate) trusted_keys: Vec<String>,
}

/// With pinned keys, the signer must be one of them.
fn check_pinned(key: &VerifyingKey, pinned: &[String], date: NaiveDate) -> Result<()> {
    if pinned.is_empty() {
        return Ok(());
    }
    let key_b64 = translog::encoding::public_key_to_base64(key);
    if pinned.iter().any(|p| p.trim() == key_b64) {
        Ok(())
    } else {
        bail!("FAILED key: the {date} root is signed by {key_b64}, which is not a trusted key")
    }
}

/// Where documents come from.
enum Source {
    Server {
        base: String,
        client: reqwest::Client,
        save: Option<PathBuf>,
    },
    Files(PathBuf),
}

/// What a server said with a 404.
#[derive(Default)]
struct Missing {
    message: Option<String>,
    /// The date of the root a file recorded after the asked day's root will be in.
    next_root: Option<String>,
}

impl Source {
    /// Fetches `path` (or reads `file` offline). `Ok(None)` for a 404.
    async fn get(&self, path: &str, file: &str) -> Result<Option<Value>> {
        Ok(self.fetch(path, file).await?.ok())
    }

    /// Fetches `path` (or reads `file` offline); `Ok(Err(_))` for a 404, with what the
    /// server said.
    async fn fetch(&self, path: &str, file: &str) -> Result<Result<Value, Missing>> {
        match self {
            Source::Files(dir) => {
                let p = dir.join(file);
                match std::fs::read_to_string(&p) {
                    Ok(text) => Ok(Ok(serde_json::from_str(&text)
                        .with_context(|| format!("{} is not JSON", p.display()))?)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        Ok(Err(Missing::default()))
                    }
                    Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
                }
            }
            Source::Server { base, client, save } => {
                let url = format!("{}{path}", base.trim_end_matches('/'));
                let response = client
                    .get(&url)
                    .send()
                    .await
                    .with_context(|| format!("fetching {url}"))?;
                if response.status() == reqwest::StatusCode::NOT_FOUND {
                    let next_root = response
                        .headers()
                        .get(NEXT_ROOT_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    let message = response
                        .json::<Value>()
                        .await
                        .ok()
                        .and_then(|v| v.get("message")?.as_str().map(str::to_string));
                    return Ok(Err(Missing { message, next_root }));
                }
                if !response.status().is_success() {
                    bail!(
                        "{url} answered {}: {}",
                        response.status(),
                        response.text().await.unwrap_or_default()
                    );
                }
                let value: Value = response
                    .json()
                    .await
                    .with_context(|| format!("{url} did not return JSON"))?;
                if let Some(dir) = save {
                    std::fs::create_dir_all(dir)?;
                    std::fs::write(dir.join(file), serde_json::to_vec_pretty(&value)?)?;
                }
                Ok(Ok(value))
            }
        }
    }
}

fn text<'a>(v: &'a Value, field: &str) -> Result<&'a str> {
    v.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("response lacks the text field {field:?}"))
}

fn number(v: &Value, field: &str) -> Result<u64> {
    v.get(field)
        .and_then(Value::as_u64)
        .ok_or_else(|| anyhow!("response lacks the number field {field:?}"))
}

fn signed_root(v: &Value) -> Result<(SignedRoot, String)> {
    let root = SignedRoot::from_encoded(
        text(v, "log_date")?,
        text(v, "merkle_root")?,
        number(v, "entry_count")?,
        text(v, "prev_root")?,
        text(v, "signature")?,
    )
    .map_err(|e| anyhow!("malformed root: {e}"))?;
    Ok((root, text(v, "key_id")?.to_string()))
}

/// The key that signed a root: the current key or one of the historical keys.
fn key_for(key_doc: &Value, key_id: &str) -> Result<VerifyingKey> {
    let mut candidates = vec![(text(key_doc, "key_id")?, text(key_doc, "public_key")?)];
    if let Some(list) = key_doc.get("historical_keys").and_then(Value::as_array) {
        for k in list {
            candidates.push((text(k, "key_id")?, text(k, "public_key")?));
        }
    }
    let (_, b64) = candidates
        .into_iter()
        .find(|(id, _)| *id == key_id)
        .ok_or_else(|| anyhow!("no published key has id {key_id}"))?;
    let key = parse_public_key_base64(b64).map_err(|e| anyhow!("bad public key: {e}"))?;
    // The id is derived from the key: a server cannot pair an id with another key.
    if translog::encoding::key_id(&key) != key_id {
        bail!("key id {key_id} does not match its public key");
    }
    Ok(key)
}

/// Runs every check, printing one line per check. Errors name the check that failed.
pub(crate) async fn run(args: VerifyArgs) -> Result<()> {
    let source = source_of(&args)?;
    let sha256 = args.sha256.trim().to_ascii_lowercase();
    let key_doc = source
        .get("/public/transparency/key", "key.json")
        .await?
        .ok_or_else(|| anyhow!("the server publishes no transparency key"))?;
    let date = day_of(&source, args.date.as_deref()).await?;
    let root_doc = source
        .get(
            &format!("/public/transparency/{date}"),
            &format!("root-{date}.json"),
        )
        .await?
        .ok_or_else(|| anyhow!("no root published for {date}"))?;
    let (root, key_id) = signed_root(&root_doc)?;
    if root.log_date != date {
        bail!(
            "FAILED root: the root given for {date} is the root of {}",
            root.log_date
        );
    }
    let key = key_for(&key_doc, &key_id)?;
    if args.trusted_keys.is_empty() {
        let whose = if args.offline.is_some() {
            "the saved documents carry"
        } else {
            "the server publishes"
        };
        eprintln!(
            "warning: no --trust-key given; checking against the key {whose} ({}), which trusts that source; pin the log's key obtained out of band with --trust-key",
            translog::encoding::public_key_to_base64(&key)
        );
    }
    check_pinned(&key, &args.trusted_keys, date)?;
    root.verify(&key)
        .map_err(|e| anyhow!("FAILED signature of {date}: {e}"))?;
    println!("ok   signature of the {date} root (key {key_id})");

    check_inclusion(&source, &key, &root, &sha256, date).await?;
    if args.chain > 0 {
        check_chain(&source, &key_doc, root, args.chain, &args.trusted_keys).await?;
    }
    Ok(())
}

/// Where the documents come from: saved files, or a server (saving them when asked).
fn source_of(args: &VerifyArgs) -> Result<Source> {
    Ok(match (&args.offline, &args.server) {
        (Some(dir), _) => Source::Files(dir.clone()),
        (None, Some(server)) => Source::Server {
            base: server.clone(),
            client: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(30))
                .build()?,
            save: args.save.clone(),
        },
        (None, None) => bail!("give --server URL or --offline DIR"),
    })
}

/// The day asked, or else the latest published root's.
async fn day_of(source: &Source, asked: Option<&str>) -> Result<NaiveDate> {
    Ok(match asked {
        Some(d) => parse_log_date(d).map_err(|e| anyhow!("--date: {e}"))?,
        None => {
            let index = source
                .get("/public/transparency", "index.json")
                .await?
                .ok_or_else(|| anyhow!("no transparency index"))?;
            let latest = index
                .get("roots")
                .and_then(Value::as_array)
                .and_then(|r| r.first())
                .ok_or_else(|| anyhow!("no root has been published yet"))?;
            parse_log_date(text(latest, "log_date")?).map_err(|e| anyhow!("{e}"))?
        }
    })
}

/// Fetches the proof for `sha256` in `date`'s tree and checks it against the verified
/// `root`, the leaf recomputed from the record's fields.
async fn check_inclusion(
    source: &Source,
    key: &VerifyingKey,
    root: &SignedRoot,
    sha256: &str,
    date: NaiveDate,
) -> Result<()> {
    let proof = match source
        .fetch(
            &format!("/public/transparency/{date}/proof?sha256={sha256}"),
            "proof.json",
        )
        .await?
    {
        Ok(proof) => proof,
        Err(Missing {
            next_root: Some(next),
            ..
        }) => {
            let next = parse_log_date(&next)
                .map_err(|e| anyhow!("the server names a malformed next root: {e}"))?;
            return Err(NotYetIncluded { date, next }.into());
        }
        Err(Missing { message, .. }) => {
            // The server's explanation, e.g. the later root the file is in; control
            // characters dropped, as the text comes from the server.
            let why = message
                .filter(|m| m.contains("recorded after"))
                .map(|m| m.chars().filter(|c| !c.is_control()).collect::<String>())
                .map(|m| format!(" (the server says: {m})"))
                .unwrap_or_default();
            bail!("FAILED inclusion: {sha256} is not in the {date} tree{why}");
        }
    };
    let record_doc = proof
        .get("record")
        .ok_or_else(|| anyhow!("proof lacks the record fields"))?;
    let record = Record {
        executable_name: text(record_doc, "executable_name")?,
        hash_sha256: text(record_doc, "hash_sha256")?,
        version: text(record_doc, "version")?,
        platform: text(record_doc, "platform")?,
        arch: text(record_doc, "arch")?,
    };
    if record.hash_sha256 != sha256 {
        bail!(
            "FAILED record: the proof is for {} not {sha256}",
            record.hash_sha256
        );
    }
    let path: Vec<&str> = proof
        .get("audit_path")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("proof lacks audit_path"))?
        .iter()
        .map(|h| {
            h.as_str()
                .ok_or_else(|| anyhow!("audit_path holds a non-string"))
        })
        .collect::<Result<_>>()?;
    let response = InclusionResponse::from_encoded(
        text(&proof, "log_date")?,
        number(&proof, "leaf_index")?,
        number(&proof, "tree_size")?,
        &path,
        proof.get("leaf_hash").and_then(Value::as_str),
        proof.get("merkle_root").and_then(Value::as_str),
    )
    .map_err(|e| anyhow!("malformed proof: {e}"))?;
    let leaf = verify_inclusion_response(key, root, &record, &response)
        .map_err(|e| anyhow!("FAILED inclusion: {e}"))?;
    println!(
        "ok   leaf {} recomputed from {} {} {}/{}",
        translog::encoding::hash_to_hex(&leaf),
        record.executable_name,
        record.version,
        record.platform,
        record.arch
    );
    println!(
        "ok   audit path ({} hashes) leads to the signed root at index {} of {}",
        response.audit_path.len(),
        response.leaf_index,
        response.tree_size
    );

    Ok(())
}

/// Verifies the roots of the `days` days before `root`'s, each signed by a published (and
/// pinned, if any is) key, and that they chain to it.
async fn check_chain(
    source: &Source,
    key_doc: &Value,
    root: SignedRoot,
    days: u32,
    trusted: &[String],
) -> Result<()> {
    let date = root.log_date;
    let mut roots = vec![root];
    let mut day = date;
    for _ in 0..days {
        day -= Duration::days(1);
        let Some(doc) = source
            .get(
                &format!("/public/transparency/{day}"),
                &format!("root-{day}.json"),
            )
            .await?
        else {
            continue;
        };
        let (earlier, earlier_key_id) = signed_root(&doc)?;
        if earlier.log_date != day {
            bail!(
                "FAILED chain: the root given for {day} is the root of {}",
                earlier.log_date
            );
        }
        let earlier_key = key_for(key_doc, &earlier_key_id)?;
        check_pinned(&earlier_key, trusted, day)?;
        earlier
            .verify(&earlier_key)
            .map_err(|e| anyhow!("FAILED signature of {day}: {e}"))?;
        roots.push(earlier);
    }
    roots.reverse();
    check_chain_links(&roots).map_err(|e| anyhow!("FAILED chain: {e}"))?;
    let first = roots.first().map(|r| r.log_date).unwrap_or(date);
    if roots.first().is_some_and(|r| r.is_genesis()) {
        println!(
            "ok   chain of {} roots back to the first day {first}",
            roots.len()
        );
    } else {
        println!("ok   chain of {} roots from {first} to {date}", roots.len());
    }
    Ok(())
}

pub(crate) fn parse_date_arg(raw: &str) -> Result<NaiveDate> {
    parse_log_date(raw).map_err(|e| anyhow!("{e}"))
}
