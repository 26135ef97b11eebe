//! The records export: records whose validity began within some days, streamed as CSV or
//! JSON, for `GET /api/v1/intel/export` and the console's export form.

use axum::body::Body;
use chrono::Duration;
use futures::stream::{self, StreamExt};
use model::{Arch, Error, Platform};
use serde::Deserialize;
use store::{ExportCursor, ExportQuery};

use crate::AppState;
use crate::api::{EXPORT_COLUMNS, ExportRow};

pub(crate) const MAX_EXPORT_DAYS: i64 = 366;
pub(crate) const MAX_EXPORT_ROWS: u64 = 100_000;
const EXPORT_PAGE_ROWS: u32 = 1000;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportParams {
    /// csv or json (default json).
    format: Option<String>,
    executable: Option<String>,
    platform: Option<String>,
    arch: Option<String>,
    /// First UTC day (inclusive), default 29 days before `to`.
    from: Option<String>,
    /// Last UTC day (inclusive), default today.
    to: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExportFormat {
    Csv,
    Json,
}

/// An export ready to stream.
pub struct Export {
    pub content_type: &'static str,
    /// The download's file name.
    pub filename: String,
    pub body: Body,
}

/// Checks the parameters and the export's size, then streams it.
pub async fn export(state: &AppState, params: ExportParams) -> Result<Export, Error> {
    let format = match params.format.as_deref() {
        None | Some("json") => ExportFormat::Json,
        Some("csv") => ExportFormat::Csv,
        Some(other) => {
            return Err(Error::bad_request(format!(
                "format must be csv or json (got {other:?})"
            )));
        }
    };
    let today = state.clock.now().date_naive();
    let to = crate::extract::day(params.to.as_deref(), "to")?.unwrap_or(today);
    let from =
        crate::extract::day(params.from.as_deref(), "from")?.unwrap_or(to - Duration::days(29));
    if from > to {
        return Err(Error::bad_request("from must not be after to"));
    }
    let days = (to - from).num_days() + 1;
    if days > MAX_EXPORT_DAYS {
        return Err(Error::bad_request(format!(
            "the range covers {days} days; at most {MAX_EXPORT_DAYS} are allowed: narrow from/to"
        )));
    }
    let query = ExportQuery {
        executable: crate::extract::name_filter(params.executable.as_deref(), "executable")?,
        platform: parse_opt::<Platform>(params.platform.as_deref(), "platform")?,
        arch: parse_opt::<Arch>(params.arch.as_deref(), "arch")?,
        from,
        to,
    };
    // Counted only as far as the limit: past it, how far does not matter.
    let rows = state
        .store
        .export_count(&query, MAX_EXPORT_ROWS + 1)
        .await?;
    if rows > MAX_EXPORT_ROWS {
        return Err(Error::bad_request(format!(
            "the export would hold more than {MAX_EXPORT_ROWS} rows, the most allowed: narrow from/to or filter by executable, platform or arch"
        )));
    }
    let (content_type, extension) = match format {
        ExportFormat::Csv => ("text/csv; charset=utf-8", "csv"),
        ExportFormat::Json => ("application/json", "json"),
    };
    Ok(Export {
        content_type,
        filename: format!("knowngood-export-{from}-{to}.{extension}"),
        body: Body::from_stream(export_stream(state.clone(), query, format)),
    })
}

/// Rows fetched a page at a time by keyset, so memory stays flat whatever the size.
fn export_stream(
    state: AppState,
    query: ExportQuery,
    format: ExportFormat,
) -> impl futures::Stream<Item = Result<String, std::io::Error>> {
    enum Step {
        Start,
        Rows(Option<ExportCursor>, bool),
        Done,
    }
    stream::unfold(Step::Start, move |step| {
        let state = state.clone();
        let query = query.clone();
        async move {
            match step {
                Step::Start => {
                    let head = match format {
                        ExportFormat::Csv => format!("{}\r\n", EXPORT_COLUMNS.join(",")),
                        ExportFormat::Json => "[".to_string(),
                    };
                    Some((Ok(head), Step::Rows(None, true)))
                }
                Step::Rows(cursor, first) => {
                    let page = match state
                        .store
                        .export_page(&query, cursor.as_ref(), EXPORT_PAGE_ROWS)
                        .await
                    {
                        Ok(page) => page,
                        Err(e) => {
                            tracing::error!(error = %e, "export aborted");
                            return Some((Err(std::io::Error::other("export failed")), Step::Done));
                        }
                    };
                    let Some(last) = page.last() else {
                        let tail = if format == ExportFormat::Json {
                            "]"
                        } else {
                            ""
                        };
                        return Some((Ok(tail.to_string()), Step::Done));
                    };
                    let next = ExportCursor {
                        valid_from: last.valid_from,
                        id: last.id.clone(),
                    };
                    let mut chunk = String::new();
                    for (i, record) in page.iter().filter(|r| r.integrity_ok).enumerate() {
                        let row = ExportRow::from(record);
                        match format {
                            ExportFormat::Csv => chunk.push_str(&row.to_csv_line()),
                            ExportFormat::Json => {
                                if !(first && i == 0) {
                                    chunk.push(',');
                                }
                                chunk.push_str(&serde_json::to_string(&row).unwrap_or_default());
                            }
                        }
                    }
                    let first = first && chunk.is_empty();
                    Some((Ok(chunk), Step::Rows(Some(next), first)))
                }
                Step::Done => None,
            }
        }
    })
    .filter(|chunk| futures::future::ready(!matches!(chunk, Ok(s) if s.is_empty())))
}

/// An optional parameter parsed as `T`, refused as `field`.
pub(crate) fn parse_opt<T: std::str::FromStr<Err = Error>>(
    raw: Option<&str>,
    field: &str,
) -> Result<Option<T>, Error> {
    raw.filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<T>().map_err(|e| match e {
                Error::BadRequest(m) => Error::BadRequest(format!("{field}: {m}")),
                other => other,
            })
        })
        .transpose()
}
