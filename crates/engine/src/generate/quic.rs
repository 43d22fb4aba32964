//! The QUIC carrier of doq (RFC 9250: one bidirectional stream per query, the query's DNS ID
//! 0 on the wire, §4.2.1) and doh3 (one POST request per query over h3, the ID 0 too). To the driver and the DNS session (`tcp.rs`) it looks like the
//! two-octet-framed byte stream of tcp and dot, as the udp carrier does: a frame written opens
//! a stream, sends the query with ID 0 and finishes the stream; an answer read comes framed,
//! with the query's ID put back. A stream the server resets is reported apart (an event,
//! [`QuicStreams::take_events`]); a query refused with the 0-RTT data is sent again once the
//! handshake is done. The connection's end surfaces as an error that carries its [`Close`]
//! ([`QuicEnd`]), which the carrier turns into its `End`.
//!
//! The server's stream limit (QUIC MAX_STREAMS) never blocks a write: a frame that finds no
//! stream credit waits in the carrier, in order, and goes when the server grants more (reading
//! drives it, so answers keep coming meanwhile). While one waits the carrier has no room
//! ([`QuicStreams::has_room`]), so the session holds further queries in the schedule. A query
//! counts as sent once its stream opened (`went`; a waiting one is not on the wire), and one
//! that found no credit as a stream wait (`stream_waits`, both events); one whose timeout passes while it waits is taken back
//! ([`QuicStreams::drop_waiting`]), never goes and is failed `unsent` by the driver.

use super::events::{Events, StreamFailure};
use dnscost_stats::{Close, Handshake};
use dnscost_transport::quic::{HandshakeFacts, DOQ_NO_ERROR, H3_NO_ERROR, MAX_DOQ_MESSAGE};
use dnscost_transport::socket::TcpCounts;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use quinn::{ConnectionError, ReadError, ReadToEndError, RecvStream, SendStream, WriteError};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::ReadBuf;

type Opening = Pin<Box<dyn Future<Output = Result<(SendStream, RecvStream), ConnectionError>>>>;
type H3Stream = h3::client::RequestStream<h3_quinn::BidiStream<bytes::Bytes>, bytes::Bytes>;
type H3Opening = Pin<Box<dyn Future<Output = Result<H3Stream, H3SendError>>>>;

/// Why a DoH/3 request could not be sent whole.
enum H3SendError {
    /// No request stream opened (the connection ended or is going away).
    Open(h3::error::StreamError),
    /// The stream opened, but its body or end failed.
    Body(h3::error::StreamError),
}

/// A query waiting for its stream: its DNS ID, the query framed as DoQ sends it (ID 0), whether
/// it found no stream credit when it was written (a query that goes at once never waits), and
/// whether this is its first send (counted `sent` when its stream opens).
struct Waiting {
    id: u16,
    query: Vec<u8>,
    held: bool,
    fresh: bool,
}

/// Where DoH/3 requests go, and how: POST (the query is the body) or GET (`?dns=`, base64url).
#[derive(Clone, Debug)]
pub struct H3Target {
    pub uri: http::Uri,
    pub get: bool,
}

/// What rides on the QUIC connection: DoQ's framed streams, or DoH over HTTP/3 (requests to
/// `target`, sent through `send`; the connection's HTTP/3 driver runs in a task of its own).
pub enum Protocol {
    Doq,
    H3 { send: h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>, target: H3Target },
}

type Answer = Pin<Box<dyn Future<Output = Option<(u16, Result<Vec<u8>, StreamFailure>)>>>>;

/// An error carrying how the QUIC connection ended, for the carrier's `End::of`.
#[derive(Debug)]
pub struct QuicEnd(pub Close, pub String);

impl std::fmt::Display for QuicEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.1)
    }
}

impl std::error::Error for QuicEnd {}

/// An established doq or doh3 connection as a framed byte stream (see the module documentation).
pub struct QuicStreams {
    pub conn: quinn::Connection,
    protocol: Protocol,
    local: Option<std::net::SocketAddr>,
    opening: Option<Opening>,
    h3_opening: Option<H3Opening>,
    closed: Pin<Box<dyn Future<Output = ConnectionError>>>,
    /// The stream of the frame being written, and how much of that frame is written.
    writing: Option<(SendStream, RecvStream, usize)>,
    answers: FuturesUnordered<Answer>,
    /// An answer being handed out, framed: `ready.0[ready.1..]`.
    ready: (Vec<u8>, usize),
    failed: Vec<(u16, StreamFailure)>,
    /// Queries written that have no stream yet, oldest first (the front one may be opening).
    waiting: std::collections::VecDeque<Waiting>,
    /// Queries that found no stream credit since the last [`QuicStreams::take_events`].
    held: u64,
    /// How many frames at the end of the next write are first sends ([`QuicStreams::fresh_frames`]).
    fresh_next: u64,
    /// First sends whose stream opened since the last [`QuicStreams::take_events`].
    went: u64,
    /// How sending a waiting query failed, reported once the answers read are handed out.
    send_error: Option<std::io::Error>,
    /// The DoH/3 server rejected a request (it does so above its GOAWAY): no new request goes
    /// on this connection.
    rejected: bool,
    /// The handshake's kind once known (a 0-RTT connection is handed over before).
    handshake: Option<Handshake>,
    counted: TcpCounts,
}

impl QuicStreams {
    pub fn new(
        conn: quinn::Connection,
        protocol: Protocol,
        local: Option<std::net::SocketAddr>,
        handshake: Option<Handshake>,
    ) -> Self {
        let c = conn.clone();
        QuicStreams {
            closed: Box::pin(async move { c.closed().await }),
            conn,
            protocol,
            local,
            opening: None,
            h3_opening: None,
            writing: None,
            answers: FuturesUnordered::new(),
            ready: (Vec::new(), 0),
            failed: Vec::new(),
            waiting: std::collections::VecDeque::new(),
            held: 0,
            fresh_next: 0,
            went: 0,
            send_error: None,
            rejected: false,
            handshake,
            counted: TcpCounts::default(),
        }
    }

    /// The connection's local address (the endpoint's port, the address the kernel chose when
    /// the endpoint is bound to any).
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        let local = self.local?;
        Some(std::net::SocketAddr::new(self.conn.local_ip().unwrap_or(local.ip()), local.port()))
    }

    /// The handshake's kind, from its messages.
    pub fn handshake(&mut self) -> Handshake {
        if let Some(h) = self.handshake {
            return h;
        }
        match HandshakeFacts::of(&self.conn) {
            Some(f) => *self.handshake.insert(crate::quic::handshake_kind(f)),
            // Never done (the connection ended first): what was tried.
            None => Handshake::Full,
        }
    }

    /// Since the last call: the streams that ended without an answer (by the query's DNS ID),
    /// the first sends that went on a stream of their own, and the queries that found no
    /// stream credit.
    pub fn take_events(&mut self) -> Events {
        Events {
            failed: std::mem::take(&mut self.failed),
            went: std::mem::take(&mut self.went),
            stream_waits: std::mem::take(&mut self.held),
            ..Default::default()
        }
    }

    /// Whether a query written now goes on a stream at once: false while queries wait for the
    /// server to allow more streams.
    pub fn has_room(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The last `n` frames of the next write are queries sent for the first time (those before
    /// them go again after a refusal): each counts as sent once its stream opens.
    pub fn fresh_frames(&mut self, n: u64) {
        self.fresh_next = n;
    }

    /// How many first sends still wait for a stream.
    pub fn fresh_waiting(&self) -> u64 {
        self.waiting.iter().filter(|w| w.fresh).count() as u64
    }

    /// Takes back the waiting queries for which `expired` is true (their timeout passed before
    /// a stream opened), except one whose stream is already being written; returns their IDs.
    pub fn drop_waiting(&mut self, mut expired: impl FnMut(u16) -> bool) -> Vec<u16> {
        let busy = self.writing.is_some();
        let mut dropped = Vec::new();
        let mut index = 0;
        self.waiting.retain(|w| {
            let keep = (index == 0 && busy) || !expired(w.id);
            if !keep {
                if index == 0 {
                    // Its DoH/3 request was opening (a DoQ stream's opening is bound to no
                    // query, and is kept for the next).
                    self.h3_opening = None;
                }
                dropped.push(w.id);
            }
            index += 1;
            keep
        });
        dropped
    }

    /// Datagrams and octets (UDP payload) each way since the last call, from quinn's counts.
    pub fn take_counts(&mut self) -> TcpCounts {
        let s = self.conn.stats();
        let now = TcpCounts {
            bytes_sent: s.udp_tx.bytes,
            bytes_received: s.udp_rx.bytes,
            segments_sent: s.udp_tx.datagrams,
            segments_received: s.udp_rx.datagrams,
        };
        let d = now.since(&self.counted);
        self.counted = now;
        d
    }

    /// Closes with CONNECTION_CLOSE and DOQ_NO_ERROR or H3_NO_ERROR (`silent`: says nothing and lets the
    /// idle timeout end it), once the handshake is confirmed (HANDSHAKE_DONE received, at most
    /// 100 ms): the server sends its session tickets then, and a 0-RTT connection whose answer
    /// came first would otherwise end without one (the next connection of the slot would then
    /// make a full handshake).
    pub async fn close(&self, silent: bool) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(100);
        while self.conn.stats().frame_rx.handshake_done == 0
            && self.conn.close_reason().is_none()
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        if !silent {
            let code = if matches!(self.protocol, Protocol::Doq) { DOQ_NO_ERROR } else { H3_NO_ERROR };
            self.conn.close(code, b"");
        }
    }

    /// Waits until the connection is over (after our CONNECTION_CLOSE: at once; silent: until
    /// the idle timeout), at most `bound`.
    pub async fn await_end(&self, bound: std::time::Duration) {
        let _ = tokio::time::timeout(bound, self.conn.closed()).await;
        // Let the endpoint send the CONNECTION_CLOSE, so that it is counted.
        tokio::task::yield_now().await;
    }

    /// The connection's end as an I/O error that carries its kind.
    fn end_error(&self, e: &ConnectionError) -> std::io::Error {
        std::io::Error::other(QuicEnd(crate::quic::close_kind(e), e.to_string()))
    }
}

/// One query's exchange on its stream: the answer (at most one message), read to the stream's
/// end; a query refused with the 0-RTT data goes again on a new stream.
async fn exchange(
    conn: quinn::Connection,
    id: u16,
    mut recv: RecvStream,
    query: Vec<u8>,
) -> Option<(u16, Result<Vec<u8>, StreamFailure>)> {
    let mut r = recv.read_to_end(MAX_DOQ_MESSAGE).await;
    if matches!(r, Err(ReadToEndError::Read(ReadError::ZeroRttRejected))) {
        let (mut send, mut recv) = conn.open_bi().await.ok()?;
        send.write_all(&query).await.ok()?;
        let _ = send.finish();
        r = recv.read_to_end(MAX_DOQ_MESSAGE).await;
    }
    let answer = match r {
        Ok(bytes) if dnscost_wire::doq_message(&bytes).is_some() => Ok(bytes),
        Ok(_) | Err(ReadToEndError::TooLong) => Err(StreamFailure::Malformed),
        Err(ReadToEndError::Read(ReadError::Reset(code))) => Err(StreamFailure::Reset(code.into_inner())),
        // The connection ended: reading the carrier says how.
        Err(ReadToEndError::Read(_)) => return None,
    };
    Some((id, answer))
}

/// One DoH/3 request sent whole: opened (within the server's stream limit), its body (POST:
/// the query, ID 0; GET: none) and its end, so that the server can answer it whatever the
/// carrier's reader does.
async fn send_h3(
    mut send: h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>,
    request: http::Request<()>,
    body: Option<Vec<u8>>,
) -> Result<H3Stream, H3SendError> {
    let mut stream = send.send_request(request).await.map_err(H3SendError::Open)?;
    if let Some(query) = body {
        stream.send_data(bytes::Bytes::from(query)).await.map_err(H3SendError::Body)?;
    }
    stream.finish().await.map_err(H3SendError::Body)?;
    Ok(stream)
}

/// One DoH/3 query's response, read whole. `None`: the connection ended (reading the carrier
/// says how).
async fn exchange_h3(id: u16, mut stream: H3Stream) -> Option<(u16, Result<Vec<u8>, StreamFailure>)> {
    use bytes::BufMut as _;
    let response = match stream.recv_response().await {
        Ok(r) => r,
        Err(e) => return h3_failure(&e).map(|f| (id, Err(f))),
    };
    if response.status() != http::StatusCode::OK {
        return Some((id, Err(StreamFailure::Status(response.status().as_u16()))));
    }
    let mut answer = vec![0, 0];
    loop {
        match stream.recv_data().await {
            Ok(Some(mut chunk)) => {
                answer.put(&mut chunk);
            }
            Ok(None) => break,
            Err(e) => return h3_failure(&e).map(|f| (id, Err(f))),
        }
    }
    let Ok(len) = u16::try_from(answer.len() - 2) else {
        return Some((id, Err(StreamFailure::Malformed)));
    };
    if len < 2 {
        return Some((id, Err(StreamFailure::Malformed)));
    }
    answer[..2].copy_from_slice(&len.to_be_bytes());
    Some((id, Ok(answer)))
}

/// What a DoH/3 request's stream error says of its query: rejected unprocessed, reset, or
/// (`None`) lost with the connection (or the server's GOAWAY).
fn h3_failure(e: &h3::error::StreamError) -> Option<StreamFailure> {
    match terminated(e) {
        Some(f) => Some(f),
        None if e.is_h3_no_error() => None,
        None => Some(StreamFailure::Reset(0)),
    }
}

/// The server's reset of the stream (or its refusal to read it), if that was the error.
fn terminated(e: &h3::error::StreamError) -> Option<StreamFailure> {
    use h3::error::{Code, StreamError};
    match e {
        StreamError::RemoteTerminate { code, .. } if *code == Code::H3_REQUEST_REJECTED => {
            Some(StreamFailure::Rejected)
        }
        StreamError::RemoteTerminate { code, .. } => Some(StreamFailure::Reset(code.value())),
        _ => None,
    }
}

/// The DoH request for `query` (ID 0, RFC 8484 §4.1): a POST to the target's URI, or a GET with
/// the query in its `dns` parameter.
fn h3_request(target: &H3Target, query: &[u8]) -> http::Request<()> {
    let request = if target.get {
        http::Request::get(format!("{}?dns={}", target.uri, dnscost_wire::base64url(query)))
    } else {
        http::Request::post(target.uri.clone()).header(http::header::CONTENT_TYPE, "application/dns-message")
    };
    request.header(http::header::ACCEPT, "application/dns-message").body(()).expect("a valid request")
}

impl QuicStreams {
    /// Sends the waiting queries, oldest first, each on a stream of its own: ready once none
    /// waits, pending while the server's stream limit holds the next one, an error when the
    /// connection ended (or, DoH/3, is going away).
    fn poll_send_waiting(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while let Some(w) = self.waiting.pop_front() {
            let sent = match self.protocol {
                Protocol::Doq => self.poll_send_doq(cx, w.id, &w.query),
                Protocol::H3 { .. } => self.poll_send_h3(cx, w.id, &w.query),
            };
            match sent {
                Poll::Ready(Ok(())) => self.went += u64::from(w.fresh),
                Poll::Ready(Err(e)) => {
                    self.waiting.push_front(w);
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => {
                    self.waiting.push_front(w);
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Sends one DoQ query (framed, ID 0) on a new stream, once the server allows one, and finishes it.
    fn poll_send_doq(&mut self, cx: &mut Context<'_>, id: u16, query: &[u8]) -> Poll<std::io::Result<()>> {
        if self.writing.is_none() {
            let opening = self.opening.get_or_insert_with(|| {
                let conn = self.conn.clone();
                Box::pin(async move { conn.open_bi().await })
            });
            match opening.as_mut().poll(cx) {
                Poll::Ready(Ok((send, recv))) => {
                    self.opening = None;
                    self.writing = Some((send, recv, 0));
                }
                Poll::Ready(Err(e)) => {
                    self.opening = None;
                    return Poll::Ready(Err(self.end_error(&e)));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        let (send, _, written) = self.writing.as_mut().expect("a stream to write");
        while *written < query.len() {
            match Pin::new(&mut *send).poll_write(cx, &query[*written..]) {
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Ready(Err(WriteError::ConnectionLost(e))) => {
                    self.writing = None;
                    return Poll::Ready(Err(self.end_error(&e)));
                }
                // Refused with the 0-RTT data: the exchange sends it again.
                Poll::Ready(Err(WriteError::ZeroRttRejected)) => *written = query.len(),
                Poll::Ready(Err(e)) => {
                    self.writing = None;
                    return Poll::Ready(Err(std::io::Error::other(e)));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        let (mut send, recv, _) = self.writing.take().expect("a stream to write");
        let _ = send.finish();
        self.answers.push(Box::pin(exchange(self.conn.clone(), id, recv, query.to_vec())));
        Poll::Ready(Ok(()))
    }

    /// Sends one query (framed, ID 0) as a DoH/3 request, once the server allows a stream.
    fn poll_send_h3(&mut self, cx: &mut Context<'_>, id: u16, framed: &[u8]) -> Poll<std::io::Result<()>> {
        let query = &framed[2..];
        let Protocol::H3 { send, target } = &self.protocol else { unreachable!("an HTTP/3 connection") };
        if self.rejected && self.h3_opening.is_none() {
            return Poll::Ready(Err(std::io::Error::other(QuicEnd(Close::Goaway, "request rejected".into()))));
        }
        let opening = self.h3_opening.get_or_insert_with(|| {
            let body = (!target.get).then(|| query.to_vec());
            Box::pin(send_h3(send.clone(), h3_request(target, query), body))
        });
        let sent = std::task::ready!(opening.as_mut().poll(cx));
        self.h3_opening = None;
        match sent {
            Ok(stream) => self.answers.push(Box::pin(exchange_h3(id, stream))),
            // Its stream refused or reset: reported apart. Otherwise the connection ended, and
            // reading it says how.
            Err(H3SendError::Body(e)) => {
                if let Some(f) = terminated(&e) {
                    self.rejected |= f == StreamFailure::Rejected;
                    self.failed.push((id, f));
                }
            }
            Err(H3SendError::Open(e)) => {
                return Poll::Ready(Err(match self.conn.close_reason() {
                    Some(c) => self.end_error(&c),
                    // The server said GOAWAY: no new request on this connection.
                    None if e.is_h3_no_error() || e.to_string().contains("closing") => {
                        std::io::Error::other(QuicEnd(Close::Goaway, e.to_string()))
                    }
                    None => std::io::Error::other(e),
                }));
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncRead for QuicStreams {
    /// Sends what waits for a stream, then hands out the answers that arrived, framed, with
    /// their queries' IDs. Streams that failed without answers, and the last waiting query
    /// going (the carrier has room again), read as `Interrupted` (the driver takes a turn and
    /// reads again).
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let waited = !this.waiting.is_empty();
        if waited && this.send_error.is_none() {
            if let Poll::Ready(Err(e)) = this.poll_send_waiting(cx) {
                this.send_error = Some(e);
            }
        }
        let mut got = false;
        loop {
            let (bytes, at) = &mut this.ready;
            if *at < bytes.len() {
                let n = buf.remaining().min(bytes.len() - *at);
                buf.put_slice(&bytes[*at..*at + n]);
                *at += n;
                got |= n > 0;
                if *at < bytes.len() {
                    break;
                }
                continue;
            }
            match this.answers.poll_next_unpin(cx) {
                Poll::Ready(Some(Some((id, Ok(mut bytes))))) => {
                    bytes[2..4].copy_from_slice(&id.to_be_bytes());
                    this.ready = (bytes, 0);
                }
                Poll::Ready(Some(Some((id, Err(f))))) => {
                    this.rejected |= f == StreamFailure::Rejected;
                    this.failed.push((id, f));
                }
                Poll::Ready(Some(None)) => {}
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        if got {
            return Poll::Ready(Ok(()));
        }
        if !this.failed.is_empty() || (waited && this.waiting.is_empty()) {
            return Poll::Ready(Err(std::io::ErrorKind::Interrupted.into()));
        }
        if let Some(e) = this.send_error.take() {
            return Poll::Ready(Err(e));
        }
        match this.closed.as_mut().poll(cx) {
            Poll::Ready(e) => Poll::Ready(Err(this.end_error(&e))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl tokio::io::AsyncWrite for QuicStreams {
    /// Takes every whole frame of `buf`, each for a stream of its own, and sends those the
    /// server's stream limit allows; the others wait (see the module documentation). Returns
    /// the octets of the frames taken; an error when the connection ended.
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let (mut done, first) = (0, this.waiting.len());
        while buf.len() - done >= 4 {
            let len = usize::from(u16::from_be_bytes([buf[done], buf[done + 1]]));
            let end = done + 2 + len;
            if end > buf.len() || len < 2 {
                break;
            }
            let id = u16::from_be_bytes([buf[done + 2], buf[done + 3]]);
            let mut query = buf[done..end].to_vec();
            query[2..4].copy_from_slice(&[0, 0]);
            this.waiting.push_back(Waiting { id, query, held: false, fresh: false });
            done = end;
        }
        let fresh = usize::try_from(std::mem::take(&mut this.fresh_next)).unwrap_or(usize::MAX);
        let taken = this.waiting.len() - first;
        for w in this.waiting.iter_mut().skip(first + taken.saturating_sub(fresh)) {
            w.fresh = true;
        }
        if let Some(e) = this.send_error.take() {
            return Poll::Ready(Err(e));
        }
        if let Poll::Ready(Err(e)) = this.poll_send_waiting(cx) {
            return Poll::Ready(Err(e));
        }
        for w in this.waiting.iter_mut().filter(|w| !w.held) {
            w.held = true;
            this.held += 1;
        }
        Poll::Ready(Ok(done))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
