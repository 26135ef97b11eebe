//! The MISP warninglist of every current, verified vendor hash, streamed from the vendor
//! lookup index: the three digest kinds are walked in order, merged, and written out a
//! piece at a time, so the answer never holds the list (nor the records) in memory.

use axum::body::Body;
use model::{Error, HashAlgo};
use serde::Serialize;

use std::io::Write as _;

use crate::AppState;
use crate::services::streamed::streamed;

/// A MISP warninglist (the format of MISP/misp-warninglists `lists/*/list.json`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct MispWarninglist {
    pub name: &'static str,
    /// The UTC day it was made, as YYYYMMDD (MISP compares versions as integers).
    pub version: u32,
    pub description: &'static str,
    /// Always `string`: exact matches.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub matching_attributes: [&'static str; 6],
    /// Lowercase hex digests, sorted, distinct.
    pub list: Vec<String>,
}

/// The warninglist as of the store's records now, as a streamed JSON body.
pub async fn misp_warninglist(state: &AppState) -> Result<Body, Error> {
    let today = state.clock.now().date_naive();
    let version = today
        .format("%Y%m%d")
        .to_string()
        .parse()
        .map_err(|_| Error::internal("a date that is not a number"))?;
    let head = MispWarninglist {
        name: "knowngood: current vendor releases",
        version,
        description: "Hashes of the current releases of software vendors, as published by the vendors and verified by knowngood.",
        kind: "string",
        matching_attributes: [
            "md5",
            "sha1",
            "sha256",
            "filename|md5",
            "filename|sha1",
            "filename|sha256",
        ],
        list: Vec::new(),
    };
    let mut head = serde_json::to_vec(&head)
        .map_err(|e| Error::internal_caused("writing the warninglist failed", e))?;
    // `…"list":[]}` loses its closing `]}`, which follow the digests.
    head.truncate(head.len() - 2);
    let digests = state
        .classifier
        .index()
        .current_digests(&state.store)
        .await?;
    Ok(streamed(move |out| {
        let kinds = [HashAlgo::Sha256, HashAlgo::Sha1, HashAlgo::Md5];
        let mut walks = kinds.map(|algo| digests.iter(algo).peekable());
        out.write_all(&head)?;
        let mut first = true;
        // Each walk is in byte order, which is the order of their lowercase hex; the kinds'
        // lengths differ, so no digest is listed twice.
        while let Some(next) = walks
            .iter_mut()
            .filter_map(|w| w.peek().copied().map(|d| (d, w)))
            .min_by_key(|(d, _)| *d)
            .and_then(|(_, w)| w.next())
        {
            let separator: &[u8] = if first { b"\"" } else { b",\"" };
            first = false;
            out.write_all(separator)?;
            out.write_all(hex::encode(next).as_bytes())?;
            out.write_all(b"\"")?;
        }
        out.write_all(b"]}")
    }))
}
