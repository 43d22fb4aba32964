//! How a QUIC connection reads in the records, the same for the generator and the responder:
//! its handshake kind (from the TLS messages `dnscost_transport::quic` observed) and how it
//! ended (from quinn's connection error).

use dnscost_stats::{Close, Handshake};
use dnscost_transport::quic::{is_tls_alert, HandshakeFacts, DOQ_NO_ERROR, H3_NO_ERROR};
use quinn::ConnectionError;

/// A QUIC connection's handshake kind from its facts: a session the server did not take is a
/// full handshake (whatever the client offered), one it took is resumed, with its 0-RTT data
/// accepted or rejected when the client sent some.
pub fn handshake_kind(f: HandshakeFacts) -> Handshake {
    match f {
        f if !f.psk_accepted => Handshake::Full,
        f if f.early_offered && f.early_accepted => Handshake::ZeroRttAccepted,
        f if f.early_offered => Handshake::ZeroRttRejected,
        _ => Handshake::Resumed,
    }
}

/// How a connection ended, as the side that did not end it sees it: the peer's
/// CONNECTION_CLOSE without error is orderly (`connection_close`), one with a TLS alert is
/// `tls_alert`, the idle timeout `idle_expired`, a stateless reset `rst`, anything else `error`.
pub fn close_kind(e: &ConnectionError) -> Close {
    match e {
        ConnectionError::ApplicationClosed(c) if c.error_code == DOQ_NO_ERROR || c.error_code == H3_NO_ERROR => {
            Close::ConnectionClose
        }
        ConnectionError::ConnectionClosed(c) if c.error_code == quinn::TransportErrorCode::NO_ERROR => {
            Close::ConnectionClose
        }
        ConnectionError::TimedOut => Close::IdleExpired,
        ConnectionError::Reset => Close::Rst,
        ConnectionError::ConnectionClosed(c) if is_tls_alert(c.error_code) => Close::TlsAlert,
        ConnectionError::TransportError(t) if is_tls_alert(t.code) => Close::TlsAlert,
        _ => Close::Error,
    }
}
