//! Secrets that ride in URLs (`https://user:token@host/…`, `?access_token=…`) kept out of
//! logs, stored errors and answers.

/// `text` with every `http://`/`https://` URL in it shown without its credentials and query
/// string (each replaced by `redacted`).
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = find_scheme(rest) {
        out.push_str(&rest[..start]);
        let url = &rest[start..];
        let end = url
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | ')' | ']'))
            .unwrap_or(url.len());
        out.push_str(&redact_url(&url[..end]));
        rest = &url[end..];
    }
    out.push_str(rest);
    out
}

fn find_scheme(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    match (lower.find("http://"), lower.find("https://")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One URL without credentials or query.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let (scheme, after) = url.split_at(scheme_end);
    let authority_end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, path) = after.split_at(authority_end);
    let host = match authority.rfind('@') {
        Some(at) => format!("redacted@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    let path = match path.find('?') {
        Some(q) => {
            let fragment = path[q..].find('#').map_or("", |f| &path[q + f..]);
            format!("{}?redacted{fragment}", &path[..q])
        }
        None => path.to_string(),
    };
    format!("{scheme}{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_queries_are_hidden() {
        assert_eq!(
            redact_url("https://kg:S3cret@mirror.internal/dl/?access_token=abc"),
            "https://redacted@mirror.internal/dl/?redacted"
        );
        assert_eq!(
            redact_url("postgres://kg:S3cret@db/knowngood"),
            "postgres://redacted@db/knowngood"
        );
        assert_eq!(redact_url("https://go.dev/dl/"), "https://go.dev/dl/");
        let text = "request for https://u:p@x.test/a?token=1 failed (HTTPS://y.test/b?k=2): boom";
        let shown = redact_urls(text);
        assert_eq!(
            shown,
            "request for https://redacted@x.test/a?redacted failed (HTTPS://y.test/b?redacted): boom"
        );
        assert!(!shown.contains("token=1") && !shown.contains("u:p"));
        assert_eq!(redact_urls("no url here"), "no url here");
    }
}
