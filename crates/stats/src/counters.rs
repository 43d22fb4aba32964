//! What one thread counts during one interval.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a query or a connection failed. Mapped once from I/O, TLS and HTTP/2 errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The target refused the TCP connection (or answered ICMP port unreachable for UDP).
    Refused,
    /// TCP or TLS set-up took longer than the query timeout.
    ConnectTimeout,
    /// Another error while connecting (no route, address in use, ...).
    Connect,
    /// The TLS handshake failed: certificate not trusted, alert, version or group refused.
    Tls,
    /// The connection broke with queries outstanding (RST or FIN from the target, I/O error).
    ConnectionLost,
    /// A response that could not be parsed or did not match its query.
    Malformed,
    /// The DoH server answered with an HTTP status other than 200.
    HttpStatus,
    /// The DoH server reset the stream or sent an HTTP/2 protocol error.
    Http2,
    /// The query could not be sent before its timeout (no connection, or the window was full).
    Unsent,
    /// A UDP answer with the TC bit (the client does not retry over TCP).
    Truncated,
    /// The DoQ server reset the query's stream.
    StreamReset,
    /// The server refused the query without processing it (above the last stream of its
    /// GOAWAY, REFUSED_STREAM, H3_REQUEST_REJECTED, or a close in order while it was
    /// outstanding), and it could not go again before its timeout or the end of sending.
    Rejected,
    /// The engine had no file descriptor left for the socket (EMFILE, ENFILE): its open-files
    /// limit (RLIMIT_NOFILE) is below what its connections need.
    OpenFiles,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 13] = [
        ErrorKind::Refused,
        ErrorKind::ConnectTimeout,
        ErrorKind::Connect,
        ErrorKind::Tls,
        ErrorKind::ConnectionLost,
        ErrorKind::Malformed,
        ErrorKind::HttpStatus,
        ErrorKind::Http2,
        ErrorKind::Unsent,
        ErrorKind::Truncated,
        ErrorKind::StreamReset,
        ErrorKind::Rejected,
        ErrorKind::OpenFiles,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Connect => "connect",
            ErrorKind::Tls => "tls",
            ErrorKind::ConnectionLost => "connection_lost",
            ErrorKind::Malformed => "malformed",
            ErrorKind::HttpStatus => "http_status",
            ErrorKind::Http2 => "http2",
            ErrorKind::Unsent => "unsent",
            ErrorKind::Truncated => "truncated",
            ErrorKind::StreamReset => "stream_reset",
            ErrorKind::Rejected => "rejected",
            ErrorKind::OpenFiles => "open_files",
        }
    }
}

/// What set-up a connection had: none (plain TCP), a full TLS handshake, or a resumed one
/// (what happened, not what was asked); over QUIC a resumed one whose client sent early data
/// says whether the server took it. Written as `none`, `full`, `resumed`,
/// `zero_rtt_accepted` or `zero_rtt_rejected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Handshake {
    None,
    Full,
    Resumed,
    /// Resumed, and the server accepted the client's 0-RTT data.
    ZeroRttAccepted,
    /// Resumed, but the server refused the client's 0-RTT data (sent again after the handshake).
    ZeroRttRejected,
}

impl Counters {
    /// Counts an established connection's handshake.
    pub fn handshake(&mut self, h: Handshake) {
        match h {
            Handshake::None => {}
            Handshake::Full => self.handshakes_full += 1,
            Handshake::Resumed => self.handshakes_resumed += 1,
            Handshake::ZeroRttAccepted => {
                self.handshakes_resumed += 1;
                self.handshakes_zero_rtt_accepted += 1;
            }
            Handshake::ZeroRttRejected => {
                self.handshakes_resumed += 1;
                self.handshakes_zero_rtt_rejected += 1;
            }
        }
    }
}

impl Handshake {
    pub fn as_str(self) -> &'static str {
        match self {
            Handshake::None => "none",
            Handshake::Full => "full",
            Handshake::Resumed => "resumed",
            Handshake::ZeroRttAccepted => "zero_rtt_accepted",
            Handshake::ZeroRttRejected => "zero_rtt_rejected",
        }
    }

    /// Whether the TLS session was resumed (with or without 0-RTT).
    pub fn is_resumed(self) -> bool {
        matches!(self, Handshake::Resumed | Handshake::ZeroRttAccepted | Handshake::ZeroRttRejected)
    }
}

/// Which side ended a connection (or wrote a connections log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Client,
    Server,
}

/// How a connection ended, named from the side that ended it: the client's reasons (lifetime,
/// idle, end, error, exhausted), what a peer did (fin, rst, close_notify, tls_alert, goaway), and
/// the responder's own policies (max_queries, max_age; idle and end too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Close {
    /// The client closed: lifetime (time or queries) used up.
    Lifetime,
    /// The client closed: idle timeout.
    Idle,
    /// The client closed: end of the run.
    End,
    /// The client gave up on the connection after an error.
    Error,
    /// The client closed: the connection used up its HTTP/2 stream identifiers.
    Exhausted,
    /// The server sent FIN (without a TLS close_notify first).
    Fin,
    /// The server reset the connection.
    Rst,
    /// The server sent a TLS close_notify.
    CloseNotify,
    /// The server sent a fatal TLS alert.
    TlsAlert,
    /// The server sent an HTTP/2 GOAWAY.
    Goaway,
    /// The responder closed: its per-connection query limit was reached.
    MaxQueries,
    /// The responder closed: its connection age limit was reached.
    MaxAge,
    /// The server sent a QUIC CONNECTION_CLOSE.
    ConnectionClose,
    /// The QUIC idle timeout ended the connection (nothing was said; the smaller of the two
    /// sides' timeouts applies).
    IdleExpired,
}

impl Close {
    pub const ALL: [Close; 14] = [
        Close::Lifetime,
        Close::Idle,
        Close::End,
        Close::Error,
        Close::Exhausted,
        Close::Fin,
        Close::Rst,
        Close::CloseNotify,
        Close::TlsAlert,
        Close::Goaway,
        Close::MaxQueries,
        Close::MaxAge,
        Close::ConnectionClose,
        Close::IdleExpired,
    ];
    pub const COUNT: usize = Self::ALL.len();

    /// Who ends a connection this way, seen from the client (the generator's counters).
    pub fn side(self) -> Side {
        match self {
            Close::Lifetime | Close::Idle | Close::End | Close::Error | Close::Exhausted => Side::Client,
            _ => Side::Server,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Close::Lifetime => "lifetime",
            Close::Idle => "idle",
            Close::End => "end",
            Close::Error => "error",
            Close::Exhausted => "exhausted",
            Close::Fin => "fin",
            Close::Rst => "rst",
            Close::CloseNotify => "close_notify",
            Close::TlsAlert => "tls_alert",
            Close::Goaway => "goaway",
            Close::MaxQueries => "max_queries",
            Close::MaxAge => "max_age",
            Close::ConnectionClose => "connection_close",
            Close::IdleExpired => "idle_expired",
        }
    }
}

/// A latency histogram in microseconds, 1 µs to 10 minutes, 3 significant digits.
pub type Histogram = hdrhistogram::Histogram<u64>;

fn new_histogram() -> Histogram {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("static bounds")
}

/// Counts of one thread over one interval. Gauges (in flight, active) are not here: the
/// engine reads them at the interval's end.
#[derive(Debug, Clone)]
pub struct Counters {
    /// Queries whose intended send time came.
    pub offered: u64,
    /// Queries written to the target.
    pub sent: u64,
    /// Sends of queries after their first (udp with a retransmission policy).
    pub retransmitted: u64,
    pub answered: u64,
    pub rcodes: [u64; 16],
    pub timed_out: u64,
    pub failed: [u64; ErrorKind::COUNT],
    /// Queries still outstanding when the run was stopped a second time.
    pub aborted: u64,
    /// Replies that matched no outstanding query (unknown ID or stream, too short to carry
    /// one, or a late answer). Not a query outcome: the queries they fail to match time out.
    pub unmatched: u64,
    /// Queries that were due and waited for the server to allow a stream (QUIC MAX_STREAMS,
    /// HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS) before they were sent. Not a query outcome.
    pub stream_waits: u64,
    pub conn_opened: u64,
    pub conn_established: u64,
    pub conn_failed: [u64; ErrorKind::COUNT],
    pub conn_closed: [u64; Close::COUNT],
    pub handshakes_full: u64,
    pub handshakes_resumed: u64,
    /// Of the resumed: 0-RTT data sent and accepted, sent and rejected (QUIC).
    pub handshakes_zero_rtt_accepted: u64,
    pub handshakes_zero_rtt_rejected: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Query latency from the intended send time.
    pub latency: Histogram,
    /// Connection set-up time (TCP, then TLS) until the first query may be sent.
    pub setup: Histogram,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            offered: 0,
            sent: 0,
            retransmitted: 0,
            answered: 0,
            rcodes: [0; 16],
            timed_out: 0,
            failed: [0; ErrorKind::COUNT],
            aborted: 0,
            unmatched: 0,
            stream_waits: 0,
            conn_opened: 0,
            conn_established: 0,
            conn_failed: [0; ErrorKind::COUNT],
            conn_closed: [0; Close::COUNT],
            handshakes_full: 0,
            handshakes_resumed: 0,
            handshakes_zero_rtt_accepted: 0,
            handshakes_zero_rtt_rejected: 0,
            bytes_sent: 0,
            bytes_received: 0,
            packets_sent: 0,
            packets_received: 0,
            latency: new_histogram(),
            setup: new_histogram(),
        }
    }
}

impl Counters {
    #[inline]
    pub fn answer(&mut self, rcode: u8, latency_us: u64) {
        self.answered += 1;
        self.rcodes[(rcode & 0x0F) as usize] += 1;
        self.latency.saturating_record(latency_us.max(1));
    }

    #[inline]
    pub fn fail(&mut self, kind: ErrorKind, n: u64) {
        self.failed[kind as usize] += n;
    }

    pub fn conn_fail(&mut self, kind: ErrorKind) {
        self.conn_failed[kind as usize] += 1;
    }

    pub fn closed(&mut self, how: Close) {
        self.conn_closed[how as usize] += 1;
    }

    pub fn failed_total(&self) -> u64 {
        self.failed.iter().sum()
    }

    /// Queries that reached an end: answered, timed out, failed or aborted.
    pub fn resolved(&self) -> u64 {
        self.answered + self.timed_out + self.failed_total() + self.aborted
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Counters) {
        self.offered += other.offered;
        self.sent += other.sent;
        self.retransmitted += other.retransmitted;
        self.answered += other.answered;
        self.timed_out += other.timed_out;
        self.aborted += other.aborted;
        self.unmatched += other.unmatched;
        self.stream_waits += other.stream_waits;
        self.conn_opened += other.conn_opened;
        self.conn_established += other.conn_established;
        self.handshakes_full += other.handshakes_full;
        self.handshakes_resumed += other.handshakes_resumed;
        self.handshakes_zero_rtt_accepted += other.handshakes_zero_rtt_accepted;
        self.handshakes_zero_rtt_rejected += other.handshakes_zero_rtt_rejected;
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.packets_sent += other.packets_sent;
        self.packets_received += other.packets_received;
        for (a, b) in self.rcodes.iter_mut().zip(&other.rcodes) {
            *a += b;
        }
        for (a, b) in self.failed.iter_mut().zip(&other.failed) {
            *a += b;
        }
        for (a, b) in self.conn_failed.iter_mut().zip(&other.conn_failed) {
            *a += b;
        }
        for (a, b) in self.conn_closed.iter_mut().zip(&other.conn_closed) {
            *a += b;
        }
        self.latency.add(&other.latency).expect("same bounds");
        self.setup.add(&other.setup).expect("same bounds");
    }

    /// Returns the counts so far and starts again from zero.
    pub fn take(&mut self) -> Counters {
        std::mem::take(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_everything() {
        let mut a = Counters { offered: 3, sent: 3, ..Default::default() };
        a.answer(0, 100);
        a.answer(3, 200);
        a.fail(ErrorKind::ConnectionLost, 1);
        a.closed(Close::Rst);
        let mut b = Counters { offered: 2, sent: 1, retransmitted: 2, timed_out: 1, ..Default::default() };
        b.fail(ErrorKind::Unsent, 1);
        b.answer(0, 5000);
        let mut total = Counters::default();
        total.merge(&a);
        total.merge(&b);
        assert_eq!(total.offered, 5);
        assert_eq!(total.retransmitted, 2);
        assert_eq!(total.resolved(), 6);
        assert_eq!(total.rcodes[0], 2);
        assert_eq!(total.rcodes[3], 1);
        assert_eq!(total.latency.len(), 3);
        assert_eq!(total.failed_total(), 2);
        assert_eq!(total.conn_closed[Close::Rst as usize], 1);
        assert_eq!(Close::Rst.side(), Side::Server);
        let taken = total.take();
        assert_eq!(taken.offered, 5);
        assert_eq!(total.offered, 0);
        assert_eq!(total.latency.len(), 0);
    }
}
