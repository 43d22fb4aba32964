//! rustls configurations: version and key-exchange group pinned (library defaults change and
//! would distort comparisons), resumption on or off, key logging, and certificates.

use crate::TransportError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue, WebPkiServerVerifier};
use rustls::crypto::{aws_lc_rs, CryptoProvider, SupportedKxGroup};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme, SupportedProtocolVersion,
};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use dnscost_load::{TlsGroup as Group, TlsVersion as Version};

/// The rustls version of a pinned TLS version (the one definition is the engine
/// configuration's, shared by generate and serve).
fn rustls_version(v: Version) -> &'static SupportedProtocolVersion {
    match v {
        Version::Tls12 => &rustls::version::TLS12,
        Version::Tls13 => &rustls::version::TLS13,
    }
}

/// The aws-lc-rs implementation of a pinned key-exchange group.
fn rustls_group(g: Group) -> &'static dyn SupportedKxGroup {
    match g {
        Group::X25519 => aws_lc_rs::kx_group::X25519,
        Group::Secp256r1 => aws_lc_rs::kx_group::SECP256R1,
        Group::Secp384r1 => aws_lc_rs::kx_group::SECP384R1,
        Group::X25519mlkem768 => aws_lc_rs::kx_group::X25519MLKEM768,
    }
}

/// How a client verifies the server.
#[derive(Debug, Clone)]
pub enum Trust {
    /// Certificates chaining to the CAs in this PEM file.
    CaFile(PathBuf),
    /// Any certificate (handshake signatures are still checked, so the CPU cost stays real).
    Insecure,
}

/// Everything a client TLS configuration is made of.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub version: Version,
    pub group: Group,
    pub trust: Trust,
    pub keylog: Option<PathBuf>,
    /// ALPN protocols to offer (`h2` for DoH, `dot` for DoT).
    pub alpn: Vec<Vec<u8>>,
}

/// The client's crypto: one key-exchange group, and AES-128-GCM with SHA-256 preferred (as
/// browsers do) over AES-256-GCM with SHA-384, whose key schedule costs more.
fn provider(group: Group) -> Arc<CryptoProvider> {
    let mut p = aws_lc_rs::default_provider();
    p.kx_groups = vec![rustls_group(group)];
    p.cipher_suites.sort_by_key(|s| s.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    Arc::new(p)
}

/// A client configuration. With `resume`, it keeps session tickets in memory, each client its
/// own (at most `tickets` per client and server, the newest; see [`AsClient`]), and offers
/// them; without, every handshake is full.
pub fn client_config(o: &ClientOptions, resume: bool, tickets: usize) -> Result<Arc<ClientConfig>, TransportError> {
    let builder =
        ClientConfig::builder_with_provider(provider(o.group)).with_protocol_versions(&[rustls_version(o.version)])?;
    let mut config = match &o.trust {
        Trust::CaFile(path) => {
            let mut roots = RootCertStore::empty();
            for cert in read_certs(path)? {
                roots.add(cert).map_err(|e| pem_error(path, e))?;
            }
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider(o.group))
                .build()
                .map_err(|e| pem_error(path, e))?;
            let verifier = CachingVerifier { inner: webpki, verified: Mutex::new(HashSet::new()) };
            builder.dangerous().with_custom_certificate_verifier(Arc::new(verifier)).with_no_client_auth()
        }
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider(o.group))))
            .with_no_client_auth(),
    };
    config.alpn_protocols = o.alpn.clone();
    config.resumption = if resume {
        rustls::client::Resumption::store(Arc::new(TicketStore::new(tickets.max(1))))
    } else {
        rustls::client::Resumption::disabled()
    };
    if let Some(path) = &o.keylog {
        config.key_log = Arc::new(KeyLogTo::open(path)?);
    }
    Ok(Arc::new(config))
}

/// A server configuration that issues TLS 1.3 tickets and keeps a TLS 1.2 session cache.
pub fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    alpn: Vec<Vec<u8>>,
    key_log: Option<Arc<dyn rustls::KeyLog>>,
) -> Result<Arc<ServerConfig>, TransportError> {
    let mut config = server_base(chain, key, &[&rustls::version::TLS13, &rustls::version::TLS12], alpn, key_log)?;
    config.ticketer = aws_lc_rs::Ticketer::new()?;
    Ok(Arc::new(config))
}

/// A server configuration for QUIC: TLS 1.3 only, sessions resumed from the server's cache
/// (rustls accepts 0-RTT data only for those, not for tickets), early data allowed.
pub fn quic_server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    alpn: Vec<Vec<u8>>,
    key_log: Option<Arc<dyn rustls::KeyLog>>,
) -> Result<ServerConfig, TransportError> {
    let mut config = server_base(chain, key, &[&rustls::version::TLS13], alpn, key_log)?;
    config.max_early_data_size = u32::MAX;
    config.send_tls13_tickets = 2;
    Ok(config)
}

fn server_base(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    versions: &[&'static SupportedProtocolVersion],
    alpn: Vec<Vec<u8>>,
    key_log: Option<Arc<dyn rustls::KeyLog>>,
) -> Result<ServerConfig, TransportError> {
    let mut p = aws_lc_rs::default_provider();
    // Serve the classical groups first so that clients are not steered to a hybrid by default.
    p.kx_groups.sort_by_key(|g| g.name() == rustls::NamedGroup::X25519MLKEM768);
    let mut config = ServerConfig::builder_with_provider(Arc::new(p))
        .with_protocol_versions(versions)?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.session_storage = Arc::new(ServerSessions::new(65_536));
    config.alpn_protocols = alpn;
    if let Some(key_log) = key_log {
        config.key_log = key_log;
    }
    Ok(config)
}

/// The server's stored sessions (TLS 1.3 resumption over QUIC, TLS 1.2 session IDs): at most
/// `cap`, the oldest dropped first. rustls's own `ServerSessionMemoryCache` finds a key to take
/// by a linear search of its insertion order: with tens of thousands of sessions stored, that
/// search was a third of `serve`'s CPU at one resumed DoQ connection per query (and made a
/// resumed handshake dearer than a full one). Here a take is a hash lookup; the order keeps
/// taken keys until they reach its front or it is compacted.
#[derive(Debug)]
struct ServerSessions {
    cap: usize,
    /// The sessions by key, and the keys in the order they came.
    inner: Mutex<(SessionMap, VecDeque<Vec<u8>>)>,
}

type SessionMap = HashMap<Vec<u8>, Vec<u8>>;

impl ServerSessions {
    fn new(cap: usize) -> Self {
        ServerSessions { cap, inner: Mutex::new((HashMap::new(), VecDeque::new())) }
    }
}

impl rustls::server::StoresServerSessions for ServerSessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (map, order) = &mut *inner;
        if map.insert(key.clone(), value).is_none() {
            order.push_back(key);
        }
        while map.len() > self.cap {
            match order.pop_front() {
                Some(old) => {
                    map.remove(&old);
                }
                None => break,
            }
        }
        if order.len() > 2 * self.cap {
            order.retain(|k| map.contains_key(k));
        }
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).0.get(key).cloned()
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).0.remove(key)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// The server name to send and check: `sni`, or else the target's IP address (no SNI is sent
/// for an address).
pub fn server_name(sni: Option<&str>, ip: std::net::IpAddr) -> Result<ServerName<'static>, TransportError> {
    match sni {
        Some(name) => ServerName::try_from(name.to_string())
            .map_err(|e| TransportError::Pem { path: "sni".into(), reason: e.to_string() }),
        None => Ok(ServerName::IpAddress(ip.into())),
    }
}

fn pem_error(path: &Path, e: impl std::fmt::Display) -> TransportError {
    TransportError::Pem { path: path.display().to_string(), reason: e.to_string() }
}

/// Certificates from a PEM file (at least one).
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TransportError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e))?;
    if certs.is_empty() {
        return Err(pem_error(path, "no certificate found"));
    }
    Ok(certs)
}

/// The private key from a PEM file.
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TransportError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| pem_error(path, e))
}

/// A CA and a server certificate it signed, for `names` (DNS names or IP addresses).
pub struct GeneratedCert {
    pub ca_pem: String,
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// Generates an ECDSA P-256 CA and a server certificate for `names`.
pub fn generate(names: &[String]) -> Result<GeneratedCert, TransportError> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "dnscost test CA");
    let ca = ca_params.self_signed(&ca_key)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name.push(DnType::CommonName, names.first().cloned().unwrap_or_default());
    let leaf = params.signed_by(&key, &ca, &ca_key)?;
    Ok(GeneratedCert {
        ca_pem: ca.pem(),
        chain: vec![leaf.der().clone(), ca.der().clone()],
        key: PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| pem_error(Path::new("generated key"), e))?,
    })
}

/// A key log appending to the file at `path` (created if missing), for servers.
pub fn key_log_to(path: &Path) -> Result<Arc<dyn rustls::KeyLog>, TransportError> {
    Ok(Arc::new(KeyLogTo::open(path)?))
}

/// NSS key-log lines written to one file (shared by every connection of the process).
#[derive(Debug)]
struct KeyLogTo(Mutex<std::fs::File>);

impl KeyLogTo {
    fn open(path: &Path) -> Result<Self, TransportError> {
        let f = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| pem_error(path, e))?;
        Ok(KeyLogTo(Mutex::new(f)))
    }
}

impl rustls::KeyLog for KeyLogTo {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let line = format!("{label} {} {}\n", hex(client_random), hex(secret));
        if let Ok(mut f) = self.0.lock() {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// Verifies a certificate chain once per (chain, name) and remembers the result, as browsers
/// do; the handshake signature is still checked on every connection. Repeating the chain
/// check would only make the generator, not the target, pay more.
#[derive(Debug)]
struct CachingVerifier {
    inner: Arc<WebPkiServerVerifier>,
    verified: Mutex<HashSet<VerifiedChain>>,
}

/// End-entity certificate, intermediates, server name.
type VerifiedChain = (Vec<u8>, Vec<Vec<u8>>, String);

impl ServerCertVerifier for CachingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let key = (end_entity.to_vec(), intermediates.iter().map(|c| c.to_vec()).collect(), name.to_str().into_owned());
        if self.verified.lock().is_ok_and(|v| v.contains(&key)) {
            return Ok(ServerCertVerified::assertion());
        }
        let ok = self.inner.verify_server_cert(end_entity, intermediates, name, ocsp, now)?;
        if let Ok(mut v) = self.verified.lock() {
            if v.len() < 1024 {
                v.insert(key);
            }
        }
        Ok(ok)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Who rustls works for on this thread now, when it takes or stores a session: a client of
/// the load (the engine's connection slot), or [`NO_CLIENT`].
pub type Client = u64;

/// The client of rustls calls made outside any [`AsClient`]: they share their sessions.
pub const NO_CLIENT: Client = u64::MAX;

thread_local! {
    static CLIENT: std::cell::Cell<Client> = const { std::cell::Cell::new(NO_CLIENT) };
}

/// While it lives, rustls's calls on this thread take and store the sessions of one client,
/// as a real client keeps its own tickets: a connection resumes only with a ticket that a
/// connection of its own client received (a thousand clients reconnecting lose a thousand
/// tickets when the server forgets its key, not the few a shared store would hold). Made
/// around the synchronous calls that may reach the store (a connection's start, the
/// processing of received records), never held across an await.
#[must_use]
pub struct AsClient {
    before: Client,
    /// Not `Send`: it stands for this thread's state.
    _thread: std::marker::PhantomData<*const ()>,
}

impl AsClient {
    pub fn enter(client: Client) -> AsClient {
        AsClient { before: CLIENT.with(|c| c.replace(client)), _thread: std::marker::PhantomData }
    }

    /// The client rustls works for now on this thread.
    pub fn current() -> Client {
        CLIENT.with(std::cell::Cell::get)
    }
}

impl Drop for AsClient {
    fn drop(&mut self) {
        CLIENT.with(|c| c.set(self.before));
    }
}

/// The session tickets of every client of one generator thread, each client's apart (see
/// [`AsClient`]); the key-exchange group hint is the server's, shared.
#[derive(Debug)]
struct TicketStore {
    /// TLS 1.3 tickets kept per client and server, the newest.
    capacity: usize,
    inner: Mutex<Tickets>,
}

#[derive(Debug, Default)]
struct Tickets {
    kx: HashMap<ServerName<'static>, rustls::NamedGroup>,
    tls12: HashMap<ServerName<'static>, HashMap<Client, Tls12ClientSessionValue>>,
    tls13: HashMap<ServerName<'static>, HashMap<Client, VecDeque<Tls13ClientSessionValue>>>,
}

impl TicketStore {
    fn new(capacity: usize) -> Self {
        TicketStore { capacity, inner: Mutex::new(Tickets::default()) }
    }
}

impl ClientSessionStore for TicketStore {
    fn set_kx_hint(&self, name: ServerName<'static>, group: rustls::NamedGroup) {
        if let Ok(mut t) = self.inner.lock() {
            t.kx.insert(name, group);
        }
    }

    fn kx_hint(&self, name: &ServerName<'_>) -> Option<rustls::NamedGroup> {
        self.inner.lock().ok()?.kx.get(&name.to_owned()).copied()
    }

    fn set_tls12_session(&self, name: ServerName<'static>, value: Tls12ClientSessionValue) {
        if let Ok(mut t) = self.inner.lock() {
            t.tls12.entry(name).or_default().insert(AsClient::current(), value);
        }
    }

    fn tls12_session(&self, name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.inner.lock().ok()?.tls12.get(&name.to_owned())?.get(&AsClient::current()).cloned()
    }

    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        if let Ok(mut t) = self.inner.lock() {
            if let Some(clients) = t.tls12.get_mut(name) {
                clients.remove(&AsClient::current());
            }
        }
    }

    fn insert_tls13_ticket(&self, name: ServerName<'static>, value: Tls13ClientSessionValue) {
        if let Ok(mut t) = self.inner.lock() {
            let q = t.tls13.entry(name).or_default().entry(AsClient::current()).or_default();
            if q.len() >= self.capacity {
                q.pop_front();
            }
            q.push_back(value);
        }
    }

    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        // Newest first: the freshest ticket is the most likely to be accepted.
        self.inner.lock().ok()?.tls13.get_mut(name)?.get_mut(&AsClient::current())?.pop_back()
    }
}

/// Accepts any certificate but checks handshake signatures like a real client.
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// What an established connection's handshake was: whether it resumed a session, and the TLS
/// version ("1.3", "1.2"), for either side.
pub fn handshake_facts(conn: &rustls::CommonState) -> (bool, Option<&'static str>) {
    let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    let version = conn.protocol_version().map(|v| match v {
        rustls::ProtocolVersion::TLSv1_3 => "1.3",
        rustls::ProtocolVersion::TLSv1_2 => "1.2",
        _ => "other",
    });
    (resumed, version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_sessions_are_taken_once_and_the_oldest_dropped() {
        use rustls::server::StoresServerSessions as _;
        let s = ServerSessions::new(3);
        for k in 0u8..3 {
            assert!(s.put(vec![k], vec![k, k]));
        }
        assert_eq!(s.take(&[1]), Some(vec![1, 1]));
        assert_eq!(s.take(&[1]), None, "a session is taken once");
        assert!(s.put(vec![3], vec![3]) && s.put(vec![4], vec![4]));
        // 0 went first (1 was taken already): 2, 3 and 4 are left.
        assert_eq!((s.get(&[0]), s.get(&[2]), s.get(&[4])), (None, Some(vec![2, 2]), Some(vec![4])));
        for k in 5u8..50 {
            s.put(vec![k], vec![k]);
            s.take(&[k]);
        }
        let inner = s.inner.lock().unwrap();
        assert!(inner.0.len() <= 3 && inner.1.len() <= 7, "{} {}", inner.0.len(), inner.1.len());
    }

    #[test]
    fn generated_ca_verifies_its_server() {
        let g = generate(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        let dir = std::env::temp_dir().join(format!("dnscost-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, &g.ca_pem).unwrap();
        let opts = ClientOptions {
            version: Version::Tls13,
            group: Group::X25519,
            trust: Trust::CaFile(ca.clone()),
            keylog: Some(dir.join("keys.log")),
            alpn: vec![b"dot".to_vec()],
        };
        let client = client_config(&opts, true, 16).unwrap();
        let server = server_config(g.chain, g.key, vec![b"dot".to_vec()], None).unwrap();
        let (c, s) = converse(&client, &server);
        assert!(!c.is_handshaking() && !s.is_handshaking());
        assert_eq!(c.negotiated_key_exchange_group().unwrap().name(), rustls::NamedGroup::X25519);
        assert_eq!(c.alpn_protocol(), Some(&b"dot"[..]));
        let log = std::fs::read_to_string(dir.join("keys.log")).unwrap();
        assert!(log.contains("CLIENT_TRAFFIC_SECRET_0"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A client connection and a server one, run against each other in memory until both are
    /// done with the handshake and the server's tickets reached the client.
    fn converse(
        client: &Arc<ClientConfig>,
        server: &Arc<ServerConfig>,
    ) -> (rustls::ClientConnection, rustls::ServerConnection) {
        let name = server_name(None, "127.0.0.1".parse().unwrap()).unwrap();
        let mut c = rustls::ClientConnection::new(client.clone(), name).unwrap();
        let mut s = rustls::ServerConnection::new(server.clone()).unwrap();
        let mut buf = Vec::new();
        for _ in 0..10 {
            buf.clear();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            s.read_tls(&mut &buf[..]).unwrap();
            s.process_new_packets().unwrap();
            buf.clear();
            while s.wants_write() {
                s.write_tls(&mut buf).unwrap();
            }
            c.read_tls(&mut &buf[..]).unwrap();
            c.process_new_packets().unwrap();
        }
        (c, s)
    }

    #[test]
    fn a_client_resumes_with_its_own_tickets_only() {
        let g = generate(&["127.0.0.1".into()]).unwrap();
        let opts = ClientOptions {
            version: Version::Tls13,
            group: Group::X25519,
            trust: Trust::Insecure,
            keylog: None,
            alpn: vec![],
        };
        let client = client_config(&opts, true, 2).unwrap();
        let server = server_config(g.chain, g.key, vec![], None).unwrap();
        // Whether the server resumed the session, as the server saw it.
        let resumed = |who: Client| {
            let _as = AsClient::enter(who);
            let (_, s) = converse(&client, &server);
            s.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
        };
        assert!(!resumed(7), "nobody has a ticket yet");
        assert!(!resumed(8), "client 7's tickets are not client 8's");
        assert!(resumed(7) && resumed(8));
        assert!(!resumed(NO_CLIENT), "the clients' tickets are not those of calls made for none");
        assert_eq!(AsClient::current(), NO_CLIENT, "the client is the thread's again once the guard went");
        // The server sends two tickets after each handshake, the store keeps two per client:
        // client 9, once resumed ten times, still has tickets (the newest).
        assert!(!resumed(9));
        assert!((0..10).all(|_| resumed(9)));
    }

    #[test]
    fn missing_ca_file_is_a_clear_error() {
        let opts = ClientOptions {
            version: Version::Tls13,
            group: Group::X25519,
            trust: Trust::CaFile("/nonexistent/ca.pem".into()),
            keylog: None,
            alpn: vec![],
        };
        let e = client_config(&opts, false, 0).unwrap_err().to_string();
        assert!(e.starts_with("/nonexistent/ca.pem:"), "{e}");
    }
}
