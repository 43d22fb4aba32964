//! QUIC for DoQ: quinn client and server configurations built on the rustls configurations of
//! [`crate::tls`] (the same version, group, provider, verifier and ticket store as DoT and DoH,
//! so that crypto costs compare), and the kind of each TLS handshake, read off its messages as
//! they pass: quinn does not say whether a session was resumed or its 0-RTT data accepted.
//!
//! [`observe_client`] and [`observe_server`] wrap quinn's rustls session; the connection's
//! `handshake_data()` is then a [`HandshakeFacts`] (downcast it) once the handshake is done.

use crate::tls::{AsClient, Client, NO_CLIENT};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::crypto::{self, ExportKeyingMaterialError, HeaderKey, KeyPair, Keys, PacketKey, UnsupportedVersion};
use quinn::{ConnectionId, Side, TransportConfig, VarInt};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{ConnectError, TransportError};
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

/// The application protocol of DNS over QUIC (RFC 9250 §4.1.1).
pub const DOQ_ALPN: &[u8] = b"doq";
/// DOQ_NO_ERROR: a graceful close (RFC 9250 §4.3).
pub const DOQ_NO_ERROR: VarInt = VarInt::from_u32(0);
/// DOQ_PROTOCOL_ERROR (RFC 9250 §4.3): a stream that does not carry one well-framed message.
pub const DOQ_PROTOCOL_ERROR: VarInt = VarInt::from_u32(2);
/// H3_NO_ERROR: a graceful close of an HTTP/3 connection (RFC 9114 §8.1).
pub const H3_NO_ERROR: VarInt = VarInt::from_u32(0x100);
/// The largest DoQ message on a stream: a two-octet length and 65 535 octets.
pub const MAX_DOQ_MESSAGE: usize = 2 + 65_535;

/// Whether a QUIC error code is a TLS alert (CRYPTO_ERROR, 0x0100 to 0x01ff: RFC 9000 §20.1).
pub fn is_tls_alert(code: quinn::TransportErrorCode) -> bool {
    (0x100..=0x1ff).contains(&u64::from(code))
}

/// What a TLS 1.3 handshake did, from its messages: whether the client offered a session
/// (pre_shared_key) and early data, whether the server took the session (its ServerHello
/// carries pre_shared_key) and the early data (its EncryptedExtensions carry early_data), and
/// whether it sent a certificate.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeFacts {
    pub psk_offered: bool,
    pub early_offered: bool,
    pub psk_accepted: bool,
    pub early_accepted: bool,
    pub certificate: bool,
}

impl HandshakeFacts {
    /// Reads the facts of a connection whose handshake is done (`None` before, or for a
    /// connection not made with an observing configuration).
    pub fn of(conn: &quinn::Connection) -> Option<HandshakeFacts> {
        conn.handshake_data()?.downcast::<HandshakeFacts>().ok().map(|f| *f)
    }
}

const CLIENT_HELLO: u8 = 1;
const SERVER_HELLO: u8 = 2;
const ENCRYPTED_EXTENSIONS: u8 = 8;
const CERTIFICATE: u8 = 11;
const EXT_PRE_SHARED_KEY: u16 = 41;
const EXT_EARLY_DATA: u16 = 42;
/// Longer hello messages are not kept (a certificate message is skipped whatever its length).
const MAX_KEPT: usize = 64 * 1024;

/// One direction's handshake messages (type, 24-bit length, body), fed in pieces as they
/// arrive; the bodies of the hellos and of EncryptedExtensions are kept until whole, others
/// skipped.
#[derive(Debug, Default)]
struct Flight {
    buf: Vec<u8>,
    skip: usize,
}

impl Flight {
    fn feed(&mut self, mut data: &[u8], facts: &mut HandshakeFacts) {
        loop {
            if self.skip > 0 {
                let n = self.skip.min(data.len());
                self.skip -= n;
                data = &data[n..];
                if self.skip > 0 {
                    return;
                }
            }
            while self.buf.len() < 4 && !data.is_empty() {
                self.buf.push(data[0]);
                data = &data[1..];
            }
            if self.buf.len() < 4 {
                return;
            }
            let kind = self.buf[0];
            let len = u32::from_be_bytes([0, self.buf[1], self.buf[2], self.buf[3]]) as usize;
            if kind == CERTIFICATE {
                facts.certificate = true;
            }
            if !matches!(kind, CLIENT_HELLO | SERVER_HELLO | ENCRYPTED_EXTENSIONS) || len > MAX_KEPT {
                self.buf.clear();
                self.skip = len;
                continue;
            }
            let n = (4 + len - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.buf.len() < 4 + len {
                return;
            }
            let exts = extensions(kind, &self.buf[4..]).unwrap_or_default();
            let has = |t: u16| exts.contains(&t);
            match kind {
                CLIENT_HELLO => {
                    facts.psk_offered = has(EXT_PRE_SHARED_KEY);
                    facts.early_offered = has(EXT_EARLY_DATA);
                }
                SERVER_HELLO => facts.psk_accepted = has(EXT_PRE_SHARED_KEY),
                _ => facts.early_accepted = has(EXT_EARLY_DATA),
            }
            self.buf.clear();
        }
    }
}

/// The extension types of a hello or of EncryptedExtensions (`None` if malformed).
fn extensions(kind: u8, body: &[u8]) -> Option<Vec<u16>> {
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| -> Option<usize> {
        let start = *at;
        *at = at.checked_add(n).filter(|&e| e <= body.len())?;
        Some(start)
    };
    let u8_at = |i: usize| body.get(i).copied().map(usize::from);
    let u16_at = |i: usize| Some(usize::from(u16::from_be_bytes([*body.get(i)?, *body.get(i + 1)?])));
    match kind {
        CLIENT_HELLO | SERVER_HELLO => {
            take(&mut at, 2 + 32)?; // legacy version, random
            let sid = u8_at(at)?;
            take(&mut at, 1 + sid)?;
            if kind == CLIENT_HELLO {
                let suites = u16_at(at)?;
                take(&mut at, 2 + suites)?;
                let comp = u8_at(at)?;
                take(&mut at, 1 + comp)?;
            } else {
                take(&mut at, 2 + 1)?; // cipher suite, compression
            }
        }
        _ => {}
    }
    let total = u16_at(at)?;
    take(&mut at, 2)?;
    let end = at.checked_add(total).filter(|&e| e <= body.len())?;
    let mut types = Vec::new();
    while at + 4 <= end {
        types.push(u16_at(at)? as u16);
        let len = u16_at(at + 2)?;
        at += 4 + len;
    }
    Some(types)
}

/// quinn's rustls session with its handshake messages read as they pass, run for its client
/// (whose tickets the server's NewSessionTicket goes to: [`AsClient`]; quinn reads it in the
/// connection's driver, another task than the one that connected).
struct Observed {
    inner: Box<dyn crypto::Session>,
    side: Side,
    tickets_of: Client,
    /// What the client sent, what the server sent.
    client: Flight,
    server: Flight,
    facts: HandshakeFacts,
}

impl Observed {
    fn boxed(inner: Box<dyn crypto::Session>, side: Side, tickets_of: Client) -> Box<dyn crypto::Session> {
        Box::new(Observed {
            inner,
            side,
            tickets_of,
            client: Flight::default(),
            server: Flight::default(),
            facts: HandshakeFacts::default(),
        })
    }
}

impl crypto::Session for Observed {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        self.inner.initial_keys(dst_cid, side)
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        self.inner.handshake_data()?;
        Some(Box::new(self.facts))
    }

    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }

    fn early_crypto(&self) -> Option<(Box<dyn HeaderKey>, Box<dyn PacketKey>)> {
        self.inner.early_crypto()
    }

    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }

    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        match self.side {
            Side::Client => self.server.feed(buf, &mut self.facts),
            Side::Server => self.client.feed(buf, &mut self.facts),
        }
        let _as = AsClient::enter(self.tickets_of);
        self.inner.read_handshake(buf)
    }

    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        let from = buf.len();
        let keys = {
            let _as = AsClient::enter(self.tickets_of);
            self.inner.write_handshake(buf)
        };
        match self.side {
            Side::Client => self.client.feed(&buf[from..], &mut self.facts),
            Side::Server => self.server.feed(&buf[from..], &mut self.facts),
        }
        keys
    }

    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        self.inner.next_1rtt_keys()
    }

    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }

    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

struct ObservedClient(Arc<QuicClientConfig>);

impl crypto::ClientConfig for ObservedClient {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn crypto::Session>, ConnectError> {
        // Made in the connecting task, as the client it connects for (the ticket it offers).
        let client = AsClient::current();
        Ok(Observed::boxed(self.0.clone().start_session(version, server_name, params)?, Side::Client, client))
    }
}

struct ObservedServer(Arc<QuicServerConfig>);

impl crypto::ServerConfig for ObservedServer {
    fn initial_keys(&self, version: u32, dst_cid: &ConnectionId) -> Result<Keys, UnsupportedVersion> {
        self.0.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.0.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(self: Arc<Self>, version: u32, params: &TransportParameters) -> Box<dyn crypto::Session> {
        Observed::boxed(self.0.clone().start_session(version, params), Side::Server, NO_CLIENT)
    }
}

fn quic_error(e: impl std::fmt::Display) -> crate::TransportError {
    crate::TransportError::Tls(rustls::Error::General(format!("QUIC: {e}")))
}

/// A quinn client configuration on `tls` (TLS 1.3; with its ALPN set to `doq` or `h3`), whose
/// connections' handshake data is a [`HandshakeFacts`]. The client opens no streams to the
/// server's initiative, sends no path MTU probes, and leaves idle expiry to the server (its own
/// idle close is the engine's policy).
pub fn client_config(tls: Arc<rustls::ClientConfig>) -> Result<quinn::ClientConfig, crate::TransportError> {
    // quinn takes a configuration without TLS 1.3 and panics at the first connection: a
    // connection made here, never used, says whether one can start.
    let name = rustls::pki_types::ServerName::try_from("quic.invalid").expect("a valid name");
    if rustls::quic::ClientConnection::new(tls.clone(), rustls::quic::Version::V1, name, Vec::new()).is_err() {
        return Err(quic_error("QUIC requires TLS 1.3 (RFC 9001 §4.2)"));
    }
    let uni = uni_streams(&tls.alpn_protocols);
    let quic = QuicClientConfig::try_from(tls).map_err(quic_error)?;
    let mut config = quinn::ClientConfig::new(Arc::new(ObservedClient(Arc::new(quic))));
    let mut transport = TransportConfig::default();
    transport.max_concurrent_bidi_streams(VarInt::from_u32(0));
    transport.max_concurrent_uni_streams(uni);
    transport.max_idle_timeout(None);
    // DNS messages are small: no path MTU probes (they would be most of a short connection's
    // octets).
    transport.mtu_discovery_config(None);
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// The unidirectional streams a peer may open: none for DoQ, HTTP/3's control stream and the
/// two QPACK streams (and a spare: RFC 9114 §6.2 lets peers open other kinds, to be ignored).
fn uni_streams(alpn: &[Vec<u8>]) -> VarInt {
    VarInt::from_u32(if alpn.iter().any(|a| a == b"h3") { 4 } else { 0 })
}

/// A client endpoint (one UDP socket, its own port) bound to `source` or to any address of
/// `target`'s family. Datagrams are at most 1 472 octets (Ethernet's), which also bounds the
/// endpoint's receive buffers.
pub fn client_endpoint(
    target: std::net::SocketAddr,
    source: Option<std::net::IpAddr>,
) -> std::io::Result<quinn::Endpoint> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    let ip = source.unwrap_or(match target {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    });
    let socket = std::net::UdpSocket::bind(SocketAddr::new(ip, 0))?;
    let mut config = quinn::EndpointConfig::default();
    config.max_udp_payload_size(1472).map_err(std::io::Error::other)?;
    quinn::Endpoint::new(config, None, socket, Arc::new(quinn::TokioRuntime))
}

/// A quinn server configuration on `tls` (its early data size set for QUIC), allowing
/// `streams` concurrent bidirectional streams per connection and closing connections idle for
/// `idle` (`None`: never), whose connections' handshake data is a [`HandshakeFacts`].
pub fn server_config(
    mut tls: rustls::ServerConfig,
    streams: u32,
    idle: Option<Duration>,
) -> Result<quinn::ServerConfig, crate::TransportError> {
    tls.max_early_data_size = u32::MAX;
    let uni = uni_streams(&tls.alpn_protocols);
    let quic = QuicServerConfig::try_from(tls).map_err(quic_error)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(ObservedServer(Arc::new(quic))));
    let mut transport = TransportConfig::default();
    transport.max_concurrent_bidi_streams(VarInt::from_u32(streams));
    transport.max_concurrent_uni_streams(uni);
    let idle = match idle {
        Some(d) => Some(quinn::IdleTimeout::try_from(d).map_err(quic_error)?),
        None => None,
    };
    transport.max_idle_timeout(idle);
    transport.mtu_discovery_config(None);
    config.transport_config(Arc::new(transport));
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        m.extend_from_slice(body);
        m
    }

    fn exts(types: &[u16]) -> Vec<u8> {
        let mut list = Vec::new();
        for &t in types {
            list.extend_from_slice(&t.to_be_bytes());
            list.extend_from_slice(&[0, 1, 0xaa]);
        }
        let mut v = (list.len() as u16).to_be_bytes().to_vec();
        v.extend(list);
        v
    }

    fn hello(kind: u8, types: &[u16]) -> Vec<u8> {
        let mut b = vec![3, 3];
        b.extend([7u8; 32]);
        b.extend([2, 9, 9]); // session id
        if kind == CLIENT_HELLO {
            b.extend([0, 4, 0x13, 1, 0x13, 2, 1, 0]);
        } else {
            b.extend([0x13, 1, 0]);
        }
        b.extend(exts(types));
        message(kind, &b)
    }

    /// Feeds `data` one octet at a time (messages split anywhere must be read alike).
    fn feed_bytewise(data: &[u8]) -> HandshakeFacts {
        let (mut f, mut facts) = (Flight::default(), HandshakeFacts::default());
        for b in data {
            f.feed(std::slice::from_ref(b), &mut facts);
        }
        facts
    }

    #[test]
    fn a_resumed_handshake_with_early_data_accepted() {
        let client = hello(CLIENT_HELLO, &[10, EXT_EARLY_DATA, 43, EXT_PRE_SHARED_KEY]);
        let mut server = hello(SERVER_HELLO, &[43, EXT_PRE_SHARED_KEY]);
        server.extend(message(ENCRYPTED_EXTENSIONS, &exts(&[16, EXT_EARLY_DATA])));
        server.extend(message(20, &[0; 32]));
        let (c, s) = (feed_bytewise(&client), feed_bytewise(&server));
        assert!(c.psk_offered && c.early_offered);
        assert!(s.psk_accepted && s.early_accepted && !s.certificate);
    }

    #[test]
    fn a_full_handshake_whole_in_one_piece() {
        let mut server = hello(SERVER_HELLO, &[43, 51]);
        server.extend(message(ENCRYPTED_EXTENSIONS, &exts(&[16])));
        server.extend(message(CERTIFICATE, &[1; 900]));
        server.extend(message(15, &[2; 72]));
        server.extend(message(20, &[0; 32]));
        let mut facts = HandshakeFacts::default();
        Flight::default().feed(&server, &mut facts);
        assert_eq!(
            facts,
            HandshakeFacts { certificate: true, ..Default::default() },
            "no session taken, no early data, a certificate"
        );
    }

    #[test]
    fn tls_alerts_are_the_crypto_error_range() {
        use quinn::TransportErrorCode as Code;
        assert!(is_tls_alert(Code::crypto(42)) && is_tls_alert(Code::crypto(0)) && is_tls_alert(Code::crypto(255)));
        assert!(!is_tls_alert(Code::NO_ERROR) && !is_tls_alert(Code::PROTOCOL_VIOLATION));
    }

    #[test]
    fn garbage_is_not_read_as_extensions() {
        assert_eq!(extensions(SERVER_HELLO, &[3, 3, 1]), None);
        assert_eq!(extensions(ENCRYPTED_EXTENSIONS, &[0, 9, 0, 42]), None);
        let mut facts = HandshakeFacts::default();
        Flight::default().feed(&message(SERVER_HELLO, &[0xff; 40]), &mut facts);
        assert_eq!(facts, HandshakeFacts::default());
    }
}

#[cfg(test)]
mod version_tests {
    use crate::tls::{client_config as tls_client, ClientOptions, Group, Trust, Version};

    /// quinn takes a TLS 1.2 configuration and panics at the first connection; refused here.
    #[test]
    fn a_tls_1_2_client_configuration_is_refused() {
        let options = |version| ClientOptions {
            version,
            group: Group::X25519,
            trust: Trust::Insecure,
            keylog: None,
            alpn: vec![b"doq".to_vec()],
        };
        let e = super::client_config(tls_client(&options(Version::Tls12), false, 0).unwrap()).unwrap_err();
        assert!(e.to_string().contains("QUIC requires TLS 1.3"), "{e}");
        assert!(super::client_config(tls_client(&options(Version::Tls13), false, 0).unwrap()).is_ok());
    }
}
