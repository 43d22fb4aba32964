//! DoH (RFC 8484) over HTTP/2: POST with an `application/dns-message` body and GET with
//! `?dns=<base64url>`, many concurrent streams per connection, GOAWAY for server policies.

use super::accept::{accept_tls, watched};
use super::deadline::guarded;
use super::record::Origin;
use super::record::{Conn, Ending, LINGER};
use super::shared::Shared;
use bytes::Bytes;
use dnscost_stats::Close;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use http::{header, Method, Request, Response, StatusCode};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;
use tokio::time::Instant;

const DNS_MESSAGE: &str = "application/dns-message";

pub async fn serve(
    shared: Arc<Shared>,
    sock: tokio::net::TcpStream,
    mut conn: Conn,
    mut stop: oneshot::Receiver<()>,
    opened: Instant,
    config: Arc<rustls::ServerConfig>,
    path: Arc<str>,
) {
    let (s, tally, mut timer) = watched(&shared.policy, sock, opened);
    let Some(tls) = accept_tls(&shared, &mut conn, (s, &tally), config, &mut stop, &mut timer).await else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let io = Sniff::new(tls, seen.clone());
    let mut builder = h2::server::Builder::new();
    builder.max_concurrent_streams(shared.policy.h2_max_streams);
    let mut handshake = Box::pin(builder.handshake::<_, Bytes>(io));
    let mut h2 = match guarded(handshake.as_mut(), &mut stop, &mut timer).await {
        Ok(Ok(h2)) => h2,
        Ok(Err(e)) => {
            drop(handshake);
            shared.closed(&conn, client_ending(&seen, Some(e)), tally.get(), true);
            return;
        }
        Err(ending) => {
            drop(handshake);
            shared.closed(&conn, ending, tally.get(), true);
            return;
        }
    };
    drop(handshake);

    let origin = conn.origin();
    let max_queries = shared.policy.max_queries;
    let mut pending = FuturesUnordered::new();
    // Set once the server decided to close: GOAWAY is sent and open streams are finished.
    let mut closing: Option<Close> = None;
    let mut stopped = false;
    let grace = tokio::time::sleep(LINGER);
    tokio::pin!(grace);
    let ending = loop {
        let mut begin_close = None;
        tokio::select! {
            biased;
            _ = &mut stop, if !stopped => {
                stopped = true;
                begin_close = Some(Close::End);
            }
            why = timer.expired(), if closing.is_none() => {
                if why == Close::Idle && !pending.is_empty() {
                    timer.touch(Instant::now());
                } else {
                    begin_close = Some(why);
                }
            }
            _ = &mut grace, if closing.is_some() => break Ending::Server(closing.unwrap_or(Close::End)),
            Some(answered) = pending.next(), if !pending.is_empty() => {
                conn.answers += u64::from(answered);
                timer.touch(Instant::now());
            }
            request = h2.accept() => match request {
                Some(Ok((request, mut respond))) => {
                    if max_queries > 0 && conn.queries >= max_queries {
                        // Past the limit (sent before our GOAWAY arrived): retry elsewhere.
                        respond.send_reset(h2::Reason::REFUSED_STREAM);
                        continue;
                    }
                    let query = request.uri().path() == &*path
                        && (request.method() == Method::GET || request.method() == Method::POST);
                    if !query {
                        // Not a DNS query: answered with 404 or 405, not counted.
                        pending.push(answer(request, respond, &shared, origin, &path));
                        continue;
                    }
                    conn.queries += 1;
                    timer.touch(Instant::now());
                    pending.push(answer(request, respond, &shared, origin, &path));
                    if max_queries > 0 && conn.queries >= max_queries {
                        begin_close = Some(Close::MaxQueries);
                    }
                }
                Some(Err(e)) => break closing.map(Ending::Server).unwrap_or_else(|| client_ending(&seen, Some(e))),
                None => break closing.map(Ending::Server).unwrap_or_else(|| client_ending(&seen, None)),
            }
        }
        if let (Some(why), None) = (begin_close, closing) {
            closing = Some(why);
            h2.graceful_shutdown();
            grace.as_mut().reset(Instant::now() + LINGER);
        }
    };
    drop(pending);
    drop(h2);
    shared.closed(&conn, ending, tally.get(), true);
}

/// How the client ended the connection, from what was seen on it.
fn client_ending(seen: &Seen, error: Option<h2::Error>) -> Ending {
    if seen.goaway.load(Ordering::Acquire) {
        return Ending::Client(Close::Goaway, None);
    }
    match seen.eof.load(Ordering::Acquire) {
        EOF_CLOSE_NOTIFY => return Ending::Client(Close::CloseNotify, None),
        EOF_FIN => return Ending::Client(Close::Fin, None),
        EOF_RST => return Ending::Client(Close::Rst, None),
        _ => {}
    }
    match error {
        Some(e) => match e.get_io() {
            Some(io) => Ending::from_io(io),
            None => Ending::Client(Close::Error, Some(e.to_string())),
        },
        None => Ending::Client(Close::Fin, None),
    }
}

/// Sends a response without a body.
fn status(respond: &mut h2::server::SendResponse<Bytes>, code: StatusCode) {
    let mut r = Response::builder().status(code);
    if code == StatusCode::METHOD_NOT_ALLOWED {
        r = r.header(header::ALLOW, "GET, POST");
    }
    if let Ok(r) = r.body(()) {
        let _ = respond.send_response(r, true);
    }
}

/// Answers one request; true when a DNS answer was sent. The body is read whole before any
/// response, so that a client still sending it is not reset.
async fn answer(
    request: Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    shared: &Shared,
    origin: Origin,
    path: &str,
) -> bool {
    let (parts, mut body) = request.into_parts();
    let body = read_body(&mut body).await;
    if parts.uri.path() != path {
        status(&mut respond, StatusCode::NOT_FOUND);
        return false;
    }
    let method = if parts.method == Method::GET { "get" } else { "post" };
    let query: Bytes = match parts.method {
        Method::GET => {
            let param = parts.uri.query().unwrap_or("").split('&').find_map(|kv| kv.strip_prefix("dns="));
            match param.and_then(dnscost_wire::base64url_decode) {
                Some(m) => m.into(),
                None => {
                    status(&mut respond, StatusCode::BAD_REQUEST);
                    return false;
                }
            }
        }
        Method::POST => {
            let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
            if !content_type.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case(DNS_MESSAGE) {
                status(&mut respond, StatusCode::UNSUPPORTED_MEDIA_TYPE);
                return false;
            }
            match body {
                Ok(b) if !b.is_empty() => b,
                Ok(_) => {
                    status(&mut respond, StatusCode::BAD_REQUEST);
                    return false;
                }
                Err(code) => {
                    status(&mut respond, code);
                    return false;
                }
            }
        }
        _ => {
            status(&mut respond, StatusCode::METHOD_NOT_ALLOWED);
            return false;
        }
    };
    let mut out = Vec::with_capacity(query.len() + 64);
    let Some(reply) = shared.respond(&query, &mut out, dnscost_wire::Framing::Stream, &origin, Some(method)) else {
        status(&mut respond, StatusCode::BAD_REQUEST);
        return false;
    };
    let response = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, DNS_MESSAGE)
        .header(header::CONTENT_LENGTH, out.len())
        .header(header::CACHE_CONTROL, format!("max-age={}", reply.ttl))
        .body(());
    let Ok(response) = response else { return false };
    match respond.send_response(response, false) {
        Ok(mut send) => send.send_data(Bytes::from(out), true).is_ok(),
        Err(_) => false,
    }
}

/// The request body: one DNS message (at most 65 535 octets; GET requests have none).
async fn read_body(body: &mut h2::RecvStream) -> Result<Bytes, StatusCode> {
    let mut first: Option<Bytes> = None;
    let mut more: Vec<u8> = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|_| StatusCode::BAD_REQUEST)?;
        let _ = body.flow_control().release_capacity(chunk.len());
        let total = first.as_ref().map_or(0, Bytes::len) + more.len() + chunk.len();
        if total > dnscost_wire::MAX_FRAME {
            return Err(StatusCode::PAYLOAD_TOO_LARGE);
        }
        match &first {
            None => first = Some(chunk),
            Some(f) => {
                if more.is_empty() {
                    more.extend_from_slice(f);
                }
                more.extend_from_slice(&chunk);
            }
        }
    }
    Ok(if more.is_empty() { first.unwrap_or_default() } else { Bytes::from(more) })
}

const EOF_NONE: u8 = 0;
const EOF_CLOSE_NOTIFY: u8 = 1;
const EOF_FIN: u8 = 2;
const EOF_RST: u8 = 3;
const EOF_ERROR: u8 = 4;

/// What the client did at the HTTP/2 and TLS layers: sent GOAWAY, and how its side ended.
#[derive(Debug, Default)]
struct Seen {
    goaway: AtomicBool,
    eof: AtomicU8,
}

/// Watches the plaintext the client sends for HTTP/2 GOAWAY frames (h2 does not report them)
/// and notes how the TLS stream ended.
struct Sniff<S> {
    inner: S,
    seen: Arc<Seen>,
    /// Octets of the connection preface still to skip.
    preface: usize,
    header: [u8; 9],
    have: usize,
    /// Octets of the current frame's payload still to skip.
    skip: usize,
}

impl<S> Sniff<S> {
    fn new(inner: S, seen: Arc<Seen>) -> Self {
        Sniff { inner, seen, preface: 24, header: [0; 9], have: 0, skip: 0 }
    }

    fn scan(&mut self, mut data: &[u8]) {
        let n = self.preface.min(data.len());
        self.preface -= n;
        data = &data[n..];
        while !data.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(data.len());
                self.skip -= n;
                data = &data[n..];
                continue;
            }
            let n = (9 - self.have).min(data.len());
            self.header[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == 9 {
                let h = self.header;
                if h[3] == 0x7 {
                    self.seen.goaway.store(true, Ordering::Release);
                }
                self.skip = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
                self.have = 0;
            }
        }
    }

    fn ended(&self, how: u8) {
        let _ = self.seen.eof.compare_exchange(EOF_NONE, how, Ordering::AcqRel, Ordering::Acquire);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Sniff<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let room = buf.remaining() > 0;
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        match &r {
            Poll::Ready(Ok(())) => {
                let new = &buf.filled()[before..];
                if new.is_empty() && room {
                    // A TLS stream reads 0 only after the peer's close_notify.
                    this.ended(EOF_CLOSE_NOTIFY);
                } else {
                    this.scan(new);
                }
            }
            Poll::Ready(Err(e)) => this.ended(match e.kind() {
                std::io::ErrorKind::UnexpectedEof => EOF_FIN,
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted => EOF_RST,
                _ => EOF_ERROR,
            }),
            Poll::Pending => {}
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Sniff<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goaway_is_seen_across_any_split() {
        let mut stream = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        // SETTINGS (empty), HEADERS with 5 octets, DATA with a payload that looks like a
        // GOAWAY header, then GOAWAY.
        stream.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        stream.extend_from_slice(&[0, 0, 5, 1, 4, 0, 0, 0, 1, 1, 2, 3, 4, 5]);
        stream.extend_from_slice(&[0, 0, 9, 0, 1, 0, 0, 0, 1, 0, 0, 8, 7, 0, 0, 0, 0, 0]);
        let without_goaway = stream.len();
        stream.extend_from_slice(&[0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]);
        for chunk in [1, 2, 5, 9, 100] {
            let seen = Arc::new(Seen::default());
            let mut s = Sniff::new((), seen.clone());
            for c in stream[..without_goaway].chunks(chunk) {
                s.scan(c);
            }
            assert!(!seen.goaway.load(Ordering::Acquire), "chunk {chunk}");
            for c in stream[without_goaway..].chunks(chunk) {
                s.scan(c);
            }
            assert!(seen.goaway.load(Ordering::Acquire), "chunk {chunk}");
        }
    }

    #[test]
    fn endings_prefer_goaway_then_eof_kind() {
        let seen = Seen::default();
        assert_eq!(client_ending(&seen, None), Ending::Client(Close::Fin, None));
        seen.eof.store(EOF_CLOSE_NOTIFY, Ordering::Release);
        assert_eq!(client_ending(&seen, None), Ending::Client(Close::CloseNotify, None));
        seen.goaway.store(true, Ordering::Release);
        assert_eq!(client_ending(&seen, None), Ending::Client(Close::Goaway, None));
    }
}
