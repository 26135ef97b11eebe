//! The command-line client of a knowngood server: `knowngood lookup` and the online part
//! of `knowngood scan`. The API key comes from `KNOWNGOOD_API_KEY` or a file, never from a
//! flag (flags show in `ps` and shell history). Lookups go in batches of at most 100
//! hashes; a 429 is waited out as its `Retry-After` says, so a large scan stays within the
//! key's per-minute limit.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

/// Hashes per lookup request: the server's limit.
pub(crate) const BATCH: usize = 100;
/// The longest `Retry-After` waited out; beyond it (a monthly quota), the command stops.
const MAX_WAIT: Duration = Duration::from_secs(120);
/// Waits for one batch before giving up.
const MAX_RETRIES: u32 = 20;

/// Told before each wait for a `Retry-After`, with how long the wait is.
pub(crate) type WaitNotice = Box<dyn Fn(Duration) + Send + Sync>;

/// Where the server is, and the key.
pub(crate) struct ApiClient {
    base: String,
    key: String,
    http: reqwest::Client,
    /// Whether superseded builds can be asked about (`intel:history`); cleared on a 403.
    historical: bool,
    /// Says that the client waits out a `Retry-After` (default: a line on stderr).
    on_wait: WaitNotice,
}

/// The line that says a 429 is being waited out: on a terminal as is, otherwise prefixed
/// with the UTC time, as a log line.
pub(crate) fn wait_line(wait: Duration, terminal: bool) -> String {
    let text = format!(
        "rate limited by the server: waiting {} s as its Retry-After says, then continuing",
        wait.as_secs()
    );
    if terminal {
        text
    } else {
        format!(
            "{} knowngood: {text}",
            chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ")
        )
    }
}

/// One hash's answer, as the lookup routes give it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Classified {
    pub(crate) classification: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) executable_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) platform: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) file_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) product_name: Option<String>,
    /// A superseded vendor build: genuine, but no longer the current release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) historical: Option<bool>,
}

impl Classified {
    /// One line of what is known: vendor, name and version, or the corpus file.
    pub(crate) fn detail(&self) -> String {
        match self.classification.as_str() {
            "known_vendor_release" => {
                let mut text = format!(
                    "{} {} {}",
                    self.vendor.as_deref().unwrap_or(""),
                    self.executable_name.as_deref().unwrap_or(""),
                    self.version.as_deref().unwrap_or("")
                );
                if self.historical == Some(true) {
                    text.push_str(" (superseded)");
                }
                text
            }
            "known_file" => format!(
                "{} {}",
                self.source.as_deref().unwrap_or(""),
                self.file_name.as_deref().unwrap_or("")
            ),
            _ => String::new(),
        }
    }
}

#[derive(Deserialize)]
struct LookupAnswer {
    results: BTreeMap<String, Classified>,
}

/// The key: `KNOWNGOOD_API_KEY`, else the first line of `key_file`.
pub(crate) fn api_key(key_file: Option<&Path>) -> Result<String> {
    if let Some(file) = key_file {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("reading the key file {}", file.display()))?;
        let key = text.lines().next().unwrap_or("").trim().to_owned();
        if key.is_empty() {
            bail!("the key file {} is empty", file.display());
        }
        return Ok(key);
    }
    match std::env::var("KNOWNGOOD_API_KEY") {
        Ok(key) if !key.trim().is_empty() => Ok(key.trim().to_owned()),
        _ => bail!("no API key: set KNOWNGOOD_API_KEY or give --key-file FILE"),
    }
}

impl ApiClient {
    pub(crate) fn new(server: &str, key: String) -> Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .user_agent(concat!("knowngood-cli/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            base: server.trim_end_matches('/').to_owned(),
            key,
            http,
            historical: true,
            on_wait: Box::new(|wait| {
                use std::io::IsTerminal as _;
                eprintln!("{}", wait_line(wait, std::io::stderr().is_terminal()));
            }),
        })
    }

    /// Replaces how a wait for `Retry-After` is announced.
    pub(crate) fn on_wait(&mut self, notice: WaitNotice) {
        self.on_wait = notice;
    }

    /// Classifies `hashes` (any number; sent 100 at a time), keyed by the lowercase hash.
    /// `progress` is told how many hashes each finished batch held.
    pub(crate) async fn lookup(
        &mut self,
        hashes: &[String],
        mut progress: impl FnMut(usize),
    ) -> Result<BTreeMap<String, Classified>> {
        let mut all = BTreeMap::new();
        for batch in hashes.chunks(BATCH) {
            all.extend(self.lookup_batch(batch).await?);
            progress(batch.len());
        }
        Ok(all)
    }

    async fn lookup_batch(&mut self, batch: &[String]) -> Result<BTreeMap<String, Classified>> {
        let body = serde_json::json!({ "hashes": batch });
        let mut retries = 0;
        loop {
            let route = if self.historical {
                "/api/v1/intel/lookup/historical"
            } else {
                "/api/v1/intel/lookup"
            };
            let response = self
                .http
                .post(format!("{}{route}", self.base))
                .header("X-API-Key", &self.key)
                .json(&body)
                .send()
                .await
                .with_context(|| format!("could not reach {}", self.base))?;
            let status = response.status();
            if status.is_success() {
                let answer: LookupAnswer = response
                    .json()
                    .await
                    .context("the server's lookup answer is not what was expected")?;
                return Ok(answer.results);
            }
            if status == reqwest::StatusCode::FORBIDDEN && self.historical {
                // Without intel:history, the current releases only (no superseded flag).
                self.historical = false;
                continue;
            }
            if status == reqwest::StatusCode::TOO_MANY_REQUESTS && retries < MAX_RETRIES {
                let wait = retry_after(response.headers());
                if let Some(wait) = wait.filter(|w| *w <= MAX_WAIT) {
                    retries += 1;
                    (self.on_wait)(wait);
                    tokio::time::sleep(wait).await;
                    continue;
                }
            }
            let text = response.text().await.unwrap_or_default();
            return Err(anyhow!(
                "the server answered {status}: {}",
                printable(&text)
            ));
        }
    }
}

/// `Retry-After` in seconds (the server sends seconds), at least a second.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let secs: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs.max(1)))
}

/// Server text without control characters, short enough for one line.
pub(crate) fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(500).collect()
}

/// Reads hashes from the arguments, or from standard input for `-` (whitespace separated).
pub(crate) fn hashes_from(args: &[String]) -> Result<Vec<String>> {
    let mut hashes = Vec::new();
    for arg in args {
        if arg == "-" {
            let text = std::io::read_to_string(std::io::stdin()).context("reading stdin")?;
            hashes.extend(text.split_whitespace().map(str::to_owned));
        } else {
            hashes.push(arg.clone());
        }
    }
    let mut normalised = Vec::with_capacity(hashes.len());
    for raw in hashes {
        let hash = model::HashValue::parse(&raw).map_err(|e| anyhow!("{raw:?}: {e}"))?;
        normalised.push(hash.as_str().to_owned());
    }
    normalised.sort();
    normalised.dedup();
    if normalised.is_empty() {
        bail!("no hashes given");
    }
    Ok(normalised)
}

/// `knowngood lookup`: a table (hash, classification, detail) or the answers as JSON.
pub(crate) async fn run_lookup(
    server: &str,
    key_file: Option<&Path>,
    json: bool,
    args: &[String],
) -> Result<()> {
    let hashes = hashes_from(args)?;
    let mut client = ApiClient::new(server, api_key(key_file)?)?;
    let results = client.lookup(&hashes, |_| {}).await?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "results": results }))?
        );
        return Ok(());
    }
    for (hash, answer) in &results {
        println!(
            "{hash}  {:<20}  {}",
            answer.classification,
            printable(&answer.detail())
        );
    }
    Ok(())
}
