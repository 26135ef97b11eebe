//! TAXII 2.1 (<https://docs.oasis-open.org/cti/taxii/v2.1/os/taxii-v2.1-os.html>), read
//! only: the resources of discovery, the API root and the collection, and a
//! [`PageBuilder`] that makes one page of object, manifest and version answers (filters
//! and paging) from the collection's objects offered in date-added order, so the caller
//! reads only the records a page needs.
//!
//! Paging is by date added, which is distinct per object and increases as records are
//! added: `next` is an opaque cursor naming the last object returned, so a page never
//! repeats or skips an object while others are added, and `added_after` (strictly after)
//! with the `X-TAXII-Date-Added-Last` of a response resumes exactly where it ended.

use std::sync::LazyLock;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde_json::json;

use crate::micros;
use crate::stix::{MEDIA_TYPE as STIX_MEDIA_TYPE, StixObject};

/// The one media type of TAXII 2.1 answers, exactly as clients compare it.
pub const MEDIA_TYPE: &str = "application/taxii+json;version=2.1";
/// The API root's path segment: `/taxii2/knowngood/`.
pub const API_ROOT: &str = "knowngood";
/// Default and largest page.
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 1000;

/// The collection of current vendor releases.
pub static CURRENT_COLLECTION: LazyLock<String> =
    LazyLock::new(|| crate::stix::own_uuid("taxii-collection:current"));

/// A TAXII error: its status and the body's title and description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaxiiError {
    pub status: u16,
    pub title: &'static str,
    pub description: String,
}

impl TaxiiError {
    pub fn new(status: u16, title: &'static str, description: impl Into<String>) -> Self {
        Self {
            status,
            title,
            description: description.into(),
        }
    }

    fn bad_request(description: impl Into<String>) -> Self {
        Self::new(400, "Bad request", description)
    }

    pub fn not_found(description: impl Into<String>) -> Self {
        Self::new(404, "Not found", description)
    }

    /// The error message body.
    pub fn body(&self) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "title": self.title,
            "description": self.description,
            "http_status": self.status.to_string(),
        }))
        .unwrap_or_default()
    }
}

/// Whether an `Accept` header admits TAXII 2.1 (an absent one admits anything).
pub fn accepts(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return true };
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let mut version_ok = true;
        let mut q_ok = true;
        for param in parts {
            let (name, value) = param.split_once('=').unwrap_or((param, ""));
            let value = value.trim().trim_matches('"');
            match name.trim().to_ascii_lowercase().as_str() {
                "version" => version_ok = value == "2.1",
                "q" => q_ok = value.parse::<f32>().is_ok_and(|q| q > 0.0),
                _ => {}
            }
        }
        let media_ok = match media.as_str() {
            "application/taxii+json" => version_ok,
            "*/*" | "application/*" => true,
            _ => false,
        };
        media_ok && q_ok
    })
}

/// The discovery resource.
pub fn discovery(base_url: &str) -> Vec<u8> {
    let root = format!("{base_url}/taxii2/{API_ROOT}/");
    to_vec(&json!({
        "title": "knowngood TAXII server",
        "description": "Read-only TAXII 2.1 access to the known-good hashes of current vendor releases.",
        "default": root,
        "api_roots": [root],
    }))
}

/// The API root resource.
pub fn api_root() -> Vec<u8> {
    to_vec(&json!({
        "title": "knowngood",
        "description": "Known-good hashes of vendor releases as STIX 2.1.",
        "versions": [MEDIA_TYPE],
        "max_content_length": 0,
    }))
}

fn collection_json() -> serde_json::Value {
    json!({
        "id": *CURRENT_COLLECTION,
        "title": crate::TITLE,
        "description": "One benign indicator per current vendor release file, with its file and software observables; a record leaves the collection when a newer version supersedes it.",
        "can_read": true,
        "can_write": false,
        "media_types": [STIX_MEDIA_TYPE],
    })
}

/// The collections resource.
pub fn collections() -> Vec<u8> {
    to_vec(&json!({"collections": [collection_json()]}))
}

/// One collection, or 404.
pub fn collection(id: &str) -> Result<Vec<u8>, TaxiiError> {
    known_collection(id)?;
    Ok(to_vec(&collection_json()))
}

/// 404 for any collection but ours.
pub fn known_collection(id: &str) -> Result<(), TaxiiError> {
    if id == CURRENT_COLLECTION.as_str() {
        Ok(())
    } else {
        Err(TaxiiError::not_found(format!(
            "no collection {id:?} at this API root"
        )))
    }
}

fn to_vec(value: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// The raw query parameters TAXII defines, as the request gave them.
#[derive(Debug, Default, Clone)]
pub struct RawQuery {
    pub added_after: Option<String>,
    pub limit: Option<String>,
    pub next: Option<String>,
    pub match_id: Option<String>,
    pub match_type: Option<String>,
    pub match_version: Option<String>,
    pub match_spec_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Versions {
    /// `first`, `last` or `all`: objects here have one version each, so each matches.
    Any,
    Exactly(Vec<DateTime<Utc>>),
}

/// A parsed, checked query.
#[derive(Debug, Clone)]
pub struct Query {
    added_after: Option<DateTime<Utc>>,
    limit: usize,
    after_cursor: Option<DateTime<Utc>>,
    ids: Option<Vec<String>>,
    types: Option<Vec<String>>,
    versions: Versions,
    spec_versions: Option<Vec<String>>,
}

fn list(value: &Option<String>) -> Option<Vec<String>> {
    value.as_ref().map(|v| {
        v.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    })
}

fn timestamp(field: &str, value: &str) -> Result<DateTime<Utc>, TaxiiError> {
    DateTime::parse_from_rfc3339(value.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            TaxiiError::bad_request(format!(
                "{field} must be an RFC 3339 timestamp such as 2026-01-01T00:00:00.000Z (got {value:?})"
            ))
        })
}

/// The `next` cursor after an object added at `t`.
fn cursor(t: DateTime<Utc>) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(format!("after:{}", t.timestamp_micros()))
}

fn parse_cursor(text: &str) -> Result<DateTime<Utc>, TaxiiError> {
    let invalid = || TaxiiError::bad_request("next is not a cursor this server gave");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim())
        .map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let micros: i64 = text
        .strip_prefix("after:")
        .and_then(|m| m.parse().ok())
        .ok_or_else(invalid)?;
    DateTime::from_timestamp_micros(micros).ok_or_else(invalid)
}

impl Query {
    pub fn parse(raw: &RawQuery) -> Result<Self, TaxiiError> {
        let added_after = raw
            .added_after
            .as_deref()
            .map(|v| timestamp("added_after", v))
            .transpose()?;
        let limit = match raw.limit.as_deref() {
            None => DEFAULT_LIMIT,
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) if n >= 1 => n.min(MAX_LIMIT),
                _ => {
                    return Err(TaxiiError::bad_request(format!(
                        "limit must be a positive integer (got {v:?})"
                    )));
                }
            },
        };
        let after_cursor = raw.next.as_deref().map(parse_cursor).transpose()?;
        let versions = match list(&raw.match_version) {
            None => Versions::Any,
            Some(values) => {
                let mut exact = Vec::new();
                let mut any = false;
                for v in &values {
                    match v.as_str() {
                        "first" | "last" | "all" => any = true,
                        other => exact.push(timestamp("match[version]", other)?),
                    }
                }
                if any {
                    Versions::Any
                } else {
                    Versions::Exactly(exact)
                }
            }
        };
        Ok(Self {
            added_after,
            limit,
            after_cursor,
            ids: list(&raw.match_id),
            types: list(&raw.match_type),
            versions,
            spec_versions: list(&raw.match_spec_version),
        })
    }

    fn matches(&self, o: &StixObject) -> bool {
        self.ids.as_ref().is_none_or(|ids| ids.contains(&o.id))
            && self
                .types
                .as_ref()
                .is_none_or(|t| t.iter().any(|t| t == o.kind))
            && match &self.versions {
                Versions::Any => true,
                Versions::Exactly(at) => at.contains(&o.version),
            }
            && self
                .spec_versions
                .as_ref()
                .is_none_or(|v| v.iter().any(|v| v == "2.1"))
    }

    /// Objects strictly after this instant only.
    fn lower_bound(&self) -> Option<DateTime<Utc>> {
        match (self.added_after, self.after_cursor) {
            (Some(a), Some(c)) => Some(a.max(c)),
            (a, c) => a.or(c),
        }
    }
}

/// One page of a listing.
#[derive(Debug)]
pub struct Page {
    pub objects: Vec<StixObject>,
    pub more: bool,
    pub next: Option<String>,
    /// `X-TAXII-Date-Added-First` and `-Last`: of the objects listed, or, when none is,
    /// the query's own `added_after` (so a client resuming from it stays where it is), or
    /// on an empty page cut short, the last date added examined.
    pub date_added_first: Option<String>,
    pub date_added_last: Option<String>,
}

/// Builds one page from the collection's objects, offered in date-added order starting
/// anywhere at or before [`PageBuilder::records_from`]: objects at or before the query's
/// bound, or not matching its filters (or `only_id`), are passed over.
#[derive(Debug)]
pub struct PageBuilder<'q> {
    query: &'q Query,
    only_id: Option<&'q str>,
    bound: Option<DateTime<Utc>>,
    objects: Vec<StixObject>,
    /// Date added of the last object offered past the bound.
    examined: Option<DateTime<Utc>>,
}

impl<'q> PageBuilder<'q> {
    pub fn new(query: &'q Query, only_id: Option<&'q str>) -> Self {
        Self {
            query,
            only_id,
            bound: query.lower_bound(),
            objects: Vec::new(),
            examined: None,
        }
    }

    /// The earliest date added a record may have and still have an object on this page:
    /// a record's objects are added at its `added_at` + 0 to 4 µs. `None`: from the start.
    pub fn records_from(&self) -> Option<DateTime<Utc>> {
        self.bound
            .map(|b| b - chrono::Duration::microseconds(RECORD_OBJECT_SPAN - 1))
    }

    /// Offers the next object in date-added order.
    pub fn offer(&mut self, object: StixObject) {
        if self.is_full() || self.bound.is_some_and(|b| object.date_added <= b) {
            return;
        }
        self.examined = Some(object.date_added);
        if self.only_id.is_none_or(|id| id == object.id) && self.query.matches(&object) {
            self.objects.push(object);
        }
    }

    /// Whether the page has its objects and knows there are more.
    pub fn is_full(&self) -> bool {
        self.objects.len() > self.query.limit
    }

    /// The page. `cut_short`: the caller stopped offering before the end of the collection
    /// (it examined as many records as one answer may), so there may be more even when the
    /// page is not full; `next` then resumes after the last object examined.
    pub fn finish(mut self, cut_short: bool) -> Page {
        let full = self.is_full();
        self.objects.truncate(self.query.limit);
        let more = full || (cut_short && self.examined.is_some());
        let last_listed = self.objects.last().map(|o| o.date_added);
        let resume = if full { last_listed } else { self.examined };
        let (date_added_first, date_added_last) = match (self.objects.first(), last_listed) {
            (Some(first), Some(last)) => (Some(micros(first.date_added)), Some(micros(last))),
            _ if more => {
                let examined = self.examined.map(micros);
                (examined.clone(), examined)
            }
            _ => {
                let echo = self.query.added_after.map(micros);
                (echo.clone(), echo)
            }
        };
        Page {
            more,
            next: if more { resume.map(cursor) } else { None },
            objects: self.objects,
            date_added_first,
            date_added_last,
        }
    }
}

/// How many microseconds a record's objects span from its `added_at` ([`crate::stix`]).
const RECORD_OBJECT_SPAN: i64 = 5;

impl Page {
    /// The envelope resource.
    pub fn envelope(&self) -> Vec<u8> {
        let mut out = String::from("{\"more\":");
        out.push_str(if self.more { "true" } else { "false" });
        if let Some(next) = &self.next {
            out.push_str(",\"next\":");
            out.push_str(&serde_json::to_string(next).unwrap_or_default());
        }
        if !self.objects.is_empty() {
            out.push_str(",\"objects\":[");
            for (i, o) in self.objects.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&o.json);
            }
            out.push(']');
        }
        out.push('}');
        out.into_bytes()
    }

    /// The manifest resource.
    pub fn manifest(&self) -> Vec<u8> {
        let objects: Vec<serde_json::Value> = self
            .objects
            .iter()
            .map(|o| {
                json!({
                    "id": o.id,
                    "date_added": micros(o.date_added),
                    "version": micros(o.version),
                    "media_type": STIX_MEDIA_TYPE,
                })
            })
            .collect();
        let mut body = json!({"more": self.more});
        if let Some(map) = body.as_object_mut() {
            if let Some(next) = &self.next {
                map.insert("next".into(), next.clone().into());
            }
            if !objects.is_empty() {
                map.insert("objects".into(), objects.into());
            }
        }
        to_vec(&body)
    }

    /// The versions resource.
    pub fn versions(&self) -> Vec<u8> {
        let versions: Vec<String> = self.objects.iter().map(|o| micros(o.version)).collect();
        let mut body = json!({"more": self.more});
        if let Some(map) = body.as_object_mut()
            && !versions.is_empty()
        {
            map.insert("versions".into(), versions.into());
        }
        to_vec(&body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::record;
    use crate::stix::{StixObject, objects};

    fn collection(n: u32) -> Vec<StixObject> {
        let records: Vec<_> = (0..n)
            .map(|i| record(&format!("r{i}"), &format!("tool{i}.exe"), "1.0", i))
            .collect();
        let refs: Vec<_> = records.iter().collect();
        objects(&refs)
    }

    /// The page `query` gives when every object is offered.
    fn page_of(objects: &[StixObject], query: &Query) -> Page {
        let mut builder = PageBuilder::new(query, None);
        for o in objects {
            builder.offer(o.clone());
        }
        builder.finish(false)
    }

    #[test]
    fn accept_headers() {
        assert!(accepts(None));
        assert!(accepts(Some("application/taxii+json;version=2.1")));
        assert!(accepts(Some("application/taxii+json; version=2.1")));
        assert!(accepts(Some("application/taxii+json")));
        assert!(accepts(Some("text/html, */*;q=0.1")));
        assert!(!accepts(Some("application/taxii+json;version=2.0")));
        assert!(!accepts(Some("application/json")));
        assert!(!accepts(Some("application/taxii+json;version=2.1;q=0")));
    }

    #[test]
    fn paging_by_cursor_lists_each_object_once() {
        let collection = collection(7);
        let mut raw = RawQuery {
            limit: Some("4".into()),
            ..RawQuery::default()
        };
        let mut seen = Vec::new();
        loop {
            let query = Query::parse(&raw).unwrap();
            let page = page_of(&collection, &query);
            seen.extend(page.objects.iter().map(|o| o.id.clone()));
            if !page.more {
                break;
            }
            raw.next = page.next.clone();
        }
        assert_eq!(seen.len(), collection.len());
        let distinct: std::collections::HashSet<_> = seen.iter().collect();
        assert_eq!(distinct.len(), seen.len());
    }

    #[test]
    fn added_after_is_strict_and_filters_combine() {
        let collection = collection(3);
        let all = page_of(&collection, &Query::parse(&RawQuery::default()).unwrap());
        let third = &all.objects[2];
        let after = Query::parse(&RawQuery {
            added_after: Some(micros(third.date_added)),
            match_type: Some("indicator,file".into()),
            ..RawQuery::default()
        })
        .unwrap();
        let page = page_of(&collection, &after);
        assert!(page.objects.iter().all(|o| o.date_added > third.date_added));
        assert!(
            page.objects
                .iter()
                .all(|o| o.kind == "indicator" || o.kind == "file")
        );
        assert_eq!(
            page_of(
                &collection,
                &Query::parse(&RawQuery {
                    match_spec_version: Some("2.0".into()),
                    ..RawQuery::default()
                })
                .unwrap(),
            )
            .objects
            .len(),
            0
        );
        assert!(
            Query::parse(&RawQuery {
                limit: Some("0".into()),
                ..RawQuery::default()
            })
            .is_err()
        );
        assert!(
            Query::parse(&RawQuery {
                next: Some("zz".into()),
                ..RawQuery::default()
            })
            .is_err()
        );
        assert!(
            Query::parse(&RawQuery {
                added_after: Some("yesterday".into()),
                ..RawQuery::default()
            })
            .is_err()
        );
    }

    #[test]
    fn records_from_reaches_back_to_the_record_of_the_bound() {
        let collection = collection(2);
        // Resuming after the second record's file: its software and relationships remain.
        let file = &collection[3];
        let query = Query::parse(&RawQuery {
            added_after: Some(micros(file.date_added)),
            ..RawQuery::default()
        })
        .unwrap();
        let builder = PageBuilder::new(&query, None);
        assert_eq!(
            builder.records_from(),
            Some(file.date_added - chrono::Duration::microseconds(4))
        );
        let rest = page_of(&collection, &query);
        let kinds: Vec<&str> = rest.objects.iter().map(|o| o.kind).collect();
        assert_eq!(kinds[0], "software");
        assert!(!rest.more);
    }

    #[test]
    fn a_page_cut_short_resumes_after_what_was_examined() {
        let collection = collection(2);
        let query = Query::parse(&RawQuery {
            match_type: Some("software".into()),
            limit: Some("5".into()),
            ..RawQuery::default()
        })
        .unwrap();
        let mut builder = PageBuilder::new(&query, None);
        // The caller stops after the first record (its examination budget is spent).
        for o in &collection[..7] {
            builder.offer(o.clone());
        }
        let first = builder.finish(true);
        assert!(first.more);
        assert_eq!(first.objects.len(), 1);
        let resumed = Query::parse(&RawQuery {
            next: first.next.clone(),
            ..query_raw("software")
        })
        .unwrap();
        let second = page_of(&collection, &resumed);
        assert_eq!(second.objects.len(), 1);
        assert_ne!(second.objects[0].id, first.objects[0].id);
        assert!(!second.more);
    }

    fn query_raw(kind: &str) -> RawQuery {
        RawQuery {
            match_type: Some(kind.into()),
            ..RawQuery::default()
        }
    }
}
