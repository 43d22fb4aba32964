//! A TLS client connection over TCP on rustls's unbuffered API, for the load generator. It
//! holds TLS octets only while it has some to hold (a record partly received, application data
//! not yet read, records not yet written), so that an idle connection holds its TLS state and
//! no buffer: tokio-rustls keeps rustls's 4 KiB read buffer for a connection's whole life, which
//! alone is twice what a generator can spend per idle connection to hold a million of them.
//!
//! It reads and writes as tokio-rustls's client stream does: a read ends (`Ok` with nothing)
//! at the server's close_notify and fails with `UnexpectedEof` at a TCP end without one;
//! rustls's errors are `InvalidData` errors carrying the `rustls::Error`, after the alert
//! rustls queued for them went out if the socket took it at once.

use crate::tls::{AsClient, Client};
use rustls::client::UnbufferedClientConnection;
use rustls::pki_types::ServerName;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};
use rustls::ClientConfig;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// How much room a read from the socket asks for: one whole TLS record.
const READ: usize = 16 * 1024 + 5 + 256;
/// Encrypted octets waiting for the socket beyond which writes wait for them to go.
const WRITE_BACKLOG: usize = 64 * 1024;

/// One TLS client connection (see the module documentation).
pub struct TlsClient {
    tcp: TcpStream,
    conn: UnbufferedClientConnection,
    /// Whose tickets a received NewSessionTicket goes to.
    client: Client,
    /// TLS octets received and not yet processed (a record partly received).
    incoming: Vec<u8>,
    /// Application data decrypted and not yet read, from `plain_at` on.
    plain: Vec<u8>,
    plain_at: usize,
    /// TLS octets to write, from `written` on.
    outgoing: Vec<u8>,
    written: usize,
    /// The server's close_notify came: reads end.
    peer_closed: bool,
    /// Our close_notify is queued.
    closing: bool,
    /// The TCP stream ended.
    eof: bool,
    /// The connection failed; every later call says so again.
    failed: Option<rustls::Error>,
}

/// Where processing the received octets stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The handshake is done and nothing more can be read without more octets.
    Traffic,
    /// The handshake waits for more octets.
    Blocked,
    /// The server's close_notify came.
    Closed,
}

fn invalid(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl TlsClient {
    /// Runs the handshake for `name` with `config` on `tcp`, for `client` (whose tickets it
    /// offers and keeps: [`AsClient`]); the connection is returned once our Finished went out.
    pub async fn connect(
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
        tcp: TcpStream,
        client: Client,
    ) -> io::Result<Self> {
        let conn = {
            let _as = AsClient::enter(client);
            UnbufferedClientConnection::new(config, name).map_err(invalid)?
        };
        let mut tls = TlsClient {
            tcp,
            conn,
            client,
            incoming: Vec::new(),
            plain: Vec::new(),
            plain_at: 0,
            outgoing: Vec::new(),
            written: 0,
            peer_closed: false,
            closing: false,
            eof: false,
            failed: None,
        };
        loop {
            let stop = tls.process(None)?;
            std::future::poll_fn(|cx| tls.poll_write_out(cx)).await?;
            match stop {
                Stop::Traffic => return Ok(tls),
                Stop::Closed => {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the server closed during the handshake"))
                }
                Stop::Blocked => {
                    if std::future::poll_fn(|cx| tls.poll_fill(cx)).await? == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the server closed the connection during the handshake",
                        ));
                    }
                }
            }
        }
    }

    /// The TCP stream under the TLS.
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    pub fn tcp_mut(&mut self) -> &mut TcpStream {
        &mut self.tcp
    }

    /// The connection's TLS state (handshake kind, version, ...).
    pub fn common(&self) -> &rustls::CommonState {
        &self.conn
    }

    /// The octets of buffers the connection holds now (none when idle).
    pub fn holds(&self) -> usize {
        self.incoming.capacity() + self.plain.capacity() + self.outgoing.capacity()
    }

    /// Processes the received octets as far as they go: handshake messages answered (into
    /// `outgoing`), application data decrypted (into `plain`), alerts noted. With `write`,
    /// also encrypts it into `outgoing` once the connection may send: data, or with `None`
    /// a close_notify.
    fn process(&mut self, mut write: Option<Option<&[u8]>>) -> io::Result<Stop> {
        if let Some(e) = &self.failed {
            return Err(invalid(e.clone()));
        }
        let _as = AsClient::enter(self.client);
        loop {
            let UnbufferedStatus { discard, state } = self.conn.process_tls_records(&mut self.incoming);
            let stop = match state {
                Err(e) => {
                    self.incoming.drain(..discard);
                    return Err(self.fail(e));
                }
                Ok(ConnectionState::ReadTraffic(mut r)) => {
                    while let Some(record) = r.next_record() {
                        match record {
                            Ok(record) => self.plain.extend_from_slice(record.payload),
                            Err(e) => {
                                drop(r);
                                self.incoming.drain(..discard);
                                return Err(self.fail(e));
                            }
                        }
                    }
                    None
                }
                Ok(ConnectionState::EncodeTlsData(mut e)) => {
                    encode(&mut self.outgoing, |out| e.encode(out));
                    None
                }
                Ok(ConnectionState::TransmitTlsData(t)) => {
                    // Sent with the rest of `outgoing`, before the next read or after the next write.
                    t.done();
                    None
                }
                Ok(ConnectionState::BlockedHandshake) => Some(Stop::Blocked),
                Ok(ConnectionState::WriteTraffic(mut w)) => {
                    match write.take() {
                        Some(Some(data)) => encrypt(&mut self.outgoing, data.len(), |out| w.encrypt(data, out)),
                        Some(None) => encrypt(&mut self.outgoing, 0, |out| w.queue_close_notify(out)),
                        None => {}
                    }
                    Some(Stop::Traffic)
                }
                // After the server's close_notify we may still write: the next state allows it.
                Ok(ConnectionState::PeerClosed) if write.is_some() => {
                    self.peer_closed = true;
                    None
                }
                Ok(ConnectionState::PeerClosed | ConnectionState::Closed) => {
                    self.peer_closed = true;
                    Some(Stop::Closed)
                }
                Ok(_) => Some(Stop::Traffic),
            };
            self.incoming.drain(..discard);
            if let Some(stop) = stop {
                self.idle();
                if write.is_some() {
                    return Err(io::Error::new(io::ErrorKind::BrokenPipe, "the TLS connection cannot send"));
                }
                return Ok(stop);
            }
        }
    }

    /// The connection failed with `e`: the alert rustls queued for it is written if the
    /// socket takes it at once.
    fn fail(&mut self, e: rustls::Error) -> io::Error {
        self.failed = Some(e.clone());
        let _as = AsClient::enter(self.client);
        loop {
            let UnbufferedStatus { discard, state } = self.conn.process_tls_records(&mut self.incoming);
            match state {
                Ok(ConnectionState::EncodeTlsData(mut enc)) => encode(&mut self.outgoing, |out| enc.encode(out)),
                Ok(ConnectionState::TransmitTlsData(t)) => t.done(),
                _ => {
                    self.incoming.drain(..discard);
                    break;
                }
            }
            self.incoming.drain(..discard);
        }
        if let Ok(n) = self.tcp.try_write(&self.outgoing[self.written..]) {
            self.written += n;
        }
        invalid(e)
    }

    /// Reads what the socket has into `incoming`; Ready(0) at the end of the stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.tcp.poll_read_ready(cx))?;
            self.incoming.reserve(READ);
            match self.tcp.try_read_buf(&mut self.incoming) {
                Ok(0) => {
                    self.eof = true;
                    return Poll::Ready(Ok(0));
                }
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Writes `outgoing` to the socket; the buffer is let go once all of it went.
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.outgoing.len() {
            match ready!(Pin::new(&mut self.tcp).poll_write(cx, &self.outgoing[self.written..])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => self.written += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        self.outgoing = Vec::new();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// Hands decrypted data to `buf` as far as it has room; the rest stays for the next read.
    fn take_plain(&mut self, buf: &mut ReadBuf<'_>) {
        let n = buf.remaining().min(self.plain.len() - self.plain_at);
        buf.put_slice(&self.plain[self.plain_at..self.plain_at + n]);
        self.plain_at += n;
        if self.plain_at == self.plain.len() {
            self.plain = Vec::new();
            self.plain_at = 0;
        }
    }

    /// Lets go of the read buffer if it holds nothing.
    fn idle(&mut self) {
        if self.incoming.is_empty() {
            self.incoming = Vec::new();
        }
    }
}

/// Grows `out` from `room` spare octets until `f` (an encoding into them) fits, and keeps what
/// it wrote; `required` reads the room an error asks for (none: nothing is written).
fn put<E>(
    out: &mut Vec<u8>,
    mut room: usize,
    mut f: impl FnMut(&mut [u8]) -> Result<usize, E>,
    required: impl Fn(&E) -> Option<usize>,
) {
    let start = out.len();
    loop {
        out.resize(start + room, 0);
        match f(&mut out[start..]) {
            Ok(n) => return out.truncate(start + n),
            Err(e) => match required(&e) {
                Some(r) if r > room => room = r,
                _ => return out.truncate(start),
            },
        }
    }
}

/// Appends a handshake or alert record.
fn encode(out: &mut Vec<u8>, f: impl FnMut(&mut [u8]) -> Result<usize, EncodeError>) {
    put(out, 512, f, |e| match e {
        EncodeError::InsufficientSize(s) => Some(s.required_size),
        _ => None,
    });
}

/// Appends `len` octets of application data (or an alert) encrypted.
fn encrypt(out: &mut Vec<u8>, len: usize, f: impl FnMut(&mut [u8]) -> Result<usize, EncryptError>) {
    // A record's header, content type and tag (TLS 1.3: 22 octets; 1.2: less), per record.
    put(out, len + 64 * (len / (16 * 1024) + 1), f, |e| match e {
        EncryptError::InsufficientSize(s) => Some(s.required_size),
        _ => None,
    });
}

impl AsyncRead for TlsClient {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.plain_at < this.plain.len() {
                this.take_plain(buf);
                // What processing queued (a key update's answer) goes with the next write, or now.
                if this.written < this.outgoing.len() {
                    let _ = this.poll_write_out(cx);
                }
                return Poll::Ready(Ok(()));
            }
            if this.peer_closed {
                return Poll::Ready(Ok(()));
            }
            let stop = this.process(None)?;
            if this.written < this.outgoing.len() {
                if let Poll::Ready(Err(e)) = this.poll_write_out(cx) {
                    return Poll::Ready(Err(e));
                }
            }
            if this.plain_at < this.plain.len() || stop == Stop::Closed {
                continue;
            }
            if this.eof {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection without sending close_notify",
                )));
            }
            match this.poll_fill(cx) {
                Poll::Ready(Ok(_)) => continue,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    this.idle();
                    return Poll::Pending;
                }
            }
        }
    }
}

impl AsyncWrite for TlsClient {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.outgoing.len() - this.written >= WRITE_BACKLOG {
            ready!(this.poll_write_out(cx))?;
        }
        this.process(Some(Some(data)))?;
        if let Poll::Ready(Err(e)) = this.poll_write_out(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_write_out(cx)
    }

    /// Sends close_notify, then ends our side of the TCP stream.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closing {
            this.closing = true;
            this.process(Some(None))?;
        }
        ready!(this.poll_write_out(cx))?;
        Pin::new(&mut this.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::NO_CLIENT;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A TLS server on loopback (rustls's buffered server, driven by hand over a blocking
    /// socket in a thread) running `serve` on each accepted connection; its CA's config for
    /// the client.
    fn server(
        serve: impl Fn(&mut rustls::StreamOwned<rustls::ServerConnection, std::net::TcpStream>) + Send + Sync + 'static,
        connections: usize,
    ) -> (std::net::SocketAddr, Arc<ClientConfig>) {
        let g = crate::tls::generate(&["localhost".into()]).expect("certificate");
        let server = crate::tls::server_config(g.chain, g.key, vec![], None).expect("server config");
        let client = trusting(&g.ca_pem);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for _ in 0..connections {
                let (sock, _) = listener.accept().unwrap();
                let conn = rustls::ServerConnection::new(server.clone()).unwrap();
                let mut s = rustls::StreamOwned::new(conn, sock);
                serve(&mut s);
            }
        });
        (addr, client)
    }

    /// A client configuration trusting the CA `ca_pem` (with rustls's in-memory session store).
    fn trusting(ca_pem: &str) -> Arc<ClientConfig> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(rustls::pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap()).unwrap();
        Arc::new(
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    async fn dial(addr: std::net::SocketAddr, config: Arc<ClientConfig>) -> TlsClient {
        let tcp = TcpStream::connect(addr).await.unwrap();
        TlsClient::connect(config, ServerName::try_from("localhost").unwrap(), tcp, NO_CLIENT).await.unwrap()
    }

    /// Echoes what it reads until close_notify, and answers it with its own.
    fn echo(s: &mut rustls::StreamOwned<rustls::ServerConnection, std::net::TcpStream>) {
        use std::io::{Read, Write};
        let mut buf = [0u8; 70_000];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => s.write_all(&buf[..n]).unwrap(),
            }
        }
        s.conn.send_close_notify();
        let _ = s.flush();
    }

    #[test]
    fn data_goes_both_ways_whole_and_idle_holds_no_buffer() {
        let (addr, config) = server(echo, 1);
        rt().block_on(async move {
            let mut tls = dial(addr, config).await;
            assert_eq!(tls.common().protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
            for len in [1usize, 100, 16 * 1024, 16 * 1024 + 1, 100_000] {
                let sent: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
                tls.write_all(&sent).await.unwrap();
                tls.flush().await.unwrap();
                let mut got = vec![0u8; len];
                tls.read_exact(&mut got).await.unwrap();
                assert!(got == sent, "{len} octets echoed");
                assert_eq!(tls.holds(), 0, "idle after {len} octets: no buffer held");
            }
            tls.shutdown().await.unwrap();
            let mut rest = Vec::new();
            assert_eq!(tls.read_to_end(&mut rest).await.unwrap(), 0, "the server's close_notify ends the stream");
        });
    }

    #[test]
    fn a_tcp_end_without_close_notify_is_an_unexpected_eof() {
        let (addr, config) = server(
            |s| {
                use std::io::{Read, Write};
                let mut b = [0u8; 16];
                let n = s.read(&mut b).unwrap();
                s.write_all(&b[..n]).unwrap();
                s.flush().unwrap();
                s.sock.shutdown(std::net::Shutdown::Both).unwrap();
            },
            1,
        );
        rt().block_on(async move {
            let mut tls = dial(addr, config).await;
            tls.write_all(b"ping").await.unwrap();
            let mut got = [0u8; 4];
            tls.read_exact(&mut got).await.unwrap();
            let e = tls.read(&mut got).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        });
    }

    #[test]
    fn a_bad_certificate_fails_as_invalid_data_with_the_rustls_error() {
        let (addr, _) = server(
            |s| {
                use std::io::Read;
                let _ = s.read(&mut [0u8; 1]);
            },
            1,
        );
        let config = trusting(&crate::tls::generate(&["localhost".into()]).unwrap().ca_pem);
        rt().block_on(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let e = TlsClient::connect(config, ServerName::try_from("localhost").unwrap(), tcp, NO_CLIENT)
                .await
                .err()
                .expect("the certificate is not trusted");
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            assert!(e.get_ref().is_some_and(|i| i.is::<rustls::Error>()), "{e}");
        });
    }

    #[test]
    fn a_second_connection_resumes_the_first_ones_session() {
        let (addr, config) = server(echo, 2);
        rt().block_on(async move {
            for resumed in [false, true] {
                let mut tls = dial(addr, config.clone()).await;
                // The server's tickets come after the handshake: a round trip reads them.
                tls.write_all(b"x").await.unwrap();
                let mut b = [0u8; 1];
                tls.read_exact(&mut b).await.unwrap();
                let kind = tls.common().handshake_kind();
                assert_eq!(kind == Some(rustls::HandshakeKind::Resumed), resumed, "{kind:?}");
                tls.shutdown().await.unwrap();
                let _ = tls.read_to_end(&mut Vec::new()).await;
            }
        });
    }
}
