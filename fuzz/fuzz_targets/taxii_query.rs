//! The query string of the TAXII 2.1 listing routes (`added_after`, `limit`, `next`,
//! `match[...]`): decoded as a URL query, checked by `Query::parse`, then applied to a
//! small collection offered to a `PageBuilder` (filters, cursor, page, envelope and
//! manifest).
#![no_main]

use std::sync::OnceLock;

use chrono::{TimeZone, Utc};
use feeds::stix::StixObject;
use feeds::taxii::{Page, PageBuilder, Query, RawQuery};
use libfuzzer_sys::fuzz_target;
use model::{Arch, HashRecord, NewRecord, Platform, RecordStatus};

fn record(n: u32) -> HashRecord {
    let at = Utc
        .with_ymd_and_hms(2026, 3, 1, 12, 0, n)
        .single()
        .unwrap_or_default();
    HashRecord {
        id: format!("rec-{n}"),
        record: NewRecord {
            vendor: "PuTTY".into(),
            executable_name: format!("tool{n}.exe"),
            version: format!("0.8{n}"),
            platform: Platform::Windows,
            arch: Arch::Amd64,
            hash_sha256: format!("{:064x}", n + 1),
            hash_sha1: Some(format!("{:040x}", n + 1)),
            hash_md5: Some(format!("{:032x}", n + 1)),
            size: Some(u64::from(n) * 1000 + 1),
            source_url: format!("https://the.earth.li/~sgtatham/putty/0.8{n}/w64/putty.exe"),
            download_verified: true,
            sig_signer: None,
            sig_issuer: None,
            sig_serial: None,
            sig_thumbprint: None,
        },
        family: format!("tool{n}.exe"),
        status: RecordStatus::Current,
        valid_from: at,
        valid_until: None,
        added_at: at,
        cert_revoked_at: None,
        integrity_ok: true,
    }
}

fn collection() -> &'static [StixObject] {
    static COLLECTION: OnceLock<Vec<StixObject>> = OnceLock::new();
    COLLECTION.get_or_init(|| {
        let records: Vec<HashRecord> = (0..5).map(record).collect();
        let refs: Vec<&HashRecord> = records.iter().collect();
        feeds::stix::objects(&refs)
    })
}

/// The page of `query` over the whole collection (or the one object `only_id`).
fn page(query: &Query, only_id: Option<&str>) -> Page {
    let mut builder = PageBuilder::new(query, only_id);
    for object in collection() {
        builder.offer(object.clone());
    }
    builder.finish(false)
}

fuzz_target!(|data: &[u8]| {
    let mut raw = RawQuery::default();
    for (key, value) in form_urlencoded::parse(data) {
        let slot = match key.as_ref() {
            "added_after" => &mut raw.added_after,
            "limit" => &mut raw.limit,
            "next" => &mut raw.next,
            "match[id]" => &mut raw.match_id,
            "match[type]" => &mut raw.match_type,
            "match[version]" => &mut raw.match_version,
            "match[spec_version]" => &mut raw.match_spec_version,
            _ => continue,
        };
        *slot = Some(value.into_owned());
    }
    let Ok(query) = Query::parse(&raw) else {
        return;
    };
    let first_page = page(&query, None);
    assert!(first_page.objects.len() <= collection().len());
    let _ = first_page.envelope();
    let _ = first_page.manifest();
    // The `next` cursor a page gives is accepted back, and resumes strictly later.
    if let Some(next) = &first_page.next {
        let again = RawQuery {
            next: Some(next.clone()),
            ..raw.clone()
        };
        let query = Query::parse(&again).expect("a cursor this server gave parses");
        let following = page(&query, None);
        if let (Some(last), Some(first)) = (first_page.objects.last(), following.objects.first()) {
            assert!(first.date_added > last.date_added);
        }
    }
    if let Some(first) = collection().first() {
        let _ = page(&query, Some(first.id.as_str())).versions();
    }
});
