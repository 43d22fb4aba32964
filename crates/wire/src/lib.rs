//! DNS messages, stream framing and the generator's HTTP/2 client for dnscost. No I/O, no clock.
//!
//! The generator never builds a message on the hot path: every query is encoded once as a
//! [`QueryTemplate`] and sent with only its ID patched. Responses are checked against the
//! template's question with one comparison. The responder side parses a question
//! ([`parse_query`]) and builds an answer ([`ResponseBuilder`]). [`http2`] is the generator's
//! sans-I/O HTTP/2 client for DoH: bytes in, events and bytes out (the responder serves HTTP/2
//! with the `h2` crate). [`proxy_v2_header`] is the PROXY protocol's header a client behind a
//! proxy arrives with.

#![forbid(unsafe_code)]

mod frame;
pub mod http2;
mod message;
mod name;
mod proxy;
pub mod spare;

pub use frame::{doq_message, FrameDecoder, MAX_FRAME};
pub use message::{
    parse_query, parse_response, ClientSubnet, Cookie, Edns, Framing, QueryOptions, QueryTemplate, QueryView, Rcode,
    ResponseBuilder, ResponseView, CLASS_IN, HEADER_LEN,
};
pub use name::{encode_name, name_to_string, synthetic_index, synthetic_name, type_from_str, type_to_str};
pub use proxy::{proxy_v2_header, PROXY_V2_SIGNATURE};

/// Why a message or a frame could not be used.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The message is shorter than its header or than what its counts announce.
    #[error("message truncated")]
    Truncated,
    /// A query arrived where a response was expected, or the reverse.
    #[error("wrong QR bit")]
    WrongDirection,
    /// A name is longer than 255 octets, has an empty or over-long label, or uses compression
    /// where it is not allowed.
    #[error("bad name: {0}")]
    BadName(&'static str),
    /// The question count is not one.
    #[error("question count {0} is not 1")]
    QuestionCount(u16),
    /// A record type mnemonic that is neither known nor of the form TYPEnnn.
    #[error("unknown record type {0:?}")]
    UnknownType(String),
    /// A stream frame announced a zero length.
    #[error("zero-length frame")]
    EmptyFrame,
}

/// Encodes a message for a DoH GET request (RFC 8484 §4.1: base64url without padding).
pub fn base64url(msg: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(msg)
}

/// Decodes the `dns` parameter of a DoH GET request.
pub fn base64url_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok()
}
