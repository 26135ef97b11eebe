//! The edge of the API: request extractors whose rejections are API errors (a malformed
//! body or query is a 400 that names the problem, an oversize body a 413, never a 500 or
//! axum's plain-text reply), the checks every query string and path parameter passes
//! before anything else sees it, and the one parser of days and instants.

use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use bytes::Bytes;
use chrono::{DateTime, NaiveDate, Utc};
use model::Error;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A body taken as bytes, within the route's size limit (413 above it).
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                Error::PayloadTooLarge("request body is larger than this route accepts".into())
            } else {
                Error::bad_request(format!("could not read the request body: {rejection}"))
            }
        })?;
        Ok(Self(bytes))
    }
}

/// A JSON body. Any content type is accepted: clients that forget the header get the same
/// answer as those that send it.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                Error::PayloadTooLarge("request body is larger than this route accepts".into())
            } else {
                Error::bad_request(format!("could not read the request body: {rejection}"))
            }
        })?;
        decode_json(&bytes).map(JsonBody).map_err(Into::into)
    }
}

/// A request body as JSON, checked the way every JSON route checks it: not empty, no NUL
/// anywhere, one value and nothing after it. The error names where in the body the problem
/// is.
pub(crate) fn decode_json<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, Error> {
    if bytes.is_empty() {
        return Err(Error::bad_request("request body must be a JSON object"));
    }
    // PostgreSQL text cannot hold NUL, and no field of ours has a use for one. The scan
    // is cheap; only a body that may hold one is parsed again to name the field.
    if bytes.contains(&0) || has_nul_escape(bytes) {
        let field = serde_json::from_slice::<serde_json::Value>(bytes)
            .ok()
            .and_then(|v| nul_path(&v, String::new()));
        return Err(match field {
            Some(field) => Error::bad_request(format!(
                "invalid JSON body: {field}: must not contain NUL characters"
            )),
            None => Error::bad_request("request body must not contain NUL characters"),
        });
    }
    // Most bodies are well formed: they are read once, without tracking where the reader
    // is. Only a body that fails is read again to name where (`hashes`, `hashes[3]`).
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            Error::bad_request(format!("invalid JSON body: {inner}"))
        } else {
            Error::bad_request(format!("invalid JSON body: {path}: {inner}"))
        }
    })?;
    de.end()
        .map_err(|e| Error::bad_request(format!("invalid JSON body: {e}")))?;
    Ok(value)
}

/// Query parameters.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| QueryParams(q.0))
            .map_err(|e: QueryRejection| {
                Error::bad_request(format!("invalid query: {}", e.body_text())).into()
            })
    }
}

/// Where in a JSON value the first string holding a NUL is, as `a.b[2]`.
fn nul_path(value: &serde_json::Value, here: String) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::String(s) if s.contains('\0') => Some(here),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_path(v, format!("{here}[{i}]"))),
        Value::Object(fields) => fields.iter().find_map(|(k, v)| {
            if k.contains('\0') {
                return Some(format!("{here}{}", model::shown(k)));
            }
            let path = if here.is_empty() {
                k.clone()
            } else {
                format!("{here}.{k}")
            };
            nul_path(v, path)
        }),
        _ => None,
    }
}

/// Whether `body` holds the escape `\u0000` (either case): only at a backslash, which most
/// bodies hold none of.
fn has_nul_escape(body: &[u8]) -> bool {
    memchr::memchr_iter(b'\\', body).any(|at| {
        body.get(at + 1..at + 6)
            .is_some_and(|rest| rest.eq_ignore_ascii_case(b"u0000"))
    })
}

/// Longest query value or path parameter accepted, in bytes; fields with a tighter limit
/// (a file name: 255) check their own.
pub(crate) const MAX_PARAM_BYTES: usize = 1024;
/// Most query parameters accepted in one request.
pub(crate) const MAX_QUERY_PARAMS: usize = 32;

/// Refuses a query string or path parameter that no route could use: not UTF-8 once
/// percent-decoded, holding a control character (NUL breaks PostgreSQL text, line breaks and
/// escapes forge log lines), or longer than [`MAX_PARAM_BYTES`]. The 400 names the parameter.
pub(crate) fn check_edge(query: Option<&str>, path_params: &[(&str, &str)]) -> Result<(), Error> {
    if let Some(query) = query {
        let pairs: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
        if pairs.len() > MAX_QUERY_PARAMS {
            return Err(Error::bad_request(format!(
                "the query holds {} parameters; at most {MAX_QUERY_PARAMS} are accepted",
                pairs.len()
            )));
        }
        for pair in pairs {
            let (raw_name, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = decode_query(raw_name)
                .map_err(|()| Error::bad_request("a query parameter name is not valid UTF-8"))?;
            check_text(&format!("query parameter {}", model::shown(&name)), &name)?;
            let value = decode_query(raw_value).map_err(|()| {
                Error::bad_request(format!("{}: not valid UTF-8", model::shown(&name)))
            })?;
            check_text(&name, &value)?;
        }
    }
    for (name, value) in path_params {
        check_text(name, value)?;
    }
    Ok(())
}

fn check_text(field: &str, value: &str) -> Result<(), Error> {
    if value.len() > MAX_PARAM_BYTES {
        return Err(Error::bad_request(format!(
            "{field} is {} bytes long; at most {MAX_PARAM_BYTES} are accepted",
            value.len()
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::bad_request(format!(
            "{field} must not contain control characters (got {})",
            model::shown(value)
        )));
    }
    Ok(())
}

/// `application/x-www-form-urlencoded` decoding that refuses invalid UTF-8 instead of
/// replacing it.
fn decode_query(raw: &str) -> Result<String, ()> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    // A lone '%' stands for itself, as decoders commonly treat it.
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| ())
}

/// Longest file name a record can have, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// Default page size of the listing routes (history, revocations, downloads, audit,
/// package changes).
pub(crate) const DEFAULT_PAGE: u32 = 50;
/// Largest page size of the listing routes.
pub(crate) const MAX_PAGE: u32 = 200;

/// `limit` of a listing route: 1 to [`MAX_PAGE`], default [`DEFAULT_PAGE`].
pub fn parse_limit(raw: Option<&str>) -> Result<u32, Error> {
    parse_limit_within(raw, DEFAULT_PAGE, MAX_PAGE)
}

/// `limit` from 1 to `max`, `default` when absent.
pub(crate) fn parse_limit_within(raw: Option<&str>, default: u32, max: u32) -> Result<u32, Error> {
    let Some(raw) = raw else {
        return Ok(default);
    };
    match raw.trim().parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(Error::bad_request(format!(
            "limit must be an integer from 1 to {max} (got {raw:?})"
        ))),
    }
}

/// `offset` of a listing route: 0 or more, default 0.
pub(crate) fn parse_offset(raw: Option<&str>) -> Result<u64, Error> {
    let Some(raw) = raw else { return Ok(0) };
    raw.trim().parse::<u64>().map_err(|_| {
        Error::bad_request(format!(
            "offset must be a non-negative integer (got {raw:?})"
        ))
    })
}

/// A name filter (`executable`, `vendor`): trimmed, empty means absent; longer than any
/// recorded name can be is a 400 rather than a search that cannot match.
pub(crate) fn name_filter(raw: Option<&str>, field: &str) -> Result<Option<String>, Error> {
    let Some(name) = raw.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::bad_request(format!(
            "{field} is {} bytes long; names have at most {MAX_NAME_BYTES}",
            name.len()
        )));
    }
    Ok(Some(name.to_string()))
}

/// Earliest and latest day a date parameter may name: every backend and chrono hold them,
/// and no record is dated outside them.
pub(crate) fn date_range() -> (NaiveDate, NaiveDate) {
    (
        NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or(NaiveDate::MIN),
        NaiveDate::from_ymd_opt(9999, 12, 31).unwrap_or(NaiveDate::MAX),
    )
}

/// A day parameter, exactly `YYYY-MM-DD` within [`date_range`]; empty means absent.
pub fn day(raw: Option<&str>, field: &str) -> Result<Option<NaiveDate>, Error> {
    let Some(raw) = raw.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let bad = || {
        Error::bad_request(format!(
            "{field} must be a date YYYY-MM-DD between 1970-01-01 and 9999-12-31 (got {})",
            model::shown(raw)
        ))
    };
    // chrono alone also takes "2025-3-1" and signed years.
    if raw.len() != 10 || !raw.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        return Err(bad());
    }
    let day = NaiveDate::parse_from_str(raw, "%Y-%m-%d").map_err(|_| bad())?;
    let (first, last) = date_range();
    if day < first || day > last {
        return Err(bad());
    }
    Ok(Some(day))
}

/// An instant parameter: an RFC 3339 timestamp, or a day standing for its first instant
/// (or its last, `end_of_day`); within [`date_range`].
pub fn instant(
    raw: Option<&str>,
    field: &str,
    end_of_day: bool,
) -> Result<Option<DateTime<Utc>>, Error> {
    let Some(raw) = raw.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(raw) {
        let t = t.with_timezone(&Utc);
        let (first, last) = date_range();
        if t.date_naive() < first || t.date_naive() > last {
            return Err(Error::bad_request(format!(
                "{field} must lie between 1970-01-01 and 9999-12-31 (got {})",
                model::shown(raw)
            )));
        }
        return Ok(Some(t));
    }
    let day = day(Some(raw), field).map_err(|_| {
        Error::bad_request(format!(
            "{field} must be an RFC 3339 timestamp or a date YYYY-MM-DD between 1970-01-01 and 9999-12-31 (got {})",
            model::shown(raw)
        ))
    })?;
    Ok(day.map(|day| {
        let start = day.and_time(chrono::NaiveTime::MIN).and_utc();
        if end_of_day {
            start + chrono::Duration::days(1) - chrono::Duration::microseconds(1)
        } else {
            start
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_refuses_what_no_route_can_use() {
        assert!(check_edge(Some("executable=putty.exe&limit=5"), &[]).is_ok());
        assert!(check_edge(Some("executable=%C3%89lan.exe"), &[]).is_ok());
        for (query, named) in [
            ("executable=%00", "executable"),
            ("executable=a%0Ab", "executable"),
            ("executable=%1B%5B2J", "executable"),
            ("executable=%FF%FE", "executable"),
            ("%00=x", "query parameter"),
        ] {
            let e = check_edge(Some(query), &[]).unwrap_err();
            assert!(
                matches!(&e, Error::BadRequest(m) if m.contains(named)),
                "{query}: {e}"
            );
        }
        let long = format!("executable={}", "a".repeat(MAX_PARAM_BYTES + 1));
        assert!(check_edge(Some(&long), &[]).is_err());
        let many = vec!["a=1"; MAX_QUERY_PARAMS + 1].join("&");
        assert!(check_edge(Some(&many), &[]).is_err());
        assert!(check_edge(None, &[("team_id", "acme\r\nx")]).is_err());
        assert!(check_edge(None, &[("team_id", &"t".repeat(60_000))]).is_err());
    }

    #[test]
    fn days_and_instants_stay_in_range() {
        assert_eq!(
            day(Some("2025-03-01"), "from").unwrap(),
            NaiveDate::from_ymd_opt(2025, 3, 1)
        );
        for bad in [
            "-5000-01-01",
            "-262143-01-01",
            "+10000-01-01",
            "2025-3-1",
            "0000-01-01",
            "1969-12-31",
        ] {
            assert!(day(Some(bad), "from").is_err(), "{bad}");
            assert!(instant(Some(bad), "from", false).is_err(), "{bad}");
        }
        assert!(instant(Some("0001-01-01T00:00:00Z"), "from", false).is_err());
        let end = instant(Some("2025-03-01"), "until", true).unwrap().unwrap();
        assert_eq!(end.to_rfc3339(), "2025-03-01T23:59:59.999999+00:00");
    }

    #[derive(Debug, serde::Deserialize)]
    struct Body {
        #[allow(dead_code)] // read only through Debug
        hashes: Vec<String>,
    }

    fn refusal(body: &str) -> String {
        match decode_json::<Body>(body.as_bytes()) {
            Err(Error::BadRequest(m)) => m,
            other => panic!("{body:?} answered {other:?}"),
        }
    }

    #[test]
    fn json_refusals_name_where_the_body_is_wrong() {
        assert!(decode_json::<Body>(br#"{"hashes": ["a\\b", "\u0041"]}"#).is_ok());
        assert_eq!(
            refusal(r#"{"hashes": ["a", 7]}"#),
            "invalid JSON body: hashes[1]: invalid type: integer `7`, expected a string at line 1 column 18"
        );
        assert!(refusal(r#"{"hashes": []} x"#).contains("trailing characters"));
        assert_eq!(
            refusal(r#"{"hashes": ["a", "b\u0000"]}"#),
            "invalid JSON body: hashes[1]: must not contain NUL characters"
        );
        // An escape the reader refuses still counts as a NUL to refuse, in either case.
        assert_eq!(
            refusal(r#"{"hashes": ["\U0000"]}"#),
            "request body must not contain NUL characters"
        );
        assert!(refusal("{\"hashes\": [\"\0\"]}").contains("NUL"));
        // A backslash at the very end is no escape and no panic.
        assert!(refusal("{\"hashes\": \\").contains("invalid JSON body"));
    }
}
