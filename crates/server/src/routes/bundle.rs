//! The offline bundle over HTTP (the format is the `bundle` crate's): the vendor-release
//! part is public (`/public/bundle/{file}`: the manifest and its signature, the log key,
//! the day's root and feed list, the vendor filters), the reference-corpus filters need
//! `intel:lookup` (`/api/v1/intel/bundle/{file}`). Files are built once and kept until the
//! records epoch, the corpus generation or the latest root changes; they are answered
//! with a strong `ETag` (the file's SHA-256, as the manifest lists it), `If-None-Match`
//! and single byte ranges, so large filters resume.
//!
//! The filters (hundreds of megabytes for a full corpus or 100 million vendor records) and
//! the feed list are built one at a time into unnamed temporary files (gone when the last
//! handle closes, even after a crash) and streamed from there in pieces; only the small
//! files stay in memory. The corpus filters come straight from the mapped corpus
//! generation and go beside it; the vendor filters from the mapped vendor lookup
//! generation and its delta (the verified records' digests with each entry's status), and
//! the feed list from the day's leaves read a page at a time, each with the vendor of the
//! current record naming it from the same index: both go beside the vendor generations
//! ([`write_vendor_part`], which `knowngood bundle export` uses too).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use model::{Error, Permission, Tier};
use sha2::{Digest as _, Sha256};
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiResult, ErrorBody};
use crate::routing::{Api, RouteRule};
use crate::services::bundle::{built_error, stopped, write_vendor_part};

pub(crate) fn routes(api: Api) -> Api {
    api.route(routes!(public_file), RouteRule::public()).route(
        routes!(corpus_file),
        RouteRule::private(Permission::IntelLookup, Tier::Basic),
    )
}

/// What a built bundle was made from: a change of any rebuilds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Made {
    records_epoch: u64,
    corpus_generation: Option<String>,
    log_date: chrono::NaiveDate,
    merkle_root: String,
}

/// Where a built file's bytes are.
enum Held {
    Memory(Bytes),
    /// An unnamed temporary file, read with positioned reads (shared by requests).
    File {
        file: Arc<std::fs::File>,
        len: u64,
    },
}

impl Held {
    fn len(&self) -> u64 {
        match self {
            Held::Memory(bytes) => bytes.len() as u64,
            Held::File { len, .. } => *len,
        }
    }

    /// Bytes `start..=end` as a response body; a file is streamed in pieces.
    fn body(&self, start: u64, end: u64) -> axum::body::Body {
        match self {
            Held::Memory(bytes) => bytes.slice(start as usize..=end as usize).into(),
            Held::File { file, .. } => {
                let file = file.clone();
                let pieces = futures::stream::unfold(start, move |at| {
                    let file = file.clone();
                    async move {
                        if at > end {
                            return None;
                        }
                        let want = (end + 1 - at).min(FILE_PIECE) as usize;
                        let read = tokio::task::spawn_blocking(move || {
                            use std::os::unix::fs::FileExt as _;
                            let mut buf = vec![0u8; want];
                            file.read_exact_at(&mut buf, at).map(|()| Bytes::from(buf))
                        })
                        .await
                        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
                        // After an error the stream ends (the client sees a short body).
                        let next = if read.is_ok() {
                            at + want as u64
                        } else {
                            end + 1
                        };
                        Some((read, next))
                    }
                });
                axum::body::Body::from_stream(pieces)
            }
        }
    }
}

/// A stored root as the bundle carries it.
fn root_doc(root: &store::roots::StoredRoot) -> bundle::RootDoc {
    bundle::RootDoc {
        log_date: root.log_date.format("%Y-%m-%d").to_string(),
        merkle_root: root.merkle_root.clone(),
        entry_count: root.entry_count,
        prev_root: root.prev_root.clone(),
        signature: root.signature.clone(),
        key_id: root.key_id.clone(),
    }
}

/// Bytes read from a filter file per piece of a response.
const FILE_PIECE: u64 = 256 << 10;

/// A built bundle's files with their entity tags.
pub(crate) struct BuiltBundle {
    files: BTreeMap<String, (Held, String)>,
}

/// The bundle last built, rebuilt on first request after its inputs change; one build
/// at a time (the others wait for it).
#[derive(Default)]
pub struct BundleCache(tokio::sync::Mutex<Option<(Made, Arc<BuiltBundle>)>>);

impl BundleCache {
    async fn get(&self, state: &AppState) -> Result<Arc<BuiltBundle>, Error> {
        let records_epoch = state.store.records_epoch();
        let generation = state.corpus.as_ref().and_then(|c| c.current());
        let root = state
            .store
            .recent_roots(1)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| Error::NotFound("no transparency root is published yet".into()))?;
        let made = Made {
            records_epoch,
            corpus_generation: generation.as_ref().map(|g| g.name().to_owned()),
            log_date: root.log_date,
            merkle_root: root.merkle_root.clone(),
        };
        let mut cached = self.0.lock().await;
        if let Some((m, built)) = cached.as_ref()
            && *m == made
        {
            return Ok(built.clone());
        }
        let index = state.classifier.index();
        let vendor_dir = index.dir()?;
        let vendor = write_vendor_part(&state.store, index, root.log_date, move |_| {
            tempfile::tempfile_in(&vendor_dir)
        })
        .await?;
        let now = state.clock.now();
        let key = state.log_key.clone();
        let corpus_root = state.corpus.as_ref().map(|c| c.root().to_path_buf());
        let (built, corpus_files, vendor) = tokio::task::spawn_blocking(move || {
            let written = match (generation.as_deref(), corpus_root) {
                (Some(g), Some(root)) => Some(bundle::write_corpus_filters(g, |_| {
                    tempfile::tempfile_in(&root)
                })?),
                _ => None,
            };
            let inputs = bundle::Inputs {
                vendor: &vendor.filters,
                root: &root_doc(&root),
                feed: &vendor.feed,
                corpus: written.as_ref().map(|(filters, _)| filters),
                now,
            };
            let built = bundle::build(&inputs, key.signing_key(), &key.key_id)?;
            Ok::<_, bundle::BundleError>((built, written, vendor))
        })
        .await
        .map_err(stopped)?
        .map_err(built_error)?;
        let mut files: BTreeMap<String, (Held, String)> = built
            .files
            .into_iter()
            .map(|(name, bytes)| {
                let etag = format!("\"{}\"", hex::encode(Sha256::digest(&bytes)));
                (name, (Held::Memory(Bytes::from(bytes)), etag))
            })
            .collect();
        let feed = (bundle::FEED_FILE.to_owned(), vendor.feed);
        let vendor_files = vendor
            .filters
            .into_iter()
            .map(|f| (f.name, f.entry))
            .chain([feed])
            .zip(vendor.writers);
        let corpus_files = corpus_files.into_iter().flat_map(|(filters, handles)| {
            filters
                .filters
                .into_iter()
                .map(|f| (f.name, f.entry))
                .zip(handles)
        });
        for ((name, entry), file) in vendor_files.chain(corpus_files) {
            let held = Held::File {
                file: Arc::new(file),
                len: entry.bytes,
            };
            files.insert(name, (held, format!("\"{}\"", entry.sha256)));
        }
        let built = Arc::new(BuiltBundle { files });
        *cached = Some((made, built.clone()));
        Ok(built)
    }
}

fn is_corpus_part(name: &str) -> bool {
    name.starts_with("corpus-")
}

/// A file of the vendor-release part.
#[utoipa::path(get, path = "/public/bundle/{file}", tag = "public",
    params(("file" = String, Path, description = "manifest.json, manifest.sig, key.json, root.json, feed.jsonl, vendor-sha256.bloom, vendor-sha1.bloom or vendor-md5.bloom"),
        ("Range" = Option<String>, Header, description = "One byte range, e.g. bytes=0-1023"),
        ("If-None-Match" = Option<String>, Header)),
    responses((status = 200, description = "The file", content_type = "application/octet-stream"),
        (status = 206, description = "The requested range"),
        (status = 304, description = "Unchanged"),
        (status = 404, body = ErrorBody), (status = 416, body = ErrorBody)))]
pub(crate) async fn public_file(
    State(state): State<AppState>,
    Path(file): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    if is_corpus_part(&file) {
        return Err(Error::NotFound(format!(
            "{} is in the reference-corpus part: GET /api/v1/intel/bundle/<file> with a key",
            model::shown(&file)
        ))
        .into());
    }
    serve(&state, &file, &headers).await
}

/// A reference-corpus filter (`corpus-sha256.bloom`, `corpus-sha1.bloom`,
/// `corpus-md5.bloom`); listed in the public manifest when a corpus is loaded.
#[utoipa::path(get, path = "/api/v1/intel/bundle/{file}", tag = "intel",
    security(("api_key" = [])),
    params(("file" = String, Path, description = "corpus-sha256.bloom, corpus-sha1.bloom or corpus-md5.bloom"),
        ("Range" = Option<String>, Header, description = "One byte range, e.g. bytes=0-1023"),
        ("If-None-Match" = Option<String>, Header)),
    responses((status = 200, description = "The filter", content_type = "application/octet-stream"),
        (status = 206, description = "The requested range"),
        (status = 304, description = "Unchanged"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 416, body = ErrorBody)))]
pub async fn corpus_file(
    State(state): State<AppState>,
    Path(file): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    if !is_corpus_part(&file) {
        return Err(Error::NotFound(format!(
            "{} is in the public part: GET /public/bundle/<file>",
            model::shown(&file)
        ))
        .into());
    }
    serve(&state, &file, &headers).await
}

async fn serve(state: &AppState, name: &str, headers: &HeaderMap) -> ApiResult<Response> {
    let built = state.bundle_cache.get(state).await?;
    let Some((held, etag)) = built.files.get(name) else {
        return Err(
            Error::NotFound(format!("the bundle has no file {}", model::shown(name))).into(),
        );
    };
    let content_type = if name.ends_with(".json") || name.ends_with(".sig") {
        "application/json"
    } else if name.ends_with(".jsonl") {
        "application/x-ndjson"
    } else {
        "application/octet-stream"
    };
    let mut response = if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
    {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        match headers.get(header::RANGE) {
            None => {
                let total = held.len();
                let body = if total == 0 {
                    axum::body::Body::empty()
                } else {
                    held.body(0, total - 1)
                };
                let mut r = (StatusCode::OK, body).into_response();
                r.headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(total));
                r
            }
            Some(range) => {
                let total = held.len();
                let (start, end) = parse_range(range.to_str().unwrap_or(""), total)?;
                let mut r = (StatusCode::PARTIAL_CONTENT, held.body(start, end)).into_response();
                r.headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(end - start + 1));
                if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/{total}")) {
                    r.headers_mut().insert(header::CONTENT_RANGE, v);
                }
                r
            }
        }
    };
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(response)
}

/// One range of `bytes=a-b`, `bytes=a-` or `bytes=-n`, as inclusive offsets within
/// `total`; several ranges or one outside the file are 416.
fn parse_range(text: &str, total: u64) -> Result<(u64, u64), Error> {
    let unsatisfiable = || {
        Error::RangeNotSatisfiable(format!(
            "the file holds {total} bytes; send one range as bytes=a-b"
        ))
    };
    let spec = text
        .trim()
        .strip_prefix("bytes=")
        .ok_or_else(unsatisfiable)?;
    if spec.contains(',') || total == 0 {
        return Err(unsatisfiable());
    }
    let (a, b) = spec.split_once('-').ok_or_else(unsatisfiable)?;
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = if a.is_empty() {
        let n: u64 = b.parse().map_err(|_| unsatisfiable())?;
        if n == 0 {
            return Err(unsatisfiable());
        }
        (total.saturating_sub(n), total - 1)
    } else {
        let start: u64 = a.parse().map_err(|_| unsatisfiable())?;
        let end = if b.is_empty() {
            total - 1
        } else {
            b.parse::<u64>()
                .map_err(|_| unsatisfiable())?
                .min(total - 1)
        };
        (start, end)
    };
    if start > end || start >= total {
        return Err(unsatisfiable());
    }
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100).unwrap(), (0, 9));
        assert_eq!(parse_range("bytes=90-", 100).unwrap(), (90, 99));
        assert_eq!(parse_range("bytes=-10", 100).unwrap(), (90, 99));
        assert_eq!(parse_range("bytes=95-200", 100).unwrap(), (95, 99));
        for bad in [
            "bytes=100-",
            "bytes=5-1",
            "bytes=0-1,3-4",
            "items=0-1",
            "bytes=-0",
            "bytes=x-",
        ] {
            assert!(parse_range(bad, 100).is_err(), "{bad}");
        }
    }
}
