//! `{error, code}` bodies on the answers hyper gives by itself.
//!
//! A request hyper cannot parse (a malformed request line, a URI over its limit, a head
//! over its buffer) never reaches the router: hyper answers it `400`, `414` or `431`
//! with an empty body and closes the connection, and it offers no hook to shape that
//! answer. Every other refusal of this broker carries `{"error", "code"}`, and clients
//! decode that body to tell a refusal's cause. So the connection's writer is wrapped:
//! when hyper writes one of those answers (recognisable by its shape: one of the three
//! statuses, `content-length: 0`, and no `content-type`, which every answer of ours
//! has), the wrapper writes the same status with a JSON body instead.
//!
//! The cost on the data path is one comparison of a write's first bytes with
//! `HTTP/1.1 4`; only a hyper-made head goes further.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection whose hyper-made parse-error answers get a JSON body.
pub struct JsonParseErrors<S> {
    inner: S,
    /// A replacement being written: its bytes, how many are written, and the length
    /// of hyper's original to report once it is all out.
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<S> JsonParseErrors<S> {
    /// Wraps a connection.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            pending: None,
        }
    }
}

/// The replacement for `head` if it is one of hyper's own error answers.
fn replacement(head: &[u8]) -> Option<Vec<u8>> {
    if !head.starts_with(b"HTTP/1.1 4") || !head.ends_with(b"\r\n\r\n") {
        return None;
    }
    let (status, code, message) = match head.get(9..13)? {
        b"400 " => (
            "400 Bad Request",
            "bad_request",
            "the request could not be parsed as HTTP/1.1",
        ),
        b"414 " => (
            "414 URI Too Long",
            "uri_too_long",
            "the request's URI is longer than the broker reads",
        ),
        b"431 " => (
            "431 Request Header Fields Too Large",
            "headers_too_large",
            "the request's head is larger than the broker reads",
        ),
        _ => return None,
    };
    let text = std::str::from_utf8(head).ok()?;
    let lower = text.to_ascii_lowercase();
    if !lower.contains("\r\ncontent-length: 0\r\n") || lower.contains("\r\ncontent-type:") {
        return None;
    }
    let body = serde_json::json!({ "error": message, "code": code }).to_string();
    let mut out = format!(
        "HTTP/1.1 {status}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    // Keep hyper's date header as it wrote it.
    if let Some(date) = text
        .split("\r\n")
        .find(|line| line.to_ascii_lowercase().starts_with("date:"))
    {
        out.push_str(date);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

impl<S: AsyncWrite + Unpin> JsonParseErrors<S> {
    /// Writes out the pending replacement; answers hyper's original length when done.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        while let Some((bytes, written, original)) = &mut self.pending {
            if *written == bytes.len() {
                let original = *original;
                self.pending = None;
                return Poll::Ready(Ok(original));
            }
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(0))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonParseErrors<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonParseErrors<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.pending.is_none() {
            match replacement(buf) {
                Some(bytes) => self.pending = Some((bytes, 0, buf.len())),
                None => return Pin::new(&mut self.inner).poll_write(cx, buf),
            }
        }
        self.drain(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.pending.is_some() {
            return self.drain(cx);
        }
        let first = bufs.iter().find(|b| !b.is_empty());
        if let Some(first) = first
            && first.starts_with(b"HTTP/1.1 4")
        {
            // A head on its own: take it through the plain path (a vectored write
            // may write less than all of its slices).
            return self.poll_write(cx, first);
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.pending.is_some() {
            ready!(self.drain(cx))?;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.pending.is_some() {
            ready!(self.drain(cx))?;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYPER_431: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 10:52:18 GMT\r\n\r\n";

    #[test]
    fn hyper_error_heads_get_a_json_body_and_keep_status_and_date() {
        let out = String::from_utf8(replacement(HYPER_431).unwrap()).unwrap();
        assert!(out.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(out.contains("date: Tue, 01 Dec 2026 10:52:18 GMT\r\n"));
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["code"], "headers_too_large");
    }

    #[test]
    fn our_own_answers_pass_untouched() {
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement(ours).is_none(), "it has a content-type");
        let body = b"{\"error\":\"x\",\"code\":\"bad_request\"}";
        assert!(replacement(body).is_none());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement(ok).is_none());
    }
}
