//! JSON bodies for the refusals the HTTP layer writes itself.
//!
//! hyper answers a request head it cannot parse before any of our code sees a request: a
//! target longer than it accepts (414), a head larger than its buffer (431), bytes that are
//! not HTTP such as a raw `0xFF` or NUL in the path, or a malformed `Content-Length` (400).
//! It writes those answers with an empty body and closes the connection. Every error the
//! service produces carries the JSON error body, so the connection's writer recognises such
//! a bare refusal (a 400, 414 or 431 head with `content-length: 0` and no content type,
//! which no handler of ours writes) and writes the same head with a JSON body instead.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::HttpRefusal;

/// A connection whose bare refusals are rewritten with a JSON body.
pub(crate) struct JsonRefusals<T> {
    inner: T,
    /// A rewritten answer and how much of it has been written.
    pending: Option<(Vec<u8>, usize)>,
}

impl<T> JsonRefusals<T> {
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            pending: None,
        }
    }
}

impl<T: AsyncWrite + Unpin> JsonRefusals<T> {
    /// Writes what is left of a rewritten answer; ready once it is all out.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, written)) = &mut self.pending {
            if *written == bytes.len() {
                self.pending = None;
                break;
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for JsonRefusals<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for JsonRefusals<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.poll_pending(cx)?.is_pending() {
            return Poll::Pending;
        }
        if let Some(answer) = with_json_body(buf) {
            // Taken whole: the rewritten answer goes out before anything written later.
            self.pending = Some((answer, 0));
            let _ = self.poll_pending(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.poll_pending(cx)?.is_pending() {
            return Poll::Pending;
        }
        // A response head is always the first slice of a write.
        if let Some(first) = bufs.iter().find(|b| !b.is_empty())
            && let Some(answer) = with_json_body(first)
        {
            self.pending = Some((answer, 0));
            let _ = self.poll_pending(cx)?;
            return Poll::Ready(Ok(first.len()));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.poll_pending(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.poll_pending(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The JSON answer for a bare refusal, or None when `head` is anything else.
fn with_json_body(head: &[u8]) -> Option<Vec<u8>> {
    let rest = head
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| head.strip_prefix(b"HTTP/1.0 "))?;
    let (refusal, message) = match rest.get(..4)? {
        b"400 " => (
            HttpRefusal::MalformedHead,
            "the request is not valid HTTP/1.1 (a byte not allowed in the request line or a header, or a malformed Content-Length)",
        ),
        b"414 " => (
            HttpRefusal::UriTooLong,
            "the request target is longer than the server accepts",
        ),
        b"431 " => (
            HttpRefusal::HeaderFieldsTooLarge,
            "the request head is larger than the server accepts",
        ),
        _ => return None,
    };
    // The whole head, and nothing after it: an empty body.
    let text = std::str::from_utf8(head).ok()?;
    let lines = text.strip_suffix("\r\n\r\n")?;
    let mut kept = Vec::new();
    let mut empty_body = false;
    for line in lines.split("\r\n") {
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("content-type:") {
            return None;
        }
        if lower == "content-length: 0" {
            empty_body = true;
        } else {
            kept.push(line);
        }
    }
    if !empty_body {
        return None;
    }
    let body = refusal.body(message)?;
    let mut answer = kept.join("\r\n").into_bytes();
    answer.extend_from_slice(
        format!(
            "\r\ncontent-type: application/json\r\nx-content-type-options: nosniff\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    answer.extend_from_slice(&body);
    Some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_refusals_get_a_json_body_and_nothing_else_changes() {
        let bare = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: Thu, 26 Nov 2026 06:00:00 GMT\r\n\r\n";
        let answer = String::from_utf8(with_json_body(bare).unwrap()).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains("date: Thu"), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"], "bad request");

        // Answers of our own handlers carry a content type (and usually a body).
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        assert!(with_json_body(ours).is_none());
        let ok = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
        assert!(with_json_body(ok).is_none());
        let with_body = b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n\r\nx";
        assert!(with_json_body(with_body).is_none());
    }
}
