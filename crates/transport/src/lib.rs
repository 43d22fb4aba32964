//! Sockets, TLS and QUIC for dnscost, for both the generator and the responder.
//!
//! Modules are named by carrier: [`socket`] (UDP and TCP sockets: source binding, linger,
//! TCP_INFO), [`tls`] (rustls configurations with the version and key-exchange group pinned,
//! resumption on or off, key logging, certificates), [`tls_client`] (the generator's TLS
//! client stream, holding no buffer while idle), [`quic`] (quinn configurations on those, and
//! the kind of each QUIC handshake). The generator's HTTP/2 client, which does no I/O, is
//! `dnscost_wire::http2`.

#![deny(unsafe_code)]

pub mod quic;
/// The only module with unsafe code: socket options and TCP_INFO through libc.
#[allow(unsafe_code)]
pub mod socket;
pub mod tls;
pub mod tls_client;

/// Why a transport could not be set up.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// A certificate, key or CA file could not be read or used.
    #[error("{path}: {reason}")]
    Pem { path: String, reason: String },
    /// rustls refused the configuration (for example a version and group that do not fit).
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// Generating a certificate failed.
    #[error("certificate generation: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
