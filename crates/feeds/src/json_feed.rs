//! JSON Feed 1.1 (<https://www.jsonfeed.org/version/1.1/>), served as
//! `application/feed+json`: one item per record, the record's fields in the `_knowngood`
//! extension object, the record id as the item id, `date_published` = `valid_from`; newest
//! added first, at most [`crate::WINDOW`] items, `next_url` to the next older window.

use model::HashRecord;

use crate::{Before, DESCRIPTION, Publisher, TITLE, record_digests, record_fields, record_title};

pub const MEDIA_TYPE: &str = "application/feed+json";
pub const PATH: &str = "/public/feed.json";

/// The feed document for `records` (already [`crate::feed_records`]); `next`: where the
/// next older window starts, if there is one.
pub fn document(records: &[&HashRecord], publisher: &Publisher, next: Option<&Before>) -> Vec<u8> {
    let items: Vec<serde_json::Value> = records
        .iter()
        .map(|r| {
            serde_json::json!({
                "id": r.id,
                "title": record_title(r),
                "content_text": record_digests(r),
                "external_url": r.record.source_url,
                "date_published": model::record::rfc3339(r.valid_from),
                "tags": [r.record.vendor, r.record.platform.as_str(), r.record.arch.as_str()],
                "_knowngood": record_fields(r),
            })
        })
        .collect();
    let mut feed = serde_json::json!({
        "version": "https://jsonfeed.org/version/1.1",
        "title": TITLE,
        "home_page_url": publisher.url("/"),
        "feed_url": publisher.url(PATH),
        "description": DESCRIPTION,
        "language": "en",
        "items": items,
    });
    if let (Some(next), Some(map)) = (next, feed.as_object_mut()) {
        map.insert("next_url".into(), next.url(publisher, PATH).into());
    }
    serde_json::to_vec(&feed).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::record;

    #[test]
    fn items_carry_the_record_and_its_id() {
        let r = record("r1", "putty.exe", "0.81", 1);
        let doc = document(&[&r], &Publisher::new("https://kg.example/"), None);
        let v: serde_json::Value = serde_json::from_slice(&doc).unwrap();
        assert_eq!(v["version"], "https://jsonfeed.org/version/1.1");
        assert_eq!(v["feed_url"], "https://kg.example/public/feed.json");
        assert_eq!(v["items"][0]["id"], "r1");
        assert_eq!(v["items"][0]["date_published"], "2026-03-01T12:00:01Z");
        assert_eq!(
            v["items"][0]["_knowngood"]["hash_sha256"],
            r.record.hash_sha256
        );
        assert!(v.get("next_url").is_none());
    }

    #[test]
    fn next_url_names_the_older_window() {
        let r = record("r1", "putty.exe", "0.81", 1);
        let before = Before {
            added_at: r.added_at,
            id: r.id.clone(),
        };
        let doc = document(&[&r], &Publisher::new("https://kg.example"), Some(&before));
        let v: serde_json::Value = serde_json::from_slice(&doc).unwrap();
        let next = v["next_url"].as_str().unwrap();
        let value = next
            .strip_prefix("https://kg.example/public/feed.json?before=")
            .unwrap();
        assert_eq!(Before::decode(value), Some(before));
        assert_eq!(Before::decode("nonsense"), None);
    }
}
