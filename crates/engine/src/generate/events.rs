//! What a carrier reports besides the bytes it carries ([`Events`]), and why a query's stream
//! gave no answer ([`StreamFailure`]): the typed events `slot::drive` settles the same way for
//! every carrier. Below both the carriers and the QUIC connection that fills them.

/// Why a query's stream gave no answer (a connection's end is reported by reading instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFailure {
    /// The server reset the stream with this code.
    Reset(u64),
    /// The DoH/3 server rejected the request unprocessed (H3_REQUEST_REJECTED): it may go again.
    Rejected,
    /// The DoH/3 server answered with this HTTP status.
    Status(u16),
    /// The answer was not one framed message.
    Malformed,
}

/// What a carrier saw besides the bytes it carries, since the driver last took it
/// ([`Carrier::take_events`]): on a datagram carrier, what the network refused; on a QUIC
/// carrier, the streams that ended without an answer, and the queries that went on a stream of
/// their own or found no stream credit. Empty on TCP and TLS.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Events {
    /// Receives that reported a refusal (an ICMP port unreachable on a connected socket).
    pub refused_reads: u64,
    /// DNS IDs of the queries whose datagram the network refused: they never left.
    pub refused_sends: Vec<u16>,
    /// The first refusal's message.
    pub refusal: Option<String>,
    /// Queries whose stream ended without an answer, by DNS ID.
    pub failed: Vec<(u16, StreamFailure)>,
    /// First sends that went on a stream of their own.
    pub went: u64,
    /// Queries written that found no stream credit and wait in the carrier.
    pub stream_waits: u64,
}
