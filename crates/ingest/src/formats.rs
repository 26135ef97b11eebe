//! Small parsers shared by the fetchers: checksum files, directory listings, name globs,
//! version ordering and JSON field paths. All of them take remote text and never panic on it.

use std::cmp::Ordering;

use serde_json::Value;

/// Orders version strings the way vendors number releases: runs of digits compare as
/// numbers, runs of letters as text, separators are ignored. When one version is a prefix of
/// the other, a following letter run marks a pre-release (`1.0rc1` < `1.0`) and a following
/// number a later release (`1.0` < `1.0.1`).
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let (ta, tb) = (tokens(a), tokens(b));
    for (x, y) in ta.iter().zip(&tb) {
        let order = match (x, y) {
            (Token::Num(x), Token::Num(y)) => {
                // Compare digit strings without overflow: longer (sans zeros) is larger.
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            (Token::Alpha(x), Token::Alpha(y)) => x.cmp(y),
            (Token::Num(_), Token::Alpha(_)) => Ordering::Greater,
            (Token::Alpha(_), Token::Num(_)) => Ordering::Less,
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    let rest = |longer: &[Token], shorter: usize| match longer.get(shorter) {
        Some(Token::Alpha(_)) => Ordering::Less,
        Some(Token::Num(_)) => Ordering::Greater,
        None => Ordering::Equal,
    };
    match ta.len().cmp(&tb.len()) {
        Ordering::Greater => rest(&ta, tb.len()),
        Ordering::Less => rest(&tb, ta.len()).reverse(),
        Ordering::Equal => Ordering::Equal,
    }
}

enum Token<'a> {
    Num(&'a str),
    Alpha(String),
}

fn tokens(v: &str) -> Vec<Token<'_>> {
    let v = v.trim();
    let v = v.strip_prefix(['v', 'V']).unwrap_or(v);
    let mut out = Vec::new();
    let mut start = None::<(usize, bool)>;
    for (i, c) in v.char_indices().chain(std::iter::once((v.len(), '.'))) {
        let kind = c.is_ascii_digit();
        let word = c.is_ascii_alphanumeric();
        if let Some((s, k)) = start
            && (!word || k != kind)
        {
            let run = &v[s..i];
            out.push(if k {
                Token::Num(run)
            } else {
                Token::Alpha(run.to_ascii_lowercase())
            });
            start = None;
        }
        if word && start.is_none() {
            start = Some((i, kind));
        }
    }
    out
}

/// The `n` newest distinct versions, oldest first (so that the newest is recorded last and
/// ends up current in its history family).
pub fn newest(versions: impl IntoIterator<Item = String>, n: usize) -> Vec<String> {
    let mut all: Vec<String> = versions.into_iter().collect();
    all.sort_by(|a, b| compare_versions(a, b).then_with(|| a.cmp(b)));
    all.dedup();
    let skip = all.len().saturating_sub(n);
    all.split_off(skip)
}

/// Whether a remote string can be used as a version: short, printable, no spaces.
pub fn valid_version(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 64
        && v.chars().any(|c| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+~-".contains(c))
}

/// Matches `text` against a glob where `*` stands for any run of characters and
/// `{version}` for a non-empty run of `[A-Za-z0-9._+~]`. `Some(capture)` on a match, with the
/// `{version}` capture when the glob has one.
pub(crate) fn glob_match(pattern: &str, text: &str) -> Option<Option<String>> {
    fn go<'t>(p: &str, t: &'t str, cap: &mut Option<&'t str>) -> bool {
        if let Some(rest) = p.strip_prefix("{version}") {
            let run = t
                .char_indices()
                .find(|&(_, c)| !(c.is_ascii_alphanumeric() || "._+~".contains(c)))
                .map_or(t.len(), |(i, _)| i);
            // Longest first, backing off: "vlc-{version}-win64.exe" against "vlc-3.0.21-…".
            for end in (1..=run).rev() {
                if go(rest, &t[end..], cap) {
                    *cap = Some(&t[..end]);
                    return true;
                }
            }
            return false;
        }
        match p.chars().next() {
            None => t.is_empty(),
            Some('*') => (0..=t.len())
                .filter(|&i| t.is_char_boundary(i))
                .any(|i| go(&p[1..], &t[i..], cap)),
            Some(c) => t.starts_with(c) && go(&p[c.len_utf8()..], &t[c.len_utf8()..], cap),
        }
    }
    let mut cap = None;
    go(pattern, text, &mut cap).then(|| cap.map(str::to_owned))
}

/// A digest as lowercase hex when `s` is exactly `len` hex characters.
pub fn hex_digest(s: &str, len: usize) -> Option<String> {
    let s = s.trim();
    (s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| s.to_ascii_lowercase())
}

/// Lines of a `sha256sum`-style file: `<hex>  <name>` or `<hex> *<name>` (binary mode).
/// Lines whose digest is not `hex_len` hex characters are skipped, as are comments.
pub(crate) fn parse_checksums(text: &str, hex_len: usize) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_end_matches('\r');
            let (digest, name) = line.split_once(char::is_whitespace)?;
            let digest = hex_digest(digest, hex_len)?;
            let name = name.trim_start();
            let name = name.strip_prefix('*').unwrap_or(name);
            (!name.is_empty()).then(|| (name.to_owned(), digest))
        })
        .collect()
}

/// The file names a directory listing (Apache or nginx autoindex) links to: relative
/// `href`s that name a file in the directory itself.
pub(crate) fn listing_links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find("href=\"") {
        rest = &rest[at + 6..];
        let Some(end) = rest.find('"') else { break };
        let link = &rest[..end];
        rest = &rest[end..];
        let file =
            !link.is_empty() && !link.contains(['/', '?', '#', ':']) && !link.starts_with('.');
        if file && !out.iter().any(|l| l == link) {
            out.push(link.to_owned());
        }
    }
    out
}

/// The value at a dotted field path (`"dist.shasum"`); `""` is the value itself.
pub(crate) fn json_at<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    if path.is_empty() {
        return Some(value);
    }
    path.split('.').try_fold(value, |v, key| v.get(key))
}

/// The string at a field path, when there is a non-empty one.
pub(crate) fn json_str<'a>(value: &'a Value, path: &str) -> Option<&'a str> {
    json_at(value, path)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The last path segment of a URL or relative path, without query or fragment.
pub fn file_name(url: &str) -> &str {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    path.rsplit('/').next().unwrap_or(path)
}

/// Percent-encodes what a URL path cannot carry as is (Firefox's "Firefox Setup 133.0.exe").
pub(crate) fn encode_path(path: &str) -> String {
    percent_encode(path, b"-._~/+!@")
}

/// Percent-encodes `text` as one path segment: everything but RFC 3986's unreserved
/// characters (a Debian version's `+`, `~` and `:` included).
pub(crate) fn encode_segment(text: &str) -> String {
    percent_encode(text, b"-._~")
}

/// `text` with every byte but ASCII letters, digits and `keep` percent-encoded.
fn percent_encode(text: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || keep.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_numerically_with_prereleases_first() {
        let mut v = vec!["1.0.1", "1.0rc1", "1.10", "1.0", "1.9"];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(v, ["1.0rc1", "1.0", "1.0.1", "1.9", "1.10"]);
        assert_eq!(compare_versions("go1.23.10", "go1.23.4"), Ordering::Greater);
        assert_eq!(compare_versions("go1.23.4", "go1.9"), Ordering::Greater);
        assert_eq!(compare_versions("24.09", "24.08"), Ordering::Greater);
        assert_eq!(compare_versions("v1.2.3", "1.2.3"), Ordering::Equal);
        assert_eq!(
            newest(["1.2".into(), "1.10".into(), "1.9".into()], 2),
            ["1.9", "1.10"]
        );
    }

    #[test]
    fn globs_match_whole_names_and_capture_the_version() {
        assert_eq!(
            glob_match("vlc-{version}-win64.exe", "vlc-3.0.21-win64.exe"),
            Some(Some("3.0.21".into()))
        );
        assert_eq!(
            glob_match("vlc-{version}-win64.exe", "vlc-3.0.21-win64.exe.sha256"),
            None
        );
        assert_eq!(glob_match("w64/*.exe", "w64/putty.exe"), Some(None));
        assert_eq!(
            glob_match("w64/*.exe", "w64/putty.exe (installer version)"),
            None
        );
        assert_eq!(glob_match("7z{version}.exe", "7z2409-x64.exe"), None);
        assert_eq!(
            glob_match("7z{version}.exe", "7z2409.exe"),
            Some(Some("2409".into()))
        );
        assert_eq!(
            glob_match("npp.{version}.Installer.exe", "npp.8.7.7.Installer.x64.exe"),
            None
        );
    }

    #[test]
    fn checksum_lines_accept_both_modes_and_skip_junk() {
        let text = format!(
            "{a}  w64/putty.exe\r\n{b} *node-v1.0.0.pkg\n# comment\nnot a line\n{short}  x\n",
            a = "A".repeat(64),
            b = "b".repeat(64),
            short = "c".repeat(40)
        );
        assert_eq!(
            parse_checksums(&text, 64),
            [
                ("w64/putty.exe".to_owned(), "a".repeat(64)),
                ("node-v1.0.0.pkg".to_owned(), "b".repeat(64)),
            ]
        );
    }

    #[test]
    fn listing_keeps_file_links_only() {
        let html = r#"<a href="../">../</a><a href="?C=N;O=D">Name</a>
            <a href="vlc-3.0.21-win64.exe">x</a><a href="sub/">sub/</a>
            <a href="https://example.org/">y</a><a href="vlc-3.0.21-win64.exe">again</a>"#;
        assert_eq!(listing_links(html), ["vlc-3.0.21-win64.exe"]);
    }

    #[test]
    fn field_paths_and_names() {
        let v: Value = serde_json::json!({"dist": {"shasum": "ab"}, "e": ""});
        assert_eq!(json_str(&v, "dist.shasum"), Some("ab"));
        assert_eq!(json_str(&v, "e"), None);
        assert_eq!(json_str(&v, "dist.missing"), None);
        assert_eq!(file_name("https://h/a/b/c.zip?x=1"), "c.zip");
        assert_eq!(
            encode_path("win64/en-US/Firefox Setup 133.0.exe"),
            "win64/en-US/Firefox%20Setup%20133.0.exe"
        );
        assert!(valid_version("v1.31.3") && !valid_version("<html>") && !valid_version("abc"));
    }
}
