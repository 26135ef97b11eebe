//! The query string of the TAXII 2.1 listing routes (`added_after`, `limit`, `next`,
//! `match[...]`): decoded as a URL query, checked by `Query::parse`, then applied to a
//! small collection (filters, cursor, page, envelope and manifest).
#![no_main]

use std::sync::OnceLock;

use chrono::{TimeZone, Utc};
use feeds::taxii::{Index, Query, RawQuery};
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

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let records: Vec<HashRecord> = (0..5).map(record).collect();
        let refs: Vec<&HashRecord> = records.iter().collect();
        Index::new(feeds::stix::objects(&refs))
    })
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
    let Ok(query) = Query::parse(&raw) else { return };
    let index = index();
    let page = index.page(&query, None);
    assert!(page.objects.len() <= index.len());
    let _ = page.envelope();
    let _ = page.manifest();
    // The `next` cursor a page gives is accepted back, and resumes strictly later.
    if let Some(next) = &page.next {
        let again = RawQuery {
            next: Some(next.clone()),
            ..raw.clone()
        };
        let query = Query::parse(&again).expect("a cursor this server gave parses");
        let following = index.page(&query, None);
        if let (Some(last), Some(first)) = (page.objects.last(), following.objects.first()) {
            assert!(first.date_added > last.date_added);
        }
    }
    if let Some(first) = index.objects().first() {
        let _ = index.page(&query, Some(first.id.as_str())).versions();
    }
});
