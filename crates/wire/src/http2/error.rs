//! HTTP/2 error codes (RFC 9113 §7) and the client's errors: connection errors it reports once,
//! and refusals of a request that leave the connection as it was.

use std::fmt;

use super::frame::SETTINGS_INITIAL_WINDOW_SIZE;

/// An HTTP/2 error code (RFC 9113 §7), as sent in RST_STREAM and GOAWAY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    pub const NO_ERROR: Self = Self(0x0);
    pub const PROTOCOL_ERROR: Self = Self(0x1);
    pub const INTERNAL_ERROR: Self = Self(0x2);
    pub const FLOW_CONTROL_ERROR: Self = Self(0x3);
    pub const SETTINGS_TIMEOUT: Self = Self(0x4);
    pub const STREAM_CLOSED: Self = Self(0x5);
    pub const FRAME_SIZE_ERROR: Self = Self(0x6);
    pub const REFUSED_STREAM: Self = Self(0x7);
    pub const CANCEL: Self = Self(0x8);
    pub const COMPRESSION_ERROR: Self = Self(0x9);
    pub const CONNECT_ERROR: Self = Self(0xa);
    pub const ENHANCE_YOUR_CALM: Self = Self(0xb);
    pub const INADEQUATE_SECURITY: Self = Self(0xc);
    pub const HTTP_1_1_REQUIRED: Self = Self(0xd);

    /// The RFC's name of the code, if it has one.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        NAMES.get(self.0 as usize).copied()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "{:#x}", self.0),
        }
    }
}

/// Why a frame could not be accepted, or why a request could not be sent.
///
/// The first group are connection errors: [`Client::next_event`] reports them once as
/// [`Event::ConnectionError`], after appending a GOAWAY with [`Http2Error::code`]; the
/// connection is then unusable. The second group are refusals of [`Client::send`] that leave
/// the connection as it was.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Http2Error {
    /// The server's first frame is not SETTINGS: the peer does not speak HTTP/2 (check that it
    /// negotiated ALPN "h2" and that the port is the DoH one).
    #[error("the server did not start with SETTINGS (first frame type {0:#x})")]
    Preface(u8),
    /// A frame larger than our SETTINGS_MAX_FRAME_SIZE, or whose length does not fit its type.
    #[error("frame type {kind:#x} with a bad length {len}")]
    FrameSize { kind: u8, len: usize },
    /// A frame on a stream where its type may not be: a connection frame on a stream, a stream
    /// frame on stream 0, or a frame on a stream the client never opened.
    #[error("frame type {kind:#x} not allowed on stream {stream}")]
    UnexpectedStream { kind: u8, stream: u32 },
    /// Padding as long as the frame or longer.
    #[error("frame type {kind:#x} padded beyond its length")]
    Padding { kind: u8 },
    /// PUSH_PROMISE, although our SETTINGS disabled server push.
    #[error("PUSH_PROMISE although push is disabled")]
    PushPromise,
    /// A header block broken up: CONTINUATION without HEADERS before it, or another frame in
    /// the middle of a header block.
    #[error("header block interrupted by frame type {kind:#x} on stream {stream}")]
    Continuation { kind: u8, stream: u32 },
    /// A SETTINGS value out of range (including ENABLE_PUSH, which a server may not set).
    #[error("setting {id:#x} has an invalid value {value}")]
    Setting { id: u16, value: u32 },
    /// The server sent more DATA than the connection window allowed, or a WINDOW_UPDATE or
    /// SETTINGS_INITIAL_WINDOW_SIZE took a window past 2^31 - 1.
    #[error("flow-control window exceeded")]
    FlowControl,
    /// A connection WINDOW_UPDATE with an increment of 0.
    #[error("WINDOW_UPDATE with a zero increment")]
    ZeroIncrement,
    /// HPACK: an index in neither the static nor the dynamic table.
    #[error("HPACK index {0} out of range")]
    HpackIndex(u64),
    /// HPACK: a header block that ends inside a field.
    #[error("HPACK header block truncated")]
    HpackTruncated,
    /// HPACK: an integer above 2^32 - 1.
    #[error("HPACK integer overflow")]
    HpackInteger,
    /// HPACK: a Huffman string with EOS in it, or padding that is not up to seven 1 bits.
    #[error("invalid HPACK Huffman string")]
    HpackHuffman,
    /// HPACK: a dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE, or after a
    /// field.
    #[error("HPACK dynamic table size update to {size} (at most {max}, at the start of a block)")]
    HpackSizeUpdate { size: u64, max: usize },
    /// A header block longer than [`Settings::max_header_block`].
    #[error("header block of {0} octets or more")]
    HeaderBlockTooLarge(usize),

    /// No new stream may open: the server's SETTINGS_MAX_CONCURRENT_STREAMS are in use. Send
    /// again once a response has come ([`Client::can_send`]).
    #[error("the server's concurrent stream limit is reached")]
    StreamLimit,
    /// The body does not fit the server's flow-control windows now; send again after its next
    /// WINDOW_UPDATE ([`Client::send_window`]).
    #[error("a body of {needed} octets does not fit the send window of {available}")]
    FlowControlBlocked { needed: usize, available: usize },
    /// A GET request with a body.
    #[error("a GET request has no body")]
    BodyNotAllowed,
    /// A GOAWAY was received or sent: no new stream may open on this connection.
    #[error("the connection is going away")]
    GoingAway,
    /// Every stream identifier is used: open a new connection.
    #[error("stream identifiers exhausted")]
    StreamIdsExhausted,
    /// The connection failed earlier with a connection error.
    #[error("the connection failed")]
    Closed,
}

impl Http2Error {
    /// The code to send in GOAWAY for this error.
    pub fn code(&self) -> ErrorCode {
        use Http2Error as E;
        match self {
            E::FrameSize { .. } => ErrorCode::FRAME_SIZE_ERROR,
            E::Setting { id: SETTINGS_INITIAL_WINDOW_SIZE, .. } | E::FlowControl => ErrorCode::FLOW_CONTROL_ERROR,
            E::HpackIndex(_) | E::HpackTruncated | E::HpackInteger | E::HpackHuffman | E::HpackSizeUpdate { .. } => {
                ErrorCode::COMPRESSION_ERROR
            }
            E::HeaderBlockTooLarge(_) => ErrorCode::ENHANCE_YOUR_CALM,
            E::StreamLimit
            | E::FlowControlBlocked { .. }
            | E::BodyNotAllowed
            | E::GoingAway
            | E::StreamIdsExhausted
            | E::Closed => ErrorCode::NO_ERROR,
            _ => ErrorCode::PROTOCOL_ERROR,
        }
    }
}
