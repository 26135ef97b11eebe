//! RSS 2.0 (<https://www.rssboard.org/rss-specification>), served as
//! `application/rss+xml`: one item per record with a stable `guid isPermaLink="false"`
//! (the record id), RFC 822 dates and an `atom:link rel="self"`.

use chrono::{DateTime, Utc};
use model::HashRecord;

use crate::{DESCRIPTION, Publisher, TITLE, record_digests, record_title};

pub const MEDIA_TYPE: &str = "application/rss+xml";
pub const PATH: &str = "/public/feed.rss";

/// RFC 822 (with a four-digit year, as RSS readers expect).
fn rfc822(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// XML character data and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// The channel for `records` (already [`crate::feed_records`]).
pub fn document(records: &[&HashRecord], publisher: &Publisher) -> Vec<u8> {
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    xml.push_str("<rss version=\"2.0\" xmlns:atom=\"http://www.w3.org/2005/Atom\">\n<channel>\n");
    xml.push_str(&format!("<title>{}</title>\n", escape(TITLE)));
    xml.push_str(&format!("<link>{}</link>\n", escape(&publisher.url("/"))));
    xml.push_str(&format!(
        "<description>{}</description>\n",
        escape(DESCRIPTION)
    ));
    xml.push_str("<language>en</language>\n");
    xml.push_str(&format!(
        "<atom:link href=\"{}\" rel=\"self\" type=\"{MEDIA_TYPE}\"/>\n",
        escape(&publisher.url(PATH))
    ));
    if let Some(last) = crate::last_modified(records) {
        xml.push_str(&format!(
            "<lastBuildDate>{}</lastBuildDate>\n",
            rfc822(last)
        ));
    }
    for r in records {
        xml.push_str("<item>\n");
        xml.push_str(&format!("<title>{}</title>\n", escape(&record_title(r))));
        xml.push_str(&format!("<link>{}</link>\n", escape(&r.record.source_url)));
        xml.push_str(&format!(
            "<description>{}</description>\n",
            escape(&record_digests(r))
        ));
        xml.push_str(&format!(
            "<category>{}</category>\n",
            escape(&r.record.vendor)
        ));
        xml.push_str(&format!(
            "<guid isPermaLink=\"false\">knowngood-record-{}</guid>\n",
            escape(&r.id)
        ));
        xml.push_str(&format!("<pubDate>{}</pubDate>\n", rfc822(r.valid_from)));
        xml.push_str("</item>\n");
    }
    xml.push_str("</channel>\n</rss>\n");
    xml.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::record;

    #[test]
    fn items_have_stable_guids_and_escaped_text() {
        let r = record("r1", "a&b<c>.exe", "1.0", 5);
        let doc =
            String::from_utf8(document(&[&r], &Publisher::new("https://kg.example"))).unwrap();
        assert!(doc.contains("<guid isPermaLink=\"false\">knowngood-record-r1</guid>"));
        assert!(doc.contains("a&amp;b&lt;c&gt;.exe"));
        assert!(doc.contains("<pubDate>Sun, 01 Mar 2026 12:00:05 GMT</pubDate>"));
        assert!(doc.contains("href=\"https://kg.example/public/feed.rss\" rel=\"self\""));
    }
}
