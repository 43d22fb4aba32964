//! A minimal HTTP/2 client (RFC 9113) made for DoH (RFC 8484): a state machine without I/O,
//! clock or async, so that the generator's session owns the socket and the timers.
//!
//! The caller writes [`Client::preface`], then requests built from a [`RequestTemplate`]
//! (encoded once per kind of request, so a request costs two frame headers and two copies) with
//! [`Client::send`]. Reads go straight into the client's buffer ([`Client::spare`], then
//! [`Client::advance`]) and [`Client::next_event`] returns what they completed: a response with
//! its body (a slice of the read buffer when it came in one DATA frame), a reset, a GOAWAY or a
//! connection error. Control frames the client must answer (SETTINGS and PING acks,
//! WINDOW_UPDATE, RST_STREAM, GOAWAY) are appended to an `out` buffer that the caller writes.
//!
//! What it does not do, because DoH does not need it: server push (disabled in our SETTINGS),
//! priorities (PRIORITY frames are parsed and ignored), request trailers, a general HPACK
//! encoder (requests are [`Headers::Minimal`] or [`Headers::Browser`] templates; the dynamic
//! table is used only for the fields all requests of a template share), and queueing
//! request bodies: a body that does not fit the server's flow-control windows is refused
//! ([`Http2Error::FlowControlBlocked`]) and the caller tries again after a WINDOW_UPDATE. Only a
//! server that advertises an initial stream window smaller than the bodies would never let a
//! POST through.

mod error;
mod frame;
mod hpack;
mod request;

pub use error::{ErrorCode, Http2Error};
pub use frame::PREFACE;
use frame::*;
pub use request::{Headers, Method, RequestTemplate};

/// A stream identifier; the client's are odd and only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u32);

/// What the client advertises and accepts.
#[derive(Debug, Clone)]
pub struct Settings {
    /// SETTINGS_HEADER_TABLE_SIZE: the dynamic table the server's encoder may use toward us.
    /// The default, 4 096 (the protocol's), is what browsers and nghttp2 clients allow: the
    /// server refers to the fields it sent before instead of Huffman-coding them again, which
    /// costs both sides less. 0 keeps the table empty with servers that honour it.
    pub header_table_size: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: how much a response body may send before a stream
    /// WINDOW_UPDATE (at most 2^31 - 1).
    pub initial_window_size: u32,
    /// The connection receive window the preface's WINDOW_UPDATE opens (at least 65 535, at
    /// most 2^31 - 1); a WINDOW_UPDATE refills it once half is used.
    pub connection_window_size: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload accepted (16 384 to 2^24 - 1).
    pub max_frame_size: u32,
    /// Streams that may open before the server's SETTINGS give its limit.
    pub initial_max_streams: u32,
    /// The longest header block accepted (HEADERS and CONTINUATION together).
    pub max_header_block: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            header_table_size: hpack::DEFAULT_TABLE_SIZE as u32,
            initial_window_size: 1 << 24,
            connection_window_size: 1 << 30,
            max_frame_size: MIN_FRAME_SIZE,
            initial_max_streams: 100,
            max_header_block: 64 * 1024,
        }
    }
}

/// The server's SETTINGS, as far as received.
#[derive(Debug, Clone, Copy)]
struct PeerSettings {
    max_concurrent_streams: u32,
    initial_window_size: u32,
    max_frame_size: u32,
}

/// What the server sent that the caller must act on.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A stream ended with a response: its final status and its whole body.
    Response { stream: StreamId, status: u16, body: &'a [u8] },
    /// A stream was reset: by the server (RST_STREAM, with its code), or by the client because
    /// the response was malformed or broke flow control (with the code sent).
    Reset { stream: StreamId, code: ErrorCode },
    /// The server is closing the connection: streams above `last_stream` were not processed and
    /// are forgotten; those at or below it may still complete.
    GoAway { last_stream: StreamId, code: ErrorCode },
    /// The server broke the protocol; a GOAWAY was appended and the connection is unusable.
    ConnectionError(Http2Error),
}

/// What our encoder knows of the server's dynamic table.
#[derive(Debug)]
struct EncoderTable {
    /// The size the server's decoder works with: 4 096 until we signal less.
    size: usize,
    /// A size update owed at the start of the next header block.
    update: Option<usize>,
    /// The template key whose shared fields are the newest entries.
    newest: Option<u64>,
}

/// One open stream. The client's half is always closed (every request ends with END_STREAM),
/// so a stream lives until the server ends it or one side resets it.
#[derive(Debug, Default)]
struct Stream {
    /// 0 for a free slot.
    id: u32,
    /// The final status once the response headers came, 0 before.
    status: u16,
    content_length: Option<u64>,
    /// What the server may still send on this stream.
    recv_window: i64,
    /// What we may still send (kept for WINDOW_UPDATE and SETTINGS accounting only: the body
    /// went out with the request).
    send_window: i64,
    /// The body so far, when it comes in more than one DATA frame.
    body: Vec<u8>,
}

/// Where a completed response's body is.
enum Body {
    /// In the read buffer (one DATA frame).
    Input(usize, usize),
    /// In `done_body` (assembled from several frames, or empty).
    Assembled,
}

/// An event before it borrows the client.
enum Ready {
    Response { stream: u32, status: u16, body: Body },
    Reset { stream: u32, code: ErrorCode },
    GoAway { last_stream: u32, code: ErrorCode },
    Error(Http2Error),
}

/// The response header fields the client checks: `:status`, content-length, and whether the
/// block is a valid response (or trailer) header section.
#[derive(Debug, Default)]
struct Head {
    status: u16,
    content_length: Option<u64>,
    pseudo: bool,
    regular: bool,
    malformed: bool,
}

impl Head {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if name.first() == Some(&b':') {
            if self.regular || self.pseudo || name != b":status" {
                self.malformed = true;
            }
            self.pseudo = true;
            match value {
                [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
                    self.status = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
                }
                _ => self.malformed = true,
            }
        } else {
            self.regular = true;
            if name.iter().any(u8::is_ascii_uppercase) {
                self.malformed = true;
            } else if name == b"content-length" {
                match parse_decimal(value) {
                    Some(n) if self.content_length.is_none_or(|c| c == n) => self.content_length = Some(n),
                    _ => self.malformed = true,
                }
            }
        }
    }
}

fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    s.iter().try_fold(0u64, |n, &d| d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0')))
}

/// Where the connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Streams may open.
    Open,
    /// No stream opens any more; open ones may still complete. `last_stream`: the lowest
    /// last-stream-ID of the server's GOAWAYs, if it sent one; `sent`: we sent GOAWAY.
    GoingAway { last_stream: Option<u32>, sent: bool },
    /// A connection error: a GOAWAY with its code went out, and nothing more is read or sent.
    Failed { last_stream: Option<u32> },
}

/// An HTTP/2 client connection. See the module documentation for the flow.
#[derive(Debug)]
pub struct Client {
    settings: Settings,
    peer: PeerSettings,
    encoder: EncoderTable,
    preface_sent: bool,
    /// The server acknowledged our SETTINGS.
    acked: bool,
    /// The server's preface (a SETTINGS frame, its first) arrived.
    peer_preface: bool,
    phase: Phase,
    /// Open streams, indexed by `(id >> 1) & mask`; fewer than half the slots are in use.
    streams: Vec<Stream>,
    mask: usize,
    open: usize,
    /// The next stream identifier to try.
    next_id: u32,
    /// Connection windows: what we may send, what the server may send.
    send_window: i64,
    recv_window: i64,
    /// Octets received since the last connection WINDOW_UPDATE.
    recv_unacked: i64,
    hpack: hpack::Decoder,
    /// A header block waiting for CONTINUATION: (stream, END_STREAM).
    continuation: Option<(u32, bool)>,
    header_block: Vec<u8>,
    done_body: Vec<u8>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Client {
    pub fn new(settings: Settings) -> Client {
        let mut settings = settings;
        settings.initial_window_size = settings.initial_window_size.min(MAX_WINDOW as u32);
        settings.connection_window_size = settings.connection_window_size.clamp(DEFAULT_WINDOW, MAX_WINDOW as u32);
        settings.max_frame_size = settings.max_frame_size.clamp(MIN_FRAME_SIZE, MAX_FRAME_SIZE);
        let mut streams = Vec::new();
        streams.resize_with(4, Stream::default);
        Client {
            peer: PeerSettings {
                max_concurrent_streams: settings.initial_max_streams,
                initial_window_size: DEFAULT_WINDOW,
                max_frame_size: MIN_FRAME_SIZE,
            },
            encoder: EncoderTable { size: hpack::DEFAULT_TABLE_SIZE, update: None, newest: None },
            preface_sent: false,
            acked: false,
            peer_preface: false,
            phase: Phase::Open,
            streams,
            mask: 3,
            open: 0,
            next_id: 1,
            send_window: i64::from(DEFAULT_WINDOW),
            recv_window: i64::from(DEFAULT_WINDOW),
            recv_unacked: 0,
            hpack: hpack::Decoder::new(hpack::DEFAULT_TABLE_SIZE),
            continuation: None,
            header_block: Vec::new(),
            done_body: Vec::new(),
            buf: Vec::new(),
            start: 0,
            end: 0,
            settings,
        }
    }

    /// Appends the connection preface: the magic, our SETTINGS and a WINDOW_UPDATE that opens
    /// the connection window. Only the first call writes; [`Client::send`] calls it if needed.
    pub fn preface(&mut self, out: &mut Vec<u8>) {
        if self.preface_sent {
            return;
        }
        self.preface_sent = true;
        out.extend_from_slice(PREFACE);
        let s = &self.settings;
        let settings = [
            (SETTINGS_HEADER_TABLE_SIZE, s.header_table_size),
            (SETTINGS_ENABLE_PUSH, 0),
            (SETTINGS_INITIAL_WINDOW_SIZE, s.initial_window_size),
            (SETTINGS_MAX_FRAME_SIZE, s.max_frame_size),
        ];
        put_frame_header(out, settings.len() * 6, SETTINGS, 0, 0);
        for (id, value) in settings {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&value.to_be_bytes());
        }
        let increment = s.connection_window_size - DEFAULT_WINDOW;
        if increment > 0 {
            put_window_update(out, 0, increment);
        }
        self.recv_window = i64::from(s.connection_window_size);
    }

    /// Whether a new stream may open now: the connection is up, not going away, and below the
    /// server's SETTINGS_MAX_CONCURRENT_STREAMS.
    #[inline]
    pub fn can_send(&self) -> bool {
        self.phase == Phase::Open
            && (self.open as u64) < u64::from(self.peer.max_concurrent_streams)
            && self.next_id <= MAX_STREAM_ID
    }

    /// Makes `id` (odd) the next stream identifier, as if the ones below had been used: for
    /// callers' tests of identifier exhaustion (RFC 9113 §5.1.1).
    #[doc(hidden)]
    pub fn skip_stream_ids_to(&mut self, id: u32) {
        assert!(id % 2 == 1 && id >= self.next_id, "client stream identifiers are odd and grow");
        self.next_id = id;
    }

    /// Whether every client stream identifier is used: no new stream will ever open on this
    /// connection, and the caller must open another (RFC 9113 §5.1.1).
    #[inline]
    pub fn ids_exhausted(&self) -> bool {
        self.next_id > MAX_STREAM_ID
    }

    /// The largest body a new stream may send now (the smaller of the connection window and the
    /// server's initial stream window).
    #[inline]
    pub fn send_window(&self) -> usize {
        self.send_window.min(i64::from(self.peer.initial_window_size)).max(0) as usize
    }

    /// Streams open now.
    #[inline]
    pub fn open_streams(&self) -> usize {
        self.open
    }

    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (our assumption until they arrive).
    pub fn max_concurrent_streams(&self) -> u32 {
        self.peer.max_concurrent_streams
    }

    /// The lowest last-stream-ID of the server's GOAWAYs, if it sent one.
    pub fn goaway_received(&self) -> Option<StreamId> {
        match self.phase {
            Phase::Open => None,
            Phase::GoingAway { last_stream, .. } | Phase::Failed { last_stream } => last_stream.map(StreamId),
        }
    }

    /// Whether a connection error ended the connection.
    pub fn is_failed(&self) -> bool {
        matches!(self.phase, Phase::Failed { .. })
    }

    /// Opens a stream for one request and appends its frames: HEADERS (with END_STREAM for a
    /// GET) and, for a POST, the body in DATA with END_STREAM. On error nothing is written.
    pub fn send(&mut self, req: &RequestTemplate, body: &[u8], out: &mut Vec<u8>) -> Result<StreamId, Http2Error> {
        match self.phase {
            Phase::Open => {}
            Phase::GoingAway { .. } => return Err(Http2Error::GoingAway),
            Phase::Failed { .. } => return Err(Http2Error::Closed),
        }
        if (self.open as u64) >= u64::from(self.peer.max_concurrent_streams) {
            return Err(Http2Error::StreamLimit);
        }
        let post = req.method == Method::Post;
        if !post && !body.is_empty() {
            return Err(Http2Error::BodyNotAllowed);
        }
        let available = self.send_window();
        if body.len() > available {
            return Err(Http2Error::FlowControlBlocked { needed: body.len(), available });
        }
        if (self.open + 1) * 2 > self.streams.len() {
            self.grow();
        }
        // Identifiers must grow but may skip (RFC 9113 §5.1.1): skip those whose slot is held
        // by a stream still open.
        let mut id = self.next_id;
        while self.streams[(id >> 1) as usize & self.mask].id != 0 {
            id += 2;
        }
        if id > MAX_STREAM_ID {
            return Err(Http2Error::StreamIdsExhausted);
        }
        self.next_id = id + 2;
        self.preface(out);

        // The shared fields: by reference, entering the table, or plain (RFC 7541 §2.3).
        let (block, enters) = if self.encoder.newest == Some(req.key) {
            (&req.indexed, false)
        } else if req.table_size <= self.encoder.size {
            (&req.insert, true)
        } else {
            (&req.plain, false)
        };
        let max = self.peer.max_frame_size as usize;
        let headers_end = if body.is_empty() { END_STREAM } else { 0 };
        // The header block goes into `out` after a frame header whose length is set after.
        let at = out.len();
        put_frame_header(out, 0, HEADERS, END_HEADERS | headers_end, id);
        if let Some(size) = self.encoder.update {
            hpack::put_integer(out, 0x20, 5, size);
        }
        out.extend_from_slice(block);
        if post {
            let mut digits = [0u8; 20];
            let n = format_decimal(body.len(), &mut digits);
            hpack::put_literal(out, hpack::CONTENT_LENGTH, &digits[20 - n..], req.strings);
        }
        let block_len = out.len() - at - FRAME_HEADER;
        if block_len <= max {
            out[at..at + 3].copy_from_slice(&(block_len as u32).to_be_bytes()[1..]);
        } else {
            let whole = out.split_off(at + FRAME_HEADER);
            out.truncate(at);
            let mut chunks = whole.chunks(max).peekable();
            let mut kind = HEADERS;
            let mut flags = headers_end;
            while let Some(chunk) = chunks.next() {
                let last = if chunks.peek().is_none() { END_HEADERS } else { 0 };
                put_frame_header(out, chunk.len(), kind, flags | last, id);
                out.extend_from_slice(chunk);
                (kind, flags) = (CONTINUATION, 0);
            }
        }
        self.encoder.update = None;
        if enters {
            self.encoder.newest = Some(req.key);
        }
        let mut chunks = body.chunks(max).peekable();
        while let Some(chunk) = chunks.next() {
            let end = if chunks.peek().is_none() { END_STREAM } else { 0 };
            put_frame_header(out, chunk.len(), DATA, end, id);
            out.extend_from_slice(chunk);
        }

        self.send_window -= body.len() as i64;
        let s = &mut self.streams[(id >> 1) as usize & self.mask];
        s.id = id;
        s.status = 0;
        s.content_length = None;
        s.recv_window = i64::from(self.settings.initial_window_size);
        s.send_window = i64::from(self.peer.initial_window_size) - body.len() as i64;
        s.body.clear();
        self.open += 1;
        Ok(StreamId(id))
    }

    /// Resets an open stream (RST_STREAM with `code`, CANCEL for a request given up on) so
    /// that the server frees it; frames the server sends on it afterwards are ignored. False
    /// if the stream is not open.
    pub fn reset(&mut self, stream: StreamId, code: ErrorCode, out: &mut Vec<u8>) -> bool {
        let Some(i) = self.slot(stream.0) else { return false };
        put_rst_stream(out, stream.0, code);
        self.free(i);
        true
    }

    /// Appends GOAWAY (NO_ERROR) for a graceful close; no stream opens afterwards. Responses
    /// of open streams still come.
    pub fn goaway(&mut self, out: &mut Vec<u8>) {
        self.preface(out);
        let last_stream = match self.phase {
            Phase::Open => None,
            Phase::GoingAway { sent: false, last_stream } => last_stream,
            Phase::GoingAway { sent: true, .. } | Phase::Failed { .. } => return,
        };
        put_goaway(out, 0, ErrorCode::NO_ERROR);
        self.phase = Phase::GoingAway { last_stream, sent: true };
    }

    /// Free space to read into: at least one whole frame fits. The buffer is the thread's
    /// ([`crate::spare`]), held until [`Client::release`] finds nothing buffered.
    pub fn spare(&mut self) -> &mut [u8] {
        let room = self.settings.max_frame_size as usize + FRAME_HEADER;
        if self.buf.is_empty() {
            self.buf = crate::spare::take(2 * room);
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() - self.end < room {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buf.len() - self.end < room {
                self.buf.resize(self.end + room, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// Gives the read buffer back to the thread if it holds nothing (an incomplete frame stays).
    pub fn release(&mut self) {
        if self.start == self.end && !self.buf.is_empty() {
            crate::spare::give(std::mem::take(&mut self.buf));
            (self.start, self.end) = (0, 0);
        }
    }

    /// Marks `n` octets of [`Client::spare`] as read.
    pub fn advance(&mut self, n: usize) {
        self.end += n;
        debug_assert!(self.end <= self.buf.len());
    }

    /// Octets read and not yet parsed (an incomplete frame).
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Parses buffered frames up to the next event; None when no complete frame is left.
    /// Answers (acks, window updates, resets, GOAWAY) are appended to `out`.
    pub fn next_event(&mut self, out: &mut Vec<u8>) -> Option<Event<'_>> {
        let ready = self.next_ready(out)?;
        Some(match ready {
            Ready::Response { stream, status, body } => Event::Response {
                stream: StreamId(stream),
                status,
                body: match body {
                    Body::Input(from, to) => &self.buf[from..to],
                    Body::Assembled => &self.done_body,
                },
            },
            Ready::Reset { stream, code } => Event::Reset { stream: StreamId(stream), code },
            Ready::GoAway { last_stream, code } => Event::GoAway { last_stream: StreamId(last_stream), code },
            Ready::Error(e) => Event::ConnectionError(e),
        })
    }

    /// Feeds `bytes` through the read buffer and hands every event to `f`: for callers that
    /// already hold the octets (tests, fuzzing). Stops after a connection error.
    pub fn receive(&mut self, mut bytes: &[u8], out: &mut Vec<u8>, mut f: impl FnMut(Event<'_>)) {
        while !bytes.is_empty() && !self.is_failed() {
            let spare = self.spare();
            let n = spare.len().min(bytes.len());
            spare[..n].copy_from_slice(&bytes[..n]);
            self.advance(n);
            bytes = &bytes[n..];
            while let Some(event) = self.next_event(out) {
                f(event);
            }
        }
    }

    fn next_ready(&mut self, out: &mut Vec<u8>) -> Option<Ready> {
        while !self.is_failed() {
            let avail = self.end - self.start;
            if avail < FRAME_HEADER {
                return None;
            }
            let h = &self.buf[self.start..self.start + FRAME_HEADER];
            let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
            let (kind, flags) = (h[3], h[4]);
            let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & MAX_STREAM_ID;
            if len > self.settings.max_frame_size as usize {
                return Some(self.fail(Http2Error::FrameSize { kind, len }, out));
            }
            if avail < FRAME_HEADER + len {
                return None;
            }
            let from = self.start + FRAME_HEADER;
            self.start = from + len;
            match self.frame(kind, flags, stream, from, from + len, out) {
                Ok(None) => {}
                Ok(Some(ready)) => return Some(ready),
                Err(e) => return Some(self.fail(e, out)),
            }
        }
        None
    }

    /// A connection error: GOAWAY with its code, and nothing more from this connection.
    fn fail(&mut self, e: Http2Error, out: &mut Vec<u8>) -> Ready {
        self.preface(out);
        put_goaway(out, 0, e.code());
        self.phase = Phase::Failed { last_stream: self.goaway_received().map(|s| s.0) };
        Ready::Error(e)
    }

    fn frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        from: usize,
        to: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<Ready>, Http2Error> {
        if !self.peer_preface {
            if kind != SETTINGS || flags & ACK != 0 {
                return Err(Http2Error::Preface(kind));
            }
            // Without the setting, the server sets no limit (RFC 9113 §6.5.2).
            self.peer_preface = true;
            self.peer.max_concurrent_streams = u32::MAX;
        }
        if let Some((expected, _)) = self.continuation {
            if kind != CONTINUATION || stream != expected {
                return Err(Http2Error::Continuation { kind, stream });
            }
        }
        match kind {
            DATA => self.data(flags, stream, from, to, out),
            HEADERS => self.headers(flags, stream, from, to, out),
            PRIORITY => self.priority(stream, to - from, out),
            RST_STREAM => self.rst_stream(stream, from, to),
            SETTINGS => self.peer_settings(flags, stream, from, to, out).map(|()| None),
            PUSH_PROMISE => Err(Http2Error::PushPromise),
            PING => self.ping(flags, stream, from, to, out).map(|()| None),
            GOAWAY => self.peer_goaway(stream, from, to).map(Some),
            WINDOW_UPDATE => self.window_update(stream, from, to, out),
            CONTINUATION => self.continuation(flags, stream, from, to, out),
            _ => Ok(None),
        }
    }

    /// Whether `id` names a stream that never opened (even: the server may not open any).
    fn idle(&self, id: u32) -> bool {
        id.is_multiple_of(2) || id >= self.next_id
    }

    #[inline]
    fn slot(&self, id: u32) -> Option<usize> {
        let i = (id >> 1) as usize & self.mask;
        (id != 0 && self.streams[i].id == id).then_some(i)
    }

    fn free(&mut self, i: usize) {
        let s = &mut self.streams[i];
        s.id = 0;
        s.body = Vec::new();
        self.open -= 1;
    }

    fn grow(&mut self) {
        let size = self.streams.len() * 2;
        let mut streams = Vec::with_capacity(size);
        streams.resize_with(size, Stream::default);
        let old = std::mem::replace(&mut self.streams, streams);
        self.mask = size - 1;
        for s in old.into_iter().filter(|s| s.id != 0) {
            let i = (s.id >> 1) as usize & self.mask;
            self.streams[i] = s;
        }
    }

    /// A stream error: RST_STREAM, and the stream is reported reset.
    fn stream_error(&mut self, i: usize, code: ErrorCode, out: &mut Vec<u8>) -> Option<Ready> {
        let stream = self.streams[i].id;
        put_rst_stream(out, stream, code);
        self.free(i);
        Some(Ready::Reset { stream, code })
    }

    /// Strips padding (and the priority fields of HEADERS) from a payload.
    fn unpad(&self, kind: u8, flags: u8, mut from: usize, mut to: usize) -> Result<(usize, usize), Http2Error> {
        if flags & PADDED != 0 {
            let Some(&pad) = self.buf[from..to].first() else {
                return Err(Http2Error::FrameSize { kind, len: 0 });
            };
            from += 1;
            if usize::from(pad) > to - from {
                return Err(Http2Error::Padding { kind });
            }
            to -= usize::from(pad);
        }
        if kind == HEADERS && flags & PRIORITY_FLAG != 0 {
            if to - from < 5 {
                return Err(Http2Error::FrameSize { kind, len: to - from });
            }
            from += 5;
        }
        Ok((from, to))
    }

    fn data(
        &mut self,
        flags: u8,
        stream: u32,
        from: usize,
        to: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<Ready>, Http2Error> {
        if stream == 0 || self.idle(stream) {
            return Err(Http2Error::UnexpectedStream { kind: DATA, stream });
        }
        // The whole payload, padding included, counts against the windows (§6.9.1).
        let len = (to - from) as i64;
        self.recv_window -= len;
        if self.recv_window < 0 {
            return Err(Http2Error::FlowControl);
        }
        self.recv_unacked += len;
        if self.recv_unacked >= i64::from(self.settings.connection_window_size / 2) {
            put_window_update(out, 0, self.recv_unacked as u32);
            self.recv_window += self.recv_unacked;
            self.recv_unacked = 0;
        }
        let (from, to) = self.unpad(DATA, flags, from, to)?;
        let Some(i) = self.slot(stream) else { return Ok(None) };
        let s = &mut self.streams[i];
        s.recv_window -= len;
        if s.recv_window < 0 {
            return Ok(self.stream_error(i, ErrorCode::FLOW_CONTROL_ERROR, out));
        }
        if s.status == 0 {
            // DATA before the response's HEADERS.
            return Ok(self.stream_error(i, ErrorCode::PROTOCOL_ERROR, out));
        }
        if flags & END_STREAM != 0 {
            return Ok(self.complete(i, Some((from, to)), out));
        }
        s.body.extend_from_slice(&self.buf[from..to]);
        let initial = i64::from(self.settings.initial_window_size);
        if s.recv_window <= initial / 2 {
            put_window_update(out, stream, (initial - s.recv_window) as u32);
            s.recv_window = initial;
        }
        Ok(None)
    }

    fn headers(
        &mut self,
        flags: u8,
        stream: u32,
        from: usize,
        to: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<Ready>, Http2Error> {
        if stream == 0 || self.idle(stream) {
            return Err(Http2Error::UnexpectedStream { kind: HEADERS, stream });
        }
        let (from, to) = self.unpad(HEADERS, flags, from, to)?;
        let end_stream = flags & END_STREAM != 0;
        if flags & END_HEADERS == 0 {
            self.header_block.clear();
            self.header_block.extend_from_slice(&self.buf[from..to]);
            self.continuation = Some((stream, end_stream));
            if self.header_block.len() > self.settings.max_header_block {
                return Err(Http2Error::HeaderBlockTooLarge(self.header_block.len()));
            }
            return Ok(None);
        }
        let mut head = Head::default();
        self.hpack.decode(&self.buf[from..to], &mut |n, v| head.field(n, v))?;
        Ok(self.response_head(stream, end_stream, head, out))
    }

    fn continuation(
        &mut self,
        flags: u8,
        stream: u32,
        from: usize,
        to: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<Ready>, Http2Error> {
        let Some((_, end_stream)) = self.continuation else {
            return Err(Http2Error::Continuation { kind: CONTINUATION, stream });
        };
        self.header_block.extend_from_slice(&self.buf[from..to]);
        if self.header_block.len() > self.settings.max_header_block {
            return Err(Http2Error::HeaderBlockTooLarge(self.header_block.len()));
        }
        if flags & END_HEADERS == 0 {
            return Ok(None);
        }
        self.continuation = None;
        let mut head = Head::default();
        self.hpack.decode(&self.header_block, &mut |n, v| head.field(n, v))?;
        Ok(self.response_head(stream, end_stream, head, out))
    }

    /// A decoded header section on `stream`: the response's (after any 1xx) or trailers.
    fn response_head(&mut self, stream: u32, end_stream: bool, head: Head, out: &mut Vec<u8>) -> Option<Ready> {
        // A stream we reset or forgot: the block was decoded for the table's sake only.
        let i = self.slot(stream)?;
        let s = &mut self.streams[i];
        if s.status == 0 {
            if head.malformed || head.status == 0 || head.status == 101 || (head.status < 200 && end_stream) {
                return self.stream_error(i, ErrorCode::PROTOCOL_ERROR, out);
            }
            if head.status < 200 {
                return None;
            }
            s.status = head.status;
            s.content_length = head.content_length;
        } else if head.pseudo || head.malformed || !end_stream {
            return self.stream_error(i, ErrorCode::PROTOCOL_ERROR, out);
        }
        if end_stream {
            return self.complete(i, None, out);
        }
        None
    }

    /// The stream ended: its response, with the body from the last DATA frame alone when no
    /// earlier frame carried any.
    fn complete(&mut self, i: usize, last: Option<(usize, usize)>, out: &mut Vec<u8>) -> Option<Ready> {
        let s = &mut self.streams[i];
        let single = s.body.is_empty();
        let len = match last {
            Some((from, to)) if single => to - from,
            Some((from, to)) => {
                s.body.extend_from_slice(&self.buf[from..to]);
                s.body.len()
            }
            None => s.body.len(),
        };
        if s.content_length.is_some_and(|n| n != len as u64) {
            return self.stream_error(i, ErrorCode::PROTOCOL_ERROR, out);
        }
        let (stream, status) = (s.id, s.status);
        let body = match last {
            Some((from, to)) if single => Body::Input(from, to),
            _ => {
                // Keep the assembled body for the event; the slot keeps the old buffer.
                std::mem::swap(&mut self.done_body, &mut s.body);
                Body::Assembled
            }
        };
        self.free(i);
        Some(Ready::Response { stream, status, body })
    }

    fn priority(&mut self, stream: u32, len: usize, out: &mut Vec<u8>) -> Result<Option<Ready>, Http2Error> {
        if stream == 0 {
            return Err(Http2Error::UnexpectedStream { kind: PRIORITY, stream });
        }
        if len == 5 {
            return Ok(None);
        }
        // A stream error (RFC 9113 §6.3).
        match self.slot(stream) {
            Some(i) => Ok(self.stream_error(i, ErrorCode::FRAME_SIZE_ERROR, out)),
            None => {
                put_rst_stream(out, stream, ErrorCode::FRAME_SIZE_ERROR);
                Ok(None)
            }
        }
    }

    fn rst_stream(&mut self, stream: u32, from: usize, to: usize) -> Result<Option<Ready>, Http2Error> {
        if to - from != 4 {
            return Err(Http2Error::FrameSize { kind: RST_STREAM, len: to - from });
        }
        if stream == 0 || self.idle(stream) {
            return Err(Http2Error::UnexpectedStream { kind: RST_STREAM, stream });
        }
        let code = ErrorCode(read_u32(&self.buf[from..to]));
        let Some(i) = self.slot(stream) else { return Ok(None) };
        self.free(i);
        Ok(Some(Ready::Reset { stream, code }))
    }

    fn peer_settings(
        &mut self,
        flags: u8,
        stream: u32,
        from: usize,
        to: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Http2Error> {
        if stream != 0 {
            return Err(Http2Error::UnexpectedStream { kind: SETTINGS, stream });
        }
        if flags & ACK != 0 {
            if to != from {
                return Err(Http2Error::FrameSize { kind: SETTINGS, len: to - from });
            }
            if !self.acked {
                // The server's encoder now works within our table size.
                self.acked = true;
                self.hpack.set_limit(self.settings.header_table_size as usize);
            }
            return Ok(());
        }
        if !(to - from).is_multiple_of(6) {
            return Err(Http2Error::FrameSize { kind: SETTINGS, len: to - from });
        }
        for i in (from..to).step_by(6) {
            let id = u16::from_be_bytes([self.buf[i], self.buf[i + 1]]);
            let value = read_u32(&self.buf[i + 2..i + 6]);
            match id {
                SETTINGS_HEADER_TABLE_SIZE => {
                    // A smaller table than ours: signal it in the next block (RFC 7541 §4.2); our
                    // entries may be gone.
                    let size = value as usize;
                    if size < self.encoder.size {
                        self.encoder = EncoderTable { size, update: Some(size), newest: None };
                    }
                }
                // A server may not enable push (RFC 9113 §6.5.2).
                SETTINGS_ENABLE_PUSH if value != 0 => return Err(Http2Error::Setting { id, value }),
                SETTINGS_MAX_CONCURRENT_STREAMS => self.peer.max_concurrent_streams = value,
                SETTINGS_INITIAL_WINDOW_SIZE => {
                    if i64::from(value) > MAX_WINDOW {
                        return Err(Http2Error::Setting { id, value });
                    }
                    let delta = i64::from(value) - i64::from(self.peer.initial_window_size);
                    for s in self.streams.iter_mut().filter(|s| s.id != 0) {
                        s.send_window += delta;
                        if s.send_window > MAX_WINDOW {
                            return Err(Http2Error::FlowControl);
                        }
                    }
                    self.peer.initial_window_size = value;
                }
                SETTINGS_MAX_FRAME_SIZE => {
                    if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&value) {
                        return Err(Http2Error::Setting { id, value });
                    }
                    self.peer.max_frame_size = value;
                }
                _ => {}
            }
        }
        self.preface(out);
        put_frame_header(out, 0, SETTINGS, ACK, 0);
        Ok(())
    }

    fn ping(&mut self, flags: u8, stream: u32, from: usize, to: usize, out: &mut Vec<u8>) -> Result<(), Http2Error> {
        if stream != 0 {
            return Err(Http2Error::UnexpectedStream { kind: PING, stream });
        }
        if to - from != 8 {
            return Err(Http2Error::FrameSize { kind: PING, len: to - from });
        }
        if flags & ACK == 0 {
            self.preface(out);
            put_frame_header(out, 8, PING, ACK, 0);
            out.extend_from_slice(&self.buf[from..to]);
        }
        Ok(())
    }

    fn peer_goaway(&mut self, stream: u32, from: usize, to: usize) -> Result<Ready, Http2Error> {
        if stream != 0 {
            return Err(Http2Error::UnexpectedStream { kind: GOAWAY, stream });
        }
        if to - from < 8 {
            return Err(Http2Error::FrameSize { kind: GOAWAY, len: to - from });
        }
        let last = read_u32(&self.buf[from..from + 4]) & MAX_STREAM_ID;
        let code = ErrorCode(read_u32(&self.buf[from + 4..from + 8]));
        let last = self.goaway_received().map_or(last, |l| l.0.min(last));
        let sent = matches!(self.phase, Phase::GoingAway { sent: true, .. });
        self.phase = Phase::GoingAway { last_stream: Some(last), sent };
        // Streams above `last` were not and will not be processed: forget them.
        for i in 0..self.streams.len() {
            if self.streams[i].id > last {
                self.free(i);
            }
        }
        Ok(Ready::GoAway { last_stream: last, code })
    }

    fn window_update(
        &mut self,
        stream: u32,
        from: usize,
        to: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<Ready>, Http2Error> {
        if to - from != 4 {
            return Err(Http2Error::FrameSize { kind: WINDOW_UPDATE, len: to - from });
        }
        let increment = i64::from(read_u32(&self.buf[from..to]) & MAX_STREAM_ID);
        if stream == 0 {
            if increment == 0 {
                return Err(Http2Error::ZeroIncrement);
            }
            self.send_window += increment;
            if self.send_window > MAX_WINDOW {
                return Err(Http2Error::FlowControl);
            }
            return Ok(None);
        }
        if self.idle(stream) {
            return Err(Http2Error::UnexpectedStream { kind: WINDOW_UPDATE, stream });
        }
        let Some(i) = self.slot(stream) else { return Ok(None) };
        if increment == 0 {
            return Ok(self.stream_error(i, ErrorCode::PROTOCOL_ERROR, out));
        }
        let s = &mut self.streams[i];
        s.send_window += increment;
        if s.send_window > MAX_WINDOW {
            return Ok(self.stream_error(i, ErrorCode::FLOW_CONTROL_ERROR, out));
        }
        Ok(None)
    }
}

/// Writes `n` in decimal at the end of `digits`; returns how many digits.
fn format_decimal(mut n: usize, digits: &mut [u8; 20]) -> usize {
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return digits.len() - i;
        }
    }
}

#[cfg(test)]
mod tests;
