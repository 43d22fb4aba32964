//! Carriers: what a session's bytes travel on. A carrier connects (TCP, then TLS with
//! resumption for the configured share), is metered by the kernel (TCP_INFO), and closes the
//! way the client is configured to (graceful, FIN, RST). tcp sessions ride `Tcp`; dot and doh
//! ride `Tls`. The driver sees one byte stream either way.

use super::ctx::Ctx;
use dnscost_load::CloseMode;
use dnscost_stats::{Counters, ErrorKind, Handshake};
use dnscost_transport::socket::{self, TcpCounts};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

pub type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

/// An established connection.
pub enum Carrier {
    Tcp(TcpStream),
    Tls(Box<TlsStream>),
}

/// A connection as set up: its carrier, the TLS handshake it took and the TLS version.
pub struct Established {
    pub carrier: Carrier,
    pub handshake: Handshake,
    pub tls_version: Option<&'static str>,
}

fn classify(e: &std::io::Error) -> ErrorKind {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => ErrorKind::Refused,
        K::TimedOut => ErrorKind::ConnectTimeout,
        K::InvalidData => ErrorKind::Tls,
        _ if e.get_ref().is_some_and(|i| i.is::<rustls::Error>()) => ErrorKind::Tls,
        _ => ErrorKind::Connect,
    }
}

impl Carrier {
    /// Connects to the plan's target from `source`; over TLS when the plan has connectors,
    /// offering a stored session when `resume`.
    pub async fn connect(ctx: &Ctx, source: Option<IpAddr>, resume: bool) -> Result<Established, (ErrorKind, String)> {
        let plan = &ctx.plan;
        let tcp = socket::tcp_connect(plan.target, source).await.map_err(|e| (classify(&e), e.to_string()))?;
        let Some(connectors) = &ctx.connectors else {
            return Ok(Established { carrier: Carrier::Tcp(tcp), handshake: Handshake::None, tls_version: None });
        };
        let connector = if resume { &connectors.resume } else { &connectors.fresh };
        let name = plan.server_name.clone().expect("TLS plans have a server name");
        let tls = connector.connect(name, tcp).await.map_err(|e| (classify(&e), e.to_string()))?;
        let (resumed, tls_version) = dnscost_transport::tls::handshake_facts(tls.get_ref().1);
        let handshake = if resumed { Handshake::Resumed } else { Handshake::Full };
        Ok(Established { carrier: Carrier::Tls(Box::new(tls)), handshake, tls_version })
    }

    fn tcp(&self) -> &TcpStream {
        match self {
            Carrier::Tcp(s) => s,
            Carrier::Tls(s) => s.get_ref().0,
        }
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.tcp().local_addr().ok()
    }

    /// Ends the connection the configured way; `goodbye` is what the session says first when
    /// the close is graceful (then close_notify over TLS, and FIN; bounded to a second).
    pub async fn close(mut self, mode: CloseMode, goodbye: &[u8]) {
        match mode {
            CloseMode::Graceful => {
                let close = async {
                    self.write_all(goodbye).await?;
                    self.flush().await?;
                    self.shutdown().await
                };
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), close).await;
            }
            CloseMode::Fin => {
                let _ = socket::shutdown_write(self.tcp());
            }
            CloseMode::Rst => {
                let _ = socket::set_reset_on_close(self.tcp());
            }
        }
    }
}

impl AsFd for Carrier {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.tcp().as_fd()
    }
}

impl AsRawFd for Carrier {
    fn as_raw_fd(&self) -> RawFd {
        self.tcp().as_raw_fd()
    }
}

impl AsyncRead for Carrier {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Carrier::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Carrier::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Carrier {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Carrier::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Carrier::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Carrier::Tcp(s) => Pin::new(s).poll_flush(cx),
            Carrier::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Carrier::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Carrier::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}

/// Kernel byte and segment counts of one connection, added to the thread's counters at most
/// once a second and at close.
pub struct TcpMeter {
    last: TcpCounts,
    next_ns: u64,
    pub total: TcpCounts,
}

impl TcpMeter {
    /// A meter whose first reading is a second after `now` (a shorter connection is read at
    /// its close only).
    pub fn new(now: u64) -> Self {
        TcpMeter { last: TcpCounts::default(), next_ns: now + 1_000_000_000, total: TcpCounts::default() }
    }

    #[inline]
    pub fn tick(&mut self, now: u64, carrier: &Carrier, c: &mut Counters) {
        if now >= self.next_ns {
            self.next_ns = now + 1_000_000_000;
            self.sample(carrier, c);
        }
    }

    /// Reads TCP_INFO now.
    pub fn sample(&mut self, carrier: &Carrier, c: &mut Counters) {
        if let Some(now) = socket::tcp_counts(carrier) {
            let d = now.since(&self.last);
            self.last = now;
            self.total = now;
            c.bytes_sent += d.bytes_sent;
            c.bytes_received += d.bytes_received;
            c.packets_sent += d.segments_sent;
            c.packets_received += d.segments_received;
        }
    }
}
