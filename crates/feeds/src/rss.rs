//! RSS 2.0 (<https://www.rssboard.org/rss-specification>), served as
//! `application/rss+xml`: one item per record with a stable `guid isPermaLink="false"`
//! (the record id), RFC 822 dates and an `atom:link rel="self"`; newest added first, at
//! most [`crate::WINDOW`] items, `atom:link rel="next"` to the next older window. The `rss`
//! crate writes the XML (and escapes it).

use chrono::{DateTime, Utc};
use model::HashRecord;
use rss::extension::atom::{AtomExtension, Link};
use rss::{Category, Channel, Guid, Item};

use crate::{Before, DESCRIPTION, Publisher, TITLE, record_digests, record_title};

pub const MEDIA_TYPE: &str = "application/rss+xml";
pub const PATH: &str = "/public/feed.rss";

/// RFC 822 (with a four-digit year, as RSS readers expect).
fn rfc822(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// The channel for `records` (already [`crate::feed_records`]); `next`: where the next
/// older window starts, if there is one.
pub fn document(records: &[&HashRecord], publisher: &Publisher, next: Option<&Before>) -> Vec<u8> {
    let mut links = vec![Link {
        href: publisher.url(PATH),
        rel: "self".into(),
        mime_type: Some(MEDIA_TYPE.into()),
        ..Link::default()
    }];
    if let Some(next) = next {
        links.push(Link {
            href: next.url(publisher, PATH),
            rel: "next".into(),
            mime_type: Some(MEDIA_TYPE.into()),
            ..Link::default()
        });
    }
    let items = records
        .iter()
        .map(|r| Item {
            title: Some(record_title(r)),
            link: Some(r.record.source_url.clone()),
            description: Some(record_digests(r)),
            categories: vec![Category {
                name: r.record.vendor.clone(),
                domain: None,
            }],
            guid: Some(Guid {
                value: format!("knowngood-record-{}", r.id),
                permalink: false,
            }),
            pub_date: Some(rfc822(r.valid_from)),
            ..Item::default()
        })
        .collect();
    let channel = Channel {
        title: TITLE.into(),
        link: publisher.url("/"),
        description: DESCRIPTION.into(),
        language: Some("en".into()),
        last_build_date: crate::last_modified(records).map(rfc822),
        atom_ext: Some(AtomExtension { links }),
        items,
        ..Channel::default()
    };
    channel
        .pretty_write_to(Vec::new(), b' ', 1)
        .unwrap_or_else(|e| unreachable!("writing XML to memory does not fail: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::record;

    #[test]
    fn items_have_stable_guids_and_escaped_text() {
        let r = record("r1", "a&b<c>.exe", "1.0", 5);
        let doc = String::from_utf8(document(&[&r], &Publisher::new("https://kg.example"), None))
            .unwrap();
        assert!(doc.contains("<guid isPermaLink=\"false\">knowngood-record-r1</guid>"));
        assert!(doc.contains("a&amp;b&lt;c&gt;.exe"));
        assert!(doc.contains("<pubDate>Sun, 01 Mar 2026 12:00:05 GMT</pubDate>"));
        assert!(doc.contains("href=\"https://kg.example/public/feed.rss\" rel=\"self\""));
    }

    #[test]
    fn the_document_reads_back_as_rss_2_0_with_every_field() {
        let (a, b) = (
            record("r1", "putty.exe", "0.81", 5),
            record("r2", "x&y.exe", "2.0", 9),
        );
        let next = Before {
            added_at: a.added_at,
            id: a.id.clone(),
        };
        let doc = document(
            &[&b, &a],
            &Publisher::new("https://kg.example"),
            Some(&next),
        );
        let channel = Channel::read_from(&doc[..]).unwrap();
        assert_eq!(channel.title, TITLE);
        assert_eq!(channel.link, "https://kg.example/");
        assert_eq!(channel.language.as_deref(), Some("en"));
        assert_eq!(
            channel.last_build_date.as_deref(),
            Some("Sun, 01 Mar 2026 12:00:09 GMT")
        );
        let links = channel.atom_ext.as_ref().unwrap().links();
        assert_eq!(links[0].href, "https://kg.example/public/feed.rss");
        assert_eq!(links[0].mime_type.as_deref(), Some(MEDIA_TYPE));
        assert_eq!(links[1].rel, "next");
        assert_eq!(
            links[1].href,
            format!(
                "https://kg.example/public/feed.rss?before={}",
                next.encode()
            )
        );
        assert_eq!(channel.items.len(), 2);
        for (item, r) in channel.items.iter().zip([&b, &a]) {
            assert_eq!(item.title.as_deref(), Some(record_title(r).as_str()));
            assert_eq!(item.link.as_deref(), Some(r.record.source_url.as_str()));
            assert_eq!(
                item.description.as_deref(),
                Some(record_digests(r).as_str())
            );
            assert_eq!(item.categories[0].name, r.record.vendor);
            let guid = item.guid.as_ref().unwrap();
            assert_eq!(guid.value, format!("knowngood-record-{}", r.id));
            assert!(!guid.permalink);
            assert_eq!(
                item.pub_date.as_deref(),
                Some(rfc822(r.valid_from).as_str())
            );
        }
    }
}
